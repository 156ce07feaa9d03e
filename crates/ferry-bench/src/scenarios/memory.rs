//! `memory`: peak RSS of `ferry run` while it snapshots tables of 1 M, 4 M
//! and 16 M rows (by default) with every ferry setting at its default (batch sizes,
//! parallelism). A bounded pipeline should not grow with the table. RSS is
//! sampled every 100 ms; the kernel's peak (VmHWM, and `ru_maxrss` at exit)
//! is the figure.
//!
//! Each size runs twice: ferry as shipped (it pins glibc's mmap threshold
//! at 1 MiB, so large buffers go back to the kernel when freed), and with
//! the threshold at 32 MiB (`GLIBC_TUNABLES=glibc.malloc.mmap_threshold`),
//! where glibc's dynamic threshold ends up once an 8 MiB buffer has been
//! freed: scan buffers then live in heap arenas that keep what they grew
//! to. The difference is the allocator keeping freed memory, not ferry
//! holding more.

use super::idle::label;
use super::{prepare_source, settle, Ctx};
use crate::data;
use crate::ferry::Ferry;
use crate::report::{f0, f1, f2, percentile, Table};
use anyhow::Result;
use kudu_client::KuduClient;
use serde::Serialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The heap-kept variant's environment.
pub const HEAP_KEPT: (&str, &str) = ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=33554432");

#[derive(Debug, Clone, Serialize)]
pub struct MemoryRun {
    pub rows: u64,
    /// "as shipped" or "heap-kept".
    pub allocator: String,
    pub snapshot_s: f64,
    pub rows_per_s: f64,
    /// VmHWM when the snapshot window completed (MiB).
    pub peak_rss_mib: f64,
    /// `ru_maxrss` at exit (MiB).
    pub maxrss_at_exit_mib: f64,
    pub rss_p50_mib: f64,
    pub rss_at_end_mib: f64,
    pub ferry_cpu_s: f64,
    /// Summary of `rss_samples`.
    pub rss_summary: RssSummary,
    /// (seconds since start, RSS MiB) every 100 ms.
    pub rss_samples: Vec<(f64, f64)>,
}

/// The distribution of a run's RSS samples (MiB).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RssSummary {
    pub samples: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl RssSummary {
    pub fn of(samples: &[(f64, f64)]) -> RssSummary {
        let mut rss: Vec<f64> = samples.iter().map(|s| s.1).collect();
        rss.sort_by(|a, b| a.total_cmp(b));
        RssSummary {
            samples: rss.len(),
            min: rss.first().copied().unwrap_or(f64::NAN),
            p50: percentile(&rss, 50.0),
            p90: percentile(&rss, 90.0),
            p99: percentile(&rss, 99.0),
            max: rss.last().copied().unwrap_or(f64::NAN),
        }
    }
}

pub async fn run(ctx: &Ctx, sizes: &[u64]) -> Result<PathBuf> {
    let mut report = ctx.report(
        "memory",
        json!({"sizes": sizes, "ferry_settings": "defaults (reader.batchSizeBytes 20 MiB, capped by the tablet servers at 8 MiB; writer.maxBufferSize 1000; -p = cores)",
               "allocator_variants": ["as shipped (mmap threshold pinned at 1 MiB by ferry)", format!("heap-kept: {}={}", HEAP_KEPT.0, HEAP_KEPT.1)],
               "tablets": data::TABLETS, "tservers_per_cluster": ctx.tservers, "replicas": 1}),
    )?;
    let work = report.work_dir.clone();
    let (src, dst) = ctx.clusters("memory", &mut report).await?;
    let sc = KuduClient::new(&src.masters.split(',').collect::<Vec<_>>())?;
    let quiet: Vec<u32> = src.pids().into_iter().chain(dst.pids()).collect();
    let mut runs = Vec::new();
    for &rows in sizes {
        let table = format!("bench_{}", label(rows));
        let prepared = prepare_source(&src, &sc, &table, rows, &mut report, &quiet).await?;
        report.result(&format!("source_{}", label(rows)), &prepared);
        for kept in [false, true] {
            let suffix = if kept { "_heap" } else { "" };
            report.command(data::create_table(&dst.masters, &format!("{table}{suffix}")).await?);
            settle(&quiet, Duration::from_secs(90)).await;
            let mut o = ctx.ferry_options(
                &src,
                &dst,
                &table,
                &work,
                &format!("memory-{}{suffix}", label(rows)),
            );
            if kept {
                o.table_suffix = Some(suffix.into());
                o.env.push((HEAP_KEPT.0, HEAP_KEPT.1.into()));
            }
            let r = snapshot_once(ctx, &o, rows, kept, &mut report).await?;
            println!(
                "  {table} ({}): snapshot {:.1} s ({:.0} rows/s), peak RSS {:.0} MiB (median {:.0})",
                r.allocator, r.snapshot_s, r.rows_per_s, r.peak_rss_mib, r.rss_p50_mib
            );
            runs.push(r);
        }
        // Free both clusters for the next size (16 M rows are a few GB in
        // each cluster).
        data::drop_table(&dst.masters, &table).await?;
        data::drop_table(&dst.masters, &format!("{table}_heap")).await?;
        data::drop_table(&src.masters, &table).await?;
    }
    memory_tables(ctx, &runs, &mut report);
    report.result("runs", &runs);
    report.note("Each size is snapshotted twice from the same source table into two empty sink tables: first as shipped (ferry pins glibc's mmap threshold at 1 MiB: buffers of 1 MiB and more are mmapped and unmapped on free), then with GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432 (where glibc's dynamic threshold ends up: 8 MiB scan buffers come from heap arenas, which keep freed memory).");
    report.note("ferry's scan batches are reader.maxInFlightBytes (12 MiB) / (2 x parallelism): 3 MiB at -p 2 (reader.batchSizeBytes, 20 MiB, and the tablet servers' --scanner_max_batch_size_bytes, 8 MiB, are upper bounds); each pipeline holds the batch being written and the next one, plus its write buffers (adaptive, up to 1.5 MiB of encoded rows each).");
    drop(src);
    drop(dst);
    report.finish(&ctx.results_dir, &ctx.monitor)
}

/// The report's tables: as shipped vs heap-kept per size, and the growth from
/// the smallest to the largest table.
fn memory_tables(ctx: &Ctx, runs: &[MemoryRun], report: &mut crate::report::Report) {
    let by = |kept: bool| -> Vec<&MemoryRun> {
        runs.iter()
            .filter(|r| r.allocator.starts_with(if kept { "heap" } else { "as" }))
            .collect()
    };
    let (plain, kept) = (by(false), by(true));
    let settings = if ctx.ferry_args.is_empty() {
        "default settings".to_string()
    } else {
        format!("default settings except {}", ctx.ferry_args.join(" "))
    };
    let mut t = Table::new(
        &format!("memory: ferry run snapshot at {settings}"),
        &["measure"],
    );
    t.header = std::iter::once("measure".to_string())
        .chain(plain.iter().map(|r| format!("{} rows", f0(r.rows as f64))))
        .collect();
    let row = |name: &str, list: &[&MemoryRun], f: &dyn Fn(&MemoryRun) -> String| -> Vec<String> {
        std::iter::once(name.to_string())
            .chain(list.iter().map(|r| f(r)))
            .collect()
    };
    t.row(row("peak RSS (MiB), as shipped", &plain, &|r| {
        f1(r.peak_rss_mib)
    }));
    t.row(row(
        "peak RSS (MiB), heap-kept (mmap threshold 32 MiB)",
        &kept,
        &|r| f1(r.peak_rss_mib),
    ));
    t.row(row("median RSS (MiB), as shipped", &plain, &|r| {
        f1(r.rss_p50_mib)
    }));
    t.row(row("median RSS (MiB), heap-kept", &kept, &|r| {
        f1(r.rss_p50_mib)
    }));
    t.row(row(
        "snapshot time (s), as shipped / heap-kept",
        &plain,
        &|r| {
            let p = kept
                .iter()
                .find(|q| q.rows == r.rows)
                .map_or(f64::NAN, |q| q.snapshot_s);
            format!("{} / {}", f1(r.snapshot_s), f1(p))
        },
    ));
    t.row(row("RSS p90 / p99 (MiB), as shipped", &plain, &|r| {
        format!("{} / {}", f1(r.rss_summary.p90), f1(r.rss_summary.p99))
    }));
    t.row(row(
        "RSS samples (every 100 ms), as shipped",
        &plain,
        &|r| f0(r.rss_summary.samples as f64),
    ));
    t.row(row("rows/s, as shipped", &plain, &|r| f0(r.rows_per_s)));
    t.row(row("ferry CPU (s), as shipped", &plain, &|r| {
        f1(r.ferry_cpu_s)
    }));
    t.row(row(
        "ferry CPU per million rows (s), as shipped",
        &plain,
        &|r| f2(r.ferry_cpu_s * 1e6 / r.rows as f64),
    ));
    report.tables.push(t);
    if plain.len() >= 2 {
        let mut g = Table::new(
            "growth from the smallest to the largest table",
            &["ratio", "value"],
        );
        let ratio = |l: &[&MemoryRun]| l[l.len() - 1].peak_rss_mib / l[0].peak_rss_mib;
        g.row(vec![
            "table size".into(),
            f2(plain[plain.len() - 1].rows as f64 / plain[0].rows as f64),
        ]);
        g.row(vec!["peak RSS, as shipped".into(), f2(ratio(&plain))]);
        g.row(vec!["peak RSS, heap-kept".into(), f2(ratio(&kept))]);
        report.tables.push(g);
        report.result(
            "peak_rss_ratio_largest_over_smallest",
            json!({"as_shipped": ratio(&plain), "heap_kept": ratio(&kept)}),
        );
    }
}

async fn snapshot_once(
    ctx: &Ctx,
    o: &crate::ferry::FerryOptions,
    rows: u64,
    heap_kept: bool,
    report: &mut crate::report::Report,
) -> Result<MemoryRun> {
    let ferry = Ferry::start(o, &ctx.monitor)?;
    report.command(ferry.command.clone());
    let samples: Arc<Mutex<Vec<(f64, f64)>>> = Arc::default();
    let sampler = {
        let samples = samples.clone();
        let pid = ferry.pid();
        let started = std::time::Instant::now();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                if let Some((rss, _)) = crate::procs::proc_memory(pid) {
                    if let Ok(mut g) = samples.lock() {
                        g.push((started.elapsed().as_secs_f64(), rss));
                    }
                }
            }
        })
    };
    let snap = ferry
        .wait_windows(1, Duration::from_secs(120 + rows / 2_000))
        .await;
    sampler.abort();
    let snap = snap?;
    let cpu = ferry.cpu_s();
    let usage = ferry.stop().await?;
    let samples = samples.lock().map(|g| g.clone()).unwrap_or_default();
    let rss_summary = RssSummary::of(&samples);
    Ok(MemoryRun {
        rows,
        allocator: if heap_kept {
            "heap-kept (mmap threshold 32 MiB)"
        } else {
            "as shipped (mmap threshold 1 MiB)"
        }
        .into(),
        snapshot_s: snap.at_s,
        rows_per_s: rows as f64 / snap.at_s,
        peak_rss_mib: snap.hwm_mib.unwrap_or(f64::NAN),
        maxrss_at_exit_mib: usage.peak_rss_mib,
        rss_p50_mib: rss_summary.p50,
        rss_at_end_mib: snap.rss_mib.unwrap_or(f64::NAN),
        ferry_cpu_s: cpu,
        rss_summary,
        rss_samples: samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarises_rss_samples() {
        let samples: Vec<(f64, f64)> = (1..=10)
            .map(|i| (i as f64 / 10.0, (11 - i) as f64))
            .collect();
        let s = RssSummary::of(&samples);
        assert_eq!(
            (s.samples, s.min, s.p50, s.p90, s.p99, s.max),
            (10, 1.0, 5.0, 9.0, 10.0, 10.0)
        );
        let empty = RssSummary::of(&[]);
        assert_eq!(empty.samples, 0);
        assert!(empty.max.is_nan() && empty.p50.is_nan());
    }
}
