//! The jobs one ferry process runs: one in application mode (`ferry run`),
//! any number in session mode (`ferry server`). Each entry keeps what the
//! REST API, the web page and the Prometheus endpoint show about a job
//! beyond its engine handle: name, start and end times, the checkpoint it
//! was restored from, asynchronous savepoint / checkpoint operations by
//! trigger id (and verifications' progress), a once-a-second sampler (lag history, throughput) and the
//! tablet servers' write counters.

use crate::api::live::VerifyLive;
use crate::kudu_activity::KuduActivity;
use crate::server::sampler::Sampler;
use ferry_engine::checkpoint::{JobId, StorageLocation};
use ferry_engine::config::JobConfig;
use ferry_engine::lease::Fence;
use ferry_engine::time::now_ms;
use ferry_engine::{JobHandle, JobStatus};
use ferry_verify::Progress;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A new 32-hex-digit id (trigger ids, like Flink's).
pub fn random_hex_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Whether the process runs one job (`ferry run`) or accepts submissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `ferry run`: one job; the process ends with it.
    Application,
    /// `ferry server`: jobs submitted over REST.
    Session,
}

/// What a job was restored from.
#[derive(Debug, Clone)]
pub struct RestoreInfo {
    /// Its checkpoint id.
    pub checkpoint_id: u64,
    /// Its directory.
    pub path: String,
    /// Whether it is a savepoint.
    pub is_savepoint: bool,
    /// When the job was restored, epoch ms.
    pub restored_at_ms: u64,
}

/// The kind of an asynchronous operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// `POST /jobs/:jobid/savepoints` or stop-with-savepoint.
    Savepoint,
    /// `POST /jobs/:jobid/checkpoints`.
    Checkpoint,
    /// `POST /ferry/jobs/:jobid/verify`.
    Verify,
}

/// What an operation produced.
#[derive(Debug, Clone, PartialEq)]
pub enum OpValue {
    /// A savepoint's location.
    Location(String),
    /// A checkpoint's id.
    CheckpointId(u64),
    /// A verification's report.
    Verify(Box<ferry_verify::VerifyReport>),
}

/// An operation's progress.
#[derive(Debug, Clone, PartialEq)]
pub enum OpState {
    /// Still running.
    InProgress,
    /// Finished: its value, or the failure's message.
    Done(Result<OpValue, String>),
}

#[derive(Debug)]
struct Operation {
    kind: OpKind,
    state: OpState,
    /// Whether someone read the result after it completed (application
    /// mode waits for that before exiting, so `ferry stop` sees its path).
    fetched: bool,
    /// When it completed.
    done_at: Option<std::time::Instant>,
}

/// A job's verifications.
#[derive(Default)]
struct VerifyRuns {
    progress: HashMap<String, watch::Receiver<Progress>>,
    live: Option<VerifyLive>,
}

/// One job and what is known about it.
pub struct JobEntry {
    /// The running engine job.
    pub handle: JobHandle,
    /// The job id.
    pub id: JobId,
    /// The job's name.
    pub name: String,
    /// The job's configuration.
    pub config: JobConfig,
    /// The job's source as its connector names it (`Source::NAME`:
    /// `KuduSource`, `KafkaSource`), for operator names.
    pub source_name: &'static str,
    /// Splits read at once.
    pub parallelism: usize,
    /// The default savepoint directory (`--savepointPath`).
    pub savepoint_dir: Option<StorageLocation>,
    /// When the job started, epoch ms.
    pub start_time_ms: u64,
    end_time_ms: AtomicU64,
    /// What the job was restored from.
    pub restored: Option<RestoreInfo>,
    /// The source table's live row count when the job started (snapshot
    /// progress estimate), if the master reported one.
    pub source_rows_estimate: Option<u64>,
    /// Lag history and rates.
    pub sampler: Arc<Sampler>,
    /// The tablet servers' write counters of its tables.
    pub activity: Arc<KuduActivity>,
    /// The Kafka connectors' counters (jobs with a Kafka side).
    pub kafka: Option<Arc<ferry_kafka::KafkaMetrics>>,
    /// Every job key with its effective value (given or literal default),
    /// as `GET /jobs/:id/config` shows them.
    pub keys: ferry_engine::config::Config,
    /// The lease fence the job writes under (`Fence::none()` without high
    /// availability): `GET /readyz` is 503 once it closed.
    pub fence: Fence,
    operations: Mutex<HashMap<String, Operation>>,
    /// Verifications: progress by request id, the last one's outcome.
    verify: Mutex<VerifyRuns>,
    /// Cancelled when the job ends or the process shuts down; stops the
    /// job's helper tasks.
    pub tasks: CancellationToken,
    /// Set when the job was stopped because its lease was lost and the
    /// process stands by for it again (Flink's SUSPENDED).
    suspended: std::sync::atomic::AtomicBool,
    /// The takeover that started this job, ms from the lease lost to its
    /// first window completed (0: not a takeover, or not yet).
    takeover_ms: AtomicU64,
}

impl JobEntry {
    /// Builds an entry (helper tasks are started by [`Registry::add`]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        handle: JobHandle,
        config: JobConfig,
        source_name: &'static str,
        parallelism: usize,
        savepoint_dir: Option<StorageLocation>,
        restored: Option<RestoreInfo>,
        source_rows_estimate: Option<u64>,
        activity: Arc<KuduActivity>,
        start_time_ms: u64,
    ) -> Self {
        JobEntry {
            id: handle.job_id(),
            name: config.job_name.clone(),
            sampler: Arc::new(Sampler::new(handle.metrics().clone())),
            handle,
            config,
            source_name,
            parallelism,
            savepoint_dir,
            start_time_ms,
            end_time_ms: AtomicU64::new(0),
            restored,
            source_rows_estimate,
            activity,
            kafka: None,
            keys: ferry_engine::config::Config::new(),
            fence: Fence::none(),
            operations: Mutex::new(HashMap::new()),
            verify: Mutex::new(VerifyRuns::default()),
            tasks: CancellationToken::new(),
            suspended: std::sync::atomic::AtomicBool::new(false),
            takeover_ms: AtomicU64::new(0),
        }
    }

    /// The job ended because its lease was lost; the process stands by.
    pub fn suspend(&self) {
        self.suspended.store(true, Ordering::Relaxed);
    }

    /// Records the takeover time of this job's start ([`super::rto::Rto`]).
    pub fn took_over_in(&self, ms: u64) {
        self.takeover_ms.store(ms.max(1), Ordering::Relaxed);
    }

    /// How long the takeover that started this job took, once known.
    pub fn takeover_ms(&self) -> Option<u64> {
        Some(self.takeover_ms.load(Ordering::Relaxed)).filter(|ms| *ms > 0)
    }

    /// Whether [`suspend`](Self::suspend) was called.
    pub fn is_suspended(&self) -> bool {
        self.suspended.load(Ordering::Relaxed)
    }

    /// With the counters of the job's Kafka connectors.
    pub fn with_kafka(mut self, kafka: Option<Arc<ferry_kafka::KafkaMetrics>>) -> Self {
        self.kafka = kafka;
        self
    }

    /// With the job's keys in effective form (see [`JobEntry::keys`]).
    pub fn with_keys(mut self, keys: ferry_engine::config::Config) -> Self {
        self.keys = keys;
        self
    }

    /// With the lease fence the job writes under.
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    /// The job's status.
    pub fn status(&self) -> JobStatus {
        self.handle.status()
    }

    /// End time in epoch ms, or -1 while running (Flink's convention).
    pub fn end_time_ms(&self) -> i64 {
        match self.end_time_ms.load(Ordering::Relaxed) {
            0 => -1,
            t => t as i64,
        }
    }

    /// Milliseconds from start to end (or to now while running).
    pub fn duration_ms(&self) -> u64 {
        let end = match self.end_time_ms.load(Ordering::Relaxed) {
            0 => now_ms(),
            t => t,
        };
        end.saturating_sub(self.start_time_ms)
    }

    /// The sink table's name.
    pub fn sink_table_name(&self) -> String {
        self.config.sink_table_name()
    }

    fn mark_ended(&self) {
        let _ =
            self.end_time_ms
                .compare_exchange(0, now_ms(), Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Starts an operation under `trigger_id` (or a new id). If an
    /// operation with that id exists already, returns its id without
    /// starting another (Flink's idempotent `triggerId`).
    pub fn begin_operation(&self, kind: OpKind, trigger_id: Option<String>) -> (String, bool) {
        let id = trigger_id.unwrap_or_else(random_hex_id);
        let mut ops = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        if ops.contains_key(&id) {
            return (id, false);
        }
        ops.insert(
            id.clone(),
            Operation {
                kind,
                state: OpState::InProgress,
                fetched: false,
                done_at: None,
            },
        );
        (id, true)
    }

    /// Records an operation's result (an error as its message).
    pub fn finish_operation<E: std::fmt::Display>(&self, id: &str, result: Result<OpValue, E>) {
        let result = result.map_err(|e| e.to_string());
        let mut ops = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(op) = ops.get_mut(id) {
            op.state = OpState::Done(result);
            op.done_at = Some(std::time::Instant::now());
        }
    }

    /// An operation's state, if `id` names one of `kind`; marks a completed
    /// result as fetched.
    pub fn operation(&self, kind: OpKind, id: &str) -> Option<OpState> {
        let mut ops = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let op = ops.get_mut(id).filter(|o| o.kind == kind)?;
        if matches!(op.state, OpState::Done(_)) {
            op.fetched = true;
        }
        Some(op.state.clone())
    }

    /// Starts tracking verification `id`.
    pub fn verify_started(&self, id: &str, progress: watch::Receiver<Progress>) {
        let mut v = self.verify.lock().unwrap_or_else(|e| e.into_inner());
        v.progress.insert(id.to_string(), progress);
        let last = v.live.take();
        v.live = Some(VerifyLive {
            request_id: id.to_string(),
            in_progress: true,
            ..last.unwrap_or(VerifyLive {
                request_id: String::new(),
                in_progress: true,
                last_result: None,
                rows_compared: 0,
                rows_differing: 0,
                finished_at: 0,
                error: None,
            })
        });
    }

    /// Records the outcome of verification `id` (for the metrics).
    pub fn verify_finished(&self, id: &str, result: &Result<ferry_verify::VerifyReport, String>) {
        let mut v = self.verify.lock().unwrap_or_else(|e| e.into_inner());
        let (last_result, rows_compared, rows_differing, error) = match result {
            Ok(r) => (i8::from(r.equal), r.rows_compared, r.differences, None),
            Err(e) => (-1, 0, 0, Some(e.clone())),
        };
        v.live = Some(VerifyLive {
            request_id: id.to_string(),
            in_progress: false,
            last_result: Some(last_result),
            rows_compared,
            rows_differing,
            finished_at: now_ms(),
            error,
        });
    }

    /// Verification `id`'s progress.
    pub fn verify_progress(&self, id: &str) -> Option<Progress> {
        let v = self.verify.lock().unwrap_or_else(|e| e.into_inner());
        v.progress.get(id).map(|rx| rx.borrow().clone())
    }

    /// The last verification, for `/live` and the metrics.
    pub fn verify_live(&self) -> Option<VerifyLive> {
        let v = self.verify.lock().unwrap_or_else(|e| e.into_inner());
        v.live.clone()
    }

    /// Whether every operation finished and had its result read (results
    /// nobody polled for a few seconds, e.g. of `savepoint --detached`, do
    /// not hold the process).
    pub fn operations_settled(&self) -> bool {
        let ops = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        ops.values().all(|o| {
            o.fetched
                || o.done_at
                    .is_some_and(|t| t.elapsed() > std::time::Duration::from_secs(3))
        })
    }
}

/// What a lease holder's process is doing, for the metrics
/// (`ferry_ha_*`): unset without high availability.
#[derive(Debug, Default)]
pub struct HaState {
    /// 1 holding, 2 standing by (0: no lease).
    role: AtomicU64,
    generation: AtomicU64,
}

impl HaState {
    /// Holds `generation` of the lease.
    pub fn holding(&self, generation: u64) {
        self.generation.store(generation, Ordering::Relaxed);
        self.role.store(1, Ordering::Relaxed);
    }

    /// Stands by for the lease (holds none).
    pub fn standing_by(&self) {
        self.generation.store(0, Ordering::Relaxed);
        self.role.store(2, Ordering::Relaxed);
    }

    /// `Some((standing by, generation held))` once the process has a lease
    /// role.
    pub fn get(&self) -> Option<(bool, u64)> {
        match self.role.load(Ordering::Relaxed) {
            0 => None,
            role => Some((role == 2, self.generation.load(Ordering::Relaxed))),
        }
    }
}

/// All jobs of this process.
pub struct Registry {
    /// Application or session mode.
    pub mode: Mode,
    /// When the process started, epoch ms.
    pub started_at_ms: u64,
    jobs: RwLock<Vec<Arc<JobEntry>>>,
    /// Cancelled at process shutdown.
    pub shutdown: CancellationToken,
    /// Opens checkpoint and savepoint locations (local paths and `s3://`,
    /// with the process's `s3.*` settings) for every job of the process.
    pub resolver: Arc<ferry_objstore::ObjectStoreResolver>,
    /// The lease role of a lease holder's process.
    pub ha: HaState,
    /// A worker of a sharded job: the whole job's slots and shards
    /// (`GET /ferry/shards`).
    pub shards: std::sync::OnceLock<Arc<crate::server::workers::ShardBoard>>,
}

impl Registry {
    /// An empty registry; `resolver` opens the jobs' stores.
    pub fn new(mode: Mode, resolver: Arc<ferry_objstore::ObjectStoreResolver>) -> Arc<Self> {
        Arc::new(Registry {
            mode,
            started_at_ms: now_ms(),
            jobs: RwLock::new(Vec::new()),
            shutdown: CancellationToken::new(),
            resolver,
            ha: HaState::default(),
            shards: std::sync::OnceLock::new(),
        })
    }

    /// Registers a job and starts its helper tasks: the end-time watcher,
    /// the sampler and the tablet-server poller. In application mode it
    /// replaces an ended job of the same id (a lease holder's previous
    /// generation), so the job id names the running one.
    pub fn add(&self, entry: JobEntry) -> Arc<JobEntry> {
        let entry = Arc::new(entry);
        if let Ok(mut jobs) = self.jobs.write() {
            if self.mode == Mode::Application {
                jobs.retain(|j| j.id != entry.id || !j.status().is_terminal());
            }
            jobs.push(entry.clone());
        }
        let watched = entry.clone();
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = watched.handle.wait() => {}
                _ = shutdown.cancelled() => {}
            }
            watched.mark_ended();
            // Keep sampling a moment so the last values are visible, then stop.
            watched.sampler.sample_once();
            watched.tasks.cancel();
        });
        entry.sampler.clone().spawn(entry.tasks.clone());
        entry.activity.clone().spawn(entry.tasks.clone());
        entry
    }

    /// Every job, in submission order.
    pub fn jobs(&self) -> Vec<Arc<JobEntry>> {
        self.jobs.read().map(|j| j.clone()).unwrap_or_default()
    }

    /// The job with this id.
    pub fn get(&self, id: &JobId) -> Option<Arc<JobEntry>> {
        self.jobs().into_iter().find(|j| &j.id == id)
    }
}
