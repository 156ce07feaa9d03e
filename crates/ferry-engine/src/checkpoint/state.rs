//! What a checkpoint or savepoint records: [`JobState`].
//!
//! The state mirrors the reference job's enumerator state (last end
//! timestamp, unassigned and pending splits) plus what ferry needs to resume
//! inside a split and to check it is restoring the right job. Split
//! descriptors and resume keys are opaque bytes here: the Kudu client
//! produces them and the engine fills them in, so this module stays free of
//! Kudu types. Bytes are stored as lowercase hex so `_metadata` payloads stay
//! readable JSON.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::identity::{SplitId, TableId};
use crate::time::SourceTime;

/// The `_metadata` format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// A job id: 16 bytes shown as 32 lowercase hex digits, like Flink's `JobID`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId([u8; 16]);

/// A string that is not 32 hex digits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid job id '{0}': expected 32 hex digits")]
pub struct InvalidJobId(pub String);

impl JobId {
    /// A fresh random id.
    pub fn random() -> Self {
        JobId(rand::random())
    }

    /// The id with these bytes.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        JobId(bytes)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The first 6 hex digits, as used in savepoint directory names.
    pub fn short(&self) -> String {
        let mut hex = self.to_string();
        hex.truncate(6);
        hex
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&to_hex(&self.0))
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobId({self})")
    }
}

impl FromStr for JobId {
    type Err = InvalidJobId;

    /// Accepts 32 hex digits in either case; displays in lowercase.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = from_hex(s).map_err(|_| InvalidJobId(s.to_string()))?;
        let bytes: [u8; 16] = bytes.try_into().map_err(|_| InvalidJobId(s.to_string()))?;
        Ok(JobId(bytes))
    }
}

impl Serialize for JobId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Whether a stored state is a periodic checkpoint or a user savepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotKind {
    /// Taken by the job on its own (`<dir>/<job-id>/chk-<N>`), subject to retention.
    Checkpoint,
    /// Taken on request (`savepoint-<job6>-<rand12>`), never deleted by ferry.
    Savepoint,
}

impl fmt::Display for SnapshotKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SnapshotKind::Checkpoint => "checkpoint",
            SnapshotKind::Savepoint => "savepoint",
        })
    }
}

/// The time range being replicated when the state was taken, on the
/// source's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowState {
    /// `None`: the initial full snapshot at `end_timestamp`. `Some(start)`:
    /// a diff scan of changes with `start <= ts < end_timestamp`.
    pub start_timestamp: Option<SourceTime>,
    /// Snapshot time of the scan (exclusive end of a diff window).
    pub end_timestamp: SourceTime,
}

impl WindowState {
    /// Whether this window is the initial full snapshot.
    pub fn is_snapshot(&self) -> bool {
        self.start_timestamp.is_none()
    }
}

/// One unit of work: a split of the current window, with its progress.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitState {
    /// Stable id of the split (unique within a state).
    pub split_id: SplitId,
    /// Serialized split descriptor (a Kudu scan token), opaque here.
    #[serde(with = "hex_bytes")]
    pub descriptor: Vec<u8>,
    /// Encoded primary key of the last row known to be flushed to the sink;
    /// a restart resumes the split after it. `None`: start from the beginning.
    #[serde(with = "hex_opt_bytes", default)]
    pub resume_key: Option<Vec<u8>>,
}

impl fmt::Debug for SplitState {
    // Descriptors can be kilobytes; show sizes, not bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SplitState")
            .field("split_id", &self.split_id)
            .field("descriptor_len", &self.descriptor.len())
            .field("resume_key", &self.resume_key.as_deref().map(to_hex))
            .finish()
    }
}

/// Everything a checkpoint or savepoint stores about a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobState {
    /// Payload format version; must equal the header's and [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The job this state belongs to.
    pub job_id: JobId,
    /// Checkpoint number (`chk-<N>`); savepoints carry the id they were
    /// taken at.
    pub checkpoint_id: u64,
    /// Checkpoint or savepoint.
    pub kind: SnapshotKind,
    /// When the state was taken, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Source table name.
    pub table_name: String,
    /// Source cluster masters.
    pub source_masters: Vec<String>,
    /// Sink cluster masters.
    pub sink_masters: Vec<String>,
    /// End (source time) of the last window whose every split was flushed
    /// to the sink; `None` until the initial snapshot is done. The next
    /// diff window starts here.
    pub last_end_timestamp: Option<SourceTime>,
    /// The window whose splits are listed below, if one is in progress.
    pub window: Option<WindowState>,
    /// Splits of `window` not yet handed to a reader.
    pub unassigned: Vec<SplitState>,
    /// Splits of `window` handed out but not yet known to be fully flushed
    /// (including finished ones awaiting this checkpoint); re-read from their
    /// resume key on restore.
    pub pending: Vec<SplitState>,
    /// A savepoint taken by the periodic schedule
    /// (`job.periodicSavepointInterval`): only these are subject to
    /// `job.periodicSavepointsRetained`. Absent (false) for checkpoints and
    /// user savepoints, so their `_metadata` is unchanged.
    #[serde(default, skip_serializing_if = "is_false")]
    pub periodic: bool,
    /// The lease generation of the instance that wrote this state (0
    /// without high availability); see [`crate::lease`]. Left out when 0,
    /// so states of jobs without a lease stay readable by older builds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u64,
    /// Every table of the job, each with its own window chain (written by
    /// builds that replicate many tables; see [`JobState::table_states`]).
    /// Empty in states of older builds: then the fields above are the one
    /// table's. When set it is authoritative, and the fields above mirror
    /// it ([`JobState::set_tables`]) so tools that read one table's
    /// `last_end_timestamp` keep working.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<TableState>,
    /// The shard of a job cut into shards (`job.shards`) that wrote this
    /// state: which one of how many, the split threshold and its tables.
    /// Absent for a job without shards (and in every older state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::ShardState>,
}

/// One table's part of a [`JobState`]: its identity and its window chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableState {
    /// The source table's id (stable across renames); empty in a state
    /// converted from an older build's, which knew only the name.
    pub table_id: TableId,
    /// The source table's name when the state was taken.
    pub table_name: String,
    /// The sink table's name when the state was taken.
    #[serde(default)]
    pub sink_table: String,
    /// As [`JobState::last_end_timestamp`], for this table.
    pub last_end_timestamp: Option<SourceTime>,
    /// As [`JobState::window`], for this table.
    pub window: Option<WindowState>,
    /// As [`JobState::unassigned`], for this table.
    #[serde(default)]
    pub unassigned: Vec<SplitState>,
    /// As [`JobState::pending`], for this table.
    #[serde(default)]
    pub pending: Vec<SplitState>,
    /// The source schema last applied to the sink (`job.schemaEvolution`):
    /// opaque to the engine (the connectors' [`crate::connector::SchemaRecord`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// Why the table is paused (replication of it stopped until the job is
    /// restarted), if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<String>,
    /// Where the source's next window starts, for sources whose windows do
    /// not follow from their end times alone (a Kafka source: each
    /// partition's next offset); opaque to the engine
    /// ([`crate::connector::Source::cursor`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_cursor: Option<serde_json::Value>,
}

impl TableState {
    /// A table with nothing done yet.
    pub fn new(table_id: impl Into<TableId>, table_name: impl Into<String>) -> Self {
        TableState {
            table_id: table_id.into(),
            table_name: table_name.into(),
            sink_table: String::new(),
            last_end_timestamp: None,
            window: None,
            unassigned: Vec::new(),
            pending: Vec::new(),
            schema: None,
            paused: None,
            source_cursor: None,
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl JobState {
    /// A state for `job_id` with nothing done yet: no window, no splits,
    /// current format version, `created_at_ms` = now.
    pub fn new(
        job_id: JobId,
        kind: SnapshotKind,
        checkpoint_id: u64,
        table_name: impl Into<String>,
        source_masters: Vec<String>,
        sink_masters: Vec<String>,
    ) -> Self {
        JobState {
            format_version: FORMAT_VERSION,
            job_id,
            checkpoint_id,
            kind,
            created_at_ms: crate::time::now_ms(),
            table_name: table_name.into(),
            source_masters,
            sink_masters,
            last_end_timestamp: None,
            window: None,
            unassigned: Vec::new(),
            pending: Vec::new(),
            periodic: false,
            generation: 0,
            tables: Vec::new(),
            shard: None,
        }
    }

    /// Every table's state: `tables`, or for a state of an older build the
    /// one table the top-level fields describe (its id unknown: empty).
    pub fn table_states(&self) -> Vec<TableState> {
        if !self.tables.is_empty() {
            return self.tables.clone();
        }
        vec![TableState {
            last_end_timestamp: self.last_end_timestamp,
            window: self.window,
            unassigned: self.unassigned.clone(),
            pending: self.pending.clone(),
            ..TableState::new(TableId::unknown(), self.table_name.clone())
        }]
    }

    /// Stores `tables` and mirrors them in the top-level fields: with one
    /// table, exactly its fields; with several, the names joined by commas,
    /// the smallest `last_end_timestamp` (everything before it is in the
    /// sink for every table; `None` if a table has none yet) and no window.
    pub fn set_tables(&mut self, tables: Vec<TableState>) {
        match tables.as_slice() {
            [one] => {
                self.table_name = one.table_name.clone();
                self.last_end_timestamp = one.last_end_timestamp;
                self.window = one.window;
                self.unassigned = one.unassigned.clone();
                self.pending = one.pending.clone();
            }
            many => {
                self.table_name = many
                    .iter()
                    .map(|t| t.table_name.as_str())
                    .collect::<Vec<_>>()
                    .join(",");
                self.last_end_timestamp = many
                    .iter()
                    .map(|t| t.last_end_timestamp)
                    .collect::<Option<Vec<SourceTime>>>()
                    .and_then(|ends| ends.into_iter().min());
                self.window = None;
                self.unassigned = Vec::new();
                self.pending = Vec::new();
            }
        }
        self.tables = tables;
    }

    /// Checks the invariants a writer must keep: current format version,
    /// a window with `start < end`, diff windows starting at
    /// `last_end_timestamp`, splits only with a window, unique split ids.
    pub fn validate(&self) -> Result<(), StateInvariant> {
        if self.format_version != FORMAT_VERSION {
            return Err(StateInvariant::FormatVersion {
                found: self.format_version,
            });
        }
        check_chain(
            self.last_end_timestamp,
            self.window.as_ref(),
            &self.unassigned,
            &self.pending,
        )?;
        let mut ids = std::collections::HashSet::new();
        for table in &self.tables {
            if !table.table_id.is_unknown() && !ids.insert(&table.table_id) {
                return Err(StateInvariant::DuplicateTable {
                    table_id: table.table_id.clone(),
                });
            }
            check_chain(
                table.last_end_timestamp,
                table.window.as_ref(),
                &table.unassigned,
                &table.pending,
            )?;
        }
        Ok(())
    }
}

/// One window chain's invariants: a window with `start < end`, diff
/// windows starting at `last_end`, splits only with a window, unique split
/// ids.
fn check_chain(
    last_end: Option<SourceTime>,
    window: Option<&WindowState>,
    unassigned: &[SplitState],
    pending: &[SplitState],
) -> Result<(), StateInvariant> {
    if let Some(window) = window {
        if let Some(start) = window.start_timestamp {
            if start >= window.end_timestamp {
                return Err(StateInvariant::EmptyWindow {
                    start,
                    end: window.end_timestamp,
                });
            }
            if last_end != Some(start) {
                return Err(StateInvariant::WindowNotChained { start, last_end });
            }
        }
    } else if !unassigned.is_empty() || !pending.is_empty() {
        return Err(StateInvariant::SplitsWithoutWindow);
    }
    let mut ids = std::collections::HashSet::new();
    for split in unassigned.iter().chain(pending) {
        if !ids.insert(&split.split_id) {
            return Err(StateInvariant::DuplicateSplit {
                split_id: split.split_id.clone(),
            });
        }
    }
    Ok(())
}

/// An invariant of [`JobState`] that a state breaks ([`JobState::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateInvariant {
    /// Written by another format version.
    #[error("format_version is {found}, this build handles {FORMAT_VERSION}")]
    FormatVersion {
        /// The state's version.
        found: u32,
    },
    /// A diff window that does not move forward.
    #[error("window start {start} is not before its end {end}")]
    EmptyWindow {
        /// Window start.
        start: SourceTime,
        /// Window end.
        end: SourceTime,
    },
    /// A diff window that does not start where the last one ended.
    #[error("diff window starts at {start} but last_end_timestamp is {last_end:?}")]
    WindowNotChained {
        /// Window start.
        start: SourceTime,
        /// The last completed window's end.
        last_end: Option<SourceTime>,
    },
    /// Splits recorded while no window is open.
    #[error("splits are recorded but no window is in progress")]
    SplitsWithoutWindow,
    /// The payload's format version differs from the file header's.
    #[error("payload says format version {payload} but the header says {header}")]
    HeaderVersion {
        /// The payload's version.
        payload: u32,
        /// The header's version.
        header: u32,
    },
    /// A checkpoint found under another checkpoint's name.
    #[error("it is checkpoint {checkpoint_id} of job {job_id}, found as chk-{found_id} of job {found_job}")]
    Misplaced {
        /// The id it records.
        checkpoint_id: u64,
        /// The job it records.
        job_id: JobId,
        /// The id of the directory it was found in.
        found_id: u64,
        /// The job directory it was found in.
        found_job: JobId,
    },
    /// Two table states with one table id.
    #[error("table id '{table_id}' appears twice")]
    DuplicateTable {
        /// The repeated id.
        table_id: TableId,
    },
    /// Two splits with one id.
    #[error("split id '{split_id}' appears twice")]
    DuplicateSplit {
        /// The repeated id.
        split_id: SplitId,
    },
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

pub(crate) fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", bytes.len()));
    }
    bytes
        .chunks_exact(2)
        .map(|pair| match (nibble(pair[0]), nibble(pair[1])) {
            (Some(hi), Some(lo)) => Ok(hi << 4 | lo),
            _ => Err(format!(
                "'{}' is not a hex byte",
                String::from_utf8_lossy(pair)
            )),
        })
        .collect()
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::to_hex(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        super::from_hex(&s).map_err(serde::de::Error::custom)
    }
}

mod hex_opt_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        bytes: &Option<Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(b) => s.serialize_some(&super::to_hex(b)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(s) => super::from_hex(&s)
                .map(Some)
                .map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(raw: u64) -> SourceTime {
        SourceTime::from_raw(raw)
    }

    fn split(id: &str) -> SplitState {
        SplitState {
            split_id: SplitId::new(id),
            descriptor: vec![0, 1, 2, 0xfe, 0xff],
            resume_key: None,
        }
    }

    #[test]
    fn job_id_text_form() {
        let id = JobId::from_bytes([
            0xa1, 0xb2, 0xc3, 0xd4, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0xff,
        ]);
        assert_eq!(id.to_string(), "a1b2c3d4000102030405060708090aff");
        assert_eq!(id.short(), "a1b2c3");
        assert_eq!(id.to_string().parse::<JobId>().ok(), Some(id));
        assert_eq!(
            id.to_string().to_uppercase().parse::<JobId>().ok(),
            Some(id)
        );
        for bad in [
            "",
            "abc",
            "g1b2c3d4000102030405060708090aff",
            "a1b2c3d4000102030405060708090aff00",
        ] {
            assert!(bad.parse::<JobId>().is_err(), "{bad}");
        }
        let random = JobId::random();
        assert_eq!(random.to_string().len(), 32);
        assert_ne!(random, JobId::random());
    }

    #[test]
    fn hex_round_trip() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&all)), Ok(all));
        assert!(from_hex("abc").is_err());
        assert!(from_hex("zz").is_err());
    }

    #[test]
    fn json_shape_is_readable() {
        let mut state = JobState::new(
            JobId::from_bytes([7; 16]),
            SnapshotKind::Checkpoint,
            4,
            "orders",
            vec!["s:7051".into()],
            vec!["k:7051".into()],
        );
        state.last_end_timestamp = Some(t(100));
        state.window = Some(WindowState {
            start_timestamp: Some(t(100)),
            end_timestamp: t(200),
        });
        state.pending = vec![SplitState {
            resume_key: Some(vec![0xab, 0xcd]),
            ..split("s1")
        }];
        let json = serde_json::to_string(&state).expect("serialize");
        assert!(
            json.contains("\"job_id\":\"07070707070707070707070707070707\""),
            "{json}"
        );
        assert!(json.contains("\"kind\":\"checkpoint\""), "{json}");
        assert!(json.contains("\"descriptor\":\"000102feff\""), "{json}");
        assert!(json.contains("\"resume_key\":\"abcd\""), "{json}");
        let back: JobState = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, state);
        assert!(state.validate().is_ok());
    }

    #[test]
    fn the_shard_is_stored_and_older_states_load_without_it() {
        let mut state = JobState::new(
            JobId::from_bytes([7; 16]),
            SnapshotKind::Checkpoint,
            4,
            "a,b",
            vec![],
            vec![],
        );
        state.set_tables(vec![
            TableState::new("id-a", "a"),
            TableState::new("id-b", "b"),
        ]);
        // A job without shards writes exactly what older builds wrote.
        let json = serde_json::to_string(&state).expect("serialize");
        assert!(!json.contains("shard"), "{json}");
        let back: JobState = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back.shard, None);
        assert_eq!(back, state);
        // An older build's state (written before shards existed) loads.
        let older = r#"{"format_version":1,"job_id":"07070707070707070707070707070707","checkpoint_id":2,"kind":"savepoint","created_at_ms":1,"table_name":"t","source_masters":[],"sink_masters":[],"last_end_timestamp":5,"window":null,"unassigned":[],"pending":[]}"#;
        let old: JobState = serde_json::from_str(older).expect("older state");
        assert_eq!(old.shard, None);
        assert_eq!(old.last_end_timestamp, Some(t(5)));
        // A shard's state keeps its spec, threshold and tables.
        state.shard = Some(crate::shard::ShardState {
            spec: crate::shard::ShardSpec::new(2, 3).expect("valid"),
            tablets_over: 8,
            tables: vec!["id-a".into(), "id-b".into()],
        });
        let json = serde_json::to_string(&state).expect("serialize");
        assert!(
            json.contains(r#""shard":{"spec":{"index":2,"count":3},"tablets_over":8,"tables":["id-a","id-b"]}"#),
            "{json}"
        );
        let back: JobState = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, state);
    }

    #[test]
    fn validation_rules() {
        let base = JobState::new(
            JobId::from_bytes([1; 16]),
            SnapshotKind::Checkpoint,
            1,
            "t",
            vec![],
            vec![],
        );
        assert!(base.validate().is_ok());

        let mut s = base.clone();
        s.format_version = 99;
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("format_version"));

        let mut s = base.clone();
        s.last_end_timestamp = Some(t(10));
        s.window = Some(WindowState {
            start_timestamp: Some(t(10)),
            end_timestamp: t(10),
        });
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("not before its end"));

        let mut s = base.clone();
        s.last_end_timestamp = Some(t(5));
        s.window = Some(WindowState {
            start_timestamp: Some(t(10)),
            end_timestamp: t(20),
        });
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("last_end_timestamp"));

        let mut s = base.clone();
        s.pending = vec![split("a")];
        assert!(s.validate().unwrap_err().to_string().contains("no window"));

        let mut s = base.clone();
        s.window = Some(WindowState {
            start_timestamp: None,
            end_timestamp: t(50),
        });
        s.unassigned = vec![split("a")];
        s.pending = vec![split("a")];
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("appears twice"));
        s.pending = vec![split("b")];
        assert!(s.validate().is_ok());
        assert!(s.window.is_some_and(|w| w.is_snapshot()));
    }
}
