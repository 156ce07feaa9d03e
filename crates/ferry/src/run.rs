//! `ferry run` in the foreground: connect to both clusters, prepare the
//! sink table, restore if asked, start the job, and turn SIGTERM / Ctrl-C
//! into stop-with-savepoint (when a savepoint directory is configured) or
//! cancel.

use crate::run_args::RunArgs;
use anyhow::{anyhow, bail, Context, Result};
use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_engine::kudu_sink::KuduSink;
use ferry_engine::kudu_source::KuduSource;
use ferry_engine::{JobSpec, JobStatus};
use kudu_client::KuduClient;

/// Runs the job until it ends; returns its final status.
pub async fn run(args: RunArgs) -> Result<JobStatus> {
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
            Some(state)
        }
    };
    let default_savepoint_dir = args
        .savepoint_dir
        .as_deref()
        .map(StorageLocation::parse)
        .transpose()
        .map_err(|e| anyhow!("--savepointPath: {e}"))?;

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
    let source = KuduSource::new(source_client, cfg.table_name.clone(), cfg.reader.clone());
    let sink = KuduSink::new(sink_client, sink_table, cfg.writer.clone());
    let handle = ferry_engine::job::spawn(source, sink, store, spec);
    println!("Job has been submitted with JobID {job_id}");
    tracing::info!(%job_id, table = %cfg.table_name, sink_table = %sink_table_name, "replication started");

    tokio::select! {
        status = handle.wait() => Ok(status),
        _ = shutdown_signal() => {
            if default_savepoint_dir.is_some() {
                eprintln!("ferry: stopping with a savepoint ...");
                match handle.stop_with_savepoint(None).await {
                    Ok(path) => println!("Savepoint completed. Path: {path}"),
                    Err(e) => eprintln!("ferry: savepoint failed: {e}"),
                }
            } else {
                eprintln!("ferry: cancelling (no --savepointPath given; checkpoints are kept)");
                handle.cancel().await;
            }
            Ok(handle.wait().await)
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
