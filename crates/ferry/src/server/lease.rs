//! Running a job as the holder of its lease (`high-availability.type
//! lease`, `zookeeper` (records on a ZooKeeper quorum through `ferry_zk`)
//! or `kubernetes` (a Lease object through `ferry_kube`)): `ferry run`,
//! `ferry failover` and `ferry standby` all get the
//! lease through the engine's [`Standby`] (wait, claim, find the newest
//! state) and run the job with [`run_holding`], which renews it until the
//! job ends. This module prints what they share: the waiting lines, the
//! generation held, and each distinct failure of a retrying instance once a
//! minute ([`EventLines`]). A fenced holder stands by again and runs the
//! next generation it wins ([`super::holder`]).
//!
//! `ferry run` with a lease claims it at once if nobody ever held it, and
//! otherwise waits like a standby until it lapses; without `-s` it resumes
//! from the newest valid state of the HA job in its checkpoints directory.

use super::holder::run_holding;
use super::rto::Rto;
use super::submit::StartExtras;
use crate::run_args::RunArgs;
use anyhow::{bail, Result};
use ferry_engine::checkpoint::{JobId, StorageLocation};
use ferry_engine::config::{
    HaKind, JobConfig, LeasePlace, SinkKind, ZooKeeperConfig, HA_STORAGE_DIR,
};
use ferry_engine::lease::{Claim, Event, FailureLog, Lease, LeaseRecord, Role, Standby};
use ferry_engine::JobStatus;
use ferry_kudu::lease_table::LeaseTable;
use ferry_zk::ZooKeeperLease;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a waiting instance says what it waits for.
pub const SAY_WAITING_EVERY: Duration = Duration::from_secs(10);

/// This instance's name in lease objects: its pod (`POD_NAME`, as on
/// Kubernetes) or host, and pid.
pub fn owner() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .filter(|pod| !pod.trim().is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|| "unknown-host".to_string());
    format!("{host}/{}", std::process::id())
}

/// The lease of `run`'s HA job, with `from` searched for the state of
/// `job` (any one job's if `None`).
pub fn standby_for(run: &RunArgs, from: &[StorageLocation], job: Option<JobId>) -> Result<Standby> {
    standby_owned_by(run, from, job, owner())
}

/// [`standby_for`], naming this instance `owner` in the lease records (a
/// worker adds its REST address).
pub fn standby_owned_by(
    run: &RunArgs,
    from: &[StorageLocation],
    job: Option<JobId>,
    owner: String,
) -> Result<Standby> {
    let search = crate::wiring::state_search(&run.process, from, job);
    let lease = lease_of(run, owner)?.for_job(run.config.identity());
    Ok(Standby::new(Arc::new(lease), search))
}

/// The lease of `run`'s HA job on its backend.
fn lease_of(run: &RunArgs, owner: String) -> Result<Lease> {
    let cfg: &JobConfig = &run.config;
    if let Some(zookeeper) = &cfg.ha.zookeeper {
        return zookeeper_lease(cfg, zookeeper.clone(), owner);
    }
    if cfg.ha.kind == HaKind::Kubernetes {
        let backend = super::kube_lease::backend(cfg);
        return Ok(Lease::with_backend(backend, &cfg.ha, owner));
    }
    Ok(match cfg.ha_lease_place() {
        LeasePlace::SinkTable(table) => {
            if cfg.sink == SinkKind::Kafka {
                bail!(
                    "{} = kudu:{table} names a table on the sink cluster, but this job's sink is Kafka; set it to a directory every instance reaches",
                    HA_STORAGE_DIR.name()
                );
            }
            let store = LeaseTable::new(crate::wiring::sink_client(cfg)?, table);
            let name = store.uri();
            Lease::named(Arc::new(store), name, &cfg.ha_job_id(), &cfg.ha, owner)
        }
        LeasePlace::Store(dir) => {
            let resolver = crate::wiring::resolver(&run.process);
            Lease::new(
                crate::wiring::store_for(resolver.as_ref(), &dir)?,
                &dir,
                &cfg.ha_job_id(),
                &cfg.ha,
                owner,
            )
        }
        // `LeasePlace` may grow; say so rather than guess.
        other => bail!("{} = {other} is not supported here", HA_STORAGE_DIR.name()),
    })
}

/// The lease of `cfg`'s HA job on ZooKeeper (`high-availability.type
/// zookeeper`): under the quorum's root, in the cluster id's znode.
fn zookeeper_lease(cfg: &JobConfig, zookeeper: ZooKeeperConfig, owner: String) -> Result<Lease> {
    let cluster_id = cfg.ha.cluster_id.as_deref().unwrap_or(&cfg.job_name);
    let backend = ZooKeeperLease::new(zookeeper, cluster_id, &cfg.ha_job_id())?;
    Ok(Lease::with_backend(Arc::new(backend), &cfg.ha, owner))
}

/// The line a waiting instance prints every [`SAY_WAITING_EVERY`].
pub fn waiting_line(record: Option<&LeaseRecord>, silent: Duration) -> String {
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

/// Prints [`Event::Waiting`] at most every [`SAY_WAITING_EVERY`] (the
/// first after one period).
#[derive(Debug)]
pub struct WaitingLines {
    said: Instant,
}

impl Default for WaitingLines {
    fn default() -> Self {
        WaitingLines {
            said: Instant::now(),
        }
    }
}

impl WaitingLines {
    /// Prints the waiting line of `event` when one is due.
    pub fn on_event(&mut self, event: &Event<'_>) {
        if let Event::Waiting { holder, silent } = event {
            if self.said.elapsed() >= SAY_WAITING_EVERY {
                eprintln!("{}", waiting_line(*holder, *silent));
                self.said = Instant::now();
            }
        }
    }
}

/// What a waiting instance says of the engine's events: the waiting line
/// every [`SAY_WAITING_EVERY`], a lapse, the newest state found, and each
/// distinct failure (lease read, claim, state search) once a minute.
#[derive(Debug)]
pub struct EventLines {
    who: &'static str,
    waiting: WaitingLines,
    failures: FailureLog,
}

impl EventLines {
    /// Lines prefixed with `who` (`ferry standby`, `ferry`).
    pub fn new(who: &'static str) -> Self {
        EventLines {
            who,
            waiting: WaitingLines::default(),
            failures: FailureLog::default(),
        }
    }

    /// Says what `event` calls for.
    pub fn on_event(&mut self, event: &Event<'_>) {
        self.waiting.on_event(event);
        match event {
            Event::Lapsed { silent, .. } => eprintln!(
                "{}: the lease has not changed for {} ms; taking over",
                self.who,
                silent.as_millis()
            ),
            Event::Released { holder } => eprintln!(
                "{}: {} released the lease; taking over",
                self.who,
                holder.holder()
            ),
            Event::ReadFailed(e) => self.failure("cannot read the lease; retrying", e),
            Event::ClaimFailed(e) => self.failure("cannot claim the lease; retrying", e),
            Event::Preloaded {
                newest: Some(f),
                changed: true,
            } => tracing::info!(path = %f.location, "standby: newest valid state"),
            Event::SearchFailed(e) => self.failure("standby: cannot search for state", e),
            _ => {}
        }
    }

    /// Logs `what` with `error` unless the same failure was logged less
    /// than a minute ago.
    pub fn failure(&mut self, what: &str, error: &dyn std::error::Error) {
        let text = chain(error);
        if let Some(repeats) = self.failures.due(&text) {
            tracing::warn!(error = %text, repeats, "{what}");
        }
    }
}

/// An error and its causes, as `{:#}` prints an `anyhow` chain.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// Claims the lease as the job's active instance (`ferry run`, `ferry
/// failover`), waiting while another instance holds it.
pub async fn claim(standby: &mut Standby, rto: &mut Rto) -> Result<Claim> {
    let mut lines = EventLines::new("ferry");
    let claim = standby
        .claim(Role::Active, |e| lines.on_event(&e), async || {})
        .await?;
    rto.step("lease", claim.waited);
    eprintln!(
        "ferry: holding generation {} of the lease at {}",
        claim.held.generation,
        standby.lease().location()
    );
    Ok(claim)
}

/// `ferry run` with `high-availability.type lease`.
pub async fn run_leased(run: RunArgs) -> Result<JobStatus> {
    let mut rto = Rto::default();
    let from = [run.config.checkpoints_directory.clone()];
    let mut standby = standby_for(&run, &from, Some(run.config.ha_job_id()))?;
    // Serve the probes while waiting for the lease.
    let listeners = super::run::Listeners::open_waiting(&run.process).await?;
    let claim = claim(&mut standby, &mut rto).await?;
    let mut extras = StartExtras {
        listeners: Some(listeners),
        ..StartExtras::default()
    };
    if run.from_savepoint.is_none() {
        // Like a restarted Flink JobManager: continue from the HA job's
        // newest valid state, if it has one.
        let search = standby.find_newest().await?;
        if let Some(found) = search.newest {
            eprintln!("ferry: resuming from {}", found.location);
            extras.restore = Some(found.loaded());
        }
    }
    run_holding(standby, claim, run, extras, rto, Instant::now(), false).await
}
