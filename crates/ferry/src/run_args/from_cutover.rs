//! `ferry run --fromCutover FILE`: the reverse job after a verified cutover
//! (old sink → old source) starts with a diff window from the cutover's
//! hybrid time on the new primary instead of a full snapshot.
//!
//! That is exact only if the report says so and describes this job, so
//! before anything starts: the report must say the tables were verified
//! equal and the forward job drained ([`check`], from the file and the
//! configuration: a refusal is a usage error, exit code 2); and the new
//! primary must still hold history back to the cutover time
//! ([`check_history`]: a snapshot scan at it, which Kudu refuses before
//! the ancient history mark; exit code 1).

use crate::cutover_report::{CutoverReport, CutoverSide};
use ferry_engine::config::JobConfig;
use ferry_engine::SourceTime;
use kudu_client::{HybridTime, KuduClient};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// A cutover report the job's configuration fits.
#[derive(Debug, Clone)]
pub struct CutoverStart {
    /// The report's path, as given.
    pub path: PathBuf,
    /// The report.
    pub report: CutoverReport,
}

impl CutoverStart {
    /// Where the reverse job's chain starts: the new primary's hybrid time
    /// at which it equals the old source. The forward job's sink is the
    /// reverse job's source, so the forward job's sink time is a time of
    /// the reverse job's source clock.
    pub fn start_time(&self) -> SourceTime {
        SourceTime::from_raw(self.report.cutover_time.raw())
    }
}

/// Loads the report at `path` and checks it against the reverse job's
/// `config`; the error says what does not fit.
pub fn load(path: PathBuf, config: &JobConfig) -> Result<CutoverStart, String> {
    let report = CutoverReport::load(&path).map_err(|e| with_causes(&e))?;
    check(&report, config)?;
    Ok(CutoverStart { path, report })
}

/// An error and its causes, each once: "what: why: why".
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

fn masters(list: &[String]) -> BTreeSet<&str> {
    list.iter().map(|m| m.trim()).collect()
}

/// The report's preconditions for a start without a snapshot, and that it
/// describes this job reversed: the job's source is the report's sink (the
/// new primary), its sink the report's source.
pub fn check(report: &CutoverReport, config: &JobConfig) -> Result<(), String> {
    if !report.equal {
        return Err(format!(
            "the cutover's verify found the tables different ({} differing rows), so the old source is not a copy of the new primary; repair them (ferry verify --repair) and start the reverse job with a snapshot (without --fromCutover)",
            report.verify.differences
        ));
    }
    if !report.drained {
        return Err("the forward job was not drained when it stopped (a window was in progress), so there is no single time both tables agree on; start the reverse job with a snapshot (without --fromCutover)".into());
    }
    let reverse_source = Side {
        job: "source",
        report: "sink (the new primary)",
        masters_key: "job.sourceMasterAddresses",
        table_key: "job.tableName",
    };
    reverse_source.check(
        &config.source_master_addresses,
        &config.table_name,
        &report.sink,
    )?;
    let reverse_sink = Side {
        job: "sink",
        report: "source (the old primary)",
        masters_key: "job.sinkMasterAddresses",
        table_key: "job.sinkTableName",
    };
    reverse_sink.check(
        &config.sink_master_addresses,
        &config.sink_table_name(),
        &report.source,
    )
}

/// One side of the reverse job and the report's side it must be.
struct Side {
    job: &'static str,
    report: &'static str,
    masters_key: &'static str,
    table_key: &'static str,
}

impl Side {
    fn check(&self, given: &[String], table: &str, side: &CutoverSide) -> Result<(), String> {
        if masters(given) != masters(&side.masters) {
            return Err(format!(
                "the job's {} cluster ({}={}) is not the report's {} ({}): the reverse job reads the old sink and writes the old source",
                self.job,
                self.masters_key,
                given.join(","),
                self.report,
                side.masters.join(",")
            ));
        }
        if table != side.table {
            return Err(format!(
                "the job's {} table ({}={table}) is not the report's {} table '{}'",
                self.job, self.table_key, self.report, side.table
            ));
        }
        Ok(())
    }
}

/// Why the new primary cannot serve a diff from the cutover time.
// The fields are named in each variant's message.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The table is not the one the cutover verified.
    #[error("table '{table}' on the new primary has id {found}, not {expected} as in cutover report '{path}': it was dropped and created again since the cutover; start the reverse job with a snapshot (without --fromCutover)")]
    OtherTable {
        table: String,
        found: String,
        expected: String,
        path: String,
    },
    /// The snapshot scan at the cutover time failed (typically: older than
    /// the ancient history mark).
    #[error("the new primary cannot read table '{table}' as of the cutover time {time} ({cause}); if its history no longer reaches back that far (tablet_history_max_age_sec, or the table's kudu.table.history_max_age_sec), start the reverse job with a snapshot (without --fromCutover)")]
    NotReadable {
        table: String,
        time: HybridTime,
        cause: kudu_client::Error,
    },
}

/// Probes the new primary (`source`, the reverse job's source cluster):
/// the table is the verified one (same id, when the report has it) and a
/// snapshot scan at the cutover time is accepted.
pub async fn check_history(source: &KuduClient, start: &CutoverStart) -> Result<(), HistoryError> {
    let side = &start.report.sink;
    let time = HybridTime::from_raw(start.start_time().raw());
    let not_readable = |cause| HistoryError::NotReadable {
        table: side.table.clone(),
        time,
        cause,
    };
    let table = source.open_table(&side.table).await.map_err(not_readable)?;
    if let Some(expected) = &side.table_id {
        if table.id() != expected {
            return Err(HistoryError::OtherTable {
                table: side.table.clone(),
                found: table.id().to_owned(),
                expected: expected.clone(),
                path: start.path.display().to_string(),
            });
        }
    }
    let mut scanner = source
        .scan_builder(&table)
        .snapshot(time)
        .build()
        .map_err(not_readable)?;
    // The first batch is enough: the server checks the time on open.
    scanner.next_batch().await.map_err(not_readable)?;
    Ok(())
}
