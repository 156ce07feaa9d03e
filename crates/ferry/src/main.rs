//! The `ferry` binary: parses the command line and either runs a ferry
//! process (`ferry run` in application mode, `ferry server` in session
//! mode) or acts as a client of one (`list`, `savepoint`, `stop`,
//! `cancel`, `checkpoint`, `run --jobmanager`), mapping the outcome to a
//! documented exit code (0 ok, 1 failure, 2 usage error).
//!
//! # Layout
//!
//! - `settings`: every key of both catalogs (the engine's job keys,
//!   `process_opts`' process keys) read once from the command line, `-D`
//!   and the `--config` file; `run_args`: `ferry run`'s arguments;
//!   `key_docs`: `--help` and docs/configuration.md from the catalogs.
//! - `run`: application and session mode processes; `server`: their REST
//!   and Prometheus listeners; `submit`: starting a job in-process.
//! - `registry`: the jobs of a process and their asynchronous operations.
//! - `rest`: the Flink-shaped REST API, ferry's `/ferry/*` endpoints, the
//!   web page (`web/index.html`, embedded).
//! - `api`: the REST bodies as typed structs, shared by `rest` and `cli`;
//!   `view`: one job's state, read once per request by `rest` and `prom`.
//! - `prom`: the Prometheus exposition; `sampler`: lag history and rates;
//!   `kudu_activity`: tablet-server write counters per table.
//! - `cli`: the client verbs, `ferry state mirror`, `ferry verify` and
//!   `ferry cutover`; `cutover_report`: the cutover's report; `http_client`:
//!   the verbs' HTTP client.
//! - `progress`: snapshot progress on the terminal.
//! - `demo_writer`: the demo's workload.

mod api;
mod cli;
mod cutover_report;
mod demo_writer;
mod http_client;
mod key_docs;
mod kudu_activity;
mod process_opts;
mod progress;
mod prom;
mod registry;
mod rest;
mod run;
mod run_args;
mod sampler;
mod server;
mod settings;
mod submit;
mod view;

use clap::{Parser, Subcommand};
use ferry_engine::JobStatus;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "ferry",
    version,
    about = "Continuous replication and disaster recovery for Apache Kudu"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `--jobmanager` and the REST API's security keys, shared by the client
/// verbs.
#[derive(clap::Args, Debug)]
struct Target {
    /// Address of the ferry process's REST API (https://HOST:PORT for TLS).
    #[arg(
        short = 'm',
        long = "jobmanager",
        default_value = "127.0.0.1:8081",
        env = "FERRY_JOBMANAGER"
    )]
    jobmanager: String,
    /// A secured REST API, with the server's key names:
    /// security.ssl.rest.truststore=CA.pem, security.ssl.rest.keystore=CLIENT.pem
    /// (+ security.ssl.rest.private-key=KEY.pem), security.rest.token-file=FILE,
    /// security.ssl.rest.enabled=true; each also as FERRY_SECURITY_SSL_REST_TRUSTSTORE …
    /// (see docs/security.md).
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    security: Vec<String>,
}

impl Target {
    /// The REST client; a bad option or file is a usage error (exit 2).
    fn rest(&self, verb: &str) -> Result<cli::Rest, ExitCode> {
        cli::RestClientOptions::from_dynamic(&self.security)
            .and_then(|o| cli::Rest::new(&self.jobmanager, &o))
            .map_err(|e| usage_error(&e, &format!("ferry {verb} --help")))
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run a replication job (see `ferry run --help` for every key).
    #[command(disable_help_flag = true)]
    Run {
        /// `--job.* / --reader.* / --writer.*` keys and process flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Start a session-mode process that runs jobs submitted with
    /// `ferry run --jobmanager HOST:PORT` (options: --rest.address,
    /// --rest.port, --metrics.address, --metrics.port, -Dkey=value,
    /// --config FILE).
    #[command(disable_help_flag = true)]
    Server {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// List jobs (running and scheduled by default), like `flink list`.
    List {
        #[command(flatten)]
        target: Target,
        /// Show only running jobs.
        #[arg(short = 'r', long)]
        running: bool,
        /// Show only scheduled jobs.
        #[arg(short = 's', long)]
        scheduled: bool,
        /// Show all jobs, including finished ones.
        #[arg(short = 'a', long)]
        all: bool,
    },
    /// Trigger a savepoint, like `flink savepoint JOB_ID [DIR]`.
    Savepoint {
        #[command(flatten)]
        target: Target,
        /// Return after triggering; print the trigger id.
        #[arg(short = 'd', long)]
        detached: bool,
        job_id: String,
        /// Target directory (default: the job's --savepointPath).
        dir: Option<String>,
    },
    /// Stop a job with a savepoint, like `flink stop --savepointPath DIR JOB_ID`.
    Stop {
        #[command(flatten)]
        target: Target,
        /// Savepoint directory (default: the job's --savepointPath).
        #[arg(short = 'p', long = "savepointPath", alias = "savepoint-path")]
        savepoint_path: Option<String>,
        /// Finish the open window before stopping (no splits in the savepoint).
        #[arg(short = 'd', long)]
        drain: bool,
        /// Wait until source writes stopped, one more window completed, split
        /// counts are 0 and sink writes stopped, then stop.
        #[arg(long = "drain-check")]
        drain_check: bool,
        /// Give up the drain check after this many seconds.
        #[arg(long = "drain-timeout", default_value_t = 300)]
        drain_timeout: u64,
        /// A table counts as quiet when its write counters did not move for
        /// this many seconds.
        #[arg(long = "quiet-period", default_value_t = 5.0)]
        quiet_period: f64,
        job_id: String,
    },
    /// Cancel a job (its retained checkpoints stay), like `flink cancel`.
    Cancel {
        #[command(flatten)]
        target: Target,
        job_id: String,
    },
    /// Take a checkpoint now, like `flink checkpoint JOB_ID`.
    Checkpoint {
        #[command(flatten)]
        target: Target,
        /// Accepted for compatibility (ferry checkpoints are always full).
        #[arg(long)]
        full: bool,
        job_id: String,
    },
    /// Checkpoint and savepoint storage tools (`ferry state mirror SRC DST`).
    State {
        #[command(subcommand)]
        command: cli::state::StateCommand,
    },
    /// Find the newest complete, valid savepoint or checkpoint of a job and
    /// start the job from it (see `ferry failover --help`).
    #[command(disable_help_flag = true)]
    Failover {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Watch a job's lease and take the job over when it lapses (see
    /// `ferry standby --help`).
    #[command(disable_help_flag = true)]
    Standby {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Prove a job's sink table equal to its source table, each read at one
    /// hybrid time, or list what differs (see `ferry verify --help`).
    #[command(disable_help_flag = true)]
    Verify {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Planned cutover: drain check, stop with a savepoint, verify at the
    /// final window end, report (RPO) and the reverse job (see `ferry
    /// cutover --help`).
    #[command(disable_help_flag = true)]
    Cutover {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The demo's source workload (used by scripts/demo).
    #[command(hide = true)]
    DemoWriter(demo_writer::DemoWriterArgs),
}

/// Prints a line on stdout; a closed stdout (the reader went away) is not
/// a reason to panic while a job is stopping.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// What `ferry run` prints when the job finished: stopped with a
/// savepoint, or (bounded sources) read to the end, with a final
/// checkpoint (`chk-<n>` in Flink's layout).
fn finished_line(path: &str) -> String {
    if path.contains("/chk-") {
        format!(
            "Job finished: every source was read to its bounded end; final checkpoint at {path}"
        )
    } else {
        format!("Job finished; savepoint at {path}")
    }
}

/// Exit code for usage and configuration errors.
const EXIT_USAGE: u8 = 2;

/// Hands large buffers (scan frames, write batches) back to the kernel when
/// freed. glibc's default threshold rises to the largest block ever freed,
/// after which 8 MiB frames live in heap arenas that keep what they grow
/// to: peak RSS then crept up with run length (docs/benchmarks.md,
/// finding 3). An operator's `GLIBC_TUNABLES` setting wins.
fn pin_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("mmap_threshold")) {
        // SAFETY: mallopt only changes allocator parameters; called before
        // any thread exists.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}

fn main() -> ExitCode {
    pin_mmap_threshold();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Run { args } => run_command(&args),
        Command::Server { args } => server_command(&args),
        Command::List {
            target,
            running,
            scheduled,
            all,
        } => match target.rest("list") {
            Ok(rest) => verb(async move { cli::list(&rest, running, scheduled, all).await }),
            Err(code) => code,
        },
        Command::Savepoint {
            target,
            detached,
            job_id,
            dir,
        } => match target.rest("savepoint") {
            Ok(rest) => {
                verb(async move { cli::savepoint(&rest, &job_id, dir.as_deref(), detached).await })
            }
            Err(code) => code,
        },
        Command::Stop {
            target,
            savepoint_path,
            drain,
            drain_check,
            drain_timeout,
            quiet_period,
            job_id,
        } => {
            let rest = match target.rest("stop") {
                Ok(rest) => rest,
                Err(code) => return code,
            };
            verb(async move {
                if drain_check {
                    let opts = cli::DrainCheck {
                        timeout: Duration::from_secs(drain_timeout),
                        quiet: Duration::from_secs_f64(quiet_period.max(0.0)),
                    };
                    cli::drain_check(&rest, &job_id, savepoint_path.as_deref(), opts).await
                } else {
                    cli::stop(&rest, &job_id, savepoint_path.as_deref(), drain).await
                }
            })
        }
        Command::Cancel { target, job_id } => match target.rest("cancel") {
            Ok(rest) => verb(async move { cli::cancel(&rest, &job_id).await }),
            Err(code) => code,
        },
        Command::Checkpoint {
            target,
            full,
            job_id,
        } => match target.rest("checkpoint") {
            Ok(rest) => verb(async move { cli::checkpoint(&rest, &job_id, full).await }),
            Err(code) => code,
        },
        Command::State { command } => {
            init_logging();
            cli::state::run(command)
        }
        Command::Failover { args } => dr_command(&args, "failover"),
        Command::Standby { args } => dr_command(&args, "standby"),
        Command::Verify { args } => cli::verify::command(&args),
        Command::Cutover { args } => cli::cutover::command(&args),
        Command::DemoWriter(args) => {
            init_logging();
            verb(demo_writer::run(args))
        }
    }
}

/// `ferry run`: help, submit to a jobmanager, or run the job here.
fn run_command(args: &[String]) -> ExitCode {
    match run_args::parse(args) {
        Ok(run_args::RunCommand::Help) => {
            print!("{}", run_args::help());
            ExitCode::SUCCESS
        }
        Ok(run_args::RunCommand::Run(run)) if run.jobmanager.is_some() => {
            // The process's security.* keys are the client's here.
            let security = cli::RestClientOptions::from_process(&run.process.server.security);
            let jobmanager = run.jobmanager.as_deref().unwrap_or_default();
            if let Err(e) = security.prepare(jobmanager) {
                return usage_error(&e, "ferry run --help");
            }
            client(async move { cli::submit(*run).await }).unwrap_or(ExitCode::FAILURE)
        }
        Ok(run_args::RunCommand::Run(run)) => run_job(*run),
        Err(e) => usage_error(&e.to_string(), "ferry run --help"),
    }
}

/// `ferry failover` and `ferry standby`: help, or the takeover.
fn dr_command(args: &[String], verb: &str) -> ExitCode {
    use cli::failover::{self, Outcome};
    let (parsed, runtime) = match prepare(failover::parse(args, verb), || dr_help(verb), verb) {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    if verb == "standby" && parsed.run.config.ha.kind != ferry_engine::config::HaKind::Lease {
        return usage_error(
            "ferry standby needs high-availability.type lease (the active instance must hold a lease to be taken over from)",
            "ferry standby --help",
        );
    }
    let outcome = if verb == "standby" {
        runtime
            .block_on(cli::standby::standby(parsed))
            .map(Outcome::Ran)
    } else {
        runtime.block_on(failover::failover(parsed))
    };
    match outcome {
        Ok(Outcome::Reported) | Ok(Outcome::Ran(JobStatus::Canceled)) => ExitCode::SUCCESS,
        Ok(Outcome::Ran(JobStatus::Finished { savepoint })) => {
            say!("{}", finished_line(&savepoint));
            ExitCode::SUCCESS
        }
        Ok(Outcome::NothingFound) => ExitCode::from(failover::EXIT_NOTHING_FOUND),
        Ok(Outcome::Ran(JobStatus::Failed { error })) => {
            eprintln!("error: the job failed: {error}");
            ExitCode::FAILURE
        }
        Ok(Outcome::Ran(other)) => {
            eprintln!("error: the job ended in state {other:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The start of a verb that parses its own arguments: its help, a usage
/// error (exit 2), or the parsed arguments with logging on and a runtime.
pub(crate) fn prepare<A>(
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

fn dr_help(verb: &str) -> String {
    let what = if verb == "failover" {
        "Find the newest complete, valid savepoint or checkpoint of the job (chosen by the window
         end it records, torn and damaged directories skipped with a warning), print it (path,
         window end, age = RPO of that copy) and start the job from it in this process, under
         the state's job id. Prints an RTO breakdown once the first window completes.

         Usage: ferry failover [--from LOCATION]... [--job-id ID] [--dry-run | --report] [--json] <ferry run options>

               --from LOCATION   where to look (repeatable) [default: job.checkpointsDirectory]
               --job-id ID       only this job's state [default: the HA job id with
                                 high-availability.type lease, else any job's]
               --dry-run         only report what would be started
               --report          only print the data RPO of a failover now: now − the end of the last
                                 window the sink holds (newest valid state, and the sink position if
                                 the sink cluster answers), as a span and a UTC time; starts nothing
               --json            report as JSON

         With high-availability.type lease it claims the lease first (waiting for a live holder's
         lease to lapse).

         Exit codes: 0 the job ended cleanly or --dry-run / --report found a state, 1 runtime failure,
         2 usage or configuration error, 3 no valid state found.
"
    } else {
        "Watch the job's lease (high-availability.type lease) with warm Kudu connections and the
         newest valid state pre-loaded; when the lease has not been renewed for
         high-availability.lease-duration, claim the next generation and start the job from the
         newest valid state (same job id), with REST and metrics like `ferry run`.

         Usage: ferry standby [--from LOCATION]... <ferry run options>

               --from LOCATION   where to look for state, e.g. the DR replica (repeatable)
                                 [default: job.checkpointsDirectory]

         Exit codes: 0 the job ended cleanly, 1 runtime failure, 2 usage or configuration error.
"
    };
    format!(
        "{what}
The job's options are `ferry run`'s (see `ferry run --help`); docs/dr.md has the runbook.
"
    )
}

/// `ferry server`: help, or serve jobs over REST.
fn server_command(args: &[String]) -> ExitCode {
    match server_options(args) {
        Ok(None) => {
            print!("{}", server_help());
            ExitCode::SUCCESS
        }
        Ok(Some(opts)) => {
            init_logging();
            match runtime().map(|rt| rt.block_on(run::serve(opts))) {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) | Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => usage_error(&e, "ferry server --help"),
    }
}

pub(crate) fn usage_error(message: &str, help: &str) -> ExitCode {
    eprintln!("error: {message}");
    eprintln!("Run '{help}' for every key and its default.");
    ExitCode::from(EXIT_USAGE)
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
}

/// Runs a client future; prints its error.
fn client<F: std::future::Future<Output = anyhow::Result<ExitCode>>>(f: F) -> Option<ExitCode> {
    match runtime().and_then(|rt| rt.block_on(f)) {
        Ok(code) => Some(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            None
        }
    }
}

fn verb<F: std::future::Future<Output = anyhow::Result<()>>>(f: F) -> ExitCode {
    client(async move { f.await.map(|()| ExitCode::SUCCESS) }).unwrap_or(ExitCode::FAILURE)
}

/// `ferry server` options; `Ok(None)` for `--help`. Read like `ferry
/// run`'s (one map per source, the command line wins over `--config`), but
/// only the server's own keys: from a config file shared with `ferry run`
/// the others are left to the jobs, on the command line they are refused.
fn server_options(args: &[String]) -> Result<Option<process_opts::ProcessOptions>, String> {
    use ferry_engine::config::Scope;
    use settings::{Settings, SettingsError};
    let mut cli = Settings::default();
    let mut file = Settings::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let next = args.get(i + 1).map(String::as_str);
        i += 1;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (arg, None),
        };
        let mut value = || -> Result<&str, SettingsError> {
            match inline {
                Some(v) => Ok(v),
                None => {
                    i += 1;
                    next.ok_or_else(|| SettingsError::MissingFlagValue {
                        flag: flag.to_string(),
                    })
                }
            }
        };
        let step = match flag {
            "-h" | "--help" => return Ok(None),
            "-D" => value().and_then(|pair| cli.insert_dynamic(pair)),
            f if f.starts_with("-D") => cli.insert_dynamic(&arg[2..]),
            "--config" => value().and_then(|path| {
                file = Settings::from_toml_file(std::path::Path::new(path))?;
                Ok(())
            }),
            f if f.starts_with("--") && f.len() > 2 => cli
                .insert_flag(&f[2..], inline, next)
                .map(|took_next| i += usize::from(took_next)),
            other => return Err(format!("unknown option '{other}' for ferry server")),
        };
        step.map_err(|e| e.to_string())?;
    }
    if let Some((_, key)) = cli.keys().find(|(s, _)| s.scope != Scope::Process) {
        return Err(SettingsError::NotHere {
            key: key.name(),
            command: "ferry server",
            reason: "it is a per-job key; give it to `ferry run` (with --jobmanager to submit the job here)",
        }
        .to_string());
    }
    file.retain(|s| s.scope == Scope::Process);
    let settings = file.overridden_by(cli);
    process_opts::ProcessOptions::from_config(settings.config())
        .map(Some)
        .map_err(|e| e.to_string())
}

fn server_help() -> String {
    let keys = settings::KEYS
        .keys()
        .filter(|(s, _)| s.scope == ferry_engine::config::Scope::Process)
        .map(|(_, k)| k.spec())
        .collect::<Vec<_>>();
    format!(
        "Start a session-mode ferry process: it serves the REST API, the web page and the\n\
         Prometheus endpoint, and runs the jobs submitted with `ferry run --jobmanager HOST:PORT`.\n\
         SIGTERM / Ctrl-C stops every job (with a savepoint where --savepointPath was given).\n\n\
         Usage: ferry server [--rest.port PORT] [--rest.address ADDR] [--metrics.port PORT] [-Dkey=value] [--config FILE]\n\n\
         --config FILE reads these keys from a TOML file (command-line values win); its other\n\
         keys are left to `ferry run`.\n\n{}",
        key_docs::render_help(&keys)
    )
}

fn run_job(run: run_args::RunArgs) -> ExitCode {
    init_logging();
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run::run(run)) {
        Ok(JobStatus::Finished { savepoint }) => {
            say!("{}", finished_line(&savepoint));
            ExitCode::SUCCESS
        }
        Ok(JobStatus::Canceled) => ExitCode::SUCCESS,
        Ok(JobStatus::Failed { error }) => {
            eprintln!("error: the job failed: {error}");
            ExitCode::FAILURE
        }
        Ok(other) => {
            eprintln!("error: the job ended in state {other:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FERRY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: journald, files and pipes get plain text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(progress::LogWriter)
        .try_init();
}
