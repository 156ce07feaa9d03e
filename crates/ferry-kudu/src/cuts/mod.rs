//! The cuts table on the sink cluster (`job.cutsTable`, default
//! `ferry_cuts`): every window, the job publishes one row — a source
//! instant and a sink hybrid time at which every sink table of the job
//! reflects the source as of that instant — so any Kudu client (Spark,
//! Impala through a chosen snapshot, the Java/C++ client, ferry itself)
//! can read the standby at a consistent cut with snapshot scans
//! (docs/dr.md, "Consistent reads on the standby").
//!
//! The table's schema is a contract with its readers; keep it:
//!
//! | column        | type              | meaning |
//! |---------------|-------------------|---------|
//! | `job_id`      | STRING, key       | the job (the id `ferry run` prints) |
//! | `source_time` | INT64, key        | the source hybrid time: the window end every listed table completed |
//! | `sink_time`   | INT64             | a sink hybrid time at which every listed table reflects `source_time` |
//! | `tables`      | STRING            | the sink tables, a JSON list of names |
//! | `generation`  | INT64             | the writer's generation (a takeover fence number; 0 without HA) |
//! | `written_at`  | UNIXTIME_MICROS   | when the row was written (wall clock of the writer) |
//!
//! - `table`: [`CutsTable`] (create, write, prune; the readers
//!   [`CutsTable::newest`], [`CutsTable::at_or_before`]) and [`CutRecord`];
//! - `error`: [`CutsError`];
//! - `sink`: the Kudu sink's [`ferry_engine::connector::SinkCuts`].

mod error;
mod sink;
mod table;

pub use error::CutsError;
pub use table::{CutRecord, CutsTable, DEFAULT_CUTS_TABLE};
