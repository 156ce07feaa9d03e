//! The steps of `ferry failback` that are not the salvage or the rewind:
//! the divergence point, the refusals, and the failback's directory in the
//! state store.

use crate::cutover_report::CutoverReport;
use crate::run_args::RunArgs;
use anyhow::Context;
use ferry_engine::checkpoint::{CheckpointStore, JobId, StateKey};
use ferry_engine::config::JobConfig;
use ferry_kudu::position::PositionTable;
use ferry_verify::salvage::{count_changes, SalvageSummary};
use kudu_client::{HybridTime, KuduClient};
use std::time::Duration;
use tokio_util::bytes::Bytes;

/// Why a failback did not happen.
#[derive(Debug)]
pub(super) enum Failure {
    /// Refused before anything was written (exit code 2).
    Refused(String),
    /// A cluster or the store failed (exit code 1).
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Failed(e)
    }
}

/// Where the old and the new primary diverged.
#[derive(Debug, Clone)]
pub(super) struct Divergence {
    /// The old primary's last replicated instant.
    pub(super) last_end: HybridTime,
    /// The new primary's time at which it equalled the old one at it.
    pub(super) sink_time: HybridTime,
    /// The forward job (it wrote the position).
    pub(super) job_id: String,
    /// The sink table's id on the new primary.
    pub(super) new_table_id: String,
    /// The source table's id on the old primary.
    pub(super) old_table_id: String,
}

/// The divergence point from the sink position of `sink_table` on the new
/// primary.
pub(super) async fn divergence(
    old: &KuduClient,
    new: &KuduClient,
    cfg: &JobConfig,
    sink_table: &str,
) -> Result<Divergence, Failure> {
    let Some(positions) = &cfg.position_table else {
        return Err(Failure::Refused(
            "job.positionTable is off: without the sink position the divergence point is unknown"
                .into(),
        ));
    };
    let position = PositionTable::lookup(new, positions, sink_table)
        .await
        .with_context(|| format!("reading the sink position of '{sink_table}'"))?;
    let Some(p) = position else {
        return Err(Failure::Refused(format!(
            "the new primary has no sink position for table '{sink_table}' in '{positions}': the table was dropped and created again (or never replicated), so its divergence point from the old primary is unknown; make the old primary a copy afresh"
        )));
    };
    let (Some(end), Some(at)) = (p.last_end, p.last_end_sink_time) else {
        return Err(Failure::Refused(format!(
            "the sink position of '{sink_table}' has no completed window with a sink time (the snapshot never finished, or an older ferry wrote it): there is no divergence point to fail back to"
        )));
    };
    let table_id = |client: &KuduClient, name: &str, side: &str| {
        let (client, name, side) = (client.clone(), name.to_owned(), side.to_owned());
        async move {
            client
                .open_table(&name)
                .await
                .map(|t| t.id().to_owned())
                .with_context(|| format!("opening table '{name}' on the {side}"))
        }
    };
    Ok(Divergence {
        last_end: HybridTime::from_raw(end.raw()),
        sink_time: HybridTime::from_raw(at.raw()),
        new_table_id: table_id(new, sink_table, "new primary").await?,
        old_table_id: table_id(old, &cfg.table_name, "old primary").await?,
        job_id: p.job_id,
    })
}

/// Refuses while `table` on the old primary changes: its clock read twice
/// `probe` apart, and the rows changed in between counted.
pub(super) async fn refuse_if_writing(
    old: &KuduClient,
    table: &str,
    probe: Duration,
) -> Result<(), Failure> {
    let clock = || async {
        old.server_clock()
            .await
            .context("reading the old primary's clock")
    };
    let start = clock().await?;
    tokio::time::sleep(probe).await;
    let end = clock().await?;
    let n = count_changes(old, table, start, end, Duration::from_secs(30))
        .await
        .context("probing the old primary for writes")?;
    if n > 0 {
        return Err(Failure::Refused(format!(
            "the old primary still takes writes: {n} row(s) of table '{table}' changed in the last {} s. Fence it first: stop every writer of the old primary (its applications write to the new primary now), then run ferry failback again",
            probe.as_secs()
        )));
    }
    Ok(())
}

/// Refuses when one side's table was recreated since the divergence
/// point: it held no rows then while the other side did (each side's
/// table and whether it held rows at its divergence time).
pub(super) fn refuse_if_recreated(
    (table, old_held): (&str, bool),
    (sink_table, new_held): (&str, bool),
) -> Result<(), Failure> {
    let recreated = |side: &str, name: &str| {
        Failure::Refused(format!(
            "table '{name}' on the {side} holds no rows at the divergence point while the other side does: it was dropped and created again since; make the old primary a copy afresh (start the reverse job with a snapshot)"
        ))
    };
    match (old_held, new_held) {
        (false, true) => Err(recreated("old primary", table)),
        (true, false) => Err(recreated("new primary", sink_table)),
        _ => Ok(()),
    }
}

/// `<checkpointsDirectory>/<job>/failback-<last_end>/` in the state store:
/// `salvage-<table>.jsonl`, `salvage.json` (written last: the salvage is
/// complete), `done.json` (the failback is complete; its cutover report).
pub(super) struct FailbackDir {
    store: CheckpointStore,
    dir: StateKey,
}

impl FailbackDir {
    /// The directory of the failback of `job` from `last_end`.
    pub(super) async fn open(
        run: &RunArgs,
        job: &str,
        last_end: HybridTime,
    ) -> Result<Self, Failure> {
        let store = crate::wiring::open_job_checkpoints(run).await?;
        let job: JobId = job.parse().map_err(|e| {
            Failure::Failed(anyhow::anyhow!(
                "the sink position names job '{job}', not a job id: {e}"
            ))
        })?;
        let dir = store
            .paths()
            .job_dir(&job)
            .child(&format!("failback-{}", last_end.raw()))
            .map_err(|e| Failure::Failed(anyhow::anyhow!("{e}")))?;
        Ok(FailbackDir { store, dir })
    }

    /// The directory as a location (for messages).
    pub(super) fn location(&self) -> String {
        self.store.location_of(&self.dir).to_uri()
    }

    fn key(&self, name: &str) -> Result<StateKey, Failure> {
        self.dir
            .child(name)
            .map_err(|e| Failure::Failed(anyhow::anyhow!("{e}")))
    }

    async fn get(&self, name: &str) -> Result<Option<Bytes>, Failure> {
        let key = self.key(name)?;
        self.store
            .store()
            .get(&key)
            .await
            .map_err(|e| Failure::Failed(anyhow::anyhow!("reading {}: {e}", self.location())))
    }

    async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<(), Failure> {
        let key = self.key(name)?;
        self.store
            .store()
            .put(&key, Bytes::from(bytes))
            .await
            .map_err(|e| Failure::Failed(anyhow::anyhow!("writing {}: {e}", self.location())))
    }

    /// When the failback was completed, if it was.
    pub(super) async fn done(&self) -> Result<Option<String>, Failure> {
        Ok(self.get("done.json").await?.map(|b| {
            serde_json::from_slice::<serde_json::Value>(&b)
                .ok()
                .and_then(|v| v.get("createdAtMs").and_then(|t| t.as_u64()))
                .map_or("completed".to_owned(), |ms| {
                    format!("completed at {}", crate::cli::failover::report::utc_ms(ms))
                })
        }))
    }

    /// Whether an earlier run kept the salvage.
    pub(super) async fn salvaged(&self) -> Result<bool, Failure> {
        Ok(self.get("salvage.json").await?.is_some())
    }

    /// Keeps the salvage: the rows, then the summary that says they are
    /// complete.
    pub(super) async fn keep_salvage(
        &self,
        table: &str,
        lines: Vec<u8>,
        summary: &SalvageSummary,
    ) -> Result<(), Failure> {
        self.put(&format!("salvage-{table}.jsonl"), lines).await?;
        let summary = serde_json::to_vec_pretty(summary).context("encoding the salvage summary")?;
        self.put("salvage.json", summary).await
    }

    /// Marks the failback done, with its cutover report.
    pub(super) async fn finish(&self, report: &CutoverReport) -> Result<(), Failure> {
        let bytes = serde_json::to_vec_pretty(report).context("encoding the cutover report")?;
        self.put("done.json", bytes).await
    }
}
