//! Sections (a crate's keys of one concern, declared with
//! [`config_section!`](crate::config_section)) and the [`Registry`] that
//! composes them: name and alias lookup, "did you mean", duplicates.

use super::error::ConfigError;
use super::map::Config;
use super::option::AnyOption;
use super::spec::{closest_name, KeySpec};

/// Where a section's keys apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scope {
    /// A job's keys: part of the job's configuration, sent with a
    /// session-mode submission.
    Job,
    /// The process's keys (where it listens, its credentials): a session
    /// server takes them, a submission never carries them.
    Process,
}

/// A list of keys of one concern, owned by one crate.
#[derive(Debug)]
pub struct Section {
    /// A short title, e.g. `writer` or `Kafka sink`.
    pub title: &'static str,
    /// Where the keys apply.
    pub scope: Scope,
    /// Whether the keys may also be given as `-Dkey=value` (Flink's
    /// process-wide settings).
    pub dynamic: bool,
    /// The keys, in the order the docs list them.
    pub keys: &'static [&'static dyn AnyOption],
}

impl Section {
    /// An empty section of job keys.
    pub const fn job(title: &'static str) -> Self {
        Section {
            title,
            scope: Scope::Job,
            dynamic: false,
            keys: &[],
        }
    }

    /// An empty section of process keys (also given as `-D`).
    pub const fn process(title: &'static str) -> Self {
        Section {
            title,
            scope: Scope::Process,
            dynamic: true,
            keys: &[],
        }
    }

    /// The same section, its keys also given as `-Dkey=value`.
    pub const fn dynamic(mut self) -> Self {
        self.dynamic = true;
        self
    }

    /// The same section with these keys ([`config_section!`](crate::config_section)
    /// calls it).
    pub const fn with_keys(mut self, keys: &'static [&'static dyn AnyOption]) -> Self {
        self.keys = keys;
        self
    }

    /// Checks every given key of this section parses.
    pub fn check(&self, config: &Config) -> Result<(), ConfigError> {
        self.keys.iter().try_for_each(|k| k.check(config))
    }

    /// This section's keys in `config`, in canonical form (see
    /// [`Config::effective`]).
    pub fn effective(&self, config: &Config) -> Result<Config, ConfigError> {
        config.effective(self.keys.iter().copied())
    }
}

/// Sections composed into one set of keys: every key `ferry` takes (the
/// binary's registry) or a crate's own (the engine's, for
/// [`super::JobConfig::from_named_pairs`]).
#[derive(Debug, Clone, Copy)]
pub struct Registry {
    sections: &'static [&'static Section],
}

impl Registry {
    /// The keys of `sections`, in that order.
    pub const fn new(sections: &'static [&'static Section]) -> Self {
        Registry { sections }
    }

    /// The sections.
    pub fn sections(&self) -> impl Iterator<Item = &'static Section> {
        self.sections.iter().copied()
    }

    /// Every key with its section, in order.
    pub fn keys(&self) -> impl Iterator<Item = (&'static Section, &'static dyn AnyOption)> {
        self.sections()
            .flat_map(|s| s.keys.iter().map(move |k| (s, *k)))
    }

    /// Every key's spec, in order.
    pub fn specs(&self) -> impl Iterator<Item = &'static KeySpec> {
        self.keys().map(|(_, k)| k.spec())
    }

    /// The key with this name or alias (exact, case-sensitive).
    pub fn lookup(&self, name: &str) -> Option<(&'static Section, &'static dyn AnyOption)> {
        self.keys().find(|(_, k)| k.spec().answers_to(name))
    }

    /// The known name or alias closest to `name`, if one is close enough to
    /// be a plausible typo.
    pub fn suggest(&self, name: &str) -> Option<&'static str> {
        closest_name(
            name,
            self.specs()
                .flat_map(|s| std::iter::once(s.name).chain(s.aliases.iter().copied())),
        )
    }

    /// Collects `(name, value)` pairs. An unknown name is
    /// [`ConfigError::UnknownKey`] (with the nearest known key); a key
    /// given twice (also under an alias) is [`ConfigError::DuplicateKey`]
    /// rather than "last one wins", because a silently ignored value is
    /// worse than a refusal.
    pub fn config_from_pairs<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Config, ConfigError> {
        let mut config = Config::new();
        for (name, value) in pairs {
            let (_, key) = self.lookup(name).ok_or_else(|| ConfigError::UnknownKey {
                key: name.to_string(),
                suggestion: self.suggest(name),
            })?;
            if config.contains(key) {
                return Err(ConfigError::DuplicateKey {
                    key: key.name(),
                    place: "the given pairs".to_string(),
                });
            }
            config.set(key, value);
        }
        Ok(config)
    }
}
