//! Failpoints for crash tests: [`hit`] aborts the process (like `kill -9`:
//! no destructor, no flush) when the environment variable `FERRY_FAILPOINT`
//! names the point, so a test can stop a job exactly between two steps
//! (e.g. after reading schemas and before altering the sink).

/// The environment variable naming the failpoint that aborts.
pub const ENV: &str = "FERRY_FAILPOINT";

/// Aborts the process when `FERRY_FAILPOINT` equals `name`; otherwise does
/// nothing.
pub fn hit(name: &str) {
    if std::env::var_os(ENV).is_some_and(|v| v == name) {
        eprintln!("ferry: failpoint '{name}' hit, aborting");
        std::process::abort();
    }
}
