//! Which connectors a job runs: where its changes come from
//! (`job.sourceType`) and where they go (`job.sinkType`). The engine keeps
//! only the kind, a plain value the binary dispatches on; the Kafka
//! connectors' own keys and settings live in `ferry-kafka`. The Kudu
//! side's cluster keys (`job.sourceMasterAddresses`,
//! `job.sinkMasterAddresses`) are required with a Kudu side and refused
//! without one.

use super::error::ConfigError;
use super::job::{SINK_MASTER_ADDRESSES, SOURCE_MASTER_ADDRESSES};
use super::map::Config;
use super::option::{ConfigOption, ValueError};
use super::section::Section;
use crate::choice;

choice! {
    /// `job.sourceType`: where a job's changes come from.
    #[derive(Default)]
    pub enum SourceKind {
        /// A Kudu table on `job.sourceMasterAddresses`.
        #[default]
        Kudu = "kudu",
        /// A Kafka changelog topic (`ferry-kafka`).
        Kafka = "kafka",
    }
}

choice! {
    /// `job.sinkType`: where a job's changes go.
    #[derive(Default)]
    pub enum SinkKind {
        /// A Kudu table on `job.sinkMasterAddresses`.
        #[default]
        Kudu = "kudu",
        /// Records on Kafka topics (`ferry-kafka`).
        Kafka = "kafka",
    }
}

crate::config_section! {
    /// `job.sinkType`.
    pub static SINK_KIND_KEYS = Section::job("sink kind");
    /// `job.sinkType`.
    pub const SINK_TYPE: ConfigOption<SinkKind> = ConfigOption::choice("job.sinkType")
        .default_value("kudu")
        .doc("Where the changes go: kudu (a sink table on job.sinkMasterAddresses) or kafka (records on job.sinkTopic of job.sinkBootstrapServers; docs/kafka.md).");
}

crate::config_section! {
    /// `job.sourceType`.
    pub static SOURCE_KIND_KEYS = Section::job("source kind");
    /// `job.sourceType`.
    pub const SOURCE_TYPE: ConfigOption<SourceKind> = ConfigOption::choice("job.sourceType")
        .default_value("kudu")
        .doc("Where the changes come from: kudu (job.tableName on job.sourceMasterAddresses) or kafka (a changelog topic applied to the Kudu table job.tableName on job.sinkMasterAddresses; docs/kafka.md).");
}

/// The connector kinds and the Kudu clusters they need.
pub(super) struct Connectors {
    pub source: SourceKind,
    pub sink: SinkKind,
    pub source_master_addresses: Vec<String>,
    pub sink_master_addresses: Vec<String>,
}

impl Connectors {
    /// The kinds; each Kudu side's masters, required; a Kafka side's
    /// masters refused; Kafka to Kafka refused.
    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        let source = keys.get(&SOURCE_TYPE)?;
        let source_master_addresses = match source {
            SourceKind::Kudu => keys.get(&SOURCE_MASTER_ADDRESSES)?,
            SourceKind::Kafka => {
                refuse_masters(
                    keys,
                    &SOURCE_MASTER_ADDRESSES,
                    "a Kafka source (job.sourceType=kafka) reads no Kudu cluster; remove the key",
                )?;
                Vec::new()
            }
        };
        let sink = keys.get(&SINK_TYPE)?;
        let sink_master_addresses = match sink {
            SinkKind::Kudu => keys.get(&SINK_MASTER_ADDRESSES)?,
            SinkKind::Kafka => {
                refuse_masters(
                    keys,
                    &SINK_MASTER_ADDRESSES,
                    "a Kafka sink (job.sinkType=kafka) writes no Kudu cluster; remove the key",
                )?;
                Vec::new()
            }
        };
        if (source, sink) == (SourceKind::Kafka, SinkKind::Kafka) {
            return Err(ConfigError::invalid(
                SINK_TYPE.spec(),
                "kafka",
                ValueError::Invalid("a Kafka source writes a Kudu table (job.tableName on job.sinkMasterAddresses); Kafka to Kafka is not a ferry job".to_string()),
            ));
        }
        Ok(Connectors {
            source,
            sink,
            source_master_addresses,
            sink_master_addresses,
        })
    }
}

fn refuse_masters(
    keys: &Config,
    masters: &ConfigOption<Vec<String>>,
    reason: &'static str,
) -> Result<(), ConfigError> {
    match keys.raw(masters).filter(|v| !v.trim().is_empty()) {
        Some(value) => Err(ConfigError::Unsupported {
            key: masters.name(),
            value: value.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}
