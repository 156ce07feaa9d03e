//! The lease protocol over a [`LeaseBackend`]: one sequence of records,
//! each position written once, each saying which generation wrote it (on a
//! state store: `<storageDir>/<job-id>/_lease/seq-<k>`).
//!
//! - The holder of generation N renews by writing position k+1 with N.
//! - A standby that saw the newest record unchanged for the lease duration
//!   claims by writing position k+1 with N+1.
//!
//! Both race for the same position and the backend lets exactly one write
//! it, so a renewal and a claim can never both succeed: the loser learns
//! who won from the record that holds it. Two standbys racing for N+1
//! likewise produce one winner. Holders drop records a few positions
//! behind, so a listing stays a handful of keys.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::backend::{LeaseBackend, LeaseError, LeaseRecord, StoreBackend, RELEASED_MARK};
use super::failures::FailureLog;
use super::fence::Fence;
use crate::checkpoint::{JobId, StateKey, StateStore, StorageLocation};
use crate::config::HaConfig;

/// Name of the lease directory inside the job's directory.
pub const LEASE_DIR: &str = "_lease";
/// Records kept behind the newest (the rest are dropped).
const KEEP: u64 = 8;
/// Positions a release tries before it gives up (each lost race re-reads).
const RELEASE_ATTEMPTS: usize = 4;

/// One job's lease.
#[derive(Debug, Clone)]
pub struct Lease {
    backend: Arc<dyn LeaseBackend>,
    /// How long silence means the holder is gone.
    pub duration: Duration,
    /// How often the holder renews.
    pub renew_interval: Duration,
    /// How much earlier than `duration` the holder stops writing.
    pub margin: Duration,
    owner: String,
    /// What this instance's job replicates (see [`LeaseRecord::job`]).
    job: String,
}

/// A lease won: the generation, the sequence position reached, and the
/// fence the job checks.
#[derive(Debug, Clone)]
pub struct Held {
    /// The generation held.
    pub generation: u64,
    /// The newest sequence position this holder wrote.
    pub seq: u64,
    /// The job's fence (closes when the lease is lost).
    pub fence: Fence,
}

impl Lease {
    /// The lease of `job` under `storage_dir` (in `store`), with `ha`'s
    /// timing; `owner` names this instance in the records it writes.
    pub fn new(
        store: Arc<dyn StateStore>,
        storage_dir: &StorageLocation,
        job: &JobId,
        ha: &HaConfig,
        owner: impl Into<String>,
    ) -> Self {
        let dir = storage_dir
            .key()
            .join_valid(&job.to_string())
            .join_valid(LEASE_DIR);
        let backend = StoreBackend::at_location(store, storage_dir.with_key(dir));
        Self::with_backend(Arc::new(backend), ha, owner)
    }

    /// The lease of `job` at the root of `store`, a store known by `name`
    /// (a table on the sink cluster: `kudu:ferry_ha`), for messages.
    pub fn named(
        store: Arc<dyn StateStore>,
        name: impl Into<String>,
        job: &JobId,
        ha: &HaConfig,
        owner: impl Into<String>,
    ) -> Self {
        let dir = StateKey::root()
            .join_valid(&job.to_string())
            .join_valid(LEASE_DIR);
        let backend = StoreBackend::named(store, name, dir);
        Self::with_backend(Arc::new(backend), ha, owner)
    }

    /// The lease kept by `backend` (a coordination service), with `ha`'s
    /// timing.
    pub fn with_backend(
        backend: Arc<dyn LeaseBackend>,
        ha: &HaConfig,
        owner: impl Into<String>,
    ) -> Self {
        Lease {
            backend,
            duration: ha.lease_duration,
            renew_interval: ha.renew_interval,
            margin: ha.safety_margin(),
            owner: owner.into(),
            job: String::new(),
        }
    }

    /// Writes `job` (what this instance's job replicates,
    /// [`crate::config::JobConfig::identity`]) in its records, and reads a
    /// renewed record of another job as [`LeaseError::OtherJob`].
    pub fn for_job(mut self, job: impl Into<String>) -> Self {
        self.job = job.into();
        self
    }

    /// Whether `record` was written by an instance of another job (records
    /// without a job, of older builds, are taken as this job's).
    pub fn is_other_job(&self, record: &LeaseRecord) -> bool {
        !self.job.is_empty() && !record.job.is_empty() && record.job != self.job
    }

    /// The refusal for `record` of another job.
    pub(super) fn other_job(&self, record: &LeaseRecord) -> LeaseError {
        LeaseError::OtherJob {
            path: self.location(),
            owner: record.holder().to_string(),
            other: record.job.clone(),
            mine: self.job.clone(),
        }
    }

    /// Where the lease is, for messages (`s3://b/chk/<job>/_lease`,
    /// `kudu:ferry_ha/<job>/_lease`).
    pub fn location(&self) -> String {
        self.backend.location()
    }

    /// The newest lease record, if any.
    pub async fn newest(&self) -> Result<Option<LeaseRecord>, LeaseError> {
        self.backend.newest().await
    }

    /// Writes position `seq` for `generation`: `Ok(None)` if this call
    /// wrote it, else the record that won the position.
    async fn create(&self, seq: u64, generation: u64) -> Result<Option<LeaseRecord>, LeaseError> {
        let record = LeaseRecord {
            seq,
            generation,
            owner: self.owner.clone(),
            at_ms: crate::time::now_ms(),
            job: self.job.clone(),
        };
        self.backend.write_next(&record).await
    }

    /// Claims the generation after `newest` (or generation 1 on an empty
    /// lease). `Ok(None)`: another instance won the race (a renewal or a
    /// competing claim); watch again.
    pub async fn claim(&self, newest: Option<&LeaseRecord>) -> Result<Option<Held>, LeaseError> {
        let (seq, generation) = newest.map_or((1, 1), |r| (r.seq + 1, r.generation + 1));
        let started = Instant::now();
        match self.create(seq, generation).await? {
            None => {
                tracing::info!(generation, lease = %self.location(), "lease claimed");
                Ok(Some(Held {
                    generation,
                    seq,
                    fence: Fence::new(generation, started + self.valid_for()),
                }))
            }
            Some(winner) => {
                tracing::info!(generation = winner.generation, owner = %winner.owner, "lost the race for the lease");
                Ok(None)
            }
        }
    }

    /// Releases the lease of `generation` at once: writes a released
    /// record of that generation after the newest, so the next claimant
    /// need not wait a lease duration (fencing stays generation-based: the
    /// claimant writes the next generation). The caller has stopped
    /// renewing and writing. `Ok(false)`: another generation holds the
    /// lease already, so there was nothing to release.
    pub async fn release(&self, generation: u64) -> Result<bool, LeaseError> {
        for _ in 0..RELEASE_ATTEMPTS {
            let Some(newest) = self.backend.newest().await? else {
                return Ok(false);
            };
            if newest.generation != generation {
                return Ok(false);
            }
            if newest.is_released() {
                return Ok(true);
            }
            let record = LeaseRecord {
                seq: newest.seq + 1,
                generation,
                owner: format!("{RELEASED_MARK}{}", self.owner),
                at_ms: crate::time::now_ms(),
                job: self.job.clone(),
            };
            // Lost: a renewal of ours still in flight, or a claim; look again.
            if self.backend.write_next(&record).await?.is_none() {
                tracing::info!(generation, lease = %self.location(), "lease released");
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// How long a renewal (or claim) keeps the fence open, from its start.
    fn valid_for(&self) -> Duration {
        self.duration.saturating_sub(self.margin)
    }

    /// Renews `held` until its fence closes or the returned task is
    /// aborted. A renewal that finds a higher generation closes the fence;
    /// one that fails (store error) is retried at the next interval (each
    /// distinct failure logged once a minute), and if none succeeds before
    /// the deadline the fence closes on its own.
    pub fn keep(self: Arc<Self>, mut held: Held) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut failures = FailureLog::default();
            let mut tick = tokio::time::interval(self.renew_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(fenced) = held.fence.check() {
                    tracing::error!(%fenced, "lease lost; no further checkpoint or row will be written");
                    return;
                }
                let started = Instant::now();
                match self.create(held.seq + 1, held.generation).await {
                    Ok(None) => {
                        held.seq += 1;
                        held.fence.renewed(started, self.valid_for());
                        if held.seq > KEEP {
                            if let Err(e) = self.backend.forget_before(held.seq - KEEP + 1).await {
                                tracing::debug!(error = %e, "lease cleanup");
                            }
                        }
                    }
                    Ok(Some(winner)) if winner.generation > held.generation => {
                        held.fence.taken_over(winner.generation);
                        tracing::error!(
                            generation = held.generation,
                            taken_by = winner.generation,
                            owner = %winner.owner,
                            "fenced: a newer generation took over; no further checkpoint or row will be written"
                        );
                        return;
                    }
                    // Our own generation at that position cannot happen
                    // with one holder; step past it.
                    Ok(Some(_)) => held.seq += 1,
                    Err(e) => {
                        let source = std::error::Error::source(&e).map(|s| s.to_string());
                        let text = format!("{e}: {}", source.as_deref().unwrap_or(""));
                        if let Some(repeats) = failures.due(&text) {
                            tracing::warn!(error = %e, source = ?source, repeats, "lease renewal failed; retrying");
                        }
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::MemoryStateStore;
    use crate::lease::{Role, Standby, StateSearch, Watcher};

    /// Claims `lease` through a [`Standby`] with nowhere to look for state.
    async fn claim_as(lease: &Arc<Lease>, role: Role) -> Result<Held, LeaseError> {
        let search = StateSearch::new(Arc::new(crate::checkpoint::LocalResolver), Vec::new(), None);
        let mut standby = Standby::new(lease.clone(), search);
        standby
            .claim(role, |_| {}, async || {})
            .await
            .map(|c| c.held)
    }

    use super::super::test_ha as ha;

    fn lease(store: &Arc<MemoryStateStore>, owner: &str, duration_ms: u64) -> Arc<Lease> {
        let job: JobId = "00112233445566778899aabbccddeeff".parse().expect("id");
        let dir = StorageLocation::parse("/chk").expect("dir");
        Arc::new(Lease::new(
            store.clone(),
            &dir,
            &job,
            &ha(duration_ms),
            owner,
        ))
    }

    #[tokio::test]
    async fn one_claimant_per_generation() {
        let store = Arc::new(MemoryStateStore::new());
        let (a, b) = (lease(&store, "a", 800), lease(&store, "b", 800));
        let held = a.claim(None).await.expect("claim").expect("won");
        assert_eq!((held.generation, held.seq), (1, 1));
        let newest = b.newest().await.expect("read").expect("exists");
        assert_eq!((newest.generation, newest.owner.as_str()), (1, "a"));
        // b claims generation 2; a third claimant on the same view loses.
        let b_held = b.claim(Some(&newest)).await.expect("claim").expect("won");
        assert_eq!(b_held.generation, 2);
        assert!(a.claim(Some(&newest)).await.expect("claim").is_none());
    }

    #[tokio::test]
    async fn a_renewing_holder_keeps_the_lease_and_a_silent_one_loses_it() {
        let store = Arc::new(MemoryStateStore::new());
        let active = lease(&store, "active", 800);
        let held = active.claim(None).await.expect("claim").expect("won");
        let fence = held.fence.clone();
        let keeper = active.clone().keep(held);
        let standby = lease(&store, "standby", 800);
        // While renewals flow, the standby never sees 800 ms of silence.
        let mut watcher = Watcher::new();
        let until = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < until {
            watcher.poll(&standby).await.expect("poll");
            assert!(watcher.silent_for() < Duration::from_millis(800));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(fence.check().is_ok());
        // The active stops renewing (killed): the standby takes over.
        keeper.abort();
        let took = Instant::now();
        let held = claim_as(&standby, Role::Standby).await.expect("claim");
        assert!(
            took.elapsed() >= Duration::from_millis(600),
            "{:?}",
            took.elapsed()
        );
        assert_eq!(held.generation, 2);
        // The old holder's own deadline passed before the takeover.
        let err = fence.check().expect_err("fenced");
        assert!(err.to_string().contains("generation 1"), "{err}");
    }

    #[tokio::test]
    async fn a_resumed_holder_sees_the_new_generation() {
        let store = Arc::new(MemoryStateStore::new());
        let old = lease(&store, "old", 60_000);
        let held = old.claim(None).await.expect("claim").expect("won");
        let fence = held.fence.clone();
        let newest = old.newest().await.expect("read");
        let new = lease(&store, "new", 60_000);
        new.claim(newest.as_ref())
            .await
            .expect("claim")
            .expect("won");
        // The old holder's next renewal races for the same name and loses.
        let keeper = old.clone().keep(held);
        tokio::time::timeout(Duration::from_secs(60), keeper)
            .await
            .expect("ends")
            .expect("joined");
        assert_eq!(
            fence.check().expect_err("fenced"),
            super::super::Fenced::TakenOver {
                generation: 1,
                taken_by: 2
            }
        );
    }

    #[tokio::test]
    async fn a_released_lease_is_claimed_at_once_by_the_next_generation() {
        let store = Arc::new(MemoryStateStore::new());
        // 8 s: the standby polls every second.
        let (a, b) = (lease(&store, "a", 8_000), lease(&store, "b", 8_000));
        let held = claim_as(&a, Role::Active).await.expect("claim");
        let fence = held.fence.clone();
        let holding = crate::lease::Holding::new(a.clone(), held);
        let waiting = claim_as(&b, Role::Standby);
        tokio::pin!(waiting);
        let early = tokio::time::timeout(Duration::from_millis(300), &mut waiting).await;
        assert!(early.is_err(), "the lease is held and renewed");
        assert!(holding.hand_back().await.expect("release"));
        assert_eq!(
            fence.check(),
            Err(super::super::Fenced::Released { generation: 1 })
        );
        let newest = a.newest().await.expect("read").expect("record");
        assert!(newest.is_released(), "{newest:?}");
        assert_eq!((newest.generation, newest.holder()), (1, "a"));
        // Far sooner than the 8 s lease duration.
        let held = tokio::time::timeout(Duration::from_secs(3), waiting)
            .await
            .expect("claimed at once")
            .expect("claim");
        assert_eq!(held.generation, 2);
        // Generation 1 has nothing left to release.
        assert!(!a.release(1).await.expect("read"));
    }

    #[tokio::test]
    async fn an_empty_lease_is_claimed_by_run_and_awaited_by_standby() {
        let store = Arc::new(MemoryStateStore::new());
        let standby = lease(&store, "standby", 800);
        let waiting = tokio::time::timeout(
            Duration::from_millis(1200),
            claim_as(&standby, Role::Standby),
        )
        .await;
        assert!(
            waiting.is_err(),
            "a standby must not start a job nobody ran"
        );
        let run = lease(&store, "run", 800);
        let held = claim_as(&run, Role::Active).await.expect("claim");
        assert_eq!(held.generation, 1);
    }

    #[tokio::test]
    async fn a_lease_another_job_renews_is_refused_a_dead_ones_taken_over() {
        let store = Arc::new(MemoryStateStore::new());
        let of = |owner: &str, job: &str| {
            Arc::new(Lease::clone(&lease(&store, owner, 600)).for_job(job))
        };
        let (a, b) = (of("a", "job A"), of("b", "job B"));
        let held = a.claim(None).await.expect("claim").expect("won");
        // One record of another job is not enough: it may be a dead one's.
        let mut watcher = Watcher::new();
        watcher.poll(&b).await.expect("first sight");
        watcher.poll(&b).await.expect("unchanged");
        // Renewed: two jobs share the cluster id.
        let newest = a.newest().await.expect("read");
        a.claim(newest.as_ref()).await.expect("claim").expect("won");
        let err = watcher.poll(&b).await.expect_err("another job renews");
        let text = err.to_string();
        for part in ["job A", "job B", "high-availability.cluster-id", "a "] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
        // A standby of job B says so instead of waiting for ever.
        let standing = tokio::time::timeout(Duration::from_secs(5), claim_as(&b, Role::Standby));
        let renew = async {
            for _ in 0..20 {
                let newest = a.newest().await.expect("read");
                let _ = a.claim(newest.as_ref()).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let (refused, ()) = tokio::join!(standing, renew);
        assert!(
            matches!(refused, Ok(Err(LeaseError::OtherJob { .. }))),
            "{refused:?}"
        );
        // Job A dead (its record unchanged for a lease duration): job B
        // takes over (a job whose clusters were renamed keeps its state).
        let taken = tokio::time::timeout(Duration::from_secs(5), claim_as(&b, Role::Standby))
            .await
            .expect("taken over")
            .expect("claim");
        assert!(taken.generation > held.generation);
        let newest = b.newest().await.expect("read").expect("exists");
        assert_eq!(newest.job, "job B");
        // Records of older builds name no job: never refused.
        let old = lease(&store, "old", 600);
        assert!(!old.is_other_job(&newest) && !b.is_other_job(&LeaseRecord::default()));
    }
}
