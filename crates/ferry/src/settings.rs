//! Reading configuration, once per source.
//!
//! Every key ferry takes is one constant of a section of the crate that
//! owns it: the engine's job keys (`job.*`, `reader.*`, `writer.*`, `throttle.*`,
//! `restart-strategy.*`, `high-availability.*`, Kerberos), `ferry-kafka`'s
//! Kafka sink and source keys, `ferry-objstore`'s `s3.*` keys and this
//! binary's process keys (`rest.*`, `metrics.*`, `security.ssl.rest.*`).
//! [`KEYS`] composes them into one registry. The command line (with `-D`),
//! the `--config` TOML file and a session-mode submission are each read
//! once into a [`Settings`] map of key → value as given; the command line's
//! map is laid over the file's ([`Settings::overridden_by`]); the result is
//! validated once into `JobConfig`, the Kafka settings and
//! `ProcessOptions`.
//!
//! A TOML file uses the same key names, flat and quoted
//! (`"job.tableName" = "t"`), dotted (`job.tableName = "t"`) or as tables
//! (`[job]` then `tableName = "t"`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferry_engine::config::{
    self as engine, AnyOption, Config, Registry, Scope, Section, ValueKind,
};
use ferry_kafka::config::{KAFKA_SINK_KEYS, KAFKA_SOURCE_KEYS};

use crate::process_opts::{KUDU_METRICS_KEYS, REST_SECURITY_KEYS, SERVER_KEYS};

/// Every key `ferry` takes, section by section, in the order `--help` and
/// docs/configuration.md list them.
pub static KEYS: Registry = Registry::new(&[
    &engine::JOB_KEYS,
    &engine::TABLE_KEYS,
    &engine::SHARD_KEYS,
    &engine::SINK_KIND_KEYS,
    &KAFKA_SINK_KEYS,
    &engine::SOURCE_KIND_KEYS,
    &KAFKA_SOURCE_KEYS,
    &engine::READER_KEYS,
    &engine::WRITER_KEYS,
    &engine::THROTTLE_KEYS,
    &engine::RESTART_KEYS,
    &engine::HA_KEYS,
    &engine::HA_ZOOKEEPER_KEYS,
    &engine::KUBERNETES_HA_KEYS,
    &engine::KERBEROS_LOGIN_KEYS,
    &engine::KERBEROS_CLUSTER_KEYS,
    &SERVER_KEYS,
    &KUDU_METRICS_KEYS,
    &ferry_objstore::S3_KEYS,
    &REST_SECURITY_KEYS,
]);

/// A known key (by name or alias) and its section.
type Known = (&'static Section, &'static dyn AnyOption);

/// Keys that were removed, and what replaced them: an old configuration
/// that sets one is refused with this (rather than "unknown key").
const REMOVED_KEYS: &[(&str, &str)] = &[
    (
        "metrics.kudu.sourceMasterHttpAddresses",
        "tablet servers are found through the Kudu client's tablet-server list; remove the key",
    ),
    (
        "metrics.kudu.sinkMasterHttpAddresses",
        "tablet servers are found through the Kudu client's tablet-server list; remove the key",
    ),
];

fn lookup(name: &str) -> Result<Known, SettingsError> {
    if let Some(&(key, reason)) = REMOVED_KEYS
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
    {
        return Err(SettingsError::RemovedKey { key, reason });
    }
    KEYS.lookup(name).ok_or_else(|| SettingsError::UnknownKey {
        key: name.to_string(),
        suggestion: KEYS.suggest(name),
    })
}

/// Every key's spec: the job's, then the process's.
pub fn all_specs() -> impl Iterator<Item = &'static engine::KeySpec> {
    KEYS.specs()
}

/// Why the command line or a config file could not be read.
// The fields are named in each variant's message.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// A key that is in no section.
    #[error("unknown configuration key '{key}'{}", suggestion_text(.suggestion))]
    UnknownKey {
        key: String,
        suggestion: Option<&'static str>,
    },
    /// A bad per-bucket S3 key or value (`s3.bucket.<bucket>.<key>`).
    #[error(transparent)]
    BucketKey(#[from] ferry_objstore::BucketKeyError),
    /// The same per-bucket key twice in one source.
    #[error("key '{key}' is given more than once in {place}")]
    DuplicateBucketKey { key: String, place: String },
    /// `--s3.bucket.<bucket>.<key>` with no value.
    #[error("missing value for --{key}")]
    MissingBucketValue { key: String },
    /// A key that ferry no longer has.
    #[error("configuration key '{key}' was removed: {reason}")]
    RemovedKey {
        key: &'static str,
        reason: &'static str,
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

/// Keys with their values as given, from one source (or several, merged).
/// Values of secret keys (`s3.secret-key`, …) print as `***`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    values: Config,
    /// `s3.bucket.<bucket>.<key>` (per-bucket S3 settings: the names are
    /// the user's, so they are not catalog keys), checked when given.
    buckets: BTreeMap<String, String>,
}

impl Settings {
    /// Adds a value; the same key twice in one source is an error rather
    /// than "last one wins", because a silently ignored value is worse than
    /// a refusal to start.
    pub fn insert_once(
        &mut self,
        key: &'static dyn AnyOption,
        value: impl Into<String>,
        place: &str,
    ) -> Result<(), SettingsError> {
        if self.values.contains(key) {
            return Err(SettingsError::DuplicateKey {
                key: key.name(),
                place: place.to_string(),
            });
        }
        self.values.set(key, value);
        Ok(())
    }

    /// Adds a per-bucket S3 key (`s3.bucket.<bucket>.<key>`), checked.
    fn insert_bucket_key(
        &mut self,
        name: &str,
        value: &str,
        place: &str,
    ) -> Result<(), SettingsError> {
        ferry_objstore::S3Settings::default().set_bucket_key(name, value)?;
        if self.buckets.contains_key(name) {
            return Err(SettingsError::DuplicateBucketKey {
                key: name.to_string(),
                place: place.to_string(),
            });
        }
        self.buckets.insert(name.to_string(), value.to_string());
        Ok(())
    }

    /// `s3` with the per-bucket keys given (`s3.bucket.<bucket>.*`).
    pub fn with_bucket_keys(
        &self,
        mut s3: ferry_objstore::S3Settings,
    ) -> Result<ferry_objstore::S3Settings, SettingsError> {
        for (name, value) in &self.buckets {
            s3.set_bucket_key(name, value)?;
        }
        Ok(s3)
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
        if ferry_objstore::is_bucket_key(name) {
            let (value, took_next) = match (inline, next) {
                (Some(v), _) => (v, false),
                (None, Some(v)) if !v.starts_with("--") => (v, true),
                (None, _) => {
                    return Err(SettingsError::MissingBucketValue {
                        key: name.to_string(),
                    })
                }
            };
            self.insert_bucket_key(name, value, "the command line")?;
            return Ok(took_next);
        }
        let (_, key) = lookup(name)?;
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

    /// Adds `-D key=value` (the text after `-D`): the keys of the sections
    /// that take `-D` (the process keys, `metrics.kudu.*` and the
    /// `security.kerberos.login.*` keys), as in Flink, where `-D` sets the
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
        if ferry_objstore::is_bucket_key(name.trim()) {
            return self.insert_bucket_key(name.trim(), value, "the command line");
        }
        match KEYS.lookup(name.trim()) {
            Some((section, key)) if section.dynamic => {
                self.insert_once(key, value, "the command line")
            }
            Some((_, key)) => Err(invalid(format!(
                "not a process option; give job keys as --{} <value>",
                key.name()
            ))),
            None => Err(invalid(format!(
                "not a process option; known: {}",
                KEYS.keys()
                    .filter(|(section, _)| section.dynamic)
                    .map(|(_, k)| k.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// A session-mode submission's keys: job keys only (a process key is
    /// the server's own and never travels with a job).
    pub fn from_submission(map: &BTreeMap<String, String>) -> Result<Self, SettingsError> {
        let mut settings = Settings::default();
        for (name, value) in map {
            let (section, key) = lookup(name)?;
            if section.scope == Scope::Process {
                return Err(SettingsError::NotHere {
                    key: key.name(),
                    command: "a job submission",
                    reason: "it is a process key; the server uses its own",
                });
            }
            settings.insert_once(key, value.clone(), "the submission")?;
        }
        Ok(settings)
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
            if ferry_objstore::is_bucket_key(&name) {
                settings.insert_bucket_key(&name, &value, &place)?;
                continue;
            }
            let (_, key) = lookup(&name)?;
            settings.insert_once(key, value, &place)?;
        }
        Ok(settings)
    }

    /// Layers `overrides` on top of `self`: a key given in both takes the
    /// value from `overrides`. Use as `file.overridden_by(cli)` so the
    /// command line wins over the file.
    pub fn overridden_by(self, overrides: Settings) -> Settings {
        let mut buckets = self.buckets;
        buckets.extend(overrides.buckets);
        Settings {
            values: self.values.overridden_by(overrides.values),
            buckets,
        }
    }

    /// The value of a key, if given.
    #[cfg(test)]
    pub fn get(&self, key: &dyn AnyOption) -> Option<&str> {
        self.values.raw(key)
    }

    /// Every key given, for the sections' `from_config`.
    pub fn config(&self) -> &Config {
        &self.values
    }

    /// The job's keys (every key that is not a process key).
    pub fn job(&self) -> Config {
        let mut job = self.values.clone();
        job.retain(|name| {
            KEYS.lookup(name)
                .is_some_and(|(s, _)| s.scope == Scope::Job)
        });
        job
    }

    /// Drops the keys whose section `keep` refuses (used by `ferry server`,
    /// which takes only its own keys from a config file shared with `ferry
    /// run`).
    pub fn retain(&mut self, mut keep: impl FnMut(&Section) -> bool) {
        self.values
            .retain(|name| KEYS.lookup(name).is_some_and(|(s, _)| keep(s)));
    }

    /// Every key given, by name.
    pub fn keys(&self) -> impl Iterator<Item = Known> + '_ {
        self.values.iter().filter_map(|(name, _)| KEYS.lookup(name))
    }

    /// Every job key with its effective value (given or literal default)
    /// in canonical form; derived defaults nobody gave are left out.
    pub fn effective_job_keys(&self) -> Result<Config, engine::ConfigError> {
        self.values.effective(
            KEYS.keys()
                .filter(|(s, _)| s.scope == Scope::Job)
                .map(|(_, k)| k),
        )
    }

    /// The job's keys as a session-mode submission carries them: by name,
    /// values as given, except that locations (`job.checkpointsDirectory`,
    /// …) are made absolute so the server neither resolves paths against
    /// its own working directory nor reads the client's.
    pub fn submission(&self) -> Result<BTreeMap<String, String>, engine::ConfigError> {
        self.job()
            .iter()
            .filter_map(|(name, value)| KEYS.lookup(name).map(|(_, key)| (key, value)))
            .map(|(key, value)| {
                let value = match key.spec().kind {
                    ValueKind::Location | ValueKind::Locations if !value.trim().is_empty() => key
                        .normalize(value)
                        .map_err(|e| engine::ConfigError::invalid(key.spec(), value, e))?,
                    _ => value.to_string(),
                };
                Ok((key.name().to_string(), value))
            })
            .collect()
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
