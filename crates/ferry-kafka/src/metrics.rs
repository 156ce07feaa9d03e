//! [`KafkaMetrics`]: what a job's Kafka connectors did, per topic and per
//! partition, for the REST API, the web page and Prometheus. One value per
//! job, shared by its sinks and sources; counters start at zero with the
//! process (like the engine's).
//!
//! - per topic: records and bytes produced (Kudu → Kafka) or consumed
//!   (Kafka → Kudu), transactions committed and aborted (exactly-once),
//!   records skipped or sent to the dead-letter topic (error policy);
//! - per partition of a source topic: the partition's end offset when the
//!   last window opened, the next offset the job reads, and the lag (the
//!   records between them).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The counters of one topic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicCounters {
    /// Records handed to the brokers (acknowledged, except with delivery
    /// `none`).
    pub records_produced: u64,
    /// Key and value bytes of those records.
    pub bytes_produced: u64,
    /// Records read from the topic.
    pub records_consumed: u64,
    /// Key and value bytes of those records.
    pub bytes_consumed: u64,
    /// Transactions committed (exactly-once: one per checkpoint and
    /// savepoint).
    pub transactions_committed: u64,
    /// Transactions this process abandoned after a failure and aborted.
    pub transactions_aborted: u64,
    /// Records set aside by `job.sourceErrorPolicy=skip`.
    pub records_skipped: u64,
    /// Records sent to the dead-letter topic.
    pub records_dead_lettered: u64,
    /// Watermark records written (`job.sinkWatermarks`; not in
    /// `records_produced`).
    #[serde(default)]
    pub watermarks_written: u64,
}

/// One topic's counters, named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicSnapshot {
    /// The topic.
    pub topic: String,
    /// Its counters.
    #[serde(flatten)]
    pub counters: TopicCounters,
}

/// Where the job is in one partition of a source topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionLag {
    /// The topic.
    pub topic: String,
    /// The partition of the topic.
    pub partition: i32,
    /// The partition's end offset (high watermark) when the job last
    /// looked (each window).
    pub end_offset: i64,
    /// The next offset the job reads.
    pub position: i64,
    /// Records between the two (0 when caught up).
    pub lag: u64,
}

/// Every topic and partition at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaSnapshot {
    /// Every topic the job reads or writes, with its counters.
    pub topics: Vec<TopicSnapshot>,
    /// Every partition the job reads (a source's), with its lag.
    pub partitions: Vec<PartitionLag>,
}

#[derive(Debug, Default)]
struct Positions {
    end: i64,
    position: i64,
}

#[derive(Debug, Default)]
struct Inner {
    topics: BTreeMap<String, TopicCounters>,
    partitions: BTreeMap<(String, i32), Positions>,
}

/// A job's Kafka counters (updated per batch, not per record).
#[derive(Debug, Default)]
pub struct KafkaMetrics {
    inner: Mutex<Inner>,
}

impl KafkaMetrics {
    fn topic(&self, topic: &str, f: impl FnOnce(&mut TopicCounters)) {
        if let Ok(mut inner) = self.inner.lock() {
            match inner.topics.get_mut(topic) {
                Some(c) => f(c),
                None => f(inner.topics.entry(topic.to_string()).or_default()),
            }
        }
    }

    fn partition(&self, topic: &str, partition: i32, f: impl FnOnce(&mut Positions)) {
        if let Ok(mut inner) = self.inner.lock() {
            f(inner
                .partitions
                .entry((topic.to_string(), partition))
                .or_default());
        }
    }

    /// Makes `topic` appear (at zero) before anything happened on it.
    pub fn register(&self, topic: &str) {
        self.topic(topic, |_| {});
    }

    pub(crate) fn produced(&self, topic: &str, records: u64, bytes: u64) {
        self.topic(topic, |c| {
            c.records_produced += records;
            c.bytes_produced += bytes;
        });
    }

    pub(crate) fn consumed(&self, topic: &str, records: u64, bytes: u64) {
        self.topic(topic, |c| {
            c.records_consumed += records;
            c.bytes_consumed += bytes;
        });
    }

    pub(crate) fn transaction_committed(&self, topic: &str) {
        self.topic(topic, |c| c.transactions_committed += 1);
    }

    pub(crate) fn transaction_aborted(&self, topic: &str) {
        self.topic(topic, |c| c.transactions_aborted += 1);
    }

    pub(crate) fn watermarks(&self, topic: &str, records: u64) {
        self.topic(topic, |c| c.watermarks_written += records);
    }

    pub(crate) fn skipped(&self, topic: &str) {
        self.topic(topic, |c| c.records_skipped += 1);
    }

    pub(crate) fn dead_lettered(&self, topic: &str) {
        self.topic(topic, |c| c.records_dead_lettered += 1);
    }

    /// A window opened: the partition ends at `end` and the job reads
    /// from `next`.
    pub(crate) fn window_planned(&self, topic: &str, partition: i32, next: i64, end: i64) {
        self.partition(topic, partition, |p| {
            p.end = end;
            p.position = next;
        });
    }

    /// The job read up to (not including) `next`.
    pub(crate) fn read_to(&self, topic: &str, partition: i32, next: i64) {
        self.partition(topic, partition, |p| p.position = p.position.max(next));
    }

    /// Every value now.
    pub fn snapshot(&self) -> KafkaSnapshot {
        let Ok(inner) = self.inner.lock() else {
            return KafkaSnapshot::default();
        };
        KafkaSnapshot {
            topics: inner
                .topics
                .iter()
                .map(|(topic, counters)| TopicSnapshot {
                    topic: topic.clone(),
                    counters: *counters,
                })
                .collect(),
            partitions: inner
                .partitions
                .iter()
                .map(|((topic, partition), p)| PartitionLag {
                    topic: topic.clone(),
                    partition: *partition,
                    end_offset: p.end,
                    position: p.position,
                    lag: u64::try_from(p.end.saturating_sub(p.position)).unwrap_or(0),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_topic_and_lag_per_partition() {
        let m = KafkaMetrics::default();
        m.register("quiet");
        m.produced("t", 3, 30);
        m.produced("t", 2, 20);
        m.transaction_committed("t");
        m.consumed("c", 4, 40);
        m.skipped("c");
        m.dead_lettered("c");
        m.window_planned("c", 0, 10, 25);
        m.read_to("c", 0, 20);
        // A reader of an older window reporting late does not move back.
        m.read_to("c", 0, 12);
        m.window_planned("c", 1, 5, 5);
        let s = m.snapshot();
        let topic = |name: &str| {
            s.topics
                .iter()
                .find(|t| t.topic == name)
                .map(|t| t.counters)
                .unwrap_or_default()
        };
        assert_eq!(s.topics.len(), 3);
        assert_eq!(topic("quiet"), TopicCounters::default());
        assert_eq!(topic("t").records_produced, 5);
        assert_eq!(topic("t").bytes_produced, 50);
        assert_eq!(topic("t").transactions_committed, 1);
        assert_eq!(topic("c").records_consumed, 4);
        assert_eq!(topic("c").records_skipped, 1);
        assert_eq!(topic("c").records_dead_lettered, 1);
        assert_eq!(s.partitions[0].position, 20);
        assert_eq!(s.partitions[0].lag, 5);
        assert_eq!(s.partitions[1].lag, 0);
        let json = serde_json::to_value(&s).unwrap_or_default();
        // Topics in name order: c, quiet, t.
        assert_eq!(json["topics"][0]["recordsConsumed"], 4);
        assert_eq!(json["topics"][2]["recordsProduced"], 5);
        assert_eq!(json["partitions"][0]["endOffset"], 25);
    }
}
