//! What a flush reports: [`FlushOutcome`] (row errors, causes) and the
//! counters a session and its batches share ([`MetricsInner`]).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, KuduStatus, Result, RowError, StatusCode};
use crate::pb;
use crate::row_ops::OpType;
use crate::write::metrics::{ServerWriteMetrics, SessionMetrics};

/// What happened to the operations of one flush (or one sync apply).
#[derive(Debug, Default)]
pub(crate) struct FlushOutcome {
    /// Every operation that failed, with its key, op name and status.
    pub(crate) row_errors: Vec<RowError>,
    /// The errors that failed whole groups of rows (non-covered range,
    /// location lookup failure, a request given up after retries). Their
    /// rows are also in `row_errors`.
    pub(crate) causes: Vec<Error>,
}

impl FlushOutcome {
    pub(crate) fn merge(&mut self, other: FlushOutcome) {
        self.row_errors.extend(other.row_errors);
        self.causes.extend(other.causes);
    }

    /// Fails one row with `err`, which is kept as a cause.
    pub(crate) fn fail_one(&mut self, row: RowError, err: Error) {
        self.row_errors.push(row);
        self.causes.push(err);
    }

    /// `Ok` if nothing failed, else every failed row as
    /// `Error::RowErrors` (or the cause itself if no row is attached).
    pub(crate) fn into_result(mut self) -> Result<()> {
        if !self.row_errors.is_empty() {
            Err(Error::RowErrors(self.row_errors))
        } else if !self.causes.is_empty() {
            Err(self.causes.swap_remove(0))
        } else {
            Ok(())
        }
    }
}

/// The status a row gets when the whole request it was in failed.
pub(crate) fn status_of(err: &Error) -> KuduStatus {
    let code = match err {
        Error::Status { status, .. } => status.code,
        Error::TimedOut { .. } => StatusCode::TimedOut,
        Error::NonCoveredRange { .. } | Error::TableNotFound(_) => StatusCode::NotFound,
        Error::Io { .. } | Error::ConnectionClosed { .. } => StatusCode::NetworkError,
        Error::ServiceUnavailable { .. } | Error::NoLeaderMaster { .. } => {
            StatusCode::ServiceUnavailable
        }
        Error::NotLeaderReplica { .. } | Error::NotLeaderMaster { .. } => StatusCode::IllegalState,
        Error::TabletNotFound { .. } => StatusCode::NotFound,
        Error::InvalidArgument(_) => StatusCode::InvalidArgument,
        Error::Unsupported(_) => StatusCode::NotSupported,
        Error::Rpc { .. } | Error::Protocol { .. } => StatusCode::RemoteError,
        _ => StatusCode::RuntimeError,
    };
    KuduStatus {
        code,
        message: err.to_string(),
        posix_code: None,
    }
}

/// Counters shared by a session and its batches (relaxed atomics: cheap to
/// bump, read as a snapshot).
#[derive(Debug, Default)]
pub(crate) struct MetricsInner {
    pub(crate) ops_applied: AtomicU64,
    /// Successful operations by `OpType` wire number.
    pub(super) written: [AtomicU64; 14],
    pub(super) row_errors: AtomicU64,
    pub(super) bytes_written: AtomicU64,
    pub(super) batches_written: AtomicU64,
    pub(super) write_attempts: AtomicU64,
    pub(super) batches_failed: AtomicU64,
    pub(super) server: [AtomicU64; 9],
}

pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl MetricsInner {
    pub(super) fn record_response(&self, metrics: Option<&pb::tserver::ResourceMetricsPb>) {
        let Some(m) = metrics else { return };
        let values = [
            m.successful_inserts,
            m.insert_ignore_errors,
            m.successful_upserts,
            m.upsert_ignore_errors,
            m.successful_updates,
            m.update_ignore_errors,
            m.successful_deletes,
            m.delete_ignore_errors,
            m.commit_wait_duration_usec,
        ];
        for (counter, v) in self.server.iter().zip(values) {
            add(counter, u64::try_from(v.unwrap_or(0)).unwrap_or(0));
        }
    }

    pub(crate) fn snapshot(&self) -> SessionMetrics {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let op = |t: OpType| get(&self.written[usize::from(t.to_wire())]);
        let s = |i: usize| get(&self.server[i]);
        SessionMetrics {
            ops_applied: get(&self.ops_applied),
            inserts: op(OpType::Insert),
            insert_ignores: op(OpType::InsertIgnore),
            upserts: op(OpType::Upsert),
            upsert_ignores: op(OpType::UpsertIgnore),
            updates: op(OpType::Update),
            update_ignores: op(OpType::UpdateIgnore),
            deletes: op(OpType::Delete),
            delete_ignores: op(OpType::DeleteIgnore),
            row_errors: get(&self.row_errors),
            bytes_written: get(&self.bytes_written),
            batches_written: get(&self.batches_written),
            write_attempts: get(&self.write_attempts),
            batches_failed: get(&self.batches_failed),
            server: ServerWriteMetrics {
                successful_inserts: s(0),
                insert_ignore_errors: s(1),
                successful_upserts: s(2),
                upsert_ignore_errors: s(3),
                successful_updates: s(4),
                update_ignore_errors: s(5),
                successful_deletes: s(6),
                delete_ignore_errors: s(7),
                commit_wait_micros: s(8),
            },
        }
    }
}
