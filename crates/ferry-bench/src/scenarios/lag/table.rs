//! The lag run's printed table (one column per rate) and its notes.

use super::{LagStats, Measured, Outcome, Params, RateRun};
use super::{SOURCE_BOUND_FRACTION, WRITER_SHORT_FRACTION};
use crate::report::Report;
use crate::report::{f0, f1, f2, percentile, Table};

pub(super) fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:.0} %", v * 100.0)
    } else {
        "-".into()
    }
}

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map_or_else(|| "-".into(), f)
}

/// The report's table: one column per rate.
pub(super) fn lag_table(runs: &[RateRun], p: &Params, lag_source: &str) -> Table {
    let rates: Vec<String> = runs.iter().map(|r| f0(r.rate)).collect();
    let mut t = Table::new(
        &format!(
            "lag: writer at {} ops/s, {} s each, on a {}-row table; job.discoveryIntervalSeconds=1 (lag read from ferry's {lag_source})",
            rates.join(" / "),
            p.seconds,
            f0(p.initial_rows as f64)
        ),
        &["measure"],
    );
    t.header = std::iter::once("measure".to_string())
        .chain(runs.iter().map(|r| format!("{} ops/s", f0(r.rate))))
        .collect();
    let row = |name: &str, f: &dyn Fn(&RateRun, &Measured) -> String| -> Vec<String> {
        std::iter::once(name.to_string())
            .chain(runs.iter().map(|r| match &r.result {
                Ok(m) => f(r, m),
                Err(_) => "failed".into(),
            }))
            .collect()
    };
    t.row(row("writer achieved ops/s (of target)", &|r, m| {
        format!(
            "{} ({})",
            f0(m.o.churn.achieved_rows_per_s),
            pct(m.o.churn.achieved_rows_per_s / r.rate)
        )
    }));
    t.row(row("writer alone achieved ops/s (baseline)", &|_, m| {
        opt(
            m.baseline.as_ref().map(|b| b.writer.achieved_rows_per_s),
            f0,
        )
    }));
    fn during(m: &Measured) -> &LagStats {
        &m.o.during_stats
    }
    fn o(m: &Measured) -> &Outcome {
        &m.o
    }
    t.row(row("lag p50 while writing (ms)", &|_, m| {
        f0(during(m).p50_ms)
    }));
    t.row(row("lag p99 while writing (ms)", &|_, m| {
        f0(during(m).p99_ms)
    }));
    t.row(row("lag max while writing (ms)", &|_, m| {
        f0(during(m).max_ms)
    }));
    t.row(row("lag samples (every 100 ms)", &|_, m| {
        f0(during(m).samples as f64)
    }));
    t.row(row("windows completed while writing", &|_, m| {
        f0(o(m).writing_windows.len() as f64)
    }));
    t.row(row("window took_ms p50 / p99", &|_, m| {
        format!(
            "{} / {}",
            f0(percentile(&o(m).took, 50.0)),
            f0(percentile(&o(m).took, 99.0))
        )
    }));
    t.row(row(
        "sink covers the last write after (s)",
        &|_, m| match o(m).caught_up_s {
            Some(s) => f2(s),
            None => format!("not within {} s", o(m).catch_up_timeout_s),
        },
    ));
    t.row(row("sink == source", &|_, m| match o(m).equal {
        Some(true) => format!("equal ({} s)", opt(o(m).verified_after_s, f1)),
        Some(false) => "NOT EQUAL".into(),
        None => "not compared".into(),
    }));
    let cores = |m: &Measured, i: usize| {
        let (c0, c1) = (m.o.cpu0, m.o.cpu1);
        let d = match i {
            0 => c1.0 - c0.0,
            1 => c1.1 - c0.1,
            _ => c1.2 - c0.2,
        };
        d / m.o.cpu_wall_s
    };
    t.row(row("ferry CPU (cores)", &|_, m| f2(cores(m, 0))));
    t.row(row("ferry peak RSS (MiB)", &|_, m| {
        f0(m.o.usage.peak_rss_mib)
    }));
    t.row(row("source tablet servers CPU (cores)", &|_, m| {
        f2(m.split.total_cores)
    }));
    t.row(row("  (a) LLVM compiles of ferry's diff scans", &|_, m| {
        f2(m.split.llvm_compiles_cores)
    }));
    t.row(row(
        "  (b) ferry's diff scans, apart from compiles",
        &|_, m| opt(m.split.diff_scans_cores, f2),
    ));
    t.row(row(
        "  (c) the rest: writer and background (baseline)",
        &|_, m| opt(m.split.rest_cores, f2),
    ));
    t.row(row("  ferry's share ((a) + (b)) / total", &|_, m| {
        opt(m.split.ferry_share, pct)
    }));
    t.row(row(
        "source tablet servers CPU, writer alone (cores)",
        &|_, m| opt(m.baseline.as_ref().map(|b| b.source_tservers_cores), f2),
    ));
    t.row(row("sink tablet servers CPU (cores)", &|_, m| {
        f2(cores(m, 2))
    }));
    t.row(row("source saturated", &|_, m| m.saturation.describe()));
    t
}

/// The report's notes.
pub(super) fn notes(report: &mut Report, runs: &[RateRun], p: &Params) {
    report.note("lag = wall clock now − lastEndTimestamp (the end of the last window ferry completed); both clusters and ferry share this machine's clock.");
    report.note("Each rate runs on a fresh source table of the same size (loaded, flushed to disk); the previous rate's tables are dropped on both clusters first.");
    if p.baseline_s > 0 {
        report.note(format!("Source CPU split: before ferry starts, the same writer runs alone at the same rate for {} s on the flushed table (writer-only baseline; the table is flushed again afterwards, so the measured phase starts from the same state). (c) = the baseline's source tablet server CPU, scaled by (ops/s achieved with ferry) / (ops/s achieved alone); (a) = LLVM compiles logged while writing with ferry (--codegen_time_compilation) less the baseline's, scaled; (b) = total − (c) − (a). ferry's share = ((a) + (b)) / total = (with ferry − writer only) / with ferry. The baseline is shorter than the measured phase and its MemRowSets hold fewer changes, so any growth of the writer's own per-operation cost with the MemRowSet is charged to ferry; single runs of either phase vary by a few hundredths of a core.", p.baseline_s));
    } else {
        report.note("No writer-only baseline (--baseline-seconds 0): the source's CPU is split into LLVM compiles and the rest only.");
    }
    report.note(format!("Saturated: the writer achieved less than {:.0} % of its target rate, or the source tablet servers used at least {:.0} % of the machine's cores, while ferry replicated.", WRITER_SHORT_FRACTION * 100.0, SOURCE_BOUND_FRACTION * 100.0));
    report.note("Source tablet server CPU includes the writer's own load and, per window and tablet, an LLVM compile Kudu 1.17 does for every diff scan (see idle-cycle).");
    report.note("'sink covers the last write' = time from the writer's last acknowledged write until ferry logs a completed window whose end is after that write's hybrid time; the fingerprint comparison that follows proves the sink equals the source as of that write.");
    for r in runs {
        if let Some(problem) = r.problem() {
            report.note(format!(
                "PROBLEM: {problem} (see the ferry log in the work folder)."
            ));
        }
    }
}
