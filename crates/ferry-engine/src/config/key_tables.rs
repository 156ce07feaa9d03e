//! Catalog rows of ferry's keys choosing and following the replicated
//! tables (`job.tablePattern`, `job.tableDiscoveryIntervalSeconds`,
//! `job.schemaEvolution`, `job.renameSinkTable`), kept apart so `key.rs`
//! stays readable. [`super::key`] puts them in its catalog.

use super::spec::{KeyDefault, KeyOrigin, KeySpec, ValueKind};

/// `job.tablePattern`.
pub(super) const TABLE_PATTERN: KeySpec = KeySpec::new(
    "job.tablePattern",
    KeyDefault::Derived("none"),
    ValueKind::Text,
    KeyOrigin::Ferry,
    "Regular expression (Rust regex syntax) a whole source table name must match to be replicated; with or without job.tableName. Tables created later that match are picked up, dropped ones retired.",
);

/// `job.tableDiscoveryIntervalSeconds`.
pub(super) const TABLE_DISCOVERY_INTERVAL: KeySpec = KeySpec::new(
    "job.tableDiscoveryIntervalSeconds",
    KeyDefault::Value("30"),
    ValueKind::Seconds,
    KeyOrigin::Ferry,
    "How often the job lists the source tables to pick up new matching ones, retire dropped ones and follow renames.",
);

/// `job.schemaEvolution`.
pub(super) const SCHEMA_EVOLUTION: KeySpec = KeySpec::new(
    "job.schemaEvolution",
    KeyDefault::Value("true"),
    ValueKind::Bool,
    KeyOrigin::Ferry,
    "Follow source schema changes (columns added, dropped, renamed or altered; range partitions added or dropped) on the sink at window boundaries. false: a changed source schema is not applied.",
);

/// `job.renameSinkTable`.
pub(super) const RENAME_SINK_TABLE: KeySpec = KeySpec::new(
    "job.renameSinkTable",
    KeyDefault::Value("false"),
    ValueKind::Bool,
    KeyOrigin::Ferry,
    "Rename the sink table when its source table is renamed (keeping job.tableSuffix); false keeps the sink name.",
);
