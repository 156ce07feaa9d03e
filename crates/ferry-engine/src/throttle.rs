//! Throttling: limits on rows/s and bytes/s for reading and for writing,
//! separately for snapshot and diff windows, job-wide and per table, that
//! can be changed while the job runs.
//!
//! A [`Limiter`] is a token bucket that may go into debt: a caller takes
//! what it used (a batch's rows and bytes) and then sleeps until the debt
//! is paid at the limit's rate, so over any long stretch the rate is the
//! limit, whatever the batch sizes. Unused tokens accumulate up to one
//! second of the rate (the burst). A change of the limit wakes every
//! sleeper, which then waits for its debt at the new rate (none when the
//! limit is lifted). 0 means unlimited: nothing is counted, nobody sleeps.
//!
//! [`Throttles`] holds a job's limiters: one per direction (read, write)
//! and window kind (snapshot, diff) for the whole job, and the same per
//! table for tables given their own limits; a split's pipeline goes
//! through both ([`SplitThrottle`]). The time spent asleep is counted per
//! direction.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One limit: rows and bytes per second (0: unlimited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rate {
    /// Rows per second; 0: unlimited.
    pub rows_per_second: u64,
    /// Bytes per second; 0: unlimited.
    pub bytes_per_second: u64,
}

impl Rate {
    /// A limit of `rows` rows/s and `bytes` bytes/s (0: unlimited).
    pub fn new(rows: u64, bytes: u64) -> Self {
        Rate {
            rows_per_second: rows,
            bytes_per_second: bytes,
        }
    }

    /// Neither rows nor bytes are limited.
    pub fn is_unlimited(&self) -> bool {
        self.rows_per_second == 0 && self.bytes_per_second == 0
    }
}

/// The limits of one direction, per window kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowRates {
    /// While a snapshot window is copied.
    pub snapshot: Rate,
    /// While a diff window is copied.
    pub diff: Rate,
}

/// Every limit of a job or of a table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Reading from the source.
    pub read: WindowRates,
    /// Writing to the sink.
    pub write: WindowRates,
}

impl Limits {
    /// Whether nothing is limited.
    pub fn is_unlimited(&self) -> bool {
        [self.read, self.write]
            .iter()
            .all(|w| w.snapshot.is_unlimited() && w.diff.is_unlimited())
    }

    fn rate(&self, direction: Direction, kind: WindowKind) -> Rate {
        let rates = match direction {
            Direction::Read => &self.read,
            Direction::Write => &self.write,
        };
        match kind {
            WindowKind::Snapshot => rates.snapshot,
            WindowKind::Diff => rates.diff,
        }
    }

    /// These limits with `update`'s given values replacing theirs.
    pub fn updated(mut self, update: &LimitsUpdate) -> Self {
        for (rates, up) in [
            (&mut self.read, &update.read),
            (&mut self.write, &update.write),
        ] {
            for (rate, up) in [
                (&mut rates.snapshot, &up.snapshot),
                (&mut rates.diff, &up.diff),
            ] {
                if let Some(rows) = up.rows_per_second {
                    rate.rows_per_second = rows;
                }
                if let Some(bytes) = up.bytes_per_second {
                    rate.bytes_per_second = bytes;
                }
            }
        }
        self
    }
}

/// A change of some limits: the values given replace the current ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateUpdate {
    /// New rows per second (0: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_per_second: Option<u64>,
    /// New bytes per second (0: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_second: Option<u64>,
}

/// A change of one direction's limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowUpdate {
    /// Snapshot windows.
    #[serde(default)]
    pub snapshot: RateUpdate,
    /// Diff windows.
    #[serde(default)]
    pub diff: RateUpdate,
}

/// A change of a job's or a table's limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsUpdate {
    /// Reading.
    #[serde(default)]
    pub read: WindowUpdate,
    /// Writing.
    #[serde(default)]
    pub write: WindowUpdate,
}

/// Reading from the source or writing to the sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Reading.
    Read,
    /// Writing.
    Write,
}

/// The kind of window a split belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowKind {
    /// The initial full snapshot.
    Snapshot,
    /// A diff window.
    Diff,
}

/// How long one second of the rate lets unused tokens accumulate.
const BURST: Duration = Duration::from_secs(1);

/// One dimension of a bucket: tokens (negative: debt) at a rate.
#[derive(Debug, Clone, Copy, Default)]
struct Tokens {
    rate: u64,
    balance: f64,
}

impl Tokens {
    fn refill(&mut self, elapsed: Duration) {
        if self.rate == 0 {
            self.balance = 0.0;
            return;
        }
        let rate = self.rate as f64;
        self.balance =
            (self.balance + elapsed.as_secs_f64() * rate).min(rate * BURST.as_secs_f64());
    }

    fn take(&mut self, amount: u64) {
        if self.rate > 0 {
            self.balance -= amount as f64;
        }
    }

    /// How long until the debt is paid.
    fn wait(&self) -> Duration {
        if self.rate == 0 || self.balance >= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(-self.balance / self.rate as f64)
    }
}

#[derive(Debug)]
struct Bucket {
    rows: Tokens,
    bytes: Tokens,
    at: Instant,
}

impl Bucket {
    fn refill(&mut self) {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(self.at);
        self.at = now;
        self.rows.refill(elapsed);
        self.bytes.refill(elapsed);
    }

    fn wait(&self) -> Duration {
        self.rows.wait().max(self.bytes.wait())
    }
}

/// A token bucket on rows and bytes whose rate can change live (module
/// doc).
#[derive(Debug)]
pub struct Limiter {
    bucket: Mutex<Bucket>,
    changed: Notify,
}

impl Limiter {
    /// A limiter at `rate`, its bucket empty.
    pub fn new(rate: Rate) -> Self {
        Limiter {
            bucket: Mutex::new(Bucket {
                rows: Tokens {
                    rate: rate.rows_per_second,
                    balance: 0.0,
                },
                bytes: Tokens {
                    rate: rate.bytes_per_second,
                    balance: 0.0,
                },
                at: Instant::now(),
            }),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Bucket> {
        // The bucket holds plain numbers: a panic elsewhere leaves them usable.
        self.bucket.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current limit.
    pub fn rate(&self) -> Rate {
        let b = self.lock();
        Rate::new(b.rows.rate, b.bytes.rate)
    }

    /// Changes the limit; callers asleep in [`Limiter::acquire`] wait for
    /// the rest of their debt at the new rate.
    pub fn set(&self, rate: Rate) {
        {
            let mut b = self.lock();
            b.refill();
            b.rows.rate = rate.rows_per_second;
            b.bytes.rate = rate.bytes_per_second;
            // Unlimited forgets the debt; a lower burst caps the balance.
            b.refill();
        }
        self.changed.notify_waiters();
    }

    /// Takes `rows` and `bytes` and sleeps until they are paid for;
    /// returns how long it slept.
    pub async fn acquire(&self, rows: u64, bytes: u64) -> Duration {
        let started = Instant::now();
        let mut take = Some((rows, bytes));
        loop {
            // Registered before the bucket is read, so a change after
            // that wakes the sleep below.
            let changed = self.changed.notified();
            let wait = {
                let mut b = self.lock();
                b.refill();
                if let Some((rows, bytes)) = take.take() {
                    b.rows.take(rows);
                    b.bytes.take(bytes);
                }
                b.wait()
            };
            if wait.is_zero() {
                return started.elapsed();
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = changed => {}
            }
        }
    }
}

/// The limiters of one job or table, by direction and window kind.
#[derive(Debug)]
struct LimiterSet([Arc<Limiter>; 4]);

impl LimiterSet {
    fn new(limits: &Limits) -> Self {
        let l = |d, k| Arc::new(Limiter::new(limits.rate(d, k)));
        LimiterSet([
            l(Direction::Read, WindowKind::Snapshot),
            l(Direction::Read, WindowKind::Diff),
            l(Direction::Write, WindowKind::Snapshot),
            l(Direction::Write, WindowKind::Diff),
        ])
    }

    fn get(&self, direction: Direction, kind: WindowKind) -> &Arc<Limiter> {
        let i = match (direction, kind) {
            (Direction::Read, WindowKind::Snapshot) => 0,
            (Direction::Read, WindowKind::Diff) => 1,
            (Direction::Write, WindowKind::Snapshot) => 2,
            (Direction::Write, WindowKind::Diff) => 3,
        };
        &self.0[i]
    }

    fn limits(&self) -> Limits {
        let r = |d, k| self.get(d, k).rate();
        Limits {
            read: WindowRates {
                snapshot: r(Direction::Read, WindowKind::Snapshot),
                diff: r(Direction::Read, WindowKind::Diff),
            },
            write: WindowRates {
                snapshot: r(Direction::Write, WindowKind::Snapshot),
                diff: r(Direction::Write, WindowKind::Diff),
            },
        }
    }

    fn set(&self, limits: &Limits) {
        for d in [Direction::Read, Direction::Write] {
            for k in [WindowKind::Snapshot, WindowKind::Diff] {
                let rate = limits.rate(d, k);
                let limiter = self.get(d, k);
                if limiter.rate() != rate {
                    limiter.set(rate);
                }
            }
        }
    }
}

/// What a job's throttles are: the limits and the time spent throttled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThrottleSnapshot {
    /// The job-wide limits.
    pub job: Limits,
    /// The tables with limits of their own, by name (applied on top of
    /// the job's).
    pub tables: BTreeMap<String, Limits>,
    /// Seconds the pipelines' readers slept on a limit, summed.
    pub throttled_read_seconds: f64,
    /// Seconds the pipelines' writers slept on a limit, summed.
    pub throttled_write_seconds: f64,
}

/// A job's limiters (module doc). Shared by the coordinator, the
/// pipelines and the job's handle.
#[derive(Debug)]
pub struct Throttles {
    job: LimiterSet,
    tables: Mutex<BTreeMap<String, LimiterSet>>,
    throttled_read_ns: AtomicU64,
    throttled_write_ns: AtomicU64,
}

impl Default for Throttles {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Throttles {
    /// Job-wide `limits`, no table of its own.
    pub fn new(limits: Limits) -> Self {
        Throttles {
            job: LimiterSet::new(&limits),
            tables: Mutex::new(BTreeMap::new()),
            throttled_read_ns: AtomicU64::new(0),
            throttled_write_ns: AtomicU64::new(0),
        }
    }

    fn tables(&self) -> MutexGuard<'_, BTreeMap<String, LimiterSet>> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The limits and the time spent throttled.
    pub fn snapshot(&self) -> ThrottleSnapshot {
        let secs = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed)).as_secs_f64();
        ThrottleSnapshot {
            job: self.job.limits(),
            tables: self
                .tables()
                .iter()
                .map(|(name, set)| (name.clone(), set.limits()))
                .collect(),
            throttled_read_seconds: secs(&self.throttled_read_ns),
            throttled_write_seconds: secs(&self.throttled_write_ns),
        }
    }

    /// Changes the job's limits (`table` `None`) or a table's: the values
    /// `update` gives replace the current ones at once, for the splits in
    /// progress too. A table whose limits all become 0 has none of its own
    /// any more.
    pub fn update(&self, table: Option<&str>, update: &LimitsUpdate) {
        let Some(table) = table else {
            let limits = self.job.limits().updated(update);
            self.job.set(&limits);
            return;
        };
        let mut tables = self.tables();
        let limits = tables
            .get(table)
            .map(LimiterSet::limits)
            .unwrap_or_default()
            .updated(update);
        if limits.is_unlimited() {
            // Lifted first, so splits asleep on it wake.
            if let Some(set) = tables.remove(table) {
                set.set(&limits);
            }
            return;
        }
        match tables.get(table) {
            Some(set) => set.set(&limits),
            None => {
                tables.insert(table.to_string(), LimiterSet::new(&limits));
            }
        }
    }

    /// Time spent throttled in `direction`, so far.
    pub fn throttled(&self, direction: Direction) -> Duration {
        Duration::from_nanos(self.counter(direction).load(Ordering::Relaxed))
    }

    fn counter(&self, direction: Direction) -> &AtomicU64 {
        match direction {
            Direction::Read => &self.throttled_read_ns,
            Direction::Write => &self.throttled_write_ns,
        }
    }

    /// Takes `rows` and `bytes` from the job's limiter and then `table`'s
    /// (if it has one), sleeping as they say.
    async fn acquire(&self, table: &str, d: Direction, k: WindowKind, rows: u64, bytes: u64) {
        let mut slept = self.job.get(d, k).acquire(rows, bytes).await;
        let own = self.tables().get(table).map(|set| set.get(d, k).clone());
        if let Some(limiter) = own {
            slept += limiter.acquire(rows, bytes).await;
        }
        if !slept.is_zero() {
            let ns = u64::try_from(slept.as_nanos()).unwrap_or(u64::MAX);
            self.counter(d).fetch_add(ns, Ordering::Relaxed);
        }
    }
}

/// The throttles a split's pipeline goes through: its table's and the
/// job's, for the kind of its window.
#[derive(Clone, Debug)]
pub struct SplitThrottle {
    throttles: Arc<Throttles>,
    table: Arc<str>,
    kind: WindowKind,
}

impl SplitThrottle {
    /// The throttles of a split of `table` in a window of `kind`.
    pub fn new(throttles: Arc<Throttles>, table: &str, kind: WindowKind) -> Self {
        SplitThrottle {
            throttles,
            table: Arc::from(table),
            kind,
        }
    }

    /// After reading a batch of `rows` rows and `bytes` bytes: sleeps as
    /// the read limits say.
    pub async fn read(&self, rows: u64, bytes: u64) {
        self.throttles
            .acquire(&self.table, Direction::Read, self.kind, rows, bytes)
            .await;
    }

    /// Before writing a batch: sleeps as the write limits say.
    pub async fn write(&self, rows: u64, bytes: u64) {
        self.throttles
            .acquire(&self.table, Direction::Write, self.kind, rows, bytes)
            .await;
    }
}

#[cfg(test)]
#[path = "throttle_tests.rs"]
mod tests;
