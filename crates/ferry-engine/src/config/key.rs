//! The catalog of configuration keys, kept as data.
//!
//! Every key the job understands is one [`ConfigKey`] variant, and everything
//! a person needs to know about it (exact name, section, required or default,
//! value kind, one-line doc, whether it comes from the reference job or is
//! ferry's own) lives in one static table. `--help`, generated docs and the
//! parser all read that table, so they cannot drift apart.

use std::fmt;
use std::str::FromStr;

use super::error::ConfigError;

/// The section a key belongs to: the part of its name before the first dot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// `job.*`: what to replicate, where, how often to checkpoint.
    Job,
    /// `reader.*`: how the source table is scanned.
    Reader,
    /// `writer.*`: how rows are written to the sink table.
    Writer,
}

impl Section {
    /// The section prefix as written in key names (`job`, `reader`, `writer`).
    pub fn as_str(self) -> &'static str {
        match self {
            Section::Job => "job",
            Section::Reader => "reader",
            Section::Writer => "writer",
        }
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a key comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyOrigin {
    /// Same name, meaning and default as Apache Kudu's Flink replication job,
    /// so existing command lines keep working.
    Reference,
    /// ferry's own key; the reference job does not have it.
    Ferry,
}

/// What kind of value a key takes; drives parsing and the `--help` hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// Free text (must not be empty).
    Text,
    /// Comma-separated `host[:port]` list of Kudu masters.
    MasterAddresses,
    /// A local path or `file://` URI (object-store URIs later).
    Location,
    /// `true` or `false`.
    Bool,
    /// A whole number of milliseconds, greater than zero.
    Millis,
    /// A whole number of seconds, greater than zero.
    Seconds,
    /// A whole number of bytes.
    Bytes,
    /// A whole count, greater than zero.
    Count,
    /// One of a fixed set of names.
    Enum(&'static [&'static str]),
}

impl ValueKind {
    /// A short placeholder for usage lines, e.g. `<ms>` or `<true|false>`.
    pub fn hint(self) -> &'static str {
        match self {
            ValueKind::Text => "<text>",
            ValueKind::MasterAddresses => "<host:port,...>",
            ValueKind::Location => "<path|file:///path>",
            ValueKind::Bool => "<true|false>",
            ValueKind::Millis => "<ms>",
            ValueKind::Seconds => "<seconds>",
            ValueKind::Bytes => "<bytes>",
            ValueKind::Count => "<count>",
            ValueKind::Enum(_) => "<name>",
        }
    }
}

/// How a key gets its value when it is not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyDefault {
    /// The key must be given; there is no default.
    Required,
    /// This literal value, parsed like a user-supplied one.
    Value(&'static str),
    /// Computed from other keys; the text says how (for docs only).
    Derived(&'static str),
}

/// The valid names for `reader.replicaSelection`.
pub(crate) const REPLICA_SELECTION_NAMES: &[&str] = &["CLOSEST_REPLICA", "LEADER_ONLY"];
/// The valid names for `writer.flushMode`.
pub(crate) const FLUSH_MODE_NAMES: &[&str] =
    &["AUTO_FLUSH_BACKGROUND", "AUTO_FLUSH_SYNC", "MANUAL_FLUSH"];

/// Everything known about one key: one row of the catalog.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    /// The key this row describes.
    pub key: ConfigKey,
    /// Exact, case-sensitive name, e.g. `job.tableName`.
    pub name: &'static str,
    /// The key's section.
    pub section: Section,
    /// Required, literal default, or derived default.
    pub default: KeyDefault,
    /// Value kind (parsing and `--help` hint).
    pub kind: ValueKind,
    /// Reference job key or ferry's own.
    pub origin: KeyOrigin,
    /// One-line description.
    pub doc: &'static str,
}

/// One configuration key of a replication job.
///
/// Names, defaults and meanings follow Apache Kudu's Flink replication job
/// (`job.*`, `reader.*`, `writer.*`) except for the keys whose
/// [`origin`](ConfigKey::origin) is [`KeyOrigin::Ferry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ConfigKey {
    /// `job.sourceMasterAddresses`
    SourceMasterAddresses,
    /// `job.sinkMasterAddresses`
    SinkMasterAddresses,
    /// `job.tableName`
    TableName,
    /// `job.checkpointsDirectory`
    CheckpointsDirectory,
    /// `job.discoveryIntervalSeconds`
    DiscoveryIntervalSeconds,
    /// `job.checkpointingIntervalMillis`
    CheckpointingIntervalMillis,
    /// `job.createTable`
    CreateTable,
    /// `job.tableSuffix`
    TableSuffix,
    /// `job.restoreOwner`
    RestoreOwner,
    /// `job.checkpointsRetained` (ferry only)
    CheckpointsRetained,
    /// `job.name` (ferry only)
    JobName,
    /// `reader.batchSizeBytes`
    BatchSizeBytes,
    /// `reader.splitSizeBytes`
    SplitSizeBytes,
    /// `reader.scanRequestTimeout`
    ScanRequestTimeout,
    /// `reader.prefetching`
    Prefetching,
    /// `reader.keepAlivePeriodMs`
    KeepAlivePeriodMs,
    /// `reader.replicaSelection`
    ReplicaSelection,
    /// `writer.flushMode`
    FlushMode,
    /// `writer.operationTimeout`
    OperationTimeout,
    /// `writer.maxBufferSize`
    MaxBufferSize,
    /// `writer.flushInterval`
    FlushInterval,
    /// `writer.ignoreNotFound`
    IgnoreNotFound,
    /// `writer.ignoreDuplicate`
    IgnoreDuplicate,
}

// The catalog. Row i describes ALL[i]; a unit test checks the two line up.
const CATALOG: &[KeySpec] = &[
    KeySpec {
        key: ConfigKey::SourceMasterAddresses,
        name: "job.sourceMasterAddresses",
        section: Section::Job,
        default: KeyDefault::Required,
        kind: ValueKind::MasterAddresses,
        origin: KeyOrigin::Reference,
        doc: "Masters of the source Kudu cluster, comma-separated host:port.",
    },
    KeySpec {
        key: ConfigKey::SinkMasterAddresses,
        name: "job.sinkMasterAddresses",
        section: Section::Job,
        default: KeyDefault::Required,
        kind: ValueKind::MasterAddresses,
        origin: KeyOrigin::Reference,
        doc: "Masters of the sink Kudu cluster, comma-separated host:port.",
    },
    KeySpec {
        key: ConfigKey::TableName,
        name: "job.tableName",
        section: Section::Job,
        default: KeyDefault::Required,
        kind: ValueKind::Text,
        origin: KeyOrigin::Reference,
        doc: "Source table to replicate.",
    },
    KeySpec {
        key: ConfigKey::CheckpointsDirectory,
        name: "job.checkpointsDirectory",
        section: Section::Job,
        default: KeyDefault::Required,
        kind: ValueKind::Location,
        origin: KeyOrigin::Reference,
        doc:
            "Where checkpoints are kept (<dir>/<job-id>/chk-<N>/_metadata): a path or file:// URI.",
    },
    KeySpec {
        key: ConfigKey::DiscoveryIntervalSeconds,
        name: "job.discoveryIntervalSeconds",
        section: Section::Job,
        default: KeyDefault::Value("600"),
        kind: ValueKind::Seconds,
        origin: KeyOrigin::Reference,
        doc: "How often a new diff-scan window is opened.",
    },
    KeySpec {
        key: ConfigKey::CheckpointingIntervalMillis,
        name: "job.checkpointingIntervalMillis",
        section: Section::Job,
        default: KeyDefault::Value("60000"),
        kind: ValueKind::Millis,
        origin: KeyOrigin::Reference,
        doc: "How often a checkpoint is taken; must be below the discovery interval.",
    },
    KeySpec {
        key: ConfigKey::CreateTable,
        name: "job.createTable",
        section: Section::Job,
        default: KeyDefault::Value("false"),
        kind: ValueKind::Bool,
        origin: KeyOrigin::Reference,
        doc: "Create the sink table (schema and partitioning of the source) if it is absent.",
    },
    KeySpec {
        key: ConfigKey::TableSuffix,
        name: "job.tableSuffix",
        section: Section::Job,
        default: KeyDefault::Value(""),
        kind: ValueKind::Text,
        origin: KeyOrigin::Reference,
        doc: "Appended to the table name to name the sink table.",
    },
    KeySpec {
        key: ConfigKey::RestoreOwner,
        name: "job.restoreOwner",
        section: Section::Job,
        default: KeyDefault::Value("false"),
        kind: ValueKind::Bool,
        origin: KeyOrigin::Reference,
        doc: "With job.createTable, give the sink table the source table's owner.",
    },
    KeySpec {
        key: ConfigKey::CheckpointsRetained,
        name: "job.checkpointsRetained",
        section: Section::Job,
        default: KeyDefault::Value("3"),
        kind: ValueKind::Count,
        origin: KeyOrigin::Ferry,
        doc: "How many completed checkpoints to keep; older ones are deleted.",
    },
    KeySpec {
        key: ConfigKey::JobName,
        name: "job.name",
        section: Section::Job,
        default: KeyDefault::Derived("ferry-replication-<job.tableName>"),
        kind: ValueKind::Text,
        origin: KeyOrigin::Ferry,
        doc: "Job name shown in the REST API and metrics.",
    },
    KeySpec {
        key: ConfigKey::BatchSizeBytes,
        name: "reader.batchSizeBytes",
        section: Section::Reader,
        default: KeyDefault::Value("20971520"),
        kind: ValueKind::Bytes,
        origin: KeyOrigin::Reference,
        doc: "Bytes a tablet server returns per scan batch (20 MiB by default).",
    },
    KeySpec {
        key: ConfigKey::SplitSizeBytes,
        name: "reader.splitSizeBytes",
        section: Section::Reader,
        default: KeyDefault::Value("-1"),
        kind: ValueKind::Bytes,
        origin: KeyOrigin::Reference,
        doc: "Target bytes per split; -1 means one split per tablet.",
    },
    KeySpec {
        key: ConfigKey::ScanRequestTimeout,
        name: "reader.scanRequestTimeout",
        section: Section::Reader,
        default: KeyDefault::Value("30000"),
        kind: ValueKind::Millis,
        origin: KeyOrigin::Reference,
        doc: "Timeout of one scan request.",
    },
    KeySpec {
        key: ConfigKey::Prefetching,
        name: "reader.prefetching",
        section: Section::Reader,
        default: KeyDefault::Value("false"),
        kind: ValueKind::Bool,
        origin: KeyOrigin::Reference,
        doc: "Request the next scan batch while the current one is processed.",
    },
    KeySpec {
        key: ConfigKey::KeepAlivePeriodMs,
        name: "reader.keepAlivePeriodMs",
        section: Section::Reader,
        default: KeyDefault::Value("15000"),
        kind: ValueKind::Millis,
        origin: KeyOrigin::Reference,
        doc: "How often an idle open scanner is kept alive on its tablet server.",
    },
    KeySpec {
        key: ConfigKey::ReplicaSelection,
        name: "reader.replicaSelection",
        section: Section::Reader,
        default: KeyDefault::Value("CLOSEST_REPLICA"),
        kind: ValueKind::Enum(REPLICA_SELECTION_NAMES),
        origin: KeyOrigin::Reference,
        doc: "Which replica of a tablet to scan.",
    },
    KeySpec {
        key: ConfigKey::FlushMode,
        name: "writer.flushMode",
        section: Section::Writer,
        default: KeyDefault::Value("AUTO_FLUSH_BACKGROUND"),
        kind: ValueKind::Enum(FLUSH_MODE_NAMES),
        origin: KeyOrigin::Reference,
        doc: "Flush mode of the sink write session.",
    },
    KeySpec {
        key: ConfigKey::OperationTimeout,
        name: "writer.operationTimeout",
        section: Section::Writer,
        default: KeyDefault::Value("30000"),
        kind: ValueKind::Millis,
        origin: KeyOrigin::Reference,
        doc: "Timeout of one write operation.",
    },
    KeySpec {
        key: ConfigKey::MaxBufferSize,
        name: "writer.maxBufferSize",
        section: Section::Writer,
        default: KeyDefault::Value("1000"),
        kind: ValueKind::Count,
        origin: KeyOrigin::Reference,
        doc: "Operations buffered by the write session before it starts a flush; while earlier flushes are still in flight the buffer keeps filling, up to 1 MiB of rows.",
    },
    KeySpec {
        key: ConfigKey::FlushInterval,
        name: "writer.flushInterval",
        section: Section::Writer,
        default: KeyDefault::Value("1000"),
        kind: ValueKind::Millis,
        origin: KeyOrigin::Reference,
        doc: "Longest time a buffered operation waits before a background flush.",
    },
    KeySpec {
        key: ConfigKey::IgnoreNotFound,
        name: "writer.ignoreNotFound",
        section: Section::Writer,
        default: KeyDefault::Value("false"),
        kind: ValueKind::Bool,
        origin: KeyOrigin::Reference,
        doc: "Ignore not-found row errors (no effect: deletes are already DELETE_IGNORE).",
    },
    KeySpec {
        key: ConfigKey::IgnoreDuplicate,
        name: "writer.ignoreDuplicate",
        section: Section::Writer,
        default: KeyDefault::Value("false"),
        kind: ValueKind::Bool,
        origin: KeyOrigin::Reference,
        doc: "Ignore duplicate-row errors (no effect: writes are already UPSERT_IGNORE).",
    },
];

const ALL: &[ConfigKey] = &[
    ConfigKey::SourceMasterAddresses,
    ConfigKey::SinkMasterAddresses,
    ConfigKey::TableName,
    ConfigKey::CheckpointsDirectory,
    ConfigKey::DiscoveryIntervalSeconds,
    ConfigKey::CheckpointingIntervalMillis,
    ConfigKey::CreateTable,
    ConfigKey::TableSuffix,
    ConfigKey::RestoreOwner,
    ConfigKey::CheckpointsRetained,
    ConfigKey::JobName,
    ConfigKey::BatchSizeBytes,
    ConfigKey::SplitSizeBytes,
    ConfigKey::ScanRequestTimeout,
    ConfigKey::Prefetching,
    ConfigKey::KeepAlivePeriodMs,
    ConfigKey::ReplicaSelection,
    ConfigKey::FlushMode,
    ConfigKey::OperationTimeout,
    ConfigKey::MaxBufferSize,
    ConfigKey::FlushInterval,
    ConfigKey::IgnoreNotFound,
    ConfigKey::IgnoreDuplicate,
];

impl ConfigKey {
    /// Every key, in catalog order (required keys first, then by section).
    pub fn all() -> &'static [ConfigKey] {
        ALL
    }

    /// The catalog row of this key.
    pub fn spec(self) -> &'static KeySpec {
        // The enum has no explicit discriminants, so `self as usize` is its
        // position in ALL and in CATALOG (checked by a unit test).
        &CATALOG[self as usize]
    }

    /// Exact key name, e.g. `job.tableName`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The key's section.
    pub fn section(self) -> Section {
        self.spec().section
    }

    /// Whether the job refuses to start without this key.
    pub fn is_required(self) -> bool {
        self.spec().default == KeyDefault::Required
    }

    /// The literal default, if the key has one. Required keys and keys whose
    /// default is derived from other keys (see [`ConfigKey::default_doc`])
    /// return `None`.
    pub fn default_value(self) -> Option<&'static str> {
        match self.spec().default {
            KeyDefault::Value(v) => Some(v),
            KeyDefault::Required | KeyDefault::Derived(_) => None,
        }
    }

    /// The default as shown in help: `required`, the literal value (quoted
    /// when empty), or how it is derived.
    pub fn default_doc(self) -> String {
        match self.spec().default {
            KeyDefault::Required => "required".to_string(),
            KeyDefault::Value("") => "\"\"".to_string(),
            KeyDefault::Value(v) => v.to_string(),
            KeyDefault::Derived(how) => how.to_string(),
        }
    }

    /// The kind of value the key takes.
    pub fn kind(self) -> ValueKind {
        self.spec().kind
    }

    /// One-line description.
    pub fn doc(self) -> &'static str {
        self.spec().doc
    }

    /// Whether the key comes from the reference job or is ferry's own.
    pub fn origin(self) -> KeyOrigin {
        self.spec().origin
    }

    /// The known key closest to `name`, if any is close enough to be a
    /// plausible typo (case differences are free).
    pub fn suggest(name: &str) -> Option<ConfigKey> {
        let wanted = name.to_ascii_lowercase();
        ALL.iter()
            .map(|&k| (edit_distance(&wanted, &k.name().to_ascii_lowercase()), k))
            .filter(|&(d, k)| d <= (k.name().len() / 3).max(3))
            .min_by_key(|&(d, _)| d)
            .map(|(_, k)| k)
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ConfigKey {
    type Err = ConfigError;

    /// Exact, case-sensitive lookup; an unknown name yields
    /// [`ConfigError::UnknownKey`] with the nearest known key.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL.iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| ConfigError::UnknownKey {
                key: s.to_string(),
                suggestion: ConfigKey::suggest(s),
            })
    }
}

/// Levenshtein distance over bytes; key names are ASCII.
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &ca) in a.as_bytes().iter().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitution.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Plain-text reference of every key, grouped by section, for `--help`.
///
/// Each key takes one line `--<name> <hint>  <doc> [default]`; ferry-only
/// keys are tagged `(ferry)`.
pub fn render_help() -> String {
    let width = ALL
        .iter()
        .map(|k| k.name().len() + k.kind().hint().len() + 3)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for section in [Section::Job, Section::Reader, Section::Writer] {
        out.push_str(&format!("{section}.* keys:\n"));
        for key in ALL.iter().filter(|k| k.section() == section) {
            let usage = format!("--{} {}", key.name(), key.kind().hint());
            let tag = match key.origin() {
                KeyOrigin::Ferry => " (ferry)",
                KeyOrigin::Reference => "",
            };
            let values = match key.kind() {
                ValueKind::Enum(names) => format!(" One of {}.", names.join(", ")),
                _ => String::new(),
            };
            out.push_str(&format!(
                "  {usage:<width$}  {}{values}{tag} [{}]\n",
                key.doc(),
                key.default_doc()
            ));
        }
    }
    out
}

/// Markdown table of every key (name, required/default, kind, origin, doc)
/// for the user documentation.
pub fn render_markdown() -> String {
    let mut out = String::from("| key | default | value | origin | description |\n");
    out.push_str("| --- | --- | --- | --- | --- |\n");
    for key in ALL {
        let origin = match key.origin() {
            KeyOrigin::Reference => "reference job",
            KeyOrigin::Ferry => "ferry only",
        };
        let mut doc = key.doc().to_string();
        if let ValueKind::Enum(names) = key.kind() {
            doc.push_str(&format!(" One of `{}`.", names.join("`, `")));
        }
        out.push_str(&format!(
            "| `{}` | {} | `{}` | {} | {} |\n",
            key.name(),
            key.default_doc(),
            key.kind().hint(),
            origin,
            doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_rows_line_up_with_the_enum() {
        assert_eq!(CATALOG.len(), ALL.len());
        for (i, key) in ALL.iter().enumerate() {
            assert_eq!(CATALOG[i].key, *key, "catalog row {i}");
            assert_eq!(*key as usize, i, "{key:?} position");
            assert!(
                key.name().starts_with(&format!("{}.", key.section())),
                "{} is in section {}",
                key.name(),
                key.section()
            );
            assert!(!key.doc().is_empty());
        }
    }

    #[test]
    fn names_are_unique_and_round_trip() {
        for key in ConfigKey::all() {
            assert_eq!(key.name().parse::<ConfigKey>().ok(), Some(*key));
            assert_eq!(key.to_string(), key.name());
        }
        let mut names: Vec<_> = ConfigKey::all().iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ConfigKey::all().len());
    }

    #[test]
    fn reference_names_and_defaults() {
        // Straight from the reference job's parser (job reference §1.9).
        let expected: &[(&str, Option<&str>)] = &[
            ("job.sourceMasterAddresses", None),
            ("job.sinkMasterAddresses", None),
            ("job.tableName", None),
            ("job.checkpointsDirectory", None),
            ("job.discoveryIntervalSeconds", Some("600")),
            ("job.checkpointingIntervalMillis", Some("60000")),
            ("job.createTable", Some("false")),
            ("job.tableSuffix", Some("")),
            ("job.restoreOwner", Some("false")),
            ("reader.batchSizeBytes", Some("20971520")),
            ("reader.splitSizeBytes", Some("-1")),
            ("reader.scanRequestTimeout", Some("30000")),
            ("reader.prefetching", Some("false")),
            ("reader.keepAlivePeriodMs", Some("15000")),
            ("reader.replicaSelection", Some("CLOSEST_REPLICA")),
            ("writer.flushMode", Some("AUTO_FLUSH_BACKGROUND")),
            ("writer.operationTimeout", Some("30000")),
            ("writer.maxBufferSize", Some("1000")),
            ("writer.flushInterval", Some("1000")),
            ("writer.ignoreNotFound", Some("false")),
            ("writer.ignoreDuplicate", Some("false")),
        ];
        for (name, default) in expected {
            let key: ConfigKey = name.parse().expect("known key");
            assert_eq!(key.origin(), KeyOrigin::Reference, "{name}");
            assert_eq!(key.default_value(), *default, "{name}");
            assert_eq!(key.is_required(), default.is_none(), "{name}");
        }
        let reference = ConfigKey::all()
            .iter()
            .filter(|k| k.origin() == KeyOrigin::Reference)
            .count();
        assert_eq!(reference, expected.len());
    }

    #[test]
    fn ferry_only_keys_are_marked() {
        let ferry: Vec<_> = ConfigKey::all()
            .iter()
            .filter(|k| k.origin() == KeyOrigin::Ferry)
            .map(|k| k.name())
            .collect();
        assert_eq!(ferry, ["job.checkpointsRetained", "job.name"]);
        assert_eq!(ConfigKey::CheckpointsRetained.default_value(), Some("3"));
        assert_eq!(ConfigKey::JobName.default_value(), None);
        assert!(!ConfigKey::JobName.is_required());
        assert_eq!(
            ConfigKey::JobName.default_doc(),
            "ferry-replication-<job.tableName>"
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            ConfigKey::suggest("job.tablename"),
            Some(ConfigKey::TableName)
        );
        assert_eq!(
            ConfigKey::suggest("job.tableNmae"),
            Some(ConfigKey::TableName)
        );
        assert_eq!(ConfigKey::suggest("tableName"), Some(ConfigKey::TableName));
        assert_eq!(
            ConfigKey::suggest("reader.batchSize"),
            Some(ConfigKey::BatchSizeBytes)
        );
        assert_eq!(
            ConfigKey::suggest("writer.flushmode"),
            Some(ConfigKey::FlushMode)
        );
        assert_eq!(ConfigKey::suggest("completely.unrelated.thing"), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn help_lists_every_key_with_default() {
        let help = render_help();
        for key in ConfigKey::all() {
            let line = help
                .lines()
                .find(|l| l.contains(&format!("--{} ", key.name())))
                .unwrap_or_else(|| panic!("{} missing from help", key.name()));
            assert!(line.contains(&key.default_doc()), "{line}");
            assert_eq!(
                line.contains("(ferry)"),
                key.origin() == KeyOrigin::Ferry,
                "{line}"
            );
        }
        assert!(help.contains("One of CLOSEST_REPLICA, LEADER_ONLY."));
        let md = render_markdown();
        assert_eq!(md.lines().count(), ConfigKey::all().len() + 2);
        assert!(md.contains("| `job.name` | ferry-replication-<job.tableName> |"));
    }
}
