//! The scenarios and what they share: the run context, preparing a loaded
//! and flushed source table, and waiting for the clusters to go quiet
//! between measurements.

pub mod failover;
pub mod idle;
pub mod kafka;
pub mod lag;
pub mod memory;
pub mod shards;
pub mod snapshot;
pub mod soak;
pub mod tables;
pub mod throttle;
pub mod verify;

use crate::data::{self, LoadStats};
use crate::env::{Machine, Versions};
use crate::ferry::FerryOptions;
use crate::kudu::Cluster;
use crate::monitor::Monitor;
use crate::procs::cpu_seconds_of;
use crate::report::Report;
use anyhow::Result;
use kudu_client::KuduClient;
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What every scenario needs.
pub struct Ctx {
    pub ferry_bin: PathBuf,
    pub results_dir: PathBuf,
    pub work_root: PathBuf,
    pub tservers: usize,
    /// Extra arguments for every `ferry run`.
    pub ferry_args: Vec<String>,
    /// Profile every `ferry run` with `perf record -g`.
    pub perf: bool,
    /// Extra flags for the source cluster's tablet servers.
    pub source_tserver_flags: Vec<String>,
    pub monitor: Monitor,
    pub machine: Machine,
    pub versions: Versions,
}

impl Ctx {
    /// A fresh work folder for one scenario run.
    pub fn work_dir(&self, scenario: &str) -> Result<PathBuf> {
        let dir = self.work_root.join(format!(
            "{scenario}-{}",
            crate::env::iso8601(crate::env::unix_now()).replace(':', "")
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    pub fn report(&self, scenario: &str, params: serde_json::Value) -> Result<Report> {
        let work = self.work_dir(scenario)?;
        self.monitor.reset();
        println!("== {scenario}: {} ==", self.machine.describe());
        println!("   work folder {}", work.display());
        let mut params = params;
        if let Some(obj) = params.as_object_mut() {
            obj.insert(
                "ferry_extra_args".into(),
                serde_json::json!(self.ferry_args),
            );
            obj.insert(
                "source_tserver_flags".into(),
                serde_json::json!(self.source_tserver_flags),
            );
        }
        Ok(Report::new(
            scenario,
            self.machine.clone(),
            self.versions.clone(),
            params,
            work,
        ))
    }

    /// Starts the source and sink clusters side by side.
    pub async fn clusters(
        &self,
        scenario: &str,
        report: &mut Report,
    ) -> Result<(Cluster, Cluster)> {
        let tag = std::process::id();
        let (a, b) = tokio::join!(
            Cluster::start(
                format!("bench-{scenario}-src-{tag}"),
                1,
                self.tservers,
                &self.source_tserver_flags,
                &self.monitor
            ),
            Cluster::start(
                format!("bench-{scenario}-dst-{tag}"),
                1,
                self.tservers,
                &[],
                &self.monitor
            ),
        );
        let (a, b) = (a?, b?);
        report.command(a.up_command(self.tservers));
        report.command(b.up_command(self.tservers));
        Ok((a, b))
    }

    pub fn ferry_options(
        &self,
        src: &Cluster,
        dst: &Cluster,
        table: &str,
        work: &std::path::Path,
        label: &str,
    ) -> FerryOptions {
        FerryOptions {
            bin: self.ferry_bin.clone(),
            source_masters: src.masters.clone(),
            sink_masters: dst.masters.clone(),
            table: table.into(),
            table_suffix: None,
            checkpoints: work.join(format!("checkpoints-{label}")),
            discovery_s: None,
            checkpointing_ms: None,
            parallelism: None,
            extra: self.ferry_args.clone(),
            log: work.join(format!("ferry-{label}.log")),
            perf: self
                .perf
                .then(|| work.join(format!("ferry-{label}.perf.data"))),
            env: Vec::new(),
            resume: None,
            wrapper: Vec::new(),
            metrics_address: None,
            rest_port: None,
        }
    }
}

/// How a source table was prepared.
#[derive(Debug, Clone, Serialize)]
pub struct Prepared {
    pub table: String,
    pub load: LoadStats,
    pub flush_s: f64,
    pub settle: Settle,
}

/// Creates `table` on the source, loads `rows` rows with the kudu-client
/// loader, flushes it to disk and waits for the cluster to go quiet.
pub async fn prepare_source(
    src: &Cluster,
    client: &KuduClient,
    table: &str,
    rows: u64,
    report: &mut Report,
    quiet: &[u32],
) -> Result<Prepared> {
    report.command(data::create_table(&src.masters, table).await?);
    let t = client.open_table(table).await?;
    let sessions = 4;
    println!("  loading {rows} rows into {table} ({sessions} sessions) ...");
    let load = data::load(client, &t, 0, rows as i64, sessions).await?;
    println!(
        "  loaded in {:.1} s ({:.0} rows/s)",
        load.seconds, load.rows_per_s
    );
    report.command(format!(
        "# ferry-bench loader (in process): kudu-client, {sessions} AUTO_FLUSH_BACKGROUND sessions, INSERT ids 0..{rows} of {table}"
    ));
    // Large tables take longer to flush and compact: 16 M rows are about
    // 1.5 GB of MemRowSets on one maintenance thread per tablet server.
    let flush_s = src
        .flush_table(table, Duration::from_secs(300 + rows / 20_000))
        .await?;
    for ts in &src.tserver_rpc {
        report.command(crate::kudu::kudu_line(&[
            "tserver".into(),
            "set_flag".into(),
            ts.clone(),
            "flush_threshold_secs".into(),
            "1".into(),
        ])?);
    }
    report.command("# ... until every tablet's memrowset_size < 256 KiB (tablet server /metrics), then flush_threshold_secs back to 120");
    let settle = settle(quiet, Duration::from_secs(120.max(rows / 100_000))).await;
    println!(
        "  flushed in {flush_s:.1} s; cluster quiet after {:.1} s{}",
        settle.waited_s,
        if settle.quiet {
            ""
        } else {
            " (gave up waiting)"
        }
    );
    Ok(Prepared {
        table: table.into(),
        load,
        flush_s,
        settle,
    })
}

/// Waiting for the daemons to go quiet (flushes, compactions).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Settle {
    pub waited_s: f64,
    pub quiet: bool,
    /// CPU (cores) the watched processes used in the last second.
    pub last_cores: f64,
}

/// Waits until `pids` together use under 0.1 core for 3 s in a row, or
/// `max` passes.
pub async fn settle(pids: &[u32], max: Duration) -> Settle {
    let started = Instant::now();
    let mut quiet_for = 0;
    let mut prev = cpu_seconds_of(pids);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = cpu_seconds_of(pids);
        let last = now - prev;
        prev = now;
        quiet_for = if last < 0.1 { quiet_for + 1 } else { 0 };
        if quiet_for >= 3 || started.elapsed() > max {
            return Settle {
                waited_s: started.elapsed().as_secs_f64(),
                quiet: quiet_for >= 3,
                last_cores: last,
            };
        }
    }
}
