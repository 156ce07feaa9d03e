//! [`KafkaSource`]: a changelog topic as a ferry source. A window is, for
//! every partition, the records from where the last window stopped up to
//! the partition's end when the window opened (a split per partition with
//! records, read in parallel); the window's end "time" is the local clock
//! in epoch milliseconds ([`SourceClock::EPOCH_MILLIS`]), which orders
//! windows and is read as is for `lastEndTimestamp` and the lag. Where
//! each partition continues (and where a bounded job stops) is the
//! source's *cursor*, which the engine keeps in checkpoints with the
//! window; within a split the resume key is the offset of the last record
//! written. So a restore reads every record again from exactly where the
//! sink's state ends, and the idempotent writes make the replay of a
//! partial batch harmless.
//!
//! Records are not decoded here: the sink decodes them against its table
//! (and applies `job.sourceErrorPolicy`), so a bad record never stops the
//! reader.

use crate::config::{BoundedMode, KafkaSourceConfig, StartupMode};
use crate::error::{kafka_error, KafkaSinkError};
use crate::metrics::KafkaMetrics;
use ferry_engine::checkpoint::{SplitState, WindowState};
use ferry_engine::connector::{Batch, ReadBatch, Source, SplitReader, WindowPlan};
use ferry_engine::time::now_ms;
use ferry_engine::{EngineError, SourceClock, SourceTime, SplitId};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Kafka calls made while planning.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Records per batch handed to the sink.
const BATCH_RECORDS: usize = 2_000;
/// Bytes per batch handed to the sink (keys and values).
const BATCH_BYTES: usize = 4 << 20;

/// One record as read: where it is, and its bytes.
#[derive(Debug, Clone)]
pub struct RawRecord {
    /// The partition it was read from.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its key, if it has one.
    pub key: Option<Vec<u8>>,
    /// Its value; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// Records of one partition, in offset order.
#[derive(Debug, Default)]
pub struct RecordBatch {
    /// The topic read.
    pub topic: String,
    /// The records, in offset order.
    pub records: Vec<RawRecord>,
    bytes: usize,
}

impl Batch for RecordBatch {
    fn len(&self) -> usize {
        self.records.len()
    }

    fn byte_size(&self) -> usize {
        self.bytes
    }
}

/// Where the next window starts, per partition, and where the source
/// stops (bounded modes), both fixed when first known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    /// Next offset to read, per partition.
    next: BTreeMap<i32, i64>,
    /// Bounded: the offset each partition stops before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stop: Option<BTreeMap<i32, i64>>,
}

impl Cursor {
    /// Bounded, and every partition read up to where it stops.
    fn at_stop(&self) -> bool {
        self.stop.as_ref().is_some_and(|stop| {
            stop.iter()
                .all(|(p, &end)| self.next.get(p).is_some_and(|&n| n >= end))
        })
    }
}

/// A split: one partition's offsets `[start, end)`.
#[derive(Debug, Serialize, Deserialize)]
struct Range {
    topic: String,
    partition: i32,
    start: i64,
    end: i64,
}

/// A changelog topic read window by window.
pub struct KafkaSource {
    config: KafkaSourceConfig,
    /// Settings of the readers (and of the planner's consumer).
    consumer: ClientConfig,
    /// The consumer that looks up partitions and offsets (made on first use).
    planner: Mutex<Option<Arc<BaseConsumer>>>,
    /// The last window end handed out.
    clock: AtomicU64,
    metrics: Arc<KafkaMetrics>,
}

impl KafkaSource {
    /// A source for `config`'s topic in job `job_name`.
    pub fn new(config: &KafkaSourceConfig, job_name: &str) -> Self {
        let mut consumer = ClientConfig::new();
        consumer
            .set("bootstrap.servers", &config.bootstrap_servers)
            .set("client.id", format!("ferry-{job_name}"))
            .set("group.id", config.group_id_for(job_name))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            // Changelogs written transactionally (ferry's exactly-once
            // sink among them): aborted records are never applied.
            .set("isolation.level", "read_committed");
        KafkaSource {
            config: config.clone(),
            consumer,
            planner: Mutex::new(None),
            clock: AtomicU64::new(0),
            metrics: Arc::default(),
        }
    }

    /// Counts what the readers read, and each partition's lag, into
    /// `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<KafkaMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    fn err(&self, what: &str, e: KafkaError) -> EngineError {
        kafka_error(format!("{what} (topic '{}')", self.config.topic), e).into()
    }

    fn planner(&self) -> Result<Arc<BaseConsumer>, EngineError> {
        let mut slot = self
            .planner
            .lock()
            .map_err(|_| self.err("planning", KafkaError::Canceled))?;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let made: BaseConsumer = self
            .consumer
            .create()
            .map_err(|e| self.err("creating a consumer", e))?;
        let made = Arc::new(made);
        *slot = Some(made.clone());
        Ok(made)
    }

    /// The ranges of the next window and the cursor after it (blocking
    /// calls: run off the async workers).
    fn plan_blocking(
        consumer: &BaseConsumer,
        config: &KafkaSourceConfig,
        cursor: Option<Cursor>,
        metrics: &KafkaMetrics,
    ) -> Result<(Vec<Range>, Cursor), KafkaSinkError> {
        let topic = config.topic.as_str();
        let ctx = |what: &str| format!("{what} of topic '{topic}'");
        let metadata = consumer
            .fetch_metadata(Some(topic), CALL_TIMEOUT)
            .map_err(|e| kafka_error(ctx("reading the partitions"), e))?;
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic && t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        if partitions.is_empty() {
            return Err(KafkaSinkError::Topic {
                topic: topic.to_string(),
                reason: "it does not exist (or has no partitions) on the source brokers".into(),
            });
        }
        let mut marks = BTreeMap::new();
        for &p in &partitions {
            let m = consumer
                .fetch_watermarks(topic, p, CALL_TIMEOUT)
                .map_err(|e| kafka_error(ctx("reading the offsets"), e))?;
            marks.insert(p, m);
        }
        let first = cursor.is_none();
        let mut cursor = cursor.unwrap_or_default();
        if first {
            cursor.next = start_offsets(consumer, config, &marks)?;
            cursor.stop = stop_offsets(consumer, config, &marks)?;
        }
        let mut ranges = Vec::new();
        for (&p, &(low, high)) in &marks {
            // A partition added after the job started: all of it is new.
            let mut start = *cursor.next.get(&p).unwrap_or(&low);
            if start < low {
                tracing::warn!(
                    %topic,
                    partition = p,
                    next = start,
                    earliest = low,
                    "records the job had not read yet were deleted by the topic's retention; continuing at the earliest left"
                );
                start = low;
            }
            metrics.window_planned(topic, p, start, high);
            let mut end = high;
            if let Some(stop) = &cursor.stop {
                end = end.min(*stop.get(&p).unwrap_or(&low));
            }
            if end > start {
                ranges.push(Range {
                    topic: topic.to_string(),
                    partition: p,
                    start,
                    end,
                });
            }
            cursor.next.insert(p, start.max(end));
        }
        Ok((ranges, cursor))
    }
}

/// Where each partition starts (`job.sourceStartupMode`).
fn start_offsets(
    consumer: &BaseConsumer,
    config: &KafkaSourceConfig,
    marks: &BTreeMap<i32, (i64, i64)>,
) -> Result<BTreeMap<i32, i64>, KafkaSinkError> {
    let topic = config.topic.as_str();
    let mut next: BTreeMap<i32, i64> = marks.iter().map(|(&p, &(low, _))| (p, low)).collect();
    match config.startup {
        StartupMode::Earliest => {}
        StartupMode::Latest => {
            next = marks.iter().map(|(&p, &(_, high))| (p, high)).collect();
        }
        StartupMode::GroupOffsets => {
            let mut list = TopicPartitionList::new();
            for &p in marks.keys() {
                list.add_partition(topic, p);
            }
            let committed = consumer
                .committed_offsets(list, CALL_TIMEOUT)
                .map_err(|e| kafka_error(format!("reading the group's offsets of '{topic}'"), e))?;
            for e in committed.elements() {
                if let Offset::Offset(o) = e.offset() {
                    next.insert(e.partition(), o);
                }
            }
        }
        StartupMode::Timestamp(ms) => {
            next = offsets_at(consumer, topic, marks, ms)?;
        }
    }
    Ok(next)
}

/// Where each partition stops (`job.sourceBoundedMode`), `None` unbounded.
fn stop_offsets(
    consumer: &BaseConsumer,
    config: &KafkaSourceConfig,
    marks: &BTreeMap<i32, (i64, i64)>,
) -> Result<Option<BTreeMap<i32, i64>>, KafkaSinkError> {
    Ok(match config.bounded {
        BoundedMode::Unbounded => None,
        BoundedMode::Latest => Some(marks.iter().map(|(&p, &(_, high))| (p, high)).collect()),
        BoundedMode::Timestamp(ms) => Some(offsets_at(
            consumer,
            &config.topic,
            marks,
            ms.saturating_add(1),
        )?),
    })
}

/// Per partition, the first offset whose record's timestamp is at or after
/// `ms` (the partition's end where there is none yet).
fn offsets_at(
    consumer: &BaseConsumer,
    topic: &str,
    marks: &BTreeMap<i32, (i64, i64)>,
    ms: u64,
) -> Result<BTreeMap<i32, i64>, KafkaSinkError> {
    let mut list = TopicPartitionList::new();
    for &p in marks.keys() {
        list.add_partition_offset(topic, p, Offset::Offset(ms as i64))
            .map_err(|e| kafka_error(format!("looking up offsets by time in '{topic}'"), e))?;
    }
    let found = consumer
        .offsets_for_times(list, CALL_TIMEOUT)
        .map_err(|e| kafka_error(format!("looking up offsets by time in '{topic}'"), e))?;
    let mut out = BTreeMap::new();
    for e in found.elements() {
        let high = marks.get(&e.partition()).map_or(0, |m| m.1);
        let at = match e.offset() {
            Offset::Offset(o) => o,
            _ => high,
        };
        out.insert(e.partition(), at);
    }
    Ok(out)
}

/// The cursor the engine kept (a state's, or the plan before's); one it
/// cannot read starts the topic as configured.
fn read_cursor(cursor: Option<&serde_json::Value>) -> Option<Cursor> {
    cursor.and_then(|v| match serde_json::from_value::<Cursor>(v.clone()) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(error = %e, "the state's Kafka cursor is not readable; starting as configured");
            None
        }
    })
}

impl Source for KafkaSource {
    type Batch = RecordBatch;
    type Reader = KafkaSplitReader;

    const NAME: &'static str = "KafkaSource";

    const CLOCK: SourceClock = SourceClock::EPOCH_MILLIS;

    async fn now(&self) -> Result<SourceTime, EngineError> {
        let wall = now_ms();
        // Strictly increasing, whatever the wall clock does.
        let prev = self.clock.fetch_max(wall, Ordering::SeqCst);
        if prev >= wall {
            return Ok(SourceTime::from_raw(
                self.clock.fetch_add(1, Ordering::SeqCst) + 1,
            ));
        }
        Ok(SourceTime::from_raw(wall))
    }

    async fn plan(
        &self,
        _window: WindowState,
        cursor: Option<&serde_json::Value>,
    ) -> Result<WindowPlan, EngineError> {
        let consumer = self.planner()?;
        let config = self.config.clone();
        let cursor = read_cursor(cursor);
        let metrics = self.metrics.clone();
        let (ranges, after) = tokio::task::spawn_blocking(move || {
            KafkaSource::plan_blocking(&consumer, &config, cursor, &metrics)
        })
        .await
        .map_err(|_| self.err("planning", KafkaError::Canceled))??;
        let splits = ranges
            .into_iter()
            .map(|r| {
                let descriptor = serde_json::to_vec(&r).map_err(|e| {
                    EngineError::from(KafkaSinkError::Topic {
                        topic: r.topic.clone(),
                        reason: format!("cannot encode a split: {e}"),
                    })
                })?;
                Ok(SplitState {
                    split_id: SplitId::new(format!("{}-{}-{}", r.topic, r.partition, r.start)),
                    descriptor,
                    resume_key: None,
                })
            })
            .collect::<Result<_, EngineError>>()?;
        let cursor = serde_json::to_value(&after).map_err(|e| {
            EngineError::from(KafkaSinkError::Topic {
                topic: self.config.topic.clone(),
                reason: format!("cannot encode the cursor: {e}"),
            })
        })?;
        Ok(WindowPlan {
            splits,
            cursor: Some(cursor),
            ..WindowPlan::default()
        })
    }

    async fn open(&self, split: &SplitState) -> Result<KafkaSplitReader, EngineError> {
        let range: Range = serde_json::from_slice(&split.descriptor).map_err(|e| {
            EngineError::from(KafkaSinkError::Topic {
                topic: self.config.topic.clone(),
                reason: format!("split '{}' is not a Kafka split: {e}", split.split_id),
            })
        })?;
        let resumed = split
            .resume_key
            .as_deref()
            .and_then(|k| <[u8; 8]>::try_from(k).ok());
        let next = match resumed {
            Some(bytes) => i64::from_be_bytes(bytes) + 1,
            None => range.start,
        };
        let consumer: StreamConsumer = self
            .consumer
            .create()
            .map_err(|e| self.err("creating a consumer", e))?;
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&range.topic, range.partition, Offset::Offset(next))
            .map_err(|e| self.err("assigning a partition", e))?;
        consumer
            .assign(&list)
            .map_err(|e| self.err("assigning a partition", e))?;
        Ok(KafkaSplitReader {
            consumer,
            next,
            range,
            metrics: self.metrics.clone(),
        })
    }

    fn exhausted(&self, cursor: Option<&serde_json::Value>) -> bool {
        // Quietly: `plan` read this cursor already (and said so if it could not).
        cursor
            .and_then(|v| serde_json::from_value::<Cursor>(v.clone()).ok())
            .is_some_and(|c| c.at_stop())
    }

    fn window_committed(&self, cursor: Option<&serde_json::Value>) {
        // For monitoring only (ferry resumes from its own state): the
        // group's offsets say how far the job's checkpoints are.
        let Some(cursor) = cursor.and_then(|v| serde_json::from_value::<Cursor>(v.clone()).ok())
        else {
            return;
        };
        let Ok(consumer) = self.planner() else {
            return;
        };
        let mut list = TopicPartitionList::new();
        for (&p, &next) in &cursor.next {
            if list
                .add_partition_offset(&self.config.topic, p, Offset::Offset(next))
                .is_err()
            {
                return;
            }
        }
        if let Err(e) = consumer.commit(&list, CommitMode::Async) {
            tracing::debug!(error = %e, topic = %self.config.topic, "cannot commit offsets to the consumer group");
        }
    }
}

/// Reads one partition's range.
pub struct KafkaSplitReader {
    consumer: StreamConsumer,
    /// The next offset to read.
    next: i64,
    range: Range,
    metrics: Arc<KafkaMetrics>,
}

impl KafkaSplitReader {
    fn err(&self, e: KafkaError) -> EngineError {
        kafka_error(
            format!(
                "reading partition {} of topic '{}'",
                self.range.partition, self.range.topic
            ),
            e,
        )
        .into()
    }

    /// The consumer's position in the partition (past control records and
    /// aborted transactions), if known.
    fn position(&self) -> Option<i64> {
        let list = self.consumer.position().ok()?;
        let e = list.find_partition(&self.range.topic, self.range.partition)?;
        match e.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        }
    }
}

impl SplitReader for KafkaSplitReader {
    type Batch = RecordBatch;

    async fn next(&mut self) -> Result<Option<ReadBatch<RecordBatch>>, EngineError> {
        let mut batch = RecordBatch {
            topic: self.range.topic.clone(),
            ..RecordBatch::default()
        };
        while self.next < self.range.end
            && batch.records.len() < BATCH_RECORDS
            && batch.bytes < BATCH_BYTES
        {
            match tokio::time::timeout(Duration::from_millis(200), self.consumer.recv()).await {
                Ok(Ok(m)) => {
                    if m.offset() >= self.range.end {
                        self.next = self.range.end;
                        break;
                    }
                    let key = m.key().map(<[u8]>::to_vec);
                    let value = m.payload().map(<[u8]>::to_vec);
                    batch.bytes +=
                        key.as_ref().map_or(0, Vec::len) + value.as_ref().map_or(0, Vec::len);
                    batch.records.push(RawRecord {
                        partition: m.partition(),
                        offset: m.offset(),
                        key,
                        value,
                    });
                    self.next = m.offset() + 1;
                }
                Ok(Err(KafkaError::PartitionEOF(_))) | Err(_) => {
                    // Past the last record there may be only transaction
                    // markers or aborted records: the position says.
                    if let Some(p) = self.position() {
                        self.next = self.next.max(p.min(self.range.end));
                    }
                    if !batch.records.is_empty() {
                        break;
                    }
                }
                Ok(Err(e)) => return Err(self.err(e)),
            }
        }
        self.metrics
            .read_to(&self.range.topic, self.range.partition, self.next);
        if batch.records.is_empty() {
            return Ok(None);
        }
        self.metrics.consumed(
            &self.range.topic,
            batch.records.len() as u64,
            batch.bytes as u64,
        );
        let last = batch.records.last().map_or(self.next - 1, |r| r.offset);
        Ok(Some(ReadBatch {
            rows: batch,
            resume_key: Some(last.to_be_bytes().to_vec()),
        }))
    }
}
