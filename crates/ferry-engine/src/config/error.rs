//! Configuration errors.
//!
//! All of them are the user's to fix, so every message names the offending
//! key and value and says what would be accepted.

use super::key::ConfigKey;

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
        key: ConfigKey,
    },

    /// Neither `job.tableName` nor `job.tablePattern` was given, so the job
    /// would replicate nothing. Starts like [`ConfigError::MissingRequired`]
    /// (the reference job requires `job.tableName`).
    #[error(
        "No data for required key '{}' and no '{}': name the table(s) to replicate in {} \
         (comma-separated) or give a regular expression matching whole table names in {}",
        ConfigKey::TableName,
        ConfigKey::TablePattern,
        ConfigKey::TableName,
        ConfigKey::TablePattern
    )]
    NoTables,

    /// A key that is not in the catalog.
    #[error("unknown configuration key '{key}'{}", suggestion_text(.suggestion))]
    UnknownKey {
        /// The key as given.
        key: String,
        /// The nearest known key, when one is close enough.
        suggestion: Option<ConfigKey>,
    },

    /// Not a whole number.
    #[error("invalid value '{value}' for key '{key}': expected a whole number")]
    InvalidNumber {
        /// The key.
        key: ConfigKey,
        /// The value as given.
        value: String,
    },

    /// A whole number outside the key's range (e.g. a non-positive interval).
    #[error("invalid value '{value}' for key '{key}': {expected}")]
    OutOfRange {
        /// The key.
        key: ConfigKey,
        /// The value as given.
        value: String,
        /// What the key accepts, e.g. "must be greater than 0".
        expected: String,
    },

    /// Not `true` or `false`.
    #[error("invalid value '{value}' for key '{key}': expected true or false")]
    InvalidBool {
        /// The key.
        key: ConfigKey,
        /// The value as given.
        value: String,
    },

    /// Not one of the key's enum names.
    #[error("invalid value '{value}' for key '{key}': expected one of {}", .valid.join(", "))]
    InvalidEnum {
        /// The key.
        key: ConfigKey,
        /// The value as given.
        value: String,
        /// The accepted names.
        valid: &'static [&'static str],
    },

    /// A text, address list or location value that cannot be used.
    #[error("invalid value '{value}' for key '{key}': {reason}")]
    InvalidValue {
        /// The key.
        key: ConfigKey,
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
        ConfigKey::CheckpointingIntervalMillis,
        ConfigKey::DiscoveryIntervalSeconds,
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
        key: ConfigKey,
        /// Where: "the command line", a file's path, …
        place: String,
    },

    /// A key the catalog knows whose given value ferry refuses on purpose
    /// (the reason says why, and what to do instead).
    #[error("'{key}={value}' is not supported: {reason}")]
    Unsupported {
        /// The key.
        key: ConfigKey,
        /// The value as given.
        value: String,
        /// Why, and what to give instead.
        reason: &'static str,
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
            | ConfigError::Unsupported { key, .. } => Some(key.name()),
            ConfigError::CheckpointIntervalTooLong { .. } => {
                Some(ConfigKey::CheckpointingIntervalMillis.name())
            }
            ConfigError::UnknownKey { key, .. } => Some(key),
            ConfigError::NoTables => Some(ConfigKey::TableName.name()),
        }
    }
}

fn suggestion_text(suggestion: &Option<ConfigKey>) -> String {
    match suggestion {
        Some(key) => format!(" (did you mean '{key}'?)"),
        None => " (job keys start with job., reader. or writer.)".to_string(),
    }
}
