//! The Kafka connectors' keys and settings: a Kafka sink's
//! (`job.sinkBootstrapServers`, `job.sinkTopic`, …; [`KafkaSinkConfig`])
//! and a Kafka changelog source's (`job.sourceBootstrapServers`,
//! `job.sourceTopic`, …; [`KafkaSourceConfig`]). The engine knows only the
//! kinds (`job.sinkType`, `job.sourceType`); the binary adds these sections
//! to its registry and builds the settings when a kind is `kafka`. Names
//! follow Flink's Kafka connector options where one exists
//! (`scan.startup.mode` → `job.sourceStartupMode`, with its values).

mod sink;
mod source;

pub use sink::*;
pub use source::*;

use ferry_engine::config::{AnyOption, Config, ConfigError, ConfigOption, ValueError, ValueKind};

/// A brokers key: `host:port` entries, trimmed, comma-joined.
pub(crate) const fn brokers(name: &'static str) -> ConfigOption<String> {
    ConfigOption::new(name, ValueKind::HttpAddresses, parse_brokers, String::clone)
        .blank_means_default()
}

fn parse_brokers(value: &str) -> Result<String, ValueError> {
    let servers: Vec<&str> = value.split(',').map(str::trim).collect();
    if let Some(bad) = servers
        .iter()
        .find(|s| s.is_empty() || !s.contains(':') || s.contains(char::is_whitespace))
    {
        return Err(ValueError::Invalid(format!("'{bad}' is not a host:port")));
    }
    Ok(servers.join(","))
}

/// A topic name, trimmed (`{table}` allowed: it stands for the table).
pub(crate) fn topic(value: &str) -> Result<String, ValueError> {
    let topic = ferry_engine::config::values::text(value)?
        .trim()
        .to_string();
    let without_placeholder = topic.replace("{table}", "");
    if let Some(c) = without_placeholder
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(ValueError::Invalid(format!(
            "'{c}' is not allowed in a Kafka topic name (letters, digits, '.', '_', '-'; {{table}} for the table name)"
        )));
    }
    Ok(topic)
}

/// One topic (no `{table}`).
pub(crate) fn one_topic(value: &str, why: &str) -> Result<String, ValueError> {
    let t = topic(value)?;
    if t.contains("{table}") {
        return Err(ValueError::Invalid(why.to_string()));
    }
    Ok(t)
}

/// Refuses the first of `keys` given with a value other than its default
/// (a default spelled out, as effective values write it, is fine): the
/// keys of a Kafka side the job does not have.
pub(crate) fn refuse_set(
    config: &Config,
    keys: &[&dyn AnyOption],
    reason: &'static str,
) -> Result<(), ConfigError> {
    let set = |k: &&&dyn AnyOption| {
        config
            .raw(**k)
            .map(str::trim)
            .is_some_and(|v| !v.is_empty() && Some(v) != k.spec().default_value())
    };
    match keys.iter().find(set) {
        Some(key) => Err(ConfigError::Unsupported {
            key: key.name(),
            value: config.raw(*key).unwrap_or_default().to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
