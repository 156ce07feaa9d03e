//! Starting a job inside this process, for both `ferry run` (application
//! mode) and `POST /ferry/jobs` (session mode): connect to both clusters,
//! prepare the sink table, load the restore point if any, spawn the engine
//! job and register it.

use crate::kudu_activity::KuduActivity;
use crate::registry::{now_ms, JobEntry, Registry, RestoreInfo};
use crate::run_args::RunArgs;
use anyhow::{anyhow, bail, Context, Result};
use ferry_engine::checkpoint::{CheckpointStore, JobId, SnapshotKind, StorageLocation};
use ferry_engine::kudu_sink::KuduSink;
use ferry_engine::kudu_source::KuduSource;
use ferry_engine::JobSpec;
use kudu_client::KuduClient;
use std::sync::Arc;

/// Starts the job described by `args` and registers it.
pub async fn start_job(registry: &Registry, args: RunArgs) -> Result<Arc<JobEntry>> {
    let cfg = &args.config;
    let source_client = KuduClient::builder(&cfg.source_master_addresses)
        .operation_timeout(cfg.reader.scan_request_timeout)
        .build()
        .context("source cluster")?;
    let sink_client = KuduClient::builder(&cfg.sink_master_addresses)
        .operation_timeout(cfg.writer.operation_timeout)
        .build()
        .context("sink cluster")?;
    let sink_table_name = cfg.sink_table_name();
    let sink_table = crate::sink::prepare(&source_client, &sink_client, cfg).await?;

    let store = CheckpointStore::open_local(&cfg.checkpoints_directory, cfg.checkpoints_retained);
    let mut restored = None;
    let restore = match &args.from_savepoint {
        None => None,
        Some(path) => {
            let loaded = store
                .load(path)
                .await
                .with_context(|| format!("cannot resume from '{path}'"))?;
            let state = loaded.state;
            let has_splits = !state.unassigned.is_empty() || !state.pending.is_empty();
            if state.table_name != cfg.table_name && has_splits {
                bail!(
                    "the savepoint at '{path}' was taken from table '{}' with splits in progress; it cannot resume table '{}'",
                    state.table_name,
                    cfg.table_name
                );
            }
            tracing::info!(
                path,
                last_end = ?state.last_end_timestamp,
                window = ?state.window,
                pending = state.pending.len(),
                unassigned = state.unassigned.len(),
                "resuming"
            );
            restored = Some(RestoreInfo {
                checkpoint_id: state.checkpoint_id,
                path: loaded.location.to_uri(),
                is_savepoint: state.kind == SnapshotKind::Savepoint,
                restored_at_ms: now_ms(),
            });
            Some(state)
        }
    };
    let default_savepoint_dir = args
        .savepoint_dir
        .as_deref()
        .map(StorageLocation::parse)
        .transpose()
        .map_err(|e| anyhow!("--savepointPath: {e}"))?;

    // The snapshot progress estimate: the master's live row count.
    let source_rows_estimate = match source_client.list_tables(&cfg.table_name).await {
        Ok(tables) => tables
            .into_iter()
            .find(|t| t.name == cfg.table_name)
            .and_then(|t| t.live_row_count),
        Err(e) => {
            tracing::debug!(error = %e, "no live row count for the progress estimate");
            None
        }
    };

    let job_id = JobId::random();
    let spec = JobSpec {
        job_id,
        job_name: cfg.job_name.clone(),
        table_name: cfg.table_name.clone(),
        source_masters: cfg.source_master_addresses.clone(),
        sink_masters: cfg.sink_master_addresses.clone(),
        parallelism: args.parallelism,
        discovery_interval: cfg.discovery_interval,
        checkpointing_interval: cfg.checkpointing_interval,
        default_savepoint_dir: default_savepoint_dir.clone(),
        restore,
    };
    let activity = Arc::new(KuduActivity::new(
        &args.process.kudu,
        &cfg.source_master_addresses,
        &cfg.sink_master_addresses,
        &cfg.table_name,
        &sink_table_name,
    ));
    let start_time_ms = now_ms();
    let source = KuduSource::new(source_client, cfg.table_name.clone(), cfg.reader.clone());
    let sink = KuduSink::new(sink_client, sink_table, cfg.writer.clone());
    let handle = ferry_engine::job::spawn(source, sink, store, spec);
    tracing::info!(%job_id, table = %cfg.table_name, sink_table = %sink_table_name, "replication started");
    let entry = JobEntry::new(
        handle,
        args.config.clone(),
        args.parallelism,
        default_savepoint_dir,
        restored,
        source_rows_estimate,
        activity,
        start_time_ms,
    );
    Ok(registry.add(entry))
}
