//! Time in a job, on three clocks that must not be mixed up:
//!
//! - [`SourceTime`]: a point on the *source's* own clock (a Kudu source: a
//!   hybrid time; a Kafka source: epoch milliseconds). Windows, the chain's
//!   last end, checkpoints, sink positions and `JobOptions::start_at` are
//!   in it.
//! - [`SinkTime`]: a point on the *sink's* own clock (a Kudu sink: a hybrid
//!   time of the sink cluster), as [`crate::connector::Sink::sink_time`]
//!   gives it.
//! - the wall clock, epoch milliseconds ([`now_ms`]): metrics, lag, when a
//!   state was taken.
//!
//! Only the source knows how its time reads on the wall clock: its
//! [`SourceClock`] ([`crate::connector::Source::CLOCK`]) says, so the
//! engine and the binary turn a window end into `lastEndTimestamp` or a
//! lag without knowing which source a job reads.
//!
//! Both time types are serialized as the bare integer they wrap, so
//! checkpoints, savepoints and the sink position table read exactly as
//! before they were typed.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point on a source's own clock (for Kudu, a raw hybrid time; for
/// Kafka, epoch milliseconds). Ordered as the source's clock orders it;
/// read it as wall-clock time only through the source's [`SourceClock`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SourceTime(u64);

impl SourceTime {
    /// The time whose raw value (as stored in states) is `raw`.
    pub const fn from_raw(raw: u64) -> Self {
        SourceTime(raw)
    }

    /// The raw value, as states and the sink position table store it.
    pub const fn raw(self) -> u64 {
        self.0
    }
}

/// A point on a sink's own clock (for Kudu, a raw hybrid time of the sink
/// cluster): never comparable with a [`SourceTime`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SinkTime(u64);

impl SinkTime {
    /// The time whose raw value (as stored) is `raw`.
    pub const fn from_raw(raw: u64) -> Self {
        SinkTime(raw)
    }

    /// The raw value, as the sink position table stores it.
    pub const fn raw(self) -> u64 {
        self.0
    }
}

// Shown as the bare number, as logs, error texts and states showed these
// times before they were typed.
macro_rules! show_raw {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}
show_raw!(SourceTime);
show_raw!(SinkTime);

/// How a source's times read as wall-clock time: given by the source
/// ([`crate::connector::Source::CLOCK`]), used by the engine's metrics and
/// by the binary (lag, `lastEndTimestamp`, RPO), which so never interpret
/// a source time themselves.
#[derive(Clone, Copy)]
pub struct SourceClock {
    name: &'static str,
    epoch_millis: fn(SourceTime) -> u64,
}

impl SourceClock {
    /// The clock of a source whose times are epoch milliseconds already.
    pub const EPOCH_MILLIS: SourceClock = SourceClock::new("epoch milliseconds", |t| t.raw());

    /// A clock called `name` (for messages) whose time `t` is
    /// `epoch_millis(t)` milliseconds after the Unix epoch.
    pub const fn new(name: &'static str, epoch_millis: fn(SourceTime) -> u64) -> Self {
        SourceClock { name, epoch_millis }
    }

    /// What the clock's times are, for messages (`"hybrid time"`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// `t` on the wall clock: milliseconds since the Unix epoch.
    pub fn epoch_millis(&self, t: SourceTime) -> u64 {
        (self.epoch_millis)(t)
    }
}

impl fmt::Debug for SourceClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SourceClock({})", self.name)
    }
}

/// The wall clock now: milliseconds since the Unix epoch (0 if the clock
/// is before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The wall clock now: microseconds since the Unix epoch, as Kudu's
/// UNIXTIME_MICROS cells hold it (0 if the clock is before the epoch).
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_serialize_as_the_bare_number() {
        let t = SourceTime::from_raw(7_000_000_000_000_004_096);
        assert_eq!(
            serde_json::to_string(&t).expect("json"),
            "7000000000000004096"
        );
        let back: SourceTime = serde_json::from_str("7000000000000004096").expect("json");
        assert_eq!(back, t);
        let s: SinkTime = serde_json::from_str("42").expect("json");
        assert_eq!(s.raw(), 42);
        assert_eq!(serde_json::to_string(&Some(s)).expect("json"), "42");
        // Logs and error texts show the number, as before.
        assert_eq!(format!("{t} {:?}", Some(s)), "7000000000000004096 Some(42)");
    }

    #[test]
    fn a_clock_reads_times_its_own_way() {
        let ms = SourceTime::from_raw(1_700_000_000_123);
        assert_eq!(
            SourceClock::EPOCH_MILLIS.epoch_millis(ms),
            1_700_000_000_123
        );
        let micros = SourceClock::new("epoch microseconds", |t| t.raw() / 1000);
        assert_eq!(micros.epoch_millis(ms), 1_700_000_000);
        assert_eq!(micros.name(), "epoch microseconds");
        assert_eq!(format!("{micros:?}"), "SourceClock(epoch microseconds)");
    }

    #[test]
    fn now_is_after_2020() {
        assert!(now_ms() > 1_577_836_800_000);
    }
}
