//! High availability: finding the state to take over from, the lease that
//! says which instance may write, and the fence that stops the one that
//! lost it.
//!
//! - `find`: [`find_newest`] — the newest complete, valid savepoint or
//!   checkpoint of a job in any store, chosen by recorded window end, with
//!   torn and damaged directories listed as skipped; [`find_latest`] makes
//!   the same choice reading only the states that may be the newest.
//! - `backend`: [`LeaseBackend`] — where the lease records live: a sequence
//!   whose positions are each written once (on a state store, create-only
//!   objects under `<high-availability.storageDir>/<job-id>/_lease/`;
//!   coordination services in their own crates).
//! - `protocol`: [`Lease`] — renewals and claims race for the same next
//!   position, so exactly one wins; a holder that hands its job over
//!   releases the lease at once (a released record of its generation).
//! - `standby`: [`Standby`] — wait while a holder renews, claim the next
//!   generation when it goes silent, find the newest retained state, hold
//!   the lease while the job runs; `ferry run` (with a lease), `ferry
//!   standby` and `ferry failover` all use it, reporting its [`Event`]s.
//! - `watch`: [`Watcher`] — how long the holder has been silent, counted
//!   only over time the lease could be read (an outage of the store is
//!   unknown time, never silence).
//! - `failures`: [`FailureLog`] — each distinct failure of a retrying
//!   instance logged once a minute, not once per retry.
//! - `fence`: [`Fence`] — the holder's local, lock-free check before every
//!   checkpoint, savepoint and sink write (monotonic deadline + "a higher
//!   generation was seen").
//!
//! Timing assumptions (pauses, clock rates, in-flight writes) are in
//! docs/dr.md.

mod backend;
/// The [`LeaseBackend`] conformance suite, for backends outside this crate
/// (feature `conformance`).
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod failures;
mod fence;
mod find;
#[cfg(test)]
mod outage_tests;
mod protocol;
mod standby;
mod watch;

/// The HA settings of a lease job whose lease lasts `duration_ms` (renewed
/// every quarter of it), for the lease tests.
#[cfg(test)]
fn test_ha(duration_ms: u64) -> crate::config::HaConfig {
    let d = format!("{duration_ms} ms");
    let r = format!("{} ms", duration_ms / 4);
    let pairs = [
        ("job.sourceMasterAddresses", "a:7051"),
        ("job.sinkMasterAddresses", "b:7051"),
        ("job.tableName", "t"),
        ("job.checkpointsDirectory", "/chk"),
        ("high-availability.type", "lease"),
        ("high-availability.lease-duration", d.as_str()),
        ("high-availability.renew-interval", r.as_str()),
    ];
    crate::config::JobConfig::from_named_pairs(pairs)
        .expect("config")
        .ha
}

pub use backend::{
    LeaseBackend, LeaseError, LeaseFuture, LeaseRecord, StoreBackend, RELEASED_MARK,
};
pub use failures::{FailureLog, LOG_FAILURE_EVERY};
pub use fence::{Fence, Fenced};
pub use find::{
    find_latest, find_newest, find_newest_reusing, sort_newest_first, FindError, FoundState,
    Search, SkippedState, CLOCK_SLACK,
};
pub use protocol::{Held, Lease, LEASE_DIR};
pub use standby::{Claim, Event, Holding, Role, Standby, StandbyError, StateSearch, PRELOAD_EVERY};
pub use watch::Watcher;
