//! What the engine's identities are, as types: a split of a window
//! ([`SplitId`]), a source table ([`TableId`]) and a table's chain within
//! a running job ([`TableKey`]). Each is its own type so one cannot be
//! passed where another is meant; the stored ones serialize as the bare
//! string they wrap, so states read as before they were typed.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The id of a split, unique within a window (a Kudu source: the tablet's
/// id and the split's number; a Kafka source: topic, partition and first
/// offset). Chosen by the source when it plans a window; opaque to the
/// engine.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SplitId(String);

impl SplitId {
    /// The split id `id`.
    pub fn new(id: impl Into<String>) -> Self {
        SplitId(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A source table's id, stable across renames (a Kudu table: the master's
/// 32-hex-digit id; a Kafka source: `kafka:<topic>`). Empty when unknown:
/// a state of an older build knew tables only by name, and a single-table
/// job started with [`crate::Job::start`] matches states by name.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TableId(String);

impl TableId {
    /// The table id `id`.
    pub fn new(id: impl Into<String>) -> Self {
        TableId(id.into())
    }

    /// No id: the table is known by name only.
    pub fn unknown() -> Self {
        TableId(String::new())
    }

    /// Whether the id is unknown (empty).
    pub fn is_unknown(&self) -> bool {
        self.0.is_empty()
    }

    /// The id as text (empty when unknown).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The key of one table's chain within a running job: pipeline events and
/// checkpoint captures say which chain they belong to with it. Never
/// stored; a restarted job numbers its chains afresh.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableKey(u64);

impl TableKey {
    /// The first key of a job.
    pub const FIRST: TableKey = TableKey(0);

    /// The key after this one.
    pub fn next(self) -> TableKey {
        TableKey(self.0 + 1)
    }
}

macro_rules! show_inner {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}
show_inner!(SplitId);
show_inner!(TableId);
show_inner!(TableKey);

impl fmt::Debug for SplitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SplitId({:?})", self.0)
    }
}

impl fmt::Debug for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TableId({:?})", self.0)
    }
}

impl fmt::Debug for TableKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TableKey({})", self.0)
    }
}

impl From<&str> for SplitId {
    fn from(id: &str) -> Self {
        SplitId::new(id)
    }
}

impl From<String> for SplitId {
    fn from(id: String) -> Self {
        SplitId(id)
    }
}

impl From<&str> for TableId {
    fn from(id: &str) -> Self {
        TableId::new(id)
    }
}

impl From<String> for TableId {
    fn from(id: String) -> Self {
        TableId(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_ids_serialize_as_the_bare_string() {
        let split = SplitId::new("tablet-00001");
        assert_eq!(
            serde_json::to_string(&split).expect("json"),
            "\"tablet-00001\""
        );
        let back: SplitId = serde_json::from_str("\"tablet-00001\"").expect("json");
        assert_eq!(back, split);
        let table: TableId = serde_json::from_str("\"\"").expect("json");
        assert!(table.is_unknown());
        assert_eq!(table, TableId::unknown());
        assert!(!TableId::from("a1b2").is_unknown());
        assert_eq!(format!("{split}"), "tablet-00001");
        assert_eq!(format!("{split:?}"), "SplitId(\"tablet-00001\")");
    }

    #[test]
    fn table_keys_count_up() {
        let k = TableKey::FIRST;
        assert_eq!(k.next().next().to_string(), "2");
        assert!(k < k.next());
    }
}
