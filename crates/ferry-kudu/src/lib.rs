//! The Kudu connector for ferry, beside `ferry-kafka`: everything of the
//! engine's contract (`ferry_engine::connector`) that speaks Kudu.
//!
//! - [`source`]: [`KuduSource`], ORDERED snapshot and diff scans, one split
//!   per tablet (or per `reader.splitSizeBytes` key range), read with
//!   `reader.prefetching`; a diff window leaves out the tablets
//!   [`quiet_tablets`] proves unchanged in it, and [`scan_budget`] spaces
//!   a table's windows to what its diff scans may cost each source tablet
//!   server (`reader.diffScanBudget`).
//! - [`sink`]: [`KuduSink`], UPSERT_IGNORE and key-only DELETE_IGNORE, a
//!   scan batch written whole; it opts into the position and
//!   schema-following capabilities. Rows re-created on the source with
//!   new immutable cells are deleted from the sink first
//!   (`immutable_cells`).
//! - [`tables`]: [`KuduTables`], the job's tables (a list, a pattern or one
//!   table) and each one's source and sink.
//! - [`shard`]: in a job cut into shards, which tables and tablets a
//!   shard replicates ([`shard::ShardTablets`]: a table whole, or the
//!   tablets of its hash buckets).
//! - [`sink_table`]: creating the sink table as a copy of the source
//!   (`job.createTable`), checking an existing one, following schema
//!   changes.
//! - [`lease_table`]: [`lease_table::LeaseTable`], a state store in a
//!   small table on the sink cluster, where the HA lease lives by default
//!   (`high-availability.storageDir = kudu:ferry_ha`).
//! - [`position`]: the sink position record on the sink cluster
//!   ([`position::PositionTable`]).
//! - [`cuts`]: the consistent cuts published on the sink cluster every
//!   window ([`cuts::CutsTable`], with its readers).
//! - [`tserver_metrics`]: the one reader of tablet servers' metrics
//!   (write counters and clocks; the JSON `/metrics`, or per server
//!   `/metrics_prometheus` where its release has tablets there), with
//!   servers from the client's tablet-server list: used by quiet tablets,
//!   the drain check and the write guard.
//! - [`error`]: how Kudu errors reach the engine (a
//!   `ferry_engine::error::ConnectorError` with a retry hint, the table and
//!   advice).

pub mod cuts;
pub mod error;
mod immutable_cells;
pub mod lease_table;
pub mod position;
mod prefetch;
pub mod quiet_tablets;
pub mod recopy;
pub mod scan_budget;
pub mod shard;
pub mod sink;
pub mod sink_table;
pub mod source;
pub mod tables;
pub mod tserver_metrics;

pub use sink::KuduSink;
pub use source::{KuduBatch, KuduSource};
pub use tables::KuduTables;
