//! The shape of one configuration key, shared by every key catalog.
//!
//! A catalog is a static table of [`KeySpec`] rows: the job's keys live in
//! this crate ([`super::ConfigKey`]), the process keys (`rest.*`,
//! `metrics.*`) in the `ferry` binary. Parsers, `--help` and the generated
//! docs all read these rows, so a key's name, default and doc are written
//! once.

/// Where a key's name comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyOrigin {
    /// Same name, meaning and default as Apache Kudu's Flink replication job,
    /// so existing command lines keep working.
    Reference,
    /// A Flink process option name (`rest.port`, …), so `-D` habits carry over.
    Flink,
    /// ferry's own key; neither the reference job nor Flink has it.
    Ferry,
}

/// What kind of value a key takes; drives parsing and the `--help` hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueKind {
    /// Free text (must not be empty).
    Text,
    /// Comma-separated `host[:port]` list of Kudu masters.
    MasterAddresses,
    /// Comma-separated `host:port` list of web (HTTP) addresses.
    HttpAddresses,
    /// A host name or IP address to listen on.
    Host,
    /// A TCP port, 0 to 65535.
    Port,
    /// A local path, `file://` URI or object store URI (`s3://bucket/prefix`).
    Location,
    /// A comma-separated list of locations (empty: none).
    Locations,
    /// A credential: accepted like text, never shown.
    Secret,
    /// `true` or `false`.
    Bool,
    /// A whole number of milliseconds, greater than zero.
    Millis,
    /// A whole number of milliseconds; zero switches the feature off.
    MillisOrZero,
    /// A whole number of seconds, greater than zero.
    Seconds,
    /// A whole number of bytes.
    Bytes,
    /// A whole count, greater than zero.
    Count,
    /// A whole count, zero or more.
    CountOrZero,
    /// A duration in Flink's syntax: `500 ms`, `10 s`, `1 min`, `1 h`, `2 d`
    /// (a bare number is milliseconds).
    Duration,
    /// A decimal number.
    Number,
    /// One of a fixed set of names.
    Enum(&'static [&'static str]),
}

impl ValueKind {
    /// A short placeholder for usage lines, e.g. `<ms>` or `<true|false>`.
    pub fn hint(self) -> &'static str {
        match self {
            ValueKind::Text => "<text>",
            ValueKind::MasterAddresses | ValueKind::HttpAddresses => "<host:port,...>",
            ValueKind::Host => "<host>",
            ValueKind::Port => "<port>",
            ValueKind::Location => "<path|s3://bucket/prefix>",
            ValueKind::Locations => "<location,...>",
            ValueKind::Secret => "<secret>",
            ValueKind::Bool => "<true|false>",
            ValueKind::Millis | ValueKind::MillisOrZero => "<ms>",
            ValueKind::Seconds => "<seconds>",
            ValueKind::Bytes => "<bytes>",
            ValueKind::Count | ValueKind::CountOrZero => "<count>",
            ValueKind::Duration => "<duration>",
            ValueKind::Number => "<number>",
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
    /// Computed from other keys or the environment; the text says how (for
    /// docs only).
    Derived(&'static str),
}

/// Everything known about one key: one row of a catalog.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    /// Exact, case-sensitive name, e.g. `job.tableName`.
    pub name: &'static str,
    /// Other names accepted for the same key (e.g. Flink's `rest.bind-port`).
    pub aliases: &'static [&'static str],
    /// Required, literal default, or derived default.
    pub default: KeyDefault,
    /// Value kind (parsing and `--help` hint).
    pub kind: ValueKind,
    /// Whose name this is.
    pub origin: KeyOrigin,
    /// One-line description.
    pub doc: &'static str,
}

impl KeySpec {
    /// A row without aliases (catalogs are `const` tables).
    pub const fn new(
        name: &'static str,
        default: KeyDefault,
        kind: ValueKind,
        origin: KeyOrigin,
        doc: &'static str,
    ) -> Self {
        KeySpec {
            name,
            aliases: &[],
            default,
            kind,
            origin,
            doc,
        }
    }

    /// The same row, also answering to `aliases`.
    pub const fn with_aliases(mut self, aliases: &'static [&'static str]) -> Self {
        self.aliases = aliases;
        self
    }

    /// The part of the name before the first dot (`job`, `rest`, …).
    pub fn section(&self) -> &'static str {
        self.name.split('.').next().unwrap_or(self.name)
    }

    /// Whether `name` is this key's name or one of its aliases.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }

    /// Whether the key must be given.
    pub fn is_required(&self) -> bool {
        self.default == KeyDefault::Required
    }

    /// The literal default, if the key has one.
    pub fn default_value(&self) -> Option<&'static str> {
        match self.default {
            KeyDefault::Value(v) => Some(v),
            KeyDefault::Required | KeyDefault::Derived(_) => None,
        }
    }

    /// The default as shown in help: `required`, the literal value (quoted
    /// when empty), or how it is derived.
    pub fn default_doc(&self) -> String {
        match self.default {
            KeyDefault::Required => "required".to_string(),
            KeyDefault::Value("") => "\"\"".to_string(),
            KeyDefault::Value(v) => v.to_string(),
            KeyDefault::Derived(how) => how.to_string(),
        }
    }
}

/// The name in `names` closest to `wanted`, if one is close enough to be a
/// plausible typo (case differences are free).
pub fn closest_name<'a>(wanted: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = wanted.to_ascii_lowercase();
    names
        .into_iter()
        .map(|n| (edit_distance(&wanted, &n.to_ascii_lowercase()), n))
        .filter(|&(d, n)| d <= (n.len() / 3).max(3))
        .min_by_key(|&(d, _)| d)
        .map(|(_, n)| n)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_and_closest_names() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        let names = ["rest.port", "metrics.port"];
        assert_eq!(closest_name("rest.prot", names), Some("rest.port"));
        assert_eq!(closest_name("completely.unrelated.thing", names), None);
    }

    #[test]
    fn spec_accessors() {
        let spec = KeySpec::new(
            "rest.port",
            KeyDefault::Value("8081"),
            ValueKind::Port,
            KeyOrigin::Flink,
            "port",
        )
        .with_aliases(&["rest.bind-port"]);
        assert_eq!(spec.section(), "rest");
        assert!(spec.answers_to("rest.bind-port") && spec.answers_to("rest.port"));
        assert!(!spec.answers_to("rest.address"));
        assert_eq!(spec.default_value(), Some("8081"));
        assert!(!spec.is_required());
    }
}
