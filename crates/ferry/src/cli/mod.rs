//! The command line: every verb's entry point, the flags of the verbs
//! that parse their own arguments, and the exit codes (0 ok, 1 failure, 2
//! usage error; `ferry failover` adds 3).
//!
//! - [`args`]: the clap types the `ferry` binary parses.
//! - [`run`]: `ferry run` (submit to a jobmanager, or run here);
//!   [`server`]: `ferry server` (session mode).
//! - [`failover`], [`standby`]: taking a job over from its newest valid
//!   state (the engine's `lease::Standby` does the waiting, claiming and
//!   finding; these print its events); [`verify`]: `ferry verify`;
//!   [`cutover`]: the planned cutover (drain check and stop through the
//!   client half, verification and report here); [`state`]: `ferry state
//!   mirror`; [`failback`]: the old source back after an unplanned
//!   failover; [`drill`]: `ferry drill`, the DR checks without a
//!   takeover; [`demo_writer`]: the demo's workload.
//!
//! These verbs compose the halves: they may use [`crate::server`] (to run
//! a job here) and [`crate::client`] (to talk to a running process); the
//! halves never use this module.

pub mod args;
pub mod cutover;
pub mod demo_writer;
pub mod drill;
pub mod failback;
pub mod failover;
mod flags;
pub mod run;
pub mod server;
pub mod standby;
pub mod state;
pub mod verify;

pub use args::{Cli, Command, Target};

use std::process::ExitCode;

/// What `ferry run` prints when the job finished: stopped with a
/// savepoint, or (bounded sources) read to the end, with a final
/// checkpoint (`chk-<n>` in Flink's layout).
pub(crate) fn finished_line(path: &str) -> String {
    if path.contains("/chk-") {
        format!(
            "Job finished: every source was read to its bounded end; final checkpoint at {path}"
        )
    } else {
        format!("Job finished; savepoint at {path}")
    }
}

/// Exit code for usage and configuration errors.
pub const EXIT_USAGE: u8 = 2;

/// Hands large buffers (scan frames, write batches) back to the kernel when
/// freed. glibc's default threshold rises to the largest block ever freed,
/// after which 8 MiB frames live in heap arenas that keep what they grow
/// to: peak RSS then crept up with run length (docs/benchmarks.md,
/// finding 3). An operator's `GLIBC_TUNABLES` setting wins.
pub fn pin_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("mmap_threshold")) {
        // SAFETY: mallopt only changes allocator parameters; called before
        // any thread exists.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}

/// The start of a verb that parses its own arguments: its help, a usage
/// error (exit 2), or the parsed arguments with logging on and a runtime.
pub fn prepare<A>(
    parsed: Result<Option<A>, String>,
    help: impl FnOnce() -> String,
    verb: &str,
) -> Result<(A, tokio::runtime::Runtime), ExitCode> {
    let args = match parsed {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{}", help());
            return Err(ExitCode::SUCCESS);
        }
        Err(e) => return Err(usage_error(&e, &format!("ferry {verb} --help"))),
    };
    init_logging();
    match runtime() {
        Ok(rt) => Ok((args, rt)),
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// Prints a usage error and where to find help; exit code 2.
pub fn usage_error(message: &str, help: &str) -> ExitCode {
    eprintln!("error: {message}");
    eprintln!("Run '{help}' for every key and its default.");
    ExitCode::from(EXIT_USAGE)
}

/// The multi-threaded runtime a verb runs on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
}

/// The exit code of a verb that failed with `error`: 2 when it is a
/// configuration error found at run time (two jobs given one
/// `high-availability.cluster-id`), else 1.
pub fn exit_code_of(error: &anyhow::Error) -> ExitCode {
    let other_job = error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<ferry_engine::lease::LeaseError>(),
            Some(ferry_engine::lease::LeaseError::OtherJob { .. })
        )
    });
    match other_job {
        true => ExitCode::from(EXIT_USAGE),
        false => ExitCode::FAILURE,
    }
}

/// Runs a client future; prints its error.
pub fn client<F: std::future::Future<Output = anyhow::Result<ExitCode>>>(f: F) -> Option<ExitCode> {
    match runtime().and_then(|rt| rt.block_on(f)) {
        Ok(code) => Some(code),
        Err(e) => {
            eprintln!("error: {}", crate::error_line(&e));
            None
        }
    }
}

/// Runs a verb's future; its error is printed and exit code 1.
pub fn verb<F: std::future::Future<Output = anyhow::Result<()>>>(f: F) -> ExitCode {
    client(async move { f.await.map(|()| ExitCode::SUCCESS) }).unwrap_or(ExitCode::FAILURE)
}

/// Logs to stderr (`FERRY_LOG`, default `info`), around the progress line.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FERRY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: journald, files and pipes get plain text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(crate::server::progress::LogWriter)
        .try_init();
}
