//! `snapshot`: one loaded source table copied to empty sink tables three
//! ways, each timed from process start to "all rows are in the sink", with
//! its peak RSS and CPU time:
//!
//! (a) `ferry run` until it logs the snapshot window completed,
//! (b) `kudu table copy` with the same thread count and `upsert_ignore`,
//! (c) `kudu perf loadgen` inserting as many rows of the same shape into
//!     the sink: the sink's own write limit.
//!
//! The three run `--repeat` times in rotating order (so none always goes
//! first); the median of each is reported. Before every run the previous
//! sink table is dropped and the clusters are left to go quiet, so one
//! run's flushes do not slow the next.

use super::{prepare_source, settle, Ctx};
use crate::data::{self, Fingerprint};
use crate::ferry::Ferry;
use crate::kudu::{kudu_measured, Cluster, RpcCounts};
use crate::procs::cpu_seconds_of;
use crate::report::{f0, f1, f2, Report, Table};
use anyhow::{bail, Result};
use kudu_client::KuduClient;
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const TABLE: &str = "bench";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Ferry,
    TableCopy,
    Loadgen,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Ferry => "ferry run (snapshot window)",
            Method::TableCopy => "kudu table copy",
            Method::Loadgen => "kudu perf loadgen (into sink)",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Method::Ferry => "ferry",
            Method::TableCopy => "copy",
            Method::Loadgen => "loadgen",
        }
    }
}

/// One way of filling the sink, one run.
#[derive(Debug, Clone, Serialize)]
pub struct CopyRun {
    pub method: String,
    pub round: usize,
    pub rows: u64,
    /// From process start until every row is in the sink.
    pub wall_s: f64,
    pub rows_per_s: f64,
    /// The tool's own timing (ferry: window open → completed; table copy:
    /// "cost"; loadgen: "time total").
    pub tool_reported_s: Option<f64>,
    pub tool_cpu_s: f64,
    pub peak_rss_mib: f64,
    pub source_tservers_cpu_s: f64,
    pub sink_tservers_cpu_s: f64,
    /// Write RPCs the sink's tablet servers handled, and rows per RPC.
    pub sink_write_rpcs: u64,
    pub rows_per_write_rpc: f64,
    /// Scan RPCs the source's tablet servers handled.
    pub source_scan_rpcs: u64,
    /// Rows counted in the sink table afterwards.
    pub sink_rows: u64,
    /// Whether the sink's fingerprint equals the source's (None: not a copy).
    pub identical_to_source: Option<bool>,
    pub command: String,
}

/// The median run (by rows/s) of one method, plus all of them.
#[derive(Debug, Clone, Serialize)]
pub struct MethodSummary {
    pub median: CopyRun,
    pub rows_per_s_runs: Vec<f64>,
    pub runs: Vec<CopyRun>,
}

fn summarize(runs: Vec<CopyRun>) -> MethodSummary {
    let mut sorted = runs.clone();
    sorted.sort_by(|a, b| a.rows_per_s.total_cmp(&b.rows_per_s));
    // Lower median for an even count: never flatters.
    let median = sorted[(sorted.len() - 1) / 2].clone();
    MethodSummary {
        median,
        rows_per_s_runs: runs.iter().map(|r| r.rows_per_s).collect(),
        runs,
    }
}

struct Env<'a> {
    ctx: &'a Ctx,
    src: &'a Cluster,
    dst: &'a Cluster,
    dc: &'a KuduClient,
    rows: u64,
    threads: usize,
    work: &'a Path,
    source_fp: Fingerprint,
}

pub async fn run(ctx: &Ctx, rows: u64, threads: usize, repeat: usize) -> Result<PathBuf> {
    let mut report = ctx.report(
        "snapshot",
        json!({"rows": rows, "threads": threads, "repeat": repeat, "tablets": data::TABLETS,
               "tservers_per_cluster": ctx.tservers, "replicas": 1}),
    )?;
    let work = report.work_dir.clone();
    let (src, dst) = ctx.clusters("snapshot", &mut report).await?;
    let sc = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let dc = KuduClient::new(&dst.masters.split(',').collect::<Vec<_>>())?;
    let quiet: Vec<u32> = src.pids().into_iter().chain(dst.pids()).collect();
    let prepared = prepare_source(&src, &sc, TABLE, rows, &mut report, &quiet).await?;
    report.result("source", &prepared);
    let snapshot_ts = sc.server_clock().await?;
    let source_fp = data::fingerprint(&sc, TABLE, Some(snapshot_ts), false).await?;
    if source_fp.rows != rows {
        bail!("source holds {} rows, expected {rows}", source_fp.rows);
    }
    let env = Env {
        ctx,
        src: &src,
        dst: &dst,
        dc: &dc,
        rows,
        threads,
        work: &work,
        source_fp,
    };

    let runs = run_rounds(&env, repeat, &quiet, &mut report).await?;
    let [a, b, c]: [MethodSummary; 3] = runs
        .into_iter()
        .map(summarize)
        .collect::<Vec<_>>()
        .try_into()
        .map_err(|_| anyhow::anyhow!("three methods"))?;

    record_summaries(&env, repeat, [a, b, c], &mut report);
    drop(src);
    drop(dst);
    report.finish(&ctx.results_dir, &ctx.monitor)
}

/// `repeat` rounds of the three methods, in an order that rotates each round;
/// one list of runs per method.
async fn run_rounds(
    env: &Env<'_>,
    repeat: usize,
    quiet: &[u32],
    report: &mut Report,
) -> Result<Vec<Vec<CopyRun>>> {
    let methods = [Method::Ferry, Method::TableCopy, Method::Loadgen];
    let mut runs: Vec<Vec<CopyRun>> = vec![Vec::new(), Vec::new(), Vec::new()];
    for round in 0..repeat {
        for k in 0..methods.len() {
            let i = (k + round) % methods.len();
            let m = methods[i];
            let sink = format!("{TABLE}_{}_{round}", m.tag());
            report.command(data::create_table(&env.dst.masters, &sink).await?);
            let s = settle(quiet, Duration::from_secs(120)).await;
            println!(
                "  round {}/{repeat}: {} (clusters quiet after {:.0} s) ...",
                round + 1,
                m.name(),
                s.waited_s
            );
            let r = match m {
                Method::Ferry => run_ferry(env, &sink, round, report).await?,
                Method::TableCopy => run_table_copy(env, &sink, round).await?,
                Method::Loadgen => run_loadgen(env, &sink, round).await?,
            };
            if round == 0 && m != Method::Ferry {
                report.command(r.command.clone());
            }
            println!(
                "      {:.1} s, {:.0} rows/s, CPU {:.1} s, peak RSS {:.0} MiB, {:.0} rows per write RPC",
                r.wall_s, r.rows_per_s, r.tool_cpu_s, r.peak_rss_mib, r.rows_per_write_rpc
            );
            if r.identical_to_source == Some(false) {
                bail!(
                    "{}: the sink table {sink} differs from the source",
                    m.name()
                );
            }
            runs[i].push(r);
            data::drop_table(&env.dst.masters, &sink).await?;
        }
    }
    Ok(runs)
}

/// The report's tables (per method, and ratios), JSON results and notes.
fn record_summaries(
    env: &Env<'_>,
    repeat: usize,
    [a, b, c]: [MethodSummary; 3],
    report: &mut Report,
) {
    let ratio_copy = a.median.rows_per_s / b.median.rows_per_s;
    let ratio_loadgen = a.median.rows_per_s / c.median.rows_per_s;
    let mut t = Table::new(
        &format!(
            "snapshot: {} rows, {} tablets, {} threads, {} tablet servers per cluster, median of {repeat}",
            f0(env.rows as f64),
            data::TABLETS,
            env.threads,
            env.ctx.tservers
        ),
        &["method", "wall s", "rows/s", "rows/s of each run", "tool CPU s", "peak RSS MiB", "source ts CPU s", "sink ts CPU s", "rows / write RPC", "sink == source"],
    );
    for s in [&a, &b, &c] {
        let r = &s.median;
        t.row(vec![
            r.method.clone(),
            f1(r.wall_s),
            f0(r.rows_per_s),
            s.rows_per_s_runs
                .iter()
                .map(|v| f0(*v))
                .collect::<Vec<_>>()
                .join(", "),
            f1(r.tool_cpu_s),
            f0(r.peak_rss_mib),
            f1(r.source_tservers_cpu_s),
            f1(r.sink_tservers_cpu_s),
            f0(r.rows_per_write_rpc),
            match r.identical_to_source {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => "n/a".into(),
            },
        ]);
    }
    report.tables.push(t);
    let mut r = Table::new("ratios (medians)", &["ratio", "value"]);
    r.row(vec![
        "ferry / kudu table copy (rows/s)".into(),
        f2(ratio_copy),
    ]);
    r.row(vec![
        "ferry / kudu perf loadgen = sink write limit (rows/s)".into(),
        f2(ratio_loadgen),
    ]);
    r.row(vec![
        "ferry / table copy (peak RSS)".into(),
        f2(a.median.peak_rss_mib / b.median.peak_rss_mib),
    ]);
    r.row(vec![
        "ferry / table copy (client CPU s)".into(),
        f2(a.median.tool_cpu_s / b.median.tool_cpu_s),
    ]);
    report.tables.push(r);
    report.result(
        "rows_per_s",
        json!({"ferry": a.median.rows_per_s, "table_copy": b.median.rows_per_s, "loadgen": c.median.rows_per_s}),
    );
    report.result(
        "ratios",
        json!({"ferry_over_table_copy": ratio_copy, "ferry_over_loadgen": ratio_loadgen,
               "ferry_rss_over_table_copy_rss": a.median.peak_rss_mib / b.median.peak_rss_mib,
               "ferry_cpu_over_table_copy_cpu": a.median.tool_cpu_s / b.median.tool_cpu_s}),
    );
    report.result("ferry", &a);
    report.result("table_copy", &b);
    report.result("loadgen", &c);
    report.note("All runs share the same two clusters; each writes a new empty sink table, the previous one is dropped and the daemons are left to go quiet first. The order rotates every round.");
    report.note("wall s counts from process start (connecting, planning included) until every row is in the sink; for ferry that is the `window completed … snapshot=true` log line, after which ferry is stopped with SIGTERM.");
    report.note("kudu perf loadgen fills the same 8-column schema with sequential numbers and a fixed 32-byte string (-string_fixed): the cheapest rows it can make, so on a shared machine it leaves the most CPU to the sink. It reads nothing, so it bounds what any copy into this sink can reach.");
    report.note("Source data are generated by ferry-bench: random numbers and random 32-character hex strings (deterministic from the key); 'sink == source' compares a fingerprint of every cell of every row.");
    report.note("Everything (both clusters, the tool under test) shares this machine's cores: a tool that burns less CPU leaves more to the tablet servers.");
}

/// Counters read before a run.
struct Before {
    src_cpu: f64,
    dst_cpu: f64,
    src_rpc: RpcCounts,
    dst_rpc: RpcCounts,
}

async fn before(e: &Env<'_>) -> Result<Before> {
    Ok(Before {
        src_cpu: cpu_seconds_of(&e.src.tserver_pids()),
        dst_cpu: cpu_seconds_of(&e.dst.tserver_pids()),
        src_rpc: e.src.rpc_counts().await?,
        dst_rpc: e.dst.rpc_counts().await?,
    })
}

/// Fills the cluster-side fields of a run.
async fn after(e: &Env<'_>, b: &Before, r: &mut CopyRun) -> Result<()> {
    r.source_tservers_cpu_s = cpu_seconds_of(&e.src.tserver_pids()) - b.src_cpu;
    r.sink_tservers_cpu_s = cpu_seconds_of(&e.dst.tserver_pids()) - b.dst_cpu;
    let src_rpc = e.src.rpc_counts().await? - b.src_rpc;
    let dst_rpc = e.dst.rpc_counts().await? - b.dst_rpc;
    r.sink_write_rpcs = dst_rpc.write;
    r.rows_per_write_rpc = r.rows as f64 / dst_rpc.write.max(1) as f64;
    r.source_scan_rpcs = src_rpc.scan;
    Ok(())
}

fn blank(method: Method, round: usize, rows: u64) -> CopyRun {
    CopyRun {
        method: method.name().into(),
        round,
        rows,
        wall_s: 0.0,
        rows_per_s: 0.0,
        tool_reported_s: None,
        tool_cpu_s: 0.0,
        peak_rss_mib: 0.0,
        source_tservers_cpu_s: 0.0,
        sink_tservers_cpu_s: 0.0,
        sink_write_rpcs: 0,
        rows_per_write_rpc: 0.0,
        source_scan_rpcs: 0,
        sink_rows: 0,
        identical_to_source: None,
        command: String::new(),
    }
}

async fn run_ferry(
    e: &Env<'_>,
    sink_table: &str,
    round: usize,
    report: &mut Report,
) -> Result<CopyRun> {
    let mut o = e
        .ctx
        .ferry_options(e.src, e.dst, TABLE, e.work, &format!("snapshot-{round}"));
    o.table_suffix = Some(sink_table.trim_start_matches(TABLE).to_string());
    o.discovery_s = Some(600);
    o.checkpointing_ms = Some(500);
    o.parallelism = Some(e.threads);
    let b = before(e).await?;
    let ferry = Ferry::start(&o, &e.ctx.monitor)?;
    if round == 0 {
        report.command(ferry.command.clone());
    }
    let mut r = blank(Method::Ferry, round, e.rows);
    r.command = ferry.command.clone();
    let done = ferry
        .wait_windows(1, Duration::from_secs(120 + e.rows / 2_000))
        .await?;
    if !done.snapshot {
        bail!("ferry's first completed window was not the snapshot");
    }
    r.tool_cpu_s = ferry.cpu_s();
    r.wall_s = done.at_s;
    r.rows_per_s = e.rows as f64 / done.at_s;
    r.tool_reported_s = Some(done.took_ms as f64 / 1000.0);
    after(e, &b, &mut r).await?;
    let usage = ferry.stop().await?;
    r.peak_rss_mib = done.hwm_mib.unwrap_or(0.0).max(usage.peak_rss_mib);
    let fp = data::fingerprint(e.dc, sink_table, None, false).await?;
    r.sink_rows = fp.rows;
    r.identical_to_source = Some(fp == e.source_fp);
    Ok(r)
}

async fn run_table_copy(e: &Env<'_>, sink_table: &str, round: usize) -> Result<CopyRun> {
    let args: Vec<String> = vec![
        "table".into(),
        "copy".into(),
        e.src.masters.clone(),
        TABLE.into(),
        e.dst.masters.clone(),
        format!("-dst_table={sink_table}"),
        "-create_table=false".into(),
        format!("-num_threads={}", e.threads),
        "-write_type=upsert_ignore".into(),
    ];
    let b = before(e).await?;
    let run = kudu_measured(
        &args,
        e.work,
        &format!("table-copy-{round}"),
        &e.ctx.monitor,
        Duration::from_secs(600 + e.rows / 1_000),
    )
    .await?;
    let mut r = blank(Method::TableCopy, round, e.rows);
    after(e, &b, &mut r).await?;
    // "Total count N cost S seconds"
    r.tool_reported_s = run
        .stdout
        .lines()
        .chain(run.stderr.lines())
        .find_map(|l| l.split_once("Total count ").map(|(_, r)| r.to_string()))
        .and_then(|r| {
            r.split_whitespace()
                .nth(2)
                .and_then(|s| s.parse::<f64>().ok())
        });
    r.wall_s = run.usage.wall_s;
    r.rows_per_s = e.rows as f64 / run.usage.wall_s;
    r.tool_cpu_s = run.usage.cpu_s();
    r.peak_rss_mib = run.usage.peak_rss_mib;
    r.command = run.command;
    let fp = data::fingerprint(e.dc, sink_table, None, false).await?;
    r.sink_rows = fp.rows;
    r.identical_to_source = Some(fp == e.source_fp);
    Ok(r)
}

async fn run_loadgen(e: &Env<'_>, sink_table: &str, round: usize) -> Result<CopyRun> {
    let per_thread = e.rows.div_ceil(e.threads as u64);
    let total = per_thread * e.threads as u64;
    let args: Vec<String> = vec![
        "perf".into(),
        "loadgen".into(),
        e.dst.masters.clone(),
        format!("-table_name={sink_table}"),
        format!("-num_threads={}", e.threads),
        format!("-num_rows_per_thread={per_thread}"),
        format!("-string_fixed={}", "x".repeat(data::STRING_LEN)),
    ];
    let b = before(e).await?;
    let run = kudu_measured(
        &args,
        e.work,
        &format!("loadgen-{round}"),
        &e.ctx.monitor,
        Duration::from_secs(600 + e.rows / 1_000),
    )
    .await?;
    let mut r = blank(Method::Loadgen, round, total);
    after(e, &b, &mut r).await?;
    // "time total: 201.387 ms"
    r.tool_reported_s = run
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("time total:").map(str::to_string))
        .and_then(|v| v.trim().trim_end_matches("ms").trim().parse::<f64>().ok())
        .map(|ms| ms / 1000.0);
    r.wall_s = run.usage.wall_s;
    r.rows_per_s = total as f64 / run.usage.wall_s;
    r.tool_cpu_s = run.usage.cpu_s();
    r.peak_rss_mib = run.usage.peak_rss_mib;
    r.command = run.command;
    r.sink_rows = data::expect_rows(e.dc, sink_table, total).await?;
    Ok(r)
}
