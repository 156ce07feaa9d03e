//! Job configuration: the key catalog and validation into [`JobConfig`].
//!
//! Configuration is taken in two steps so each rule lives in one place:
//!
//! 1. [`RawConfig`]: `key → string` pairs as given. Reading them from the
//!    command line, `-D` or a TOML file is the binary's job, not the
//!    engine's; it reads each source once into one map and passes the job's
//!    keys on.
//! 2. [`JobConfig::from_raw`]: typed values (durations, enums, sizes),
//!    defaults, range checks, the cross-key rule
//!    `job.checkpointingIntervalMillis < job.discoveryIntervalSeconds × 1000`,
//!    and the refusal of values ferry cannot honour (each with its reason).
//!
//! Every key's name, default, kind and doc are data: one [`KeySpec`] row per
//! [`ConfigKey`]. The same [`KeySpec`] shape describes the binary's process
//! keys, and the binary renders `--help` and docs from both catalogs. Keys
//! and defaults follow Apache Kudu's Flink replication job so existing
//! command lines work; ferry's own keys are marked [`KeyOrigin::Ferry`].

mod error;
mod ha;
mod job;
mod key;
mod key_security;
mod key_sink;
mod key_source;
mod key_tables;
mod raw;
mod restart;
mod security;
mod sink;
mod source;
mod spec;

#[cfg(test)]
mod tests;

pub use error::ConfigError;
pub use ha::{ha_job_id, HaConfig, HaKind};
pub use job::{FlushMode, JobConfig, ReaderConfig, ReplicaSelection, TableSelection, WriterConfig};
pub use key::ConfigKey;
pub use raw::RawConfig;
pub use restart::{format_duration, parse_duration, Decimal, RestartConfig};
pub use security::{ClusterKerberos, KerberosConfig};
pub use sink::{DeliveryGuarantee, KafkaSinkConfig, RecordFormat, SinkConfig};
pub use source::{BoundedMode, ErrorPolicy, KafkaSourceConfig, SourceConfig, StartupMode};
pub use spec::{closest_name, KeyDefault, KeyOrigin, KeySpec, ValueKind};
