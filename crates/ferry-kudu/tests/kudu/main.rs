//! The replication engine in-process between real Kudu clusters (no
//! `ferry` binary): replication and resume, stop with drain, schema
//! following, the sink position, the lease table, sink table creation, quiet
//! tablets against racing writes, and the keys that
//! change how the Kudu connectors read and write. One test binary (a
//! module per area) so the dependency tree is linked once.

// Test code: a failed expect is a failed test, and the helpers are `pub`
// for the modules of this one binary.
#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)]

mod common;
mod config_effects;
mod drain;
mod lease_table;
mod quiet_writes;
mod replication;
mod schema_evolution;
mod sink_position;
mod sink_table;
