//! `ferry_verify::verify` against two real Kudu clusters (shared by the
//! tests of this binary): equal copies with different partitioning say
//! equal (both methods), three changes made directly on the sink are named
//! exactly, repair fixes them (`acceptance`); columns are matched, keys
//! merged in the servers' order, and bad input (a time older than history,
//! different keys, a missing table) is refused with its own error
//! (`tables`); writers running on both sides cause no false difference at
//! fixed times (`snapshots`); a differing immutable cell is repaired by
//! deleting and writing the row again (`immutable`).
//!
//! `FERRY_VERIFY_ROWS` sets the size of the big table (the issue's
//! acceptance is 1 000 000; the default keeps CI quick);
//! `FERRY_VERIFY_SCAN_TOO` also times `kudu table scan` of both tables, for
//! the log.

// Test code: a failed call is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acceptance;
mod common;
mod immutable;
mod snapshots;
mod tables;
