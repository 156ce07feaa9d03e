//! The cutover report: what `ferry cutover` proved and where a reverse job
//! may start. Written as JSON by `ferry cutover`, read by `ferry run
//! --fromCutover FILE`, which starts the reverse job (old sink → old
//! source) with a diff window from `sink.cutover_time` instead of a full
//! snapshot.

use ferry_engine::{SinkTime, SourceTime};
use serde::{Deserialize, Serialize};
use std::path::Path;

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
    pub final_end: SourceTime,
    /// A hybrid time of the new primary (the forward job's sink) at which
    /// it equals the old source at `final_end` (raw value): the reverse
    /// job's first diff window starts here.
    pub cutover_time: SinkTime,
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

/// Why a cutover report could not be written or read.
// The fields are named in each variant's message.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The file could not be written.
    #[error("cannot write the cutover report '{path}'")]
    Write {
        path: String,
        #[source]
        cause: std::io::Error,
    },
    /// The file could not be read.
    #[error("cannot read the cutover report '{path}'")]
    Read {
        path: String,
        #[source]
        cause: std::io::Error,
    },
    /// The file is not a cutover report.
    #[error("'{path}' is not a valid cutover report")]
    Invalid {
        path: String,
        #[source]
        cause: serde_json::Error,
    },
    /// A report of another format version.
    #[error("the cutover report '{path}' has format version {found}; this ferry reads version {CUTOVER_REPORT_VERSION}")]
    Version { path: String, found: u32 },
}

impl CutoverReport {
    /// Writes the report as pretty JSON to `path` (through a temporary
    /// file and a rename, so a reader never sees half a report).
    pub fn save(&self, path: &Path) -> Result<(), ReportError> {
        let shown = path.display().to_string();
        let write = |cause| ReportError::Write {
            path: shown.clone(),
            cause,
        };
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| write(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        bytes.push(b'\n');
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        // Synced before the rename: a crash leaves the old report or the
        // whole new one, never a torn file under the report's name.
        let mut file = std::fs::File::create(&tmp).map_err(write)?;
        std::io::Write::write_all(&mut file, &bytes).map_err(write)?;
        file.sync_all().map_err(write)?;
        std::fs::rename(&tmp, path).map_err(write)
    }

    /// Reads a report written by [`CutoverReport::save`].
    pub fn load(path: &Path) -> Result<CutoverReport, ReportError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|cause| ReportError::Read {
            path: shown.clone(),
            cause,
        })?;
        // The version first, so a newer report is named as such rather than
        // as a field mismatch.
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let invalid = |cause| ReportError::Invalid {
            path: shown.clone(),
            cause,
        };
        let v: Versioned = serde_json::from_slice(&bytes).map_err(invalid)?;
        if v.version != CUTOVER_REPORT_VERSION {
            return Err(ReportError::Version {
                path: shown,
                found: v.version,
            });
        }
        serde_json::from_slice(&bytes).map_err(invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_verify::{Method, TableSide, VerifyReport};

    fn report() -> CutoverReport {
        let side = |table: &str, timestamp| TableSide {
            masters: vec!["a:7051".into()],
            table: table.into(),
            timestamp,
            rows: 3,
        };
        CutoverReport {
            version: CUTOVER_REPORT_VERSION,
            job_id: "00112233445566778899aabbccddeeff".into(),
            savepoint: "file:///sp/savepoint-1".into(),
            source: CutoverSide {
                masters: vec!["a:7051".into()],
                table: "t".into(),
                table_id: Some("id1".into()),
            },
            sink: CutoverSide {
                masters: vec!["b:7051".into()],
                table: "t_copy".into(),
                table_id: None,
            },
            final_end: SourceTime::from_raw(7_000_000),
            cutover_time: SinkTime::from_raw(8_000_000),
            drained: true,
            equal: true,
            rpo_ms: 0,
            verify: VerifyReport {
                equal: true,
                source: side("t", 7_000_000),
                sink: side("t_copy", 8_000_000),
                columns: vec!["id".into()],
                skipped_columns: vec![],
                method: Method::Server,
                ranges: 1,
                ranges_differing: 0,
                rows_compared: 3,
                differences: 0,
                missing: 0,
                extra: 0,
                differing: 0,
                listed: vec![],
                truncated: false,
                repair: None,
                started_at_ms: 1,
                elapsed_ms: 2,
            },
            created_at_ms: 3,
        }
    }

    #[test]
    fn a_saved_report_loads_back_equal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cutover.json");
        report().save(&path).unwrap();
        assert_eq!(CutoverReport::load(&path).unwrap(), report());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"cutoverTime\": 8000000"), "{text}");
    }

    #[test]
    fn other_versions_and_other_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cutover.json");
        let mut r = report();
        r.version = 99;
        r.save(&path).unwrap();
        let e = CutoverReport::load(&path).unwrap_err().to_string();
        assert!(e.contains("format version 99"), "{e}");
        std::fs::write(&path, "{\"version\": 1}").unwrap();
        let e = CutoverReport::load(&path).unwrap_err();
        assert!(matches!(e, ReportError::Invalid { .. }), "{e}");
        let e = CutoverReport::load(&dir.path().join("none.json")).unwrap_err();
        assert!(matches!(e, ReportError::Read { .. }), "{e}");
    }
}
