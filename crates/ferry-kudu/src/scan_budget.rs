//! The diff-scan budget (`reader.diffScanBudget`): how many diff scans per
//! second the job may send each source tablet server, over all its tables.
//!
//! What a diff window costs the source is almost all code generation: each
//! diff scan of a tablet with a MemRowSet compiles a row projector on its
//! tablet server (about 0.1 s of CPU on Kudu 1.17 and 1.18), because the
//! projection's virtual IS_DELETED column defeats the server's code cache
//! (docs/operations.md, "What a diff window costs the source"). The cost is
//! per scan, not per row: a tablet read every 4 s instead of every second
//! costs a quarter, and its changes come in one scan.
//!
//! So the budget is a token bucket per tablet server, shared by the job's
//! tables on one cluster. A window's scans are charged to the server of
//! each tablet's leader when it opens (tablets proven unchanged cost
//! nothing); a server in debt makes the table that charged it wait before
//! its next window, long enough to pay the debt off. Windows stay whole
//! tables (every tablet at one end), so checkpoints, sink positions,
//! `lastEndTimestamp` and consistent cuts keep their meaning; the engine
//! bounds the wait by `reader.maxLag`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferry_engine::config::{ReaderConfig, DIFF_SCAN_BUDGET};

/// Scans a server may take at once after a quiet spell (at least one).
const BURST_SECONDS: f64 = 1.0;

/// The job's diff-scan budget on one source cluster.
#[derive(Debug)]
pub struct ScanBudget {
    per_second: f64,
    /// Debt is kept below what `reader.maxLag` lets pile up, so a budget
    /// the lag bound overrode for a while does not hold windows back
    /// long after.
    max_debt: f64,
    servers: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl ScanBudget {
    /// `per_second` scans per server, debt bounded by `max_lag` of them.
    pub fn new(per_second: f64, max_lag: Duration) -> Self {
        ScanBudget {
            per_second,
            max_debt: per_second * max_lag.as_secs_f64(),
            servers: Mutex::new(HashMap::new()),
        }
    }

    /// The budget `reader.*` sets; `None` when there is none (0).
    pub fn from_reader(reader: &ReaderConfig) -> Option<Self> {
        let per_second = reader.keys.get(&DIFF_SCAN_BUDGET).ok()?.0;
        (per_second > 0.0).then(|| ScanBudget::new(per_second, reader.max_lag()))
    }

    /// Charges one scan to the server of each of `scans` (a server once
    /// per scan it serves) and returns how long the charging table should
    /// wait before its next window for every one of them to be back out
    /// of debt (zero when none is in debt).
    pub fn charge<'a>(&self, scans: impl IntoIterator<Item = &'a str>) -> Duration {
        self.charge_at(scans, Instant::now())
    }

    fn charge_at<'a>(&self, scans: impl IntoIterator<Item = &'a str>, now: Instant) -> Duration {
        let Ok(mut servers) = self.servers.lock() else {
            return Duration::ZERO;
        };
        let burst = (self.per_second * BURST_SECONDS).max(1.0);
        let mut charged: HashMap<&str, u32> = HashMap::new();
        for server in scans {
            *charged.entry(server).or_default() += 1;
        }
        let mut wait = 0.0f64;
        for (server, n) in charged {
            let bucket = servers.entry(server.to_owned()).or_insert(Bucket {
                tokens: burst,
                at: now,
            });
            let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * self.per_second;
            bucket.tokens = (bucket.tokens + refill).min(burst) - f64::from(n);
            bucket.tokens = bucket.tokens.max(-self.max_debt);
            bucket.at = now;
            if bucket.tokens < 0.0 {
                wait = wait.max(-bucket.tokens / self.per_second);
            }
        }
        Duration::from_secs_f64(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        (d.as_secs_f64() * 1000.0).round() / 1000.0
    }

    /// One table whose windows open as soon as the budget lets them:
    /// the time between openings, window after window.
    fn intervals(budget: &ScanBudget, scans: &[&str], windows: usize) -> Vec<f64> {
        let mut now = Instant::now();
        let mut out = Vec::new();
        for _ in 0..windows {
            let wait = budget.charge_at(scans.iter().copied(), now);
            // The discovery interval: one second at the least.
            let wait = wait.max(Duration::from_secs(1));
            out.push(secs(wait));
            now += wait;
        }
        out
    }

    #[test]
    fn a_server_within_its_budget_never_holds_a_window_back() {
        // Two written tablets per server, two scans a second allowed.
        let b = ScanBudget::new(2.0, Duration::from_secs(30));
        assert_eq!(intervals(&b, &["a", "a", "b", "b"], 5), vec![1.0; 5]);
    }

    #[test]
    fn a_server_over_its_budget_spaces_the_windows_to_it() {
        // Two scans per window on server a, half a scan a second allowed:
        // after the first burst, a window every 4 s (2 scans / 4 s).
        let b = ScanBudget::new(0.5, Duration::from_secs(30));
        let got = intervals(&b, &["a", "a", "b"], 6);
        assert_eq!(got[0], 2.0, "{got:?}");
        assert!(got[2..].iter().all(|&w| w == 4.0), "{got:?}");
    }

    #[test]
    fn tables_on_one_server_share_its_budget() {
        let b = ScanBudget::new(1.0, Duration::from_secs(30));
        let now = Instant::now();
        // The first table takes the burst; the second one's scan is debt.
        assert_eq!(b.charge_at(["a"], now), Duration::ZERO);
        assert_eq!(secs(b.charge_at(["a"], now)), 1.0);
        // Another server is untouched.
        assert_eq!(b.charge_at(["b"], now), Duration::ZERO);
    }

    #[test]
    fn debt_is_bounded_by_the_lag_bound() {
        // However often windows were forced open, the wait stays within
        // the lag bound's worth of scans.
        let b = ScanBudget::new(1.0, Duration::from_secs(10));
        let now = Instant::now();
        let mut wait = Duration::ZERO;
        for _ in 0..100 {
            wait = b.charge_at(["a", "a", "a"], now);
        }
        assert_eq!(secs(wait), 10.0);
    }

    fn reader(extra: &[(&str, &str)]) -> ReaderConfig {
        let mut pairs = vec![
            ("job.sourceMasterAddresses", "m:7051"),
            ("job.sinkMasterAddresses", "s:7051"),
            ("job.tableName", "t"),
            ("job.checkpointsDirectory", "/tmp/c"),
        ];
        pairs.extend_from_slice(extra);
        ferry_engine::config::JobConfig::from_named_pairs(pairs)
            .expect("valid config")
            .reader
    }

    #[test]
    fn the_budget_is_the_keys() {
        assert!(ScanBudget::from_reader(&reader(&[])).is_none());
        let b = ScanBudget::from_reader(&reader(&[
            ("reader.diffScanBudget", "0.5"),
            ("reader.maxLag", "20 s"),
        ]))
        .expect("a budget");
        assert_eq!(b.per_second, 0.5);
        assert_eq!(b.max_debt, 10.0);
    }
}
