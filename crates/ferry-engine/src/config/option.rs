//! One configuration key as one constant: [`ConfigOption<T>`] carries the
//! key's name, aliases, origin, value kind, default, doc, and its typed
//! parser and printer (the pattern of Flink's `ConfigOption<T>`).
//!
//! Keys are declared in sections with [`config_section!`](crate::config_section),
//! which defines the constants and the section's list together, so adding
//! a key is one edit in one file. Reading is typed:
//! `config.get(&TABLE_NAME)?` (see [`super::Config`]).

use std::fmt;
use std::num::NonZeroUsize;
use std::time::Duration;

use super::map::Config;
use super::parse;
use super::spec::{KeyDefault, KeyOrigin, KeySpec, ValueKind};
use super::ConfigError;

/// Why a value is not one a key accepts, without the key (the caller names
/// it: [`ConfigError`] says "invalid value 'v' for key 'k': …").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// Not a whole number.
    #[error("expected a whole number")]
    NotANumber,
    /// Not `true` or `false`.
    #[error("expected true or false")]
    NotABool,
    /// Not one of the key's names.
    #[error("expected one of {}", .0.join(", "))]
    NotOneOf(&'static [&'static str]),
    /// A number outside the key's range; the text says what is accepted.
    #[error("{0}")]
    OutOfRange(String),
    /// Any other unusable value; the text says what is wrong.
    #[error("{0}")]
    Invalid(String),
}

/// A key's typed parser: the value as given to `T`.
pub type Parser<T> = fn(&str) -> Result<T, ValueError>;
/// A key's printer: `T` back to the text a config file would hold.
pub type Printer<T> = fn(&T) -> String;

/// One configuration key: its [`KeySpec`] (name, aliases, origin, value
/// kind, default, doc) with its typed parser and printer. Declared as a
/// `const` in the section of the crate that owns it.
pub struct ConfigOption<T: 'static> {
    spec: KeySpec,
    parse: Parser<T>,
    print: Printer<T>,
    blank_means_default: bool,
}

impl<T> ConfigOption<T> {
    /// A required, undocumented ferry key of `kind`, read with `parse` and
    /// shown with `print`; the builder methods below fill in the rest.
    pub const fn new(
        name: &'static str,
        kind: ValueKind,
        parse: Parser<T>,
        print: Printer<T>,
    ) -> Self {
        ConfigOption {
            spec: KeySpec::new(name, KeyDefault::Required, kind, KeyOrigin::Ferry, ""),
            parse,
            print,
            blank_means_default: false,
        }
    }

    /// The one-line description shown in `--help` and the docs.
    pub const fn doc(mut self, doc: &'static str) -> Self {
        self.spec.doc = doc;
        self
    }

    /// Whose name this is (default: ferry's own).
    pub const fn origin(mut self, origin: KeyOrigin) -> Self {
        self.spec.origin = origin;
        self
    }

    /// A literal default, parsed like a given value.
    pub const fn default_value(mut self, value: &'static str) -> Self {
        self.spec.default = KeyDefault::Value(value);
        self
    }

    /// A default computed from other keys or the environment; `how` says
    /// how (for the docs). [`Config::get`] reports such a key as missing
    /// when it is not given; its section derives the value.
    pub const fn derived(mut self, how: &'static str) -> Self {
        self.spec.default = KeyDefault::Derived(how);
        self
    }

    /// Other names accepted for this key.
    pub const fn aliases(mut self, aliases: &'static [&'static str]) -> Self {
        self.spec.aliases = aliases;
        self
    }

    /// A blank value (empty or spaces) counts as not given, so the default
    /// applies; without this a blank value is parsed (and usually refused).
    pub const fn blank_means_default(mut self) -> Self {
        self.blank_means_default = true;
        self
    }

    /// Everything but the parser and printer.
    pub const fn spec(&self) -> &KeySpec {
        &self.spec
    }

    /// The key's name (never an alias).
    pub const fn name(&self) -> &'static str {
        self.spec.name
    }

    /// Parses a value of this key.
    pub fn parse(&self, text: &str) -> Result<T, ValueError> {
        (self.parse)(text)
    }

    /// The text a config file would hold for `value`.
    pub fn print(&self, value: &T) -> String {
        (self.print)(value)
    }
}

impl<T> fmt::Display for ConfigOption<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl<T> fmt::Debug for ConfigOption<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ConfigOption").field(&self.name()).finish()
    }
}

/// A key whatever its value type: what sections, registries, `--help` and
/// the generic checks need.
pub trait AnyOption: Send + Sync {
    /// The key's name, aliases, default, kind, origin and doc.
    fn spec(&self) -> &KeySpec;
    /// Whether a blank value counts as not given.
    fn blank_means_default(&self) -> bool;
    /// Parses the value `text` and prints it back in canonical form
    /// (relative paths made absolute, durations in their largest unit, …).
    fn normalize(&self, text: &str) -> Result<String, ValueError>;

    /// The key's name.
    fn name(&self) -> &'static str {
        self.spec().name
    }

    /// The given value parses (or none is given).
    fn check(&self, config: &Config) -> Result<(), ConfigError> {
        self.effective(config).map(drop)
    }

    /// The key's value in `config` (given or literal default) in canonical
    /// form; `None` when it has none (not given, default derived).
    fn effective(&self, config: &Config) -> Result<Option<String>, ConfigError> {
        let Some(text) = config.text(self) else {
            return Ok(None);
        };
        self.normalize(text)
            .map(Some)
            .map_err(|e| ConfigError::invalid(self.spec(), text, e))
    }
}

impl<T> AnyOption for ConfigOption<T> {
    fn spec(&self) -> &KeySpec {
        &self.spec
    }

    fn blank_means_default(&self) -> bool {
        self.blank_means_default
    }

    fn normalize(&self, text: &str) -> Result<String, ValueError> {
        self.parse(text).map(|v| self.print(&v))
    }
}

impl fmt::Debug for dyn AnyOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An enum a key chooses from by name (case-insensitive). Implemented by
/// [`choice!`](crate::choice).
pub trait Choice: Copy + 'static {
    /// Every value, in the order the docs list them.
    const ALL: &'static [Self];
    /// Their names, in the same order.
    const NAMES: &'static [&'static str];
    /// This value's name.
    fn name(self) -> &'static str;
}

/// Defines a plain enum whose values are chosen by name in configuration:
/// the enum, `as_str`, `Display`, `FromStr` and [`Choice`].
#[macro_export]
macro_rules! choice {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// The name used in configuration.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl $crate::config::Choice for $name {
            const ALL: &'static [Self] = &[$( $name::$variant ),+];
            const NAMES: &'static [&'static str] = &[$( $text ),+];
            fn name(self) -> &'static str {
                self.as_str()
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::config::ValueError;

            /// Accepts the configuration names, ignoring ASCII case.
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $crate::config::parse_choice(s)
            }
        }
    };
}

/// Declares a section: its key constants and the section (a `static`
/// [`Section`](super::Section) listing them in order), in one place, so a
/// key is added by adding its constant here and nowhere else.
///
/// ```ignore
/// config_section! {
///     /// The writer's keys.
///     pub static WRITER_KEYS = Section::job("writer");
///     /// `writer.flushInterval`.
///     pub const FLUSH_INTERVAL: ConfigOption<Duration> = ConfigOption::millis("writer.flushInterval")
///         .default_value("1000")
///         .doc("Longest time a buffered operation waits before a background flush.");
/// }
/// ```
#[macro_export]
macro_rules! config_section {
    (
        $(#[$smeta:meta])*
        $svis:vis static $section:ident = $init:expr;
        $(
            $(#[$meta:meta])*
            $vis:vis const $key:ident : $ty:ty = $value:expr;
        )*
    ) => {
        $(
            $(#[$meta])*
            $vis const $key: $ty = $value;
        )*
        $(#[$smeta])*
        $svis static $section: $crate::config::Section = $init.with_keys(&[$( &$key ),*]);
    };
}

/// Parses a [`Choice`] by name, ignoring ASCII case and surrounding space.
pub fn parse_choice<T: Choice>(text: &str) -> Result<T, ValueError> {
    T::ALL
        .iter()
        .copied()
        .find(|v| v.name().eq_ignore_ascii_case(text.trim()))
        .ok_or(ValueError::NotOneOf(T::NAMES))
}

fn print_choice<T: Choice>(value: &T) -> String {
    value.name().to_string()
}

fn print_display<T: fmt::Display>(value: &T) -> String {
    value.to_string()
}

impl<T: Choice> ConfigOption<T> {
    /// A key naming one value of `T`.
    pub const fn choice(name: &'static str) -> Self {
        Self::new(
            name,
            ValueKind::Enum(T::NAMES),
            parse_choice::<T>,
            print_choice::<T>,
        )
    }
}

impl ConfigOption<bool> {
    /// `true` or `false` (any case).
    pub const fn flag(name: &'static str) -> Self {
        Self::new(name, ValueKind::Bool, parse::boolean, print_display::<bool>)
    }
}

impl ConfigOption<String> {
    /// Text that must not be blank, kept as given.
    pub const fn text(name: &'static str) -> Self {
        Self::new(name, ValueKind::Text, parse::text, String::clone)
    }

    /// Any text, blank included, kept as given.
    pub const fn any_text(name: &'static str) -> Self {
        Self::new(name, ValueKind::Text, parse::any_text, String::clone)
    }

    /// Text with surrounding space removed (blank allowed).
    pub const fn trimmed(name: &'static str) -> Self {
        Self::new(name, ValueKind::Text, parse::trimmed, String::clone)
    }
}

impl ConfigOption<Duration> {
    /// A whole number of milliseconds, greater than zero.
    pub const fn millis(name: &'static str) -> Self {
        Self::new(name, ValueKind::Millis, parse::millis, parse::print_millis)
    }

    /// A whole number of seconds, greater than zero.
    pub const fn seconds(name: &'static str) -> Self {
        Self::new(
            name,
            ValueKind::Seconds,
            parse::seconds,
            parse::print_seconds,
        )
    }

    /// A duration in Flink's syntax (`500 ms`, `10 s`, `1 min`, …).
    pub const fn duration(name: &'static str) -> Self {
        Self::new(
            name,
            ValueKind::Duration,
            parse::parse_duration,
            parse::print_duration,
        )
    }
}

impl ConfigOption<NonZeroUsize> {
    /// A whole count greater than zero.
    pub const fn count(name: &'static str) -> Self {
        Self::new(
            name,
            ValueKind::Count,
            parse::count,
            print_display::<NonZeroUsize>,
        )
    }
}

impl ConfigOption<usize> {
    /// A whole number of bytes from 1 to `MAX`.
    pub const fn bytes<const MAX: usize>(name: &'static str) -> Self {
        Self::new(
            name,
            ValueKind::Bytes,
            parse::bytes_up_to::<MAX>,
            print_display::<usize>,
        )
    }
}

impl ConfigOption<u32> {
    /// A whole count from 0 to `u32::MAX`.
    pub const fn count_or_zero(name: &'static str) -> Self {
        Self::new(
            name,
            ValueKind::CountOrZero,
            parse::count_or_zero_u32,
            print_display::<u32>,
        )
    }
}
