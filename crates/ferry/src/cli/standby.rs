//! `ferry standby`: a warm standby that takes a job over when its lease
//! lapses.
//!
//! A standby takes the same configuration as `ferry run` plus where to find
//! state (`--from`, e.g. the DR replica; default `job.checkpointsDirectory`).
//! It connects to both clusters and opens the tables up front, keeps the
//! newest valid state pre-loaded (re-reading only new directories), and
//! watches the job's lease. When the lease has not changed for the lease
//! duration — measured on this machine's monotonic clock from the last
//! change it observed, so the machines' clocks need not agree — it claims
//! the next generation (create-only: one winner), searches once more and
//! starts the job from the newest valid state under the same job id, with
//! REST and metrics like `ferry run`. The instance it replaced stops
//! writing on its own (engine `lease` module; docs/dr.md has the timing
//! assumptions) and stands by in turn; so does this one once fenced
//! (`server::holder`). Time the lease could not be read is not silence,
//! and no failed read or claim ends a standby.
//!
//! `ferry run` with a lease claims it at once if nobody ever held it, and
//! otherwise waits like a standby until it lapses; without `-s` it resumes
//! from the newest valid state of the HA job in its checkpoints directory.

use super::failover::{print_search, DrArgs};
use crate::run_args::RunArgs;
use crate::server::holder::run_holding;
use crate::server::lease::{standby_for, EventLines};
use crate::server::rto::Rto;
use crate::server::run::Listeners;
use crate::server::submit::StartExtras;
use crate::wiring::connect;
use anyhow::{bail, Result};
use ferry_engine::lease::{Claim, FailureLog, Role, Standby};
use ferry_engine::JobStatus;
use kudu_client::KuduClient;
use std::time::Instant;

/// `ferry standby`: waits for the lease to lapse, then takes the job over.
pub async fn standby(args: DrArgs) -> Result<JobStatus> {
    let cfg = &args.run.config;
    if !cfg.ha.kind.holds_lease() {
        bail!("ferry standby needs high-availability.type lease, zookeeper or kubernetes (the active instance must hold a lease to be taken over from)");
    }
    let mut standby = standby_for(&args.run, &args.from, args.job)?;
    eprintln!(
        "ferry standby: job {}, lease at {}, state from {}",
        cfg.ha_job_id(),
        standby.lease().location(),
        args.from
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Serve the probes while waiting for the lease.
    let listeners = Listeners::open_waiting(&args.run.process).await?;
    let mut failures = FailureLog::default();
    let mut clients = warm_up(&args.run, &mut failures).await;
    let mut lines = EventLines::new("ferry standby");
    let claim = standby
        .claim(
            Role::Standby,
            |event| lines.on_event(&event),
            async || {
                if clients.is_none() {
                    clients = warm_up(&args.run, &mut failures).await;
                }
            },
        )
        .await?;
    take_over(args, standby, claim, clients, listeners).await
}

/// Claimed: find the newest state (reusing the pre-loaded ones) and start.
async fn take_over(
    args: DrArgs,
    mut standby: Standby,
    claim: Claim,
    clients: Option<(KuduClient, KuduClient)>,
    listeners: Listeners,
) -> Result<JobStatus> {
    // The RTO counts from the last renewal this standby saw.
    let began = claim.last_renewal_seen();
    let mut rto = Rto::printed();
    rto.step("lease silent", claim.silent);
    if !claim.unreadable().is_zero() {
        rto.step("lease unreadable", claim.unreadable());
    }
    rto.step("claim", claim.detected.elapsed());
    eprintln!(
        "ferry standby: claimed generation {} of the lease",
        claim.held.generation
    );
    let t = Instant::now();
    let search = standby.find_newest().await?;
    rto.step("find", search.listed_in);
    rto.step("verify", t.elapsed().saturating_sub(search.listed_in));
    print_search(
        &search,
        &args.from,
        crate::wiring::source_clock(&args.run.config),
        false,
        Some(super::failover::holder_lost_at_ms(&claim)),
    );
    let t = Instant::now();
    let clients = match clients {
        Some(c) => c,
        None => connect(&args.run).await?,
    };
    rto.step("connect", t.elapsed());
    let restore = search.newest.as_ref().map(|f| f.loaded());
    if restore.is_none() {
        eprintln!("ferry standby: no valid state found; starting the job from a full snapshot");
    }
    let extras = StartExtras {
        restore,
        clients: Some(clients),
        listeners: Some(listeners),
        ..StartExtras::default()
    };
    run_holding(standby, claim, args.run, extras, rto, began, false).await
}

/// Connects and opens the tables; `None` (and a warning, once a minute
/// per distinct failure) if a cluster is not reachable yet — the standby
/// tries again later.
async fn warm_up(run: &RunArgs, failures: &mut FailureLog) -> Option<(KuduClient, KuduClient)> {
    match connect(run).await {
        Ok(clients) => Some(clients),
        Err(e) => {
            let error = crate::error_line(&e);
            if let Some(repeats) = failures.due(&error) {
                tracing::warn!(%error, repeats, "standby: cannot connect yet; will retry");
            }
            None
        }
    }
}
