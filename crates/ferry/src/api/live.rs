//! ferry's own bodies (not in Flink): job submission in session mode and
//! the live numbers of `GET /ferry/jobs/:jobid/live` and
//! `GET /ferry/overview`, read by the web page and by
//! `ferry stop --drain-check`.

use crate::kudu_activity::{ForeignWrites, TableActivity, TableCounters};
use serde::{Deserialize, Serialize};

/// `POST /ferry/jobs`: a job for a session-mode server, as `ferry run
/// --jobmanager` sends it. The server validates it with the same code as
/// `ferry run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequestBody {
    /// The job's keys by name (command line over `--config`), values as
    /// given, locations made absolute; never a process key.
    pub config: std::collections::BTreeMap<String, String>,
    /// `-p/--parallelism`.
    pub parallelism: usize,
    /// `-s/--fromSavepoint`, an absolute URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_savepoint: Option<String>,
    /// `--savepointPath`, an absolute URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub savepoint_path: Option<String>,
}

/// The answer to [`SubmitRequestBody`] (like Flink's `/jars/:jarid/run`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmitResponse {
    /// The new job's id.
    pub jobid: String,
}

/// `GET /ferry/overview`: process facts and every job, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessOverview {
    /// ferry's version.
    pub version: String,
    /// `application` or `session`.
    pub mode: String,
    /// When the process started, epoch ms.
    pub started_at: u64,
    /// The process's clock when it answered, epoch ms.
    pub now: u64,
    /// The Prometheus endpoint, if it listens.
    pub metrics_url: Option<String>,
    /// Every job of the process, newest first.
    pub jobs: Vec<JobLive>,
}

/// `GET /ferry/jobs/:jobid/live`: one job's live numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobLive {
    /// The job id.
    pub jid: String,
    /// The job's name.
    pub name: String,
    /// Flink's state name.
    pub state: String,
    /// A stop with savepoint is under way (`state` stays RUNNING).
    pub stopping: bool,
    /// Why the job failed.
    pub error: Option<String>,
    /// Where a stopped job's final savepoint is.
    pub final_savepoint: Option<String>,
    /// The source table (`job.tableName`).
    pub table: String,
    /// The sink table.
    pub sink_table: String,
    /// Splits read at once.
    pub parallelism: usize,
    /// How often diff windows are planned, in ms.
    pub discovery_interval_ms: u64,
    /// When the job started, epoch ms.
    pub start_time: u64,
    /// -1 while the job runs.
    pub end_time: i64,
    /// The server's clock when it answered, epoch ms.
    pub now: u64,
    /// Since the job last became RUNNING; 0 while restarting or ended.
    pub uptime_ms: u64,
    /// In the current outage (RESTARTING); 0 otherwise.
    pub downtime_ms: u64,
    /// Restarts after transient failures.
    pub restarts: u64,
    /// The newest failures (at most ten), newest first.
    pub failures: Vec<FailureEntry>,
    /// End of the last completed window, epoch ms (0 before the first).
    pub last_end_timestamp: u64,
    /// `now - last_end_timestamp`, once a window completed.
    pub lag_ms: Option<u64>,
    /// Split counts of the open windows.
    pub splits: SplitCounts,
    /// Records per second, over the last seconds.
    pub rates: Rates,
    /// The job's counters.
    pub totals: Totals,
    /// Progress of the initial snapshot.
    pub snapshot: SnapshotProgress,
    /// Recent lag and split samples, oldest first.
    pub lag_history: Vec<LagPoint>,
    /// The tablet servers' write counters.
    pub kudu: KuduTables,
    /// The ten newest checkpoints, newest first.
    pub checkpoints: Vec<CheckpointEntry>,
    /// Every savepoint, newest first.
    pub savepoints: Vec<CheckpointEntry>,
    /// The checkpoint or savepoint the job was restored from.
    pub restored_from: Option<String>,
    /// Each state replica (`job.stateReplicas`): lag, last success,
    /// failures, newest state copied.
    #[serde(default)]
    pub replicas: Vec<ferry_engine::replication::ReplicaSnapshot>,
    /// Periodic savepoints (`job.periodicSavepointInterval`).
    #[serde(default)]
    pub periodic_savepoints: PeriodicSavepoints,
    /// The last verification run through the REST API
    /// (`POST /ferry/jobs/:jobid/verify`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyLive>,
    /// Each table of the job (one for a job of one table), by current
    /// source name: window end, splits, rows, schema changes, paused.
    #[serde(default)]
    pub tables: Vec<ferry_engine::status::TableSnapshot>,
    /// The Kafka connectors (jobs with a Kafka side only): counters per
    /// topic, end offset, position and lag per source partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<ferry_kafka::metrics::KafkaSnapshot>,
    /// The job's limits (job-wide and per table) and the time it spent
    /// throttled (`throttle.*`, `PATCH /ferry/jobs/:jobid/throttle`).
    #[serde(default)]
    pub throttle: ferry_engine::throttle::ThrottleSnapshot,
}

/// The last REST verification of one job (also the `ferry_verify_*`
/// metrics).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyLive {
    /// Its request id.
    pub request_id: String,
    /// Whether it is still running.
    pub in_progress: bool,
    /// 1 equal, 0 differs, -1 failed (absent while the first one runs).
    pub last_result: Option<i8>,
    /// Source rows compared by the last finished one.
    pub rows_compared: u64,
    /// Rows that differed in the last finished one.
    pub rows_differing: u64,
    /// When the last one finished, epoch ms (0 = none finished yet).
    pub finished_at: u64,
    /// Why the last one failed.
    pub error: Option<String>,
}

/// Periodic savepoints of one job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodicSavepoints {
    /// The interval in ms (0 = off).
    pub interval_ms: u64,
    /// Periodic savepoints completed.
    pub completed: u64,
    /// Periodic savepoints failed.
    pub failed: u64,
    /// When the last one completed, epoch ms (0 = none yet).
    pub last_at: u64,
    /// Where the last one is.
    pub last_path: Option<String>,
}

/// One sample of the lag history, sent as a JSON array to keep the page's
/// payload small: `[t, lag_ms, pending, unassigned, pending_removal]`.
pub type LagPoint = (u64, Option<u64>, u64, u64, u64);

/// The enumerator's split counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitCounts {
    /// Splits being read.
    pub pending: u64,
    /// Splits not yet handed out.
    pub unassigned: u64,
    /// Splits of tablets that went away, being removed.
    pub pending_removal: u64,
}

impl SplitCounts {
    /// No split in flight.
    pub fn all_zero(&self) -> bool {
        self.pending == 0 && self.unassigned == 0 && self.pending_removal == 0
    }
}

/// The job's counters since it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Rows read from the source.
    pub rows_read: u64,
    /// Rows upserted into the sink.
    pub rows_upserted: u64,
    /// Rows deleted from the sink.
    pub rows_deleted: u64,
    /// Bytes of row data read from the source.
    pub bytes_read: u64,
    /// Windows (snapshot or diff) completed.
    pub windows_completed: u64,
    /// Full-snapshot windows completed.
    pub snapshot_windows: u64,
    /// Duration of the last completed window, ms.
    pub last_window_duration_ms: u64,
    /// Checkpoints completed.
    pub checkpoints_completed: u64,
    /// Checkpoints failed.
    pub checkpoints_failed: u64,
    /// Duration of the last checkpoint, ms.
    pub last_checkpoint_duration_ms: u64,
}

/// Progress of the initial snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotProgress {
    /// Whether the snapshot is still being copied.
    pub in_progress: bool,
    /// Rows copied so far.
    pub rows_copied: u64,
    /// The source's live row count at job start, if the master gave one.
    pub rows_estimate: Option<u64>,
}

/// The tablet servers' write counters of the source and sink tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KuduTables {
    /// False when polling is off (`metrics.kudu.pollIntervalMillis=0`).
    pub enabled: bool,
    /// How often the tablet servers are polled, ms.
    pub poll_interval_ms: u64,
    /// One entry per watched table.
    pub tables: Vec<TableActivity>,
    /// The write guard: rows written to the sink table by others than
    /// ferry (docs/operations.md, "Write guard").
    #[serde(default)]
    pub sink_foreign_writes: ForeignWrites,
}

impl KuduTables {
    /// The table on `cluster` (`source` or `sink`).
    pub fn table(&self, cluster: &str) -> Option<&TableActivity> {
        self.tables.iter().find(|t| t.cluster == cluster)
    }

    /// The latest counters of the table on `cluster`, if polled.
    pub fn counters(&self, cluster: &str) -> Option<TableCounters> {
        self.table(cluster).and_then(|t| t.counters)
    }
}

/// A failure of the job: what failed, when, and whether the job restarted
/// after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureEntry {
    /// Epoch ms.
    pub timestamp: u64,
    /// Where it happened (`SinkWrite`, `SourceRead`, `Checkpoint`, ...).
    pub name: String,
    /// The whole cause chain.
    pub message: String,
    /// False for the failure that ended the job.
    pub restarted: bool,
}

/// A completed checkpoint or savepoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointEntry {
    /// The checkpoint id.
    pub id: u64,
    /// Its directory.
    pub path: String,
    /// When it completed, epoch ms.
    pub completed_at: u64,
    /// How long it took, ms.
    pub duration_ms: u64,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// Whether it is a savepoint.
    pub savepoint: bool,
}

/// Records per second out of the source and into the sink.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Records read from the source per second.
    pub records_out_per_second: f64,
    /// Records written to the sink per second.
    pub records_in_per_second: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_kafka::metrics::{KafkaSnapshot, PartitionLag, TopicCounters, TopicSnapshot};
    use serde_json::json;

    fn job() -> JobLive {
        JobLive {
            jid: "0123456789abcdef0123456789abcdef".into(),
            name: "ferry-replication-t".into(),
            state: "RUNNING".into(),
            stopping: false,
            error: None,
            final_savepoint: None,
            table: "t".into(),
            sink_table: "t_copy".into(),
            parallelism: 2,
            discovery_interval_ms: 1000,
            start_time: 100,
            end_time: -1,
            now: 5_000,
            uptime_ms: 4_900,
            downtime_ms: 0,
            restarts: 1,
            failures: vec![FailureEntry {
                timestamp: 200,
                name: "SinkWrite".into(),
                message: "writing sink table 't_copy': timed out".into(),
                restarted: true,
            }],
            last_end_timestamp: 4_000,
            lag_ms: Some(1_000),
            splits: SplitCounts {
                pending: 0,
                unassigned: 0,
                pending_removal: 0,
            },
            rates: Rates::default(),
            totals: Totals {
                rows_read: 10,
                rows_upserted: 10,
                rows_deleted: 0,
                bytes_read: 80,
                windows_completed: 2,
                snapshot_windows: 1,
                last_window_duration_ms: 5,
                checkpoints_completed: 1,
                checkpoints_failed: 0,
                last_checkpoint_duration_ms: 3,
            },
            snapshot: SnapshotProgress {
                in_progress: false,
                rows_copied: 10,
                rows_estimate: None,
            },
            lag_history: vec![(4_500, Some(500), 0, 1, 0), (4_600, None, 0, 0, 0)],
            kudu: KuduTables {
                enabled: true,
                poll_interval_ms: 500,
                sink_foreign_writes: Default::default(),
                tables: vec![TableActivity {
                    cluster: "source".into(),
                    table_name: "t".into(),
                    counters: Some(TableCounters {
                        rows_upserted: 10,
                        ..Default::default()
                    }),
                    unchanged_since_ms: 4_000,
                    last_poll_ms: 4_900,
                    polls: 3,
                    tservers: 1,
                    error: None,
                }],
            },
            checkpoints: vec![CheckpointEntry {
                id: 1,
                path: "file:///chk/chk-1".into(),
                completed_at: 4_100,
                duration_ms: 3,
                size_bytes: 200,
                savepoint: false,
            }],
            savepoints: vec![],
            restored_from: None,
            replicas: vec![ferry_engine::replication::ReplicaSnapshot {
                location: "s3://dr/ferry".into(),
                lag_ms: 250,
                behind: false,
                last_success_ms: 4_900,
                failures: 2,
                states_copied: 7,
                newest: Some("s3://dr/ferry/0123456789abcdef0123456789abcdef/chk-1".into()),
                last_error: None,
            }],
            periodic_savepoints: PeriodicSavepoints::default(),
            verify: None,
            tables: vec![],
            throttle: Default::default(),
            kafka: Some(KafkaSnapshot {
                topics: vec![TopicSnapshot {
                    topic: "in".into(),
                    counters: TopicCounters {
                        records_consumed: 7,
                        bytes_consumed: 70,
                        records_dead_lettered: 1,
                        ..Default::default()
                    },
                }],
                partitions: vec![PartitionLag {
                    topic: "in".into(),
                    partition: 0,
                    end_offset: 25,
                    position: 20,
                    lag: 5,
                }],
            }),
        }
    }

    #[test]
    fn live_body_has_the_fields_the_page_and_drain_check_read() {
        let v = serde_json::to_value(job()).expect("serialize");
        assert_eq!(
            v["lag_history"],
            json!([[4500, 500, 0, 1, 0], [4600, null, 0, 0, 0]])
        );
        assert_eq!(
            v["splits"],
            json!({ "pending": 0, "unassigned": 0, "pending_removal": 0 })
        );
        assert_eq!(
            v["rates"],
            json!({ "records_out_per_second": 0.0, "records_in_per_second": 0.0 })
        );
        assert_eq!(v["kudu"]["tables"][0]["cluster"], "source");
        assert_eq!(v["replicas"][0]["location"], "s3://dr/ferry");
        assert_eq!(v["replicas"][0]["lagMs"], 250);
        assert_eq!(v["replicas"][0]["lastSuccessMs"], 4_900);
        assert_eq!(v["periodic_savepoints"]["interval_ms"], 0);
        assert_eq!(v["kudu"]["tables"][0]["counters"]["rows_upserted"], 10);
        assert_eq!(v["checkpoints"][0]["completed_at"], 4100);
        assert_eq!(v["error"], json!(null));
        assert_eq!(v["lag_ms"], 1000);
        assert_eq!(v["downtime_ms"], 0);
        assert_eq!(
            v["failures"],
            json!([{ "timestamp": 200, "name": "SinkWrite",
                     "message": "writing sink table 't_copy': timed out", "restarted": true }])
        );
        let back: JobLive = serde_json::from_value(v).expect("deserialize");
        assert_eq!(back, job());
        assert_eq!(
            back.kudu.counters("source").map(|c| c.rows_upserted),
            Some(10)
        );
        assert!(back.kudu.table("sink").is_none());
    }

    #[test]
    fn kafka_is_camel_case_and_absent_without_a_kafka_side() {
        let v = serde_json::to_value(job()).expect("serialize");
        assert_eq!(v["kafka"]["topics"][0]["topic"], "in");
        assert_eq!(v["kafka"]["topics"][0]["recordsConsumed"], 7);
        assert_eq!(v["kafka"]["topics"][0]["recordsDeadLettered"], 1);
        assert_eq!(v["kafka"]["topics"][0]["transactionsAborted"], 0);
        assert_eq!(
            v["kafka"]["partitions"][0],
            json!({ "topic": "in", "partition": 0, "endOffset": 25, "position": 20, "lag": 5 })
        );
        let kudu_only = JobLive {
            kafka: None,
            ..job()
        };
        let v = serde_json::to_value(&kudu_only).expect("serialize");
        assert!(v.get("kafka").is_none());
        // A body without the field (older, or a Kudu-only job) reads back.
        let back: JobLive = serde_json::from_value(v).expect("deserialize");
        assert_eq!(back, kudu_only);
    }
}
