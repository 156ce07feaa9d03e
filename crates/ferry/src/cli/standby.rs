//! `ferry standby`, and the lease side of `ferry run` with
//! `high-availability.type lease`.
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
//! assumptions).
//!
//! `ferry run` with a lease claims it at once if nobody ever held it, and
//! otherwise waits like a standby until it lapses; without `-s` it resumes
//! from the newest valid state of the HA job in its checkpoints directory.

use super::failover::{connect, print_search, search_all, DrArgs, Rto};
use crate::run_args::RunArgs;
use crate::submit::StartExtras;
use anyhow::{bail, Result};
use ferry_engine::checkpoint::{LoadedState, StoreResolver};
use ferry_engine::config::{HaKind, JobConfig};
use ferry_engine::lease::{acquire, FoundState, Held, Lease, LeaseRecord, Watcher, WhenEmpty};
use ferry_engine::JobStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a standby refreshes its pre-loaded state.
const PRELOAD_EVERY: Duration = Duration::from_secs(2);
/// How often a waiting instance says what it waits for.
const SAY_WAITING_EVERY: Duration = Duration::from_secs(10);

/// This instance's name in lease objects: host and pid.
fn owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".to_string());
    format!("{host}/{}", std::process::id())
}

/// The lease of `cfg`'s HA job.
pub fn lease_for(resolver: &dyn StoreResolver, cfg: &JobConfig) -> Result<Arc<Lease>> {
    let dir = cfg.ha_storage_dir();
    Ok(Arc::new(Lease::new(
        super::failover::store_for(resolver, dir)?,
        dir,
        &cfg.ha_job_id(),
        &cfg.ha,
        owner(),
    )))
}

fn waiting_line(record: Option<&LeaseRecord>, silent: Duration) -> String {
    match record {
        Some(r) => format!(
            "ferry: waiting for the lease: generation {} held by {} (last change seen {} ms ago)",
            r.generation,
            r.owner,
            silent.as_millis()
        ),
        None => "ferry: waiting for an active instance to take the lease".to_string(),
    }
}

/// A lease claimed by `ferry run` or `ferry failover`, not yet renewed.
pub struct Claimed {
    lease: Arc<Lease>,
    held: Held,
}

/// Claims the lease, waiting while another instance holds it. Claim
/// first, search after: the state cannot move on once the lease is ours.
pub async fn claim(run: &RunArgs, rto: &mut Rto) -> Result<Claimed> {
    let resolver = crate::submit::resolver(&run.process);
    let lease = lease_for(resolver.as_ref(), &run.config)?;
    let t = Instant::now();
    let mut said = Instant::now();
    let held = acquire(&lease, WhenEmpty::Claim, |record, silent| {
        if said.elapsed() >= SAY_WAITING_EVERY {
            eprintln!("{}", waiting_line(record, silent));
            said = Instant::now();
        }
    })
    .await?;
    rto.step("lease", t.elapsed());
    eprintln!(
        "ferry: holding generation {} of the lease at {}",
        held.generation,
        lease.location()
    );
    Ok(Claimed { lease, held })
}

impl Claimed {
    /// Runs the job under the lease's fence and the HA job id, renewing
    /// the lease until the job ends.
    pub async fn run(
        self,
        run: RunArgs,
        mut extras: StartExtras,
        rto: Rto,
        began: Instant,
        json: bool,
    ) -> Result<JobStatus> {
        extras.fence = self.held.fence.clone();
        extras.job_id = Some(run.config.ha_job_id());
        run_holding(self.lease, self.held, run, extras, rto, began, json).await
    }
}

/// Runs the job while `held` is renewed; stops renewing when it ends.
async fn run_holding(
    lease: Arc<Lease>,
    held: Held,
    run: RunArgs,
    extras: StartExtras,
    rto: Rto,
    began: Instant,
    json: bool,
) -> Result<JobStatus> {
    let generation = held.generation;
    let keeper = lease.keep(held);
    let mut metrics = None;
    let status = crate::run::run_with(run, extras, |entry| {
        metrics = Some(entry.handle.metrics().clone());
        rto.report_when_first_window_completes(entry, began, json)
    })
    .await;
    keeper.abort();
    // What this generation wrote, for operators (and the fencing test).
    if let Some(m) = metrics.map(|m| m.snapshot()) {
        eprintln!(
            "ferry: generation {generation} ended; rows written by this instance: {}",
            m.rows_upserted + m.rows_deleted
        );
    }
    status
}

/// `ferry run` with `high-availability.type lease`.
pub async fn run_leased(run: RunArgs) -> Result<JobStatus> {
    let mut rto = Rto::default();
    let claimed = claim(&run, &mut rto).await?;
    let mut extras = StartExtras::default();
    if run.from_savepoint.is_none() {
        // Like a restarted Flink JobManager: continue from the HA job's
        // newest valid state, if it has one.
        let from = [run.config.checkpoints_directory.clone()];
        let resolver = crate::submit::resolver(&run.process);
        let job = Some(run.config.ha_job_id());
        let search = search_all(resolver.as_ref(), &from, job, &[]).await?;
        if let Some(found) = search.newest {
            eprintln!("ferry: resuming from {}", found.location);
            extras.restore = Some(loaded(&found));
        }
    }
    claimed.run(run, extras, rto, Instant::now(), false).await
}

fn loaded(found: &FoundState) -> LoadedState {
    LoadedState {
        location: found.location.clone(),
        state: found.state.clone(),
    }
}

/// `ferry standby`: waits for the lease to lapse, then takes the job over.
pub async fn standby(args: DrArgs) -> Result<JobStatus> {
    let cfg = &args.run.config;
    if cfg.ha.kind != HaKind::Lease {
        bail!("ferry standby needs high-availability.type lease (the active instance must hold a lease to be taken over from)");
    }
    let resolver = crate::submit::resolver(&args.run.process);
    let lease = lease_for(resolver.as_ref(), cfg)?;
    let job = cfg.ha_job_id();
    eprintln!(
        "ferry standby: job {job}, lease at {}, state from {}",
        lease.location(),
        args.from
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut clients = warm_up(&args.run).await;
    let mut known: Vec<FoundState> = Vec::new();
    let mut searched_at: Option<Instant> = None;
    let mut watcher = Watcher::new();
    let mut said = Instant::now();
    let poll = (lease.renew_interval / 2).max(Duration::from_millis(50));
    let (held, detected, silent) = loop {
        match watcher.poll(&lease).await {
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the lease; retrying"),
        }
        let silent = watcher.silent_for();
        if watcher.newest.is_some() && silent >= lease.duration {
            let detected = Instant::now();
            eprintln!(
                "ferry standby: the lease has not changed for {} ms; taking over",
                silent.as_millis()
            );
            if let Some(held) = lease.claim(watcher.newest.as_ref()).await? {
                break (held, detected, silent);
            }
            watcher = Watcher::new();
            continue;
        }
        if searched_at.is_none_or(|t| t.elapsed() >= PRELOAD_EVERY) {
            searched_at = Some(Instant::now());
            preload(resolver.as_ref(), &args, &mut known).await;
            if clients.is_none() {
                clients = warm_up(&args.run).await;
            }
        }
        if said.elapsed() >= SAY_WAITING_EVERY {
            eprintln!("{}", waiting_line(watcher.newest.as_ref(), silent));
            said = Instant::now();
        }
        tokio::time::sleep(poll).await;
    };
    take_over(args, lease, held, (detected, silent), clients, known).await
}

/// Claimed: find the newest state (reusing the pre-loaded ones) and start.
async fn take_over(
    args: DrArgs,
    lease: Arc<Lease>,
    held: Held,
    (detected, silent): (Instant, Duration),
    clients: Option<(kudu_client::KuduClient, kudu_client::KuduClient)>,
    known: Vec<FoundState>,
) -> Result<JobStatus> {
    // The RTO counts from the last renewal this standby saw.
    let began = detected.checked_sub(silent).unwrap_or(detected);
    let mut rto = Rto::printed();
    rto.step("lease silent", silent);
    rto.step("claim", detected.elapsed());
    eprintln!(
        "ferry standby: claimed generation {} of the lease",
        held.generation
    );
    let t = Instant::now();
    let resolver = crate::submit::resolver(&args.run.process);
    let search = search_all(resolver.as_ref(), &args.from, args.job, &known).await?;
    rto.step("find", search.listed_in);
    rto.step("verify", t.elapsed().saturating_sub(search.listed_in));
    print_search(
        &search,
        &args.from,
        crate::submit::source_clock(&args.run.config),
        false,
    );
    let t = Instant::now();
    let clients = match clients {
        Some(c) => c,
        None => connect(&args.run).await?,
    };
    rto.step("connect", t.elapsed());
    let restore = search.newest.as_ref().map(loaded);
    if restore.is_none() {
        eprintln!("ferry standby: no valid state found; starting the job from a full snapshot");
    }
    let extras = StartExtras {
        job_id: Some(args.run.config.ha_job_id()),
        restore,
        fence: held.fence.clone(),
        clients: Some(clients),
    };
    run_holding(lease, held, args.run, extras, rto, began, false).await
}

/// Connects and opens the tables; `None` (and a warning) if a cluster is
/// not reachable yet — the standby tries again later.
async fn warm_up(run: &RunArgs) -> Option<(kudu_client::KuduClient, kudu_client::KuduClient)> {
    match connect(run).await {
        Ok(clients) => Some(clients),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "standby: cannot connect yet; will retry");
            None
        }
    }
}

/// Refreshes the pre-loaded states (only new directories are read).
async fn preload(resolver: &dyn StoreResolver, args: &DrArgs, known: &mut Vec<FoundState>) {
    match search_all(resolver, &args.from, args.job, known).await {
        Ok(search) => {
            let newest = search.newest.as_ref().map(|f| f.location.clone());
            if known.first().map(|f| &f.location) != newest.as_ref() {
                if let Some(f) = &search.newest {
                    tracing::info!(path = %f.location, "standby: newest valid state");
                }
            }
            *known = search.valid;
        }
        Err(e) => tracing::warn!(error = %format!("{e:#}"), "standby: cannot search for state"),
    }
}
