//! `ferry verify`: proves a job's sink table equal to its source table
//! (or lists what differs), each read at one hybrid time, with
//! [`ferry_verify::verify`]. It takes `ferry run`'s options (`--config`,
//! `job.*` keys), so a job's own configuration verifies its copy.
//!
//! The times: `--source-time` / `--sink-time` (raw hybrid time or `now`;
//! one given, the other is `now`), or `-s/--fromSavepoint` (the drained
//! state's last window end on the source, the sink now), or by default the
//! sink position record (the last completed window's end on the source and
//! the sink time at which the sink held exactly those windows), so a
//! running job is verified without false alarms from writes after its last
//! window.
//!
//! Exit codes: 0 equal, 1 differs or a runtime failure, 2 bad input.

use crate::run_args::{self, RunArgs, RunCommand};
use crate::wiring::{no_position_message, position_times};
use ferry_verify::{At, Method, Progress, Side, VerifyError, VerifyOptions, VerifyReport};
use kudu_client::{HybridTime, KuduClient};
use std::process::ExitCode;

/// Default ranges checksummed at the same time.
pub const DEFAULT_PARALLELISM: usize = 4;

/// Default number of differences listed in full.
pub const DEFAULT_MAX_LISTED: usize = 100;

/// A `--source-time` / `--sink-time` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    /// `now`: the cluster's time when the verification starts.
    Now,
    /// A raw 64-bit hybrid time.
    Raw(u64),
}

impl TimeArg {
    fn parse(flag: &str, value: &str) -> Result<TimeArg, String> {
        if value.eq_ignore_ascii_case("now") {
            return Ok(TimeArg::Now);
        }
        value.parse::<u64>().map(TimeArg::Raw).map_err(|_| {
            format!("invalid value '{value}' for {flag}: expected a raw hybrid time (a whole number, e.g. a savepoint's lastEndTimestamp) or 'now'")
        })
    }

    fn at(self) -> At {
        match self {
            TimeArg::Now => At::Now,
            TimeArg::Raw(t) => At::Time(HybridTime::from_raw(t)),
        }
    }
}

/// `ferry verify` arguments.
#[derive(Debug)]
pub struct VerifyArgs {
    /// The job, as `ferry run` would take it.
    pub run: RunArgs,
    /// `--source-time`.
    pub source_time: Option<TimeArg>,
    /// `--sink-time`.
    pub sink_time: Option<TimeArg>,
    /// `-s/--fromSavepoint`: a drained savepoint or checkpoint.
    pub from_savepoint: Option<String>,
    /// `--sink-table`: compare with this table instead of the job's sink.
    pub sink_table: Option<String>,
    /// Tablets compared at once.
    pub parallelism: usize,
    /// Compare by checksum on the servers, or row by row.
    pub method: Method,
    /// Write the source's rows over what differs.
    pub repair: bool,
    /// Print the report as JSON.
    pub json: bool,
    /// At most this many differing keys are listed.
    pub max_listed: usize,
}

impl VerifyArgs {
    /// The table compared with the source.
    pub fn sink_table(&self) -> String {
        self.sink_table
            .clone()
            .unwrap_or_else(|| self.run.config.sink_table_name())
    }
}

/// Why `ferry verify` gave no answer.
#[derive(Debug)]
pub enum Failure {
    /// Bad input (exit code 2).
    Usage(String),
    /// The clusters or the store failed (exit code 1).
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Failed(e)
    }
}

impl From<VerifyError> for Failure {
    fn from(e: VerifyError) -> Self {
        if e.is_usage() {
            Failure::Usage(e.to_string())
        } else {
            Failure::Failed(anyhow::Error::new(e))
        }
    }
}

/// Parses a whole number flag value in `range`.
pub fn number(flag: &str, value: &str, min: usize, max: usize) -> Result<usize, String> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            format!(
                "invalid value '{value}' for {flag}: expected a whole number from {min} to {max}"
            )
        })
}

/// Parses `--method`.
pub fn method(value: &str) -> Result<Method, String> {
    match value {
        "server" => Ok(Method::Server),
        "client" => Ok(Method::Client),
        other => Err(format!(
            "invalid value '{other}' for --method: expected 'server' (the tablet servers' Checksum RPC) or 'client' (rows streamed through ferry)"
        )),
    }
}

/// Parses `args` (everything after `verify`); `Ok(None)` for `--help`.
/// Errors are usage errors (exit code 2).
pub fn parse(args: &[String]) -> Result<Option<VerifyArgs>, String> {
    let (mut source_time, mut sink_time, mut from_savepoint, mut sink_table) =
        (None, None, None, None);
    let mut parallelism = DEFAULT_PARALLELISM;
    let mut method_v = Method::Server;
    let (mut repair, mut json) = (false, false);
    let mut max_listed = DEFAULT_MAX_LISTED;
    let mut flags = super::flags::Flags::new(args);
    while let Some(arg) = flags.next_arg() {
        let flag = arg.flag();
        match flag {
            "-h" | "--help" => return Ok(None),
            "--source-time" => source_time = Some(TimeArg::parse(flag, &flags.value(&arg)?)?),
            "--sink-time" => sink_time = Some(TimeArg::parse(flag, &flags.value(&arg)?)?),
            "-s" | "--fromSavepoint" => from_savepoint = Some(flags.value(&arg)?),
            "--sink-table" => sink_table = Some(flags.value(&arg)?).filter(|t| !t.is_empty()),
            "-p" | "--parallelism" => parallelism = number(flag, &flags.value(&arg)?, 1, 1024)?,
            "--method" => method_v = method(&flags.value(&arg)?)?,
            "--repair" => repair = true,
            "--json" => json = true,
            "--max-listed" => max_listed = number(flag, &flags.value(&arg)?, 0, 1_000_000)?,
            _ => flags.keep(arg),
        }
    }
    if from_savepoint.is_some() && source_time.is_some() {
        return Err("--fromSavepoint sets the source time (the state's last window end); do not combine it with --source-time".into());
    }
    let rest = flags.into_rest();
    let run = match run_args::parse(&rest).map_err(|e| e.to_string())? {
        RunCommand::Help => return Ok(None),
        RunCommand::Run(run) => *run,
    };
    if run.jobmanager.is_some() {
        return Err("ferry verify reads the tables itself; --jobmanager is not accepted (use POST /ferry/jobs/:jobid/verify for a job's process)".into());
    }
    crate::wiring::kudu_table_pair(&run.config, "verify")?;
    Ok(Some(VerifyArgs {
        run,
        source_time,
        sink_time,
        from_savepoint,
        sink_table,
        parallelism,
        method: method_v,
        repair,
        json,
        max_listed,
    }))
}

/// The times of a verification and where they came from.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    /// Where the source is read.
    pub source: At,
    /// Where the sink is read.
    pub sink: At,
    /// Where the times came from, for the report.
    pub origin: &'static str,
}

/// Resolves the times of `args` (see the module docs).
pub async fn resolve_times(args: &VerifyArgs, sink: &KuduClient) -> Result<Times, Failure> {
    if let Some(path) = &args.from_savepoint {
        let store = crate::wiring::open_job_checkpoints(&args.run).await?;
        let loaded = store
            .load(path)
            .await
            .map_err(|e| Failure::Usage(format!("cannot read --fromSavepoint '{path}': {e}")))?;
        let s = &loaded.state;
        if s.window.is_some() || !s.pending.is_empty() || !s.unassigned.is_empty() {
            return Err(Failure::Usage(format!(
                "the state at '{path}' has a window in progress (the sink may hold part of it): \
                 verify a savepoint of `ferry stop --drain` (or `--drain-check`), or give the times"
            )));
        }
        let Some(end) = s.last_end_timestamp else {
            return Err(Failure::Usage(format!(
                "the state at '{path}' has no completed window (its snapshot never finished)"
            )));
        };
        return Ok(Times {
            source: At::Time(HybridTime::from_raw(end.raw())),
            sink: args.sink_time.unwrap_or(TimeArg::Now).at(),
            origin: "the savepoint's last window end",
        });
    }
    if args.source_time.is_some() || args.sink_time.is_some() {
        return Ok(Times {
            source: args.source_time.unwrap_or(TimeArg::Now).at(),
            sink: args.sink_time.unwrap_or(TimeArg::Now).at(),
            origin: "given",
        });
    }
    let table = args.sink_table();
    match position_times(sink, &args.run.config, &table).await? {
        Some((source, sink)) => Ok(Times {
            source: At::Time(HybridTime::from_raw(source.raw())),
            sink: At::Time(HybridTime::from_raw(sink.raw())),
            origin: "the sink position record",
        }),
        None => Err(Failure::Usage(no_position_message(
            &args.run.config,
            &table,
        ))),
    }
}

/// Runs the verification `args` asks for; progress goes to `progress`.
pub async fn run(
    args: &VerifyArgs,
    progress: Option<tokio::sync::watch::Sender<Progress>>,
) -> Result<(VerifyReport, Times), Failure> {
    let cfg = &args.run.config;
    let (source, sink) = crate::wiring::clients(cfg)?;
    let times = resolve_times(args, &sink).await?;
    let mut opts = VerifyOptions::new(
        Side {
            client: source,
            table: cfg.table_name.clone(),
            at: times.source,
        },
        Side {
            client: sink,
            table: args.sink_table(),
            at: times.sink,
        },
    );
    opts.parallelism = args.parallelism;
    opts.method = args.method;
    opts.max_listed = args.max_listed;
    opts.repair = args.repair;
    opts.progress = progress;
    let report = ferry_verify::verify(opts).await?;
    Ok((report, times))
}

/// The human summary of a report (its last line break left to the
/// printer).
pub fn summary(report: &VerifyReport) -> String {
    report.to_string().trim_end().to_string()
}

/// `ferry verify`: parses, verifies, prints, and maps the outcome to the
/// exit code.
pub fn command(args: &[String]) -> ExitCode {
    let (parsed, runtime) = match crate::cli::prepare(parse(args), help, "verify") {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(async {
        let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let (tx, rx) = tokio::sync::watch::channel(Progress::default());
        let bar = interactive.then(|| crate::server::progress::spawn_verify(rx));
        let result = run(&parsed, interactive.then_some(tx)).await;
        if let Some(bar) = bar {
            bar.abort();
            crate::server::progress::clear_line();
        }
        result
    });
    match outcome {
        Ok((report, times)) => {
            if parsed.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => crate::say!("{text}"),
                    Err(e) => {
                        eprintln!("error: cannot encode the report: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                crate::say!("Times from {}.", times.origin);
                crate::say!("{}", summary(&report));
            }
            if report.equal {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(Failure::Usage(e)) => crate::cli::usage_error(&e, "ferry verify --help"),
        Err(Failure::Failed(e)) => {
            eprintln!("error: {}", crate::error_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// `ferry verify --help`.
pub fn help() -> String {
    "Compare the job's source table with its sink table, each read at one hybrid time, without
copying either: per key range both sides are reduced to a checksum (by the tablet servers'
Checksum RPC, or by streaming rows through ferry with --method client); ranges that differ are
cut until the differing rows are listed (missing, extra, differing with the columns).

Usage: ferry verify [--source-time T] [--sink-time T] [-s PATH] [--sink-table NAME] [-p N]
                    [--method server|client] [--repair] [--json] [--max-listed N] <ferry run options>

      --source-time T       read the source at T: a raw hybrid time or 'now'
      --sink-time T         read the sink at T: a raw hybrid time or 'now'
                            (one of the two given: the other is 'now')
  -s, --fromSavepoint PATH  source at that drained savepoint's lastEndTimestamp, sink now
                            (refused for a state with a window in progress)
      --sink-table NAME     compare with NAME instead of the job's sink table
  -p, --parallelism N       key ranges checksummed at the same time [default: 4]
      --method M            server (Checksum RPC, no rows cross the network) or client [default: server]
      --repair              write the source's version of every differing row to the sink
                            (UPSERT_IGNORE / DELETE_IGNORE), then verify again
      --json                print the report as JSON
      --max-listed N        differences listed in full (all are counted) [default: 100]

Without times, the sink position record (job.positionTable) gives them: the source at the last
completed window's end and the sink at the time it held exactly those windows, so a running job
is verified without false alarms. The job's options are `ferry run`'s (--config FILE, --job.*);
only the cluster addresses, the table names and job.positionTable matter here.

Exit codes: 0 equal, 1 the tables differ or a runtime failure, 2 usage error (bad flag, unknown
table, incomparable schemas, a time older than the cluster's history retention).
"
    .to_string()
}
