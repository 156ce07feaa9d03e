//! The job: the engine's front door ([`Job::start`]) and the coordinator
//! task behind a [`JobHandle`].
//!
//! [`Job::start`] takes the validated [`JobConfig`], an optional
//! [`RestorePoint`], a source and a sink. It refuses a restore point that
//! does not fit the job ([`RestoreError`]), then spawns the coordinator,
//! one task that first prepares the sink ([`Sink::prepare`]: for Kudu,
//! create or check the sink table; an unreachable cluster is retried like
//! any transient failure, with the job visible as RESTARTING), then owns
//! the [`Enumerator`], opens
//! windows on the source clock, hands splits to pipelines, takes periodic
//! checkpoints, and serves requests (checkpoint, savepoint, stop, cancel).
//!
//! Window chain: the snapshot at t0, then [t_i, t_i+1) diff windows, each
//! opened `job.discoveryIntervalSeconds` after the previous one opened and
//! only once the previous one completed (all splits flushed and a
//! checkpoint recording that completed). When the last split of a window
//! finishes, a checkpoint is taken at once instead of waiting for the next
//! periodic one, so the window's end becomes durable (and visible as
//! `lastEndTimestamp`) as early as possible.
//!
//! A window's boundaries are made durable before any of its rows is
//! written: opening a window (or resuming one) takes a checkpoint first,
//! and splits are handed out only after it completed. So the sink never
//! holds changes from beyond the window recorded in the newest complete
//! checkpoint. Without this, a restore from that checkpoint would replay
//! a wider window, and a row inserted (and already copied) then deleted
//! inside it would not come back from the diff scan — the sink would keep
//! it. A restore from an *older* checkpoint or savepoint (a DR copy) meets
//! a sink that is further than the state it restores; there the sink
//! position decides (`position`): each window is also recorded on the
//! sink cluster before its splits are handed out, and a job started from
//! a restore point continues from the later of the two.
//!
//! Each table's chain is in one phase (`phase`): preparing, recovering (a
//! transactional sink), between windows, opened, durable, handing out,
//! paused or retiring; only the handing-out phase hands out splits, and
//! only a completed checkpoint and then a recorded position lead there.
//!
//! Stopping and restarting are modes of the coordinator (`stop`): a plain
//! stop makes the pipelines stop after their current batch and then
//! writes the savepoint; a stop with drain first lets the open window
//! complete and opens no new one, so its savepoint holds no split in
//! progress; a restart drops the pipelines and waits out the restart
//! strategy's delay, refusing requests but cancel. All are decided in the
//! coordinator's one loop, between events, so no window can open between
//! "the window is done" and "stop".
//!
//! # Layout
//!
//! - this file: [`Job::start`], [`JobOptions`], [`RestorePoint`];
//! - `handle`: [`JobHandle`], [`StopMode`], the requests;
//! - `publish`: what the job shows, one board in a `watch` channel the
//!   handle reads ([`JobStatus`] and the other status types are
//!   [`crate::status`]'s);
//! - `coordinator`: the coordinator's loop, windows and pipeline events;
//!   `workers`: its pipelines;
//! - `chain`: one table's chain; `phase`: its phase and transitions;
//! - `stop`: the modes (running, draining, stopping, restarting);
//! - `discovery`: which tables, preparing their sinks;
//! - `position`: the sink position: recorded before a window's splits
//!   are handed out, compared with a restored state at start;
//! - `cuts`: with a sink that publishes consistent cuts, the tables'
//!   windows open together and each round's cut is published;
//! - `verifying`: continuous verify's turns ([`crate::verify`]);
//! - `commit`: exactly-once through transactional sinks;
//! - `recovery`: failures, the restart strategy, restarts from the newest
//!   complete checkpoint;
//! - `checkpointing`: checkpoints, savepoints and their history;
//! - `replicas`: periodic savepoints, and notices of completed states to
//!   the state replicas (`crate::replication`).

mod chain;
mod checkpointing;
mod commit;
#[cfg(test)]
mod commit_tests;
mod coordinator;
mod cuts;
#[cfg(test)]
mod cuts_tests;
mod discovery;
mod handle;
mod phase;
mod position;
#[cfg(test)]
mod position_tests;
mod publish;
mod recovery;
mod replicas;
#[cfg(test)]
mod replicas_tests;
#[cfg(test)]
mod restart_tests;
mod stop;
#[cfg(test)]
mod tables_tests;
#[cfg(test)]
mod tests;
mod verifying;
mod workers;

pub use crate::status::{CheckpointRecord, JobStatus};
pub use handle::{JobHandle, StopMode, DEFAULT_DRAIN_TIMEOUT};
pub use publish::MAX_EXCEPTIONS;

use crate::checkpoint::{CheckpointStore, JobId, JobState, LoadedState, StorageLocation};
use crate::config::JobConfig;
use crate::connector::{SingleTable, Sink, Source, TableRef};
#[cfg(doc)]
use crate::enumerator::Enumerator;
use crate::error::{RestoreError, StartError};
use crate::identity::TableId;
use crate::lease::Fence;
use crate::time::SourceTime;

/// What a job needs besides its configuration and connectors.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobOptions {
    /// The job's id (new jobs get a random one).
    pub job_id: JobId,
    /// Pipelines run in parallel (at least 1).
    pub parallelism: usize,
    /// Where savepoints go when a request names no directory.
    pub default_savepoint_dir: Option<StorageLocation>,
    /// The lease fence checked before every checkpoint and sink write
    /// ([`Fence::none`] without high availability).
    pub fence: Fence,
    /// Start "diff from source time T": the chain starts as if a window
    /// had ended at T (no snapshot), for a sink known to equal the source
    /// as of T — the reverse job after a verified cutover. Not with a
    /// restore point.
    pub start_at: Option<SourceTime>,
    /// Continuous verify's verifier (`job.verifyInterval`); `None`: the
    /// job verifies nothing.
    pub verifier: Option<crate::verify::VerifierHandle>,
}

impl JobOptions {
    /// A new job id, `parallelism` pipelines, no default savepoint directory.
    pub fn new(parallelism: usize) -> Self {
        JobOptions {
            job_id: JobId::random(),
            parallelism,
            default_savepoint_dir: None,
            fence: Fence::none(),
            start_at: None,
            verifier: None,
        }
    }

    /// With a verifier for continuous verify (used when
    /// `job.verifyInterval` is set).
    pub fn verifier(mut self, verifier: std::sync::Arc<dyn crate::verify::Verifier>) -> Self {
        self.verifier = Some(crate::verify::VerifierHandle(verifier));
        self
    }

    /// Starting with a diff window from source time `t` instead of a
    /// snapshot (see [`JobOptions::start_at`](Self#structfield.start_at)).
    pub fn start_at(mut self, t: Option<SourceTime>) -> Self {
        self.start_at = t;
        self
    }

    /// With a lease fence (high availability).
    pub fn fence(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    /// With this job id.
    pub fn job_id(mut self, job_id: JobId) -> Self {
        self.job_id = job_id;
        self
    }

    /// With a default savepoint directory.
    pub fn default_savepoint_dir(mut self, dir: Option<StorageLocation>) -> Self {
        self.default_savepoint_dir = dir;
        self
    }
}

/// A checkpoint or savepoint to continue from.
#[derive(Debug, Clone)]
pub struct RestorePoint {
    /// Where it was loaded from, as the user named it (for messages).
    pub location: String,
    /// The stored state.
    pub state: JobState,
}

impl From<LoadedState> for RestorePoint {
    fn from(loaded: LoadedState) -> Self {
        RestorePoint {
            location: loaded.location.to_uri(),
            state: loaded.state,
        }
    }
}

impl RestorePoint {
    /// Refuses a state of an older build (no table ids) whose splits in
    /// progress belong to another table. A state between windows carries
    /// no table data, so it may seed a job on a renamed table.
    fn check(self, config: &JobConfig) -> Result<JobState, RestoreError> {
        check_shard_plan(&self.location, &self.state, config)?;
        let state = self.state;
        let has_splits = !state.unassigned.is_empty() || !state.pending.is_empty();
        // States with table ids are matched by id when the tables are
        // found (a renamed table is the same table); older states only by
        // name, here.
        if state.tables.is_empty() && state.table_name != config.table_name && has_splits {
            return Err(RestoreError::OtherTable {
                location: self.location,
                saved_table: state.table_name,
                table: config.table_name.clone(),
            });
        }
        tracing::info!(
            path = %self.location,
            last_end = ?state.last_end_timestamp,
            window = ?state.window,
            pending = state.pending.len(),
            unassigned = state.unassigned.len(),
            "resuming"
        );
        Ok(state)
    }
}

/// Refuses a state of another shard plan (`job.shards`,
/// `job.shardTabletsOver`, the shard itself) before anything is written.
/// A state without shards fits a job of one shard.
fn check_shard_plan(
    location: &str,
    state: &JobState,
    config: &JobConfig,
) -> Result<(), RestoreError> {
    let (saved, saved_count, saved_over) = match &state.shard {
        Some(s) => (Some(s.spec), s.spec.count, s.tablets_over),
        None => (None, 1, 0),
    };
    let given = config.shard;
    let fits = saved_count == config.shards
        && saved_over == config.shard_tablets_over
        && (saved == given || (saved_count == 1 && given.is_none_or(|g| g.count == 1)));
    if fits {
        return Ok(());
    }
    let show = |s: Option<crate::shard::ShardSpec>, count: u32| match s {
        Some(s) => s.to_string(),
        None if count > 1 => "the whole job (no shard chosen)".to_string(),
        None => "a job without shards".to_string(),
    };
    Err(RestoreError::ShardPlan {
        location: location.to_string(),
        saved: show(saved, saved_count),
        saved_count,
        saved_over,
        given: show(given, config.shards),
        given_count: config.shards,
        given_over: config.shard_tablets_over,
    })
}

/// The engine's front door.
#[derive(Debug)]
pub struct Job;

impl Job {
    /// Checks `restore` against the job and starts it; it prepares `sink`
    /// first and runs until stopped, cancelled or failed (a sink that
    /// cannot take the source's rows fails it at once). Checkpoints go to
    /// `store`.
    pub async fn start<S, K>(
        config: &JobConfig,
        restore: Option<RestorePoint>,
        source: S,
        sink: K,
        store: CheckpointStore,
        options: JobOptions,
    ) -> Result<JobHandle, StartError>
    where
        S: Source,
        K: Sink<S::Batch>,
    {
        // No id: such a job's states are matched by name, like an older
        // build's (its connectors may know no table ids).
        let table = TableRef {
            id: TableId::unknown(),
            name: config.table_name.clone(),
        };
        Self::start_tables(
            config,
            restore,
            SingleTable::new(table, source, sink),
            store,
            options,
        )
        .await
    }
}

impl Job {
    /// Starts a job of many tables (or one): `tables` finds the source
    /// tables (`job.tableName` list, `job.tablePattern`) and makes each
    /// one's source and sink; every table has its own window chain, the
    /// `-p` pipelines are shared fairly between them, and one checkpoint
    /// holds every table's state. [`Job::start`] is this with one table.
    pub async fn start_tables<T: crate::connector::Tables>(
        config: &JobConfig,
        restore: Option<RestorePoint>,
        tables: T,
        store: CheckpointStore,
        options: JobOptions,
    ) -> Result<JobHandle, StartError> {
        if restore.is_some() && options.start_at.is_some() {
            return Err(StartError::RestoreAndStartTime);
        }
        let restore = restore.map(|r| r.check(config)).transpose()?;
        Ok(handle::spawn(
            tables,
            store,
            config.clone(),
            options,
            restore,
        ))
    }
}

#[cfg(test)]
mod restore_tests {
    use super::*;
    use crate::checkpoint::{SnapshotKind, SplitState, WindowState};

    fn config(table: &str) -> JobConfig {
        let args = [
            "--job.sourceMasterAddresses",
            "a:7051",
            "--job.sinkMasterAddresses",
            "b:7051",
            "--job.tableName",
            table,
            "--job.checkpointsDirectory",
            "/tmp/chk",
        ];
        JobConfig::from_named_pairs(
            args.chunks(2)
                .map(|kv| (kv[0].trim_start_matches("--"), kv[1])),
        )
        .expect("config")
    }

    fn point(table: &str, with_split: bool) -> RestorePoint {
        let mut state = JobState::new(
            JobId::random(),
            SnapshotKind::Savepoint,
            3,
            table,
            vec![],
            vec![],
        );
        state.last_end_timestamp = Some(SourceTime::from_raw(10));
        if with_split {
            state.window = Some(WindowState {
                start_timestamp: Some(SourceTime::from_raw(10)),
                end_timestamp: SourceTime::from_raw(20),
            });
            state.pending = vec![SplitState {
                split_id: "s".into(),
                descriptor: vec![1],
                resume_key: None,
            }];
        }
        RestorePoint {
            location: "/sp/savepoint-1".into(),
            state,
        }
    }

    #[test]
    fn splits_of_another_table_are_refused() {
        let err = point("old", true)
            .check(&config("new"))
            .expect_err("refused");
        assert_eq!(
            err.to_string(),
            "the savepoint at '/sp/savepoint-1' was taken from table 'old' with splits in progress; it cannot resume table 'new'"
        );
    }

    fn sharded(shards: &str, over: &str) -> JobConfig {
        JobConfig::from_named_pairs([
            ("job.sourceMasterAddresses", "a:7051"),
            ("job.sinkMasterAddresses", "b:7051"),
            ("job.tablePattern", "t.*"),
            ("job.checkpointsDirectory", "/tmp/chk"),
            ("job.shards", shards),
            ("job.shardTabletsOver", over),
        ])
        .expect("config")
    }

    fn of_shard(config: &JobConfig, index: u32) -> RestorePoint {
        let mut p = point("t", false);
        p.state.shard = Some(crate::shard::ShardState {
            spec: crate::shard::ShardSpec::new(index, config.shards).expect("valid"),
            tablets_over: config.shard_tablets_over,
            tables: vec![],
        });
        p
    }

    #[test]
    fn a_state_of_another_shard_plan_is_refused_naming_job_shards() {
        let three = sharded("3", "0");
        let four = sharded("4", "0");
        let saved = of_shard(&three, 1);
        // The same shard of the same plan resumes.
        assert!(saved
            .clone()
            .check(&three.for_shard(1).expect("shard"))
            .is_ok());
        let err = saved
            .clone()
            .check(&four.for_shard(1).expect("shard"))
            .expect_err("another shard count");
        assert_eq!(
            err.to_string(),
            "the savepoint or checkpoint at '/sp/savepoint-1' was taken by shard 1 of 3 (job.shards = 3, job.shardTabletsOver = 0), but this job runs shard 1 of 4 (job.shards = 4, job.shardTabletsOver = 0): the shard count and split threshold are fixed when a job is created; restore it with the values it was taken with, or start a new job without it to change them"
        );
        // Another shard, the whole job, another threshold, no shards.
        assert!(saved
            .clone()
            .check(&three.for_shard(2).expect("shard"))
            .is_err());
        assert!(saved.clone().check(&three).is_err());
        let split = sharded("3", "4");
        assert!(saved
            .clone()
            .check(&split.for_shard(1).expect("shard"))
            .is_err());
        assert!(saved.check(&config("t")).is_err());
        // A state without shards does not seed a shard of several.
        let err = point("t", false)
            .check(&three.for_shard(0).expect("shard"))
            .expect_err("unsharded state");
        assert!(
            err.to_string()
                .contains("taken by a job without shards (job.shards = 1"),
            "{err}"
        );
        // ... but is the one shard of a job of one.
        let one = sharded("1", "0");
        assert!(point("t", false)
            .check(&one.for_shard(0).expect("shard"))
            .is_ok());
        assert!(of_shard(&one, 0).check(&config("t")).is_ok());
    }

    #[test]
    fn a_state_between_windows_seeds_a_renamed_table() {
        let state = point("old", false).check(&config("new")).expect("accepted");
        assert_eq!(state.last_end_timestamp, Some(SourceTime::from_raw(10)));
        let state = point("t", true).check(&config("t")).expect("same table");
        assert_eq!(state.pending.len(), 1);
    }
}
