//! Time on a Kudu → Kafka topic (issue 35 item 2): every record carries
//! the source time of its window's end in headers, and each window the
//! sink writes a *watermark record* to every partition of the topic
//! (`job.sinkWatermarks`): every change of the table up to that source
//! time is before it in the partition. A consumer can then resume by time
//! rather than by offset, and tell how fresh a partition is even when no
//! row changes.
//!
//! - headers of every record: `ferry.window_end` (the window end, a raw
//!   Kudu hybrid time in decimal) and `ferry.window_end_ms` (its
//!   physical part, epoch milliseconds);
//! - a watermark record: key `{"ferry_watermark":<partition>}` (one key
//!   per partition, so a compacted topic keeps the newest), value
//!   `{"ferry_watermark":{"table":…,"partition":…,"window_end":…,"ts_ms":…}}`,
//!   the two headers and `ferry.watermark: 1`.
//!
//! A watermark is written when the engine records the position of a
//! window (before any of its records) with the end of the window before
//! it, whose records were all acknowledged (at-least-once) or committed
//! (exactly-once: the watermark is in the next transaction, after them).
//! With `none` records are not waited for, so a watermark may precede a
//! lost one. ferry's own Kafka → Kudu job skips watermark records
//! ([`is_watermark`]).

use crate::error::{kafka_error, KafkaSinkError};
use crate::format::Record;
use ferry_engine::connector::Source;
use ferry_engine::SourceTime;
use ferry_kudu::KuduSource;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};

/// Header: the window end of the record's change (a hybrid time).
pub const WINDOW_END_HEADER: &str = "ferry.window_end";
/// Header: the window end as epoch milliseconds.
pub const WINDOW_END_MS_HEADER: &str = "ferry.window_end_ms";
/// Header marking a watermark record.
pub const WATERMARK_HEADER: &str = "ferry.watermark";
/// The field of a watermark record's key and value.
pub const WATERMARK_FIELD: &str = "ferry_watermark";

/// The headers of a record whose window ends at `end`: the hybrid time
/// and its epoch milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeHeaders {
    end: String,
    end_ms: String,
}

impl TimeHeaders {
    /// The headers of window end `end`.
    pub fn new(end: SourceTime) -> Self {
        TimeHeaders {
            end: end.raw().to_string(),
            end_ms: KuduSource::CLOCK.epoch_millis(end).to_string(),
        }
    }

    /// The headers as a record takes them.
    pub fn owned(&self) -> OwnedHeaders {
        OwnedHeaders::new_with_capacity(2)
            .insert(Header {
                key: WINDOW_END_HEADER,
                value: Some(self.end.as_bytes()),
            })
            .insert(Header {
                key: WINDOW_END_MS_HEADER,
                value: Some(self.end_ms.as_bytes()),
            })
    }

    /// The headers of a watermark record.
    pub fn watermark(&self) -> OwnedHeaders {
        self.owned().insert(Header {
            key: WATERMARK_HEADER,
            value: Some("1".as_bytes()),
        })
    }
}

/// The watermark record of `table` for `partition`: every change up to
/// `end` is before it.
pub fn watermark_record(table: &str, partition: i32, end: SourceTime) -> Record {
    let key = json!({ WATERMARK_FIELD: partition });
    let value = json!({ WATERMARK_FIELD: {
        "table": table,
        "partition": partition,
        "window_end": end.raw(),
        "ts_ms": KuduSource::CLOCK.epoch_millis(end),
    }});
    Record {
        key: key.to_string().into_bytes(),
        value: Some(value.to_string().into_bytes()),
    }
}

/// Whether a decoded record value (a JSON object) is a watermark record:
/// its only field is `ferry_watermark`.
pub fn is_watermark(value: &Map<String, Value>) -> bool {
    value.len() == 1 && value.contains_key(WATERMARK_FIELD)
}

/// The topic's partitions are read again at least this often (an
/// operator may add some).
const PARTITIONS_TTL: Duration = Duration::from_secs(60);

/// One topic's watermarks: the newest written and the partitions.
#[derive(Debug)]
pub(crate) struct Watermarks {
    topic: String,
    state: tokio::sync::Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The newest window end written.
    written: Option<SourceTime>,
    /// The topic's partition count, and when it was read.
    partitions: Option<(i32, Instant)>,
}

impl Watermarks {
    /// Watermarks of `topic`.
    pub(crate) fn new(topic: String) -> Self {
        Watermarks {
            topic,
            state: Default::default(),
        }
    }

    /// Writes a watermark of `end` for `table` to every partition through
    /// `producer` (waiting for the brokers when `wait`), unless one as new
    /// was written; returns how many records were written.
    pub(crate) async fn write(
        &self,
        producer: &FutureProducer,
        table: &str,
        end: SourceTime,
        wait: bool,
    ) -> Result<u64, KafkaSinkError> {
        let mut state = self.state.lock().await;
        if state.written.is_some_and(|w| w >= end) {
            return Ok(0);
        }
        let partitions = match state.partitions {
            Some((n, at)) if at.elapsed() < PARTITIONS_TTL => n,
            _ => {
                let n = self.partition_count(producer).await?;
                state.partitions = Some((n, Instant::now()));
                n
            }
        };
        let headers = TimeHeaders::new(end);
        let mut pending = Vec::new();
        for p in 0..partitions {
            let record = watermark_record(table, p, end);
            let sent = producer.send_result(
                FutureRecord::to(&self.topic)
                    .partition(p)
                    .key(record.key.as_slice())
                    .payload(record.value.as_deref().unwrap_or_default())
                    .headers(headers.watermark()),
            );
            match sent {
                Ok(delivery) => pending.push(delivery),
                Err((e, _)) => return Err(self.error(e)),
            }
        }
        if wait {
            for delivery in pending {
                match delivery.await {
                    Ok(Ok(_)) => {}
                    Ok(Err((e, _))) => return Err(self.error(e)),
                    Err(_) => return Err(self.error(KafkaError::Canceled)),
                }
            }
        }
        state.written = Some(end);
        Ok(partitions as u64)
    }

    fn error(&self, e: KafkaError) -> KafkaSinkError {
        kafka_error(format!("writing watermarks to topic '{}'", self.topic), e)
    }

    /// The topic's partition count, from the brokers.
    async fn partition_count(&self, producer: &FutureProducer) -> Result<i32, KafkaSinkError> {
        let (producer, topic) = (producer.clone(), self.topic.clone());
        let read = tokio::task::spawn_blocking(move || {
            let metadata = producer
                .client()
                .fetch_metadata(Some(&topic), Duration::from_secs(10))?;
            Ok::<_, KafkaError>(
                metadata
                    .topics()
                    .iter()
                    .find(|t| t.name() == topic)
                    .map_or(0, |t| t.partitions().len()),
            )
        })
        .await
        .map_err(|e| KafkaSinkError::Topic {
            topic: self.topic.clone(),
            reason: format!("reading its partitions: {e}"),
        })?;
        let n = read.map_err(|e| {
            kafka_error(
                format!("reading the partitions of topic '{}'", self.topic),
                e,
            )
        })?;
        match i32::try_from(n) {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(KafkaSinkError::Topic {
                topic: self.topic.clone(),
                reason: "the brokers list no partition of it".to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::message::Headers;

    #[test]
    fn a_watermark_names_its_partition_and_time() {
        let end = SourceTime::from_raw(7_000_000 << 12);
        let r = watermark_record("orders", 2, end);
        let key: Value = serde_json::from_slice(&r.key).expect("key");
        assert_eq!(key, json!({"ferry_watermark": 2}));
        let value: Value =
            serde_json::from_slice(r.value.as_deref().expect("value")).expect("json");
        assert_eq!(value["ferry_watermark"]["window_end"], 7_000_000u64 << 12);
        assert_eq!(value["ferry_watermark"]["ts_ms"], 7_000);
        assert_eq!(value["ferry_watermark"]["table"], "orders");
        let object = value.as_object().expect("object");
        assert!(is_watermark(object));
        // A row with that column and others is not one.
        let row = json!({"ferry_watermark": 1, "id": 3});
        assert!(!is_watermark(row.as_object().expect("object")));
    }

    #[test]
    fn the_headers_carry_the_window_end() {
        let end = SourceTime::from_raw(5_000 << 12);
        let h = TimeHeaders::new(end);
        let data = h.owned();
        assert_eq!(data.count(), 2);
        let first = data.get(0);
        assert_eq!(first.key, WINDOW_END_HEADER);
        assert_eq!(first.value, Some((5_000u64 << 12).to_string().as_bytes()));
        let second = data.get(1);
        assert_eq!(second.key, WINDOW_END_MS_HEADER);
        assert_eq!(second.value, Some("5".as_bytes()));
        let mark = h.watermark();
        assert_eq!(mark.count(), 3);
        assert_eq!(mark.get(2).key, WATERMARK_HEADER);
    }
}
