//! [`ScanSpec`] / [`ScanBuilder`] describe a scan; [`Scanner`] runs it as a
//! `Stream` of [`RowBatch`]es, one tablet after another
//! (docs/kudu-protocol.md#scans).
//!
//! # Life cycle
//!
//! A scanner walks the table's tablets in partition-key order
//! (docs/kudu-protocol.md#tablet-boundaries), skipping non-covered ranges. For
//! each tablet it sends one *open* (`NewScanRequestPB`) and then *continue*
//! calls with the server-side `scanner_id` and a `call_seq_id` that grows by
//! one after each answer, to the same server, until `has_more_results` is
//! false. Every answer that carries rows becomes one batch of the stream;
//! nothing is buffered beyond the batch being returned, so memory is bounded by
//! the batch size.
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
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use futures::{FutureExt, Stream};

use super::decode::RowBatch;
use super::{keep_alive::*, plan::*, spec::*};
use crate::client::KuduClient;
use crate::hybrid_time::HybridTime;
use crate::meta::{Lookup, RemoteTablet};
use crate::schema::Schema;
use crate::table::KuduTable;
use crate::Result;
/// Where the scan is, as plain data (see the module docs).
#[derive(Debug)]
pub(super) enum Phase {
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
pub(super) struct Core {
    pub(super) client: KuduClient,
    pub(super) table: KuduTable,
    pub(super) plan: Arc<Plan>,
    pub(super) phase: Phase,
    /// Partition key where the next tablet starts.
    pub(super) next_key: Vec<u8>,
    /// The snapshot in use once known (given, or from the first answer).
    pub(super) snapshot: Option<HybridTime>,
    /// Encoded key of the last row returned from the current tablet.
    pub(super) last_primary_key: Option<Vec<u8>>,
    /// Rows returned so far (for the limit).
    pub(super) rows_returned: u64,
    /// Servers that failed for the current tablet.
    pub(super) bad_servers: HashSet<String>,
    /// Servers that served the current tablet, for diagnostics.
    pub(super) last_server: Option<String>,
}

/// Read-only view of the scan's position, refreshed after every step.
#[derive(Debug, Clone, Default)]
pub(super) struct Progress {
    pub(super) snapshot: Option<HybridTime>,
    pub(super) last_primary_key: Option<Vec<u8>>,
    pub(super) tablet_id: Option<String>,
    pub(super) server: Option<String>,
    pub(super) rows_returned: u64,
}

pub(super) type StepFuture = BoxFuture<'static, (Box<Core>, Result<Option<RowBatch>>)>;

pub(super) enum State {
    Idle(Box<Core>),
    Busy(StepFuture),
    Finished,
}

/// A running scan: a `Stream` of [`RowBatch`]es (see the module docs).
///
/// Errors end the stream: after an `Err` item the stream yields `None`.
pub struct Scanner {
    pub(super) state: State,
    projection: Schema,
    pub(super) progress: Progress,
    pub(super) keep_alive: Arc<Mutex<KeepAliveSlot>>,
    pub(super) keep_alive_task: bool,
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
        let core = Core::for_plan(client, table, plan);
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

impl Core {
    /// The state of a scan of `plan` that has not started.
    pub(super) fn for_plan(client: &KuduClient, table: &KuduTable, plan: Plan) -> Core {
        let phase = if plan.matches_nothing {
            Phase::Done
        } else {
            Phase::Locate
        };
        Core {
            client: client.clone(),
            table: table.clone(),
            next_key: plan.partition_key_start.clone(),
            last_primary_key: plan.resume_key.clone(),
            snapshot: plan.snapshot.flatten(),
            plan: Arc::new(plan),
            phase,
            rows_returned: 0,
            bad_servers: HashSet::new(),
            last_server: None,
        }
    }

    pub(super) fn progress(&self) -> Progress {
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

    pub(super) fn deadline(&self) -> Instant {
        Instant::now() + self.plan.timeout
    }

    pub(super) fn limit_reached(&self) -> bool {
        self.plan.limit.is_some_and(|l| self.rows_returned >= l)
    }

    /// Runs the state machine until it yields a non-empty batch (`Some`) or
    /// finishes (`None`).
    pub(super) async fn step(&mut self) -> Result<Option<RowBatch>> {
        loop {
            match &self.phase {
                Phase::Done => return Ok(None),
                Phase::Locate => self.locate().await?,
                Phase::NextTablet { tablet } => {
                    let tablet = tablet.clone();
                    self.advance_past(&tablet);
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

    /// `NextTablet` → `Locate` the tablet after `tablet`, or `Done` at the
    /// end of the table, of the plan's partition-key range or of the limit.
    pub(super) fn advance_past(&mut self, tablet: &RemoteTablet) {
        let end = tablet.partition_key_end.clone();
        self.last_primary_key = None;
        self.bad_servers.clear();
        let past_range =
            !self.plan.partition_key_end.is_empty() && end >= self.plan.partition_key_end;
        if end.is_empty() || past_range || self.limit_reached() {
            self.phase = Phase::Done;
        } else {
            self.next_key = end;
            self.phase = Phase::Locate;
        }
    }

    /// `Locate` → `Open` on the tablet at `next_key`, skipping gaps.
    pub(super) async fn locate(&mut self) -> Result<()> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{KuduStatus, StatusCode};
    use crate::pb::tserver::tablet_server_error_pb::Code as TsCode;
    use crate::scan::replica::{is_local_host, mid_scan_failure, resumable};
    use crate::scan::{ScanBuilder, ScanSpec};
    use crate::{Error, Row};

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
