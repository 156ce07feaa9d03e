//! [`ScanSpec`]: everything that defines a scan, independent of a client
//! (projection, predicates, read mode, bounds, limits), and the
//! [`ReadMode`] / [`ReplicaSelection`] choices.

#[cfg(doc)]
use super::ScanBuilder;
#[cfg(doc)]
use crate::KuduClient;
use std::time::Duration;

use super::predicate::Predicate;
use crate::hybrid_time::HybridTime;
use crate::partition::key::encode_range_bound;
use crate::pb;
use crate::schema::Row;
use crate::Result;

/// How a scan reads data in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ReadMode {
    /// `READ_LATEST`: whatever each tablet holds when it is opened; not
    /// repeatable, cannot be fault tolerant.
    #[default]
    Latest,
    /// `READ_AT_SNAPSHOT` at this hybrid time, or (`None`) at the time the
    /// first tablet server picks, reused for the rest of the scan.
    Snapshot(Option<HybridTime>),
}

/// Which replica of a tablet serves the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ReplicaSelection {
    /// The leader (the default). If the leader is known to be unhealthy,
    /// a snapshot scan falls back to another replica: any replica serves a
    /// snapshot read consistently.
    #[default]
    LeaderOnly,
    /// A replica on this host if there is one, otherwise a random replica.
    /// Only IP-literal and `localhost` addresses are recognised as local.
    ClosestReplica,
}

/// Everything that defines a scan, independent of a client: what
/// [`ScanBuilder`] fills in and what [`scan_splits`](KuduClient::scan_splits)
/// cuts into [`Split`](super::split::Split)s.
///
/// Setters take and return `self`. Setters that can fail (bounds given as
/// rows) remember the first error and report it when the scan is built.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanSpec {
    pub(crate) projection: Option<Vec<String>>,
    pub(crate) predicates: Vec<Predicate>,
    /// Predicates already in wire form (from a split).
    pub(crate) raw_predicates: Vec<pb::ColumnPredicatePb>,
    pub(crate) read_mode: ReadMode,
    pub(crate) fault_tolerant: bool,
    pub(crate) diff: Option<(HybridTime, HybridTime)>,
    pub(crate) batch_size_bytes: Option<u32>,
    pub(crate) limit: Option<u64>,
    pub(crate) replica_selection: ReplicaSelection,
    pub(crate) lower_bound: Option<Vec<u8>>,
    pub(crate) upper_bound: Option<Vec<u8>>,
    pub(crate) partition_key_start: Vec<u8>,
    pub(crate) partition_key_end: Vec<u8>,
    pub(crate) columnar: bool,
    pub(crate) cache_blocks: bool,
    pub(crate) timeout: Option<Duration>,
    pub(crate) keep_alive_interval: Option<Duration>,
    /// Resume point (exclusive) inside the first tablet; ORDERED only.
    pub(crate) resume_key: Option<Vec<u8>>,
    pub(crate) split_size_bytes: Option<u64>,
    /// First error of a fallible setter, reported at build time.
    pub(crate) invalid: Option<String>,
}

impl Default for ScanSpec {
    fn default() -> Self {
        ScanSpec {
            projection: None,
            predicates: Vec::new(),
            raw_predicates: Vec::new(),
            read_mode: ReadMode::Latest,
            fault_tolerant: false,
            diff: None,
            batch_size_bytes: None,
            limit: None,
            replica_selection: ReplicaSelection::LeaderOnly,
            lower_bound: None,
            upper_bound: None,
            partition_key_start: Vec::new(),
            partition_key_end: Vec::new(),
            columnar: false,
            cache_blocks: true,
            timeout: None,
            keep_alive_interval: None,
            resume_key: None,
            split_size_bytes: None,
            invalid: None,
        }
    }
}

impl ScanSpec {
    /// A full-table `READ_LATEST` scan of every column.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads only these columns, in this order. An empty list reads no
    /// columns: batches then only count rows. Default: every column.
    pub fn projection<S: AsRef<str>>(mut self, columns: &[S]) -> Self {
        self.projection = Some(columns.iter().map(|c| c.as_ref().to_owned()).collect());
        self
    }

    /// Adds a predicate; rows must satisfy all of them.
    pub fn predicate(mut self, predicate: Predicate) -> Self {
        self.predicates.push(predicate);
        self
    }

    /// Sets the read mode (see [`ReadMode`]).
    pub fn read_mode(mut self, mode: ReadMode) -> Self {
        self.read_mode = mode;
        self
    }

    /// `READ_AT_SNAPSHOT` at `ts` (take it from
    /// [`KuduClient::server_clock`] or a write's timestamp).
    pub fn snapshot(self, ts: HybridTime) -> Self {
        self.read_mode(ReadMode::Snapshot(Some(ts)))
    }

    /// `READ_AT_SNAPSHOT` at the time the first tablet server picks.
    pub fn snapshot_now(self) -> Self {
        self.read_mode(ReadMode::Snapshot(None))
    }

    /// Makes the scan fault tolerant: `ORDERED`, resumable after failures
    /// mid-tablet. Implies a snapshot read (at "now" unless a time is set),
    /// as the server requires.
    pub fn fault_tolerant(mut self, on: bool) -> Self {
        self.fault_tolerant = on;
        self
    }

    /// A diff scan of the changes in `[start, end)`: `READ_AT_SNAPSHOT` at
    /// `end` from `start`, fault tolerant, with an IS_DELETED column added
    /// to the projection (name chosen not to collide with a real column).
    pub fn diff(mut self, start: HybridTime, end: HybridTime) -> Self {
        self.diff = Some((start, end));
        self
    }

    /// An ORDERED scan continuing just after the row whose encoded primary
    /// key is `last_primary_key` (inside the first tablet it reads), as a
    /// resumed [`Split`](super::Split) does. Empty: from the start.
    pub fn resume_after(mut self, last_primary_key: impl Into<Vec<u8>>) -> Self {
        self.resume_key = Some(last_primary_key.into()).filter(|k| !k.is_empty());
        self
    }

    /// Hint for the bytes of row data per batch (server default 1 MiB,
    /// maximum 8 MiB).
    pub fn batch_size_bytes(mut self, bytes: u32) -> Self {
        self.batch_size_bytes = Some(bytes);
        self
    }

    /// Stops after this many rows in total.
    pub fn limit(mut self, rows: u64) -> Self {
        self.limit = Some(rows);
        self
    }

    /// Chooses which replica serves each tablet.
    pub fn replica_selection(mut self, selection: ReplicaSelection) -> Self {
        self.replica_selection = selection;
        self
    }

    /// Inclusive lower bound on the primary key, as an encoded key
    /// (docs/kudu-protocol.md#key-encoding). An empty key means unbounded.
    pub fn lower_bound_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.lower_bound = Some(key.into()).filter(|k| !k.is_empty());
        self
    }

    /// Exclusive upper bound on the primary key, as an encoded key. An
    /// empty key means unbounded.
    pub fn exclusive_upper_bound_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.upper_bound = Some(key.into()).filter(|k| !k.is_empty());
        self
    }

    /// Inclusive lower bound on the primary key, as a row of the table
    /// schema; unset key columns count as their type's minimum.
    pub fn lower_bound(self, row: &Row) -> Self {
        match encode_key_row(row) {
            Ok(k) => self.lower_bound_key(k),
            Err(e) => self.invalid(format!("lower bound: {e}")),
        }
    }

    /// Exclusive upper bound on the primary key, as a row of the table
    /// schema; unset key columns count as their type's minimum.
    pub fn exclusive_upper_bound(self, row: &Row) -> Self {
        match encode_key_row(row) {
            Ok(k) => self.exclusive_upper_bound_key(k),
            Err(e) => self.invalid(format!("upper bound: {e}")),
        }
    }

    /// Restricts the scan to tablets in `[start, end)` of the partition key
    /// space (empty = unbounded); what splits use.
    pub fn partition_key_range(
        mut self,
        start: impl Into<Vec<u8>>,
        end: impl Into<Vec<u8>>,
    ) -> Self {
        self.partition_key_start = start.into();
        self.partition_key_end = end.into();
        self
    }

    /// Asks for columnar result blocks (Kudu 1.12+; fails cleanly on older
    /// servers). Row-wise is the default.
    pub fn columnar(mut self, on: bool) -> Self {
        self.columnar = on;
        self
    }

    /// Whether the servers may cache the blocks read (default true; turn
    /// off for one-off full scans).
    pub fn cache_blocks(mut self, on: bool) -> Self {
        self.cache_blocks = on;
        self
    }

    /// Deadline for opening each tablet (retries included) and for each
    /// continue call. Default: the client's operation timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// While the consumer holds the stream idle mid-tablet for longer than
    /// `interval`, send `ScannerKeepAlive` every `interval` so the server
    /// does not expire the scanner (servers expire idle scanners after
    /// `--scanner_ttl_ms`, 60 s by default). Off by default.
    pub fn keep_alive_interval(mut self, interval: Duration) -> Self {
        self.keep_alive_interval = Some(interval);
        self
    }

    /// For [`scan_splits`](KuduClient::scan_splits): cut each tablet into
    /// key ranges of about this many bytes (asks the tablet servers with
    /// `SplitKeyRange`). Default: one split per tablet.
    pub fn split_size_bytes(mut self, bytes: u64) -> Self {
        self.split_size_bytes = Some(bytes);
        self
    }

    /// The predicates added so far.
    pub fn predicates(&self) -> &[Predicate] {
        &self.predicates
    }

    /// The configured read mode (before fault tolerance / diff adjust it).
    pub fn configured_read_mode(&self) -> ReadMode {
        self.read_mode
    }

    /// Whether the scan is fault tolerant (diff scans always are).
    pub fn is_fault_tolerant(&self) -> bool {
        self.fault_tolerant || self.diff.is_some()
    }

    fn invalid(mut self, msg: String) -> Self {
        self.invalid.get_or_insert(msg);
        self
    }
}

fn encode_key_row(row: &Row) -> Result<Vec<u8>> {
    let keys: Vec<usize> = (0..row.schema().num_key_columns()).collect();
    encode_range_bound(row, &keys)
}
