//! ferry as a library: everything the `ferry` binary does, in three halves
//! that a reader finds by name, plus what they share.
//!
//! - [`server`]: what runs jobs in this process — the job registry,
//!   starting a job ([`server::submit`]), the application and session
//!   process modes ([`server::run`]), the lease holder ([`server::lease`]),
//!   the REST API and web page ([`server::rest`]), the Prometheus
//!   exposition ([`server::prom`]) and the listeners ([`server::listen`]).
//! - [`client`]: what talks to a running ferry process over its REST API —
//!   `ferry list / savepoint / stop / cancel / checkpoint`, `ferry run
//!   --jobmanager`, the drain check and the client's TLS and token.
//! - [`api`]: the REST bodies as typed structs, the one shape both halves
//!   read and write.
//! - Shared by both: [`settings`] (every key, read once), [`process_opts`]
//!   (the process keys), [`run_args`] (`ferry run`'s arguments),
//!   [`key_docs`] (`--help` and docs/configuration.md), [`security`] (the
//!   REST API's TLS files and token), [`http_client`] (JSON over HTTP),
//!   [`wiring`] (a job's clusters and stores from its configuration),
//!   [`cutover_report`] (the cutover's report file) and [`kudu_activity`]
//!   (tablet-server write counters).
//! - [`cli`]: the command line — every verb's entry point, its own flags
//!   and exit code; the verbs that work in this process (`failover`,
//!   `standby`, `verify`, `cutover`, `state mirror`) compose the halves.
//!   The `ferry` binary (`main.rs`) parses [`cli::Cli`] and dispatches.
//!
//! `server` and `client` never import each other; both may use `api` and
//! the shared modules. The standby / claim / find-newest / take-over
//! sequence is the engine's (`ferry_engine::lease::Standby`).

/// Prints a line on stdout; a closed stdout (the reader went away) is not
/// a reason to panic while a job is stopping.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod api;
pub mod cli;
pub mod client;
pub mod cutover_report;
pub mod http_client;
pub mod key_docs;
// Left as it is: the ferry-kudu work moves it out of this crate.
#[allow(missing_docs, unreachable_pub)]
pub mod kudu_activity;
pub mod process_opts;
pub mod run_args;
pub mod security;
pub mod server;
pub mod settings;
pub mod wiring;

/// The line a command prints for a failure: `error` and its causes, each
/// cause once. (`{:#}` repeats a cause whose text a wrapper already
/// includes, as object-store and lease errors do.)
pub fn error_line(error: &anyhow::Error) -> String {
    ferry_engine::error::display_chain(error.as_ref())
}

#[cfg(test)]
mod error_line_tests {
    #[derive(Debug, thiserror::Error)]
    #[error("cannot list 'job/_lease': {source}")]
    struct Store {
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::other("connection refused");
        let e = anyhow::Error::new(Store { source: io }).context("cannot list the lease object");
        assert_eq!(format!("{e:#}").matches("connection refused").count(), 2);
        assert_eq!(
            super::error_line(&e),
            "cannot list the lease object: cannot list 'job/_lease': connection refused"
        );
    }
}
