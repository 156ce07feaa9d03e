//! Job configuration: typed keys and validation into [`JobConfig`].
//!
//! Each key is one constant, a [`ConfigOption<T>`]: its name, aliases,
//! origin, value kind, default, doc, and its typed parser and printer.
//! Keys are declared in sections ([`config_section!`](crate::config_section)),
//! each in the file of the concern it configures, so adding a key is one
//! edit in one file; the crates that own other keys (`ferry-kafka`'s Kafka
//! keys, `ferry-objstore`'s `s3.*`, the binary's process keys) declare
//! their sections the same way, and the binary composes them all into one
//! [`Registry`] for the command line, `--config`, `--help` and the docs.
//!
//! Configuration is taken in two steps so each rule lives in one place:
//!
//! 1. [`Config`]: `key → string` pairs as given. Reading them from the
//!    command line, `-D` or a TOML file is the binary's job, not the
//!    engine's.
//! 2. [`JobConfig::from_config`]: typed values (`config.get(&KEY)?`),
//!    defaults, range checks, the cross-key rules of each section (e.g.
//!    `job.checkpointingIntervalMillis < job.discoveryIntervalSeconds ×
//!    1000`), and the refusal of values ferry cannot honour (each with its
//!    reason).
//!
//! Keys and defaults follow Apache Kudu's Flink replication job so existing
//! command lines work; ferry's own keys are marked [`KeyOrigin::Ferry`].

mod connectors;
mod error;
mod ha;
mod ha_kubernetes;
mod job;
mod map;
mod option;
mod parse;
mod reader;
mod restart;
mod section;
mod security;
mod shards;
mod spec;
mod tables;
mod throttle;
mod writer;
mod zookeeper;

#[cfg(test)]
mod tests;

pub use connectors::{
    SinkKind, SourceKind, SINK_KIND_KEYS, SINK_TYPE, SOURCE_KIND_KEYS, SOURCE_TYPE,
};
pub use error::ConfigError;
pub use ha::{
    ha_job_id, HaConfig, HaKind, LeasePlace, DEFAULT_LEASE_TABLE, HA_CLUSTER_ID, HA_KEYS,
    HA_LEASE_DURATION, HA_RENEW_INTERVAL, HA_STORAGE_DIR, HA_TYPE,
};
pub use ha_kubernetes::{
    KubernetesHa, KUBERNETES_HA_KEYS, KUBE_CONFIG_FILE, KUBE_LEASE_DURATION, KUBE_NAMESPACE,
    KUBE_RENEW_DEADLINE, KUBE_RETRY_PERIOD,
};
pub use job::*;
pub use map::Config;
pub use option::{parse_choice, AnyOption, Choice, ConfigOption, Parser, Printer, ValueError};
pub use parse::{format_duration, parse_duration, Decimal};
pub use reader::*;
pub use restart::*;
pub use section::{Registry, Scope, Section};
pub use security::*;
pub use shards::{SHARD, SHARDS, SHARD_KEYS, SHARD_TABLETS_OVER};
pub use spec::{closest_name, KeyDefault, KeyOrigin, KeySpec, ValueKind};
pub use tables::*;
pub use throttle::*;
pub use writer::*;
pub use zookeeper::{
    ZooKeeperAcl, ZooKeeperConfig, ZooKeeperSasl, HA_ZOOKEEPER_KEYS, ZK_ACL, ZK_CONNECTION_TIMEOUT,
    ZK_MAX_RETRY_ATTEMPTS, ZK_PATH_ROOT, ZK_QUORUM, ZK_RETRY_WAIT, ZK_SASL_DISABLE,
    ZK_SASL_LOGIN_CONTEXT_NAME, ZK_SASL_SERVICE_NAME, ZK_SESSION_TIMEOUT,
};

/// Value parsers and printers for other crates' keys.
pub mod values {
    pub use super::parse::*;
}

/// The engine's sections, in the order the docs list them.
pub static ENGINE_SECTIONS: &[&Section] = &[
    &JOB_KEYS,
    &TABLE_KEYS,
    &SHARD_KEYS,
    &SINK_KIND_KEYS,
    &SOURCE_KIND_KEYS,
    &READER_KEYS,
    &WRITER_KEYS,
    &THROTTLE_KEYS,
    &RESTART_KEYS,
    &HA_KEYS,
    &HA_ZOOKEEPER_KEYS,
    &KUBERNETES_HA_KEYS,
    &KERBEROS_LOGIN_KEYS,
    &KERBEROS_CLUSTER_KEYS,
];

/// The engine's keys alone (for [`JobConfig::from_named_pairs`]); the
/// binary composes its own registry of every crate's sections.
pub static ENGINE_KEYS: Registry = Registry::new(ENGINE_SECTIONS);
