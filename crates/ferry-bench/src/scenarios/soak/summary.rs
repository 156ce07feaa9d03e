//! The soak's report: a table of the faults, a summary table and the
//! summary figures of the JSON, with the verdict.

use super::fault::FaultRecord;
use super::quiet::Comparison;
use super::Soak;
use crate::report::{f0, f1, percentile, Table};
use serde_json::json;

impl Soak<'_> {
    /// The report's tables and summary.
    pub(super) fn summarise(&mut self, faults: &[FaultRecord], last: &Comparison) {
        let mut t = Table::new(
            "soak: faults (recovered = ferry's lastEndTimestamp passed the fault's end; lag = now − lastEndTimestamp)",
            &[
                "#",
                "at s",
                "fault",
                "detail",
                "held s",
                "recovered after s",
                "max lag s",
                "restarts",
                "exits",
                "sink == source",
            ],
        );
        for f in faults {
            t.row(vec![
                f.n.to_string(),
                f0(f.start_s),
                f.kind.name().into(),
                f.detail.clone(),
                f1(f.duration_s),
                f.recover_s.map_or("NOT RECOVERED".into(), f1),
                f.max_lag_s.map_or("-".into(), f1),
                f.engine_restarts.to_string(),
                f.ferry_exits.to_string(),
                verdict_cell(f.comparison.as_ref()),
            ]);
        }
        self.report.tables.push(t);

        let recovers: Vec<f64> = sorted(faults.iter().filter_map(|f| f.recover_s));
        let max_lag = faults.iter().filter_map(|f| f.max_lag_s).reduce(f64::max);
        let comparisons: Vec<&Comparison> = faults
            .iter()
            .filter_map(|f| f.comparison.as_ref())
            .chain(std::iter::once(last))
            .collect();
        let equal = comparisons.iter().filter(|c| c.equal == Some(true)).count();
        let recovered = recovers.len();
        let restarts = self.restart_lines();
        let mut by_kind = serde_json::Map::new();
        for f in faults {
            let e = by_kind.entry(f.kind.name()).or_insert(json!(0));
            *e = json!(e.as_u64().unwrap_or(0) + 1);
        }
        let passed = recovered == faults.len()
            && equal == comparisons.len()
            && self.exits.is_empty()
            && !faults.is_empty();
        let lag_all: Vec<f64> = sorted(
            self.gauges
                .lock()
                .map(|g| g.samples.iter().map(|s| s.1 / 1000.0).collect::<Vec<_>>())
                .unwrap_or_default(),
        );
        let mut s = Table::new("soak: summary", &["measure", "value"]);
        s.row(vec!["faults".into(), faults.len().to_string()]);
        s.row(vec![
            "recovered (lastEndTimestamp passed the fault's end)".into(),
            format!("{recovered} of {}", faults.len()),
        ]);
        s.row(vec![
            "time to recover p50 / max (s)".into(),
            format!(
                "{} / {}",
                f1(percentile(&recovers, 50.0)),
                f1(recovers.last().copied().unwrap_or(f64::NAN))
            ),
        ]);
        s.row(vec![
            "lag p50 / p99 over the run (s)".into(),
            format!(
                "{} / {}",
                f1(percentile(&lag_all, 50.0)),
                f1(percentile(&lag_all, 99.0))
            ),
        ]);
        s.row(vec![
            "max lag during a fault (s)".into(),
            max_lag.map_or("-".into(), f1),
        ]);
        s.row(vec![
            "restarts by ferry's restart strategy (log)".into(),
            restarts.to_string(),
        ]);
        s.row(vec![
            "ferry exits (restarted by the bench)".into(),
            self.exits.len().to_string(),
        ]);
        s.row(vec![
            "comparisons sink == source".into(),
            format!("{equal} of {}", comparisons.len()),
        ]);
        s.row(vec!["final comparison".into(), verdict_cell(Some(last))]);
        s.row(vec![
            "workload ops applied / failed".into(),
            format!(
                "{} / {}",
                f0(self.workload_total.applied as f64),
                f0(self.workload_total.failed as f64)
            ),
        ]);
        s.row(vec![
            "verdict".into(),
            if passed { "PASS" } else { "FAIL" }.into(),
        ]);
        self.report.tables.push(s);
        self.report.result(
            "summary",
            json!({"verdict": if passed { "pass" } else { "fail" },
                   "faults": faults.len(), "faults_by_kind": by_kind, "recovered": recovered,
                   "recover_s_p50": finite(percentile(&recovers, 50.0)),
                   "recover_s_max": recovers.last(),
                   "max_lag_during_fault_s": max_lag,
                   "lag_s_p50": finite(percentile(&lag_all, 50.0)),
                   "lag_s_p99": finite(percentile(&lag_all, 99.0)),
                   "lag_s_max": lag_all.last(),
                   "engine_restarts": restarts, "ferry_exits": self.exits.len(),
                   "ferry_starts": self.ferry_starts,
                   "comparisons": comparisons.len(), "comparisons_equal": equal,
                   "final_equal": last.equal}),
        );
        self.report.result("workload", &self.workload_total);
    }
}

fn sorted(v: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = v.into_iter().filter(|x| x.is_finite()).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

fn verdict_cell(c: Option<&Comparison>) -> String {
    match c.and_then(|c| c.equal) {
        Some(true) => "equal".into(),
        Some(false) => "NOT EQUAL".into(),
        None => "not compared".into(),
    }
}
