//! `ferry verify`: proof that a Kudu table and its copy are equal, each read
//! at one hybrid time, without copying either table.
//!
//! Both tables are cut into common primary-key ranges; per range each side
//! is reduced to an order-independent checksum (the 64-bit sum of per-row
//! CRC32Cs) by the tablet servers' Checksum RPC, so no row crosses the
//! network, or by streaming rows through the client where the server
//! cannot. Ranges whose checksums or row counts differ are cut again until
//! they are small, then compared row by row (both sides' rows merged in key
//! order), which lists each missing, extra or differing row with the
//! columns that differ. `repair` writes the source's version of every
//! differing row to the sink (UPSERT_IGNORE / DELETE_IGNORE; a row whose
//! immutable cells differ is deleted and written again) and verifies
//! again.
//!
//! Equal checksums are strong but probabilistic evidence (32-bit row CRCs,
//! summed); every range whose checksums differ is settled row by row, so
//! each listed difference is exact.
//!
//! The crate knows Kudu (through `kudu-client`) and nothing of jobs: the
//! caller says which tables, which clusters and which times.
//!
//! - this file: the options, the report and the entry point [`verify`].
//! - `run`: one verification from start to end (passes, re-cutting,
//!   repair and the second pass).
//! - `reader`: one side opened: client, table, snapshot time, scan specs.
//! - `columns`: which columns are compared.
//! - `range`: key ranges and cutting them.
//! - `checksum`: one range of one side reduced to a checksum.
//! - `diff`: row-by-row comparison of a small range, and its repair.
//! - `values`: cell values as JSON, cell equality.
//! - `report`: the human summary (`Display` of [`VerifyReport`]).
//! - [`rewind`]: a table rewound to an earlier time of its own history
//!   (a verification of the table then against now, repaired).
//! - [`salvage`]: a failback's unreplicated rows of the old primary.

mod checksum;
mod columns;
mod diff;
mod range;
mod reader;
mod report;
pub mod rewind;
mod run;
pub mod salvage;
mod values;

use kudu_client::{HybridTime, KuduClient};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// When one side is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// A snapshot at the cluster's current time (taken once, when the
    /// verification starts).
    Now,
    /// A snapshot at this hybrid time (must be within the cluster's
    /// history retention, `--tablet_history_max_age_sec`).
    Time(HybridTime),
}

/// One of the two tables.
#[derive(Debug, Clone)]
pub struct Side {
    /// A client of the table's cluster.
    pub client: KuduClient,
    /// The table's name.
    pub table: String,
    /// When it is read.
    pub at: At,
}

/// How a range is reduced to a checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// The tablet servers' Checksum RPC (no rows cross the network).
    #[default]
    Server,
    /// Rows streamed through the client and checksummed there.
    Client,
}

/// What [`verify`] is asked to do.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// The table that is right (the replication source).
    pub source: Side,
    /// The table checked against it (the copy).
    pub sink: Side,
    /// Ranges checksummed at the same time (at least 1).
    pub parallelism: usize,
    /// How ranges are checksummed.
    pub method: Method,
    /// Differences listed in full in the report (all are counted).
    pub max_listed: usize,
    /// Write the source's version of every difference to the sink, then
    /// verify again (the source at the same time, the sink now). Missing
    /// and differing rows are written with UPSERT_IGNORE of the compared
    /// columns only: the sink's other columns keep their values (or get
    /// their defaults in a new row). A differing row whose differing cells
    /// include an immutable sink column (Kudu 1.17+), which UPSERT_IGNORE
    /// would keep, is deleted and written again, its cells of the columns
    /// not compared read first and kept. Extra rows are deleted with
    /// DELETE_IGNORE.
    pub repair: bool,
    /// How long one RPC may take (scans, checksums, writes).
    pub timeout: Duration,
    /// Receives progress while the verification runs (a terminal progress
    /// bar, the REST API).
    pub progress: Option<tokio::sync::watch::Sender<Progress>>,
    /// Data per key range of the first cut (the tablet servers cut at
    /// flushed rowsets' keys, aiming at about this size); differing ranges
    /// are cut again at a sixteenth of it, and so on.
    pub chunk_bytes: u64,
}

impl VerifyOptions {
    /// `source` against `sink`, 4 ranges at a time, the server method, 100
    /// differences listed, no repair, 30 s per RPC, 64 MiB ranges.
    pub fn new(source: Side, sink: Side) -> Self {
        VerifyOptions {
            source,
            sink,
            parallelism: 4,
            method: Method::Server,
            max_listed: 100,
            repair: false,
            timeout: Duration::from_secs(30),
            progress: None,
            chunk_bytes: 64 << 20,
        }
    }
}

/// How far a verification is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Key ranges planned (grows when differing ranges are cut again).
    pub ranges_total: u64,
    /// Key ranges finished.
    pub ranges_done: u64,
    /// Source rows compared so far.
    pub rows_compared: u64,
    /// Differences found so far.
    pub differences: u64,
}

/// One table as it was verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableSide {
    /// The cluster's master addresses.
    pub masters: Vec<String>,
    /// The table's name.
    pub table: String,
    /// The hybrid time it was read at (raw 64-bit value).
    pub timestamp: u64,
    /// Rows it held at that time.
    pub rows: u64,
}

/// A column left out of the comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedColumn {
    /// Its name.
    pub name: String,
    /// Why: only on one side, or a different type or nullability.
    pub reason: String,
}

/// The kind of a difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiffKind {
    /// In the source, not in the sink.
    Missing,
    /// In the sink, not in the source.
    Extra,
    /// On both sides, with at least one differing column.
    Differs,
}

/// One row that differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// Missing, extra or differing.
    pub kind: DiffKind,
    /// The primary key: column name → value (JSON; DECIMAL as an exact
    /// string, BINARY as hex, UNIXTIME_MICROS as microseconds, DATE as days
    /// since the epoch; names in alphabetical order).
    pub key: serde_json::Map<String, serde_json::Value>,
    /// The columns that differ (`Differs` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// The source's row (absent for `Extra`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Map<String, serde_json::Value>>,
    /// The sink's row (absent for `Missing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What `repair` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairSummary {
    /// Source rows written to the sink (UPSERT_IGNORE).
    pub upserted: u64,
    /// Sink rows deleted (DELETE_IGNORE).
    pub deleted: u64,
    /// Whether the verification after the repair found the tables equal.
    pub equal_after: bool,
}

/// The outcome of [`verify`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// Whether the two tables are equal (after the repair, if one ran).
    pub equal: bool,
    /// The source as read.
    pub source: TableSide,
    /// The sink as read (before any repair).
    pub sink: TableSide,
    /// The columns compared, in table order.
    pub columns: Vec<String>,
    /// Columns left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_columns: Vec<SkippedColumn>,
    /// How ranges were checksummed.
    pub method: Method,
    /// Key ranges compared (the final, finest cut).
    pub ranges: u64,
    /// Of them, ranges that differed.
    pub ranges_differing: u64,
    /// Source rows compared.
    pub rows_compared: u64,
    /// Rows that differ, all kinds (before any repair).
    pub differences: u64,
    /// Of them: in the source only.
    pub missing: u64,
    /// Of them: in the sink only.
    pub extra: u64,
    /// Of them: on both sides, differing.
    pub differing: u64,
    /// The first `max_listed` differences, in key order.
    pub listed: Vec<Difference>,
    /// Whether more differences exist than are listed.
    pub truncated: bool,
    /// What `repair` did, if asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<RepairSummary>,
    /// When the verification started (ms since the epoch).
    pub started_at_ms: u64,
    /// How long it took.
    pub elapsed_ms: u64,
}

/// Why a verification could not give an answer.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// A table does not exist.
    #[error("the {side} table '{table}' does not exist")]
    TableNotFound {
        /// "source" or "sink".
        side: &'static str,
        /// Its name.
        table: String,
    },
    /// The tables cannot be compared (different primary keys, no common
    /// columns).
    #[error("the tables cannot be compared: {0}")]
    Incomparable(String),
    /// A snapshot time is older than the cluster keeps history for.
    #[error("the {side} table '{table}' cannot be read at hybrid time {timestamp}: it is older than the cluster's history retention (--tablet_history_max_age_sec)")]
    HistoryTooOld {
        /// "source" or "sink".
        side: &'static str,
        /// Its name.
        table: String,
        /// The raw hybrid time asked for.
        timestamp: u64,
    },
    /// A Kudu call failed.
    #[error("{side} table '{table}': {what}")]
    Kudu {
        /// "source" or "sink".
        side: &'static str,
        /// Its name.
        table: String,
        /// What was being done.
        what: String,
        /// The client's error.
        #[source]
        cause: Box<kudu_client::Error>,
    },
}

impl VerifyError {
    /// Whether the error is the caller's input (exit code 2), not a
    /// failure of the clusters.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            VerifyError::TableNotFound { .. }
                | VerifyError::Incomparable(_)
                | VerifyError::HistoryTooOld { .. }
        )
    }
}

/// Compares `opts.source` and `opts.sink` (see the crate docs); with
/// `opts.repair`, repairs the sink and verifies again.
pub async fn verify(opts: VerifyOptions) -> Result<VerifyReport, VerifyError> {
    run::verify(opts).await
}
