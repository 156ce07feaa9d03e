//! The report of `ferry drill --switchover` (human and JSON): each step's
//! time, each switch's write outage and verify, the RPO and the final
//! state.

use crate::cli::cutover::CutoverArgs;
use crate::cutover_report::CutoverReport;
use ferry_engine::{SinkTime, SourceTime};
use std::fmt;

fn ms_text(ms: u64) -> String {
    format!("{ms} ms")
}

/// One timed step.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// `cutover`, `reverseStart`, `hold`, `cutBack` or `forwardStart`.
    pub step: String,
    /// When it began, ms since the epoch.
    pub started_at_ms: u64,
    /// How long it took.
    pub ms: u64,
    /// What it found.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl Step {
    /// A step named `step`.
    pub fn new(step: &str, started_at_ms: u64, ms: u64, note: String) -> Self {
        Step {
            step: step.to_string(),
            started_at_ms,
            ms,
            note,
        }
    }
}

/// One switch of direction: a cutover and the new direction's start.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Switch {
    /// The old primary (masters, table).
    pub from: String,
    /// The new primary.
    pub to: String,
    /// The cutover report.
    pub cutover_report: String,
    /// The verify found the copy equal.
    pub equal: bool,
    /// No window was in progress at the stop.
    pub drained: bool,
    /// The cutover's RPO (0 when drained and equal).
    pub rpo_ms: u64,
    /// The old primary's final window end (source time).
    pub final_end: SourceTime,
    /// The new primary's time after the stop (its cluster's time).
    pub cutover_time: SinkTime,
    /// The job of the new direction.
    pub new_job_id: String,
    /// Its snapshot windows (0: it started with diff windows).
    pub snapshot_windows: Option<u64>,
    /// From the start of the drain check until the new direction's job
    /// completed its first window.
    pub write_outage_ms: u64,
}

fn side(masters: &[String], table: &str) -> String {
    format!("{} (table {table})", masters.join(","))
}

impl Switch {
    /// The switch `report` describes, to `new_job`.
    pub fn new(
        report: &CutoverReport,
        path: &str,
        new_job: &str,
        write_outage_ms: u64,
        snapshot_windows: Option<u64>,
    ) -> Self {
        Switch {
            from: side(&report.source.masters, &report.source.table),
            to: side(&report.sink.masters, &report.sink.table),
            cutover_report: path.to_string(),
            equal: report.equal,
            drained: report.drained,
            rpo_ms: report.rpo_ms,
            final_end: report.final_end,
            cutover_time: report.cutover_time,
            new_job_id: new_job.to_string(),
            snapshot_windows,
            write_outage_ms,
        }
    }

    fn clean(&self) -> bool {
        self.equal && self.drained && self.snapshot_windows == Some(0)
    }
}

/// The report.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SwitchoverReport {
    /// Both switches done, both copies drained and equal, neither new job
    /// took a snapshot; the original direction runs again.
    pub ok: bool,
    /// The job the drill switched over (the original direction).
    pub job_id: String,
    /// The original primary (A).
    pub primary: String,
    /// The original standby (B).
    pub standby: String,
    /// The reverse job (B → A) the drill ran.
    pub reverse_job_id: Option<String>,
    /// The original direction's job after the drill.
    pub final_job_id: Option<String>,
    /// Every step done, in order.
    pub steps: Vec<Step>,
    /// A → B, then B → A.
    pub switches: Vec<Switch>,
    /// The write outages of both switches together.
    pub write_outage_ms: Option<u64>,
    /// The larger RPO of the two switches (0 for a planned switchover).
    pub rpo_ms: Option<u64>,
    /// What runs now, and what to do if the drill stopped half-way.
    pub final_state: String,
    /// Why the drill stopped, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SwitchoverReport {
    /// An empty report of the drill of `args`' job.
    pub fn new(args: &CutoverArgs) -> Self {
        let cfg = &args.run.config;
        SwitchoverReport {
            ok: false,
            job_id: args.job_id.clone().unwrap_or_default(),
            primary: side(&cfg.source_master_addresses, &cfg.table_name),
            standby: side(&cfg.sink_master_addresses, &cfg.sink_table_name()),
            reverse_job_id: None,
            final_job_id: None,
            steps: Vec::new(),
            switches: Vec::new(),
            write_outage_ms: None,
            rpo_ms: None,
            final_state: String::new(),
            error: None,
        }
    }

    fn done(&self, step: &str) -> bool {
        self.steps.iter().any(|s| s.step == step)
    }

    /// Fills in the totals and the final state: `Ok(REST URL of the final
    /// job)` or `Err(why the drill stopped)`.
    pub fn finish(&mut self, outcome: Result<&str, &str>) {
        if self.switches.len() == 2 {
            self.write_outage_ms = Some(self.switches.iter().map(|s| s.write_outage_ms).sum());
            self.rpo_ms = self.switches.iter().map(|s| s.rpo_ms).max();
        }
        let report = |n: usize| {
            self.switches
                .get(n)
                .map_or("the cutover report", |s| s.cutover_report.as_str())
                .to_string()
        };
        self.final_state = match outcome {
            Ok(url) => {
                self.ok = self.switches.len() == 2 && self.switches.iter().all(Switch::clean);
                format!(
                    "job {} replicates {} -> {} again, in this process (REST API at {url}); stop it with a savepoint to hand it back to your usual `ferry run -s SAVEPOINT`",
                    self.final_job_id.as_deref().unwrap_or("?"),
                    self.primary,
                    self.standby
                )
            }
            Err(why) => {
                self.error = Some(why.to_string());
                if !self.done("cutover") {
                    format!("stopped in the first cutover: job {} still runs unless the error says it was stopped (see `ferry list`); if it stopped with a savepoint, start it again with `ferry run -s SAVEPOINT`", self.job_id)
                } else if self.switches.is_empty() {
                    format!("job {} is stopped and {} holds an equal copy; nothing replicates: run the reverse job (`ferry run ... --fromCutover {}`) or the original job again from its savepoint", self.job_id, self.standby, report(0))
                } else if !self.done("cutBack") {
                    format!("the reverse job ({} -> {}) ended with this process: start it again with `ferry run ... --fromCutover {}` (diff windows from the cutover time, no snapshot), then cut back with `ferry cutover`", self.standby, self.primary, report(0))
                } else {
                    format!("the reverse job is stopped and {} holds an equal copy; start the original direction with `ferry run ... --fromCutover {}`", self.primary, report(1))
                }
            }
        };
    }
}

impl fmt::Display for SwitchoverReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Switchover drill of job {}: A = {}, B = {}",
            self.job_id, self.primary, self.standby
        )?;
        for (n, s) in self.steps.iter().enumerate() {
            writeln!(
                f,
                "  {}. {:<13} {:>9}  {}",
                n + 1,
                s.step,
                ms_text(s.ms),
                s.note
            )?;
        }
        for s in &self.switches {
            let snapshot = match s.snapshot_windows {
                Some(0) => "no snapshot".to_string(),
                Some(n) => format!("{n} SNAPSHOT window(s)"),
                None => "snapshot windows unknown".to_string(),
            };
            writeln!(
                f,
                "  {} -> {}: write outage {} (drain check start to the new job's first window), RPO {} ms, job {} ({snapshot}), report {}",
                s.from,
                s.to,
                ms_text(s.write_outage_ms),
                s.rpo_ms,
                s.new_job_id,
                s.cutover_report
            )?;
        }
        if let (Some(outage), Some(rpo)) = (self.write_outage_ms, self.rpo_ms) {
            writeln!(f, "Write outage in all: {}; RPO: {rpo} ms", ms_text(outage))?;
        }
        if let Some(e) = &self.error {
            writeln!(f, "FAILED: {e}")?;
        }
        writeln!(f, "Final state: {}", self.final_state)?;
        writeln!(
            f,
            "Switchover drill: {}",
            if self.ok { "PASSED" } else { "FAILED" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> SwitchoverReport {
        let args: Vec<String> = [
            "--job-id",
            "00112233445566778899aabbccddeeff",
            "--job.sourceMasterAddresses",
            "a:7051",
            "--job.sinkMasterAddresses",
            "b:7051",
            "--job.tableName",
            "t",
            "--job.checkpointsDirectory",
            "/tmp/chk",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let args = crate::cli::cutover::parse(&args)
            .expect("parse")
            .expect("args");
        SwitchoverReport::new(&args)
    }

    #[test]
    fn a_drill_stopped_half_way_says_what_runs_and_what_to_start() {
        let mut r = report();
        assert_eq!(r.primary, "a:7051 (table t)");
        r.finish(Err("cannot reach the ferry REST API"));
        assert!(!r.ok);
        assert!(r.final_state.contains("still runs"), "{}", r.final_state);
        let text = r.to_string();
        assert!(text.contains("FAILED: cannot reach"), "{text}");
        assert!(text.ends_with("Switchover drill: FAILED\n"), "{text}");

        let mut r = report();
        r.steps
            .push(Step::new("cutover", 1, 2, "equal, drained".into()));
        r.finish(Err("the reverse job did not start"));
        assert!(
            r.final_state.contains("is stopped") && r.final_state.contains("b:7051"),
            "{}",
            r.final_state
        );
        // Without two switches there are no totals.
        assert_eq!((r.write_outage_ms, r.rpo_ms), (None, None));
        let json = serde_json::to_value(&r).expect("json");
        assert_eq!(json["steps"][0]["step"], "cutover");
        assert_eq!(json["error"], "the reverse job did not start");
    }
}
