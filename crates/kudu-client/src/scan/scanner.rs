//! [`ScanSpec`] / [`ScanBuilder`] describe a scan; [`Scanner`] runs it as a
//! `Stream` of [`RowBatch`]es, one tablet after another (spec §8).
//!
//! # Life cycle
//!
//! A scanner walks the table's tablets in partition-key order (§6.5),
//! skipping non-covered ranges. For each tablet it sends one *open*
//! (`NewScanRequestPB`) and then *continue* calls with the server-side
//! `scanner_id` and a `call_seq_id` that grows by one after each answer, to
//! the same server, until `has_more_results` is false. Every answer that
//! carries rows becomes one batch of the stream; nothing is buffered beyond
//! the batch being returned, so memory is bounded by the batch size.
//!
//! The work is an explicit state machine (the private `Phase` enum): *locate* the tablet at
//! the next partition key → *open* a scanner on a replica → *scanning* →
//! *next tablet* → … → *done*. One step of it (at most one round of RPCs
//! that yields a batch) runs as a future that owns the state and hands it
//! back, so the stream needs no self-references.
//!
//! # Snapshots and fault tolerance
//!
//! - `READ_LATEST` reads whatever each tablet has when it is opened.
//! - `READ_AT_SNAPSHOT` reads at a fixed hybrid time. With no time given
//!   ("now"), the first tablet's answer says which time the server picked
//!   and every later tablet, and every reopen, reuses it.
//! - A *fault-tolerant* scan is `ORDERED` (rows in primary-key order per
//!   tablet) and remembers the last primary key returned. If a continue
//!   call fails because the tablet moved, the replica is no longer leader,
//!   the scanner expired, the server went away or the call timed out, the
//!   scanner reopens the same tablet at another healthy replica with
//!   `last_primary_key` set (no start key), the same snapshot and a fresh
//!   `call_seq_id`, so no row is lost or repeated. A scan that is not
//!   fault tolerant fails instead: rows already returned could not be
//!   skipped reliably.
//! - A *diff scan* (`diff(start, end)`) returns every row changed in
//!   `[start, end)` with its values as of `end`, plus an IS_DELETED virtual
//!   column, read with [`RowView::is_deleted`](super::decode::RowView::is_deleted).
//!
//! Opening a tablet is retried (refreshing locations, backing off) until
//! the scan's timeout, as [`Error::retry_action`](crate::Error::retry_action)
//! classifies the errors.
//!
//! Dropping a scanner while a server-side scanner is open spawns a
//! best-effort close on the current tokio runtime.

use std::collections::HashSet;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream};
use rand::seq::SliceRandom;

use super::decode::RowBatch;
use super::predicate::{Encoded, Predicate};
use crate::client::{tserver_error, KuduClient};
use crate::error::{KuduStatus, RetryAction, StatusCode};
use crate::hybrid_time::HybridTime;
use crate::meta::{Lookup, RemoteTablet, Replica};
use crate::partition::key::encode_range_bound;
use crate::pb;
use crate::pb::tserver::tablet_server_error_pb::Code as TsCode;
use crate::pb::tserver::tablet_server_service::{Scan, ScannerKeepAlive};
use crate::pb::tserver::{
    NewScanRequestPb, ScanRequestPb, ScanResponsePb, ScannerKeepAliveRequestPb,
};
use crate::retry::Retrier;
use crate::rpc::CallOptions;
use crate::schema::{Row, Schema, SchemaPbOptions};
use crate::table::KuduTable;
use crate::{Error, Result};

/// `TabletServerFeatures.COLUMN_PREDICATES`.
const FEATURE_COLUMN_PREDICATES: u32 = 1;
/// `TabletServerFeatures.COLUMNAR_LAYOUT_FEATURE`.
const FEATURE_COLUMNAR_LAYOUT: u32 = 5;
/// `RowFormatFlags.COLUMNAR_LAYOUT`.
const ROW_FORMAT_COLUMNAR: u64 = 2;

/// How a scan reads data in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
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

    /// Inclusive lower bound on the primary key, as an encoded key (§6.3).
    /// An empty key means unbounded.
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

/// Builds a [`Scanner`] for one table: [`KuduClient::scan_builder`].
///
/// ```no_run
/// # async fn f(client: kudu_client::KuduClient) -> kudu_client::Result<()> {
/// use futures::TryStreamExt;
/// use kudu_client::scan::{ComparisonOp, Predicate};
/// let table = client.open_table("metrics").await?;
/// let mut scanner = client
///     .scan_builder(&table)
///     .projection(&["host", "value"])
///     .predicate(Predicate::comparison("value", ComparisonOp::Greater, 10i64))
///     .fault_tolerant(true)
///     .build()?;
/// while let Some(batch) = scanner.try_next().await? {
///     for row in batch.rows() {
///         println!("{} {}", row.get_str("host")?, row.get_i64("value")?);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ScanBuilder {
    client: KuduClient,
    table: KuduTable,
    spec: ScanSpec,
}

macro_rules! forward {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(<$($g:ident: $b:path),*>)?; )*) => {
        $(
            $(#[$doc])*
            pub fn $name$(<$($g: $b),*>)?(mut self, $($arg: $ty),*) -> Self {
                self.spec = self.spec.$name($($arg),*);
                self
            }
        )*
    };
}

impl ScanBuilder {
    /// A builder scanning `table` with `client`.
    pub fn new(client: &KuduClient, table: &KuduTable) -> Self {
        ScanBuilder {
            client: client.clone(),
            table: table.clone(),
            spec: ScanSpec::new(),
        }
    }

    /// Replaces the whole scan description.
    pub fn with_spec(mut self, spec: ScanSpec) -> Self {
        self.spec = spec;
        self
    }

    /// The scan description built so far.
    pub fn spec(&self) -> &ScanSpec {
        &self.spec
    }

    /// Reads only these columns, in this order (empty: count rows only).
    pub fn projection<S: AsRef<str>>(mut self, columns: &[S]) -> Self {
        self.spec = self.spec.projection(columns);
        self
    }

    forward! {
        /// Adds a predicate; rows must satisfy all of them.
        fn predicate(p: Predicate);
        /// Sets the read mode.
        fn read_mode(m: ReadMode);
        /// `READ_AT_SNAPSHOT` at `ts`.
        fn snapshot(ts: HybridTime);
        /// `READ_AT_SNAPSHOT` at the time the first server picks.
        fn snapshot_now();
        /// Fault tolerant (ORDERED, resumable); implies a snapshot read.
        fn fault_tolerant(on: bool);
        /// Diff scan of the changes in `[start, end)`.
        fn diff(start: HybridTime, end: HybridTime);
        /// Bytes of row data per batch (hint).
        fn batch_size_bytes(bytes: u32);
        /// Stops after this many rows.
        fn limit(rows: u64);
        /// Which replica serves each tablet.
        fn replica_selection(s: ReplicaSelection);
        /// Inclusive lower primary-key bound, encoded.
        fn lower_bound_key(key: Vec<u8>);
        /// Exclusive upper primary-key bound, encoded.
        fn exclusive_upper_bound_key(key: Vec<u8>);
        /// Inclusive lower primary-key bound, as a row.
        fn lower_bound(row: &Row);
        /// Exclusive upper primary-key bound, as a row.
        fn exclusive_upper_bound(row: &Row);
        /// Restricts the scan to `[start, end)` of the partition key space.
        fn partition_key_range(start: Vec<u8>, end: Vec<u8>);
        /// Columnar result blocks (1.12+).
        fn columnar(on: bool);
        /// Whether servers may cache the blocks read.
        fn cache_blocks(on: bool);
        /// Deadline per tablet open and per continue call.
        fn timeout(t: Duration);
        /// Automatic keep-alive while the consumer is idle.
        fn keep_alive_interval(interval: Duration);
    }

    /// Checks the description against the table and returns the scanner.
    /// Nothing is sent until the stream is first polled.
    pub fn build(self) -> Result<Scanner> {
        Scanner::new(&self.client, &self.table, &self.spec)
    }
}

impl KuduClient {
    /// Starts describing a scan of `table`.
    pub fn scan_builder(&self, table: &KuduTable) -> ScanBuilder {
        ScanBuilder::new(self, table)
    }
}

/// A scan description checked against a table schema: what each request
/// carries. Shared by all steps of one scan.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Schema of the batches (IS_DELETED last for diff scans).
    pub projection: Schema,
    /// Projected column names without the IS_DELETED column.
    pub projected_names: Vec<String>,
    pub projected_columns: Vec<pb::ColumnSchemaPb>,
    pub predicates: Vec<pb::ColumnPredicatePb>,
    pub matches_nothing: bool,
    /// `None` = READ_LATEST; `Some(None)` = snapshot at the server's "now".
    pub snapshot: Option<Option<HybridTime>>,
    pub diff_start: Option<HybridTime>,
    pub ordered: bool,
    pub batch_size_bytes: Option<u32>,
    pub limit: Option<u64>,
    pub replica_selection: ReplicaSelection,
    pub lower_bound: Option<Vec<u8>>,
    pub upper_bound: Option<Vec<u8>>,
    pub partition_key_start: Vec<u8>,
    pub partition_key_end: Vec<u8>,
    pub columnar: bool,
    pub cache_blocks: bool,
    pub timeout: Duration,
    pub keep_alive_interval: Option<Duration>,
    pub resume_key: Option<Vec<u8>>,
}

impl Plan {
    /// Validates `spec` against `table`.
    pub(crate) fn new(client: &KuduClient, table: &KuduTable, spec: &ScanSpec) -> Result<Plan> {
        if let Some(msg) = &spec.invalid {
            return Err(Error::InvalidArgument(msg.clone()));
        }
        let schema = table.schema();
        let names: Vec<String> = match &spec.projection {
            Some(names) => names.clone(),
            None => schema
                .columns()
                .iter()
                .map(|c| c.name().to_owned())
                .collect(),
        };
        let mut seen = HashSet::new();
        for n in &names {
            if !seen.insert(n.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "column '{n}' is projected twice"
                )));
            }
        }
        let mut projection = schema.project(&names).map_err(|e| {
            Error::InvalidArgument(format!("projection of table '{}': {e}", table.name()))
        })?;
        if spec.diff.is_some() {
            // The virtual column's name must not collide with any column of
            // the table, projected or not.
            let full = schema.with_is_deleted()?;
            let mut cols = projection.columns().to_vec();
            if let Some(is_deleted) = full.columns().last() {
                cols.push(is_deleted.clone());
            }
            projection = Schema::new(cols)?;
        }
        let projected_columns = projection.columns_to_pb(SchemaPbOptions::PROJECTION)?;

        let mut predicates = spec.raw_predicates.clone();
        let mut matches_nothing = spec.limit == Some(0);
        for p in &spec.predicates {
            match p.encode(schema)? {
                Encoded::Pb(pb) => predicates.push(pb),
                Encoded::MatchesNothing => matches_nothing = true,
            }
        }

        let (snapshot, diff_start, ordered) = match spec.diff {
            Some((start, end)) => {
                if start > end {
                    return Err(Error::InvalidArgument(format!(
                        "diff scan start {start} is after its end {end}"
                    )));
                }
                (Some(Some(end)), Some(start), true)
            }
            None => match (spec.read_mode, spec.fault_tolerant) {
                (ReadMode::Latest, false) => (None, None, false),
                // ORDERED scans must be snapshot reads (the server insists).
                (ReadMode::Latest, true) => (Some(None), None, true),
                (ReadMode::Snapshot(ts), ft) => (Some(ts), None, ft),
            },
        };
        if spec.resume_key.is_some() && !ordered {
            return Err(Error::InvalidArgument(
                "a resume key needs a fault-tolerant (ORDERED) scan".into(),
            ));
        }
        let (pks, pke) = (&spec.partition_key_start, &spec.partition_key_end);
        if !pks.is_empty() && !pke.is_empty() && pks > pke {
            return Err(Error::InvalidArgument(
                "partition key range start is after its end".into(),
            ));
        }
        if let (Some(lo), Some(hi)) = (&spec.lower_bound, &spec.upper_bound) {
            if lo >= hi {
                matches_nothing = true;
            }
        }
        Ok(Plan {
            projection,
            projected_names: names,
            projected_columns,
            predicates,
            matches_nothing,
            snapshot,
            diff_start,
            ordered,
            batch_size_bytes: spec.batch_size_bytes,
            limit: spec.limit,
            replica_selection: spec.replica_selection,
            lower_bound: spec.lower_bound.clone(),
            upper_bound: spec.upper_bound.clone(),
            partition_key_start: spec.partition_key_start.clone(),
            partition_key_end: spec.partition_key_end.clone(),
            columnar: spec.columnar,
            cache_blocks: spec.cache_blocks,
            timeout: spec.timeout.unwrap_or_else(|| client.operation_timeout()),
            keep_alive_interval: spec.keep_alive_interval,
            resume_key: spec.resume_key.clone(),
        })
    }
}

/// Where the scan is, as plain data (see the module docs).
#[derive(Debug)]
enum Phase {
    /// Find the tablet covering `Core::next_key`.
    Locate,
    /// Open a scanner on `tablet` (resuming after `Core::last_primary_key`
    /// if set).
    Open { tablet: Arc<RemoteTablet> },
    /// A server-side scanner is open on `addr`.
    Scanning {
        tablet: Arc<RemoteTablet>,
        addr: String,
        scanner_id: Vec<u8>,
        call_seq_id: u32,
    },
    /// `tablet` is exhausted; continue after it.
    NextTablet { tablet: Arc<RemoteTablet> },
    /// Nothing more to read.
    Done,
}

/// The state of one scan, owned by whichever step is running.
struct Core {
    client: KuduClient,
    table: KuduTable,
    plan: Arc<Plan>,
    phase: Phase,
    /// Partition key where the next tablet starts.
    next_key: Vec<u8>,
    /// The snapshot in use once known (given, or from the first answer).
    snapshot: Option<HybridTime>,
    /// Encoded key of the last row returned from the current tablet.
    last_primary_key: Option<Vec<u8>>,
    /// Rows returned so far (for the limit).
    rows_returned: u64,
    /// Servers that failed for the current tablet.
    bad_servers: HashSet<String>,
    /// Servers that served the current tablet, for diagnostics.
    last_server: Option<String>,
}

/// Read-only view of the scan's position, refreshed after every step.
#[derive(Debug, Clone, Default)]
struct Progress {
    snapshot: Option<HybridTime>,
    last_primary_key: Option<Vec<u8>>,
    tablet_id: Option<String>,
    server: Option<String>,
    rows_returned: u64,
}

/// What the automatic keep-alive task may ping: set while the stream is
/// idle with a server-side scanner open.
#[derive(Debug, Default)]
struct KeepAliveSlot {
    target: Option<(String, Vec<u8>)>,
    idle_since: Option<Instant>,
}

type StepFuture = BoxFuture<'static, (Box<Core>, Result<Option<RowBatch>>)>;

enum State {
    Idle(Box<Core>),
    Busy(StepFuture),
    Finished,
}

/// A running scan: a `Stream` of [`RowBatch`]es (see the module docs).
///
/// Errors end the stream: after an `Err` item the stream yields `None`.
pub struct Scanner {
    state: State,
    projection: Schema,
    progress: Progress,
    keep_alive: Arc<Mutex<KeepAliveSlot>>,
    keep_alive_task: bool,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("projection", &self.projection)
            .field("progress", &self.progress)
            .finish_non_exhaustive()
    }
}

impl Scanner {
    pub(crate) fn new(client: &KuduClient, table: &KuduTable, spec: &ScanSpec) -> Result<Scanner> {
        let plan = Plan::new(client, table, spec)?;
        Ok(Self::from_plan(client, table, plan))
    }

    pub(crate) fn from_plan(client: &KuduClient, table: &KuduTable, plan: Plan) -> Scanner {
        let projection = plan.projection.clone();
        let snapshot = plan.snapshot.flatten();
        let phase = if plan.matches_nothing {
            Phase::Done
        } else {
            Phase::Locate
        };
        let core = Core {
            client: client.clone(),
            table: table.clone(),
            next_key: plan.partition_key_start.clone(),
            last_primary_key: plan.resume_key.clone(),
            plan: Arc::new(plan),
            phase,
            snapshot,
            rows_returned: 0,
            bad_servers: HashSet::new(),
            last_server: None,
        };
        let mut s = Scanner {
            state: State::Idle(Box::new(core)),
            projection,
            progress: Progress::default(),
            keep_alive: Arc::new(Mutex::new(KeepAliveSlot::default())),
            keep_alive_task: false,
        };
        if let State::Idle(core) = &s.state {
            s.progress = core.progress();
        }
        s
    }

    /// Schema of the batches: the projection (plus IS_DELETED for diff
    /// scans).
    pub fn projection_schema(&self) -> &Schema {
        &self.projection
    }

    /// The snapshot the scan reads at, once known.
    pub fn snapshot_timestamp(&self) -> Option<HybridTime> {
        self.progress.snapshot
    }

    /// Encoded primary key of the last row returned from the current
    /// tablet (ORDERED scans), e.g. to resume a split with
    /// [`Split::with_resume_key`](super::split::Split::with_resume_key).
    pub fn last_primary_key(&self) -> Option<&[u8]> {
        self.progress.last_primary_key.as_deref()
    }

    /// The tablet being scanned, if any.
    pub fn current_tablet_id(&self) -> Option<&str> {
        self.progress.tablet_id.as_deref()
    }

    /// The server that served the last batch, if any.
    pub fn current_server(&self) -> Option<&str> {
        self.progress.server.as_deref()
    }

    /// Rows returned so far.
    pub fn rows_returned(&self) -> u64 {
        self.progress.rows_returned
    }

    /// The next batch, or `None` at the end (a convenience over the
    /// `Stream` impl).
    pub async fn next_batch(&mut self) -> Result<Option<RowBatch>> {
        futures::StreamExt::next(self).await.transpose()
    }

    /// Tells the server not to expire the open scanner (if one is open and
    /// no call is in flight). An expired scanner of a fault-tolerant scan
    /// is reopened at the next poll; otherwise the expiry is returned.
    pub async fn keep_alive(&mut self) -> Result<()> {
        let State::Idle(core) = &mut self.state else {
            return Ok(());
        };
        let Phase::Scanning {
            tablet,
            addr,
            scanner_id,
            ..
        } = &core.phase
        else {
            return Ok(());
        };
        let (tablet, addr) = (tablet.clone(), addr.clone());
        let req = ScannerKeepAliveRequestPb {
            scanner_id: scanner_id.clone(),
        };
        let opts = CallOptions::with_timeout(core.plan.timeout);
        let result = match core
            .client
            .pool()
            .call::<ScannerKeepAlive>(&addr, &req, &opts)
            .await
        {
            Ok(resp) => match resp.body.error {
                Some(e) => Err(tserver_error(&e, &addr, &tablet.tablet_id)),
                None => Ok(()),
            },
            Err(e) => Err(e),
        };
        match result {
            Err(e) if core.plan.ordered && resumable(&e, None) => {
                tracing::debug!(tablet = %tablet.tablet_id, %addr, error = %e, "keep-alive failed; the scan will reopen");
                if e.server_unusable() {
                    core.bad_servers.insert(addr);
                }
                core.phase = Phase::Open { tablet };
                Ok(())
            }
            other => other,
        }
    }

    /// Closes the server-side scanner (if one is open) and ends the stream.
    pub async fn close(&mut self) {
        if let State::Idle(core) = &mut self.state {
            if let Phase::Scanning {
                addr, scanner_id, ..
            } = std::mem::replace(&mut core.phase, Phase::Done)
            {
                close_scanner(core.client.clone(), addr, scanner_id).await;
            }
        }
        self.state = State::Finished;
        self.set_keep_alive_target(None);
    }

    fn set_keep_alive_target(&self, target: Option<(String, Vec<u8>)>) {
        if let Ok(mut slot) = self.keep_alive.lock() {
            slot.idle_since = target.as_ref().map(|_| Instant::now());
            slot.target = target;
        }
    }

    /// After a step: publish the open scanner for the keep-alive task and
    /// start that task the first time it is needed.
    fn after_step(&mut self, core: &Core) {
        let Some(interval) = core.plan.keep_alive_interval else {
            return;
        };
        let target = match &core.phase {
            Phase::Scanning {
                addr, scanner_id, ..
            } => Some((addr.clone(), scanner_id.clone())),
            _ => None,
        };
        let needed = target.is_some();
        self.set_keep_alive_target(target);
        if needed && !self.keep_alive_task {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                self.keep_alive_task = true;
                handle.spawn(keep_alive_loop(
                    Arc::downgrade(&self.keep_alive),
                    core.client.clone(),
                    interval,
                ));
            }
        }
    }
}

/// Pings the idle scanner published in `slot` every `interval` until the
/// scanner is dropped.
async fn keep_alive_loop(slot: Weak<Mutex<KeepAliveSlot>>, client: KuduClient, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(slot) = slot.upgrade() else { return };
        let target = match slot.lock() {
            Ok(s) => match (&s.target, s.idle_since) {
                (Some(t), Some(since)) if since.elapsed() >= interval => Some(t.clone()),
                _ => None,
            },
            Err(_) => return,
        };
        drop(slot);
        if let Some((addr, scanner_id)) = target {
            let req = ScannerKeepAliveRequestPb { scanner_id };
            let opts = CallOptions::with_timeout(interval.max(Duration::from_secs(1)));
            match client
                .pool()
                .call::<ScannerKeepAlive>(&addr, &req, &opts)
                .await
            {
                Ok(resp) if resp.body.error.is_none() => {
                    tracing::trace!(%addr, "scanner keep-alive sent")
                }
                Ok(resp) => {
                    tracing::debug!(%addr, error = ?resp.body.error, "scanner keep-alive refused")
                }
                Err(e) => tracing::debug!(%addr, error = %e, "scanner keep-alive failed"),
            }
        }
    }
}

impl Stream for Scanner {
    type Item = Result<RowBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            match std::mem::replace(&mut this.state, State::Finished) {
                State::Finished => return Poll::Ready(None),
                State::Idle(mut core) => {
                    if matches!(core.phase, Phase::Done) {
                        this.state = State::Idle(core);
                        return Poll::Ready(None);
                    }
                    this.set_keep_alive_target(None);
                    let fut = async move {
                        let r = core.step().await;
                        (core, r)
                    }
                    .boxed();
                    this.state = State::Busy(fut);
                }
                State::Busy(mut fut) => match fut.poll_unpin(cx) {
                    Poll::Pending => {
                        this.state = State::Busy(fut);
                        return Poll::Pending;
                    }
                    Poll::Ready((core, result)) => {
                        this.progress = core.progress();
                        this.after_step(&core);
                        match result {
                            Ok(Some(batch)) => {
                                this.state = State::Idle(core);
                                return Poll::Ready(Some(Ok(batch)));
                            }
                            Ok(None) => {
                                this.state = State::Idle(core);
                                return Poll::Ready(None);
                            }
                            Err(e) => {
                                // The core is dropped here; its Drop closes
                                // any open server-side scanner.
                                this.state = State::Finished;
                                return Poll::Ready(Some(Err(e)));
                            }
                        }
                    }
                },
            }
        }
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        if let Phase::Scanning {
            addr, scanner_id, ..
        } = std::mem::replace(&mut self.phase, Phase::Done)
        {
            spawn_close(&self.client, addr, scanner_id);
        }
    }
}

/// Closes a server-side scanner in the background, if a tokio runtime is
/// around (otherwise the server expires it after its TTL).
fn spawn_close(client: &KuduClient, addr: String, scanner_id: Vec<u8>) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(close_scanner(client.clone(), addr, scanner_id));
    }
}

/// Best-effort close of a server-side scanner.
async fn close_scanner(client: KuduClient, addr: String, scanner_id: Vec<u8>) {
    let req = ScanRequestPb {
        scanner_id: Some(scanner_id),
        batch_size_bytes: Some(0),
        close_scanner: Some(true),
        ..Default::default()
    };
    let opts = CallOptions::with_timeout(Duration::from_secs(10));
    if let Err(e) = client.pool().call::<Scan>(&addr, &req, &opts).await {
        tracing::debug!(%addr, error = %e, "closing a scanner failed (it will expire)");
    }
}

/// Whether a failed continue (or keep-alive) of an ORDERED scan should be
/// answered by reopening the tablet elsewhere (§8.4): a new attempt may
/// succeed, or another replica may serve it. A call-sequence mismatch (an
/// answer lost in transit) also means "reopen".
fn resumable(err: &Error, code: Option<TsCode>) -> bool {
    matches!(code, Some(TsCode::InvalidScanCallSeqId))
        || err.is_transient()
        || err.server_unusable()
}

/// Whether `host` (from `host:port`) is this machine, for CLOSEST_REPLICA.
/// Binding a socket to an IP succeeds only for local addresses.
fn is_local_host(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(ip) if ip.is_loopback() => true,
        Ok(ip) => std::net::UdpSocket::bind((ip, 0)).is_ok(),
        Err(_) => false,
    }
}

/// Outcome of one open or continue call.
enum CallOutcome {
    Ok(Box<ScanResponsePb>, Vec<bytes::Bytes>),
    Failed(Error, Option<TsCode>),
}

impl Core {
    fn progress(&self) -> Progress {
        let tablet_id = match &self.phase {
            Phase::Open { tablet }
            | Phase::Scanning { tablet, .. }
            | Phase::NextTablet { tablet } => Some(tablet.tablet_id.clone()),
            Phase::Locate | Phase::Done => None,
        };
        Progress {
            snapshot: self.snapshot,
            last_primary_key: self.last_primary_key.clone(),
            tablet_id,
            server: self.last_server.clone(),
            rows_returned: self.rows_returned,
        }
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.plan.timeout
    }

    fn limit_reached(&self) -> bool {
        self.plan.limit.is_some_and(|l| self.rows_returned >= l)
    }

    /// Runs the state machine until it yields a non-empty batch (`Some`) or
    /// finishes (`None`).
    async fn step(&mut self) -> Result<Option<RowBatch>> {
        loop {
            match &self.phase {
                Phase::Done => return Ok(None),
                Phase::Locate => self.locate().await?,
                Phase::NextTablet { tablet } => {
                    let end = tablet.partition_key_end.clone();
                    self.last_primary_key = None;
                    self.bad_servers.clear();
                    let past_range = !self.plan.partition_key_end.is_empty()
                        && end >= self.plan.partition_key_end;
                    if end.is_empty() || past_range || self.limit_reached() {
                        self.phase = Phase::Done;
                    } else {
                        self.next_key = end;
                        self.phase = Phase::Locate;
                    }
                }
                Phase::Open { tablet } => {
                    let tablet = tablet.clone();
                    if let Some(batch) = self.open(tablet).await? {
                        return Ok(Some(batch));
                    }
                }
                Phase::Scanning { .. } => {
                    if let Some(batch) = self.continue_scan().await? {
                        return Ok(Some(batch));
                    }
                }
            }
        }
    }

    /// `Locate` → `Open` on the tablet at `next_key`, skipping gaps.
    async fn locate(&mut self) -> Result<()> {
        let deadline = self.deadline();
        let end = &self.plan.partition_key_end;
        match self
            .client
            .locate_with_retry(&self.table, &self.next_key, deadline)
            .await?
        {
            Lookup::Tablet(t) => {
                if !end.is_empty() && t.partition_key_start.as_slice() >= end.as_slice() {
                    self.phase = Phase::Done;
                } else {
                    self.phase = Phase::Open { tablet: t };
                }
            }
            Lookup::NonCovered { end: gap_end } => {
                if gap_end.is_empty()
                    || (!end.is_empty() && gap_end >= *end)
                    || gap_end <= self.next_key
                {
                    self.phase = Phase::Done;
                } else {
                    self.next_key = gap_end;
                }
            }
            Lookup::Miss => self.phase = Phase::Done,
        }
        Ok(())
    }

    /// Picks the replica to open the scan on, avoiding `bad_servers`.
    fn pick_replica(&mut self, tablet: &RemoteTablet) -> Option<Replica> {
        let healthy: Vec<&Replica> = tablet
            .replicas
            .iter()
            .filter(|r| !self.bad_servers.contains(&r.addr))
            .collect();
        let mut rng = rand::thread_rng();
        match self.plan.replica_selection {
            ReplicaSelection::LeaderOnly => {
                if let Some(l) = healthy.iter().find(|r| r.role == crate::meta::Role::Leader) {
                    return Some((*l).clone());
                }
                // Snapshot reads are consistent on any replica.
                if self.plan.snapshot.is_some() {
                    healthy.choose(&mut rng).map(|r| (*r).clone())
                } else {
                    None
                }
            }
            ReplicaSelection::ClosestReplica => {
                let local: Vec<&&Replica> =
                    healthy.iter().filter(|r| is_local_host(&r.addr)).collect();
                match local.choose(&mut rng) {
                    Some(r) => Some((**r).clone()),
                    None => healthy.choose(&mut rng).map(|r| (*r).clone()),
                }
            }
        }
    }

    fn new_scan_request(&self, tablet: &RemoteTablet) -> NewScanRequestPb {
        let plan = &self.plan;
        // A resume key below the lower bound (a stale or foreign key) must
        // not widen the scan: start at the bound instead.
        let resume = self
            .last_primary_key
            .clone()
            .filter(|k| plan.lower_bound.as_ref().is_none_or(|lo| k >= lo));
        NewScanRequestPb {
            tablet_id: tablet.tablet_id.as_bytes().to_vec(),
            limit: plan.limit.map(|l| l.saturating_sub(self.rows_returned)),
            projected_columns: plan.projected_columns.clone(),
            read_mode: Some(if plan.snapshot.is_some() {
                pb::ReadMode::ReadAtSnapshot as i32
            } else {
                pb::ReadMode::ReadLatest as i32
            }),
            snap_timestamp: self.snapshot.map(HybridTime::raw),
            propagated_timestamp: self.client.last_propagated_raw(),
            // Never both a start key and a resume key (§8.1).
            start_primary_key: if resume.is_none() {
                plan.lower_bound.clone()
            } else {
                None
            },
            stop_primary_key: plan.upper_bound.clone(),
            cache_blocks: (!plan.cache_blocks).then_some(false),
            order_mode: plan.ordered.then_some(pb::OrderMode::Ordered as i32),
            last_primary_key: resume,
            column_predicates: plan.predicates.clone(),
            row_format_flags: plan.columnar.then_some(ROW_FORMAT_COLUMNAR),
            authz_token: self.table.authz_token().cloned(),
            snap_start_timestamp: plan.diff_start.map(HybridTime::raw),
        }
    }

    fn call_options(&self, deadline: Instant) -> CallOptions {
        let mut opts = CallOptions::with_deadline(tokio::time::Instant::from_std(deadline));
        if !self.plan.predicates.is_empty() {
            opts = opts.require_feature(FEATURE_COLUMN_PREDICATES);
        }
        if self.plan.columnar {
            opts = opts.require_feature(FEATURE_COLUMNAR_LAYOUT);
        }
        opts
    }

    async fn call(
        &self,
        addr: &str,
        tablet_id: &str,
        req: &ScanRequestPb,
        opts: &CallOptions,
    ) -> CallOutcome {
        match self.client.pool().call::<Scan>(addr, req, opts).await {
            Ok(resp) => {
                if let Some(ts) = resp.body.propagated_timestamp {
                    self.client.observe_timestamp(ts);
                }
                match &resp.body.error {
                    Some(e) => {
                        let code = TsCode::try_from(e.code).ok();
                        CallOutcome::Failed(tserver_error(e, addr, tablet_id), code)
                    }
                    None => CallOutcome::Ok(Box::new(resp.body), resp.sidecars),
                }
            }
            Err(e) => CallOutcome::Failed(e, None),
        }
    }

    /// Re-resolves the tablet covering `tablet`'s start after a routing
    /// error, keeping `tablet` if the lookup fails.
    async fn relocate(&mut self, tablet: &Arc<RemoteTablet>) -> Result<Arc<RemoteTablet>> {
        self.client
            .invalidate_tablet(self.table.id(), &tablet.tablet_id);
        let deadline = self.deadline();
        match self
            .client
            .locate_with_retry(&self.table, &tablet.partition_key_start, deadline)
            .await?
        {
            Lookup::Tablet(t) => {
                if t.tablet_id != tablet.tablet_id {
                    if self.last_primary_key.is_some() {
                        // Rows were returned from the old tablet; resuming in a
                        // different one is only safe by key, which we keep.
                        tracing::warn!(old = %tablet.tablet_id, new = %t.tablet_id, "tablet replaced mid-scan; resuming by primary key");
                    }
                    self.bad_servers.clear();
                }
                Ok(t)
            }
            // The range was dropped: nothing left to read there.
            _ => Err(Error::TabletNotFound {
                tablet_id: tablet.tablet_id.clone(),
                addr: "master (the tablet's range is no longer covered)".into(),
            }),
        }
    }

    /// `Open`: opens a scanner on `tablet`, retrying per [`Retrier`].
    async fn open(&mut self, mut tablet: Arc<RemoteTablet>) -> Result<Option<RowBatch>> {
        let mut retrier = Retrier::new(
            format!(
                "opening a scan of tablet {} of table '{}'",
                tablet.tablet_id,
                self.table.name()
            ),
            self.plan.timeout,
        );
        loop {
            retrier.begin_attempt();
            let Some(replica) = self.pick_replica(&tablet) else {
                let err = if self.bad_servers.is_empty() {
                    Error::NotLeaderReplica {
                        tablet_id: tablet.tablet_id.clone(),
                        addr: "(no leader known)".into(),
                    }
                } else {
                    Error::ServiceUnavailable {
                        addr: format!("replicas of tablet {}", tablet.tablet_id),
                        message: format!(
                            "no healthy replica (failed: {})",
                            self.bad_servers
                                .iter()
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    }
                };
                // Give every replica another chance after the back-off.
                self.bad_servers.clear();
                retrier.on_error(err).await?;
                tablet = self.relocate(&tablet).await?;
                self.phase = Phase::Open {
                    tablet: tablet.clone(),
                };
                continue;
            };
            let req = ScanRequestPb {
                new_scan_request: Some(self.new_scan_request(&tablet)),
                batch_size_bytes: self.plan.batch_size_bytes,
                ..Default::default()
            };
            let opts = self.call_options(retrier.deadline());
            match self
                .call(&replica.addr, &tablet.tablet_id, &req, &opts)
                .await
            {
                CallOutcome::Ok(resp, sidecars) => {
                    self.last_server = Some(replica.addr.clone());
                    if self.plan.snapshot.is_some() && self.snapshot.is_none() {
                        // A server that short-circuits an open (predicates
                        // that match nothing) reports no snapshot; its clock
                        // then stands in, so later tablets share one time.
                        self.snapshot = resp
                            .snap_timestamp
                            .or(resp.propagated_timestamp)
                            .map(HybridTime::from_raw);
                    }
                    let scanner_id = resp
                        .scanner_id
                        .clone()
                        .filter(|_| resp.has_more_results == Some(true));
                    let batch = self.take_batch(&resp, &sidecars, &replica.addr)?;
                    self.phase = match scanner_id {
                        Some(scanner_id) => Phase::Scanning {
                            tablet,
                            addr: replica.addr,
                            scanner_id,
                            call_seq_id: 1,
                        },
                        None => Phase::NextTablet { tablet },
                    };
                    self.finish_if_limit_reached();
                    return Ok(batch);
                }
                CallOutcome::Failed(err, _) => {
                    tracing::debug!(tablet = %tablet.tablet_id, addr = %replica.addr, error = %err, "scan open failed");
                    let refresh =
                        err.server_unusable() || err.retry_action() == RetryAction::RefreshAndRetry;
                    if err.server_unusable() {
                        self.bad_servers.insert(replica.addr.clone());
                    }
                    retrier.on_error(err).await?;
                    if refresh {
                        tablet = self.relocate(&tablet).await?;
                        self.phase = Phase::Open {
                            tablet: tablet.clone(),
                        };
                    }
                }
            }
        }
    }

    /// `Scanning`: one continue call; on failure either reopens (fault
    /// tolerant) or fails.
    async fn continue_scan(&mut self) -> Result<Option<RowBatch>> {
        let Phase::Scanning {
            tablet,
            addr,
            scanner_id,
            call_seq_id,
        } = &self.phase
        else {
            return Ok(None);
        };
        let (tablet, addr) = (tablet.clone(), addr.clone());
        let req = ScanRequestPb {
            scanner_id: Some(scanner_id.clone()),
            call_seq_id: Some(*call_seq_id),
            batch_size_bytes: self.plan.batch_size_bytes,
            ..Default::default()
        };
        let opts = self.call_options(self.deadline());
        match self.call(&addr, &tablet.tablet_id, &req, &opts).await {
            CallOutcome::Ok(resp, sidecars) => {
                let batch = self.take_batch(&resp, &sidecars, &addr)?;
                if resp.has_more_results == Some(true) {
                    if let Phase::Scanning { call_seq_id, .. } = &mut self.phase {
                        *call_seq_id += 1;
                    }
                } else {
                    // The server dropped the scanner itself.
                    self.phase = Phase::NextTablet { tablet };
                }
                self.finish_if_limit_reached();
                Ok(batch)
            }
            CallOutcome::Failed(err, code) => {
                if self.plan.ordered && resumable(&err, code) {
                    tracing::info!(
                        tablet = %tablet.tablet_id, %addr, error = %err,
                        "scan interrupted; reopening the tablet at another replica"
                    );
                    if let Phase::Scanning {
                        addr, scanner_id, ..
                    } = std::mem::replace(
                        &mut self.phase,
                        Phase::Open {
                            tablet: tablet.clone(),
                        },
                    ) {
                        // If the server is still there, free its scanner.
                        if !err.server_unusable() {
                            spawn_close(&self.client, addr, scanner_id);
                        }
                    }
                    if err.server_unusable() || matches!(err, Error::NotLeaderReplica { .. }) {
                        self.bad_servers.insert(addr);
                        self.client
                            .invalidate_tablet(self.table.id(), &tablet.tablet_id);
                    }
                    return Ok(None);
                }
                // The server-side scanner is unusable: forget it.
                self.phase = Phase::Done;
                if !self.plan.ordered && resumable(&err, code) {
                    Err(mid_scan_failure(&err, &tablet.tablet_id, &addr))
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Folds a successful answer into the state and decodes its rows;
    /// `None` for an answer without rows.
    fn take_batch(
        &mut self,
        resp: &ScanResponsePb,
        sidecars: &[bytes::Bytes],
        addr: &str,
    ) -> Result<Option<RowBatch>> {
        if let Some(k) = &resp.last_primary_key {
            self.last_primary_key = Some(k.clone());
        }
        let with_addr = |e: Error| match e {
            Error::Protocol { message, .. } => Error::Protocol {
                addr: addr.to_owned(),
                message,
            },
            e => e,
        };
        let batch = if let Some(block) = &resp.columnar_data {
            RowBatch::from_columnar(&self.plan.projection, block, sidecars).map_err(with_addr)?
        } else if let Some(block) = &resp.data {
            RowBatch::from_rowwise(&self.plan.projection, block, sidecars).map_err(with_addr)?
        } else {
            return Ok(None);
        };
        if batch.is_empty() {
            return Ok(None);
        }
        self.rows_returned += batch.num_rows() as u64;
        Ok(Some(batch))
    }

    /// Ends the scan once the row limit is met, closing an open scanner.
    fn finish_if_limit_reached(&mut self) {
        if !self.limit_reached() {
            return;
        }
        if let Phase::Scanning {
            addr, scanner_id, ..
        } = std::mem::replace(&mut self.phase, Phase::Done)
        {
            spawn_close(&self.client, addr, scanner_id);
        }
    }
}

/// The error of a scan that is not fault tolerant when a continue call
/// fails in a way a fault-tolerant scan would have survived.
fn mid_scan_failure(err: &Error, tablet_id: &str, addr: &str) -> Error {
    let code = match err {
        Error::ScannerExpired { .. } | Error::TabletNotFound { .. } => StatusCode::NotFound,
        Error::NotLeaderReplica { .. } => StatusCode::IllegalState,
        Error::Io { .. } | Error::ConnectionClosed { .. } => StatusCode::NetworkError,
        Error::TimedOut { .. } => StatusCode::TimedOut,
        Error::ServiceUnavailable { .. } => StatusCode::ServiceUnavailable,
        Error::Status { status, .. } => status.code,
        _ => StatusCode::RuntimeError,
    };
    Error::Status {
        context: format!(
            "scan of tablet {tablet_id} on {addr} failed mid-stream and is not fault tolerant, \
             so it cannot resume without repeating or losing rows (use a fault-tolerant scan, \
             or restart it)"
        ),
        status: KuduStatus {
            code,
            message: err.to_string(),
            posix_code: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanners_and_specs_cross_threads() {
        fn send<T: Send + 'static>() {}
        send::<Scanner>();
        send::<ScanSpec>();
        send::<ScanBuilder>();
        send::<crate::scan::Split>();
    }

    #[test]
    fn local_hosts() {
        assert!(is_local_host("127.0.0.1:7050"));
        assert!(is_local_host("127.4.5.6:7050"));
        assert!(is_local_host("localhost:7050"));
        assert!(is_local_host("[::1]:7050"));
        // TEST-NET-1 is never assigned to a local interface.
        assert!(!is_local_host("192.0.2.1:7050"));
        assert!(!is_local_host("kudu-ts-1.example.invalid:7050"));
    }

    #[test]
    fn resumable_errors_follow_the_spec() {
        let addr = || "ts:7050".to_owned();
        assert!(resumable(&Error::ScannerExpired { addr: addr() }, None));
        assert!(resumable(
            &Error::TabletNotFound {
                tablet_id: "t".into(),
                addr: addr()
            },
            None
        ));
        assert!(resumable(
            &Error::ConnectionClosed {
                addr: addr(),
                reason: "reset".into()
            },
            None
        ));
        assert!(!resumable(
            &Error::SnapshotTooOld {
                message: "old".into()
            },
            None
        ));
        assert!(!resumable(&Error::InvalidArgument("x".into()), None));
        let seq = Error::Status {
            context: "x".into(),
            status: KuduStatus {
                code: StatusCode::InvalidArgument,
                message: "seq".into(),
                posix_code: None,
            },
        };
        assert!(resumable(&seq, Some(TsCode::InvalidScanCallSeqId)));
        assert!(!resumable(&seq, Some(TsCode::InvalidScanSpec)));
    }

    #[test]
    fn non_fault_tolerant_failures_explain_themselves() {
        let e = mid_scan_failure(
            &Error::ScannerExpired {
                addr: "ts:1".into(),
            },
            "tab1",
            "ts:1",
        );
        let text = e.to_string();
        assert!(text.contains("tab1") && text.contains("ts:1"), "{text}");
        assert!(text.contains("not fault tolerant"), "{text}");
        assert!(text.contains("scanner expired"), "{text}");
    }

    #[test]
    fn spec_setters_and_deferred_errors() {
        let schema = Schema::new(vec![crate::ColumnSchema::builder(
            "k",
            crate::DataType::Int32,
        )
        .key(true)
        .build()
        .unwrap()])
        .unwrap();
        let mut row = Row::new(&schema);
        row.set_i32("k", 7).unwrap();
        let spec = ScanSpec::new()
            .lower_bound(&row)
            .exclusive_upper_bound_key(Vec::new());
        assert_eq!(spec.lower_bound, Some(vec![0x80, 0, 0, 7]));
        assert_eq!(spec.upper_bound, None);
        assert!(spec.invalid.is_none());
        assert!(ScanSpec::new()
            .diff(HybridTime::from_raw(1), HybridTime::from_raw(2))
            .is_fault_tolerant());
    }
}
