//! ferry's replication engine.
//!
//! Owns the window chain (snapshot at t0, then diff windows), the split
//! enumerator, the reader→writer pipelines and the checkpoint coordinator.
//! It knows no connector (Kudu's is `ferry-kudu`, Kafka's `ferry-kafka`;
//! both plug in through [`connector`]) and nothing of the CLI or HTTP.
//!
//! # Layout
//!
//! - [`config`]: the job configuration: a catalog of every `job.*`,
//!   `reader.*`, `writer.*` and restart key (names, defaults, docs as data) and the
//!   validated [`config::JobConfig`] built from key/value pairs (reading
//!   argv and files is the binary's job).
//! - [`connector`]: the small `Source` / `SplitReader` / `Sink` /
//!   `SinkWriter` traits connectors implement: `Source::plan` returns a
//!   [`connector::WindowPlan`] (the engine keeps its cursor); a sink's core
//!   is prepare / writer / name, and commit, positions and schema following
//!   are capabilities it opts into.
//! - [`time`]: [`SourceTime`] and [`SinkTime`] (points on the source's and
//!   the sink's own clocks), the source's [`SourceClock`] (how its times
//!   read as wall-clock time) and the one wall-clock [`time::now_ms`].
//! - [`identity`]: [`SplitId`], [`TableId`], [`TableKey`].
//! - [`job`]: the front door [`Job::start`] (restore check, sink
//!   preparation, then the coordinator task) and [`JobHandle`] (checkpoint,
//!   savepoint, stop with or without drain, cancel); `pipeline` runs splits
//!   reader → bounded channel → writer.
//! - [`restart`]: the restart strategy (Flink's `restart-strategy.*`):
//!   whether and when a job restarts from its newest complete checkpoint
//!   after a transient failure.
//! - [`metrics`]: the job's counters and gauges.
//! - [`status`]: what a job shows, at the bottom of the engine (no `job`
//!   module below it): [`JobStatus`], the checkpoint and exception
//!   records, and [`status::JobSnapshot`], one serde view of a job
//!   (status, metrics, checkpoint history, tables).
//! - [`error`]: [`EngineError`], a connector's [`error::ConnectorError`]
//!   (retry hint, domain, table, advice), and the typed errors of the API:
//!   [`StartError`], [`RestoreError`], [`ControlError`].
//! - [`enumerator`]: the window chain and split queues (unassigned,
//!   pending, pending-removal) as a pure state machine.
//! - [`checkpoint`]: durable checkpoints and savepoints in Flink's on-disk
//!   layout (`<dir>/<job-id>/chk-<N>/_metadata`,
//!   `savepoint-<job6>-<rand12>/_metadata`): the stored [`checkpoint::JobState`],
//!   its checksummed `_metadata` encoding, the small [`checkpoint::StateStore`]
//!   trait over `object_store`, and [`checkpoint::CheckpointStore`] (write,
//!   find the latest complete one, retention, load for `ferry run -s`).
//! - [`replication`]: copies of every completed checkpoint and savepoint
//!   to replica locations (`job.stateReplicas`), in the background, with
//!   lag metrics; [`replication::mirror`] for `ferry state mirror`.
//! - [`lease`]: high availability — find the newest valid state in a store,
//!   the lease a standby takes over, the fence that stops a stale active.
//! - [`throttle`]: limits on rows/s and bytes/s for reading and writing
//!   (snapshot and diff, job-wide and per table), changed live.
//! - [`shard`]: a job cut into shards (`job.shards`): [`shard::ShardSpec`]
//!   and which shard owns which table (or part of a split table).
//! - [`sink_position`]: the sink position, a record on the sink of the
//!   window the sink may hold rows of, so a restore from an older state
//!   resumes where the sink is (a sink keeps it through the
//!   [`connector::SinkPositions`] capability).

pub mod checkpoint;
pub mod config;
pub mod connector;
pub mod enumerator;
pub mod error;
pub mod failpoint;
pub mod identity;
pub mod job;
pub mod lease;
pub mod metrics;
mod pipeline;
pub mod replication;
pub mod restart;
pub mod shard;
pub mod status;
pub mod throttle;
pub mod time;
pub mod verify;

pub use error::{ConnectorError, ControlError, EngineError, RestoreError, RetryHint, StartError};
pub use identity::{SplitId, TableId, TableKey};
pub use job::{Job, JobHandle, JobOptions, RestorePoint, StopMode};
pub use status::JobStatus;
pub use time::{SinkTime, SourceClock, SourceTime};
pub mod sink_position;
