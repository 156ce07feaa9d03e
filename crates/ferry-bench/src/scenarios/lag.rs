//! `lag`: a paced writer (insert/update/delete mix) changes the source
//! while `ferry run` replicates it with 1-second windows. Every 100 ms the
//! bench samples lag = now − lastEndTimestamp. After the writer stops it
//! measures how long until ferry reports a window ending after the last
//! write (from then on the sink must equal the source), and proves it by
//! comparing fingerprints of both tables.
//!
//! One run can sweep several writer rates (`--rates 1000,5000,20000`).
//! Each rate gets a fresh source table of the same size (loaded and
//! flushed), so every rate starts from the same state; the previous
//! rate's tables are dropped on both clusters first.
//!
//! To tell what ferry's diff scans cost the source from what the writer
//! itself costs it, each rate starts with a **writer-only baseline**: the
//! same writer at the same rate on the flushed table, with no ferry job,
//! for `--baseline-seconds` (default 20). The table is then flushed again
//! (so the measured phase starts from the same state) before ferry
//! starts. The source tablet servers' CPU during the measured phase is
//! split into (a) LLVM compiles (their `--codegen_time_compilation` log
//! lines, less any the baseline had), (b) ferry's diff scans apart from
//! the compiles, and (c) the rest: the baseline's CPU, scaled by the ops/s
//! the writer achieved with ferry over those it achieved alone (the
//! writer's cost is per operation; a writer slowed down by ferry costs
//! less). ferry's share is ((a) + (b)) / total = (with ferry − writer
//! only) / with ferry. The baseline is shorter than the measured phase and
//! its MemRowSets hold fewer changes, so a writer whose per-operation cost
//! grows with the MemRowSet is charged to ferry a little; on a flushed
//! table that growth is small (inserts into an in-memory B-tree).

mod burst;
mod figures;
mod table;

pub use burst::Burst;
pub use figures::*;
use table::{lag_table, notes, pct};

use super::{prepare_source, settle, Ctx, Prepared, Settle};
use crate::data::{self, MIX_DELETE, MIX_INSERT, MIX_UPDATE};
use crate::data::{ChurnStats, Fingerprint};
use crate::env::unix_micros;
use crate::ferry::{Ferry, Progress, WindowDone};
use crate::kudu::Cluster;
use crate::procs::cpu_seconds_of;
use crate::procs::Usage;
use crate::report::Report;
use crate::report::{f0, percentile};
use anyhow::{bail, Result};
use kudu_client::{HybridTime, KuduClient};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Seconds the writer runs with ferry, per rate.
pub const DEFAULT_SECONDS: u64 = 120;
/// Rows in each source table before the writer starts.
pub const DEFAULT_INITIAL_ROWS: u64 = 1_000_000;
/// Seconds of the writer-only baseline before ferry starts, per rate.
pub const DEFAULT_BASELINE_S: u64 = 20;
/// Writer seeds: the baseline and the measured phase write different keys
/// and values.
const BASELINE_SEED: u64 = 41;
const WRITER_SEED: u64 = 42;

/// What one `lag` run does.
#[derive(Debug, Clone)]
pub struct Params {
    /// Seconds the writer runs with ferry, per rate.
    pub seconds: u64,
    /// Writer rates (ops/s), run one after the other in this order.
    pub rates: Vec<f64>,
    pub initial_rows: u64,
    /// ferry `-p` (`None`: ferry's default).
    pub parallelism: Option<usize>,
    /// Seconds of the writer-only baseline per rate (0: none, and no split
    /// of the source's CPU).
    pub baseline_s: u64,
    /// A bulk load: the writer at twice the rate for a while.
    pub burst: Option<Burst>,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            seconds: DEFAULT_SECONDS,
            rates: vec![DEFAULT_RATE],
            initial_rows: DEFAULT_INITIAL_ROWS,
            parallelism: None,
            baseline_s: DEFAULT_BASELINE_S,
            burst: None,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
struct Sample {
    /// Seconds since the writer started.
    t_s: f64,
    lag_ms: f64,
    writing: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct LagStats {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

fn stats(v: &[f64]) -> LagStats {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    LagStats {
        samples: s.len(),
        p50_ms: percentile(&s, 50.0),
        p99_ms: percentile(&s, 99.0),
        max_ms: s.last().copied().unwrap_or(f64::NAN),
        mean_ms: if s.is_empty() {
            f64::NAN
        } else {
            s.iter().sum::<f64>() / s.len() as f64
        },
    }
}

pub async fn run(ctx: &Ctx, p: &Params) -> Result<PathBuf> {
    if p.rates.is_empty() {
        bail!("lag: no writer rate to run");
    }
    let mut params = json!({"seconds": p.seconds, "rates_rows_per_s": p.rates, "initial_rows": p.initial_rows,
               "baseline_seconds": p.baseline_s, "burst": p.burst,
               "mix_percent": {"insert": MIX_INSERT, "update": MIX_UPDATE, "delete": MIX_DELETE},
               "discovery_interval_s": 1, "checkpointing_interval_ms": 500,
               "parallelism": p.parallelism, "tablets": data::TABLETS, "tservers_per_cluster": ctx.tservers, "replicas": 1,
               "saturation_thresholds": {"writer_below_target": WRITER_SHORT_FRACTION, "source_cores_of_machine": SOURCE_BOUND_FRACTION}});
    if let ([single], Some(obj)) = (p.rates.as_slice(), params.as_object_mut()) {
        obj.insert("rate_rows_per_s".into(), json!(single));
    }
    let mut report = ctx.report("lag", params)?;
    let (src, dst) = ctx.clusters("lag", &mut report).await?;
    let sc = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let dc = KuduClient::new(&dst.masters.split(',').collect::<Vec<_>>())?;
    let quiet: Vec<u32> = src.pids().into_iter().chain(dst.pids()).collect();
    let mut runs: Vec<RateRun> = Vec::new();
    for (i, &rate) in p.rates.iter().enumerate() {
        let table = format!("bench_r{}", rate_tag(rate));
        println!(
            "  -- rate {} ops/s ({} of {}), table {table} --",
            f0(rate),
            i + 1,
            p.rates.len()
        );
        let env = RateEnv {
            ctx,
            src: &src,
            dst: &dst,
            sc: &sc,
            dc: &dc,
            quiet: &quiet,
        };
        let result = run_rate(&env, &table, rate, p, &mut report)
            .await
            .map(Box::new)
            .map_err(|e| {
                println!("  rate {rate}: FAILED: {e:#}");
                format!("{e:#}")
            });
        runs.push(RateRun {
            rate,
            table: table.clone(),
            result,
        });
        if i + 1 < p.rates.len() {
            // Free both clusters for the next rate: it starts on a fresh
            // table and quiet daemons, as the first one did.
            for (c, side) in [(&src, "source"), (&dst, "sink")] {
                if let Err(e) = data::drop_table(&c.masters, &table).await {
                    println!("  (could not drop {table} on the {side}: {e:#})");
                }
            }
            settle(&quiet, Duration::from_secs(60)).await;
        }
    }
    report
        .tables
        .push(lag_table(&runs, p, &report_lag_source(&runs)));
    report.result(
        "rates",
        runs.iter().map(RateRun::to_json).collect::<Vec<_>>(),
    );
    notes(&mut report, &runs, p);
    drop(src);
    drop(dst);
    let path = report.finish(&ctx.results_dir, &ctx.monitor)?;
    let problems: Vec<String> = runs.iter().filter_map(RateRun::problem).collect();
    if !problems.is_empty() {
        bail!("lag: {}", problems.join("; "));
    }
    Ok(path)
}

/// What every rate runs against.
struct RateEnv<'a> {
    ctx: &'a Ctx,
    src: &'a Cluster,
    dst: &'a Cluster,
    sc: &'a KuduClient,
    dc: &'a KuduClient,
    quiet: &'a [u32],
}

/// One rate of the run.
struct RateRun {
    rate: f64,
    table: String,
    result: std::result::Result<Box<Measured>, String>,
}

/// Everything one rate measured.
struct Measured {
    prepared: Prepared,
    baseline: Option<Baseline>,
    snapshot_s: f64,
    o: Outcome,
    split: CpuSplit,
    saturation: Saturation,
}

impl RateRun {
    /// Why this rate makes the run fail, if it does.
    fn problem(&self) -> Option<String> {
        match &self.result {
            Err(e) => Some(format!("{} ops/s failed: {e}", self.rate)),
            Ok(m) if m.o.caught_up_s.is_none() => Some(format!(
                "{} ops/s: ferry did not cover the last write within {} s of the writer stopping",
                self.rate, m.o.catch_up_timeout_s
            )),
            Ok(m) if m.o.equal == Some(false) => Some(format!(
                "{} ops/s: sink != source after the writer stopped",
                self.rate
            )),
            Ok(_) => None,
        }
    }

    /// The rate's JSON: the single-rate run's fields, plus the baseline,
    /// the split of the source's CPU and the saturation verdict.
    fn to_json(&self) -> Value {
        let m = match &self.result {
            Err(e) => {
                return json!({"rate_target_ops_per_s": self.rate, "table": self.table, "error": e})
            }
            Ok(m) => m,
        };
        let o = &m.o;
        let took = &o.took;
        let w = o.cpu_wall_s;
        let (cpu0, cpu1) = (o.cpu0, o.cpu1);
        json!({
            "rate_target_ops_per_s": self.rate,
            "table": self.table,
            "source": m.prepared,
            "writer_only": m.baseline,
            "lag_while_writing": o.during_stats,
            "lag_all_samples": o.all_stats,
            "lag_source": o.lag_source,
            "writer": o.churn,
            "snapshot_s": m.snapshot_s,
            "caught_up_after_writer_stop_s": o.caught_up_s,
            "verification": {"equal": o.equal, "attempts": o.attempts,
                              "verified_after_writer_stop_s": o.verified_after_s,
                              "source": o.expected, "sink": o.sink_fp},
            "windows_while_writing": {"count": o.writing_windows.len(),
                                      "took_ms_p50": percentile(took, 50.0),
                                      "took_ms_p99": percentile(took, 99.0),
                                      "took_ms_max": took.last(),
                                      "windows": o.writing_windows},
            "cpu_cores_while_writing": {"ferry": (cpu1.0 - cpu0.0) / w,
                                        "source_tservers": (cpu1.1 - cpu0.1) / w,
                                        "source_tservers_codegen": o.gen_cpu / w,
                                        "source_tservers_codegen_compiles": o.compiles,
                                        "sink_tservers": (cpu1.2 - cpu0.2) / w,
                                        "seconds": w},
            "source_cpu_split_cores": m.split,
            "saturation": m.saturation,
            "ferry_usage": o.usage,
            "ferry_rss_max_while_writing_mib": o.rss_max_while_writing_mib,
            "bulk_load": o.burst,
            "samples": o.samples,
        })
    }
}

/// Where the lag samples came from (the first rate that measured).
fn report_lag_source(runs: &[RateRun]) -> String {
    runs.iter()
        .find_map(|r| r.result.as_ref().ok().map(|m| m.o.lag_source))
        .unwrap_or("log")
        .to_string()
}

/// The writer-only baseline of one rate.
#[derive(Debug, Clone, Serialize)]
struct Baseline {
    writer: ChurnStats,
    /// Wall seconds between the two CPU readings.
    seconds: f64,
    source_tservers_cores: f64,
    source_codegen_cores: f64,
    source_codegen_compiles: u64,
    sink_tservers_cores: f64,
    /// Flushing the table again afterwards, and waiting for quiet.
    reflush_s: f64,
    settle: Settle,
}

/// One rate: a fresh loaded and flushed table, the writer-only baseline,
/// then ferry (snapshot, a few windows) and the measured writing phase.
async fn run_rate(
    env: &RateEnv<'_>,
    table: &str,
    rate: f64,
    p: &Params,
    report: &mut Report,
) -> Result<Measured> {
    let (ctx, src, dst) = (env.ctx, env.src, env.dst);
    let work = report.work_dir.clone();
    let prepared = prepare_source(src, env.sc, table, p.initial_rows, report, env.quiet).await?;
    let mut next_id = p.initial_rows as i64;
    let baseline = if p.baseline_s > 0 {
        let b = writer_only(env, table, rate, p.baseline_s, next_id, report).await?;
        next_id = b.writer.next_id;
        Some(b)
    } else {
        None
    };
    report.command(data::create_table(&dst.masters, table).await?);

    let mut o = ctx.ferry_options(src, dst, table, &work, &format!("lag-r{}", rate_tag(rate)));
    o.discovery_s = Some(1);
    o.checkpointing_ms = Some(500);
    o.parallelism = p.parallelism;
    let ferry = Ferry::start(&o, &ctx.monitor)?;
    report.command(ferry.command.clone());
    let snap = ferry
        .wait_windows(1, Duration::from_secs(120 + p.initial_rows / 2_000))
        .await?;
    println!("  snapshot of {table} replicated in {:.1} s", snap.at_s);
    // A few empty windows first, so the writer starts on a steady job.
    ferry.wait_windows(4, Duration::from_secs(60)).await?;
    settle(env.quiet, Duration::from_secs(30)).await;

    let pace = data::Pace {
        rate,
        burst: p.burst.map(|b| b.span()),
    };
    let outcome = write_and_measure(env, ferry, table, pace, p.seconds, next_id, report).await?;
    let w = outcome.cpu_wall_s;
    let source_cores = (outcome.cpu1.1 - outcome.cpu0.1) / w;
    let achieved = outcome.churn.achieved_rows_per_s;
    let split = split_source_cpu(
        source_cores,
        outcome.gen_cpu / w,
        achieved,
        baseline.as_ref().map(|b| BaselineCpu {
            source_cores: b.source_tservers_cores,
            codegen_cores: b.source_codegen_cores,
            achieved_ops_per_s: b.writer.achieved_rows_per_s,
        }),
    );
    let saturation = saturation(
        rate,
        achieved,
        source_cores,
        ctx.machine.nproc,
        baseline.as_ref().map(|b| b.writer.achieved_rows_per_s),
    );
    println!(
        "  {} ops/s: source {:.2} cores, ferry's share {}; saturated: {}",
        f0(rate),
        source_cores,
        split.ferry_share.map_or("-".into(), pct),
        saturation.describe()
    );
    Ok(Measured {
        prepared,
        baseline,
        snapshot_s: snap.at_s,
        o: outcome,
        split,
        saturation,
    })
}

/// The writer alone at `rate` for `seconds` on the flushed table (no ferry
/// job): the source's CPU for the writer's own load. Then the table is
/// flushed again so the measured phase starts from a flushed table too.
async fn writer_only(
    env: &RateEnv<'_>,
    table: &str,
    rate: f64,
    seconds: u64,
    next_id: i64,
    report: &mut Report,
) -> Result<Baseline> {
    let (src, dst) = (env.src, env.dst);
    println!("  writer only (no ferry job yet): {rate} ops/s for {seconds} s ...");
    let marks = src.log_marks();
    let t0 = Instant::now();
    let c0 = (
        cpu_seconds_of(&src.tserver_pids()),
        cpu_seconds_of(&dst.tserver_pids()),
    );
    let writer = write_churn(
        src,
        table,
        data::Pace::steady(rate),
        seconds,
        next_id,
        BASELINE_SEED,
    )
    .await?;
    let c1 = (
        cpu_seconds_of(&src.tserver_pids()),
        cpu_seconds_of(&dst.tserver_pids()),
    );
    let wall = t0.elapsed().as_secs_f64().max(1e-9);
    let (compiles, gen_cpu) = src.codegen_since(&marks);
    report.command(format!(
        "# ferry-bench writer (in process), writer-only baseline with no ferry job: kudu-client, 1 AUTO_FLUSH_BACKGROUND session, {rate} ops/s for {seconds} s on {table} (seed {BASELINE_SEED}), then the table flushed again"
    ));
    let reflush = Instant::now();
    src.flush_table(table, Duration::from_secs(300)).await?;
    let settled = settle(env.quiet, Duration::from_secs(60)).await;
    let b = Baseline {
        seconds: wall,
        source_tservers_cores: (c1.0 - c0.0) / wall,
        source_codegen_cores: gen_cpu / wall,
        source_codegen_compiles: compiles,
        sink_tservers_cores: (c1.1 - c0.1) / wall,
        reflush_s: reflush.elapsed().as_secs_f64(),
        settle: settled,
        writer,
    };
    println!(
        "  writer only: {:.0} ops/s achieved, source tablet servers {:.2} cores; flushed again in {:.1} s",
        b.writer.achieved_rows_per_s, b.source_tservers_cores, b.reflush_s
    );
    Ok(b)
}

/// What the writing phase measured, for the report.
struct Outcome {
    churn: ChurnStats,
    during_stats: LagStats,
    all_stats: LagStats,
    lag_source: &'static str,
    samples: Vec<Sample>,
    /// Windows completed while the writer ran, and their sorted `took_ms`.
    writing_windows: Vec<WindowDone>,
    took: Vec<f64>,
    /// `None`: ferry did not cover the last write within `catch_up_timeout_s`.
    caught_up_s: Option<f64>,
    catch_up_timeout_s: u64,
    verified_after_s: Option<f64>,
    /// `None`: not compared (ferry had not caught up).
    equal: Option<bool>,
    attempts: u32,
    expected: Option<Fingerprint>,
    sink_fp: Option<Fingerprint>,
    /// CPU seconds (ferry, source tablet servers, sink tablet servers) when
    /// the writer started and when it stopped, and the wall seconds between.
    cpu0: (f64, f64, f64),
    cpu1: (f64, f64, f64),
    cpu_wall_s: f64,
    gen_cpu: f64,
    compiles: u64,
    usage: Usage,
    /// ferry's largest VmRSS at a window completion while writing.
    rss_max_while_writing_mib: Option<f64>,
    /// The lag around a bulk load, if the writer had one.
    burst: Option<burst::BurstFigures>,
}

/// The lag sampler: now − lastEndTimestamp every 100 ms, in the background.
struct Sampler {
    task: tokio::task::JoinHandle<()>,
    samples: Arc<Mutex<Vec<Sample>>>,
    source_used: Arc<Mutex<&'static str>>,
    writing: Arc<AtomicBool>,
}

impl Sampler {
    fn start(progress: Progress, writer_started: Instant) -> Sampler {
        let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
        let source_used: Arc<Mutex<&'static str>> = Arc::new(Mutex::new("log"));
        let writing = Arc::new(AtomicBool::new(true));
        let task = {
            let (samples, source_used, writing) =
                (samples.clone(), source_used.clone(), writing.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tick.tick().await;
                    if let Some((end_ms, from)) = progress.last_end_ms().await {
                        let now_ms = unix_micros() as f64 / 1000.0;
                        if let Ok(mut g) = source_used.lock() {
                            *g = from;
                        }
                        if let Ok(mut g) = samples.lock() {
                            g.push(Sample {
                                t_s: writer_started.elapsed().as_secs_f64(),
                                lag_ms: now_ms - end_ms,
                                writing: writing.load(Ordering::Relaxed),
                            });
                        }
                    }
                }
            })
        };
        Sampler {
            task,
            samples,
            source_used,
            writing,
        }
    }
}

impl Drop for Sampler {
    /// A rate that fails half-way does not leave its sampler scraping.
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn cpu_now(ferry: &Ferry, src: &Cluster, dst: &Cluster) -> (f64, f64, f64) {
    (
        ferry.cpu_s(),
        cpu_seconds_of(&src.tserver_pids()),
        cpu_seconds_of(&dst.tserver_pids()),
    )
}

/// Runs the paced writer while sampling lag, waits until ferry covers the
/// last write, proves sink == source, and stops ferry.
async fn write_and_measure(
    env: &RateEnv<'_>,
    ferry: Ferry,
    table: &str,
    pace: data::Pace,
    seconds: u64,
    next_id: i64,
    report: &mut Report,
) -> Result<Outcome> {
    let rate = pace.rate;
    let (src, dst) = (env.src, env.dst);
    let sampler = Sampler::start(ferry.progress(), Instant::now());
    println!("  writing {rate} rows/s for {seconds} s with ferry replicating ...");
    let windows_before = ferry.windows().len();
    let t0 = Instant::now();
    let cpu0 = cpu_now(&ferry, src, dst);
    let marks = src.log_marks();
    let churn = write_churn(src, table, pace, seconds, next_id, WRITER_SEED).await?;
    sampler.writing.store(false, Ordering::Relaxed);
    let stopped_at = ferry.elapsed_s();
    let cpu1 = cpu_now(&ferry, src, dst);
    let cpu_wall_s = t0.elapsed().as_secs_f64().max(1e-9);
    let (compiles, gen_cpu) = src.codegen_since(&marks);
    report.command(format!(
        "# ferry-bench writer (in process): kudu-client, 1 AUTO_FLUSH_BACKGROUND session, {rate} ops/s for {seconds} s on {table} (seed {WRITER_SEED}): {MIX_INSERT}% INSERT of new keys, {MIX_UPDATE}% UPDATE_IGNORE (all columns), {MIX_DELETE}% DELETE_IGNORE of random existing keys"
    ));
    println!(
        "  writer done: {:.0} ops/s achieved ({} inserts, {} updates, {} deletes)",
        churn.achieved_rows_per_s, churn.inserts, churn.updates, churn.deletes
    );

    // A writer that outran the source leaves a backlog about as long as
    // the writing itself.
    let catch_up_timeout_s = 120 + seconds;
    let caught = wait_caught_up(&ferry, churn.last_write_ht, catch_up_timeout_s).await?;
    let caught_up_s = caught.map(|w| w.at_s - stopped_at);
    let (equal, attempts, expected, sink_fp, verified_after_s) = match caught_up_s {
        Some(s) => {
            println!("  ferry caught up {s:.2} s after the writer stopped; comparing tables ...");
            let (equal, attempts, expected, sink_fp) =
                verify_sink(env.sc, env.dc, table, churn.last_write_ht).await?;
            (
                Some(equal),
                attempts,
                Some(expected),
                Some(sink_fp),
                Some(ferry.elapsed_s() - stopped_at),
            )
        }
        None => {
            println!(
                "  ferry did not cover the last write within {catch_up_timeout_s} s of the writer stopping; not comparing"
            );
            (None, 0, None, None, None)
        }
    };
    sampler.task.abort();
    let windows_all = ferry.windows();
    let usage = ferry.stop().await?;

    let samples = sampler
        .samples
        .lock()
        .map(|g| g.clone())
        .unwrap_or_default();
    let during: Vec<f64> = samples
        .iter()
        .filter(|s| s.writing)
        .map(|s| s.lag_ms)
        .collect();
    let all: Vec<f64> = samples.iter().map(|s| s.lag_ms).collect();
    let writing_windows: Vec<WindowDone> = windows_all
        .get(windows_before..)
        .unwrap_or_default()
        .iter()
        .filter(|w| w.at_s <= stopped_at)
        .cloned()
        .collect();
    let mut took: Vec<f64> = writing_windows.iter().map(|w| w.took_ms as f64).collect();
    took.sort_by(|a, b| a.total_cmp(b));
    let rss_max_while_writing_mib = writing_windows
        .iter()
        .filter_map(|w| w.rss_mib)
        .reduce(f64::max);
    let burst = pace.burst.map(|(at, len)| {
        let b = burst::figures(
            Burst {
                at_s: at.as_secs(),
                seconds: len.as_secs(),
            },
            &samples,
        );
        println!(
            "  bulk load: lag p99 {:.2} s before, {:.2} s during (max {:.2} s), {:.2} s from 60 s after; back to the steady p99 {} after it ended",
            b.steady_p99_ms / 1e3,
            b.during_p99_ms / 1e3,
            b.during_max_ms / 1e3,
            b.after_60s_p99_ms / 1e3,
            b.back_to_steady_after_s.map_or("never".into(), |s| format!("{s:.1} s"))
        );
        b
    });
    let lag_source = *sampler
        .source_used
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    Ok(Outcome {
        churn,
        during_stats: stats(&during),
        all_stats: stats(&all),
        lag_source,
        samples,
        writing_windows,
        took,
        caught_up_s,
        catch_up_timeout_s,
        verified_after_s,
        equal,
        attempts,
        expected,
        sink_fp,
        cpu0,
        cpu1,
        cpu_wall_s,
        gen_cpu,
        compiles,
        usage,
        rss_max_while_writing_mib,
        burst,
    })
}

/// The paced insert/update/delete writer, from its own client.
async fn write_churn(
    src: &Cluster,
    table: &str,
    pace: data::Pace,
    seconds: u64,
    next_id: i64,
    seed: u64,
) -> Result<ChurnStats> {
    let writer_client = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let t = writer_client.open_table(table).await?;
    data::churn(
        &writer_client,
        &t,
        pace,
        Duration::from_secs(seconds),
        next_id,
        seed,
    )
    .await
}

/// Caught up: the first completed window that ends after the last write
/// (`None` if none did within `timeout_s`).
async fn wait_caught_up(
    ferry: &Ferry,
    last_write_ht: u64,
    timeout_s: u64,
) -> Result<Option<WindowDone>> {
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
        if let Some(w) = ferry
            .windows()
            .into_iter()
            .find(|w| w.end_ht > last_write_ht)
        {
            return Ok(Some(w));
        }
        if !ferry.alive() {
            bail!(
                "ferry exited before covering the last write (log {})",
                ferry.log.display()
            );
        }
        if Instant::now() > deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Proves the sink equals the source as of the last write, retrying for up to
/// 60 s: (equal, attempts, source fingerprint, sink fingerprint).
async fn verify_sink(
    sc: &KuduClient,
    dc: &KuduClient,
    table: &str,
    last_write_ht: u64,
) -> Result<(bool, u32, Fingerprint, Fingerprint)> {
    let verify_started = Instant::now();
    let expected = data::fingerprint(
        sc,
        table,
        Some(HybridTime::from_raw(last_write_ht + 1)),
        false,
    )
    .await?;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let fp = data::fingerprint(dc, table, None, false).await?;
        if fp == expected || verify_started.elapsed() > Duration::from_secs(60) {
            return Ok((fp == expected, attempts, expected, fp));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
