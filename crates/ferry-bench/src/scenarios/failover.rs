//! `failover`: warm-standby takeovers under a mixed workload, measured.
//!
//! One `ferry run` holds the job's lease (`high-availability.type lease`,
//! default lease duration and renew interval) and replicates its state to a
//! DR directory itself (`job.stateReplicas`); one `ferry standby` waits with
//! warm connections and restores `--from` that DR directory. Each round
//! kills the active instance with SIGKILL; the standby takes over (and goes
//! on replicating to the same DR directory) and a new standby is started
//! for the next round. Per takeover:
//!
//! - **RTO**: from the kill to the standby's first completed window (when
//!   its `RTO:` line appears), plus the standby's own breakdown;
//! - **RPO of the DR copy**: the age, at the kill, of the newest valid
//!   state in the DR directory (what the takeover restores), and the
//!   active's `ferry_state_replica_lag_seconds` just before the kill.
//!
//! The active's `ferry_state_replica_lag_seconds` is sampled every 500 ms
//! over the whole run (replica lag p50/p99). The run ends with the workload
//! stopped, the last active caught up, and source and sink compared cell by
//! cell.

use super::Ctx;
use crate::kudu::Cluster;
use crate::report::{f0, percentile, Table};
use anyhow::{anyhow, bail, Context, Result};
use ferry_engine::checkpoint::{CheckpointStore, JobId, ObjectStateStore, StorageLocation};
use ferry_engine::lease::find_newest;
use ferry_engine::time::now_ms;
use ferry_fixtures::workload::Workload;
use kudu_client::{KuduClient, TableBuilder};
use serde::Serialize;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TABLE: &str = "failover";

/// One takeover.
#[derive(Debug, Clone, Serialize)]
pub struct Takeover {
    pub round: usize,
    /// Kill → first window completed by the standby.
    pub rto_ms: u64,
    /// The standby's own line (`RTO: … (lease silent …, claim …, …)`).
    pub standby_breakdown: String,
    /// Age of the newest valid state in the DR directory at the kill.
    pub rpo_dr_ms: Option<u64>,
    /// The active's `ferry_state_replica_lag_seconds` just before the kill.
    pub replica_lag_at_kill_s: Option<f64>,
    /// The state the standby restored.
    pub restored: String,
}

/// A ferry process whose stdout lines are collected.
struct Proc {
    child: Child,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    /// Its Prometheus port.
    metrics: u16,
}

impl Proc {
    fn spawn(bin: &Path, verb: &str, args: &[String], log: PathBuf) -> Result<Proc> {
        let metrics = ferry_fixtures::free_port();
        let mut child = Command::new(bin)
            .arg(verb)
            .args(args)
            .args(["--metrics.port", &metrics.to_string()])
            .env("FERRY_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting ferry {verb}"))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(mut l) = sink.lock() {
                    l.push((Instant::now(), line));
                }
            }
        });
        Ok(Proc {
            child,
            lines,
            metrics,
        })
    }

    async fn wait_line(&self, needle: &str, within: Duration) -> Result<(Instant, String)> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(found) = self
                .lines
                .lock()
                .ok()
                .and_then(|l| l.iter().find(|(_, s)| s.contains(needle)).cloned())
            {
                return Ok(found);
            }
            if Instant::now() > deadline {
                bail!("no '{needle}' line within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `ferry_state_replica_lag_seconds` from the Prometheus text on `port`
/// (`None` when the endpoint does not answer or has no replica yet).
fn replica_lag(port: u16) -> Option<f64> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.lines()
        .find(|l| l.starts_with("ferry_state_replica_lag_seconds{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse().ok())
}

/// Samples the replica lag of the process whose metrics port is in `port`
/// every 500 ms until `stop`.
fn spawn_sampler(
    port: Arc<AtomicU16>,
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<f64>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if let Some(v) = replica_lag(port.load(Ordering::Relaxed)) {
                if let Ok(mut s) = samples.lock() {
                    s.push(v);
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    })
}

fn job_args(ctx: &Ctx, src: &Cluster, dst: &Cluster, chk: &Path, dr: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "--job.sourceMasterAddresses",
        &src.masters,
        "--job.sinkMasterAddresses",
        &dst.masters,
        "--job.tableName",
        TABLE,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
        "--job.stateReplicas",
        &dr.to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "2",
        "--job.checkpointingIntervalMillis",
        "1000",
        "--high-availability.type",
        "lease",
        "--rest.port",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(ctx.ferry_args.iter().cloned());
    args
}

/// The active and the standby of the moment.
struct Pair<'a> {
    bin: &'a Path,
    work: &'a Path,
    standby_args: Vec<String>,
    active: Proc,
    standby: Proc,
    /// The active's metrics port, for the sampler.
    sampled: Arc<AtomicU16>,
}

impl Pair<'_> {
    /// Kills the active, waits for the standby's first window, starts a
    /// new standby.
    async fn takeover(
        &mut self,
        round: usize,
        dr: &StorageLocation,
        job: JobId,
    ) -> Result<Takeover> {
        let rpo = find_newest(&ObjectStateStore::local(), dr, Some(job))
            .await?
            .newest
            .map(|f| now_ms().saturating_sub(f.state.created_at_ms));
        let lag_at_kill = replica_lag(self.active.metrics);
        let killed = Instant::now();
        self.active.kill9();
        let (at, line) = self
            .standby
            .wait_line("RTO: ", Duration::from_secs(120))
            .await?;
        let restored = self
            .standby
            .wait_line("Newest: ", Duration::from_secs(1))
            .await
            .map(|(_, l)| l)
            .unwrap_or_default();
        let rto_ms = at.saturating_duration_since(killed).as_millis() as u64;
        println!(
            "  takeover {round}: RTO {rto_ms} ms, RPO of the DR copy {rpo:?} ms, \
             replica lag at the kill {lag_at_kill:?} s; {line}"
        );
        let log = self.work.join(format!("ferry-{}.log", round + 1));
        let next = Proc::spawn(self.bin, "standby", &self.standby_args, log)?;
        self.active = std::mem::replace(&mut self.standby, next);
        self.sampled.store(self.active.metrics, Ordering::Relaxed);
        Ok(Takeover {
            round,
            rto_ms,
            standby_breakdown: line,
            rpo_dr_ms: rpo,
            replica_lag_at_kill_s: lag_at_kill,
            restored,
        })
    }
}

/// Waits until the newest checkpoint's window ends after `ts`.
async fn catch_up(chk: &Path, job: JobId, ts: u64) -> Result<()> {
    let store = CheckpointStore::open_local(
        &StorageLocation::local(chk).map_err(|e| anyhow!("{e}"))?,
        NonZeroUsize::MIN,
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let latest = store.latest_complete(&job).await?.checkpoint;
        if latest.is_some_and(|c| c.state.last_end_timestamp.is_some_and(|t| t.raw() > ts)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the last active did not catch up");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn run(ctx: &Ctx, takeovers: usize, rate: u32) -> Result<PathBuf> {
    let mut report = ctx.report(
        "failover",
        json!({"takeovers": takeovers, "rate_ops_per_s": rate, "lease": "defaults (5 s, renew 1 s)",
               "discovery_interval_s": 2, "checkpointing_interval_ms": 1000,
               "state_replica": "local DR directory (job.stateReplicas)", "lag_sample_interval_ms": 500}),
    )?;
    let work = report.work_dir.clone();
    let (src, dst) = ctx.clusters("failover", &mut report).await?;
    let client = |c: &Cluster| KuduClient::new(&c.masters.split(',').collect::<Vec<_>>());
    let (sc, dc) = (client(&src)?, client(&dst)?);
    let replicas = ctx.tservers.min(3) as i32;
    let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 4, 0)
        .num_replicas(replicas);
    sc.create_table(&b).await?;
    report.command(format!("# ferry-bench (in process): create table {TABLE} (all types, 4 hash tablets, {replicas} replicas); the job creates the sink table"));
    let (chk, dr) = (work.join("checkpoints"), work.join("dr"));
    let args = job_args(ctx, &src, &dst, &chk, &dr);
    let mut standby_args = args.clone();
    standby_args.extend(["--from".to_string(), dr.to_string_lossy().to_string()]);
    report.command(format!("ferry run {}", args.join(" ")));
    report.command(format!("ferry standby {}", standby_args.join(" ")));

    let workload = Workload::start(sc.clone(), TABLE, rate, 7);
    let bin = &ctx.ferry_bin;
    let active = Proc::spawn(bin, "run", &args, work.join("ferry-0.log"))?;
    active.wait_line("JobID", Duration::from_secs(300)).await?;
    let sampled = Arc::new(AtomicU16::new(active.metrics));
    let stop_sampler = Arc::new(AtomicBool::new(false));
    let lags = Arc::new(Mutex::new(Vec::new()));
    let sampler = spawn_sampler(sampled.clone(), stop_sampler.clone(), lags.clone());
    let standby = Proc::spawn(bin, "standby", &standby_args, work.join("ferry-1.log"))?;
    let mut pair = Pair {
        bin,
        work: &work,
        standby_args,
        active,
        standby,
        sampled,
    };
    let dr_loc = StorageLocation::local(&dr).map_err(|e| anyhow!("{e}"))?;
    let job = ferry_engine::config::ha_job_id(&format!("ferry-replication-{TABLE}"));
    let mut results = Vec::new();
    for round in 1..=takeovers {
        // Warm standby, steady replication.
        tokio::time::sleep(Duration::from_secs(12)).await;
        results.push(pair.takeover(round, &dr_loc, job).await?);
    }
    let stats = workload.stop().await;
    catch_up(&chk, job, sc.server_clock().await?.raw()).await?;
    let diff = ferry_fixtures::compare::compare_tables(&sc, &dc, TABLE, TABLE).await;
    stop_sampler.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    drop(pair);
    let lags = lags.lock().map(|l| l.clone()).unwrap_or_default();
    summarize(
        &mut report,
        &results,
        &lags,
        (diff.is_equal(), &diff.to_string()),
        stats.applied,
    );
    report.finish(&ctx.results_dir, &ctx.monitor)
}

fn summarize(
    report: &mut crate::report::Report,
    results: &[Takeover],
    lags_s: &[f64],
    (equal, diff): (bool, &str),
    ops: u64,
) {
    let mut rto: Vec<f64> = results.iter().map(|t| t.rto_ms as f64).collect();
    rto.sort_by(f64::total_cmp);
    let mut rpo: Vec<f64> = results
        .iter()
        .filter_map(|t| t.rpo_dr_ms.map(|v| v as f64))
        .collect();
    rpo.sort_by(f64::total_cmp);
    let mut lag: Vec<f64> = lags_s.iter().map(|s| s * 1000.0).collect();
    lag.sort_by(f64::total_cmp);
    let mut table = Table::new(
        "Takeovers (kill -9 of the active)",
        &["", "p50", "p99", "max"],
    );
    let row = |v: &[f64]| {
        vec![
            f0(percentile(v, 50.0)),
            f0(percentile(v, 99.0)),
            f0(v.last().copied().unwrap_or(0.0)),
        ]
    };
    let mut r = vec!["RTO ms (kill → first window by the standby)".to_string()];
    r.extend(row(&rto));
    table.row(r);
    let mut r = vec!["RPO ms of the DR copy (age at the kill)".to_string()];
    r.extend(row(&rpo));
    table.row(r);
    let mut r = vec![format!(
        "replica lag ms (ferry_state_replica_lag_seconds, {} samples)",
        lag.len()
    )];
    r.extend(row(&lag));
    table.row(r);
    println!("{}", table.render());
    report.tables.push(table);
    report.result("takeovers", results);
    report.result("replica_lag_samples", lag.len());
    report.result("workload_ops_applied", ops);
    report.result("sink_equals_source", equal);
    if !equal {
        report.note(format!("sink != source: {diff}"));
    }
}
