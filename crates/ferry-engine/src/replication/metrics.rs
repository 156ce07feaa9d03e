//! Per-replica metrics: lag, last success, failures, states copied, as
//! atomics the replica task updates and [`ReplicaMetrics::snapshot`] reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::time::now_ms;

/// Live metrics of one replica.
#[derive(Debug)]
pub struct ReplicaMetrics {
    location: String,
    /// Completion time (epoch ms) of the oldest state not yet on the
    /// replica; 0 when caught up.
    behind_since_ms: AtomicU64,
    /// The last copy's lag (replica completion - primary completion).
    last_lag_ms: AtomicU64,
    last_success_ms: AtomicU64,
    failures: AtomicU64,
    copied: AtomicU64,
    newest: Mutex<Option<String>>,
    last_error: Mutex<Option<String>>,
}

/// One replica's metrics at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSnapshot {
    /// The replica location (URI; no credentials).
    pub location: String,
    /// Seconds-scale lag in ms: while behind, now minus the completion time
    /// of the oldest state not yet on the replica (grows during an
    /// outage); when caught up, how long the last copy came after its
    /// state completed on the primary.
    pub lag_ms: u64,
    /// Whether a completed state is waiting to be copied.
    pub behind: bool,
    /// When a copy last succeeded (epoch ms; 0 = never).
    pub last_success_ms: u64,
    /// Failed copy attempts so far.
    pub failures: u64,
    /// States copied so far.
    pub states_copied: u64,
    /// The newest state on the replica (its directory).
    pub newest: Option<String>,
    /// The last failure, while the replica is failing (cleared by a
    /// success).
    pub last_error: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ReplicaMetrics {
    pub(crate) fn new(location: String) -> Self {
        ReplicaMetrics {
            location,
            behind_since_ms: AtomicU64::new(0),
            last_lag_ms: AtomicU64::new(0),
            last_success_ms: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            copied: AtomicU64::new(0),
            newest: Mutex::new(None),
            last_error: Mutex::new(None),
        }
    }

    /// The replica's location (URI).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Reads every metric.
    pub fn snapshot(&self) -> ReplicaSnapshot {
        self.snapshot_at(now_ms())
    }

    pub(crate) fn snapshot_at(&self, now_ms: u64) -> ReplicaSnapshot {
        let since = self.behind_since_ms.load(Ordering::Relaxed);
        ReplicaSnapshot {
            location: self.location.clone(),
            lag_ms: if since > 0 {
                now_ms.saturating_sub(since)
            } else {
                self.last_lag_ms.load(Ordering::Relaxed)
            },
            behind: since > 0,
            last_success_ms: self.last_success_ms.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            states_copied: self.copied.load(Ordering::Relaxed),
            newest: lock(&self.newest).clone(),
            last_error: lock(&self.last_error).clone(),
        }
    }

    /// The oldest pending state's completion time (`None`: caught up).
    pub(crate) fn set_behind_since(&self, since_ms: Option<u64>) {
        // 0 means "caught up", so a (clockless) 0 is stored as 1.
        self.behind_since_ms
            .store(since_ms.map_or(0, |s| s.max(1)), Ordering::Relaxed);
    }

    /// A state that completed on the primary at `completed_at_ms` is now
    /// complete on the replica.
    pub(crate) fn copied(&self, completed_at_ms: u64, dir: String, newest: bool) {
        let now = now_ms();
        self.last_lag_ms
            .store(now.saturating_sub(completed_at_ms), Ordering::Relaxed);
        self.last_success_ms.store(now, Ordering::Relaxed);
        self.copied.fetch_add(1, Ordering::Relaxed);
        if newest {
            *lock(&self.newest) = Some(dir);
        }
        *lock(&self.last_error) = None;
    }

    /// A copy attempt failed.
    pub(crate) fn failed(&self, error: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        *lock(&self.last_error) = Some(error);
    }
}
