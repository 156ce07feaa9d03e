//! The cutover report: what `ferry cutover` proved and where a reverse job
//! may start. Written as JSON by `ferry cutover`, read by `ferry run
//! --fromCutover FILE`, which starts the reverse job (old sink → old
//! source) with a diff window from `sink.cutover_time` instead of a full
//! snapshot.

use serde::{Deserialize, Serialize};

/// The report's format version (bumped on incompatible changes).
pub const CUTOVER_REPORT_VERSION: u32 = 1;

/// One side of the replication at the cutover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CutoverSide {
    /// The cluster's master addresses.
    pub masters: Vec<String>,
    /// The table's name.
    pub table: String,
    /// The table's id, when known (a rename keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_id: Option<String>,
}

/// What `ferry cutover` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CutoverReport {
    /// [`CUTOVER_REPORT_VERSION`].
    pub version: u32,
    /// The forward job that was stopped.
    pub job_id: String,
    /// The savepoint it stopped with.
    pub savepoint: String,
    /// The old source (the reverse job's sink).
    pub source: CutoverSide,
    /// The old sink, the new primary (the reverse job's source).
    pub sink: CutoverSide,
    /// The forward job's final window end: a hybrid time of the old source
    /// cluster (raw value).
    pub final_end: u64,
    /// A hybrid time of the new primary at which it equals the old source
    /// at `final_end` (raw value): the reverse job's first diff window
    /// starts here.
    pub cutover_time: u64,
    /// Whether the savepoint had no split in flight (the open window
    /// finished before the stop).
    pub drained: bool,
    /// Whether `verify` found the tables equal at those times.
    pub equal: bool,
    /// Data that would be lost by switching now: 0 when drained and
    /// equal; otherwise the age of the final window end, in ms.
    pub rpo_ms: u64,
    /// The verification, in full.
    pub verify: ferry_verify::VerifyReport,
    /// When the report was written (ms since the epoch).
    pub created_at_ms: u64,
}

// Reader side (`ferry run --fromCutover`); kept apart from the writer's
// code so both can grow without conflicts.
impl CutoverReport {
    /// Reads a report written by `ferry cutover`.
    pub fn load(path: &std::path::Path) -> anyhow::Result<CutoverReport> {
        use anyhow::Context;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read cutover report '{}'", path.display()))?;
        let report: CutoverReport = serde_json::from_str(&text).with_context(|| {
            format!(
                "'{}' is not a cutover report ferry can read",
                path.display()
            )
        })?;
        if report.version != CUTOVER_REPORT_VERSION {
            anyhow::bail!(
                "cutover report '{}' has format version {}; this ferry reads version {}",
                path.display(),
                report.version,
                CUTOVER_REPORT_VERSION
            );
        }
        Ok(report)
    }
}
