//! Reading configuration, once per source.
//!
//! Every key ferry takes is a row of one of two catalogs of the same shape
//! ([`KeySpec`]): the job's keys (`job.*`, `reader.*`, `writer.*`, defined
//! by the engine's [`ConfigKey`]) and the process keys (`rest.*`,
//! `metrics.*`, [`ProcessKey`]). The command line (with `-D`) and the
//! `--config` TOML file are each read once into a [`Settings`] map from
//! [`Key`] to the value as given; the command line's map is laid over the
//! file's ([`Settings::overridden_by`]); the result is validated once into
//! `JobConfig` and `ProcessOptions`.
//!
//! A TOML file uses the same key names, flat and quoted
//! (`"job.tableName" = "t"`), dotted (`job.tableName = "t"`) or as tables
//! (`[job]` then `tableName = "t"`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferry_engine::config::{closest_name, ConfigKey, KeySpec, RawConfig, ValueKind};

use crate::process_opts::ProcessKey;

/// A key of either catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// `job.*`, `reader.*`, `writer.*`.
    Job(ConfigKey),
    /// `rest.*`, `metrics.*`, `s3.*`.
    Process(ProcessKey),
}

impl Key {
    /// The key with this name or alias (exact, case-sensitive).
    pub fn lookup(name: &str) -> Option<Key> {
        if let Ok(key) = name.parse::<ConfigKey>() {
            return Some(Key::Job(key));
        }
        ProcessKey::lookup(name).map(Key::Process)
    }

    /// The key's catalog row.
    pub fn spec(self) -> &'static KeySpec {
        match self {
            Key::Job(k) => k.spec(),
            Key::Process(k) => k.spec(),
        }
    }

    /// The key's name (never an alias).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The known name or alias closest to `name`, for "did you mean".
    fn suggest(name: &str) -> Option<&'static str> {
        closest_name(name, all_specs().flat_map(names_of))
    }

    /// `UnknownKey` for `name`, with a suggestion.
    fn unknown(name: &str) -> SettingsError {
        SettingsError::UnknownKey {
            key: name.to_string(),
            suggestion: Key::suggest(name),
        }
    }
}

fn names_of(spec: &'static KeySpec) -> impl Iterator<Item = &'static str> {
    std::iter::once(spec.name).chain(spec.aliases.iter().copied())
}

/// Every key's catalog row: the job's, then the process's.
pub fn all_specs() -> impl Iterator<Item = &'static KeySpec> {
    ConfigKey::specs().chain(ProcessKey::all().iter().map(|k| k.spec()))
}

/// Why the command line or a config file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// A key that is in neither catalog.
    #[error("unknown configuration key '{key}'{}", suggestion_text(.suggestion))]
    UnknownKey {
        key: String,
        suggestion: Option<&'static str>,
    },
    /// The same key (or an alias of it) twice in one source.
    #[error("key '{key}' is given more than once in {place}")]
    DuplicateKey { key: &'static str, place: String },
    /// `--key` with no value (a non-boolean key).
    #[error("missing value for --{key} (expected {hint})")]
    MissingValue {
        key: &'static str,
        hint: &'static str,
    },
    /// A flag of `ferry run` itself (`-p`, `--config`, …) with no value.
    #[error("{flag} needs a value")]
    MissingFlagValue { flag: String },
    /// Not `--key value`, `--key=value` or a known flag.
    #[error(
        "unexpected argument '{arg}': configuration is given as --<key> <value> or --<key>=<value>"
    )]
    UnexpectedArgument { arg: String },
    /// `-D` without `key=value`, or with a key that is not a process key.
    #[error("invalid -D{pair}: {reason}")]
    InvalidDynamic { pair: String, reason: String },
    /// A key this command does not use.
    #[error("'{key}' is not an option of {command}: {reason}")]
    NotHere {
        key: &'static str,
        command: &'static str,
        reason: &'static str,
    },
    /// The config file could not be read (the I/O error is part of the
    /// message: it is printed as a usage error, not as a chain).
    #[error("cannot read config file {}: {cause}", .path.display())]
    ReadFile {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// The config file is not valid TOML.
    #[error("{} is not valid TOML: {message}", display_file(.path))]
    InvalidToml {
        path: Option<PathBuf>,
        message: String,
    },
    /// A TOML value that is not a string, integer or boolean.
    #[error("key '{key}' in {} has a TOML {found}; use a string, integer or boolean", display_file(.path))]
    UnsupportedTomlValue {
        key: String,
        path: Option<PathBuf>,
        found: &'static str,
    },
}

fn suggestion_text(suggestion: &Option<&str>) -> String {
    match suggestion {
        Some(key) => format!(" (did you mean '{key}'?)"),
        None => {
            " (keys start with job., reader., writer., rest., metrics., s3. or security.; see --help for the list)"
                .to_string()
        }
    }
}

fn display_file(path: &Option<PathBuf>) -> String {
    match path {
        Some(path) => format!("config file {}", path.display()),
        None => "the config text".to_string(),
    }
}

/// Keys of both catalogs with their values as given, from one source (or
/// several, merged).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Settings {
    values: BTreeMap<Key, String>,
}

impl std::fmt::Debug for Settings {
    /// Values of secret keys (`s3.secret-key`, …) print as `***`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.values.iter().map(|(k, v)| {
                let shown = if k.spec().kind == ValueKind::Secret {
                    "***"
                } else {
                    v.as_str()
                };
                (k.name(), shown)
            }))
            .finish()
    }
}

impl Settings {
    /// Adds a value; the same key twice in one source is an error rather
    /// than "last one wins", because a silently ignored value is worse than
    /// a refusal to start.
    pub fn insert_once(
        &mut self,
        key: Key,
        value: impl Into<String>,
        place: &str,
    ) -> Result<(), SettingsError> {
        if self.values.contains_key(&key) {
            return Err(SettingsError::DuplicateKey {
                key: key.name(),
                place: place.to_string(),
            });
        }
        self.values.insert(key, value.into());
        Ok(())
    }

    /// Adds `--name value` / `--name=value` from the command line: `value`
    /// is the inline value, else `next` when it is not another `--…`; a
    /// boolean key with neither means `true`. Returns whether `next` was
    /// taken.
    pub fn insert_flag(
        &mut self,
        name: &str,
        inline: Option<&str>,
        next: Option<&str>,
    ) -> Result<bool, SettingsError> {
        let key = Key::lookup(name).ok_or_else(|| Key::unknown(name))?;
        let (value, took_next) = match (inline, next) {
            (Some(v), _) => (v, false),
            (None, Some(v)) if !v.starts_with("--") => (v, true),
            (None, _) if key.spec().kind == ValueKind::Bool => ("true", false),
            (None, _) => {
                return Err(SettingsError::MissingValue {
                    key: key.name(),
                    hint: key.spec().kind.hint(),
                })
            }
        };
        self.insert_once(key, value, "the command line")?;
        Ok(took_next)
    }

    /// Adds `-D key=value` (the text after `-D`): process keys and the
    /// `security.kerberos.login.*` keys, as in Flink, where `-D` sets the
    /// process's configuration.
    pub fn insert_dynamic(&mut self, pair: &str) -> Result<(), SettingsError> {
        // The value is not repeated in errors: it may be a secret.
        let invalid = |reason: String| SettingsError::InvalidDynamic {
            pair: match pair.split_once('=') {
                Some((name, _)) => format!("{name}=…"),
                None => pair.to_string(),
            },
            reason,
        };
        let Some((name, value)) = pair.split_once('=') else {
            return Err(invalid("expected -Dkey=value".into()));
        };
        match Key::lookup(name.trim()) {
            Some(key @ Key::Process(_)) => self.insert_once(key, value, "the command line"),
            // Flink sets its Kerberos login with -D too.
            Some(key @ Key::Job(k)) if k.section() == "security" => {
                self.insert_once(key, value, "the command line")
            }
            Some(Key::Job(key)) => Err(invalid(format!(
                "not a process option; give job keys as --{key} <value>"
            ))),
            None => Err(invalid(format!(
                "not a process option; known: {}",
                ProcessKey::all()
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Reads and parses a TOML config file.
    pub fn from_toml_file(path: &Path) -> Result<Self, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|cause| SettingsError::ReadFile {
            path: path.to_path_buf(),
            cause,
        })?;
        Self::parse_toml(&text, Some(path.to_path_buf()))
    }

    /// Parses TOML text (see the module docs for the accepted shapes).
    #[cfg(test)]
    pub fn from_toml_str(text: &str) -> Result<Self, SettingsError> {
        Self::parse_toml(text, None)
    }

    fn parse_toml(text: &str, path: Option<PathBuf>) -> Result<Self, SettingsError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| SettingsError::InvalidToml {
                    path: path.clone(),
                    message: e.to_string().trim_end().to_string(),
                })?;
        let mut leaves = Vec::new();
        flatten_toml(&table, "", &path, &mut leaves)?;
        let place = display_file(&path);
        let mut settings = Settings::default();
        for (name, value) in leaves {
            let key = Key::lookup(&name).ok_or_else(|| Key::unknown(&name))?;
            settings.insert_once(key, value, &place)?;
        }
        Ok(settings)
    }

    /// Layers `overrides` on top of `self`: a key given in both takes the
    /// value from `overrides`. Use as `file.overridden_by(cli)` so the
    /// command line wins over the file.
    pub fn overridden_by(mut self, overrides: Settings) -> Settings {
        self.values.extend(overrides.values);
        self
    }

    /// The value of a key, if given.
    #[cfg(test)]
    pub fn get(&self, key: Key) -> Option<&str> {
        self.values.get(&key).map(String::as_str)
    }

    /// The job's keys, for `JobConfig::from_raw`.
    pub fn job(&self) -> RawConfig {
        let mut raw = RawConfig::new();
        for (key, value) in &self.values {
            if let Key::Job(k) = key {
                raw.set(*k, value.clone());
            }
        }
        raw
    }

    /// The process keys, for `ProcessOptions::from_pairs`.
    pub fn process(&self) -> impl Iterator<Item = (ProcessKey, &str)> {
        self.values.iter().filter_map(|(key, value)| match key {
            Key::Process(k) => Some((*k, value.as_str())),
            Key::Job(_) => None,
        })
    }

    /// Drops the keys `keep` refuses (used by `ferry server`, which takes
    /// only its own keys from a config file shared with `ferry run`).
    pub fn retain(&mut self, mut keep: impl FnMut(Key) -> bool) {
        self.values.retain(|k, _| keep(*k));
    }

    /// Every key given, in catalog order.
    pub fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.values.keys().copied()
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
) -> Result<(), SettingsError> {
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
                return Err(SettingsError::UnsupportedTomlValue {
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
#[path = "settings_tests.rs"]
mod tests;
