//! Starting a job inside this process, for both `ferry run` (application
//! mode) and `POST /ferry/jobs` (session mode): connect to both clusters,
//! load the restore point if any, start the engine job (which checks the
//! restore point and prepares the sink table) and register it.
//!
//! Checkpoints may live on an object store: the checkpoints directory is
//! probed first (one listing), so wrong credentials, an unknown bucket or an
//! unreachable endpoint stop the start with a message naming the location
//! (exit code 1), before any cluster work.

use crate::kudu_activity::KuduActivity;
use crate::run_args::RunArgs;
use crate::server::registry::{JobEntry, Registry, RestoreInfo};
use crate::wiring::{clients, open_checkpoints, sink_client, source_client};
use anyhow::{anyhow, bail, Result};
use ferry_engine::checkpoint::{
    CheckpointStore, JobId, LoadedState, SnapshotKind, StorageLocation,
};
use ferry_engine::config::{JobConfig, SinkKind, SourceKind};
use ferry_engine::connector::{Source, Tables};
use ferry_engine::lease::Fence;
use ferry_engine::time::now_ms;
use ferry_engine::{Job, JobHandle, JobOptions, RestorePoint};
use ferry_kafka::{ChangelogTables, KafkaTables};
use ferry_kudu::KuduTables;
use kudu_client::KuduClient;
use std::sync::Arc;

/// What a takeover (`ferry standby`, `ferry failover`) or a lease holder
/// (`ferry run` with `high-availability.type lease`) adds to a start.
#[derive(Default)]
pub struct StartExtras {
    /// Run under this job id (the state's, or the HA job id), so
    /// checkpoints continue where the previous instance left them.
    pub job_id: Option<JobId>,
    /// The state to start from, already found and verified (wins over `-s`).
    pub restore: Option<LoadedState>,
    /// The lease fence (high availability).
    pub fence: Fence,
    /// Clients connected beforehand (source, sink), kept warm by a standby.
    pub clients: Option<(KuduClient, KuduClient)>,
}

/// Starts the job described by `args` and registers it.
pub async fn start_job(registry: &Registry, args: RunArgs) -> Result<Arc<JobEntry>> {
    if args.config.ha.kind.holds_lease() {
        bail!(
            "high-availability.type lease (or kubernetes) is for application mode: run the job with `ferry run` \
             (it claims the lease) and its standbys with `ferry standby`"
        );
    }
    start_job_with(registry, args, StartExtras::default()).await
}

/// [`start_job`] with a takeover's or lease holder's extras.
// Long on purpose: one arm per source/sink pair in the connector match; every other step is a helper below.
pub async fn start_job_with(
    registry: &Registry,
    args: RunArgs,
    extras: StartExtras,
) -> Result<Arc<JobEntry>> {
    let cfg = &args.config;
    let store = open_checkpoints(
        &registry.resolver,
        &cfg.checkpoints_directory,
        cfg.checkpoints_retained,
    )
    .await?;
    // A Kafka sink has no sink cluster, a Kafka source no source cluster.
    let (source_client, sink_client) = match (extras.clients, cfg.sink, cfg.source) {
        (Some((source, sink)), _, _) => (Some(source), Some(sink)),
        (None, SinkKind::Kafka, _) => (Some(source_client(cfg)?), None),
        (None, SinkKind::Kudu, SourceKind::Kafka) => (None, Some(sink_client(cfg)?)),
        (None, SinkKind::Kudu, SourceKind::Kudu) => {
            let (source, sink) = clients(cfg)?;
            (Some(source), Some(sink))
        }
    };
    let sink_table_name = cfg.sink_table_name();

    let (restore, restored) =
        restore_point(extras.restore, args.from_savepoint.as_ref(), &store).await?;
    let default_savepoint_dir = savepoint_dir(registry, &args).await?;

    let single = cfg.tables.is_single();
    let source_rows_estimate = rows_estimate(source_client.as_ref(), cfg).await;

    let start_at = cutover_start(&args, source_client.as_ref()).await?;
    let mut options = JobOptions::new(args.parallelism)
        .default_savepoint_dir(default_savepoint_dir.clone())
        .fence(extras.fence)
        .start_at(start_at);
    if let Some(job_id) = extras.job_id {
        options = options.job_id(job_id);
    }
    let rows_sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let activity = kudu_activity(
        &args,
        single && sink_client.is_some() && source_client.is_some(),
        (source_client.clone(), sink_client.clone()),
        rows_sent.clone(),
    );
    let kafka_metrics = (args.kafka_sink.is_some() || args.kafka_source.is_some())
        .then(|| Arc::new(ferry_kafka::KafkaMetrics::default()));
    let (handle, source_name) = match (source_client, sink_client) {
        (Some(source_client), Some(sink_client)) => {
            // Continuous verify (`job.verifyInterval`): Kudu to Kudu only.
            let verifier = crate::wiring::KuduVerifier::new(
                source_client.clone(),
                sink_client.clone(),
                cfg.verify_budget_ranges,
            );
            let options = match cfg.verify_interval {
                Some(_) => options.verifier(Arc::new(verifier)),
                None => options,
            };
            let tables =
                KuduTables::new(source_client, sink_client, cfg.clone()).with_rows_sent(rows_sent);
            start_tables(cfg, restore, tables, store, options).await?
        }
        (Some(source_client), None) => {
            let kafka = args
                .kafka_sink
                .clone()
                .ok_or_else(|| anyhow!("job.sinkType is not kafka"))?;
            let tables = KafkaTables::new(source_client, cfg.clone(), kafka)
                .with_metrics(kafka_metrics.clone().unwrap_or_default());
            start_tables(cfg, restore, tables, store, options).await?
        }
        (None, Some(sink_client)) => {
            let kafka = args
                .kafka_source
                .clone()
                .ok_or_else(|| anyhow!("job.sourceType is not kafka"))?;
            let tables = ChangelogTables::new(sink_client, cfg.clone(), kafka)
                .with_metrics(kafka_metrics.clone().unwrap_or_default());
            start_tables(cfg, restore, tables, store, options).await?
        }
        (None, None) => bail!("a job needs a Kudu cluster on one side"),
    };
    let start_time_ms = now_ms();
    let job_id = handle.job_id();
    log_started(&args, job_id, &sink_table_name);
    let entry = JobEntry::new(
        handle,
        args.config.clone(),
        source_name,
        args.parallelism,
        default_savepoint_dir,
        restored,
        source_rows_estimate,
        activity,
        start_time_ms,
    )
    .with_kafka(kafka_metrics)
    .with_keys(args.settings.effective_job_keys()?);
    Ok(registry.add(entry))
}

/// The state the job starts from: a takeover's (already found and
/// verified), else `-s`'s; with what the REST API shows of it.
async fn restore_point(
    restore: Option<LoadedState>,
    from_savepoint: Option<&String>,
    store: &CheckpointStore,
) -> Result<(Option<RestorePoint>, Option<RestoreInfo>)> {
    let mut restored = None;
    let restore = match (restore, from_savepoint) {
        (Some(loaded), _) => {
            let state = loaded.state;
            let path = loaded.location.to_uri();
            restored = Some(RestoreInfo {
                checkpoint_id: state.checkpoint_id,
                path: path.clone(),
                is_savepoint: state.kind == SnapshotKind::Savepoint,
                restored_at_ms: now_ms(),
            });
            Some(RestorePoint {
                location: path,
                state,
            })
        }
        (None, None) => None,
        (None, Some(path)) => {
            let loaded = store
                .load(path)
                .await
                .map_err(|e| anyhow!("cannot resume from '{}': {e}", shown(path)))?;
            let state = loaded.state;
            restored = Some(RestoreInfo {
                checkpoint_id: state.checkpoint_id,
                path: loaded.location.to_uri(),
                is_savepoint: state.kind == SnapshotKind::Savepoint,
                restored_at_ms: now_ms(),
            });
            Some(RestorePoint {
                location: path.clone(),
                state,
            })
        }
    };
    Ok((restore, restored))
}

/// `--savepointPath`, parsed and probed (an unreachable store is an error
/// before any cluster work).
async fn savepoint_dir(registry: &Registry, args: &RunArgs) -> Result<Option<StorageLocation>> {
    let dir = args
        .savepoint_dir
        .as_deref()
        .map(StorageLocation::parse)
        .transpose()
        .map_err(|e| anyhow!("--savepointPath: {e}"))?;
    if let Some(dir) = &dir {
        registry
            .resolver
            .probe(dir)
            .await
            .map_err(|e| anyhow!("--savepointPath: {e}"))?;
    }
    Ok(dir)
}

/// The snapshot progress estimate: the master's live row count (of
/// the one table; a job of several tables has none, and asks nothing).
async fn rows_estimate(source_client: Option<&KuduClient>, cfg: &JobConfig) -> Option<u64> {
    match (source_client, cfg.tables.is_single()) {
        (None, _) | (_, false) => None,
        (Some(source_client), true) => match source_client.list_tables(&cfg.table_name).await {
            Ok(tables) => tables
                .into_iter()
                .find(|t| t.name == cfg.table_name)
                .and_then(|t| t.live_row_count),
            Err(e) => {
                tracing::debug!(error = %e, "no live row count for the progress estimate");
                None
            }
        },
    }
}

/// `--from-cutover`: the reverse job's start time, after checking the
/// source still holds the history since then.
async fn cutover_start(
    args: &RunArgs,
    source_client: Option<&KuduClient>,
) -> Result<Option<ferry_engine::SourceTime>> {
    let start_at = match &args.from_cutover {
        Some(start) => {
            let Some(source_client) = source_client else {
                bail!("--from-cutover starts a Kudu-to-Kudu job; this job's source is Kafka");
            };
            crate::run_args::from_cutover::check_history(source_client, start).await?;
            tracing::info!(
                report = %start.path.display(),
                cutover_time = %start.start_time(),
                "starting the reverse job with a diff from the cutover time (no snapshot)"
            );
            Some(start.start_time())
        }
        None => None,
    };
    Ok(start_at)
}

/// The log line of a started job, naming what it replicates where.
fn log_started(args: &RunArgs, job_id: JobId, sink_table_name: &str) {
    let cfg = &args.config;
    match (&args.kafka_sink, &args.kafka_source) {
        (Some(kafka), _) => {
            tracing::info!(%job_id, table = %cfg.table_name, topic = %kafka.topic_for(&cfg.table_name), "replication to Kafka started")
        }
        (None, Some(kafka)) => {
            tracing::info!(%job_id, topic = %kafka.topic, sink_table = %sink_table_name, "replication from Kafka started")
        }
        (None, None) => {
            tracing::info!(%job_id, table = %cfg.table_name, sink_table = %sink_table_name, "replication started")
        }
    }
}

/// The tablet servers' write counters of the job's source and sink table
/// (`rows_sent` counts ferry's own writes); off unless the job is `one_pair`.
/// The tablet servers come from the `clients`' tablet-server lists.
fn kudu_activity(
    args: &RunArgs,
    one_pair: bool,
    clients: (Option<KuduClient>, Option<KuduClient>),
    rows_sent: Arc<std::sync::atomic::AtomicU64>,
) -> Arc<KuduActivity> {
    let cfg = &args.config;
    let sink_table_name = cfg.sink_table_name();
    // The write guard and the tablet counters watch one source and one
    // sink table: a job of several tables, or with a Kafka sink, has no
    // such pair to watch.
    let mut kudu_metrics = args.process.kudu.clone();
    if !one_pair {
        kudu_metrics.poll_interval = std::time::Duration::ZERO;
    }
    Arc::new(
        KuduActivity::new(
            &kudu_metrics,
            ferry_kudu::source::endpoint_choice(&cfg.reader),
            clients.0,
            clients.1,
            &cfg.table_name,
            &sink_table_name,
        )
        .with_own_writes({
            let rows_sent = rows_sent.clone();
            Box::new(move || rows_sent.load(std::sync::atomic::Ordering::Relaxed))
        }),
    )
}

/// Starts the engine job of `tables`; with the name its source connector
/// gives itself (`Source::NAME`), for the job's operator names.
async fn start_tables<T: Tables>(
    cfg: &JobConfig,
    restore: Option<RestorePoint>,
    tables: T,
    store: CheckpointStore,
    options: JobOptions,
) -> Result<(JobHandle, &'static str)> {
    let handle = Job::start_tables(cfg, restore, tables, store, options).await?;
    Ok((handle, <T::Source as Source>::NAME))
}

/// A pointer as given, for messages: a URI with credentials in it
/// (refused anyway) is not repeated.
fn shown(pointer: &str) -> String {
    match StorageLocation::parse(pointer) {
        Ok(location) => location.to_string(),
        Err(e) => e.input,
    }
}
