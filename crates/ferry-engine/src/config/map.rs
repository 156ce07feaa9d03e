//! [`Config`]: keys with their values as given (step one of
//! configuration), read typed with [`Config::get`].
//!
//! Where the values come from (command line, `-D`, a TOML file, a REST
//! submission) is the caller's business; the `ferry` binary reads each of
//! those once, resolves names and aliases against its
//! [`Registry`](super::Registry), and hands the map over.

use std::collections::BTreeMap;
use std::fmt;

use super::error::ConfigError;
use super::option::{AnyOption, ConfigOption};
use super::spec::{KeyDefault, ValueKind};

/// Keys (by name, never an alias) with their values as given.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Config {
    values: BTreeMap<&'static str, Entry>,
}

#[derive(Clone, PartialEq, Eq)]
struct Entry {
    value: String,
    /// Never shown (debug output, errors).
    secret: bool,
}

impl fmt::Debug for Config {
    /// Values of secret keys print as `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.values
                    .iter()
                    .map(|(name, e)| (name, if e.secret { "***" } else { e.value.as_str() })),
            )
            .finish()
    }
}

impl Config {
    /// An empty configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a key, replacing any earlier value.
    pub fn set<K: AnyOption + ?Sized>(&mut self, key: &K, value: impl Into<String>) {
        let entry = Entry {
            value: value.into(),
            secret: key.spec().kind == ValueKind::Secret,
        };
        self.values.insert(key.name(), entry);
    }

    /// Removes a key, returning its value.
    pub fn remove<K: AnyOption + ?Sized>(&mut self, key: &K) -> Option<String> {
        self.values.remove(key.name()).map(|e| e.value)
    }

    /// Whether the key was given (blank or not).
    pub fn contains<K: AnyOption + ?Sized>(&self, key: &K) -> bool {
        self.values.contains_key(key.name())
    }

    /// The value as given, blank or not.
    pub fn raw<K: AnyOption + ?Sized>(&self, key: &K) -> Option<&str> {
        self.values.get(key.name()).map(|e| e.value.as_str())
    }

    /// The value as given; `None` also when it is blank and blank means
    /// the default for this key.
    pub fn given<K: AnyOption + ?Sized>(&self, key: &K) -> Option<&str> {
        self.raw(key)
            .filter(|v| !(key.blank_means_default() && v.trim().is_empty()))
    }

    /// The value as given, else the literal default (text, for messages).
    pub fn text<K: AnyOption + ?Sized>(&self, key: &K) -> Option<&str> {
        match (self.given(key), key.spec().default) {
            (Some(text), _) | (None, KeyDefault::Value(text)) => Some(text),
            (None, _) => None,
        }
    }

    /// The key's typed value: given, else its literal default; `None` when
    /// it has neither (a derived default, for its section to compute). A
    /// value that does not parse is an error naming the key and the value.
    pub fn get_optional<T>(&self, key: &ConfigOption<T>) -> Result<Option<T>, ConfigError> {
        let Some(text) = self.text(key) else {
            return Ok(None);
        };
        key.parse(text)
            .map(Some)
            .map_err(|e| ConfigError::invalid(key.spec(), text, e))
    }

    /// The key's typed value, given or default; a key with neither is
    /// [`ConfigError::MissingRequired`].
    pub fn get<T>(&self, key: &ConfigOption<T>) -> Result<T, ConfigError> {
        self.get_optional(key)?
            .ok_or(ConfigError::MissingRequired { key: key.name() })
    }

    /// Every given key and its value, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.values.iter().map(|(k, e)| (*k, e.value.as_str()))
    }

    /// Whether nothing is given.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `self` with `overrides` laid over it: a key given in both takes the
    /// value from `overrides`.
    pub fn overridden_by(mut self, overrides: Config) -> Config {
        self.values.extend(overrides.values);
        self
    }

    /// The keys `keep` accepts (by name).
    pub fn retain(&mut self, mut keep: impl FnMut(&'static str) -> bool) {
        self.values.retain(|name, _| keep(name));
    }

    /// Every key of `keys` in canonical form (given or literal default;
    /// keys with a derived default and no value are left out): the
    /// configuration as it is used, which read again gives the same.
    pub fn effective<'a>(
        &self,
        keys: impl IntoIterator<Item = &'a dyn AnyOption>,
    ) -> Result<Config, ConfigError> {
        let mut out = Config::new();
        for key in keys {
            if let Some(value) = key.effective(self)? {
                out.set(key, value);
            }
        }
        Ok(out)
    }
}
