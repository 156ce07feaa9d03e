//! In-process job metrics: plain atomics the job updates and exporters
//! (REST, Prometheus) read with [`JobMetrics::snapshot`]. Names follow the
//! reference job where one exists (`lastEndTimestamp`, `pendingCount`,
//! `unassignedCount`, `pendingRemovalCount`).

pub use crate::status::MetricsSnapshot;
use crate::time::{SourceClock, SourceTime};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Live counters and gauges of one job.
#[derive(Debug)]
pub struct JobMetrics {
    started: Instant,
    /// Ms after `started` when the job last became RUNNING (`NOT_SET`: it
    /// is not running).
    running_since_ms: AtomicU64,
    /// Ms after `started` when the current outage began (`NOT_SET`: none).
    down_since_ms: AtomicU64,
    /// Epoch ms of the end of the last completed window (0 = none yet).
    last_end_timestamp_ms: AtomicU64,
    pending: AtomicU64,
    unassigned: AtomicU64,
    pending_removal: AtomicU64,
    rows_read: AtomicU64,
    rows_upserted: AtomicU64,
    rows_deleted: AtomicU64,
    bytes_read: AtomicU64,
    windows_completed: AtomicU64,
    snapshot_windows: AtomicU64,
    last_window_duration_ms: AtomicU64,
    last_checkpoint_duration_ms: AtomicU64,
    last_checkpoint_size_bytes: AtomicU64,
    checkpoints_completed: AtomicU64,
    checkpoints_failed: AtomicU64,
    restarts: AtomicU64,
    periodic_savepoints: AtomicU64,
    periodic_savepoints_failed: AtomicU64,
    last_periodic_savepoint_ms: AtomicU64,
}

impl Default for JobMetrics {
    fn default() -> Self {
        JobMetrics {
            started: Instant::now(),
            running_since_ms: AtomicU64::new(0),
            down_since_ms: AtomicU64::new(NOT_SET),
            last_end_timestamp_ms: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            unassigned: AtomicU64::new(0),
            pending_removal: AtomicU64::new(0),
            rows_read: AtomicU64::new(0),
            rows_upserted: AtomicU64::new(0),
            rows_deleted: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            windows_completed: AtomicU64::new(0),
            snapshot_windows: AtomicU64::new(0),
            last_window_duration_ms: AtomicU64::new(0),
            last_checkpoint_duration_ms: AtomicU64::new(0),
            last_checkpoint_size_bytes: AtomicU64::new(0),
            checkpoints_completed: AtomicU64::new(0),
            checkpoints_failed: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            periodic_savepoints: AtomicU64::new(0),
            periodic_savepoints_failed: AtomicU64::new(0),
            last_periodic_savepoint_ms: AtomicU64::new(0),
        }
    }
}

const NOT_SET: u64 = u64::MAX;

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl JobMetrics {
    /// Reads every metric.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            uptime_ms: self.since(&self.running_since_ms),
            downtime_ms: self.since(&self.down_since_ms),
            last_end_timestamp_ms: get(&self.last_end_timestamp_ms),
            pending_count: get(&self.pending),
            unassigned_count: get(&self.unassigned),
            pending_removal_count: get(&self.pending_removal),
            rows_read: get(&self.rows_read),
            rows_upserted: get(&self.rows_upserted),
            rows_deleted: get(&self.rows_deleted),
            bytes_read: get(&self.bytes_read),
            windows_completed: get(&self.windows_completed),
            snapshot_windows: get(&self.snapshot_windows),
            last_window_duration_ms: get(&self.last_window_duration_ms),
            last_checkpoint_duration_ms: get(&self.last_checkpoint_duration_ms),
            last_checkpoint_size_bytes: get(&self.last_checkpoint_size_bytes),
            checkpoints_completed: get(&self.checkpoints_completed),
            checkpoints_failed: get(&self.checkpoints_failed),
            restarts: get(&self.restarts),
            periodic_savepoints_completed: get(&self.periodic_savepoints),
            periodic_savepoints_failed: get(&self.periodic_savepoints_failed),
            last_periodic_savepoint_ms: get(&self.last_periodic_savepoint_ms),
        }
    }

    pub(crate) fn periodic_savepoint_completed(&self) {
        self.periodic_savepoints.fetch_add(1, Ordering::Relaxed);
        self.last_periodic_savepoint_ms
            .store(crate::time::now_ms(), Ordering::Relaxed);
    }

    pub(crate) fn periodic_savepoint_failed(&self) {
        self.periodic_savepoints_failed
            .fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_split_counts(&self, c: crate::enumerator::SplitCounts) {
        self.pending.store(c.pending as u64, Ordering::Relaxed);
        self.unassigned
            .store(c.unassigned as u64, Ordering::Relaxed);
        self.pending_removal
            .store(c.pending_removal as u64, Ordering::Relaxed);
    }

    /// The job's last window end `end`, stored as wall-clock ms read on
    /// the source's `clock`.
    pub(crate) fn set_last_end(&self, clock: SourceClock, end: SourceTime) {
        self.last_end_timestamp_ms
            .store(clock.epoch_millis(end), Ordering::Relaxed);
    }

    pub(crate) fn add_read(&self, rows: u64, bytes: u64) {
        self.rows_read.fetch_add(rows, Ordering::Relaxed);
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn add_written(&self, upserts: u64, deletes: u64) {
        self.rows_upserted.fetch_add(upserts, Ordering::Relaxed);
        self.rows_deleted.fetch_add(deletes, Ordering::Relaxed);
    }

    pub(crate) fn window_completed(&self, duration_ms: u64, snapshot: bool) {
        self.windows_completed.fetch_add(1, Ordering::Relaxed);
        if snapshot {
            self.snapshot_windows.fetch_add(1, Ordering::Relaxed);
        }
        self.last_window_duration_ms
            .store(duration_ms, Ordering::Relaxed);
    }

    pub(crate) fn checkpoint_completed(&self, duration_ms: u64, size: u64) {
        self.checkpoints_completed.fetch_add(1, Ordering::Relaxed);
        self.last_checkpoint_duration_ms
            .store(duration_ms, Ordering::Relaxed);
        self.last_checkpoint_size_bytes
            .store(size, Ordering::Relaxed);
    }

    pub(crate) fn checkpoint_failed(&self) {
        self.checkpoints_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Ms since these metrics were made (monotonic; marks are kept in it).
    fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn since(&self, mark: &AtomicU64) -> u64 {
        match get(mark) {
            NOT_SET => 0,
            at => self.elapsed_ms().saturating_sub(at),
        }
    }

    /// A failure stopped the job: downtime starts, uptime stops.
    pub(crate) fn went_down(&self) {
        self.running_since_ms.store(NOT_SET, Ordering::Relaxed);
        let _ = self.down_since_ms.compare_exchange(
            NOT_SET,
            self.elapsed_ms(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The job restarted and runs again.
    pub(crate) fn came_up(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
        self.down_since_ms.store(NOT_SET, Ordering::Relaxed);
        self.running_since_ms
            .store(self.elapsed_ms(), Ordering::Relaxed);
    }

    /// The job ended: neither up nor down any more.
    pub(crate) fn ended(&self) {
        self.running_since_ms.store(NOT_SET, Ordering::Relaxed);
        self.down_since_ms.store(NOT_SET, Ordering::Relaxed);
    }
}

/// One table's counters and gauges (a job of many tables has one each; the
/// job-wide [`JobMetrics`] hold the sums). The table's identity is shown
/// by the job beside them.
#[derive(Debug, Default)]
pub struct TableMetrics {
    last_end_timestamp_ms: AtomicU64,
    window_open: AtomicU64,
    pending: AtomicU64,
    unassigned: AtomicU64,
    pending_removal: AtomicU64,
    rows_read: AtomicU64,
    rows_upserted: AtomicU64,
    rows_deleted: AtomicU64,
    windows_completed: AtomicU64,
    schema_changes: AtomicU64,
    tablet_scans_skipped: AtomicU64,
    rows_recreated: AtomicU64,
    tablets_recopied: AtomicU64,
    window_interval_ms: AtomicU64,
    verify: std::sync::Mutex<crate::status::TableVerify>,
}

impl TableMetrics {
    /// Every counter and gauge at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Copies every counter and gauge into `table` (its identity is the
    /// job's to fill).
    pub fn fill(&self, table: &mut crate::status::TableSnapshot) {
        table.last_end_timestamp_ms = get(&self.last_end_timestamp_ms);
        table.window_open = get(&self.window_open) != 0;
        table.unassigned_count = get(&self.unassigned);
        table.pending_count = get(&self.pending);
        table.pending_removal_count = get(&self.pending_removal);
        table.rows_read = get(&self.rows_read);
        table.rows_upserted = get(&self.rows_upserted);
        table.rows_deleted = get(&self.rows_deleted);
        table.windows_completed = get(&self.windows_completed);
        table.schema_changes = get(&self.schema_changes);
        table.tablet_scans_skipped = get(&self.tablet_scans_skipped);
        table.rows_recreated = get(&self.rows_recreated);
        table.tablets_recopied = get(&self.tablets_recopied);
        table.window_interval_ms = get(&self.window_interval_ms);
        table.verify = self.verify.lock().map(|v| *v).unwrap_or_default();
    }

    /// A verification of the table at the cut of source instant `cut_ms`
    /// (epoch ms) ended: with `outcome`, or failed (`None`).
    pub(crate) fn verified(&self, cut_ms: u64, outcome: Option<crate::verify::VerifyOutcome>) {
        let Ok(mut v) = self.verify.lock() else {
            return;
        };
        let Some(o) = outcome else {
            v.failures += 1;
            return;
        };
        v.runs += 1;
        v.last_cut_ms = cut_ms;
        v.last_rows_compared = o.rows_compared;
        v.last_differences = o.differences;
        v.differences_total += o.differences;
        v.repaired_total += o.repaired;
    }

    /// The table's chain now: split queues, whether a window is open, and
    /// its last end, stored as wall-clock ms read on the source's `clock`.
    pub(crate) fn set_chain(
        &self,
        counts: crate::enumerator::SplitCounts,
        window_open: bool,
        clock: SourceClock,
        last_end: Option<SourceTime>,
    ) {
        self.pending.store(counts.pending as u64, Ordering::Relaxed);
        self.unassigned
            .store(counts.unassigned as u64, Ordering::Relaxed);
        self.pending_removal
            .store(counts.pending_removal as u64, Ordering::Relaxed);
        self.window_open
            .store(u64::from(window_open), Ordering::Relaxed);
        if let Some(end) = last_end {
            self.last_end_timestamp_ms
                .store(clock.epoch_millis(end), Ordering::Relaxed);
        }
    }

    pub(crate) fn add_read(&self, rows: u64) {
        self.rows_read.fetch_add(rows, Ordering::Relaxed);
    }

    pub(crate) fn add_written(&self, upserts: u64, deletes: u64) {
        self.rows_upserted.fetch_add(upserts, Ordering::Relaxed);
        self.rows_deleted.fetch_add(deletes, Ordering::Relaxed);
    }

    pub(crate) fn window_completed(&self) {
        self.windows_completed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add_recreated(&self, rows: u64) {
        self.rows_recreated.fetch_add(rows, Ordering::Relaxed);
    }

    pub(crate) fn add_recopied(&self, parts: u64) {
        self.tablets_recopied.fetch_add(parts, Ordering::Relaxed);
    }

    /// The time from the table's last window opening to its next one may
    /// open (`reader.diffScanBudget` may stretch it).
    pub(crate) fn set_window_interval(&self, interval: std::time::Duration) {
        self.window_interval_ms
            .store(interval.as_millis() as u64, Ordering::Relaxed);
    }

    pub(crate) fn add_skipped(&self, tablets: u64) {
        self.tablet_scans_skipped
            .fetch_add(tablets, Ordering::Relaxed);
    }

    pub(crate) fn schema_changed(&self) {
        self.schema_changes.fetch_add(1, Ordering::Relaxed);
    }
}
