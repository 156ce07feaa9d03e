//! ferry's keys choosing and following the replicated tables
//! (`job.tablePattern`, `job.tableDiscoveryIntervalSeconds`,
//! `job.schemaEvolution`, `job.renameSinkTable`) and the
//! [`TableSelection`] they make with `job.tableName`.

use std::time::Duration;

use super::error::ConfigError;
use super::job::TABLE_NAME;
use super::map::Config;
use super::option::{ConfigOption, ValueError};
use super::section::Section;
use super::spec::ValueKind;

crate::config_section! {
    /// Keys choosing and following the replicated tables.
    pub static TABLE_KEYS = Section::job("tables");
    /// `job.tablePattern`.
    pub const TABLE_PATTERN: ConfigOption<String> = ConfigOption::new("job.tablePattern", ValueKind::Text, pattern, String::clone)
        .derived("none")
        .blank_means_default()
        .doc("Regular expression (Rust regex syntax) a whole source table name must match to be replicated; with or without job.tableName. Tables created later that match are picked up, dropped ones retired.");
    /// `job.tableDiscoveryIntervalSeconds`.
    pub const TABLE_DISCOVERY_INTERVAL: ConfigOption<Duration> = ConfigOption::seconds("job.tableDiscoveryIntervalSeconds")
        .default_value("30")
        .doc("How often the job lists the source tables to pick up new matching ones, retire dropped ones and follow renames.");
    /// `job.schemaEvolution`.
    pub const SCHEMA_EVOLUTION: ConfigOption<bool> = ConfigOption::flag("job.schemaEvolution")
        .default_value("true")
        .doc("Follow source schema changes (columns added, dropped, renamed or altered; range partitions added or dropped) on the sink at window boundaries. false: a changed source schema is not applied.");
    /// `job.renameSinkTable`.
    pub const RENAME_SINK_TABLE: ConfigOption<bool> = ConfigOption::flag("job.renameSinkTable")
        .default_value("false")
        .doc("Rename the sink table when its source table is renamed (keeping job.tableSuffix); false keeps the sink name.");
}

/// `job.tableName`: one name or a comma-separated list, trimmed, each
/// listed once.
pub(super) fn table_names(value: &str) -> Result<Vec<String>, ValueError> {
    let mut names: Vec<String> = Vec::new();
    for name in super::parse::list(value)? {
        if names.contains(&name) {
            return Err(ValueError::Invalid(format!(
                "table '{name}' is listed twice; list each table once"
            )));
        }
        names.push(name);
    }
    Ok(names)
}

/// `job.tablePattern`: a valid regular expression, trimmed.
fn pattern(value: &str) -> Result<String, ValueError> {
    let pattern = value.trim().to_owned();
    anchored_regex(&pattern)
        .map_err(|e| ValueError::Invalid(format!("not a valid regular expression: {e}")))?;
    Ok(pattern)
}

/// The source tables a job replicates.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TableSelection {
    /// Tables named in `job.tableName` (in order, no duplicates).
    pub names: Vec<String>,
    /// `job.tablePattern`: a regular expression a whole source table name
    /// must match.
    pub pattern: Option<String>,
}

impl TableSelection {
    /// `job.tableName` and `job.tablePattern`; at least one.
    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        let names = keys.get_optional(&TABLE_NAME)?.unwrap_or_default();
        let pattern = keys.get_optional(&TABLE_PATTERN)?;
        if names.is_empty() && pattern.is_none() {
            return Err(ConfigError::NoTables);
        }
        Ok(TableSelection { names, pattern })
    }

    /// `job.tablePattern` compiled to match whole table names, if given.
    /// The pattern was checked by [`super::JobConfig::from_config`]; an
    /// error here means the selection was built some other way.
    pub fn pattern_regex(&self) -> Result<Option<regex::Regex>, regex::Error> {
        self.pattern.as_deref().map(anchored_regex).transpose()
    }

    /// Whether `name` is selected: named in `job.tableName` or matching
    /// `job.tablePattern` (whole name).
    pub fn selects(&self, name: &str, pattern: Option<&regex::Regex>) -> bool {
        self.names.iter().any(|n| n == name) || pattern.is_some_and(|p| p.is_match(name))
    }

    /// Whether the job replicates exactly one named table (and no pattern).
    pub fn is_single(&self) -> bool {
        self.names.len() == 1 && self.pattern.is_none()
    }
}

/// The regex anchored so it must match the whole table name (a pattern
/// `orders_.*` must not select `old_orders_1`).
fn anchored_regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
}
