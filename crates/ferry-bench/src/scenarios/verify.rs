//! `verify`: how fast `ferry verify` proves two equal tables equal,
//! against reading both tables with Kudu's own tools.
//!
//! A source table of `--rows` rows is loaded and flushed, copied to the
//! sink cluster with `kudu table copy` (same table name) and flushed; the
//! copy is checked with ferry-bench's own fingerprint. Then, `--repeat`
//! rounds in rotating order, each timed from process start to exit with
//! its CPU time and peak RSS:
//!
//! (a) `kudu table scan` of the source and of the sink table, both at once,
//! (b) `kudu cluster ksck -checksum_scan` of both tables, both at once
//!     (its default concurrency: 4 scans per tablet server),
//! (c) `ferry verify --method server` (the tablet servers' Checksum RPC),
//! (d) `ferry verify --method client` (rows streamed and checksummed by ferry).
//!
//! The goal is (c) and (d) at least as fast as (a): verify reads
//! each table once. Rows/s count the rows of one table per second.

use super::{prepare_source, settle, Ctx};
use crate::data;
use crate::kudu::{kudu_measured, Cluster, KuduRun};
use crate::procs::{cpu_seconds_of, Proc, Usage};
use crate::report::{f0, f1, f2, Report, Table};
use anyhow::{bail, Context, Result};
use kudu_client::{HybridTime, KuduClient};
use serde::Serialize;
use serde_json::json;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

pub const TABLE: &str = "bench";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    VerifyServer,
    VerifyClient,
    TableScan,
    Ksck,
}

impl Method {
    const ALL: [Method; 4] = [
        Method::TableScan,
        Method::Ksck,
        Method::VerifyServer,
        Method::VerifyClient,
    ];

    fn name(self) -> &'static str {
        match self {
            Method::VerifyServer => "ferry verify --method server",
            Method::VerifyClient => "ferry verify --method client",
            Method::TableScan => "kudu table scan (both tables at once)",
            Method::Ksck => "kudu cluster ksck -checksum_scan (both at once)",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Method::VerifyServer => "verify_server",
            Method::VerifyClient => "verify_client",
            Method::TableScan => "table_scan",
            Method::Ksck => "ksck_checksum",
        }
    }
}

/// One run of one method.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyRun {
    pub method: String,
    pub round: usize,
    /// Rows of one table.
    pub rows: u64,
    /// From process start until the (last) process exited.
    pub wall_s: f64,
    pub rows_per_s: f64,
    /// CPU and peak RSS of the tool (summed / max over its processes).
    pub tool_cpu_s: f64,
    pub peak_rss_mib: f64,
    pub source_tservers_cpu_s: f64,
    pub sink_tservers_cpu_s: f64,
    /// What the tool said: ferry's `equal` and `rows_compared`, the scans'
    /// row counts.
    pub outcome: String,
    pub commands: Vec<String>,
}

/// The median run (by wall time) of one method, plus all of them.
#[derive(Debug, Clone, Serialize)]
pub struct MethodSummary {
    pub median: VerifyRun,
    pub wall_s_runs: Vec<f64>,
    pub runs: Vec<VerifyRun>,
}

fn summarize(runs: Vec<VerifyRun>) -> Result<MethodSummary> {
    let mut sorted = runs.clone();
    sorted.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    // Upper median for an even count: never flatters.
    let median = sorted
        .get(sorted.len() / 2)
        .cloned()
        .context("a method without runs")?;
    Ok(MethodSummary {
        median,
        wall_s_runs: runs.iter().map(|r| r.wall_s).collect(),
        runs,
    })
}

/// Runs one `kudu` tool command against the source and the sink cluster at
/// the same time (outputs `<label>-source.stdout` / `<label>-sink.stdout`).
async fn kudu_on_both(
    e: &Env<'_>,
    label: &str,
    args: impl Fn(&Cluster) -> Vec<String>,
) -> Result<(KuduRun, KuduRun)> {
    let run = |c: &Cluster, side: &str| {
        let args = args(c);
        let label = format!("{label}-{side}");
        async move {
            kudu_measured(
                &args,
                e.work,
                &label,
                &e.ctx.monitor,
                Duration::from_secs(3600),
            )
            .await
        }
    };
    tokio::try_join!(run(e.src, "source"), run(e.dst, "sink"))
}

struct Env<'a> {
    ctx: &'a Ctx,
    src: &'a Cluster,
    dst: &'a Cluster,
    rows: u64,
    threads: usize,
    work: &'a Path,
    source_time: HybridTime,
    sink_time: HybridTime,
}

pub async fn run(ctx: &Ctx, rows: u64, threads: usize, repeat: usize) -> Result<PathBuf> {
    let mut report = ctx.report(
        "verify",
        json!({"rows": rows, "threads": threads, "repeat": repeat, "tablets": data::TABLETS,
               "tservers_per_cluster": ctx.tservers, "replicas": 1}),
    )?;
    let work = report.work_dir.clone();
    let (src, dst) = ctx.clusters("verify", &mut report).await?;
    let sc = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let dc = KuduClient::new(&dst.masters.split(',').collect::<Vec<_>>())?;
    let quiet: Vec<u32> = src.pids().into_iter().chain(dst.pids()).collect();
    let prepared = prepare_source(&src, &sc, TABLE, rows, &mut report, &quiet).await?;
    report.result("source", &prepared);
    copy_to_sink(&src, &dst, threads, &work, ctx, &mut report).await?;
    let source_time = sc.server_clock().await?;
    let sink_time = dc.server_clock().await?;
    let (a, b) = tokio::try_join!(
        data::fingerprint(&sc, TABLE, Some(source_time), false),
        data::fingerprint(&dc, TABLE, Some(sink_time), false),
    )?;
    if a != b || a.rows != rows {
        bail!("the sink copy is not the source: {a:?} vs {b:?} (expected {rows} rows)");
    }
    report.result("fingerprint", a);
    let env = Env {
        ctx,
        src: &src,
        dst: &dst,
        rows,
        threads,
        work: &work,
        source_time,
        sink_time,
    };
    let mut runs: Vec<Vec<VerifyRun>> = vec![Vec::new(); Method::ALL.len()];
    for round in 0..repeat {
        for k in 0..Method::ALL.len() {
            let i = (k + round) % Method::ALL.len();
            let m = Method::ALL[i];
            let s = settle(&quiet, Duration::from_secs(120)).await;
            println!(
                "  round {}/{repeat}: {} (clusters quiet after {:.0} s) ...",
                round + 1,
                m.name(),
                s.waited_s
            );
            let r = run_method(&env, m, round).await?;
            if round == 0 {
                for c in &r.commands {
                    report.command(c.clone());
                }
            }
            println!(
                "      {:.1} s, {:.0} rows/s, CPU {:.1} s, peak RSS {:.0} MiB: {}",
                r.wall_s, r.rows_per_s, r.tool_cpu_s, r.peak_rss_mib, r.outcome
            );
            runs[i].push(r);
        }
    }
    let summaries = runs
        .into_iter()
        .map(summarize)
        .collect::<Result<Vec<_>>>()?;
    record(&env, repeat, &summaries, &mut report);
    drop(src);
    drop(dst);
    report.finish(&ctx.results_dir, &ctx.monitor)
}

/// Creates the sink table and fills it with `kudu table copy`, then
/// flushes it, so both sides are read from disk.
async fn copy_to_sink(
    src: &Cluster,
    dst: &Cluster,
    threads: usize,
    work: &Path,
    ctx: &Ctx,
    report: &mut Report,
) -> Result<()> {
    report.command(data::create_table(&dst.masters, TABLE).await?);
    let args: Vec<String> = vec![
        "table".into(),
        "copy".into(),
        src.masters.clone(),
        TABLE.into(),
        dst.masters.clone(),
        format!("-dst_table={TABLE}"),
        "-create_table=false".into(),
        format!("-num_threads={threads}"),
        "-write_type=upsert_ignore".into(),
    ];
    println!("  copying {TABLE} to the sink cluster (kudu table copy) ...");
    let run = kudu_measured(
        &args,
        work,
        "table-copy",
        &ctx.monitor,
        Duration::from_secs(3600),
    )
    .await?;
    report.command(run.command);
    let flush_s = dst.flush_table(TABLE, Duration::from_secs(300)).await?;
    println!(
        "  copied in {:.1} s, sink flushed in {flush_s:.1} s",
        run.usage.wall_s
    );
    Ok(())
}

/// Counters read before a run.
struct Before {
    src_cpu: f64,
    dst_cpu: f64,
}

async fn run_method(e: &Env<'_>, m: Method, round: usize) -> Result<VerifyRun> {
    let before = Before {
        src_cpu: cpu_seconds_of(&e.src.tserver_pids()),
        dst_cpu: cpu_seconds_of(&e.dst.tserver_pids()),
    };
    let label = format!("{}-{round}", m.tag());
    let (usages, outcome, commands) = match m {
        Method::VerifyServer | Method::VerifyClient => {
            let method = if m == Method::VerifyServer {
                "server"
            } else {
                "client"
            };
            let (usage, outcome, command) = ferry_verify(e, method, &label).await?;
            (vec![usage], outcome, vec![command])
        }
        Method::TableScan => {
            let (a, b) = kudu_on_both(e, &label, |c| {
                vec![
                    "table".into(),
                    "scan".into(),
                    c.masters.clone(),
                    TABLE.into(),
                    format!("-num_threads={}", e.threads),
                ]
            })
            .await?;
            let counts = [total_count(&a), total_count(&b)];
            for (run, count) in [(&a, counts[0]), (&b, counts[1])] {
                if count != Some(e.rows) {
                    bail!(
                        "{} counted {count:?} rows, expected {}",
                        run.command,
                        e.rows
                    );
                }
            }
            // The row output is only a cost of the scan; drop it.
            for side in ["source", "sink"] {
                let _ = std::fs::remove_file(e.work.join(format!("{label}-{side}.stdout")));
            }
            (
                vec![a.usage, b.usage],
                format!("{} + {} rows", e.rows, e.rows),
                vec![a.command, b.command],
            )
        }
        Method::Ksck => {
            let (a, b) = kudu_on_both(e, &label, |c| {
                vec![
                    "cluster".into(),
                    "ksck".into(),
                    c.masters.clone(),
                    "-checksum_scan".into(),
                    format!("-tables={TABLE}"),
                ]
            })
            .await?;
            (
                vec![a.usage, b.usage],
                "checksums computed (one replica each: nothing to compare)".into(),
                vec![a.command, b.command],
            )
        }
    };
    let wall_s = usages.iter().map(|u| u.wall_s).fold(0.0, f64::max);
    Ok(VerifyRun {
        method: m.name().into(),
        round,
        rows: e.rows,
        wall_s,
        rows_per_s: e.rows as f64 / wall_s.max(1e-9),
        tool_cpu_s: usages.iter().map(Usage::cpu_s).sum(),
        peak_rss_mib: usages.iter().map(|u| u.peak_rss_mib).fold(0.0, f64::max),
        source_tservers_cpu_s: cpu_seconds_of(&e.src.tserver_pids()) - before.src_cpu,
        sink_tservers_cpu_s: cpu_seconds_of(&e.dst.tserver_pids()) - before.dst_cpu,
        outcome,
        commands,
    })
}

/// `Total count N cost S seconds` of `kudu table scan`.
fn total_count(run: &KuduRun) -> Option<u64> {
    run.stdout
        .lines()
        .chain(run.stderr.lines())
        .find_map(|l| l.split_once("Total count ").map(|(_, r)| r.to_string()))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
}

/// Runs `ferry verify --json` between the two tables at the fixed times;
/// fails unless it exits 0 and says equal with every row compared.
async fn ferry_verify(e: &Env<'_>, method: &str, label: &str) -> Result<(Usage, String, String)> {
    let mut args: Vec<String> = vec![
        "verify".into(),
        "--source-time".into(),
        e.source_time.raw().to_string(),
        "--sink-time".into(),
        e.sink_time.raw().to_string(),
        "--method".into(),
        method.into(),
        "-p".into(),
        e.threads.to_string(),
        "--json".into(),
        "--job.sourceMasterAddresses".into(),
        e.src.masters.clone(),
        "--job.sinkMasterAddresses".into(),
        e.dst.masters.clone(),
        "--job.tableName".into(),
        TABLE.into(),
        "--job.checkpointsDirectory".into(),
        e.work.join("checkpoints").to_string_lossy().into_owned(),
    ];
    args.extend(e.ctx.ferry_args.iter().cloned());
    let out_path = e.work.join(format!("{label}.json"));
    let err_path = e.work.join(format!("{label}.stderr"));
    let env = [("NO_COLOR", "1".to_string())];
    let proc = Proc::spawn(
        e.ctx.ferry_bin.as_os_str(),
        &args,
        &env,
        Stdio::from(File::create(&out_path)?),
        Stdio::from(File::create(&err_path)?),
        None,
    )?;
    e.ctx.monitor.track([proc.pid]);
    let command = proc.command.clone();
    let usage = proc.wait_or_kill(Duration::from_secs(3600)).await?;
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    if usage.exit != 0 {
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        bail!(
            "{command} exited with {} after {:.1} s: {}{}",
            usage.exit,
            usage.wall_s,
            crate::kudu::tail(&stdout, 8),
            crate::kudu::tail(&stderr, 8)
        );
    }
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .with_context(|| format!("{command}: --json output is not JSON"))?;
    let equal = report["equal"].as_bool();
    let compared = report["rowsCompared"].as_u64();
    if equal != Some(true) || compared != Some(e.rows) {
        bail!(
            "{command}: expected equal with {} rows compared, got equal={equal:?} rowsCompared={compared:?}",
            e.rows
        );
    }
    Ok((
        usage,
        format!(
            "equal, {} rows compared, {} ranges",
            e.rows,
            report["ranges"].as_u64().unwrap_or(0)
        ),
        command,
    ))
}

/// The report's table, ratios, JSON results and notes.
fn record(e: &Env<'_>, repeat: usize, s: &[MethodSummary], report: &mut Report) {
    let mut t = Table::new(
        &format!(
            "verify: {} rows per table, {} tablets, -p {}, {} tablet servers per cluster, median of {repeat}",
            f0(e.rows as f64),
            data::TABLETS,
            e.threads,
            e.ctx.tservers
        ),
        &["method", "wall s", "rows/s", "wall s of each run", "tool CPU s", "peak RSS MiB", "source ts CPU s", "sink ts CPU s", "outcome"],
    );
    for m in s {
        let r = &m.median;
        t.row(vec![
            r.method.clone(),
            f1(r.wall_s),
            f0(r.rows_per_s),
            m.wall_s_runs
                .iter()
                .map(|v| f1(*v))
                .collect::<Vec<_>>()
                .join(", "),
            f1(r.tool_cpu_s),
            f0(r.peak_rss_mib),
            f1(r.source_tservers_cpu_s),
            f1(r.sink_tservers_cpu_s),
            r.outcome.clone(),
        ]);
    }
    report.tables.push(t);
    let rate = |m: Method| {
        s.get(Method::ALL.iter().position(|x| *x == m).unwrap_or(0))
            .map_or(0.0, |x| x.median.rows_per_s)
    };
    let scan = rate(Method::TableScan);
    let ratios = json!({
        "verify_server_over_table_scan": rate(Method::VerifyServer) / scan,
        "verify_client_over_table_scan": rate(Method::VerifyClient) / scan,
        "verify_server_over_ksck_checksum": rate(Method::VerifyServer) / rate(Method::Ksck),
    });
    let mut r = Table::new("ratios (medians, rows/s)", &["ratio", "value"]);
    r.row(vec![
        "ferry verify (server) / kudu table scan of both".into(),
        f2(rate(Method::VerifyServer) / scan),
    ]);
    r.row(vec![
        "ferry verify (client) / kudu table scan of both".into(),
        f2(rate(Method::VerifyClient) / scan),
    ]);
    r.row(vec![
        "ferry verify (server) / kudu ksck -checksum_scan of both".into(),
        f2(rate(Method::VerifyServer) / rate(Method::Ksck)),
    ]);
    report.tables.push(r);
    report.result(
        "rows_per_s",
        json!({
            "verify_server": rate(Method::VerifyServer),
            "verify_client": rate(Method::VerifyClient),
            "table_scan": scan,
            "ksck_checksum": rate(Method::Ksck),
        }),
    );
    report.result("ratios", ratios);
    for (m, x) in Method::ALL.iter().zip(s) {
        report.result(m.tag(), x);
    }
    report.result(
        "times",
        json!({"source": e.source_time.raw(), "sink": e.sink_time.raw()}),
    );
    report.note("Both tables hold the same rows (kudu table copy, then flushed; checked with ferry-bench's fingerprint). ferry verify compares the source at --source-time with the sink at --sink-time, both taken after the copy.");
    report.note("wall s counts from process start to exit. For the two kudu tools, the source and sink runs start together and the slower one counts. rows/s = rows of one table / wall s: every method reads each table once.");
    report.note("kudu table scan prints every row (to a file here): that is part of what a plain scan costs. kudu cluster ksck -checksum_scan checksums on the tablet servers like ferry verify --method server, but each cluster on its own and without comparing them.");
    report.note("Everything (both clusters, the tool under test) shares this machine's cores: a tool that burns less CPU leaves more to the tablet servers.");
}
