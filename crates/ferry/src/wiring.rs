//! A job's connections and stores, built from its configuration the way
//! the job builds them: shared by the server half (starting jobs, REST
//! verification) and the verbs that work in this process (`ferry
//! failover`, `standby`, `verify`, `cutover`).
//!
//! Checkpoints may live on an object store: [`open_checkpoints`] probes
//! the directory first (one listing), so wrong credentials, an unknown
//! bucket or an unreachable endpoint are reported naming the location.
//!
//! - `verifier`: continuous verify's [`verifier::KuduVerifier`].

mod verifier;

pub use verifier::KuduVerifier;

use crate::process_opts::ProcessOptions;
use crate::run_args::RunArgs;
use anyhow::{anyhow, bail, Context, Result};
use ferry_engine::checkpoint::{CheckpointStore, StateStore, StorageLocation, StoreResolver};
use ferry_engine::config::{ClusterKerberos, JobConfig, SinkKind, SourceKind};
use ferry_engine::connector::Source;
use ferry_engine::lease::StateSearch;
use ferry_engine::SourceClock;
use ferry_kafka::source::KafkaSource;
use ferry_kudu::position::PositionTable;
use ferry_kudu::KuduSource;
use ferry_objstore::ObjectStoreResolver;
use kudu_client::{Kerberos, KerberosOptions, KuduClient, KuduClientBuilder, NegotiateOptions};
use std::sync::Arc;

/// The process's resolver: its `s3.*` settings over the `AWS_*` environment.
pub fn resolver(process: &ProcessOptions) -> Arc<ObjectStoreResolver> {
    Arc::new(ObjectStoreResolver::from_settings(
        &process.s3.clone().with_process_env(),
    ))
}

/// Opens the checkpoints directory through the process's resolver and
/// checks that the store answers.
pub async fn open_checkpoints(
    resolver: &Arc<ObjectStoreResolver>,
    dir: &StorageLocation,
    retained: std::num::NonZeroUsize,
) -> Result<CheckpointStore> {
    resolver.probe(dir).await.map_err(|e| anyhow!("{e}"))?;
    // Not `?` on the error itself: its text is already complete.
    CheckpointStore::open(dir, retained, resolver.clone()).map_err(|e| anyhow!("{e}"))
}

/// The checkpoints directory of the job `run` describes, opened through a
/// resolver of the process's settings (the verbs that read a job's state
/// in this process: `cutover`, `verify`).
pub async fn open_job_checkpoints(run: &RunArgs) -> Result<CheckpointStore> {
    let cfg = &run.config;
    open_checkpoints(
        &resolver(&run.process),
        &cfg.checkpoints_directory,
        cfg.checkpoints_retained,
    )
    .await
}

/// Connects to both clusters as a job does (clients are lazy: the first
/// call connects). A job whose sink is Kafka has no sink cluster: an error.
pub fn clients(cfg: &JobConfig) -> Result<(KuduClient, KuduClient)> {
    if cfg.sink == SinkKind::Kafka {
        bail!(
            "this job's sink is Kafka (job.sinkType=kafka): it has no sink Kudu cluster \
             (standby, failover, verify and cutover need one)"
        );
    }
    if cfg.source == SourceKind::Kafka {
        bail!(
            "this job's source is Kafka (job.sourceType=kafka): it has no source Kudu cluster \
             (standby, failover, verify and cutover need one)"
        );
    }
    Ok((source_client(cfg)?, sink_client(cfg)?))
}

/// The sink cluster's client, as a job uses it.
pub fn sink_client(cfg: &JobConfig) -> Result<KuduClient> {
    let builder =
        kudu_builder(&cfg.sink_master_addresses).operation_timeout(cfg.writer.operation_timeout);
    with_login(builder, cfg.kerberos.sink.as_ref())
        .build()
        .context("sink cluster")
}

/// The source cluster's client, as a job uses it.
pub fn source_client(cfg: &JobConfig) -> Result<KuduClient> {
    let builder = kudu_builder(&cfg.source_master_addresses)
        .operation_timeout(cfg.reader.scan_request_timeout);
    with_login(builder, cfg.kerberos.source.as_ref())
        .build()
        .context("source cluster")
}

/// A client of the cluster at `masters` as ferry connects: SASL PLAIN as
/// `$USER`, or as `ferry` where that is unset (kudu-client alone would send
/// the OS user's name).
pub fn kudu_builder<S: AsRef<str>>(masters: &[S]) -> KuduClientBuilder {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "ferry".to_owned());
    KuduClient::builder(masters).negotiate_options(NegotiateOptions::default().user(user))
}

/// Kerberos for a cluster that has a principal configured; SASL PLAIN
/// otherwise.
fn with_login(builder: KuduClientBuilder, login: Option<&ClusterKerberos>) -> KuduClientBuilder {
    match login {
        Some(k) => {
            let mut opts = KerberosOptions::default()
                .principal(k.principal.clone())
                .service_name(k.service_name.clone());
            opts.keytab = k.keytab.clone();
            builder.kerberos(Kerberos::new(opts))
        }
        None => builder,
    }
}

/// How the source of the job `cfg` describes reads its times as wall-clock
/// time (its connector's `Source::CLOCK`): for a state's times when no job
/// runs (failover reports, cutover).
pub fn source_clock(cfg: &JobConfig) -> SourceClock {
    match cfg.source {
        SourceKind::Kafka => KafkaSource::CLOCK,
        SourceKind::Kudu => KuduSource::CLOCK,
    }
}

/// The store a location lives in (`s3://` through the process's `s3.*`
/// settings); the error names the location, never a secret.
pub fn store_for(
    resolver: &dyn StoreResolver,
    location: &StorageLocation,
) -> Result<Arc<dyn StateStore>> {
    // Not `?` on the error itself: its text is already complete.
    resolver.open(location).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Connects to both clusters and opens the tables (the sink table may not
/// exist yet: `job.createTable` makes it).
pub async fn connect(run: &RunArgs) -> Result<(KuduClient, KuduClient)> {
    let (source, sink) = crate::wiring::clients(&run.config)?;
    if !run.config.tables.is_single() {
        // A job of several tables finds its tables when it starts.
        return Ok((source, sink));
    }
    source
        .open_table(&run.config.table_name)
        .await
        .with_context(|| format!("opening source table '{}'", run.config.table_name))?;
    if let Err(e) = sink.open_table(&run.config.sink_table_name()).await {
        tracing::debug!(error = %e, "sink table not open yet");
    }
    Ok((source, sink))
}

/// A verb that works on one Kudu source table and its Kudu sink table
/// refuses a job with a Kafka sink, and a job of several tables
/// (`job.tableName` list, `job.tablePattern`): the refusal says how to name
/// one (a usage error for the CLI, 400 for the REST API).
pub(crate) fn kudu_table_pair(
    cfg: &ferry_engine::config::JobConfig,
    verb: &str,
) -> Result<(), String> {
    if cfg.sink == ferry_engine::config::SinkKind::Kafka {
        return Err(format!(
            "ferry {verb} compares a Kudu source table with its Kudu sink table, but this job's \
             sink is Kafka (job.sinkType=kafka)"
        ));
    }
    if cfg.tables.is_single() {
        return Ok(());
    }
    Err(format!(
        "ferry {verb} works on one table, but this job selects several (job.tableName '{}'{}): \
         give one table with --job.tableName NAME (its sink table is NAME + job.tableSuffix)",
        cfg.table_name,
        cfg.tables
            .pattern
            .as_deref()
            .map(|p| format!(", job.tablePattern '{p}'"))
            .unwrap_or_default()
    ))
}

/// The sink position record's times for `sink_table`: the end of the last
/// completed window (source) and the sink time at which the sink held
/// exactly the windows up to it. `None` when there is no usable record.
pub async fn position_times(
    sink: &KuduClient,
    cfg: &JobConfig,
    sink_table: &str,
) -> anyhow::Result<Option<(ferry_engine::SourceTime, ferry_engine::SinkTime)>> {
    let Some(table) = &cfg.position_table else {
        return Ok(None);
    };
    let position = PositionTable::lookup(sink, table, sink_table)
        .await
        .with_context(|| format!("reading the sink position of '{sink_table}'"))?;
    Ok(position.and_then(|p| Some((p.last_end?, p.last_end_sink_time?))))
}

/// The usage error when no time was given and no position record exists.
pub fn no_position_message(cfg: &JobConfig, sink_table: &str) -> String {
    let table = cfg
        .position_table
        .as_deref()
        .unwrap_or("(job.positionTable is off)");
    format!(
        "no sink position with a sink time for '{sink_table}' in the position table {table}: \
         give the times (--source-time T --sink-time T, raw hybrid times or 'now'), or \
         -s/--fromSavepoint PATH of a drained savepoint of a stopped job"
    )
}

/// Where `from` holds state of `job` (any one job's if `None`), through
/// the process's resolver.
pub fn state_search(
    process: &ProcessOptions,
    from: &[StorageLocation],
    job: Option<ferry_engine::checkpoint::JobId>,
) -> StateSearch {
    StateSearch::new(resolver(process), from.to_vec(), job)
}
