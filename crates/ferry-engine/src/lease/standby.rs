//! [`Standby`]: how an instance comes to run a job under its lease — stand
//! by while a holder renews, claim the next generation when it goes silent
//! (or at once when nobody ever held it), find the newest retained state
//! and hold the lease while the job runs. `ferry run` (with a lease),
//! `ferry standby` and `ferry failover` all go through it; they differ only
//! in their [`Role`] and in what they print of its [`Event`]s.
//!
//! Claim first, search after: once the lease is ours the state cannot
//! move on, so the search that follows a claim sees the last state the
//! previous holder wrote.
//!
//! Nobody gives up: a failed lease read is unknown time, never silence
//! ([`Watcher`]); failed reads and claims are retried with backoff and
//! reported as events (the caller logs them through a
//! [`FailureLog`](super::FailureLog)). Only an active instance that has
//! not read the lease even once stops on an error: a place it never
//! reached is most likely misconfigured.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::backend::{LeaseError, LeaseRecord};
use super::find::{find_latest, sort_newest_first, FindError, FoundState, Search};
use super::protocol::{Held, Lease};
use super::watch::Watcher;
use super::{Fence, Fenced};
use crate::checkpoint::{JobId, LoadedState, StorageLocation, StoreError, StoreResolver};

/// How often a standby refreshes its pre-loaded state while it waits.
pub const PRELOAD_EVERY: Duration = Duration::from_secs(2);

/// Who is claiming, which decides what a never-held lease and a failed
/// lease read mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The job's active instance (`ferry run`, `ferry failover`): claims a
    /// lease nobody ever held at once; a lease it cannot read even once is
    /// an error (later failures are retried).
    Active,
    /// A standby (`ferry standby`, or a fenced holder standing by again):
    /// waits for an active instance to appear and go silent, keeps the
    /// newest state pre-loaded meanwhile ([`PRELOAD_EVERY`]), and retries
    /// every failed lease read or claim.
    Standby,
}

/// What a [`Standby`] tells its caller while it waits; the caller decides
/// what to print or log.
#[derive(Debug)]
pub enum Event<'a> {
    /// Still waiting: `holder` renews (or nobody holds the lease yet);
    /// `silent` is how long its newest object has not changed. Sent on
    /// every poll.
    Waiting {
        /// The newest lease record, if any.
        holder: Option<&'a LeaseRecord>,
        /// How long it has not changed, on this instance's clock.
        silent: Duration,
    },
    /// The holder has not renewed for the lease duration: claiming now.
    Lapsed {
        /// Its last record.
        holder: &'a LeaseRecord,
        /// How long it has been silent.
        silent: Duration,
    },
    /// The holder released the lease (it handed the job over): claiming
    /// now.
    Released {
        /// Its release record.
        holder: &'a LeaseRecord,
    },
    /// The lease could not be read; tried again after a backoff. The time
    /// until the next successful read does not count as silence.
    ReadFailed(&'a LeaseError),
    /// A claim failed (the store's answer was lost or an error): watched
    /// again from scratch after a backoff.
    ClaimFailed(&'a LeaseError),
    /// A standby refreshed its pre-loaded state; `changed` when the newest
    /// valid state is not the one it had.
    Preloaded {
        /// The newest valid state now.
        newest: Option<&'a FoundState>,
        /// Whether it differs from the previous newest.
        changed: bool,
    },
    /// A standby's refresh failed; it tries again.
    SearchFailed(&'a StandbyError),
}

/// A claimed lease, not yet renewed.
#[derive(Debug)]
pub struct Claim {
    /// The claimed generation and its fence.
    pub held: Held,
    /// When the lease was seen free (lapsed, or never held).
    pub detected: Instant,
    /// How long the previous holder had been silent then, counted over
    /// successful reads only (zero for a lease nobody held).
    pub silent: Duration,
    /// How long the claim took, from the call.
    pub waited: Duration,
    /// When this instance first read the previous holder's last record
    /// (`detected` for a lease nobody held).
    pub renewal_seen: Instant,
    /// The previous holder's last record (`None` for a lease nobody held):
    /// its `at_ms` is the holder's own clock at its last renewal.
    pub holder: Option<LeaseRecord>,
}

impl Claim {
    /// When the previous holder was last seen renewing, on this instance's
    /// clock: where a takeover's recovery time starts.
    pub fn last_renewal_seen(&self) -> Instant {
        self.renewal_seen
    }

    /// Time since the last renewal seen during which the lease could not
    /// be read (it counted neither as silence nor as renewal).
    pub fn unreadable(&self) -> Duration {
        self.detected
            .saturating_duration_since(self.renewal_seen)
            .saturating_sub(self.silent)
    }
}

/// A lease being renewed while the job runs.
#[derive(Debug)]
pub struct Holding {
    /// The generation held.
    pub generation: u64,
    /// Its fence (for the job's checkpoints, savepoints and sink writes).
    pub fence: Fence,
    lease: Arc<Lease>,
    keeper: tokio::task::JoinHandle<()>,
}

/// How often [`Holding::fenced`] looks at the fence.
const FENCE_POLL: Duration = Duration::from_millis(50);

impl Holding {
    /// Renews `held` of `lease` until [`Holding::release`] or
    /// [`Holding::hand_back`].
    pub fn new(lease: Arc<Lease>, held: Held) -> Self {
        Holding {
            generation: held.generation,
            fence: held.fence.clone(),
            keeper: lease.clone().keep(held),
            lease,
        }
    }

    /// Stops renewing and releases the lease at once (the job was stopped
    /// first): the next claimant takes it without waiting a lease
    /// duration. The fence closes for good. `Ok(false)`: another
    /// generation held the lease already.
    pub async fn hand_back(self) -> Result<bool, LeaseError> {
        self.fence.release();
        self.keeper.abort();
        // A renewal in flight ends before the release is written.
        let _ = self.keeper.await;
        self.lease.release(self.generation).await
    }

    /// Stops renewing (the job ended): the lease lapses for the next
    /// instance after its duration.
    pub fn release(self) {
        self.keeper.abort();
    }

    /// Resolves once the fence closes (a higher generation seen, or the
    /// lease not renewed in time): the holder must stop its job.
    pub async fn fenced(&self) -> Fenced {
        loop {
            if let Err(fenced) = self.fence.check() {
                return fenced;
            }
            tokio::time::sleep(FENCE_POLL).await;
        }
    }
}

/// Opening a store or searching it failed.
#[derive(Debug, thiserror::Error)]
pub enum StandbyError {
    /// The lease could not be read or written.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// A location's store could not be opened (its text is complete and
    /// names the location).
    #[error("{0}")]
    Open(StoreError),
    /// A listing or a read failed.
    #[error(transparent)]
    Find(#[from] FindError),
}

/// Where a job's retained state is looked for, remembering what earlier
/// searches found so a standby re-reads only new directories.
#[derive(Debug)]
pub struct StateSearch {
    resolver: Arc<dyn StoreResolver>,
    from: Vec<StorageLocation>,
    job: Option<JobId>,
    known: Vec<FoundState>,
}

impl StateSearch {
    /// Looks in every location of `from` (through `resolver`) for the state
    /// of `job` (any one job's if `None`).
    pub fn new(
        resolver: Arc<dyn StoreResolver>,
        from: Vec<StorageLocation>,
        job: Option<JobId>,
    ) -> Self {
        StateSearch {
            resolver,
            from,
            job,
            known: Vec::new(),
        }
    }

    /// Where it looks.
    pub fn locations(&self) -> &[StorageLocation] {
        &self.from
    }

    /// The newest complete, valid state over every location, reading
    /// only the states that may be the newest ([`find_latest`]; states
    /// found by an earlier search are not read again).
    pub async fn find_newest(&mut self) -> Result<Search, StandbyError> {
        let mut all = Search::default();
        for location in &self.from {
            let store = self.resolver.open(location).map_err(StandbyError::Open)?;
            let search = find_latest(store.as_ref(), location, self.job, &self.known).await?;
            all.valid.extend(search.valid);
            all.skipped.extend(search.skipped);
            all.listed_in += search.listed_in;
            all.reused += search.reused;
            all.unread += search.unread;
        }
        sort_newest_first(&mut all.valid);
        all.newest = all.valid.first().cloned();
        Ok(all)
    }

    /// [`find_newest`](Self::find_newest), keeping what it found for the
    /// next search; `changed` when the newest valid state is a new one.
    async fn preload(&mut self) -> Result<(Option<&FoundState>, bool), StandbyError> {
        let search = self.find_newest().await?;
        let before = self.known.first().map(|f| f.location.clone());
        let changed = before.as_ref() != search.newest.as_ref().map(|f| &f.location);
        self.known = search.valid;
        Ok((self.known.first(), changed))
    }
}

/// One instance's way to a job's lease: wait, claim, find, hold.
#[derive(Debug)]
pub struct Standby {
    lease: Arc<Lease>,
    search: StateSearch,
}

impl Standby {
    /// Stands by for `lease`, taking state from `search`.
    pub fn new(lease: Arc<Lease>, search: StateSearch) -> Self {
        Standby { lease, search }
    }

    /// The lease.
    pub fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    /// The state search (for a search without a claim).
    pub fn search(&mut self) -> &mut StateSearch {
        &mut self.search
    }

    /// Waits until the lease is free (see [`Role`]) and claims the next
    /// generation; a lost race waits again. `on_event` hears every poll;
    /// `refresh` runs after each [`Role::Standby`] preload (the caller
    /// keeps its own resources warm there). Returns an error only for an
    /// [`Role::Active`] instance that could not read the lease at all, and
    /// for a lease another job holds ([`LeaseError::OtherJob`]).
    pub async fn claim(
        &mut self,
        role: Role,
        mut on_event: impl FnMut(Event<'_>),
        mut refresh: impl AsyncFnMut(),
    ) -> Result<Claim, LeaseError> {
        let began = Instant::now();
        let mut backoff = Backoff::new(&self.lease);
        let mut watcher = Watcher::new();
        let mut reached = false;
        let mut preloaded_at: Option<Instant> = None;
        loop {
            match watcher.poll(&self.lease).await {
                Ok(_) => {
                    reached = true;
                    backoff.reset();
                }
                Err(e) if role == Role::Active && !reached => return Err(e),
                // Not a coordination failure: waiting would never end.
                Err(e @ LeaseError::OtherJob { .. }) => return Err(e),
                Err(e) => {
                    on_event(Event::ReadFailed(&e));
                    backoff.failed().await;
                    continue;
                }
            }
            let silent = watcher.silent_for();
            let free = match &watcher.newest {
                None => role == Role::Active,
                Some(r) => r.is_released() || silent >= self.lease.duration,
            };
            if free {
                let detected = Instant::now();
                let (silent, renewal_seen) =
                    announce_free(&watcher, silent, detected, &mut on_event);
                match self.lease.claim(watcher.newest.as_ref()).await {
                    Ok(Some(held)) => {
                        return Ok(Claim {
                            held,
                            detected,
                            silent,
                            waited: began.elapsed(),
                            renewal_seen,
                            holder: watcher.newest.clone(),
                        })
                    }
                    // Lost the race: watch the winner.
                    Ok(None) => {}
                    // Whether the record was written is unknown: whoever
                    // wrote it, it is a change, watched for a full
                    // duration again.
                    Err(e) => {
                        on_event(Event::ClaimFailed(&e));
                        backoff.failed().await;
                    }
                }
                watcher = Watcher::new();
                continue;
            }
            if role == Role::Standby && preloaded_at.is_none_or(|t| t.elapsed() >= PRELOAD_EVERY) {
                preloaded_at = Some(Instant::now());
                match self.search.preload().await {
                    Ok((newest, changed)) => on_event(Event::Preloaded { newest, changed }),
                    Err(e) => on_event(Event::SearchFailed(&e)),
                }
                refresh().await;
            }
            on_event(Event::Waiting {
                holder: watcher.newest.as_ref(),
                silent,
            });
            tokio::time::sleep(backoff.poll).await;
        }
    }

    /// After a claim: the newest retained state to take over from.
    pub async fn find_newest(&mut self) -> Result<Search, StandbyError> {
        self.search.find_newest().await
    }

    /// Renews `held` until [`Holding::release`].
    pub fn hold(&self, held: Held) -> Holding {
        Holding::new(self.lease.clone(), held)
    }
}

/// Tells `on_event` why the lease is free (released, or silent for
/// `silent`); returns the silence to report and when a renewal was last
/// seen (`detected` when there never was a holder).
fn announce_free(
    watcher: &Watcher,
    silent: Duration,
    detected: Instant,
    on_event: &mut impl FnMut(Event<'_>),
) -> (Duration, Instant) {
    match &watcher.newest {
        Some(holder) if holder.is_released() => {
            on_event(Event::Released { holder });
            (silent, watcher.seen_at())
        }
        Some(holder) => {
            on_event(Event::Lapsed { holder, silent });
            (silent, watcher.seen_at())
        }
        None => (Duration::ZERO, detected),
    }
}

/// The waits between lease polls: the poll interval (half the renew
/// interval) while reads succeed, doubling after each failure up to a
/// quarter of the lease duration, so a returning store is noticed soon.
#[derive(Debug)]
struct Backoff {
    poll: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    fn new(lease: &Lease) -> Self {
        let poll = (lease.renew_interval / 2).max(Duration::from_millis(50));
        Backoff {
            poll,
            max: (lease.duration / 4).max(poll),
            next: poll,
        }
    }

    fn reset(&mut self) {
        self.next = self.poll;
    }

    async fn failed(&mut self) {
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(self.max);
    }
}

impl FoundState {
    /// The state as a job restores it.
    pub fn loaded(&self) -> LoadedState {
        LoadedState {
            location: self.location.clone(),
            state: self.state.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{
        encode_metadata, JobState, MemoryStateStore, SingleStoreResolver, SnapshotKind, StateKey,
    };

    const JOB: &str = "00112233445566778899aabbccddeeff";

    use super::super::test_ha as ha;

    fn lease(store: &Arc<MemoryStateStore>, owner: &str) -> Arc<Lease> {
        let dir = StorageLocation::parse("/chk").expect("dir");
        let job: JobId = JOB.parse().expect("id");
        Arc::new(Lease::new(store.clone(), &dir, &job, &ha(600), owner))
    }

    fn checkpoint(store: &MemoryStateStore, id: u64, last_end: u64) {
        let mut s = JobState::new(
            JOB.parse().expect("id"),
            SnapshotKind::Checkpoint,
            id,
            "t",
            vec![],
            vec![],
        );
        s.last_end_timestamp = Some(crate::time::SourceTime::from_raw(last_end));
        let key = StateKey::parse(&format!("chk/{JOB}/chk-{id}/_metadata")).expect("key");
        store.overwrite(&key, encode_metadata(&s).expect("encode"));
    }

    #[tokio::test]
    async fn a_standby_preloads_claims_a_silent_lease_and_takes_over_from_the_newest_state() {
        let store = Arc::new(MemoryStateStore::new());
        checkpoint(&store, 1, 100);
        let active = lease(&store, "active");
        let held = active.claim(None).await.expect("claim").expect("won");
        let keeper = active.clone().keep(held);
        let search = StateSearch::new(
            Arc::new(SingleStoreResolver(store.clone())),
            vec![StorageLocation::parse("/chk").expect("dir")],
            Some(JOB.parse().expect("id")),
        );
        let mut standby = Standby::new(lease(&store, "standby"), search);
        // The active writes one more checkpoint, then dies.
        let dies = tokio::spawn({
            let store = store.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                checkpoint(&store, 2, 200);
                tokio::time::sleep(Duration::from_millis(500)).await;
                keeper.abort();
            }
        });
        let (mut preloaded, mut lapsed, mut refreshed) = (Vec::new(), Vec::new(), 0);
        let started = Instant::now();
        let claim = standby
            .claim(
                Role::Standby,
                |event| match event {
                    Event::Preloaded { newest, changed } => {
                        preloaded.push((newest.map(|f| f.state.checkpoint_id), changed))
                    }
                    Event::Lapsed { holder, silent } => lapsed.push((holder.generation, silent)),
                    _ => {}
                },
                async || refreshed += 1,
            )
            .await
            .expect("claim");
        dies.await.expect("joined");
        // Not before the active's last renewal (at most one renew interval,
        // 150 ms, before it died at 1000 ms) plus the lease duration.
        assert!(
            started.elapsed() >= Duration::from_millis(1450),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(claim.held.generation, 2);
        assert_eq!(lapsed.len(), 1);
        assert_eq!(lapsed[0].0, 1);
        assert!(lapsed[0].1 >= Duration::from_millis(600), "{lapsed:?}");
        assert_eq!(claim.silent, lapsed[0].1);
        // Pre-loaded while waiting; the caller's refresh ran with each.
        assert_eq!(preloaded.first(), Some(&(Some(1), true)));
        assert_eq!(refreshed, preloaded.len());
        // The search after the claim sees the last checkpoint and reuses
        // what the preload read.
        let search = standby.find_newest().await.expect("search");
        let newest = search.newest.expect("found");
        assert_eq!(newest.state.checkpoint_id, 2);
        assert_eq!(newest.loaded().location, newest.location);
        assert_eq!(search.reused, 1);
        // Holding renews: another claimant on the same view loses.
        let seen = standby.lease().newest().await.expect("read");
        let holding = standby.hold(claim.held);
        assert_eq!(holding.generation, 2);
        tokio::time::sleep(Duration::from_millis(400)).await;
        let late = lease(&store, "late");
        let newest_now = late.newest().await.expect("read");
        assert_ne!(
            newest_now.as_ref().map(|r| r.seq),
            seen.as_ref().map(|r| r.seq)
        );
        assert!(late.claim(seen.as_ref()).await.expect("claim").is_none());
        holding.release();
    }

    #[tokio::test]
    async fn an_active_instance_claims_a_lease_nobody_held_at_once() {
        let store = Arc::new(MemoryStateStore::new());
        let search = StateSearch::new(Arc::new(SingleStoreResolver(store.clone())), vec![], None);
        let mut standby = Standby::new(lease(&store, "run"), search);
        let mut waited = 0;
        let claim = standby
            .claim(
                Role::Active,
                |e| {
                    if matches!(e, Event::Waiting { .. }) {
                        waited += 1
                    }
                },
                async || {},
            )
            .await
            .expect("claim");
        assert_eq!((claim.held.generation, claim.silent), (1, Duration::ZERO));
        assert_eq!(waited, 0);
    }
}
