//! Job configuration: the key catalog, raw parsing, and validation.
//!
//! Configuration is read in two steps so each rule lives in one place:
//!
//! 1. [`RawConfig`]: `key → string` pairs from the command line
//!    (`--job.tableName t`, `--job.tableName=t`) and from a TOML file with
//!    the same key names (flat `"job.tableName" = "t"` or nested `[job]`
//!    tables). Unknown and repeated keys are rejected here; the command line
//!    wins over the file ([`RawConfig::overridden_by`]).
//! 2. [`JobConfig::from_raw`]: typed values (durations, enums, sizes),
//!    defaults, range checks and the cross-key rule
//!    `job.checkpointingIntervalMillis < job.discoveryIntervalSeconds × 1000`.
//!
//! Every key's name, default, kind and doc are data in [`ConfigKey`]'s
//! catalog, from which [`render_help`] and [`render_markdown`] generate
//! `--help` text and docs. Keys and defaults follow Apache Kudu's Flink
//! replication job so existing command lines work; ferry's own keys are
//! marked [`KeyOrigin::Ferry`].

mod error;
mod job;
mod key;
mod raw;

#[cfg(test)]
mod tests;

pub use error::ConfigError;
pub use job::{FlushMode, JobConfig, ReaderConfig, ReplicaSelection, WriterConfig};
pub use key::{
    render_help, render_markdown, ConfigKey, KeyDefault, KeyOrigin, KeySpec, Section, ValueKind,
};
pub use raw::RawConfig;
