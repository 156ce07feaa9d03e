//! Configuration errors.
//!
//! All of them are the user's to fix, so every message names the offending
//! key and value and says what would be accepted.

use super::option::ValueError;
use super::spec::{KeySpec, ValueKind};

const TABLE_NAME: &str = "job.tableName";
const TABLE_PATTERN: &str = "job.tablePattern";
const CHECKPOINTING_INTERVAL: &str = "job.checkpointingIntervalMillis";
const DISCOVERY_INTERVAL: &str = "job.discoveryIntervalSeconds";
const SHARDS: &str = "job.shards";

/// Why a job configuration was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required key was not given. The message keeps the reference job's
    /// wording ("No data for required key '…'") so scripts that grep for it
    /// keep working.
    #[error("No data for required key '{key}' (it has no default)")]
    MissingRequired {
        /// The missing key.
        key: &'static str,
    },

    /// Neither `job.tableName` nor `job.tablePattern` was given, so the job
    /// would replicate nothing. Starts like [`ConfigError::MissingRequired`]
    /// (the reference job requires `job.tableName`).
    #[error(
        "No data for required key '{}' and no '{}': name the table(s) to replicate in {} \
         (comma-separated) or give a regular expression matching whole table names in {}",
        TABLE_NAME,
        TABLE_PATTERN,
        TABLE_NAME,
        TABLE_PATTERN
    )]
    NoTables,

    /// A key that is in none of the sections.
    #[error("unknown configuration key '{key}'{}", suggestion_text(.suggestion))]
    UnknownKey {
        /// The key as given.
        key: String,
        /// The nearest known key, when one is close enough.
        suggestion: Option<&'static str>,
    },

    /// Not a whole number.
    #[error("invalid value '{value}' for key '{key}': expected a whole number")]
    InvalidNumber {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
    },

    /// A whole number outside the key's range (e.g. a non-positive interval).
    #[error("invalid value '{value}' for key '{key}': {expected}")]
    OutOfRange {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
        /// What the key accepts, e.g. "must be greater than 0".
        expected: String,
    },

    /// Not `true` or `false`.
    #[error("invalid value '{value}' for key '{key}': expected true or false")]
    InvalidBool {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
    },

    /// Not one of the key's enum names.
    #[error("invalid value '{value}' for key '{key}': expected one of {}", .valid.join(", "))]
    InvalidEnum {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
        /// The accepted names.
        valid: &'static [&'static str],
    },

    /// A text, address list or location value that cannot be used.
    #[error("invalid value '{value}' for key '{key}': {reason}")]
    InvalidValue {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },

    /// `job.checkpointingIntervalMillis` is not strictly below
    /// `job.discoveryIntervalSeconds` × 1000. The message starts like the
    /// reference job's.
    #[error(
        "Checkpointing interval ({checkpointing_ms} ms) must be < discovery interval ({discovery_ms} ms). \
         Lower '{}' (now {checkpointing_ms}) or raise '{}' (now {}): a new window opens only after a \
         checkpoint has completed",
        CHECKPOINTING_INTERVAL,
        DISCOVERY_INTERVAL,
        .discovery_ms / 1000
    )]
    CheckpointIntervalTooLong {
        /// `job.checkpointingIntervalMillis`.
        checkpointing_ms: u128,
        /// `job.discoveryIntervalSeconds` in milliseconds.
        discovery_ms: u128,
    },

    /// The same key appears twice in one source (command line, file, or
    /// list of pairs).
    #[error("key '{key}' is given more than once in {place}")]
    DuplicateKey {
        /// The repeated key.
        key: &'static str,
        /// Where: "the command line", a file's path, …
        place: String,
    },

    /// A known key whose given value ferry refuses on purpose
    /// (the reason says why, and what to do instead).
    #[error("'{key}={value}' is not supported: {reason}")]
    Unsupported {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
        /// Why, and what to give instead.
        reason: &'static str,
    },

    /// A shard the job does not have ([`super::JobConfig::for_shard`]).
    #[error("there is no shard {index}: job.shards is {shards}, so the shards are numbered 0 to {}", .shards.saturating_sub(1))]
    NoSuchShard {
        /// The shard asked for.
        index: u32,
        /// `job.shards`.
        shards: u32,
    },

    /// A shard's configuration split again ([`super::JobConfig::for_shard`]).
    #[error("this configuration is {shard} already; shard {requested} is made from the whole job's configuration (job.shards)")]
    AlreadyAShard {
        /// The shard it is.
        shard: crate::shard::ShardSpec,
        /// The shard asked for.
        requested: u32,
    },
}

impl ConfigError {
    /// The name of the key the error is about, when it is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::MissingRequired { key }
            | ConfigError::InvalidNumber { key, .. }
            | ConfigError::OutOfRange { key, .. }
            | ConfigError::InvalidBool { key, .. }
            | ConfigError::InvalidEnum { key, .. }
            | ConfigError::InvalidValue { key, .. }
            | ConfigError::DuplicateKey { key, .. }
            | ConfigError::Unsupported { key, .. } => Some(key),
            ConfigError::CheckpointIntervalTooLong { .. } => Some(CHECKPOINTING_INTERVAL),
            ConfigError::UnknownKey { key, .. } => Some(key),
            ConfigError::NoTables => Some(TABLE_NAME),
            ConfigError::NoSuchShard { .. } | ConfigError::AlreadyAShard { .. } => Some(SHARDS),
        }
    }

    /// `value` of the key `spec` describes is refused for `why`; the value
    /// of a secret key is not repeated.
    pub fn invalid(spec: &KeySpec, value: &str, why: ValueError) -> Self {
        let key = spec.name;
        let value = if spec.kind == ValueKind::Secret {
            "***".to_string()
        } else {
            value.to_string()
        };
        match why {
            ValueError::NotANumber => ConfigError::InvalidNumber { key, value },
            ValueError::NotABool => ConfigError::InvalidBool { key, value },
            ValueError::NotOneOf(valid) => ConfigError::InvalidEnum { key, value, valid },
            ValueError::OutOfRange(expected) => ConfigError::OutOfRange {
                key,
                value,
                expected,
            },
            ValueError::Invalid(reason) => ConfigError::InvalidValue { key, value, reason },
        }
    }
}

fn suggestion_text(suggestion: &Option<&'static str>) -> String {
    match suggestion {
        Some(key) => format!(" (did you mean '{key}'?)"),
        None => " (job keys start with job., reader. or writer.)".to_string(),
    }
}
