//! The `ferry` binary's command line: usage errors, `failover --dry-run`
//! and `--report`, fatal start-up errors and SIGTERM of `ferry run`, the
//! keys that change how rows are read and written. No server, or one
//! small Kudu cluster.

mod config_keys;
mod failover_dry_run;
mod failover_report;
mod run_fatal_errors;
mod validation;
