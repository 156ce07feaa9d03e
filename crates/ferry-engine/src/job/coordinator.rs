//! The coordinator: one task that owns the tables' window chains and the
//! pipelines, opens windows, assigns splits, reacts to pipeline events and
//! serves requests, all from one loop, so each decision sees a consistent
//! state.
//!
//! A job replicates one table or many. Each table has its own chain
//! ([`Chain`]: windows, split queues, sink position, schema); the `-p`
//! pipelines are shared and handed splits round-robin across the tables
//! that have some, so a big snapshot cannot starve the others' windows.
//! One checkpoint holds every chain's state.

use super::chain::Chain;
use super::handle::{Control, Exceptions, History, JobStatus, TableList};
use super::stop::Mode;
use super::JobOptions;
use crate::checkpoint::{CheckpointStore, JobState, TableState};
use crate::config::JobConfig;
use crate::connector::{Sink, Source, Tables};
use crate::error::{ControlError, EngineError};
use crate::metrics::JobMetrics;
use crate::pipeline::{spawn_worker, Assignment, CommitGate, PipelineEvent, Worker};
use crate::restart::RestartBackoff;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, Instant, Interval};

/// The source and sink types of a job's tables.
pub(super) type Src<T> = <T as Tables>::Source;
pub(super) type Snk<T> = <T as Tables>::Sink;
pub(super) type TableChain<T> = Chain<Src<T>, Snk<T>>;

/// The pipelines and which of them wait for a split. A restart drops
/// them all (and with them their events) and spawns new ones, so no event
/// of a pipeline from before the restart reaches the restored state.
pub(super) struct Workers<S, K> {
    list: Vec<Worker<S, K>>,
    /// Indexes of idle workers (popped from the end).
    pub(super) idle: Vec<usize>,
    /// Tells running pipelines to stop after their current batch.
    stop: watch::Sender<bool>,
    /// What the pipelines report.
    pub(super) events: mpsc::UnboundedReceiver<PipelineEvent>,
}

impl<S, K> Workers<S, K> {
    /// No pipelines (while a restart waits).
    fn none() -> Self {
        let (_, events) = mpsc::unbounded_channel();
        Workers {
            list: Vec::new(),
            idle: Vec::new(),
            stop: watch::channel(false).0,
            events,
        }
    }

    /// Whether no pipeline is working on a split.
    pub(super) fn all_idle(&self) -> bool {
        self.idle.len() == self.list.len()
    }

    /// Makes every pipeline stop after its current batch.
    pub(super) fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

impl<S, K> Drop for Workers<S, K> {
    fn drop(&mut self) {
        for w in &self.list {
            w.task.abort();
        }
    }
}

/// The pipelines of a job of tables `T`.
pub(super) type JobWorkers<T> = Workers<Src<T>, Snk<T>>;

/// Whether the loop goes on.
pub(super) enum Flow {
    Continue,
    /// A transient failure: restart from the newest complete checkpoint
    /// after this delay.
    Restart(Duration),
    End(JobStatus),
}

pub(super) struct Coordinator<T: Tables> {
    pub(super) tables: Arc<T>,
    /// One chain per table, in the order they were found.
    pub(super) chains: Vec<TableChain<T>>,
    pub(super) next_key: crate::identity::TableKey,
    /// Where the round-robin assignment continues.
    pub(super) next_chain: usize,
    /// The tables to continue (restore point or start time), until the
    /// chains are built.
    pub(super) initial: Option<Vec<TableState>>,
    /// Whether `initial` came from a restore point (then each table's sink
    /// position is compared with it).
    pub(super) from_restore_point: bool,
    /// Whether the chains were built (first discovery done).
    pub(super) built: bool,
    pub(super) next_discovery_at: Instant,
    pub(super) store: CheckpointStore,
    pub(super) config: JobConfig,
    pub(super) options: JobOptions,
    pub(super) metrics: Arc<JobMetrics>,
    pub(super) table_list: TableList,
    pub(super) history: History,
    pub(super) exceptions: Exceptions,
    pub(super) status: watch::Sender<JobStatus>,
    pub(super) next_checkpoint_id: u64,
    /// Running, draining or stopping.
    pub(super) mode: Mode,
    /// The state of the newest complete checkpoint (or the restored one):
    /// what a restart continues from.
    pub(super) last_complete: Option<JobState>,
    /// Checkpoints failed in a row (`tolerable-failed-checkpoints`).
    pub(super) failed_checkpoints: u32,
    pub(super) backoff: RestartBackoff,
    /// Copies completed states to `job.stateReplicas`, if any.
    pub(super) replication: Option<crate::replication::Replication>,
    /// Held while a checkpoint commits transactional sinks
    /// ([`crate::pipeline`]).
    pub(super) gate: CommitGate,
    /// A pipeline failure taken in while a checkpoint was prepared, to be
    /// acted on next.
    pub(super) deferred: Option<Flow>,
}

impl<T: Tables> Coordinator<T> {
    pub(super) fn new(
        tables: T,
        store: CheckpointStore,
        config: JobConfig,
        options: JobOptions,
        restore: Option<JobState>,
        status: watch::Sender<JobStatus>,
    ) -> Self {
        // A start from a hybrid time is a chain whose last window ended
        // there: the same as a state between windows, except that the sink
        // position (another chain's) is not compared with it.
        let started_at = options.start_at.filter(|_| restore.is_none()).map(|t| {
            let mut state = JobState::new(
                options.job_id,
                crate::checkpoint::SnapshotKind::Checkpoint,
                0,
                config.table_name.clone(),
                config.source_master_addresses.clone(),
                config.sink_master_addresses.clone(),
            );
            state.last_end_timestamp = Some(t);
            tracing::info!(
                last_end = %t,
                "starting with a diff window from the given source time (no snapshot)"
            );
            state
        });
        let from_restore_point = restore.is_some();
        let initial = restore
            .as_ref()
            .or(started_at.as_ref())
            .map(JobState::table_states);
        let metrics = Arc::new(JobMetrics::default());
        if let Some(end) = restore
            .as_ref()
            .or(started_at.as_ref())
            .and_then(|s| s.last_end_timestamp)
        {
            metrics.set_last_end(Src::<T>::CLOCK, end);
        }
        let backoff = RestartBackoff::new(config.restart.strategy());
        let replication = super::replicas::start_replication(&config, &store);
        Coordinator {
            tables: Arc::new(tables),
            chains: Vec::new(),
            next_key: crate::identity::TableKey::FIRST,
            next_chain: 0,
            initial,
            from_restore_point,
            built: false,
            next_discovery_at: Instant::now(),
            store,
            options,
            metrics,
            table_list: Arc::new(Mutex::new(Vec::new())),
            history: Arc::new(Mutex::new(Vec::new())),
            exceptions: Arc::new(Mutex::new(VecDeque::new())),
            status,
            next_checkpoint_id: 1,
            mode: Mode::Running,
            last_complete: restore.or(started_at),
            failed_checkpoints: 0,
            backoff,
            replication,
            gate: CommitGate::default(),
            deferred: None,
            config,
        }
    }

    /// Whether the job replicates a selection of tables (a list or a
    /// pattern) rather than one named table: then a table's own failure
    /// pauses that table instead of failing the job.
    pub(super) fn many_tables(&self) -> bool {
        !self.config.tables.is_single()
    }

    pub(super) fn spawn_workers(&self) -> JobWorkers<T> {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(false);
        let list: Vec<Worker<Src<T>, Snk<T>>> = (0..self.options.parallelism.max(1))
            .map(|i| {
                spawn_worker(
                    i,
                    events_tx.clone(),
                    stop_rx.clone(),
                    self.metrics.clone(),
                    self.options.fence.clone(),
                    self.gate.clone(),
                )
            })
            .collect();
        let idle = (0..list.len()).rev().collect();
        Workers {
            list,
            idle,
            stop,
            events,
        }
    }

    /// Runs the job until it ends, publishes and returns how it ended.
    pub(super) async fn run(mut self, mut control: mpsc::Receiver<Control>) -> JobStatus {
        self.number_checkpoints_above_existing().await;
        let status = match self.prepare_tables(&mut control).await {
            Some(status) => status,
            None => self.replicate(&mut control).await,
        };
        self.mode.job_ended(&status);
        self.metrics.ended();
        match &status {
            JobStatus::Failed { error } => tracing::error!(%error, "job failed"),
            other => tracing::info!(status = ?other, "job ended"),
        }
        if let Some(replication) = self.replication.take() {
            replication
                .finish(super::replicas::REPLICA_FINISH_TIMEOUT)
                .await;
        }
        let _ = self.status.send(status.clone());
        status
    }

    /// A job that keeps its id across a takeover (or a restore) numbers its
    /// checkpoints above every `chk-<N>` already there and above the
    /// restored one, so "highest number" stays "newest".
    async fn number_checkpoints_above_existing(&mut self) {
        let restored = self.last_complete.as_ref().map_or(0, |s| s.checkpoint_id);
        let existing = match self.store.next_checkpoint_id(&self.options.job_id).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list earlier checkpoints of this job id");
                1
            }
        };
        self.next_checkpoint_id = existing.max(restored.saturating_add(1));
    }

    /// The window chains, until the job ends.
    async fn replicate(&mut self, control: &mut mpsc::Receiver<Control>) -> JobStatus {
        let mut workers = self.spawn_workers();
        let mut checkpoint_tick = tokio::time::interval(self.config.checkpointing_interval);
        checkpoint_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        checkpoint_tick.tick().await;
        let mut savepoint_tick = super::replicas::periodic_timer(&self.config);
        self.next_discovery_at = Instant::now() + self.config.table_discovery_interval;
        let status = loop {
            let mut flow = self.step(&mut workers).await;
            if let Flow::Continue = flow {
                self.publish_metrics();
                self.publish_status();
                flow = self
                    .wait(
                        &mut workers,
                        control,
                        &mut checkpoint_tick,
                        &mut savepoint_tick,
                    )
                    .await;
            }
            match flow {
                Flow::Continue => {}
                Flow::End(status) => break status,
                Flow::Restart(delay) => {
                    // Dropping the pipelines aborts them mid-batch; what
                    // they wrote is replayed (idempotently) from the
                    // restored state.
                    workers = Workers::none();
                    if let Some(status) = self.restart(delay, control).await {
                        break status;
                    }
                    workers = self.spawn_workers();
                    checkpoint_tick.reset();
                }
            }
        };
        drop(workers);
        status
    }

    /// Publishes RUNNING or STOPPING as the mode says (a restart publishes
    /// RESTARTING itself).
    fn publish_status(&self) {
        let now = if self.mode.is_stopping() || self.mode.is_draining() {
            JobStatus::Stopping
        } else {
            JobStatus::Running
        };
        self.status.send_if_modified(|s| {
            let changed = *s != now;
            *s = now;
            changed
        });
    }

    /// The job-wide gauges (sums over tables; `lastEndTimestamp` the
    /// smallest, once every table has one) and each table's.
    pub(super) fn publish_metrics(&self) {
        let mut sum = crate::enumerator::SplitCounts::default();
        for chain in &self.chains {
            let c = chain.enumerator.counts();
            sum.unassigned += c.unassigned;
            sum.pending += c.pending;
            sum.pending_removal += c.pending_removal;
            chain.publish();
        }
        self.metrics.set_split_counts(sum);
        let ends: Option<Vec<_>> = self
            .chains
            .iter()
            .map(|c| c.enumerator.last_end())
            .collect();
        if let Some(end) = ends.and_then(|e| e.into_iter().min()) {
            self.metrics.set_last_end(Src::<T>::CLOCK, end);
        }
    }

    /// What the coordinator does before it waits: stop at a window
    /// boundary if a stop is due, else open the windows that are due, make
    /// them durable, record them as sink positions, hand out splits.
    async fn step(&mut self, workers: &mut JobWorkers<T>) -> Flow {
        if self.mode.is_draining() && self.between_windows() {
            self.mode.drained(workers);
        }
        if self.mode.is_stopping() {
            if workers.all_idle() {
                // Every pipeline has stopped after a whole batch: the state
                // now records exactly what is in the sink.
                return Flow::End(self.finish_stop(workers).await);
            }
            return Flow::Continue;
        }
        if self.sources_exhausted() {
            return self.finish_bounded(workers).await;
        }
        for i in 0..self.chains.len() {
            let chain = &self.chains[i];
            if chain.active() && chain.prepared && chain.recover_sink.is_some() {
                if let Err(e) = self.recover_sink(i).await {
                    if let Some(flow) = self.on_table_error(i, e) {
                        return flow;
                    }
                }
            }
        }
        for i in 0..self.chains.len() {
            let chain = &self.chains[i];
            if !chain.active()
                || chain.recover_sink.is_some()
                || !self.mode.may_open_window(chain.enumerator.last_end())
            {
                continue;
            }
            if let Err(e) = self.maybe_open_window(i).await {
                if let Some(flow) = self.on_table_error(i, e) {
                    return flow;
                }
            }
        }
        if self
            .chains
            .iter()
            .any(|c| c.enumerator.window().is_some() && !c.window_durable)
        {
            // Splits are handed out only once this succeeded, so a failed
            // attempt is simply tried again on the next step.
            if let Err(e) = self.checkpoint(workers).await {
                return self.on_checkpoint_failed(e);
            }
        }
        for i in 0..self.chains.len() {
            let chain = &self.chains[i];
            if chain.active()
                && chain.recover_sink.is_none()
                && chain.window_durable
                && !chain.position_recorded()
            {
                // The sink must say it may hold this window's rows before
                // it holds any; like the checkpoint above, retried on the
                // next step until it succeeds.
                let fence = self.options.fence.clone();
                let job_id = self.options.job_id.to_string();
                if let Err(e) = self.chains[i].record_position(&job_id, &fence).await {
                    return self.on_checkpoint_failed(e);
                }
            }
        }
        self.assign(workers).await;
        Flow::Continue
    }

    /// Waits for the next thing to do and does it.
    async fn wait(
        &mut self,
        workers: &mut JobWorkers<T>,
        control: &mut mpsc::Receiver<Control>,
        checkpoint_tick: &mut Interval,
        savepoint_tick: &mut Option<Interval>,
    ) -> Flow {
        if let Some(flow) = self.deferred.take() {
            return flow;
        }
        // A drained window completes with a checkpoint right away.
        let drained = self.chains.iter().any(|c| c.active() && c.window_drained());
        let next_window = self
            .chains
            .iter()
            .filter(|c| {
                c.active()
                    && c.enumerator.window().is_none()
                    && !c.source.exhausted()
                    && self.mode.may_open_window(c.enumerator.last_end())
            })
            .map(|c| c.next_window_at)
            .min();
        let drain_deadline = self.mode.drain_deadline();
        let discover = !self.mode.is_stopping();
        tokio::select! {
            event = workers.events.recv() => match event {
                Some(event) => return self.on_event(event, &mut workers.idle),
                None => return Flow::End(JobStatus::Failed { error: "pipelines vanished".into() }),
            },
            _ = checkpoint_tick.tick() => {
                if let Err(e) = self.checkpoint(workers).await {
                    return self.on_checkpoint_failed(e);
                }
            }
            _ = super::replicas::periodic_tick(savepoint_tick) => self.periodic_savepoint(workers).await,
            _ = std::future::ready(()), if drained => {
                if let Err(e) = self.checkpoint(workers).await {
                    let flow = self.on_checkpoint_failed(e);
                    if let Flow::Continue = flow {
                        // Tolerated: try again soon, not in a busy loop.
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    return flow;
                }
            }
            _ = sleep_until(next_window.unwrap_or_else(Instant::now)), if next_window.is_some() => {}
            _ = sleep_until(self.next_discovery_at), if discover => {
                self.rediscover().await;
            }
            _ = sleep_until(drain_deadline.unwrap_or_else(Instant::now)), if drain_deadline.is_some() => {
                self.mode.drain_timed_out(&self.status);
            }
            ctl = control.recv() => return self.on_control(ctl, workers).await,
        }
        Flow::Continue
    }

    /// Serves one request (`None`: every handle is gone, so cancel).
    async fn on_control(&mut self, ctl: Option<Control>, workers: &mut JobWorkers<T>) -> Flow {
        match ctl {
            None | Some(Control::Cancel) => return Flow::End(JobStatus::Canceled),
            Some(Control::Checkpoint { reply }) => {
                let r = self
                    .checkpoint(workers)
                    .await
                    .map(|(id, _)| id)
                    .map_err(ControlError::from);
                let _ = reply.send(r);
            }
            Some(Control::Savepoint { dir, reply }) => {
                let _ = reply.send(self.savepoint(dir, workers).await);
            }
            Some(Control::Stop { mode, reply }) => {
                let has_dir =
                    mode.savepoint_dir.is_some() || self.options.default_savepoint_dir.is_some();
                self.mode.request_stop(mode, reply, has_dir, workers);
            }
        }
        Flow::Continue
    }

    /// Every running table is between windows (no window open, snapshot
    /// done): the sink holds exactly each source as of its last end.
    /// Paused tables do not hold a drain up.
    fn between_windows(&self) -> bool {
        self.chains
            .iter()
            .filter(|c| c.active())
            .all(|c| c.between_windows())
    }

    /// Opens chain `i`'s next window if one is due: picks its end on the
    /// source clock, brings the sink in line with the source's schema
    /// (`job.schemaEvolution`), then plans its splits.
    async fn maybe_open_window(&mut self, i: usize) -> Result<(), EngineError> {
        let follow = self.config.schema_evolution;
        let discovery = self.config.discovery_interval;
        let fence = self.options.fence.clone();
        let chain = &mut self.chains[i];
        if chain.enumerator.window().is_some()
            || Instant::now() < chain.next_window_at
            || chain.source.exhausted()
        {
            return Ok(());
        }
        let now = chain.source.now().await?;
        let window = chain.enumerator.next_window(now);
        if window.start_timestamp.is_some_and(|s| s >= now) {
            // The source clock has not moved past the last end yet.
            chain.next_window_at = Instant::now() + Duration::from_millis(100);
            return Ok(());
        }
        // The schema is read after the window's end was chosen: a row
        // written before that end cannot hold a column added after this
        // read (docs/semantics.md, "Schema changes").
        if follow {
            if let Some(schema) = chain.source.schema().await? {
                if chain.schema.as_ref() != Some(&schema) {
                    // A fenced instance changes nothing on the sink.
                    fence.check()?;
                    chain
                        .sink
                        .follow_schema(chain.schema.as_ref(), &schema)
                        .await?;
                    if chain.schema.is_some() {
                        chain.metrics.schema_changed();
                        tracing::info!(table = %chain.table.name, "source schema change applied to the sink");
                    }
                    chain.schema = Some(schema);
                    // A followed rename may have renamed the sink table.
                    chain.metrics.set_sink_name(chain.sink.name());
                }
            }
        }
        let splits = chain.source.plan(window).await?;
        let skipped = chain.source.skipped_in_last_plan();
        chain.metrics.add_skipped(skipped);
        tracing::info!(
            table = %chain.table.name,
            snapshot = window.is_snapshot(),
            start = ?window.start_timestamp,
            end = %window.end_timestamp,
            splits = splits.len(),
            unchanged_skipped = skipped,
            "window opened"
        );
        chain.enumerator.open_window(window, splits)?;
        chain.cursor = chain.source.cursor();
        chain.fresh_window = Some(window);
        chain.window_durable = false;
        chain.window_opened = Some(Instant::now());
        chain.next_window_at = Instant::now() + discovery;
        Ok(())
    }

    /// Hands splits to idle pipelines, taking turns between the tables
    /// that have some.
    async fn assign(&mut self, workers: &mut JobWorkers<T>) {
        let n = self.chains.len();
        let mut dry = 0;
        while let Some(&w) = workers.idle.last() {
            if n == 0 || dry >= n {
                break;
            }
            let i = self.next_chain % n;
            self.next_chain = (i + 1) % n;
            let chain = &mut self.chains[i];
            let ready = chain.active()
                && chain.recover_sink.is_none()
                && chain.window_durable
                && chain.position_recorded()
                && chain.enumerator.window().is_some();
            let Some(split) = ready.then(|| chain.enumerator.assign()).flatten() else {
                dry += 1;
                continue;
            };
            dry = 0;
            chain.fresh_window = None;
            let id = split.split_id.clone();
            let assignment = Assignment {
                table: chain.key,
                split,
                source: chain.source.clone(),
                sink: chain.sink.clone(),
                metrics: chain.metrics.clone(),
            };
            if workers.list[w].splits.send(assignment).await.is_err() {
                // The worker is gone; put the split back and stop assigning.
                let _ = self.chains[i].enumerator.give_back(&id);
                break;
            }
            workers.idle.pop();
        }
    }

    /// The chain with key `key`, if it is still there.
    fn chain_index(&self, key: crate::identity::TableKey) -> Option<usize> {
        self.chains.iter().position(|c| c.key == key)
    }

    pub(super) fn on_event(&mut self, event: PipelineEvent, idle: &mut Vec<usize>) -> Flow {
        match event {
            PipelineEvent::Progress {
                table,
                split_id,
                resume_key,
            } => {
                let Some(i) = self.chain_index(table) else {
                    return Flow::Continue;
                };
                if let Err(e) = self.chains[i].enumerator.progress(&split_id, resume_key) {
                    tracing::warn!(error = %e, "progress for an unknown split");
                }
            }
            PipelineEvent::Finished {
                worker,
                table,
                split_id,
            } => {
                idle.push(worker);
                let Some(i) = self.chain_index(table) else {
                    return Flow::Continue;
                };
                if let Err(e) = self.chains[i].enumerator.finished(&split_id) {
                    return Flow::End(JobStatus::Failed {
                        error: e.to_string(),
                    });
                }
            }
            PipelineEvent::Stopped {
                worker,
                table,
                split_id,
            } => {
                tracing::debug!(%split_id, %table, "split stopped for a savepoint");
                idle.push(worker);
            }
            PipelineEvent::Failed {
                worker,
                table,
                split_id,
                error,
            } => {
                idle.push(worker);
                tracing::debug!(%split_id, "split failed");
                let Some(i) = self.chain_index(table) else {
                    return Flow::Continue;
                };
                // The split keeps its resume key for whoever reads it next.
                let _ = self.chains[i].enumerator.give_back(&split_id);
                if self.chains[i].paused.is_some() {
                    return Flow::Continue;
                }
                if let Some(flow) = self.on_table_error(i, error) {
                    return flow;
                }
            }
        }
        Flow::Continue
    }

    /// A failure of table `i`: in a job of several tables, one of the
    /// table's own ([`EngineError::is_table_fault`]) pauses it and the
    /// others go on (`None`); anything else is the job's failure.
    pub(super) fn on_table_error(&mut self, i: usize, error: EngineError) -> Option<Flow> {
        match self.pause_on_table_fault(i, error) {
            Ok(()) => None,
            Err(error) => Some(self.on_error(error)),
        }
    }

    /// Pauses table `i` if `error` is its own fault in a job of several
    /// tables; else gives the error back.
    pub(super) fn pause_on_table_fault(
        &mut self,
        i: usize,
        error: EngineError,
    ) -> Result<(), EngineError> {
        if !(self.many_tables() && error.is_table_fault()) {
            return Err(error);
        }
        let text = crate::error::display_chain(&error);
        let message = match error.advice() {
            Some(advice) => format!("{text}. What to do: {advice}"),
            None => text,
        };
        let chain = &mut self.chains[i];
        tracing::error!(table = %chain.table.name, error = %message, "table paused; the job goes on with the other tables");
        chain.pause(message);
        self.record_table_exception(&error);
        Ok(())
    }
}
