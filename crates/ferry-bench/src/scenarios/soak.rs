//! `soak`: ferry replicates an every-type table under a mixed workload for
//! `--minutes`, and every `--fault-every` seconds a random fault from issue
//! 17's list hits the sink, the source, the network between ferry and the
//! sink, ferry's checkpoint directory or ferry itself (see [`fault`]).
//!
//! For each fault the bench records how long ferry took to recover (until
//! its lastEndTimestamp passes the moment the fault ended), the largest lag
//! during the fault and the recovery, and the restarts ferry's restart
//! strategy made. Then, at a quiet point (workload paused, ferry past the
//! pause), it compares source and sink cell by cell; the same comparison
//! ends the run. If ferry exits on its own the bench records why and starts
//! it again from its newest complete checkpoint, as an operator would: the
//! run goes on, and the verdict says it failed.

mod fault;
mod quiet;
mod summary;

use super::Ctx;
use crate::env::unix_micros;
use crate::ferry::{scrape_metric, Ferry, FerryOptions, Progress};
use crate::kudu::Cluster;
use crate::report::Report;
use anyhow::{anyhow, bail, Context, Result};
pub use fault::FaultKind;
use fault::FaultRecord;
use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_fixtures::workload::Workload;
use ferry_testkit::fault::{NetNs, SmallFs};
use kudu_client::{KuduClient, TableBuilder};
use quiet::{Comparison, WorkloadCounts};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use serde_json::json;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TABLE: &str = "soak";
/// Hash tablets of the soak table.
const TABLETS: u32 = 4;
/// How long ferry may take to pass a fault's end or a quiet point.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(300);
/// Unplanned ferry exits after which the run is abandoned.
const MAX_EXITS: usize = 30;
/// The Prometheus counter of the engine's restarts (absent in older builds).
const NUM_RESTARTS_METRIC: &str = "flink_jobmanager_job_numRestarts";
/// Size of the filesystem holding the checkpoints.
const CHECKPOINT_FS_BYTES: u64 = 64 << 20;

/// What `bench/run soak` was asked for.
pub struct Params {
    pub minutes: f64,
    pub fault_every_s: u64,
    /// Workload operations per second.
    pub rate: u32,
    pub seed: u64,
    /// The faults to draw from.
    pub kinds: Vec<FaultKind>,
}

/// ferry exiting on its own.
#[derive(Debug, Clone, Serialize)]
pub struct FerryExit {
    pub at_s: f64,
    pub exit: i32,
    /// The fault in progress, if any.
    pub during: Option<FaultKind>,
    /// The last ERROR lines of its log.
    pub errors: Vec<String>,
    pub log: PathBuf,
}

/// Progress of the current ferry process, updated by the sampler.
#[derive(Default)]
struct Gauges {
    /// Bumped at every ferry start, so a stale sample of the previous
    /// process is not taken for the new one's.
    generation: u64,
    progress: Option<Progress>,
    /// lastEndTimestamp (epoch ms) of the current process; 0 until it reports one.
    proc_end_ms: f64,
    /// The largest lastEndTimestamp any process reported.
    any_end_ms: f64,
    /// (seconds since the soak started, lag ms).
    samples: Vec<(f64, f64)>,
    /// Where lastEndTimestamp was read last ("metrics" or "log").
    source: &'static str,
}

/// The running soak: clusters, ferry and what has been measured.
struct Soak<'a> {
    ctx: &'a Ctx,
    // Field order is drop order: ferry goes before its namespace and filesystem.
    ferry: Option<Ferry>,
    ns: Option<NetNs>,
    fs: Option<SmallFs>,
    src: Cluster,
    dst: Cluster,
    sc: KuduClient,
    dc: KuduClient,
    opts: FerryOptions,
    store: CheckpointStore,
    gauges: Arc<Mutex<Gauges>>,
    sampler: tokio::task::JoinHandle<()>,
    started: Instant,
    rng: StdRng,
    rate: u32,
    seed: u64,
    workload: Option<Workload>,
    workload_runs: u64,
    /// The key the next workload inserts first (each run continues the keys).
    next_id: i64,
    workload_total: WorkloadCounts,
    /// The fault in progress, for exits.
    current_fault: Option<FaultKind>,
    exits: Vec<FerryExit>,
    ferry_starts: u32,
    /// `job restarting` lines of ferry processes that have ended.
    closed_restart_lines: usize,
    report: Report,
    work: PathBuf,
}

pub async fn run(ctx: &Ctx, p: Params) -> Result<PathBuf> {
    if ctx.tservers < 3 {
        bail!("soak needs --tservers 3 or more (the source table has 3 replicas)");
    }
    let mut source_flags = vec!["--mrs_use_codegen=false".to_string()];
    source_flags.extend(ctx.source_tserver_flags.iter().cloned());
    let mut report = ctx.report(
        "soak",
        json!({"minutes": p.minutes, "fault_every_s": p.fault_every_s, "rate_ops_per_s": p.rate,
               "seed": p.seed, "faults": p.kinds, "tablets": TABLETS,
               "source": {"masters": 3, "tservers": ctx.tservers, "replicas": 3, "tserver_flags": source_flags},
               "sink": {"masters": 1, "tservers": ctx.tservers, "replicas": 1},
               "discovery_interval_s": 2, "checkpointing_interval_ms": 1000,
               "recovery_timeout_s": RECOVERY_TIMEOUT.as_secs()}),
    )?;
    let work = report.work_dir.clone();
    let tag = std::process::id();
    let (src, dst) = tokio::join!(
        Cluster::start(
            format!("bench-soak-src-{tag}"),
            3,
            ctx.tservers,
            &source_flags,
            &ctx.monitor
        ),
        Cluster::start(
            format!("bench-soak-dst-{tag}"),
            1,
            ctx.tservers,
            &[],
            &ctx.monitor
        ),
    );
    let (src, dst) = (src?, dst?);
    report.command(src.up_command(ctx.tservers));
    report.command(dst.up_command(ctx.tservers));
    let sc = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let dc = KuduClient::new(&dst.masters.split(',').collect::<Vec<_>>())?;
    create_table(&sc, 3).await?;
    create_table(&dc, 1).await?;
    report.command(format!(
        "# ferry-bench (in process): create table {TABLE} (ferry_fixtures::all_types_schema, {TABLETS} hash tablets on id) with 3 replicas on the source, 1 on the sink"
    ));

    let mut kinds = p.kinds.clone();
    let (ns, fs) = fault_environment(&mut kinds, &mut report);
    if kinds.is_empty() {
        bail!("none of the requested faults can run here (see the notes above)");
    }
    let checkpoints = match &fs {
        Some(fs) => fs.path().join("checkpoints"),
        None => work.join("checkpoints"),
    };
    let mut opts = ctx.ferry_options(&src, &dst, TABLE, &work, "soak-1");
    opts.discovery_s = Some(2);
    opts.checkpointing_ms = Some(1000);
    opts.checkpoints = checkpoints.clone();
    if let Some(ns) = &ns {
        // `NetNs::command` as argv: `ip netns exec` execs ferry, same pid.
        opts.wrapper = vec!["ip".into(), "netns".into(), "exec".into(), ns.name()];
        opts.metrics_address = Some(ns.addr_inside().to_string());
    }
    let store = CheckpointStore::open_local(
        &StorageLocation::local(&checkpoints).map_err(|e| anyhow!("{e}"))?,
        NonZeroUsize::MIN,
    );
    let gauges: Arc<Mutex<Gauges>> = Arc::default();
    let started = Instant::now();
    let sampler = tokio::spawn(sample_lag(gauges.clone(), started));
    let mut soak = Soak {
        ctx,
        ferry: None,
        ns,
        fs,
        src,
        dst,
        sc,
        dc,
        opts,
        store,
        gauges,
        sampler,
        started,
        rng: StdRng::seed_from_u64(p.seed),
        rate: p.rate,
        seed: p.seed,
        workload: None,
        workload_runs: 0,
        next_id: 0,
        workload_total: WorkloadCounts::default(),
        current_fault: None,
        exits: Vec::new(),
        ferry_starts: 0,
        closed_restart_lines: 0,
        report,
        work,
    };
    let outcome = soak.run_faults(&p, &kinds).await;
    soak.finish(outcome).await
}

async fn create_table(client: &KuduClient, replicas: i32) -> Result<()> {
    let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], TABLETS, 0)
        .num_replicas(replicas);
    client
        .create_table(&b)
        .await
        .with_context(|| format!("creating table {TABLE}"))?;
    Ok(())
}

/// The network namespace ferry runs in (for partitions) and the small
/// filesystem its checkpoints live on (to make them unwritable). A fault
/// whose tool is missing here is dropped from `kinds`, with a note.
fn fault_environment(
    kinds: &mut Vec<FaultKind>,
    report: &mut Report,
) -> (Option<NetNs>, Option<SmallFs>) {
    let mut ns = None;
    if kinds.contains(&FaultKind::Partition) {
        match NetNs::create() {
            Ok(n) => {
                report.command(format!(
                    "# ferry-bench (in process): ferry_testkit::fault::NetNs::create() -> network namespace {}; ferry runs in it (ip netns exec)",
                    n.name()
                ));
                ns = Some(n);
            }
            Err(e) => {
                let msg = format!("partition faults skipped: no network namespace ({e})");
                println!("  {msg}");
                report.note(msg);
                kinds.retain(|k| *k != FaultKind::Partition);
            }
        }
    }
    let mut fs = None;
    if kinds.contains(&FaultKind::CheckpointUnwritable) {
        match SmallFs::mount(CHECKPOINT_FS_BYTES) {
            Ok(f) => {
                report.command(format!(
                    "# ferry-bench (in process): ferry_testkit::fault::SmallFs::mount({CHECKPOINT_FS_BYTES}) -> {} (checkpoints)",
                    f.path().display()
                ));
                fs = Some(f);
            }
            Err(e) => {
                let msg =
                    format!("checkpoint-unwritable faults skipped: no small filesystem ({e})");
                println!("  {msg}");
                report.note(msg);
                kinds.retain(|k| *k != FaultKind::CheckpointUnwritable);
            }
        }
    }
    (ns, fs)
}

fn unix_ms() -> f64 {
    unix_micros() as f64 / 1000.0
}

/// Every 250 ms: the current ferry's lastEndTimestamp, and lag = now − the
/// newest end known (the current process's once it reported one).
async fn sample_lag(gauges: Arc<Mutex<Gauges>>, started: Instant) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let Some((generation, progress)) = gauges
            .lock()
            .ok()
            .and_then(|g| g.progress.clone().map(|p| (g.generation, p)))
        else {
            continue;
        };
        let end = progress.last_end_ms().await;
        let Ok(mut g) = gauges.lock() else {
            continue;
        };
        if g.generation != generation {
            continue;
        }
        if let Some((v, source)) = end {
            g.source = source;
            g.proc_end_ms = g.proc_end_ms.max(v);
            g.any_end_ms = g.any_end_ms.max(v);
        }
        let newest = if g.proc_end_ms > 0.0 {
            g.proc_end_ms
        } else {
            g.any_end_ms
        };
        if newest > 0.0 {
            let lag = (unix_ms() - newest).max(0.0);
            g.samples.push((started.elapsed().as_secs_f64(), lag));
        }
    }
}

impl Soak<'_> {
    fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Snapshot, then faults until the time is up, then the final comparison.
    async fn run_faults(&mut self, p: &Params, kinds: &[FaultKind]) -> Result<()> {
        self.start_workload();
        self.start_ferry(None).await?;
        self.wait_first_window().await?;
        println!(
            "  soak: {:.1} min, a fault every {} s from {:?}, {} ops/s, seed {}",
            p.minutes,
            p.fault_every_s,
            kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
            p.rate,
            p.seed
        );
        let run_for = Duration::from_secs_f64(p.minutes * 60.0);
        let every = Duration::from_secs(p.fault_every_s);
        // The steady stretch after a quiet point before the next fault.
        let gap = (every / 4).min(Duration::from_secs(15));
        let soak_started = Instant::now();
        let mut next = soak_started + every;
        let mut bag: Vec<FaultKind> = Vec::new();
        let mut faults: Vec<FaultRecord> = Vec::new();
        loop {
            while Instant::now() < next {
                self.idle(Duration::from_millis(500)).await?;
            }
            // No fault that would start in the last half interval.
            if soak_started.elapsed() + every / 2 > run_for {
                break;
            }
            if bag.is_empty() {
                bag = fault::shuffled(kinds, &mut self.rng);
            }
            let Some(kind) = bag.pop() else { break };
            let started = Instant::now();
            let mut rec = self.fault(faults.len() + 1, kind, every).await?;
            let cmp = self
                .quiet_point(&format!("after fault {}", rec.n), true)
                .await?;
            rec.comparison = Some(cmp);
            println!("  {}", rec.one_line());
            self.report_progress(&rec);
            faults.push(rec);
            next = (started + every).max(Instant::now() + gap);
            if soak_started.elapsed() >= run_for {
                break;
            }
        }
        let last = self.quiet_point("final", false).await?;
        println!(
            "  final comparison: {}",
            match last.equal {
                Some(true) => "sink == source".to_string(),
                Some(false) => format!("SINK != SOURCE: {}", last.detail),
                None => last.detail.clone(),
            }
        );
        self.report.result("faults", &faults);
        self.report.result("final_comparison", &last);
        self.summarise(&faults, &last);
        Ok(())
    }

    /// Keeps the JSON's fault list current on disk, so a run cut short
    /// still leaves what it measured (in the work folder).
    fn report_progress(&self, rec: &FaultRecord) {
        let path = self.work.join("faults.jsonl");
        let line = serde_json::to_string(rec).unwrap_or_default();
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
    }

    /// Starts ferry, resuming from the newest complete checkpoint of the
    /// job `previous` ran, if it left one (else from the last resume point).
    async fn start_ferry(&mut self, previous: Option<String>) -> Result<()> {
        if let Some(job) = previous.and_then(|j| j.parse::<JobId>().ok()) {
            match self.store.latest_complete(&job).await {
                Ok(latest) => {
                    if let Some(c) = latest.checkpoint {
                        self.opts.resume = Some(c.location.to_uri());
                    }
                }
                Err(e) => println!("  listing the checkpoints of job {job}: {e}"),
            }
        }
        self.ferry_starts += 1;
        self.opts.log = self.work.join(format!("ferry-{}.log", self.ferry_starts));
        let ferry = Ferry::start(&self.opts, &self.ctx.monitor)?;
        self.report.command(ferry.command.clone());
        if let Ok(mut g) = self.gauges.lock() {
            g.generation += 1;
            g.progress = Some(ferry.progress());
            g.proc_end_ms = 0.0;
        }
        self.ferry = Some(ferry);
        Ok(())
    }

    async fn wait_first_window(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if self
                .gauges
                .lock()
                .map(|g| g.proc_end_ms > 0.0)
                .unwrap_or(false)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("ferry completed no window within 180 s of starting");
            }
            self.idle(Duration::from_millis(250)).await?;
        }
    }

    /// Restarts ferry if it has exited on its own, recording why.
    async fn supervise(&mut self) -> Result<()> {
        if self.ferry.as_ref().is_none_or(|f| f.alive()) {
            return Ok(());
        }
        let Some(ferry) = self.ferry.take() else {
            return Ok(());
        };
        self.closed_restart_lines += ferry.restart_lines().len();
        let errors = ferry.error_lines();
        let job = ferry.job_id();
        let log = ferry.log.clone();
        let usage = ferry.reap(Duration::from_secs(5)).await?;
        let exit = FerryExit {
            at_s: self.elapsed_s(),
            exit: usage.exit,
            during: self.current_fault,
            errors: errors[errors.len().saturating_sub(3)..].to_vec(),
            log,
        };
        println!(
            "  ! ferry exited with {} at {:.0} s: {}",
            exit.exit,
            exit.at_s,
            exit.errors
                .last()
                .map(String::as_str)
                .unwrap_or("(no ERROR line)")
        );
        self.exits.push(exit);
        if self.exits.len() >= MAX_EXITS {
            bail!("ferry exited {MAX_EXITS} times; giving up");
        }
        // Not in a tight loop if it cannot start at all.
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.start_ferry(job).await
    }

    /// Waits `d` while keeping ferry running.
    async fn idle(&mut self, d: Duration) -> Result<()> {
        let until = Instant::now() + d;
        loop {
            self.supervise().await?;
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            tokio::time::sleep(left.min(Duration::from_millis(250))).await;
        }
    }

    /// Waits until the current ferry's lastEndTimestamp passes `t_ms`;
    /// the seconds that took, or `None` after [`RECOVERY_TIMEOUT`].
    async fn wait_end_past(&mut self, t_ms: f64) -> Result<Option<f64>> {
        let started = Instant::now();
        loop {
            let end = self.gauges.lock().map(|g| g.proc_end_ms).unwrap_or(0.0);
            if end > t_ms {
                return Ok(Some(started.elapsed().as_secs_f64()));
            }
            if started.elapsed() > RECOVERY_TIMEOUT {
                return Ok(None);
            }
            self.idle(Duration::from_millis(100)).await?;
        }
    }

    /// The largest lag sampled between two points of the soak (seconds).
    fn max_lag_s(&self, from_s: f64, to_s: f64) -> Option<f64> {
        let g = self.gauges.lock().ok()?;
        g.samples
            .iter()
            .filter(|(t, _)| *t >= from_s && *t <= to_s)
            .map(|(_, lag)| lag / 1000.0)
            .reduce(f64::max)
    }

    /// `job restarting` lines logged by every ferry process so far.
    fn restart_lines(&self) -> usize {
        self.closed_restart_lines + self.ferry.as_ref().map_or(0, |f| f.restart_lines().len())
    }

    /// The engine's restart counter of the current process, if it has one.
    async fn num_restarts(&self) -> Option<(u64, f64)> {
        let f = self.ferry.as_ref()?;
        let addr = f.metrics_addr.as_deref()?;
        let generation = self.gauges.lock().ok()?.generation;
        scrape_metric(addr, NUM_RESTARTS_METRIC)
            .await
            .ok()
            .map(|v| (generation, v))
    }

    /// Stops ferry, writes the report (also after a failed run) and says
    /// whether the soak passed.
    async fn finish(mut self, outcome: Result<()>) -> Result<PathBuf> {
        self.sampler.abort();
        self.stop_workload().await;
        if let Some(f) = self.ferry.take() {
            self.closed_restart_lines += f.restart_lines().len();
            if let Ok(usage) = f.stop().await {
                self.report.result("ferry_last_process", usage);
            }
        }
        self.report.result("ferry_exits", &self.exits);
        let samples: Vec<[f64; 2]> = self
            .gauges
            .lock()
            .map(|g| {
                g.samples
                    .iter()
                    .map(|(t, l)| [(t * 10.0).round() / 10.0, l.round()])
                    .collect()
            })
            .unwrap_or_default();
        self.report.result("lag_samples_s_ms", samples);
        let source = self.gauges.lock().map(|g| g.source).unwrap_or("");
        self.report.result("last_end_read_from", source);
        self.report.note("A fault is recovered when ferry's lastEndTimestamp (the end of its last completed window; Prometheus gauge, or its log inside a network namespace whose metrics are unreachable) passes the wall-clock moment the fault ended. Time to recover counts from that moment.");
        self.report.note("Lag = now − lastEndTimestamp, sampled every 250 ms; while ferry is down or restarting, the newest end any ferry process reported. 'restarts' counts the engine's `job restarting` log lines (its restart strategy); 'exits' counts ferry processes that ended on their own, which the bench restarted from the newest complete checkpoint.");
        self.report.note("Quiet point: the workload is stopped, the bench waits until ferry completes a window ending after that moment, then compares every cell of source and sink (ferry_fixtures::compare::compare_tables), up to 3 attempts 5 s apart.");
        if let Err(e) = &outcome {
            self.report.note(format!("THE SOAK STOPPED EARLY: {e:#}"));
        }
        let verdict = self
            .report
            .results
            .get("summary")
            .and_then(|s| s["verdict"].as_str())
            .map(str::to_string);
        // Namespace and filesystem go after ferry (which has stopped).
        drop(self.ns.take());
        drop(self.fs.take());
        let path = self
            .report
            .finish(&self.ctx.results_dir, &self.ctx.monitor)?;
        outcome?;
        if verdict.as_deref() != Some("pass") {
            bail!(
                "the soak failed: see the summary above and {}",
                path.display()
            );
        }
        Ok(path)
    }
}
