//! `ferry drill --switchover`: a real planned switchover and back, timed.
//!
//! It is `ferry cutover` twice, with the reverse job in between:
//!
//! 1. **cutover** A → B: the drain check on the running job (found by
//!    `--jobmanager` and `--job-id`, as `ferry cutover` finds it), a stop
//!    with a drained savepoint, the verify of A at the final window end
//!    against B at the cutover time, the cutover report;
//! 2. **reverse start**: the reverse job B → A (`ferry run --fromCutover`:
//!    diff windows from the cutover time, no snapshot) in this process,
//!    until it completed its first window;
//! 3. **hold** (`--hold`): B is the primary; the application may write to it;
//! 4. **cut back** B → A: the same cutover on the reverse job (its REST
//!    API is this process's);
//! 5. **forward start**: the original direction A → B again, from the
//!    second report (no snapshot), in this process, until its first window.
//!
//! The write outage of each switch is measured from the start of its
//! drain check (the application must have stopped writing to the old
//! primary by then: the check waits until it has) until the new
//! direction's job completed its first window; the application's own
//! switch comes on top. The RPO is 0 when both cutovers were drained and
//! verified equal (the verify is the proof); otherwise the drill stops
//! there and says what runs and what does not.
//!
//! The final forward job keeps running in this process afterwards, with
//! the job's REST API and metrics, like `ferry cutover --start-reverse`.

use super::super::cutover::{self, reverse_options, CutoverArgs};
use super::super::verify::Failure;
use crate::client::{Rest, RestClientOptions};
use crate::cutover_report::CutoverReport;
use crate::run_args::{self, RunArgs, RunCommand};
use anyhow::{anyhow, Context};
use ferry_engine::config::parse_duration;
use ferry_engine::time::now_ms;
use ferry_engine::JobStatus;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub mod report;

use report::{Step, Switch, SwitchoverReport};

/// How long a job started by the drill may take to run its first window.
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the stopped job's process may keep its REST port.
const PORT_RELEASE: Duration = Duration::from_secs(30);

/// `ferry drill --switchover` arguments.
#[derive(Debug)]
pub struct SwitchoverArgs {
    /// The forward job's cutover, as `ferry cutover` takes it.
    pub cutover: CutoverArgs,
    /// How long B stays the primary before the drill cuts back.
    pub hold: Duration,
    /// Also write the JSON report here.
    pub report: Option<PathBuf>,
    /// Where the two cutover reports go.
    pub reports_dir: PathBuf,
    /// Print the report as JSON (one line).
    pub json: bool,
}

/// Parses `args` (everything after `drill`, `--switchover` among them);
/// `Ok(None)` for `--help`. Errors are usage errors (exit code 2).
pub fn parse(args: &[String]) -> Result<Option<SwitchoverArgs>, String> {
    let (mut hold, mut report, mut json) = (Duration::ZERO, None, false);
    let mut rest = Vec::new();
    let mut flags = super::super::flags::Flags::new(args);
    while let Some(arg) = flags.next_arg() {
        match arg.flag() {
            "-h" | "--help" => return Ok(None),
            "--switchover" => {}
            "--hold" => {
                let v = flags.value(&arg)?;
                hold = parse_duration(&v).map_err(|e| {
                    format!("invalid value '{v}' for --hold: {e} (e.g. '30 s', '5 min')")
                })?;
            }
            "--report" => report = Some(PathBuf::from(flags.value(&arg)?)),
            "--json" => json = true,
            "--from" | "--max-dr-lag" | "--max-rpo" | "--verify-tables" | "--no-verify"
            | "--unplanned" | "--start-reverse" => {
                return Err(format!(
                    "{} is not an option of ferry drill --switchover",
                    arg.flag()
                ))
            }
            _ => flags.keep(arg),
        }
    }
    rest.extend(flags.into_rest());
    let Some(cutover) = cutover::parse(&rest)? else {
        return Ok(None);
    };
    super::check_job(&cutover.run.config)?;
    if cutover.run.config.ha.kind.holds_lease() {
        return Err(format!(
            "ferry drill --switchover runs both directions in its own process, but this job has \
             high-availability.type {}: its standby would take the stopped job over. Switch over \
             with `ferry cutover` by the runbook (docs/dr.md) instead",
            format!("{:?}", cutover.run.config.ha.kind).to_lowercase()
        ));
    }
    let reports_dir = report
        .as_deref()
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    Ok(Some(SwitchoverArgs {
        cutover,
        hold,
        report,
        reports_dir,
        json,
    }))
}

/// A job running in this process, on a thread and runtime of its own
/// (the job's future is not `Send` for every lifetime, so it cannot be a
/// task of the drill's runtime).
type JobThread = std::thread::JoinHandle<anyhow::Result<JobStatus>>;

fn spawn_job(run: RunArgs) -> JobThread {
    std::thread::spawn(move || crate::cli::runtime()?.block_on(crate::server::run::run(run)))
}

/// The job's outcome, once its thread ends.
async fn join(handle: JobThread) -> Result<anyhow::Result<JobStatus>, Failure> {
    tokio::task::spawn_blocking(move || handle.join())
        .await
        .map_err(|e| anyhow!("waiting for the job: {e}"))?
        .map_err(|_| Failure::Failed(anyhow!("the job's thread panicked")))
}

/// A direction's job running in this process.
struct Running {
    id: String,
    rest: Rest,
    url: String,
    handle: JobThread,
    /// The cutover options that describe it (for the next cutover).
    args: CutoverArgs,
}

/// Tells the operator (and a test's writer) what the application must do.
fn announce(what: &str) {
    crate::say!("Drill: {what}");
}

/// Where `process`'s REST API answers on this host.
fn local_rest(run: &RunArgs) -> Result<(String, Rest), String> {
    let server = &run.process.server;
    let host = match server.rest_address.as_str() {
        "" | "0.0.0.0" | "::" | "[::]" => "127.0.0.1",
        other => other,
    };
    let scheme = if server.security.ssl_enabled {
        "https"
    } else {
        "http"
    };
    let url = format!("{scheme}://{host}:{}", server.rest_port.port);
    let rest = Rest::new(&url, &RestClientOptions::from_process(&server.security))?;
    Ok((url, rest))
}

/// The options of the job that continues after `report` (written at
/// `path`), parsed.
fn next_job(
    before: &CutoverArgs,
    report: &CutoverReport,
    path: &str,
) -> Result<CutoverArgs, Failure> {
    let options = reverse_options(before, report, path);
    let run = match run_args::parse(&options) {
        Ok(RunCommand::Run(run)) => *run,
        Ok(RunCommand::Help) => return Err(Failure::Failed(anyhow!("no job in the options"))),
        Err(e) => return Err(Failure::Failed(anyhow!("the next job's options: {e}"))),
    };
    let (url, _) = local_rest(&run).map_err(Failure::Usage)?;
    Ok(CutoverArgs {
        run,
        run_options: options,
        jobmanager: url,
        job_id: None,
        savepoint_path: before.savepoint_path.clone(),
        drain: crate::client::DrainCheck {
            timeout: before.drain.timeout,
            quiet: before.drain.quiet,
        },
        report: None,
        start_reverse: false,
        json: false,
        parallelism: before.parallelism,
        method: before.method,
        unplanned: false,
    })
}

/// Starts `args`' job in this process and waits until it (a running job
/// not among `before`) completed its first window; `after`: the REST API
/// of the stopped job, whose process may hold the port a little longer.
/// Returns the job and how long that took.
async fn start(
    mut args: CutoverArgs,
    after: &str,
    before: &[&str],
) -> Result<(Running, u64), Failure> {
    let (url, rest) = local_rest(&args.run).map_err(Failure::Usage)?;
    let port = format!(":{}", args.run.process.server.rest_port.port);
    if after.trim_end_matches('/').ends_with(&port) {
        wait_gone(after, &args).await;
    }
    let began = Instant::now();
    let handle = spawn_job(args.run.clone());
    let deadline = began + START_TIMEOUT;
    let id = loop {
        if handle.is_finished() {
            let ended = join(handle).await?;
            return Err(Failure::Failed(match ended {
                Ok(status) => anyhow!("the job ended before its first window: {status:?}"),
                Err(e) => e,
            }));
        }
        if Instant::now() > deadline {
            return Err(Failure::Failed(anyhow!(
                "the job at {url} did not complete a window within {} s",
                START_TIMEOUT.as_secs()
            )));
        }
        if let Some(id) = first_window(&rest, before).await {
            break id;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let ms = elapsed_ms(began);
    args.job_id = Some(id.clone());
    let running = Running {
        id,
        rest,
        url,
        handle,
        args,
    };
    Ok((running, ms))
}

/// The running job (not one of `before`) once it completed a window.
async fn first_window(rest: &Rest, before: &[&str]) -> Option<String> {
    let overview: crate::api::flink::MultipleJobsDetails = rest.get("/jobs/overview").await.ok()?;
    let job = overview
        .jobs
        .into_iter()
        .find(|j| j.state == "RUNNING" && !before.contains(&j.jid.as_str()))?;
    let live: serde_json::Value = rest
        .get(&format!("/ferry/jobs/{}/live", job.jid))
        .await
        .ok()?;
    (live["totals"]["windows_completed"].as_u64()? >= 1).then_some(job.jid)
}

/// Waits (up to [`PORT_RELEASE`]) until the REST API at `url` stops
/// answering: the stopped job's process is gone and its port free.
async fn wait_gone(url: &str, args: &CutoverArgs) {
    let security = RestClientOptions::from_process(&args.run.process.server.security);
    let Ok(rest) = Rest::new(url, &security) else {
        return;
    };
    let deadline = Instant::now() + PORT_RELEASE;
    while Instant::now() < deadline {
        if rest
            .get::<serde_json::Value>("/jobs/overview")
            .await
            .is_err()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One cutover of the drill, timed; refuses to go on when the copy is
/// not proven equal.
async fn switch(
    args: &mut CutoverArgs,
    job: &str,
    reports_dir: &Path,
    steps: &mut Vec<Step>,
    name: &str,
) -> Result<(CutoverReport, String, u64), Failure> {
    args.report = Some(reports_dir.join(format!("cutover-{job}.json")));
    let began = Instant::now();
    let started_at = now_ms();
    let (report, path) = cutover::cut_over(args, job).await?;
    let ms = elapsed_ms(began);
    steps.push(Step::new(name, started_at, ms, verdict(&report)));
    if !(report.equal && report.drained) {
        return Err(Failure::Failed(anyhow!(
            "the copy is not proven equal ({}); the switchover stops here: job {job} is stopped \
             with savepoint {}, nothing else was started (report {path})",
            verdict(&report),
            report.savepoint
        )));
    }
    Ok((report, path, ms))
}

fn verdict(report: &CutoverReport) -> String {
    format!(
        "{}, {}",
        if report.equal { "equal" } else { "NOT equal" },
        if report.drained {
            "drained"
        } else {
            "not drained"
        }
    )
}

/// The job being switched away from.
struct Old {
    /// Its cutover options (`job_id` set).
    args: CutoverArgs,
    /// Its REST API.
    url: String,
    /// Its thread, when it runs in this process.
    thread: Option<JobThread>,
}

/// One switch: the cutover of `old` (step `cut`), then the new
/// direction's job started in this process (step `started`, `arrow` in
/// its note), recorded in `report`.
async fn switch_to(
    old: Old,
    before: &[&str],
    reports_dir: &Path,
    report: &mut SwitchoverReport,
    (cut, started, arrow): (&str, &str, &str),
) -> Result<Running, Failure> {
    let Old {
        args: mut old_args,
        url,
        thread,
    } = old;
    let job = old_args.job_id.clone().unwrap_or_default();
    let (cutover, path, cut_ms) =
        switch(&mut old_args, &job, reports_dir, &mut report.steps, cut).await?;
    if let Some(thread) = thread {
        ended(thread).await?;
    }
    let next = next_job(&old_args, &cutover, &path)?;
    let started_at = now_ms();
    let (new, start_ms) = start(next, &url, before).await?;
    report.steps.push(Step::new(
        started,
        started_at,
        start_ms,
        format!("job {} ({arrow}) completed its first window", new.id),
    ));
    let snapshots = snapshot_windows(&new.rest, &new.id).await;
    report.switches.push(Switch::new(
        &cutover,
        &path,
        &new.id,
        cut_ms + start_ms,
        snapshots,
    ));
    Ok(new)
}

/// Waits for a job of this process that was stopped with its savepoint
/// to end (its REST port is free then).
async fn ended(thread: JobThread) -> Result<(), Failure> {
    match tokio::time::timeout(PORT_RELEASE, join(thread)).await {
        Ok(Ok(Ok(JobStatus::Finished { .. }))) => Ok(()),
        Ok(Ok(Ok(other))) => {
            tracing::warn!(status = ?other, "the stopped job ended so");
            Ok(())
        }
        Ok(Ok(Err(e))) => Err(Failure::Failed(e.context("the stopped job"))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Failure::Failed(anyhow!(
            "the stopped job did not end within {} s of its stop",
            PORT_RELEASE.as_secs()
        ))),
    }
}

/// Runs the drill; the report says how far it got. The final forward
/// job is returned to keep running.
async fn drill(args: SwitchoverArgs, report: &mut SwitchoverReport) -> Result<Running, Failure> {
    let job = args.cutover.job_id.clone().unwrap_or_default();
    let (a, b) = (report.primary.clone(), report.standby.clone());
    announce(&format!(
        "stop the application's writes to {a} now; the drain check waits until they stopped"
    ));
    let old = Old {
        url: args.cutover.jobmanager.clone(),
        args: args.cutover,
        thread: None,
    };
    let names = ("cutover", "reverseStart", format!("{b} -> {a}"));
    let reverse = switch_to(
        old,
        &[job.as_str()],
        &args.reports_dir,
        report,
        (names.0, names.1, &names.2),
    )
    .await?;
    report.reverse_job_id = Some(reverse.id.clone());
    announce(&format!(
        "{b} is the primary now: the application may write to it (for {} ms)",
        args.hold.as_millis()
    ));
    let started_at = now_ms();
    tokio::time::sleep(args.hold).await;
    let held = elapsed_ms_since(started_at);
    report
        .steps
        .push(Step::new("hold", started_at, held, String::new()));
    announce(&format!(
        "stop the application's writes to {b} now: cutting back to {a}"
    ));
    let reverse_id = reverse.id.clone();
    let old = Old {
        args: reverse.args,
        url: reverse.url,
        thread: Some(reverse.handle),
    };
    let names = ("cutBack", "forwardStart", format!("{a} -> {b}"));
    let final_job = switch_to(
        old,
        &[job.as_str(), reverse_id.as_str()],
        &args.reports_dir,
        report,
        (names.0, names.1, &names.2),
    )
    .await?;
    report.final_job_id = Some(final_job.id.clone());
    announce(&format!(
        "{a} is the primary again: resume the application's writes to it"
    ));
    Ok(final_job)
}

fn elapsed_ms_since(started_at_ms: u64) -> u64 {
    now_ms().saturating_sub(started_at_ms)
}

/// How many snapshot windows a job started by the drill ran (0: it
/// started with diff windows, as a cutover's job must).
async fn snapshot_windows(rest: &Rest, id: &str) -> Option<u64> {
    let live: serde_json::Value = rest.get(&format!("/ferry/jobs/{id}/live")).await.ok()?;
    live["totals"]["snapshot_windows"].as_u64()
}

/// `ferry drill --switchover`: parses, drills, reports, then keeps the
/// final forward job running.
pub fn command(raw: &[String]) -> ExitCode {
    let (args, runtime) = match crate::cli::prepare(parse(raw), super::help, "drill") {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    let (json, path) = (args.json, args.report.clone());
    let mut report = SwitchoverReport::new(&args.cutover);
    let outcome = runtime.block_on(drill(args, &mut report));
    let (code, running) = match outcome {
        Ok(job) => {
            report.finish(Ok(&job.url));
            (None, Some(job))
        }
        Err(Failure::Usage(e)) => {
            report.finish(Err(&e));
            (
                Some(crate::cli::usage_error(&e, "ferry drill --help")),
                None,
            )
        }
        Err(Failure::Failed(e)) => {
            let line = crate::error_line(&e);
            report.finish(Err(&line));
            eprintln!("error: {line}");
            (Some(ExitCode::FAILURE), None)
        }
    };
    if let Err(e) = emit(&report, json, path.as_deref()) {
        eprintln!("error: {e:#}");
        return ExitCode::FAILURE;
    }
    if let Some(code) = code {
        return code;
    }
    let Some(job) = running else {
        return ExitCode::FAILURE;
    };
    // The original direction runs here from now on, until stopped.
    drop(runtime);
    match job.handle.join() {
        Ok(Ok(JobStatus::Finished { savepoint })) => {
            crate::say!("Job finished; savepoint at {savepoint}");
            ExitCode::SUCCESS
        }
        Ok(Ok(JobStatus::Canceled)) => ExitCode::SUCCESS,
        Ok(Ok(other)) => {
            eprintln!("error: the forward job ended in state {other:?}");
            ExitCode::FAILURE
        }
        Ok(Err(e)) => {
            eprintln!("error: {}", crate::error_line(&e));
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("error: the forward job's thread panicked");
            ExitCode::FAILURE
        }
    }
}

/// Prints the report and writes it to `path`.
fn emit(report: &SwitchoverReport, json: bool, path: Option<&Path>) -> anyhow::Result<()> {
    let body = serde_json::to_string(report).context("encoding the report")?;
    if json {
        crate::say!("{body}");
    } else {
        crate::say!("{}", report.to_string().trim_end());
    }
    if let Some(path) = path {
        std::fs::write(path, format!("{body}\n"))
            .with_context(|| format!("cannot write the report to '{}'", path.display()))?;
    }
    Ok(())
}
