//! `ferry cutover`: the planned cutover in one command. It runs the drain
//! check of `ferry stop --drain-check` on the running job, stops it with a
//! drained savepoint (a window open at the stop finishes first), reads
//! that savepoint (its last window end is the final end;
//! drained = no window in progress), takes the sink cluster's time after
//! the stop (the cutover time), verifies the source at the final end
//! against the sink at the cutover time, and writes a [`CutoverReport`]
//! (`--report`, default `./cutover-<jobid>.json`). It prints the report —
//! equal or what differs, and the RPO: 0 when drained and equal, else the
//! age of the final end — and the command of the reverse job (old sink →
//! old source, `ferry run --fromCutover REPORT`), which `--start-reverse`
//! runs in this process.
//!
//! `--unplanned`, or a source cluster that does not answer: prints what
//! `ferry failover --report` prints (the newest valid state and the data
//! RPO of failing over to the sink now) instead; without `--unplanned`
//! that ends with exit code 1 (no cutover happened).
//!
//! Exit codes: 0 equal, 1 the tables differ or a failure, 2 usage error,
//! 3 (`--unplanned`) no valid state found.

use super::failover::{report, DrArgs, Outcome, EXIT_NOTHING_FOUND};
use super::verify::{method, number, Failure, DEFAULT_PARALLELISM};
use crate::client::{drain_then_stop, DrainCheck, Rest, RestClientOptions};
use crate::cutover_report::{CutoverReport, CutoverSide, CUTOVER_REPORT_VERSION};
use crate::run_args::{self, RunArgs, RunCommand};
use anyhow::{anyhow, Context};
use ferry_engine::time::now_ms;
use ferry_engine::{JobStatus, SinkTime};
use ferry_verify::{At, Method, Side, VerifyOptions};
use kudu_client::{HybridTime, KuduClient};
pub(crate) use reverse::reverse_options;
use reverse::shell_quote;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

mod reverse;

/// `ferry cutover` arguments.
#[derive(Debug)]
pub struct CutoverArgs {
    /// The forward job, as `ferry run` takes it.
    pub run: RunArgs,
    /// Its options as given (the reverse job starts from them).
    pub run_options: Vec<String>,
    /// The active job's REST API (`--jobmanager`).
    pub jobmanager: String,
    /// The job to cut over (`--job-id`, required).
    pub job_id: Option<String>,
    /// Where the stop's savepoint goes (`--savepointPath`).
    pub savepoint_path: Option<String>,
    /// The drain check's timeout and quiet period.
    pub drain: DrainCheck,
    /// Where the report is written (`--report`).
    pub report: Option<PathBuf>,
    /// Start the reverse job in this process (`--start-reverse`).
    pub start_reverse: bool,
    /// Print the report as JSON.
    pub json: bool,
    /// Verification parallelism.
    pub parallelism: usize,
    /// Verification method.
    pub method: Method,
    /// `--unplanned`: the source cluster is gone; print the failover report.
    pub unplanned: bool,
}

/// Parses `args` (everything after `cutover`); `Ok(None)` for `--help`.
pub fn parse(args: &[String]) -> Result<Option<CutoverArgs>, String> {
    let mut jobmanager =
        std::env::var("FERRY_JOBMANAGER").unwrap_or_else(|_| "127.0.0.1:8081".into());
    let (mut job_id, mut savepoint_path, mut report) = (None, None, None);
    let mut drain = DrainCheck {
        timeout: Duration::from_secs(300),
        quiet: Duration::from_secs(5),
    };
    let (mut start_reverse, mut json, mut unplanned) = (false, false, false);
    let mut parallelism = DEFAULT_PARALLELISM;
    let mut method_v = Method::Server;
    let mut flags = super::flags::Flags::new(args);
    while let Some(arg) = flags.next_arg() {
        let flag = arg.flag();
        match flag {
            "-h" | "--help" => return Ok(None),
            "-m" | "--jobmanager" => jobmanager = flags.value(&arg)?,
            "--job-id" => job_id = Some(flags.value(&arg)?),
            "--savepointPath" | "--savepoint-path" => savepoint_path = Some(flags.value(&arg)?),
            "--drain-timeout" => {
                let v = flags.value(&arg)?;
                drain.timeout = Duration::from_secs(number(flag, &v, 1, 86_400)? as u64);
            }
            "--quiet-period" => {
                let v = flags.value(&arg)?;
                let secs = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && (0.0..=3600.0).contains(s))
                    .ok_or_else(|| {
                        format!("invalid value '{v}' for --quiet-period: expected seconds from 0 to 3600")
                    })?;
                drain.quiet = Duration::from_secs_f64(secs);
            }
            "--report" => report = Some(PathBuf::from(flags.value(&arg)?)),
            "--start-reverse" => start_reverse = true,
            "--json" => json = true,
            "--unplanned" => unplanned = true,
            "-p" | "--parallelism" => parallelism = number(flag, &flags.value(&arg)?, 1, 1024)?,
            "--method" => method_v = method(&flags.value(&arg)?)?,
            _ => flags.keep(arg),
        }
    }
    let rest = flags.into_rest();
    let run = match run_args::parse(&rest).map_err(|e| e.to_string())? {
        RunCommand::Help => return Ok(None),
        RunCommand::Run(run) => *run,
    };
    if run.from_savepoint.is_some() {
        return Err("ferry cutover takes the savepoint it stops the job with; -s/--fromSavepoint is not accepted".into());
    }
    if job_id.is_none() && !unplanned {
        return Err(
            "--job-id ID is required (the running job to cut over; `ferry list` shows it)".into(),
        );
    }
    if unplanned && start_reverse {
        return Err("--start-reverse needs a planned cutover (an equal copy); after an unplanned failover start the job on the new primary with a snapshot".into());
    }
    crate::wiring::kudu_table_pair(&run.config, "cutover")?;
    // The job's REST API: the job's own security.* keys (Flink's model,
    // one configuration for both sides); a bad one is a usage error.
    if !unplanned {
        RestClientOptions::from_process(&run.process.server.security).prepare(&jobmanager)?;
    }
    Ok(Some(CutoverArgs {
        run,
        run_options: rest,
        jobmanager,
        job_id,
        savepoint_path,
        drain,
        report,
        start_reverse,
        json,
        parallelism,
        method: method_v,
        unplanned,
    }))
}

/// The old source at the cutover (best effort for the table id).
async fn side(client: &KuduClient, masters: &[String], table: &str) -> CutoverSide {
    CutoverSide {
        masters: masters.to_vec(),
        table: table.to_string(),
        table_id: client
            .open_table(table)
            .await
            .ok()
            .map(|t| t.id().to_string()),
    }
}

/// Steps 1–5: stop, read the savepoint, verify, write the report (also
/// `ferry drill --switchover`'s two cutovers).
pub(crate) async fn cut_over(
    args: &CutoverArgs,
    job: &str,
) -> Result<(CutoverReport, String), Failure> {
    let cfg = &args.run.config;
    let security = RestClientOptions::from_process(&args.run.process.server.security);
    let rest = Rest::new(&args.jobmanager, &security).map_err(Failure::Usage)?;
    let drain = DrainCheck {
        timeout: args.drain.timeout,
        quiet: args.drain.quiet,
    };
    // Stopped with drain as well: a window that opened after the checklist
    // passed finishes first, so the savepoint holds none.
    let savepoint =
        drain_then_stop(&rest, job, args.savepoint_path.as_deref(), drain, true).await?;
    let (drained, final_end) = read_savepoint(args, &savepoint).await?;
    let (source, sink) = crate::wiring::clients(cfg)?;
    let sink_table = cfg.sink_table_name();
    // The job stopped: the sink takes no more of its writes, so any time
    // from now on sees the copy as it was left.
    let cutover_time = sink
        .server_clock()
        .await
        .context("reading the sink cluster's clock")?;
    let cutover_time = SinkTime::from_raw(cutover_time.raw());
    crate::say!("Verifying the source at the final window end {final_end} against the sink at {cutover_time} ...");
    let mut opts = VerifyOptions::new(
        Side {
            client: source.clone(),
            table: cfg.table_name.clone(),
            at: At::Time(HybridTime::from_raw(final_end.raw())),
        },
        Side {
            client: sink.clone(),
            table: sink_table.clone(),
            at: At::Time(HybridTime::from_raw(cutover_time.raw())),
        },
    );
    opts.parallelism = args.parallelism;
    opts.method = args.method;
    let verify = ferry_verify::verify(opts).await?;
    let equal = verify.equal;
    let created_at_ms = now_ms();
    let report = CutoverReport {
        version: CUTOVER_REPORT_VERSION,
        job_id: job.to_string(),
        savepoint: savepoint.clone(),
        source: side(&source, &cfg.source_master_addresses, &cfg.table_name).await,
        sink: side(&sink, &cfg.sink_master_addresses, &sink_table).await,
        final_end,
        cutover_time,
        drained,
        equal,
        rpo_ms: if drained && equal {
            0
        } else {
            created_at_ms.saturating_sub(crate::wiring::source_clock(cfg).epoch_millis(final_end))
        },
        verify,
        created_at_ms,
    };
    let path = args
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("cutover-{job}.json")));
    report.save(&path).map_err(anyhow::Error::new)?;
    let shown = std::path::absolute(&path)
        .unwrap_or(path)
        .display()
        .to_string();
    Ok((report, shown))
}

/// Whether the stop's savepoint is drained (no window in progress), and
/// its final window end.
async fn read_savepoint(
    args: &CutoverArgs,
    savepoint: &str,
) -> Result<(bool, ferry_engine::SourceTime), Failure> {
    let store = crate::wiring::open_job_checkpoints(&args.run).await?;
    let state = store
        .load(savepoint)
        .await
        .map_err(|e| anyhow!("cannot read the savepoint '{savepoint}': {e}"))?
        .state;
    let drained = state.window.is_none() && state.pending.is_empty() && state.unassigned.is_empty();
    let final_end = state
        .last_end_timestamp
        .ok_or_else(|| anyhow!("the savepoint '{savepoint}' has no completed window"))?;
    Ok((drained, final_end))
}

/// Prints the report (human or JSON) and the reverse command.
fn print_report(args: &CutoverArgs, report: &CutoverReport, path: &str) {
    let reverse: Vec<String> = reverse_options(args, report, path)
        .iter()
        .map(|a| shell_quote(a))
        .collect();
    let command = format!("ferry run {}", reverse.join(" "));
    if args.json {
        let mut body = serde_json::to_value(report).unwrap_or_default();
        body["reportPath"] = path.into();
        body["reverseCommand"] = command.into();
        crate::say!("{body}");
        return;
    }
    crate::say!("Cutover report for job {} ({path}):", report.job_id);
    crate::say!("  savepoint:    {}", report.savepoint);
    crate::say!(
        "  final end:    {} (source hybrid time), drained: {}",
        report.final_end,
        if report.drained {
            "yes"
        } else {
            "no (a window was in progress)"
        }
    );
    crate::say!("  cutover time: {} (sink hybrid time)", report.cutover_time);
    crate::say!("{}", super::verify::summary(&report.verify));
    if report.equal && report.drained {
        crate::say!("RPO: 0 (the sink equals the source as of the final window end)");
        crate::say!("Reverse replication (new primary -> old source, no snapshot):\n  {command}");
    } else {
        crate::say!(
            "RPO: {} ms (age of the final window end); the copy is NOT proven equal: do not start the reverse job from this report",
            report.rpo_ms
        );
    }
}

/// `--unplanned`, or a source that does not answer: `ferry failover
/// --report` (the newest valid state, the sink position, the data RPO of
/// failing over now).
async fn unplanned(args: CutoverArgs) -> anyhow::Result<ExitCode> {
    let job = args
        .job_id
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|e| anyhow!("invalid value for --job-id: {e}"))?;
    if !args.json {
        crate::say!(
            "Unplanned cutover: the RPO of an unplanned failover now (no stop, no verification):"
        );
    }
    let dr = DrArgs {
        from: vec![args.run.config.checkpoints_directory.clone()],
        run: args.run,
        job,
        dry_run: false,
        json: args.json,
        report: true,
        to: None,
    };
    Ok(match report::report(&dr).await? {
        Outcome::NothingFound => ExitCode::from(EXIT_NOTHING_FOUND),
        _ => ExitCode::SUCCESS,
    })
}

/// Whether the source cluster answers (its clock) within [`SOURCE_PROBE`].
async fn source_answers(args: &CutoverArgs) -> bool {
    let Ok((source, _)) = crate::wiring::clients(&args.run.config) else {
        return false;
    };
    matches!(
        tokio::time::timeout(SOURCE_PROBE, source.server_clock()).await,
        Ok(Ok(_))
    )
}

/// How long the source cluster may take to answer before `ferry cutover`
/// treats it as gone.
const SOURCE_PROBE: Duration = Duration::from_secs(15);

/// `ferry cutover`.
pub fn command(raw: &[String]) -> ExitCode {
    let (args, runtime) = match crate::cli::prepare(parse(raw), help, "cutover") {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    if !args.unplanned && !runtime.block_on(source_answers(&args)) {
        eprintln!(
            "warning: the source cluster does not answer within {}s: no planned cutover; \
             the RPO of an unplanned failover follows",
            SOURCE_PROBE.as_secs()
        );
        if args.start_reverse {
            return ExitCode::FAILURE;
        }
        return runtime.block_on(unplanned(args)).map_or_else(
            |e| {
                eprintln!("error: {}", crate::error_line(&e));
                ExitCode::FAILURE
            },
            |_| ExitCode::FAILURE,
        );
    }
    if args.unplanned {
        return runtime.block_on(unplanned(args)).unwrap_or_else(|e| {
            eprintln!("error: {}", crate::error_line(&e));
            ExitCode::FAILURE
        });
    }
    let job = args.job_id.clone().unwrap_or_default();
    let (report, path) = match runtime.block_on(cut_over(&args, &job)) {
        Ok(done) => done,
        Err(Failure::Usage(e)) => return crate::cli::usage_error(&e, "ferry cutover --help"),
        Err(Failure::Failed(e)) => {
            eprintln!("error: {}", crate::error_line(&e));
            return ExitCode::FAILURE;
        }
    };
    print_report(&args, &report, &path);
    if !(report.equal && report.drained) {
        return ExitCode::FAILURE;
    }
    if !args.start_reverse {
        return ExitCode::SUCCESS;
    }
    let reverse = match run_args::parse(&reverse_options(&args, &report, &path)) {
        Ok(RunCommand::Run(run)) => *run,
        Ok(RunCommand::Help) => return ExitCode::FAILURE,
        Err(e) => return crate::cli::usage_error(&e.to_string(), "ferry run --help"),
    };
    crate::say!("Starting the reverse job ...");
    match runtime.block_on(crate::server::run::run(reverse)) {
        Ok(JobStatus::Finished { savepoint }) => {
            crate::say!("Job finished; savepoint at {savepoint}");
            ExitCode::SUCCESS
        }
        Ok(JobStatus::Canceled) => ExitCode::SUCCESS,
        Ok(JobStatus::Failed { error }) => {
            eprintln!("error: the reverse job failed: {error}");
            ExitCode::FAILURE
        }
        Ok(other) => {
            eprintln!("error: the reverse job ended in state {other:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {}", crate::error_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// `ferry cutover --help`.
pub fn help() -> String {
    "Planned cutover of a running job: drain check (writers stopped, one more window, no split in
flight, sink quiet), stop with a savepoint, verify the source at the final window end against
the sink at the cluster time after the stop, write the cutover report and print it with the RPO
(0 when drained and equal) and the reverse job's command (`ferry run ... --fromCutover REPORT`,
which starts replicating new primary -> old source with no snapshot).

Usage: ferry cutover --jobmanager HOST:PORT --job-id ID [--savepointPath DIR] [--drain-timeout S]
                     [--quiet-period S] [--report FILE] [--start-reverse] [--json] [-p N]
                     [--method server|client] [--unplanned] <ferry run options of the job>

  -m, --jobmanager HOST:PORT  the job's REST API [default: $FERRY_JOBMANAGER or 127.0.0.1:8081];
                              https://HOST:PORT for a REST API with TLS, with the job's
                              security.ssl.rest.* / security.rest.token-file keys (docs/security.md)
      --job-id ID             the job to cut over
      --savepointPath DIR     where the final savepoint goes [default: the job's --savepointPath]
      --drain-timeout S       give up the drain check after S seconds [default: 300]
      --quiet-period S        a table is quiet when its write counters stand still S seconds [default: 5]
      --report FILE           the cutover report [default: ./cutover-<jobid>.json]
      --start-reverse         then run the reverse job in this process (equal and drained only)
      --json                  print the report as JSON (with reportPath and reverseCommand)
  -p, --parallelism N         key ranges verified at the same time [default: 4]
      --method M              server or client checksums (see `ferry verify --help`) [default: server]
      --unplanned             the source cluster is gone: print `ferry failover --report`'s
                              report (newest valid state, sink position, data RPO of failing
                              over now); no stop, no verify. A source that does not answer
                              within 15 s gets the same report, with exit code 1

The job's options are `ferry run`'s (--config FILE, --job.*), as the job was started with.
docs/dr.md has the runbooks.

Exit codes: 0 equal (the report allows the reverse job), 1 the tables differ, the copy was not
drained, or a failure, 2 usage error, 3 (--unplanned) no valid state found.
"
    .to_string()
}
