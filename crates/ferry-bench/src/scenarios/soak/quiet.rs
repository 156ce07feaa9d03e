//! Quiet points: the workload paused, ferry past the pause, source and
//! sink compared cell by cell; and the workload between them.

use super::{unix_ms, Soak, RECOVERY_TIMEOUT, TABLE};
use anyhow::Result;
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::workload::{Workload, WorkloadOptions, WorkloadStats};
use serde::Serialize;
use std::time::Duration;

/// One cell-by-cell comparison at a quiet point.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub label: String,
    /// Seconds since the soak started, when the workload was paused.
    pub at_s: f64,
    /// Seconds from the pause until ferry's lastEndTimestamp passed it.
    pub caught_up_s: Option<f64>,
    /// `None` when ferry never passed the pause (nothing compared).
    pub equal: Option<bool>,
    pub attempts: u32,
    /// Rows in the source table.
    pub source_rows: Option<u64>,
    /// The comparison's own description of the first differences.
    pub detail: String,
    /// What the workload did since the previous quiet point.
    pub workload: WorkloadCounts,
}

/// A workload's counts, for the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkloadCounts {
    /// Operations the source acknowledged.
    pub applied: u64,
    /// Operations that failed (they may or may not have landed).
    pub failed: u64,
    pub inserts: u64,
    pub upserts: u64,
    pub updates: u64,
    pub deletes: u64,
    pub last_error: Option<String>,
}

impl WorkloadCounts {
    fn add(&mut self, s: &WorkloadStats) {
        self.applied += s.applied;
        self.failed += s.failed;
        self.inserts += s.inserts;
        self.upserts += s.upserts;
        self.updates += s.updates;
        self.deletes += s.deletes;
        if s.last_error.is_some() {
            self.last_error.clone_from(&s.last_error);
        }
    }
}

impl Soak<'_> {
    pub(super) fn start_workload(&mut self) {
        self.workload_runs += 1;
        let options = WorkloadOptions {
            ops_per_sec: self.rate,
            seed: self.seed.wrapping_add(self.workload_runs),
            first_id: self.next_id,
            key_floor: 0,
        };
        self.workload = Some(Workload::start_with(self.sc.clone(), TABLE, options));
    }

    /// Stops the workload (if running) and adds its counts to the total.
    pub(super) async fn stop_workload(&mut self) -> WorkloadCounts {
        let mut counts = WorkloadCounts::default();
        if let Some(w) = self.workload.take() {
            let stats = w.stop().await;
            self.next_id = self.next_id.max(stats.next_id);
            counts.add(&stats);
            self.workload_total.add(&stats);
        }
        counts
    }

    /// Pauses the workload, waits until ferry passes the pause, compares
    /// the tables, and (if `resume`) starts the workload again.
    pub(super) async fn quiet_point(&mut self, label: &str, resume: bool) -> Result<Comparison> {
        let workload = self.stop_workload().await;
        let at_s = self.elapsed_s();
        let paused_ms = unix_ms();
        let caught_up_s = self.wait_end_past(paused_ms).await?;
        let mut cmp = Comparison {
            label: label.into(),
            at_s,
            caught_up_s,
            equal: None,
            attempts: 0,
            source_rows: None,
            detail: format!(
                "not compared: ferry did not pass the pause within {} s",
                RECOVERY_TIMEOUT.as_secs()
            ),
            workload,
        };
        if caught_up_s.is_some() {
            self.compare(&mut cmp).await?;
        }
        if resume {
            self.start_workload();
        }
        Ok(cmp)
    }

    /// Cell-by-cell comparison, up to three attempts 5 s apart (a restart
    /// of ferry in between replays windows the sink already had).
    async fn compare(&mut self, cmp: &mut Comparison) -> Result<()> {
        cmp.source_rows = crate::data::fingerprint(&self.sc, TABLE, None, true)
            .await
            .ok()
            .map(|fp| fp.rows);
        for attempt in 1..=3 {
            cmp.attempts = attempt;
            let (sc, dc) = (self.sc.clone(), self.dc.clone());
            // The comparison panics on a failed scan (it is a test fixture).
            let task = tokio::spawn(async move { compare_tables(&sc, &dc, TABLE, TABLE).await });
            match tokio::time::timeout(RECOVERY_TIMEOUT, task).await {
                Ok(Ok(diff)) => {
                    cmp.equal = Some(diff.is_equal());
                    cmp.detail = truncate(&diff.to_string(), 2000);
                    if diff.is_equal() {
                        return Ok(());
                    }
                }
                Ok(Err(e)) => {
                    cmp.equal = None;
                    cmp.detail = format!("the comparison failed: {e}");
                }
                Err(_) => {
                    cmp.equal = None;
                    cmp.detail = format!(
                        "the comparison took longer than {} s",
                        RECOVERY_TIMEOUT.as_secs()
                    );
                }
            }
            self.idle(Duration::from_secs(5)).await?;
        }
        Ok(())
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_char_boundaries() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("ééé", 3), "é…");
    }
}
