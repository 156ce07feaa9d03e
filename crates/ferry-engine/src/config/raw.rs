//! Step one of configuration: collecting raw `key → string` pairs.
//!
//! Values come from the command line (`--job.tableName t` or
//! `--job.tableName=t`, as the reference job takes them) and from a TOML file
//! that uses the same key names, either flat and quoted
//! (`"job.tableName" = "t"`) or as tables (`[job]` then `tableName = "t"`).
//! This step only checks that every key is known and given once per source;
//! values are interpreted in step two ([`super::JobConfig::from_raw`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::key::{ConfigKey, ValueKind};

/// Known keys with their values as given, not yet interpreted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawConfig {
    values: BTreeMap<ConfigKey, String>,
}

impl RawConfig {
    /// An empty configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses command-line style arguments: `--key value` or `--key=value`.
    ///
    /// A boolean key given as a bare `--key` (at the end, or followed by
    /// another `--…`) means `true`. A key given twice is an error rather than
    /// "last one wins", because a silently ignored value is worse than a
    /// refusal to start.
    pub fn from_args<I, S>(args: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut raw = RawConfig::new();
        let mut args = args.into_iter().peekable();
        while let Some(arg) = args.next() {
            let arg = arg.as_ref();
            let Some(body) = arg.strip_prefix("--").filter(|b| !b.is_empty()) else {
                return Err(ConfigError::UnexpectedArgument {
                    arg: arg.to_string(),
                });
            };
            let (key, value) = match body.split_once('=') {
                Some((name, value)) => (name.parse::<ConfigKey>()?, value.to_string()),
                None => {
                    let key = body.parse::<ConfigKey>()?;
                    let next_is_value = args
                        .peek()
                        .is_some_and(|next| !next.as_ref().starts_with("--"));
                    match args.next_if(|_| next_is_value) {
                        Some(value) => (key, value.as_ref().to_string()),
                        None if key.kind() == ValueKind::Bool => (key, "true".to_string()),
                        None => return Err(ConfigError::MissingValue { key }),
                    }
                }
            };
            raw.insert_once(key, value, "the command line")?;
        }
        Ok(raw)
    }

    /// Parses TOML text (see the module docs for the accepted shapes).
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        Self::parse_toml(text, None)
    }

    /// Reads and parses a TOML config file.
    pub fn from_toml_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_toml(&text, Some(path.to_path_buf()))
    }

    fn parse_toml(text: &str, path: Option<PathBuf>) -> Result<Self, ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ConfigError::InvalidToml {
                    path: path.clone(),
                    message: e.to_string().trim_end().to_string(),
                })?;
        let mut leaves = Vec::new();
        flatten_toml(&table, "", &path, &mut leaves)?;
        let place = match &path {
            Some(p) => p.display().to_string(),
            None => "the config text".to_string(),
        };
        let mut raw = RawConfig::new();
        for (name, value) in leaves {
            raw.insert_once(name.parse()?, value, &place)?;
        }
        Ok(raw)
    }

    /// Sets a key, replacing any earlier value (for programmatic use).
    pub fn set(&mut self, key: ConfigKey, value: impl Into<String>) {
        self.values.insert(key, value.into());
    }

    /// Removes a key.
    pub fn remove(&mut self, key: ConfigKey) -> Option<String> {
        self.values.remove(&key)
    }

    /// The raw value of a key, if given.
    pub fn get(&self, key: ConfigKey) -> Option<&str> {
        self.values.get(&key).map(String::as_str)
    }

    /// Every given key and its value, in catalog order.
    pub fn iter(&self) -> impl Iterator<Item = (ConfigKey, &str)> {
        self.values.iter().map(|(k, v)| (*k, v.as_str()))
    }

    /// Layers `overrides` on top of `self`: a key given in both takes the
    /// value from `overrides`. Use as `file.overridden_by(cli)` so the
    /// command line wins over the file.
    pub fn overridden_by(mut self, overrides: RawConfig) -> RawConfig {
        self.values.extend(overrides.values);
        self
    }

    fn insert_once(
        &mut self,
        key: ConfigKey,
        value: String,
        place: &str,
    ) -> Result<(), ConfigError> {
        if self.values.contains_key(&key) {
            return Err(ConfigError::DuplicateKey {
                key,
                place: place.to_string(),
            });
        }
        self.values.insert(key, value);
        Ok(())
    }
}

/// Turns nested tables into dotted names. Both `[job] tableName = "t"` and
/// `"job.tableName" = "t"` end up as `job.tableName`; deeper or odd nestings
/// just produce names that fail the catalog lookup with a suggestion.
fn flatten_toml(
    table: &toml::Table,
    prefix: &str,
    path: &Option<PathBuf>,
    out: &mut Vec<(String, String)>,
) -> Result<(), ConfigError> {
    for (name, value) in table {
        let full = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let text = match value {
            toml::Value::Table(inner) => {
                flatten_toml(inner, &full, path, out)?;
                continue;
            }
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                return Err(ConfigError::UnsupportedTomlValue {
                    key: full,
                    path: path.clone(),
                    found: other.type_str(),
                })
            }
        };
        out.push((full, text));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_space_and_equals_forms() {
        let raw = RawConfig::from_args([
            "--job.tableName",
            "t1",
            "--job.sourceMasterAddresses=a:7051,b:7051",
            "--reader.splitSizeBytes",
            "-1",
            "--job.tableSuffix=",
            "--writer.flushMode=MANUAL_FLUSH",
        ])
        .expect("valid args");
        assert_eq!(raw.get(ConfigKey::TableName), Some("t1"));
        assert_eq!(
            raw.get(ConfigKey::SourceMasterAddresses),
            Some("a:7051,b:7051")
        );
        // A negative number is a value, not a key.
        assert_eq!(raw.get(ConfigKey::SplitSizeBytes), Some("-1"));
        assert_eq!(raw.get(ConfigKey::TableSuffix), Some(""));
        assert_eq!(raw.get(ConfigKey::FlushMode), Some("MANUAL_FLUSH"));
        // `=` inside the value is kept.
        let raw = RawConfig::from_args(["--job.name=a=b"]).expect("valid");
        assert_eq!(raw.get(ConfigKey::JobName), Some("a=b"));
    }

    #[test]
    fn bare_boolean_flag_means_true() {
        let raw = RawConfig::from_args(["--job.createTable", "--reader.prefetching"])
            .expect("valid args");
        assert_eq!(raw.get(ConfigKey::CreateTable), Some("true"));
        assert_eq!(raw.get(ConfigKey::Prefetching), Some("true"));
    }

    #[test]
    fn missing_value_for_non_boolean() {
        let err = RawConfig::from_args(["--job.tableName"]).unwrap_err();
        assert!(matches!(
            err,
            ConfigError::MissingValue {
                key: ConfigKey::TableName
            }
        ));
        assert!(err.to_string().contains("--job.tableName"), "{err}");
        let err = RawConfig::from_args(["--job.tableName", "--job.createTable"]).unwrap_err();
        assert!(matches!(err, ConfigError::MissingValue { .. }), "{err}");
    }

    #[test]
    fn unknown_key_suggests_nearest() {
        let err = RawConfig::from_args(["--job.tablename", "t"]).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(
                &err,
                ConfigError::UnknownKey { key, suggestion: Some(ConfigKey::TableName) } if key == "job.tablename"
            ),
            "{err:?}"
        );
        assert!(msg.contains("'job.tablename'"), "{msg}");
        assert!(msg.contains("did you mean 'job.tableName'?"), "{msg}");
        let err = RawConfig::from_args(["--zzz=1"]).unwrap_err();
        assert!(err.to_string().contains("see --help"), "{err}");
    }

    #[test]
    fn positional_and_single_dash_arguments_are_rejected() {
        for bad in ["t1", "-job.tableName", "--", "--=x"] {
            let err = RawConfig::from_args([bad]).unwrap_err();
            match bad {
                "--=x" => assert!(matches!(err, ConfigError::UnknownKey { .. }), "{err}"),
                _ => assert!(
                    matches!(err, ConfigError::UnexpectedArgument { .. }),
                    "{bad}: {err}"
                ),
            }
        }
    }

    #[test]
    fn duplicate_on_command_line_is_rejected() {
        let err = RawConfig::from_args(["--job.tableName=a", "--job.tableName", "b"]).unwrap_err();
        assert!(matches!(
            err,
            ConfigError::DuplicateKey {
                key: ConfigKey::TableName,
                ..
            }
        ));
        assert!(err.to_string().contains("'job.tableName'"), "{err}");
    }

    #[test]
    fn toml_flat_and_nested_shapes_agree() {
        let flat = RawConfig::from_toml_str(
            r#"
            "job.tableName" = "t"
            "job.discoveryIntervalSeconds" = 30
            "job.createTable" = true
            "reader.replicaSelection" = "LEADER_ONLY"
            "#,
        )
        .expect("flat TOML");
        let nested = RawConfig::from_toml_str(
            r#"
            [job]
            tableName = "t"
            discoveryIntervalSeconds = 30
            createTable = true

            [reader]
            replicaSelection = "LEADER_ONLY"
            "#,
        )
        .expect("nested TOML");
        let dotted = RawConfig::from_toml_str(
            r#"
            job.tableName = "t"
            job.discoveryIntervalSeconds = 30
            job.createTable = true
            reader.replicaSelection = "LEADER_ONLY"
            "#,
        )
        .expect("dotted TOML");
        assert_eq!(flat, nested);
        assert_eq!(flat, dotted);
        assert_eq!(flat.get(ConfigKey::DiscoveryIntervalSeconds), Some("30"));
        assert_eq!(flat.get(ConfigKey::CreateTable), Some("true"));
    }

    #[test]
    fn toml_errors() {
        let err = RawConfig::from_toml_str("[job]\ntableNam = \"t\"").unwrap_err();
        assert!(
            err.to_string().contains("did you mean 'job.tableName'?"),
            "{err}"
        );
        let err = RawConfig::from_toml_str("\"job.tableName\" = \"a\"\n[job]\ntableName = \"b\"")
            .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::DuplicateKey {
                    key: ConfigKey::TableName,
                    ..
                }
            ),
            "{err}"
        );
        let err = RawConfig::from_toml_str("[job]\ntableName = [\"a\"]").unwrap_err();
        assert!(
            matches!(&err, ConfigError::UnsupportedTomlValue { key, found: "array", .. } if key == "job.tableName"),
            "{err}"
        );
        let err = RawConfig::from_toml_str("job.tableName = ").unwrap_err();
        assert!(matches!(err, ConfigError::InvalidToml { .. }), "{err}");
        assert!(err.to_string().contains("not valid TOML"), "{err}");
    }

    #[test]
    fn toml_file_read_errors_name_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope.toml");
        let err = RawConfig::from_toml_file(&missing).unwrap_err();
        assert!(matches!(err, ConfigError::ReadFile { .. }));
        assert!(err.to_string().contains("nope.toml"), "{err}");

        let file = dir.path().join("job.toml");
        std::fs::write(&file, "[job]\ntableName = 5.5\n").expect("write");
        let err = RawConfig::from_toml_file(&file).unwrap_err();
        assert!(err.to_string().contains("job.toml"), "{err}");
        assert!(err.to_string().contains("float"), "{err}");
    }

    #[test]
    fn command_line_overrides_file() {
        let file =
            RawConfig::from_toml_str("[job]\ntableName = \"from_file\"\ntableSuffix = \"_f\"")
                .expect("toml");
        let cli = RawConfig::from_args(["--job.tableName", "from_cli"]).expect("args");
        let merged = file.overridden_by(cli);
        assert_eq!(merged.get(ConfigKey::TableName), Some("from_cli"));
        assert_eq!(merged.get(ConfigKey::TableSuffix), Some("_f"));
    }
}
