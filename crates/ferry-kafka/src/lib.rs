//! Kafka connectors for ferry: a Kudu table's change stream on Kafka
//! topics. The engine knows nothing of Kafka; this crate plugs in through
//! its connector traits (`Tables`, `Sink`), so the engine builds without
//! librdkafka.
//!
//! - [`format`]: a changed row as a Kafka record (`debezium-json`,
//!   `upsert-json`), every Kudu type mapped;
//! - [`changelog`]: a changelog topic's record as a write to a Kudu table;
//! - [`sink`]: [`KafkaSink`], one topic per table (or one for all), with
//!   `none` / `at-least-once` / `exactly-once` delivery;
//! - [`topic`]: the topics created when missing, checked when present;
//! - [`watermark`]: time on the topic: the window end in every record's
//!   headers, a watermark record per partition each window;
//! - `transaction`: exactly-once, the table's transactions committed with
//!   its progress;
//! - [`config`]: the Kafka sink's and source's keys and settings
//!   ([`config::KafkaSinkConfig`], [`config::KafkaSourceConfig`]);
//! - [`tables`]: [`KafkaTables`], the tables of a Kudu-to-Kafka job;
//! - [`metrics`]: [`KafkaMetrics`], records, bytes, transactions and lag
//!   per topic and partition;
//! - [`error`]: [`KafkaSinkError`] and which failures a restart may cure.
//!
//! The client is `rdkafka` (librdkafka, built by the crate): the one Rust
//! Kafka client with a mature transactional producer, read-committed
//! consumers and consumer groups (docs/kafka.md).

pub mod changelog;
pub mod changelog_sink;
pub mod config;
pub mod error;
pub mod format;
pub mod metrics;
pub mod sink;
pub mod source;
pub mod tables;
pub mod topic;
mod transaction;
pub mod watermark;

pub use error::KafkaSinkError;
pub use metrics::KafkaMetrics;
pub use sink::KafkaSink;
pub use tables::{ChangelogTables, KafkaTables};
