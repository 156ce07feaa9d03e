//! The replication engine in-process between real Kudu clusters (no
//! `ferry` binary): replication and resume, stop with drain, schema
//! following, the sink position, sink table creation, and the keys that
//! change how the Kudu connectors read and write. One test binary (a
//! module per area) so the dependency tree is linked once.

mod common;
mod config_effects;
mod drain;
mod replication;
mod schema_evolution;
mod sink_position;
mod sink_table;
