//! The coordinator: one task that owns the tables' window chains and the
//! pipelines, opens windows, assigns splits, reacts to pipeline events and
//! serves requests, all from one loop (`step`, then `wait`), whatever its
//! mode (running, draining, stopping, restarting), so each decision sees a
//! consistent state.
//!
//! A job replicates one table or many. Each table has its own chain
//! ([`Chain`]: windows, split queues, phase, sink position, schema); the
//! `-p` pipelines are shared and handed splits round-robin across the
//! tables that have some, so a big snapshot cannot starve the others'
//! windows. One checkpoint holds every chain's state.
//!
//! The coordinator's parts live with the files that own them: the
//! checkpoints (`checkpointing`), the mode (`stop`), the restart strategy
//! (`recovery`), table discovery (`discovery`), what the job shows
//! (`publish`); the commit gate is `commit`'s.

use super::chain::Chain;
use super::checkpointing::Checkpoints;
use super::cuts::{Cuts, Round};
use super::discovery::Discovery;
use super::handle::Control;
use super::publish::Publisher;
use super::recovery::Recovery;
use super::stop::Mode;
use super::verifying::Verifying;
use super::workers::Workers;
use super::JobOptions;
use crate::checkpoint::{CheckpointStore, JobState};
use crate::config::JobConfig;
use crate::connector::{Sink, Source, Tables};
use crate::error::{ControlError, EngineError};
use crate::pipeline::{Assignment, CommitGate, PipelineEvent};
use crate::status::JobStatus;
use crate::time::SourceTime;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

/// The source and sink types of a job's tables.
pub(super) type Src<T> = <T as Tables>::Source;
pub(super) type Snk<T> = <T as Tables>::Sink;
pub(super) type TableChain<T> = Chain<Src<T>, Snk<T>>;

/// The pipelines of a job of tables `T`.
pub(super) type JobWorkers<T> = Workers<Src<T>, Snk<T>>;

/// Whether the loop goes on.
pub(super) enum Flow {
    Continue,
    /// A transient failure (`cause`): restart from the newest complete
    /// checkpoint after `delay`.
    Restart {
        delay: Duration,
        cause: String,
    },
    End(JobStatus),
}

pub(super) struct Coordinator<T: Tables> {
    pub(super) config: JobConfig,
    pub(super) options: JobOptions,
    /// One chain per table, in the order they were found.
    pub(super) chains: Vec<TableChain<T>>,
    /// Which tables the job replicates (`discovery`).
    pub(super) discovery: Discovery<T>,
    /// Store, numbering, the newest complete state, timers, replicas
    /// (`checkpointing`).
    pub(super) checkpoints: Checkpoints,
    /// Running, draining, stopping or restarting (`stop`).
    pub(super) mode: Mode,
    /// The restart strategy and a failure waiting to be acted on
    /// (`recovery`).
    pub(super) recovery: Recovery,
    /// Held while a checkpoint commits transactional sinks (`commit`,
    /// [`crate::pipeline`]).
    pub(super) gate: CommitGate,
    /// Status, history, tables and live metrics, as the handle reads them
    /// (`publish`).
    pub(super) publisher: Publisher,
    /// The consistent cuts published (`cuts`).
    pub(super) cuts: Cuts,
    /// Continuous verify's turns (`verifying`).
    pub(super) verifying: Verifying,
}

impl<T: Tables> Coordinator<T> {
    pub(super) fn new(
        tables: T,
        store: CheckpointStore,
        config: JobConfig,
        options: JobOptions,
        restore: Option<JobState>,
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
        let initial = restore.or(started_at);
        let publisher = Publisher::new(config.throttle);
        if let Some(end) = initial.as_ref().and_then(|s| s.last_end_timestamp) {
            publisher.metrics.set_last_end(Src::<T>::CLOCK, end);
        }
        Coordinator {
            discovery: Discovery::new(tables, initial.as_ref(), from_restore_point, &config),
            checkpoints: Checkpoints::new(store, initial, &config, &options.fence),
            recovery: Recovery::new(&config),
            chains: Vec::new(),
            mode: Mode::Running,
            gate: CommitGate::default(),
            publisher,
            cuts: Cuts::default(),
            verifying: Verifying::new(&config, &options),
            options,
            config,
        }
    }

    /// Whether the job replicates a selection of tables (a list or a
    /// pattern) rather than one named table: then a table's own failure
    /// pauses that table instead of failing the job.
    pub(super) fn many_tables(&self) -> bool {
        !self.config.tables.is_single()
    }

    /// Runs the job until it ends, publishes and returns how it ended.
    pub(super) async fn run(mut self, mut control: mpsc::Receiver<Control>) -> JobStatus {
        self.checkpoints
            .number_above_existing(&self.options.job_id)
            .await;
        let mut workers = Workers::none();
        let status = loop {
            let mut flow = self.step(&mut workers).await;
            if let Flow::Continue = flow {
                self.publish_metrics();
                self.publisher.status(self.mode.status());
                flow = self.wait(&mut workers, &mut control).await;
            }
            match flow {
                Flow::Continue => {}
                Flow::End(status) => break status,
                Flow::Restart { delay, cause } => {
                    // Dropping the pipelines aborts them mid-batch; what
                    // they wrote is replayed (idempotently) from the
                    // restored state.
                    workers = Workers::none();
                    self.restart(delay, cause);
                }
            }
        };
        drop(workers);
        self.mode.job_ended(&status);
        self.publisher.metrics.ended();
        match &status {
            JobStatus::Failed { error } => tracing::error!(%error, "job failed"),
            other => tracing::info!(status = ?other, "job ended"),
        }
        self.checkpoints.finish_replication().await;
        self.publisher.status(status.clone());
        status
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
        let metrics = &self.publisher.metrics;
        metrics.set_split_counts(sum);
        let ends: Option<Vec<SourceTime>> = self
            .chains
            .iter()
            .map(|c| c.enumerator.last_end())
            .collect();
        if let Some(end) = ends.and_then(|e| e.into_iter().min()) {
            metrics.set_last_end(Src::<T>::CLOCK, end);
        }
    }

    /// Shows chain `i`'s table as it is now (name, sink, pause).
    pub(super) fn show_table(&self, i: usize) {
        self.publisher.table(self.chains[i].shown());
    }

    /// What the coordinator does before it waits: nothing while it
    /// restarts; else prepare the tables and start the pipelines if that
    /// is still to do, stop at a window boundary if a stop is due, else
    /// move each chain on (`advance_chains`) and hand out splits.
    async fn step(&mut self, workers: &mut JobWorkers<T>) -> Flow {
        if self.mode.is_restarting() {
            return Flow::Continue;
        }
        if !self.tables_ready() {
            if let Err(e) = self.prepare_tables().await {
                return self.on_error(e);
            }
            self.discovery.schedule(&self.config);
            self.checkpoints.tables_ready();
        }
        if !workers.started() {
            *workers = Workers::start(
                self.options.parallelism,
                &self.publisher.metrics,
                &self.options.fence,
                &self.gate,
            );
            self.checkpoints.pipelines_started();
        }
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
        if let Some(flow) = self.advance_chains(workers).await {
            return flow;
        }
        self.assign(workers).await;
        Flow::Continue
    }

    /// Moves every chain as far towards handing out splits as it may go:
    /// transactional sinks recover, due windows open, open windows are made
    /// durable by a checkpoint, durable ones are recorded as sink
    /// positions. `Some` when the loop must act on a failure instead.
    async fn advance_chains(&mut self, workers: &mut JobWorkers<T>) -> Option<Flow> {
        for i in 0..self.chains.len() {
            if self.chains[i].phase.recovering().is_some() {
                if let Err(e) = self.recover_sink(i).await {
                    if let Some(flow) = self.on_table_error(i, e) {
                        return Some(flow);
                    }
                }
            }
        }
        // Windows that open together wait for every table (`cuts`).
        let mut round = self.start_round().await;
        for i in 0..self.chains.len() {
            let chain = &self.chains[i];
            if !chain.phase.may_open() || !self.mode.may_open_window(chain.enumerator.last_end()) {
                continue;
            }
            let Some(round) = round.as_mut() else { break };
            if let Err(e) = self.maybe_open_window(i, round).await {
                if let Some(flow) = self.on_table_error(i, e) {
                    return Some(flow);
                }
            }
        }
        if self.chains.iter().any(|c| c.phase.needs_checkpoint()) {
            // Splits are handed out only once this succeeded, so a failed
            // attempt is simply tried again on the next step.
            if let Err(e) = self.checkpoint(workers).await {
                return Some(self.on_checkpoint_failed(e));
            }
        }
        for i in 0..self.chains.len() {
            if self.chains[i].phase.needs_position().is_some() {
                // The sink must say it may hold this window's rows before
                // it holds any; like the checkpoint above, retried on the
                // next step until it succeeds.
                let fence = self.options.fence.clone();
                let job_id = self.options.job_id.to_string();
                if let Err(e) = self.chains[i].record_position(&job_id, &fence).await {
                    return Some(self.on_checkpoint_failed(e));
                }
            }
        }
        None
    }

    /// Waits for the next thing to do and does it. While the job restarts
    /// only its delay and requests are waited for.
    async fn wait(
        &mut self,
        workers: &mut JobWorkers<T>,
        control: &mut mpsc::Receiver<Control>,
    ) -> Flow {
        if let Some(flow) = self.recovery.deferred.take() {
            return flow;
        }
        let ticking = self.mode.takes_checkpoints();
        // A drained window completes with a checkpoint right away.
        let drained = ticking && self.chains.iter().any(|c| c.active() && c.window_drained());
        let round_open = self.round_open();
        let next_window = self
            .chains
            .iter()
            .filter(|c| {
                round_open
                    && c.phase.may_open()
                    && !c.source.exhausted(c.cursor.as_ref())
                    && self.mode.may_open_window(c.enumerator.last_end())
            })
            .map(|c| c.next_window_at)
            .min();
        let drain_deadline = self.mode.drain_deadline();
        let resume_at = self.mode.resume_at();
        let verify_at = self.verifying.due().filter(|_| ticking);
        let discover = self.mode.discovers_tables();
        tokio::select! {
            event = workers.events.recv() => match event {
                Some(event) => return self.on_event(event, &mut workers.idle),
                None => return Flow::End(JobStatus::Failed { error: "pipelines vanished".into() }),
            },
            _ = self.checkpoints.tick.tick(), if ticking => {
                if let Err(e) = self.checkpoint(workers).await {
                    return self.on_checkpoint_failed(e);
                }
            }
            _ = super::replicas::periodic_tick(&mut self.checkpoints.periodic), if ticking => {
                self.periodic_savepoint(workers).await;
            }
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
            _ = sleep_until(verify_at.unwrap_or_else(Instant::now)), if verify_at.is_some() => {
                self.verify_turn();
            }
            _ = sleep_until(self.discovery.next_at), if discover => {
                self.rediscover().await;
            }
            _ = sleep_until(drain_deadline.unwrap_or_else(Instant::now)), if drain_deadline.is_some() => {
                self.mode.drain_timed_out(&self.publisher);
            }
            _ = sleep_until(resume_at.unwrap_or_else(Instant::now)), if resume_at.is_some() => {
                self.resume();
            }
            ctl = control.recv() => return self.on_control(ctl, workers).await,
        }
        Flow::Continue
    }

    /// Serves one request as the mode allows (`None`: every handle is
    /// gone, so cancel; cancel works in every mode).
    async fn on_control(&mut self, ctl: Option<Control>, workers: &mut JobWorkers<T>) -> Flow {
        match (ctl, self.mode.refusal()) {
            (None | Some(Control::Cancel), _) => return Flow::End(JobStatus::Canceled),
            (Some(ctl), Some(why)) => ctl.refuse(why),
            (Some(ctl), None) => self.serve(ctl, workers).await,
        }
        Flow::Continue
    }

    /// Serves a checkpoint, savepoint or stop request.
    async fn serve(&mut self, ctl: Control, workers: &mut JobWorkers<T>) {
        match ctl {
            // Answered by the loop (`on_control`).
            Control::Cancel => {}
            Control::Checkpoint { reply } => {
                let r = self
                    .checkpoint(workers)
                    .await
                    .map(|(id, _)| id)
                    .map_err(ControlError::from);
                let _ = reply.send(r);
            }
            Control::Savepoint { dir, reply } => {
                let _ = reply.send(self.savepoint(dir, workers).await);
            }
            Control::Stop { mode, reply } => {
                let has_dir =
                    mode.savepoint_dir.is_some() || self.options.default_savepoint_dir.is_some();
                self.mode.request_stop(mode, reply, has_dir, workers);
            }
        }
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

    /// Opens chain `i`'s next window if one is due (or the `round` is):
    /// picks its end on the source clock (the round's, together), brings
    /// the sink in line with the source's schema (`job.schemaEvolution`),
    /// then plans its splits.
    async fn maybe_open_window(&mut self, i: usize, round: &mut Round) -> Result<(), EngineError> {
        let follow = self.config.schema_evolution;
        let discovery = self.config.discovery_interval;
        let max_lag = self.config.reader.max_lag();
        let fence = self.options.fence.clone();
        let chain = &mut self.chains[i];
        if !chain.phase.may_open()
            || (!round.due && Instant::now() < chain.next_window_at)
            || chain.source.exhausted(chain.cursor.as_ref())
        {
            return Ok(());
        }
        // A fenced instance opens no window: it only stops.
        fence.check()?;
        let now = match round.now {
            Some(now) => now,
            None => chain.source.now().await?,
        };
        if round.together {
            round.now = Some(now);
        }
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
            if let Some(schema) = chain.source.schema_for(window).await? {
                if chain.schema.as_ref() != Some(&schema) {
                    // A fenced instance changes nothing on the sink.
                    fence.check()?;
                    // The schema is recorded whether the sink follows it
                    // or not (a sink that does not cannot refuse).
                    if let Some(follower) = chain.sink.schema_follower() {
                        follower
                            .follow_schema(chain.schema.as_ref(), &schema)
                            .await?;
                    }
                    if chain.schema.is_some() {
                        chain.metrics.schema_changed();
                        tracing::info!(table = %chain.table.name, "source schema change applied to the sink");
                    }
                    chain.schema = Some(schema);
                    // A followed rename may have renamed the sink table.
                    self.show_table(i);
                }
            }
        }
        let chain = &mut self.chains[i];
        let plan = chain.source.plan(window, chain.cursor.as_ref()).await?;
        let (splits, skipped) = (plan.splits, plan.skipped);
        chain.metrics.add_skipped(skipped);
        let interval =
            super::chain::window_interval(discovery, plan.pace, max_lag, chain.last_took);
        chain.metrics.set_window_interval(interval);
        tracing::info!(
            table = %chain.table.name,
            snapshot = window.is_snapshot(),
            start = ?window.start_timestamp,
            end = %window.end_timestamp,
            splits = splits.len(),
            unchanged_skipped = skipped,
            "window opened"
        );
        chain.open(window, splits)?;
        chain.cursor = plan.cursor;
        chain.next_window_at = Instant::now() + interval;
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
            let i = workers.next_table % n;
            workers.next_table = (i + 1) % n;
            let chain = &mut self.chains[i];
            let Some(split) = chain.hand_out() else {
                dry += 1;
                continue;
            };
            dry = 0;
            let id = split.split_id.clone();
            let assignment = Assignment {
                table: chain.key,
                split,
                source: chain.source.clone(),
                sink: chain.sink.clone(),
                metrics: chain.metrics.clone(),
                throttle: chain.throttle(&self.publisher.throttles),
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
                if self.chains[i].phase.paused().is_some() {
                    return Flow::Continue;
                }
                if let Some(flow) = self.on_table_error(i, error) {
                    return flow;
                }
            }
        }
        Flow::Continue
    }
}
