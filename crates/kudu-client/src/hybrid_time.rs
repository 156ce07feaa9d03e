//! Kudu hybrid time: `physical_micros << 12 | logical`.
//!
//! Snapshot and diff scans are addressed by hybrid timestamps. Taking them
//! from a server's clock (`ServerClock`, scan and write responses) rather
//! than the local wall clock keeps them from being "in the future" for the
//! servers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bits of the logical counter.
const LOGICAL_BITS: u32 = 12;

/// A Kudu hybrid timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HybridTime(u64);

impl HybridTime {
    /// The timestamp with this wire value (as stored in a checkpoint or
    /// sent by a server).
    pub const fn from_raw(raw: u64) -> Self {
        HybridTime(raw)
    }

    /// The timestamp for wall-clock `micros` since the epoch, logical 0.
    pub fn from_micros(micros: u64) -> Self {
        HybridTime(micros << LOGICAL_BITS)
    }

    /// The local wall clock now (only for callers that accept local time).
    pub fn from_system_time(t: SystemTime) -> Self {
        let micros = t
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        Self::from_micros(micros)
    }

    /// Microseconds since the Unix epoch.
    pub fn physical_micros(self) -> u64 {
        self.0 >> LOGICAL_BITS
    }

    /// Milliseconds since the Unix epoch (what Flink-style metrics report).
    pub fn epoch_millis(self) -> u64 {
        self.physical_micros() / 1000
    }

    /// The logical counter.
    pub fn logical(self) -> u64 {
        self.0 & ((1 << LOGICAL_BITS) - 1)
    }

    /// The wire value.
    pub fn raw(self) -> u64 {
        self.0
    }

    /// This time moved back by `d` on the physical clock.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Self::from_micros(self.physical_micros().saturating_sub(d.as_micros() as u64))
    }
}

impl std::fmt::Display for HybridTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (physical {} µs, logical {})",
            self.0,
            self.physical_micros(),
            self.logical()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_example() {
        let ht = HybridTime::from_micros(1_700_000_000_000_000);
        assert_eq!(ht.raw(), 6_963_200_000_000_000_000);
        assert_eq!(ht.physical_micros(), 1_700_000_000_000_000);
        assert_eq!(ht.epoch_millis(), 1_700_000_000_000);
        assert_eq!(HybridTime(ht.raw() + 5).logical(), 5);
    }
}
