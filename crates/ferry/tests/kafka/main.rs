//! Kafka connectors against a real Kafka 4.x broker (KRaft) and real Kudu:
//! Kudu → Kafka (at-least-once and exactly-once) and Kafka → Kudu
//! (changelogs, dead letters, bounded runs, a round trip), and a table with
//! a non-unique primary key both ways.

// Test code: a failed unwrap is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod non_unique;
mod sink;
mod source;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::process::{FerryCommand, FerryProcess};
use ferry_fixtures::Shared;
use ferry_testkit::KafkaBroker;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::Value as Json;

static BROKER: Shared<KafkaBroker> = Shared::new();

/// The broker the tests share while they run (a JVM start costs seconds
/// of both cores): each test uses topics, consumer groups and
/// transactional ids of its own.
fn broker() -> Arc<KafkaBroker> {
    BROKER
        .get(|| KafkaBroker::start(&format!("kafka-{}", std::process::id())).expect("Kafka broker"))
}

/// `ferry run <args>` with `env`, free REST and metrics ports, started.
fn run(args: &[String], env: &[(&str, &str)]) -> FerryProcess {
    FerryCommand::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("run")
        .args(args)
        .envs(env)
        .free_ports()
        .start()
}

/// What a Kudu → Kafka topic holds from its start to its end
/// (`read_committed`), in partition order.
pub(crate) struct TopicRead {
    /// Change records: (key, value).
    pub records: Vec<(Json, Option<Json>)>,
    /// Watermark records: (partition, window end).
    pub watermarks: Vec<(i32, u64)>,
}

/// A header of `message` as text.
fn header<'a>(message: &'a rdkafka::message::BorrowedMessage<'_>, key: &str) -> Option<&'a str> {
    let headers = message.headers()?;
    headers
        .iter()
        .find(|h| h.key == key)
        .and_then(|h| std::str::from_utf8(h.value?).ok())
}

/// Reads `topic` (`partitions` of them) to its end. Asserts what every
/// record of a ferry topic carries: its window end in the headers; and
/// that no change of a window is behind a watermark of that window's end
/// or later in its partition (the watermark's promise).
pub(crate) fn read_topic(bootstrap: &str, topic: &str, partitions: i32) -> TopicRead {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("ferry-test-reader-{topic}"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .expect("assignment");
    }
    consumer.assign(&assignment).expect("assign");
    let mut read = TopicRead {
        records: Vec::new(),
        watermarks: Vec::new(),
    };
    let mut newest_mark: BTreeMap<i32, u64> = BTreeMap::new();
    let mut open: Vec<i32> = (0..partitions).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !open.is_empty() {
        assert!(
            Instant::now() < deadline,
            "reading {topic} stalled (partitions {open:?} not at their end)"
        );
        let message = match consumer.poll(Duration::from_millis(500)) {
            None => continue,
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                open.retain(|&q| q != p);
                continue;
            }
            Some(m) => m.expect("record"),
        };
        let p = message.partition();
        let end: u64 = header(&message, "ferry.window_end")
            .and_then(|h| h.parse().ok())
            .unwrap_or_else(|| panic!("a record of {topic} without ferry.window_end"));
        assert!(
            header(&message, "ferry.window_end_ms").is_some_and(|ms| ms.parse::<u64>().is_ok()),
            "a record of {topic} without ferry.window_end_ms"
        );
        let key: Json = serde_json::from_slice(message.key().expect("key")).expect("JSON key");
        let value: Option<Json> = message
            .payload()
            .map(|v| serde_json::from_slice(v).expect("JSON value"));
        if header(&message, "ferry.watermark").is_some() {
            let mark = &value.as_ref().expect("a watermark has a value")["ferry_watermark"];
            assert_eq!(mark["window_end"].as_u64(), Some(end), "{mark}");
            assert_eq!(mark["partition"].as_i64(), Some(i64::from(p)), "{mark}");
            assert_eq!(key["ferry_watermark"].as_i64(), Some(i64::from(p)), "{key}");
            newest_mark.insert(p, end);
            read.watermarks.push((p, end));
            continue;
        }
        if let Some(&mark) = newest_mark.get(&p) {
            assert!(
                end > mark,
                "partition {p} of {topic}: a change of window end {end} after a watermark of {mark}"
            );
        }
        read.records.push((key, value));
    }
    read
}
