//! `lag`: a paced writer (insert/update/delete mix) changes the source
//! while `ferry run` replicates it with 1-second windows. Every 100 ms the
//! bench samples lag = now − lastEndTimestamp. After the writer stops it
//! measures how long until ferry reports a window ending after the last
//! write (from then on the sink must equal the source), and proves it by
//! comparing fingerprints of both tables.

use super::{prepare_source, settle, Ctx};
use crate::data::{self, MIX_DELETE, MIX_INSERT, MIX_UPDATE};
use crate::data::{ChurnStats, Fingerprint};
use crate::env::unix_micros;
use crate::ferry::{Ferry, Progress, WindowDone};
use crate::kudu::Cluster;
use crate::procs::cpu_seconds_of;
use crate::procs::Usage;
use crate::report::Report;
use crate::report::{f0, f1, f2, percentile, Table};
use anyhow::{bail, Result};
use kudu_client::{HybridTime, KuduClient};
use serde::Serialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TABLE: &str = "bench";

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

pub async fn run(
    ctx: &Ctx,
    seconds: u64,
    rate: f64,
    initial_rows: u64,
    parallelism: Option<usize>,
) -> Result<PathBuf> {
    let mut report = ctx.report(
        "lag",
        json!({"seconds": seconds, "rate_rows_per_s": rate, "initial_rows": initial_rows,
               "mix_percent": {"insert": MIX_INSERT, "update": MIX_UPDATE, "delete": MIX_DELETE},
               "discovery_interval_s": 1, "checkpointing_interval_ms": 500,
               "parallelism": parallelism, "tablets": data::TABLETS, "tservers_per_cluster": ctx.tservers, "replicas": 1}),
    )?;
    let work = report.work_dir.clone();
    let (src, dst) = ctx.clusters("lag", &mut report).await?;
    let sc = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let dc = KuduClient::new(&dst.masters.split(',').collect::<Vec<_>>())?;
    let quiet: Vec<u32> = src.pids().into_iter().chain(dst.pids()).collect();
    let prepared = prepare_source(&src, &sc, TABLE, initial_rows, &mut report, &quiet).await?;
    report.result("source", &prepared);
    report.command(data::create_table(&dst.masters, TABLE).await?);

    let mut o = ctx.ferry_options(&src, &dst, TABLE, &work, "lag");
    o.discovery_s = Some(1);
    o.checkpointing_ms = Some(500);
    o.parallelism = parallelism;
    let ferry = Ferry::start(&o, &ctx.monitor)?;
    report.command(ferry.command.clone());
    let snap = ferry
        .wait_windows(1, Duration::from_secs(120 + initial_rows / 2_000))
        .await?;
    println!(
        "  snapshot of {initial_rows} rows replicated in {:.1} s",
        snap.at_s
    );
    // A few empty windows first, so the writer starts on a steady job.
    ferry.wait_windows(4, Duration::from_secs(60)).await?;
    settle(&quiet, Duration::from_secs(30)).await;

    let clients = (&sc, &dc);
    let outcome = write_and_measure(
        &src,
        &dst,
        clients,
        ferry,
        seconds,
        rate,
        initial_rows,
        &mut report,
    )
    .await?;
    report.tables.push(lag_table(&outcome, initial_rows));
    record_results(&mut report, &outcome, snap.at_s);
    drop(src);
    drop(dst);
    let path = report.finish(&ctx.results_dir, &ctx.monitor)?;
    if !outcome.equal {
        bail!("sink != source after the lag run");
    }
    Ok(path)
}

/// What the writing phase measured, for the report.
struct Outcome {
    churn: ChurnStats,
    during_stats: LagStats,
    all_stats: LagStats,
    lag_source: &'static str,
    samples: Vec<Sample>,
    /// Windows completed while the writer ran, and their sorted `took_ms`.
    writing_windows: usize,
    took: Vec<f64>,
    caught_up_s: f64,
    verified_after_s: f64,
    equal: bool,
    attempts: u32,
    expected: Fingerprint,
    sink_fp: Fingerprint,
    /// CPU seconds (ferry, source tablet servers, sink tablet servers) when
    /// the writer started and when it stopped.
    cpu0: (f64, f64, f64),
    cpu1: (f64, f64, f64),
    gen_cpu: f64,
    usage: Usage,
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

fn cpu_now(ferry: &Ferry, src: &Cluster, dst: &Cluster) -> (f64, f64, f64) {
    (
        ferry.cpu_s(),
        cpu_seconds_of(&src.tserver_pids()),
        cpu_seconds_of(&dst.tserver_pids()),
    )
}

/// Runs the paced writer while sampling lag, waits until ferry covers the
/// last write, proves sink == source, and stops ferry.
#[allow(clippy::too_many_arguments)]
async fn write_and_measure(
    src: &Cluster,
    dst: &Cluster,
    (sc, dc): (&KuduClient, &KuduClient),
    ferry: Ferry,
    seconds: u64,
    rate: f64,
    initial_rows: u64,
    report: &mut Report,
) -> Result<Outcome> {
    let sampler = Sampler::start(ferry.progress(), Instant::now());
    println!("  writing {rate} rows/s for {seconds} s ...");
    let windows_before = ferry.windows().len();
    let cpu0 = cpu_now(&ferry, src, dst);
    let marks = src.log_marks();
    let churn = write_churn(src, rate, seconds, initial_rows).await?;
    sampler.writing.store(false, Ordering::Relaxed);
    let stopped_at = ferry.elapsed_s();
    let cpu1 = cpu_now(&ferry, src, dst);
    let (_, gen_cpu) = src.codegen_since(&marks);
    report.command(format!(
        "# ferry-bench writer (in process): kudu-client, 1 AUTO_FLUSH_BACKGROUND session, {rate} ops/s for {seconds} s: {MIX_INSERT}% INSERT of new keys, {MIX_UPDATE}% UPDATE_IGNORE (all columns), {MIX_DELETE}% DELETE_IGNORE of random existing keys"
    ));
    println!(
        "  writer done: {:.0} ops/s achieved ({} inserts, {} updates, {} deletes)",
        churn.achieved_rows_per_s, churn.inserts, churn.updates, churn.deletes
    );

    let caught = wait_caught_up(&ferry, churn.last_write_ht).await?;
    let caught_up_s = caught.at_s - stopped_at;
    println!("  ferry caught up {caught_up_s:.2} s after the writer stopped; comparing tables ...");
    let (equal, attempts, expected, sink_fp) = verify_sink(sc, dc, churn.last_write_ht).await?;
    let verified_after_s = ferry.elapsed_s() - stopped_at;
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
    let writing_windows: Vec<&WindowDone> = windows_all[windows_before..]
        .iter()
        .filter(|w| w.at_s <= stopped_at)
        .collect();
    let mut took: Vec<f64> = writing_windows.iter().map(|w| w.took_ms as f64).collect();
    took.sort_by(|a, b| a.total_cmp(b));
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
        writing_windows: writing_windows.len(),
        took,
        caught_up_s,
        verified_after_s,
        equal,
        attempts,
        expected,
        sink_fp,
        cpu0,
        cpu1,
        gen_cpu,
        usage,
    })
}

/// The paced insert/update/delete writer, from its own client.
async fn write_churn(
    src: &Cluster,
    rate: f64,
    seconds: u64,
    initial_rows: u64,
) -> Result<ChurnStats> {
    let writer_client = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let table = writer_client.open_table(TABLE).await?;
    data::churn(
        &writer_client,
        &table,
        rate,
        Duration::from_secs(seconds),
        initial_rows as i64,
        42,
    )
    .await
}

/// Caught up: the first completed window that ends after the last write.
async fn wait_caught_up(ferry: &Ferry, last_write_ht: u64) -> Result<WindowDone> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(w) = ferry
            .windows()
            .into_iter()
            .find(|w| w.end_ht > last_write_ht)
        {
            return Ok(w);
        }
        if Instant::now() > deadline {
            bail!(
                "ferry did not catch up within 120 s of the writer stopping (log {})",
                ferry.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Proves the sink equals the source as of the last write, retrying for up to
/// 60 s: (equal, attempts, source fingerprint, sink fingerprint).
async fn verify_sink(
    sc: &KuduClient,
    dc: &KuduClient,
    last_write_ht: u64,
) -> Result<(bool, u32, Fingerprint, Fingerprint)> {
    let verify_started = Instant::now();
    let expected = data::fingerprint(
        sc,
        TABLE,
        Some(HybridTime::from_raw(last_write_ht + 1)),
        false,
    )
    .await?;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let fp = data::fingerprint(dc, TABLE, None, false).await?;
        if fp == expected || verify_started.elapsed() > Duration::from_secs(60) {
            return Ok((fp == expected, attempts, expected, fp));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The report's table.
fn lag_table(o: &Outcome, initial_rows: u64) -> Table {
    let writer_s = o.churn.seconds;
    let mut t = Table::new(
        &format!(
            "lag: {:.0} ops/s for {writer_s:.0} s on a {initial_rows}-row table, job.discoveryIntervalSeconds=1 (lag read from ferry's {})",
            o.churn.achieved_rows_per_s, o.lag_source
        ),
        &["measure", "value"],
    );
    let (during, took) = (&o.during_stats, &o.took);
    t.row(vec!["lag p50 while writing (ms)".into(), f0(during.p50_ms)]);
    t.row(vec!["lag p99 while writing (ms)".into(), f0(during.p99_ms)]);
    t.row(vec!["lag max while writing (ms)".into(), f0(during.max_ms)]);
    t.row(vec![
        "samples (every 100 ms)".into(),
        f0(during.samples as f64),
    ]);
    t.row(vec![
        "windows completed while writing".into(),
        f0(o.writing_windows as f64),
    ]);
    t.row(vec![
        "window took_ms p50 / p99 / max".into(),
        format!(
            "{} / {} / {}",
            f0(percentile(took, 50.0)),
            f0(percentile(took, 99.0)),
            f0(took.last().copied().unwrap_or(f64::NAN))
        ),
    ]);
    t.row(vec![
        "sink covers the last write after (s)".into(),
        f2(o.caught_up_s),
    ]);
    t.row(vec![
        "sink == source verified after (s)".into(),
        format!(
            "{} ({})",
            f1(o.verified_after_s),
            if o.equal { "equal" } else { "NOT EQUAL" }
        ),
    ]);
    let (cpu0, cpu1) = (o.cpu0, o.cpu1);
    t.row(vec![
        "ferry CPU while writing (cores)".into(),
        f2((cpu1.0 - cpu0.0) / writer_s),
    ]);
    t.row(vec![
        "source tablet servers CPU while writing (cores)".into(),
        f2((cpu1.1 - cpu0.1) / writer_s),
    ]);
    t.row(vec![
        "  of which LLVM codegen for diff scans (cores)".into(),
        f2(o.gen_cpu / writer_s),
    ]);
    t.row(vec![
        "sink tablet servers CPU while writing (cores)".into(),
        f2((cpu1.2 - cpu0.2) / writer_s),
    ]);
    t.row(vec![
        "ferry peak RSS (MiB)".into(),
        f0(o.usage.peak_rss_mib),
    ]);
    t
}

/// The report's JSON results and notes.
fn record_results(report: &mut Report, o: &Outcome, snapshot_s: f64) {
    let writer_s = o.churn.seconds;
    let (cpu0, cpu1, gen_cpu, took) = (o.cpu0, o.cpu1, o.gen_cpu, &o.took);
    report.result("lag_while_writing", &o.during_stats);
    report.result("lag_all_samples", &o.all_stats);
    report.result("lag_source", o.lag_source);
    report.result("writer", &o.churn);
    report.result("snapshot_s", snapshot_s);
    report.result("caught_up_after_writer_stop_s", o.caught_up_s);
    report.result(
        "verification",
        json!({"equal": o.equal, "attempts": o.attempts, "verified_after_writer_stop_s": o.verified_after_s,
               "source": o.expected, "sink": o.sink_fp}),
    );
    report.result(
        "windows_while_writing",
        json!({"count": o.writing_windows, "took_ms_p50": percentile(took, 50.0),
               "took_ms_p99": percentile(took, 99.0), "took_ms_max": took.last()}),
    );
    report.result(
        "cpu_cores_while_writing",
        json!({"ferry": (cpu1.0 - cpu0.0) / writer_s, "source_tservers": (cpu1.1 - cpu0.1) / writer_s,
               "source_tservers_codegen": gen_cpu / writer_s,
               "sink_tservers": (cpu1.2 - cpu0.2) / writer_s}),
    );
    report.result("ferry_usage", o.usage);
    report.result("samples", &o.samples);
    report.note("lag = wall clock now − lastEndTimestamp (the end of the last window ferry completed); both clusters and ferry share this machine's clock.");
    report.note("Source tablet server CPU includes the writer's own load and, per window and tablet, an LLVM compile Kudu 1.17 does for every diff scan (see idle-cycle).");
    report.note("'sink covers the last write' = time from the writer's last acknowledged write until ferry logs a completed window whose end is after that write's hybrid time; the fingerprint comparison that follows proves the sink equals the source as of that write.");
    if !o.equal {
        report.note(
            "THE SINK DID NOT EQUAL THE SOURCE after 60 s: see the ferry log in the work folder.",
        );
    }
}
