//! `throttle`: one `ferry run` snapshots a loaded table under a read limit
//! (`throttle.read.snapshot.rowsPerSecond`) that `ferry throttle` changes
//! live to each of `--limits` in turn; for each, after a few seconds to
//! settle, the rows read over `--seconds` (ferry's `ferry_rows_read_total`)
//! give the measured rate, which passes within ±10 % of the limit. The
//! limit is then lifted and the rest copies at full speed.
//!
//! Meanwhile a probe writer on the source (one AUTO_FLUSH_SYNC session,
//! one row every 20 ms into a table of its own) records its latency; a
//! second, unthrottled snapshot of the same table into another sink table
//! gives the latency under an unthrottled copy to compare with.

use super::{prepare_source, settle, Ctx};
use crate::data;
use crate::ferry::{scrape_metric, Ferry};
use crate::report::{f0, f1, f2, percentile, Table};
use anyhow::{anyhow, bail, Context, Result};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::KuduClient;
use serde::Serialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TABLE: &str = "bench_throttle";
const PROBE: &str = "bench_probe";
const ROWS_READ: &str = "ferry_rows_read_total";
/// Scan batches of 512 KiB (~5 000 rows): the limit is paid batch by
/// batch, so a batch is what a 10-second measurement can be off by.
const BATCH_BYTES: &str = "524288";

/// The scenario's options.
pub struct Params {
    pub rows: u64,
    pub limits: Vec<u64>,
    pub seconds: u64,
}

/// One limit, measured.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub limit_rows_per_s: u64,
    pub measured_rows_per_s: f64,
    pub error_pct: f64,
    pub within_10_pct: bool,
    pub probe: Latency,
}

/// The probe writer's latency over a stretch (ms).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    pub writes: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// A probe writer: (when, latency ms) of each write.
struct Probe {
    samples: Arc<Mutex<Vec<(Instant, f64)>>>,
    running: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result<()>>,
}

impl Probe {
    async fn start(client: &KuduClient) -> Result<Probe> {
        let table = client.open_table(PROBE).await?;
        let mut session = client
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushSync))?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let (s, r) = (samples.clone(), running.clone());
        let task = tokio::spawn(async move {
            let mut id = 0i64;
            while r.load(Ordering::Relaxed) {
                let mut row = table.new_row();
                data::fill_row(&mut row, id, 1)?;
                let t = Instant::now();
                session.apply(Operation::upsert(&table, row)).await?;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if let Ok(mut g) = s.lock() {
                    g.push((t, ms));
                }
                id += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(())
        });
        Ok(Probe {
            samples,
            running,
            task,
        })
    }

    fn between(&self, from: Instant, to: Instant) -> Latency {
        let mut ms: Vec<f64> = self
            .samples
            .lock()
            .map(|g| {
                g.iter()
                    .filter(|(t, _)| *t >= from && *t < to)
                    .map(|s| s.1)
                    .collect()
            })
            .unwrap_or_default();
        ms.sort_by(|a, b| a.total_cmp(b));
        Latency {
            writes: ms.len(),
            p50_ms: percentile(&ms, 50.0),
            p99_ms: percentile(&ms, 99.0),
            max_ms: ms.last().copied().unwrap_or(f64::NAN),
        }
    }

    async fn stop(self) -> Result<()> {
        self.running.store(false, Ordering::Relaxed);
        self.task.await.context("probe task")?
    }
}

/// `ferry throttle -m 127.0.0.1:<port> <job> --read-snapshot-rows <limit>`.
async fn set_limit(ctx: &Ctx, rest: u16, job: &str, limit: u64) -> Result<String> {
    let out = tokio::process::Command::new(&ctx.ferry_bin)
        .args(["throttle", "-m", &format!("127.0.0.1:{rest}"), job])
        .args(["--read-snapshot-rows", &limit.to_string()])
        .output()
        .await?;
    if !out.status.success() {
        bail!(
            "ferry throttle failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(format!(
        "ferry throttle -m 127.0.0.1:{rest} {job} --read-snapshot-rows {limit}"
    ))
}

async fn rows_read(ferry: &Ferry) -> Result<f64> {
    let addr = ferry
        .metrics_addr
        .as_deref()
        .ok_or_else(|| anyhow!("this ferry serves no metrics"))?;
    scrape_metric(addr, ROWS_READ).await
}

async fn wait_job_id(ferry: &Ferry) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(id) = ferry.job_id() {
            return Ok(id);
        }
        if Instant::now() > deadline {
            bail!("ferry printed no job id within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The throttled run: each limit in turn, measured.
async fn throttled(
    ctx: &Ctx,
    p: &Params,
    o: &crate::ferry::FerryOptions,
    rest: u16,
    probe: &Probe,
    report: &mut crate::report::Report,
) -> Result<Vec<Phase>> {
    let ferry = Ferry::start(o, &ctx.monitor)?;
    report.command(ferry.command.clone());
    let job = wait_job_id(&ferry).await?;
    let mut phases = Vec::new();
    for (i, &limit) in p.limits.iter().enumerate() {
        if i > 0 {
            report.command(set_limit(ctx, rest, &job, limit).await?);
        }
        // The batches read under the previous limit are paid first.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (r0, t0) = (rows_read(&ferry).await?, Instant::now());
        tokio::time::sleep(Duration::from_secs(p.seconds)).await;
        let (r1, t1) = (rows_read(&ferry).await?, Instant::now());
        let measured = (r1 - r0) / (t1 - t0).as_secs_f64();
        let error_pct = (measured - limit as f64) / limit as f64 * 100.0;
        println!(
            "  limit {limit} rows/s: measured {measured:.0} rows/s over {:.1} s ({error_pct:+.1} %)",
            (t1 - t0).as_secs_f64()
        );
        phases.push(Phase {
            limit_rows_per_s: limit,
            measured_rows_per_s: measured,
            error_pct,
            within_10_pct: error_pct.abs() <= 10.0,
            probe: probe.between(t0, t1),
        });
    }
    report.command(set_limit(ctx, rest, &job, 0).await?);
    ferry.wait_windows(1, Duration::from_secs(600)).await?;
    ferry.stop().await?;
    Ok(phases)
}

pub async fn run(ctx: &Ctx, p: &Params) -> Result<PathBuf> {
    let needed = p.limits.iter().sum::<u64>() * (p.seconds + 3);
    if p.rows < needed + needed / 5 {
        bail!(
            "--rows {} is too few for these limits: at least {}",
            p.rows,
            needed + needed / 5
        );
    }
    let mut report = ctx.report(
        "throttle",
        json!({"rows": p.rows, "limits_rows_per_s": p.limits, "seconds": p.seconds,
               "reader.batchSizeBytes": BATCH_BYTES, "tablets": data::TABLETS,
               "tservers_per_cluster": ctx.tservers, "probe": "one AUTO_FLUSH_SYNC upsert every 20 ms into a source table of its own"}),
    )?;
    let work = report.work_dir.clone();
    let (src, dst) = ctx.clusters("throttle", &mut report).await?;
    let sc = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let quiet: Vec<u32> = src.pids().into_iter().chain(dst.pids()).collect();
    let prepared = prepare_source(&src, &sc, TABLE, p.rows, &mut report, &quiet).await?;
    report.result("source", &prepared);
    report.command(data::create_table(&src.masters, PROBE).await?);
    for t in [TABLE.to_string(), format!("{TABLE}_free")] {
        report.command(data::create_table(&dst.masters, &t).await?);
    }
    settle(&quiet, Duration::from_secs(60)).await;
    let probe = Probe::start(&sc).await?;
    let before = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;

    let rest = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut o = ctx.ferry_options(&src, &dst, TABLE, &work, "throttled");
    o.rest_port = Some(rest);
    o.extra.extend([
        "--reader.batchSizeBytes".into(),
        BATCH_BYTES.into(),
        "--throttle.read.snapshot.rowsPerSecond".into(),
        p.limits[0].to_string(),
    ]);
    let idle = probe.between(before, Instant::now());
    let phases = throttled(ctx, p, &o, rest, &probe, &mut report).await?;

    settle(&quiet, Duration::from_secs(60)).await;
    let mut free = ctx.ferry_options(&src, &dst, TABLE, &work, "unthrottled");
    free.table_suffix = Some("_free".into());
    free.extra
        .extend(["--reader.batchSizeBytes".into(), BATCH_BYTES.into()]);
    let ferry = Ferry::start(&free, &ctx.monitor)?;
    report.command(ferry.command.clone());
    let t0 = Instant::now();
    ferry.wait_windows(1, Duration::from_secs(600)).await?;
    let unthrottled = probe.between(t0, Instant::now());
    let unthrottled_s = t0.elapsed().as_secs_f64();
    ferry.stop().await?;
    probe.stop().await?;

    let dc = KuduClient::new(&dst.masters.split(',').collect::<Vec<_>>())?;
    for t in [TABLE.to_string(), format!("{TABLE}_free")] {
        data::expect_rows(&dc, &t, p.rows).await?;
    }
    tables(
        &mut report,
        &phases,
        idle,
        unthrottled,
        unthrottled_s,
        p.rows,
    );
    report.result("phases", &phases);
    report.result("probe_before_copy", idle);
    report.result("probe_unthrottled_copy", unthrottled);
    report.result("unthrottled_copy_s", unthrottled_s);
    report.note("Measured rows/s: the increase of ferry_rows_read_total over --seconds, starting 3 s after the limit was set (batches read under the previous limit are paid first). Both sink tables hold every source row afterwards (counted).");
    drop(src);
    drop(dst);
    report.finish(&ctx.results_dir, &ctx.monitor)
}

fn tables(
    report: &mut crate::report::Report,
    phases: &[Phase],
    idle: Latency,
    free: Latency,
    free_s: f64,
    rows: u64,
) {
    let mut t = Table::new(
        "throttle: read limit changed live, measured over the window",
        &[
            "limit rows/s",
            "measured rows/s",
            "error",
            "±10 %",
            "probe p50 / p99 ms",
        ],
    );
    for ph in phases {
        t.row(vec![
            f0(ph.limit_rows_per_s as f64),
            f0(ph.measured_rows_per_s),
            format!("{:+.1} %", ph.error_pct),
            if ph.within_10_pct { "pass" } else { "FAIL" }.into(),
            format!("{} / {}", f2(ph.probe.p50_ms), f2(ph.probe.p99_ms)),
        ]);
    }
    report.tables.push(t);
    let mut l = Table::new(
        "throttle: probe writer on the source (one sync upsert every 20 ms)",
        &["while", "writes", "p50 ms", "p99 ms", "max ms"],
    );
    let mut row = |name: String, x: &Latency| {
        l.row(vec![
            name,
            f0(x.writes as f64),
            f2(x.p50_ms),
            f2(x.p99_ms),
            f1(x.max_ms),
        ]);
    };
    row("no copy running".into(), &idle);
    for ph in phases {
        row(
            format!("copy limited to {} rows/s", f0(ph.limit_rows_per_s as f64)),
            &ph.probe,
        );
    }
    row(
        format!("unthrottled copy ({} rows/s)", f0(rows as f64 / free_s)),
        &free,
    );
    report.tables.push(l);
}
