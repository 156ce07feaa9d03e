//! Failpoints for crash tests: [`hit`] aborts the process (like `kill -9`:
//! no destructor, no flush) when the environment variable `FERRY_FAILPOINT`
//! names the point, so a test can stop a job exactly between two steps
//! (e.g. after reading schemas and before altering the sink).
//! `FERRY_FAILPOINT=<name>@<n>` aborts at the n-th time the point is
//! reached instead of the first.

/// The environment variable naming the failpoint that aborts.
pub const ENV: &str = "FERRY_FAILPOINT";

use std::sync::atomic::{AtomicU64, Ordering};

/// Times the armed failpoint was reached.
static HITS: AtomicU64 = AtomicU64::new(0);

/// Aborts the process when `FERRY_FAILPOINT` names `name` (at the n-th
/// time with `name@n`); otherwise does nothing.
pub fn hit(name: &str) {
    let Some(armed) = std::env::var_os(ENV) else {
        return;
    };
    let armed = armed.to_string_lossy();
    let (point, nth) = match armed.split_once('@') {
        Some((point, n)) => (point, n.parse::<u64>().unwrap_or(1)),
        None => (armed.as_ref(), 1),
    };
    if point != name {
        return;
    }
    if HITS.fetch_add(1, Ordering::SeqCst) + 1 >= nth {
        eprintln!("ferry: failpoint '{name}' hit, aborting");
        std::process::abort();
    }
}
