//! The lease holder's life, for every HA type: run the job while holding
//! the lease; when the fence closes (a higher generation took over, or the
//! lease could not be renewed in time — the coordination store is down),
//! stop the job — it writes no further checkpoint, position or row — and
//! stand by in the same process, REST and metrics still served (the job
//! shows SUSPENDED, `ferry_ha_standing_by` is 1); when the lease is won
//! again, resume from the newest complete state and run, printing the RTO
//! of that takeover.
//!
//! Nobody gives up: lease reads and claims that fail are retried with
//! backoff (the engine's [`Standby`]), each distinct failure logged once a
//! minute. The process ends when the job ends on its own (finished,
//! cancelled over REST, failed for a reason of its own) or on a signal.

use super::lease::EventLines;
use super::rto::Rto;
use super::run::{stop_on_signal, App, Signals};
use super::submit::StartExtras;
use crate::run_args::RunArgs;
use anyhow::Result;
use ferry_engine::lease::{Claim, FailureLog, Holding, LeaseError, Role, Standby};
use ferry_engine::JobStatus;
use std::time::{Duration, Instant};

/// How long a holder that cannot search for state waits before it tries
/// again (while its fence stays open).
const SEARCH_RETRY: Duration = Duration::from_millis(500);

/// How one generation ended.
enum Ended {
    /// The job ended on its own or on a signal: so does the process.
    Done(JobStatus),
    /// The lease was lost: stand by.
    Fenced,
}

/// One generation, ready to run: the lease held (and renewed), where the
/// job starts from, and the takeover's timings.
struct Generation {
    holding: Holding,
    extras: StartExtras,
    rto: Rto,
    began: Instant,
}

/// Runs the job under `claim` and keeps the lease: generation after
/// generation, standing by in between, until the job ends on its own or a
/// signal comes. `rto` and `began` time the first takeover.
pub async fn run_holding(
    mut standby: Standby,
    claim: Claim,
    run: RunArgs,
    mut extras: StartExtras,
    rto: Rto,
    began: Instant,
    json: bool,
) -> Result<JobStatus> {
    let app = App::start(extras.listeners.take(), &run.process).await?;
    let mut signals = Signals::new();
    let first = Generation {
        holding: standby.hold(claim.held),
        extras,
        rto,
        began,
    };
    let status = lead(&app, &mut standby, first, run, json, &mut signals).await;
    app.finish().await;
    status
}

async fn lead(
    app: &App,
    standby: &mut Standby,
    first: Generation,
    mut run: RunArgs,
    json: bool,
    signals: &mut Signals,
) -> Result<JobStatus> {
    let mut next = first;
    loop {
        match run_generation(app, next, &run, json, signals).await? {
            Ended::Done(status) => return Ok(status),
            Ended::Fenced => {}
        }
        // Later generations start from the newest state, never again from
        // `-s` or a cutover report.
        run.from_savepoint = None;
        run.from_cutover = None;
        app.registry.ha.standing_by();
        eprintln!(
            "ferry: standing by for the lease at {}",
            standby.lease().location()
        );
        next = tokio::select! {
            next = take_over(standby, &run, json) => next?,
            _ = signals.recv() => {
                eprintln!("ferry: stopped while standing by");
                return Ok(JobStatus::Canceled);
            }
        };
    }
}

/// Runs the job of one generation until it ends, the fence closes or a
/// signal comes.
async fn run_generation(
    app: &App,
    generation: Generation,
    run: &RunArgs,
    json: bool,
    signals: &mut Signals,
) -> Result<Ended> {
    let Generation {
        holding,
        mut extras,
        rto,
        began,
    } = generation;
    extras.fence = holding.fence.clone();
    extras.job_id = Some(run.config.ha_job_id());
    let number = holding.generation;
    app.registry.ha.holding(number);
    let entry = match app.start_job(run.clone(), extras).await {
        Ok(entry) => entry,
        Err(e) => {
            let fenced = holding.fence.check().err();
            holding.release();
            return match fenced {
                // It lost the lease while starting: stand by again.
                Some(fenced) => {
                    eprintln!(
                        "ferry: generation {number} could not start ({}); {fenced}",
                        crate::error_line(&e)
                    );
                    Ok(Ended::Fenced)
                }
                None => Err(e),
            };
        }
    };
    let metrics = entry.handle.metrics().clone();
    rto.report_when_first_window_completes(&entry, began, json);
    let (status, signalled) = tokio::select! {
        status = entry.handle.wait() => (status, false),
        _ = holding.fenced() => {
            // Whatever the job is doing (between windows, waiting to
            // restart), it stops now; its own checks refuse every write.
            entry.handle.cancel().await;
            (entry.handle.wait().await, false)
        }
        _ = signals.recv() => (stop_on_signal(&entry).await, true),
    };
    let fenced = holding.fence.check().err();
    holding.release();
    // What this generation wrote, for operators (and the fencing tests).
    let m = metrics.snapshot();
    eprintln!(
        "ferry: generation {number} ended; rows written by this instance: {}",
        m.rows_upserted + m.rows_deleted
    );
    app.settle(&entry).await;
    match fenced {
        Some(fenced) if !signalled && !matches!(status, JobStatus::Finished { .. }) => {
            entry.suspend();
            eprintln!(
                "ferry: {fenced}; the job stopped: no further checkpoint or row from generation {number}"
            );
            Ok(Ended::Fenced)
        }
        _ => Ok(Ended::Done(status)),
    }
}

/// Stands by until this instance wins the lease again and has found the
/// newest state to run from; never gives up on coordination, only when
/// another job holds the lease (two jobs given one cluster id).
async fn take_over(
    standby: &mut Standby,
    run: &RunArgs,
    json: bool,
) -> Result<Generation, LeaseError> {
    let mut lines = EventLines::new("ferry");
    let mut failures = FailureLog::default();
    loop {
        let claim = match standby
            .claim(Role::Standby, |e| lines.on_event(&e), async || {})
            .await
        {
            Ok(claim) => claim,
            Err(e @ LeaseError::OtherJob { .. }) => return Err(e),
            // A standby retries every failure; should that change, wait
            // and watch again rather than end.
            Err(e) => {
                lines.failure("cannot claim the lease; retrying", &e);
                tokio::time::sleep(SEARCH_RETRY).await;
                continue;
            }
        };
        let began = claim.last_renewal_seen();
        let lost_at = crate::cli::failover::holder_lost_at_ms(&claim);
        let mut rto = Rto::printed();
        rto.step("lease silent", claim.silent);
        if !claim.unreadable().is_zero() {
            rto.step("lease unreadable", claim.unreadable());
        }
        rto.step("claim", claim.detected.elapsed());
        eprintln!(
            "ferry: claimed generation {} of the lease",
            claim.held.generation
        );
        let holding = standby.hold(claim.held);
        let t = Instant::now();
        let search = loop {
            match standby.find_newest().await {
                Ok(search) => break Some(search),
                Err(_) if holding.fence.check().is_err() => break None,
                Err(e) => {
                    let text = crate::server::lease::chain(&e);
                    if let Some(repeats) = failures.due(&text) {
                        tracing::warn!(error = %text, repeats, "cannot search for state; retrying");
                    }
                    tokio::time::sleep(SEARCH_RETRY).await;
                }
            }
        };
        let Some(search) = search else {
            eprintln!("ferry: lost the lease again while searching for state");
            holding.release();
            continue;
        };
        rto.step("find", search.listed_in);
        rto.step("verify", t.elapsed().saturating_sub(search.listed_in));
        crate::cli::failover::print_search(
            &search,
            standby.search().locations(),
            crate::wiring::source_clock(&run.config),
            json,
            Some(lost_at),
        );
        let restore = search.newest.as_ref().map(|f| f.loaded());
        if restore.is_none() {
            eprintln!("ferry: no valid state found; starting the job from a full snapshot");
        }
        return Ok(Generation {
            holding,
            extras: StartExtras {
                restore,
                ..StartExtras::default()
            },
            rto,
            began,
        });
    }
}
