//! Step one of configuration: known keys with their values as given.
//!
//! Where the values come from (command line, `-D`, a TOML file, a REST
//! submission) is the caller's business; the `ferry` binary reads each of
//! those once into one map and hands the job's keys over as a
//! [`RawConfig`]. Values are interpreted in step two
//! ([`super::JobConfig::from_raw`]).

use std::collections::BTreeMap;

use super::error::ConfigError;
use super::key::ConfigKey;

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

    /// Collects `(name, value)` pairs. An unknown name is
    /// [`ConfigError::UnknownKey`] (with the nearest known key); a name
    /// given twice is [`ConfigError::DuplicateKey`] rather than "last one
    /// wins", because a silently ignored value is worse than a refusal.
    pub fn from_named_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ConfigError> {
        let mut raw = RawConfig::new();
        for (name, value) in pairs {
            let key: ConfigKey = name.parse()?;
            if raw.values.contains_key(&key) {
                return Err(ConfigError::DuplicateKey {
                    key,
                    place: "the given pairs".to_string(),
                });
            }
            raw.set(key, value);
        }
        Ok(raw)
    }

    /// Sets a key, replacing any earlier value.
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_pairs() {
        let raw = RawConfig::from_named_pairs([("job.tableName", "t"), ("job.tableSuffix", "")])
            .expect("valid");
        assert_eq!(raw.get(ConfigKey::TableName), Some("t"));
        assert_eq!(raw.get(ConfigKey::TableSuffix), Some(""));
        let err = RawConfig::from_named_pairs([("job.tablename", "t")]).unwrap_err();
        assert!(
            err.to_string().contains("did you mean 'job.tableName'?"),
            "{err}"
        );
        let err = RawConfig::from_named_pairs([("job.tableName", "a"), ("job.tableName", "b")])
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
    }
}
