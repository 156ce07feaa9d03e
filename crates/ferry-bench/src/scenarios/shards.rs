//! `shards`: one job cut into shards (`job.shards` 6), run by 1, 2 and 3
//! worker processes on this machine (issue 32). Six source tables, one of
//! them big and split by hash bucket (`job.shardTabletsOver`); every
//! worker is `ferry run` with the same keys and `high-availability.type
//! lease`, leases and checkpoints in local directories. Per worker count,
//! with a fresh job and fresh sink tables:
//!
//! 1. **snapshot**: the workers start at once; time until every shard runs
//!    on some worker with every table past its snapshot (each worker's
//!    `GET /ferry/shards`), then until the sink's row counts equal the
//!    source's;
//! 2. **steady lag**: the `lag` scenario's writer on the big table at
//!    `--rate` ops/s for `--seconds`, every running shard's lag sampled
//!    every 500 ms from its worker's `GET /ferry/shards`;
//! 3. **takeover** (2 workers or more): `kill -9` of the worker running the
//!    most shards; the survivors' `shard k: RTO: …` lines, and the time
//!    until every shard runs again with a window after the kill;
//!
//! then the sink is compared with the source (row fingerprints, every
//! table). The workers share the machine's cores with each other and with
//! both clusters: the figures show the shape and each worker's overhead,
//! not a speed-up.

mod takeover;
mod workers;

use super::Ctx;
use crate::data::{self, ChurnStats};
use crate::ferry::FerryOptions;
use crate::kudu::Cluster;
use crate::report::{f0, f1, percentile, Report, Table};
use anyhow::{bail, Result};
use kudu_client::KuduClient;
use serde::Serialize;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use takeover::TakeoverRun;
use workers::{takeovers_since, Group, ShardTakeover};

/// `job.shards`.
pub const SHARDS: u32 = 6;
/// `job.shardTabletsOver`: the big table (6 buckets) is split, the small
/// ones (2 buckets) are not.
const SPLIT_OVER: u32 = 4;
const BIG: &str = "shards_big";
const BIG_BUCKETS: u32 = 6;
const SMALL_TABLES: usize = 5;
const SMALL_BUCKETS: u32 = 2;
/// 1-second windows, as in the `lag` scenario.
const DISCOVERY_S: u64 = 1;
const CHECKPOINT_MS: u64 = 500;
const WRITER_SEED: u64 = 32;

pub struct Params {
    /// Rows of all tables together (half in the big one).
    pub rows: u64,
    pub workers: Vec<usize>,
    pub rate: f64,
    pub seconds: u64,
}

/// Steady lag over every sample of every shard.
#[derive(Debug, Clone, Serialize)]
pub struct Lag {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The highest of the shards' own p99.
    pub worst_shard_p99_ms: f64,
}

/// One worker count's figures.
#[derive(Debug, Clone, Serialize)]
pub struct WorkersRun {
    pub workers: usize,
    pub source_rows: u64,
    /// Start of the workers → every shard running, every table past its
    /// snapshot.
    pub snapshot_s: f64,
    pub snapshot_rows_per_s: f64,
    /// Start → the sink's row counts equal the source's (counted after the
    /// above, so later by the time a count takes).
    pub counts_equal_s: f64,
    /// Shards handed over while the workers joined each other.
    pub start_handovers: Vec<ShardTakeover>,
    /// CPU of all workers from their start to the end of the snapshot.
    pub snapshot_cpu_s: f64,
    /// Each worker's VmRSS at the end of the snapshot, and the highest VmHWM.
    pub snapshot_rss_mib: Vec<f64>,
    pub snapshot_peak_mib: f64,
    pub writer: ChurnStats,
    pub lag: Lag,
    /// Cores all workers used while the writer ran.
    pub steady_cores: f64,
    pub steady_rss_mib: Vec<f64>,
    pub takeover: Option<TakeoverRun>,
    pub sink_equals_source: bool,
    pub differences: Vec<String>,
}

/// What every worker count shares.
struct Env<'a> {
    ctx: &'a Ctx,
    src: Cluster,
    dst: Cluster,
    sc: KuduClient,
    dc: KuduClient,
    tables: Vec<String>,
    work: PathBuf,
}

pub async fn run(ctx: &Ctx, p: &Params) -> Result<PathBuf> {
    let mut report = ctx.report(
        "shards",
        json!({"rows": p.rows, "workers": p.workers, "rate_ops_per_s": p.rate,
               "seconds": p.seconds, "shards": SHARDS, "shard_tablets_over": SPLIT_OVER,
               "tables": 1 + SMALL_TABLES, "big_table_buckets": BIG_BUCKETS,
               "small_table_buckets": SMALL_BUCKETS, "parallelism_per_shard": 1,
               "discovery_interval_s": DISCOVERY_S, "checkpointing_interval_ms": CHECKPOINT_MS,
               "lease": "defaults (5 s, renew 1 s), local directory",
               "lag_sample_interval_ms": 500, "tservers_per_cluster": ctx.tservers}),
    )?;
    let (src, dst) = ctx.clusters("shards", &mut report).await?;
    let client = |c: &Cluster| KuduClient::new(&c.masters.split(',').collect::<Vec<_>>());
    let env = Env {
        ctx,
        sc: client(&src)?,
        dc: client(&dst)?,
        src,
        dst,
        tables: table_names(),
        work: report.work_dir.clone(),
    };
    let mut next_id = load_tables(&env, p.rows, &mut report).await?;
    let mut runs = Vec::new();
    for &w in &p.workers {
        println!("  -- {w} worker(s) --");
        let (r, next) = measure(&env, w, p, next_id, &mut report).await?;
        next_id = next;
        runs.push(r);
    }
    let table = figures(&runs, p);
    println!("{}", table.render());
    report.tables.push(table);
    report.result("runs", &runs);
    report.note("Every worker is `ferry run` with the same keys; a worker's GET /ferry/shards shows state and lag of the shards it runs itself, so the bench asks every live worker. Lag = now − the shard's last window end (what the worker reports). RTO lines are ferry's own figure, counted from the last renewal of the previous holder the new holder saw; after_kill_ms is the bench's, from the kill to the line being read. CPU from /proc/<pid>/stat of the workers; RSS from /proc/<pid>/status.");
    drop(env);
    report.finish(&ctx.results_dir, &ctx.monitor)
}

fn table_names() -> Vec<String> {
    std::iter::once(BIG.to_string())
        .chain((1..=SMALL_TABLES).map(|i| format!("shards_t{i}")))
        .collect()
}

/// Creates and loads the source tables (half the rows in the big one);
/// returns the big table's next key.
async fn load_tables(env: &Env<'_>, rows: u64, report: &mut Report) -> Result<i64> {
    let big_rows = rows / 2;
    let small_rows = (rows - big_rows) / SMALL_TABLES as u64;
    for (i, name) in env.tables.iter().enumerate() {
        let (buckets, n) = if i == 0 {
            (BIG_BUCKETS, big_rows)
        } else {
            (SMALL_BUCKETS, small_rows)
        };
        report.command(data::create_table_with(&env.src.masters, name, buckets).await?);
        let t = env.sc.open_table(name).await?;
        let load = data::load(&env.sc, &t, 0, n as i64, 4).await?;
        println!(
            "  {name}: {n} rows, {buckets} tablets (loaded at {:.0} rows/s)",
            load.rows_per_s
        );
    }
    report.command(format!("# ferry-bench loader (in process): kudu-client, 4 AUTO_FLUSH_BACKGROUND sessions per table; {BIG}: ids 0..{big_rows}; shards_t1..t{SMALL_TABLES}: ids 0..{small_rows} each"));
    Ok(big_rows as i64)
}

async fn flush_and_settle(env: &Env<'_>) -> Result<()> {
    for name in &env.tables {
        env.src.flush_table(name, Duration::from_secs(300)).await?;
    }
    let mut pids = env.src.pids();
    pids.extend(env.dst.pids());
    let s = super::settle(&pids, Duration::from_secs(120)).await;
    println!(
        "  source flushed; daemons quiet after {:.0} s{}",
        s.waited_s,
        if s.quiet { "" } else { " (gave up waiting)" }
    );
    Ok(())
}

/// The `ferry run` of each of `w` workers of a fresh job.
fn worker_options(env: &Env<'_>, w: usize) -> Vec<FerryOptions> {
    let label = format!("w{w}");
    let ha = env.work.join(format!("ha-{label}"));
    (0..w)
        .map(|i| {
            let mut o = env
                .ctx
                .ferry_options(&env.src, &env.dst, BIG, &env.work, &label);
            o.log = env.work.join(format!("ferry-{label}-{i}.log"));
            o.parallelism = Some(1);
            o.discovery_s = Some(DISCOVERY_S);
            o.checkpointing_ms = Some(CHECKPOINT_MS);
            o.extra.extend(
                [
                    "--job.tablePattern",
                    "shards_(big|t[0-9])",
                    "--job.createTable",
                    "true",
                    "--job.shards",
                    &SHARDS.to_string(),
                    "--job.shardTabletsOver",
                    &SPLIT_OVER.to_string(),
                    "--high-availability.type",
                    "lease",
                    "--high-availability.storageDir",
                    &ha.to_string_lossy(),
                    "--high-availability.cluster-id",
                    &format!("shardbench-{label}"),
                ]
                .map(String::from),
            );
            o
        })
        .collect()
}

/// Rows of each table (key-only scans).
async fn counts(client: &KuduClient, tables: &[String]) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for t in tables {
        out.push(data::fingerprint(client, t, None, true).await?.rows);
    }
    Ok(out)
}

/// Waits until the sink's row counts equal `expected`.
async fn wait_counts(env: &Env<'_>, expected: &[u64], within: Duration) -> Result<Instant> {
    let deadline = Instant::now() + within;
    loop {
        let got = counts(&env.dc, &env.tables).await;
        if got.as_ref().is_ok_and(|g| g == expected) {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!("sink rows {got:?}, source rows {expected:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One worker count on a fresh job and fresh sink tables; returns the big
/// table's next key.
async fn measure(
    env: &Env<'_>,
    w: usize,
    p: &Params,
    next_id: i64,
    report: &mut Report,
) -> Result<(WorkersRun, i64)> {
    // As a long-lived table would be; the previous run's writes too.
    flush_and_settle(env).await?;
    let source = counts(&env.sc, &env.tables).await?;
    let source_rows: u64 = source.iter().sum();
    let mut group = Group::start(worker_options(env, w), SHARDS, &env.ctx.monitor)?;
    for c in group.commands() {
        report.command(c);
    }
    let snap = snapshot(env, &group, &source).await?;
    println!(
        "    snapshot of {source_rows} rows: {:.1} s ({:.0} rows/s), sink counts equal after {:.1} s; {} hand-over(s) as the workers joined",
        snap.0, source_rows as f64 / snap.0, snap.1, snap.2.len()
    );
    let (cpu_snap, (rss_snap, peak_snap)) = (group.cpu_s(), group.memory());
    // The joins' hand-overs are done; the steady state begins.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (writer, lag, steady_cores, steady_rss) = steady(env, &group, p, next_id).await?;
    println!(
        "    steady at {:.0} ops/s: lag p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; ferry {:.2} cores, RSS {:?} MiB",
        writer.achieved_rows_per_s, lag.p50_ms, lag.p99_ms, lag.max_ms, steady_cores, steady_rss
    );
    let takeover = if w >= 2 {
        let t = takeover::kill_one(&mut group, &env.tables).await?;
        println!(
            "    every shard running again {:.1} s after the kill; {}",
            t.all_running_s,
            t.takeovers
                .iter()
                .map(|x| format!("shard {} {} {} ms", x.shard, x.kind, x.rto_ms))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Some(t)
    } else {
        None
    };
    let write_ms = (writer.last_write_ht >> 12) / 1000;
    group
        .wait_caught_up(&env.tables, write_ms, Duration::from_secs(180))
        .await?;
    group.kill_all().await;
    let differences = compare(env).await?;
    println!("    sink == source: {}", differences.is_empty());
    for t in &env.tables {
        data::drop_table(&env.dst.masters, t).await?;
    }
    let next = writer.next_id;
    let r = WorkersRun {
        workers: w,
        source_rows,
        snapshot_s: snap.0,
        snapshot_rows_per_s: source_rows as f64 / snap.0,
        counts_equal_s: snap.1,
        start_handovers: snap.2,
        snapshot_cpu_s: cpu_snap,
        snapshot_rss_mib: rss_snap,
        snapshot_peak_mib: peak_snap,
        writer,
        lag,
        steady_cores,
        steady_rss_mib: steady_rss,
        takeover,
        sink_equals_source: differences.is_empty(),
        differences,
    };
    Ok((r, next))
}

/// Seconds until every snapshot is done and until the sink's counts are
/// the source's; the hand-overs meanwhile.
async fn snapshot(
    env: &Env<'_>,
    group: &Group,
    source: &[u64],
) -> Result<(f64, f64, Vec<ShardTakeover>)> {
    let done = group
        .wait_snapshots(&env.tables, Duration::from_secs(900))
        .await?;
    let equal = wait_counts(env, source, Duration::from_secs(120)).await?;
    let since = |t: Instant| t.saturating_duration_since(group.started).as_secs_f64();
    let handovers = takeovers_since(&group.rto_lines(), group.started, None);
    Ok((since(done), since(equal), handovers))
}

/// The writer on the big table for `p.seconds` with the lag sampled
/// meanwhile; the writer's figures, the lag, the workers' cores and RSS.
async fn steady(
    env: &Env<'_>,
    group: &Group,
    p: &Params,
    next_id: i64,
) -> Result<(ChurnStats, Lag, f64, Vec<f64>)> {
    let table = env.sc.open_table(BIG).await?;
    let (c0, t0) = (group.cpu_s(), Instant::now());
    let sampler = group.sample_lag();
    let writer = data::churn(
        &env.sc,
        &table,
        data::Pace::steady(p.rate),
        Duration::from_secs(p.seconds),
        next_id,
        WRITER_SEED,
    )
    .await;
    let samples = sampler.finish().await;
    let cores = (group.cpu_s() - c0) / t0.elapsed().as_secs_f64();
    let rss = group.memory().0;
    Ok((writer?, lag_of(&samples), cores, rss))
}

fn lag_of(samples: &[(u32, u64)]) -> Lag {
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    let all = sorted(samples.iter().map(|s| s.1 as f64).collect());
    let worst = (0..SHARDS)
        .map(|k| {
            let v = sorted(
                samples
                    .iter()
                    .filter(|s| s.0 == k)
                    .map(|s| s.1 as f64)
                    .collect(),
            );
            percentile(&v, 99.0)
        })
        .filter(|v| v.is_finite())
        .fold(f64::NAN, f64::max);
    Lag {
        samples: all.len(),
        p50_ms: percentile(&all, 50.0),
        p99_ms: percentile(&all, 99.0),
        max_ms: all.last().copied().unwrap_or(f64::NAN),
        worst_shard_p99_ms: worst,
    }
}

/// Tables whose sink rows differ from the source's (cell fingerprints).
async fn compare(env: &Env<'_>) -> Result<Vec<String>> {
    let mut differences = Vec::new();
    for t in &env.tables {
        let a = data::fingerprint(&env.sc, t, None, false).await?;
        let b = data::fingerprint(&env.dc, t, None, false).await?;
        if a != b {
            differences.push(format!("{t}: source {a:?}, sink {b:?}"));
        }
    }
    Ok(differences)
}

/// The report's table: one column per worker count.
fn figures(runs: &[WorkersRun], p: &Params) -> Table {
    let mut t = Table::new(
        &format!(
            "shards: one job of {SHARDS} shards on 1..3 workers (all on this machine's cores), writer {} ops/s for {} s",
            p.rate, p.seconds
        ),
        &["measure"],
    );
    t.header = std::iter::once("measure".to_string())
        .chain(runs.iter().map(|r| format!("{} worker(s)", r.workers)))
        .collect();
    let row = |name: &str, f: &dyn Fn(&WorkersRun) -> String| {
        std::iter::once(name.to_string())
            .chain(runs.iter().map(f))
            .collect::<Vec<_>>()
    };
    t.row(row("source rows", &|r| f0(r.source_rows as f64)));
    t.row(row("snapshot s (start → every table done)", &|r| {
        f1(r.snapshot_s)
    }));
    t.row(row("snapshot rows/s", &|r| f0(r.snapshot_rows_per_s)));
    t.row(row("hand-overs as the workers joined", &|r| {
        r.start_handovers.len().to_string()
    }));
    t.row(row("ferry CPU s, snapshot (all workers)", &|r| {
        f1(r.snapshot_cpu_s)
    }));
    t.row(row("ferry RSS MiB at snapshot end (each worker)", &|r| {
        join(&r.snapshot_rss_mib)
    }));
    t.row(row("ferry peak RSS MiB, snapshot (highest worker)", &|r| {
        f0(r.snapshot_peak_mib)
    }));
    t.row(row("writer ops/s achieved", &|r| {
        f0(r.writer.achieved_rows_per_s)
    }));
    t.row(row("steady lag ms p50 / p99 / max", &|r| {
        format!(
            "{} / {} / {}",
            f0(r.lag.p50_ms),
            f0(r.lag.p99_ms),
            f0(r.lag.max_ms)
        )
    }));
    t.row(row("worst shard's lag p99 ms", &|r| {
        f0(r.lag.worst_shard_p99_ms)
    }));
    t.row(row("ferry cores, steady (all workers)", &|r| {
        format!("{:.2}", r.steady_cores)
    }));
    t.row(row("ferry RSS MiB, steady (each worker)", &|r| {
        join(&r.steady_rss_mib)
    }));
    takeover_rows(&mut t, runs);
    t.row(row("sink == source", &|r| {
        if r.sink_equals_source { "yes" } else { "NO" }.into()
    }));
    t
}

fn takeover_rows(t: &mut Table, runs: &[WorkersRun]) {
    let cell = |f: &dyn Fn(&TakeoverRun) -> String| -> Vec<String> {
        runs.iter()
            .map(|r| r.takeover.as_ref().map_or("-".into(), f))
            .collect()
    };
    // ferry's figure, or the bench's own (kill → the line read).
    let ms = |kind: &'static str, own: bool| {
        move |x: &TakeoverRun| {
            let v: Vec<String> = x
                .takeovers
                .iter()
                .filter(|s| s.kind == kind)
                .filter_map(|s| if own { s.after_kill_ms } else { Some(s.rto_ms) })
                .map(|ms| f0(ms as f64))
                .collect();
            if v.is_empty() {
                "-".into()
            } else {
                v.join(", ")
            }
        }
    };
    let rows: [(&str, Vec<String>); 6] = [
        (
            "kill -9: shards of the killed worker",
            cell(&|x| format!("{:?}", x.killed_shards)),
        ),
        (
            "their RTO ms as ferry prints it (lease silent)",
            cell(&ms("lease silent", false)),
        ),
        (
            "kill → their first window, ms (bench)",
            cell(&ms("lease silent", true)),
        ),
        (
            "hand-overs between survivors: RTO ms as printed",
            cell(&ms("lease released", false)),
        ),
        (
            "hand-overs: kill → first window, ms (bench)",
            cell(&ms("lease released", true)),
        ),
        (
            "kill → every shard running again, s",
            cell(&|x| f1(x.all_running_s)),
        ),
    ];
    for (name, cells) in rows {
        t.row(std::iter::once(name.to_string()).chain(cells).collect());
    }
}

fn join(v: &[f64]) -> String {
    v.iter().map(|x| f0(*x)).collect::<Vec<_>>().join(" + ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_over_every_shard() {
        let samples: Vec<(u32, u64)> = (0..100u64).map(|i| ((i % 2) as u32, i * 10)).collect();
        let l = lag_of(&samples);
        assert_eq!(l.samples, 100);
        assert_eq!(l.p50_ms, 490.0);
        assert_eq!(l.max_ms, 990.0);
        assert_eq!(l.worst_shard_p99_ms, 990.0);
        assert!(lag_of(&[]).p50_ms.is_nan());
    }
}
