//! Nobody gives up: a standby facing a lease it cannot read, and a holder
//! that lost the lease standing by and winning it again — over a store
//! that can be switched off.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::test_ha as ha;
use super::{Event, Fenced, Lease, Role, Standby, StateSearch};
use crate::checkpoint::{
    JobId, LocalResolver, MemoryStateStore, StateKey, StateStore, StorageLocation, StoreError,
    StoreFuture,
};

const D: Duration = Duration::from_millis(600);

/// One instance's view of a shared store, which can go down for it.
#[derive(Debug)]
struct Flaky {
    inner: Arc<MemoryStateStore>,
    down: AtomicBool,
}

impl Flaky {
    fn new(inner: &Arc<MemoryStateStore>) -> Arc<Self> {
        Arc::new(Flaky {
            inner: inner.clone(),
            down: AtomicBool::new(false),
        })
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    fn refused<'a, T: Send + 'a>(
        &self,
        op: &'static str,
        key: &StateKey,
    ) -> Option<StoreFuture<'a, T>> {
        if !self.down.load(Ordering::SeqCst) {
            return None;
        }
        let key = key.clone();
        Some(Box::pin(async move {
            Err(StoreError::Backend {
                op,
                key,
                source: "connection refused".into(),
            })
        }))
    }
}

impl StateStore for Flaky {
    fn put_if_absent<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        self.refused("create", key)
            .unwrap_or_else(|| self.inner.put_if_absent(key, bytes))
    }

    fn put<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        self.refused("write", key)
            .unwrap_or_else(|| self.inner.put(key, bytes))
    }

    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>> {
        self.refused("read", key)
            .unwrap_or_else(|| self.inner.get(key))
    }

    fn list<'a>(&'a self, prefix: &'a StateKey) -> StoreFuture<'a, Vec<StateKey>> {
        self.refused("list", prefix)
            .unwrap_or_else(|| self.inner.list(prefix))
    }

    fn delete<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, ()> {
        self.refused("delete", key)
            .unwrap_or_else(|| self.inner.delete(key))
    }
}

/// `owner`'s way to the job's lease through `store`, with nowhere to look
/// for state.
fn standby(store: &Arc<Flaky>, owner: &str) -> Standby {
    let job: JobId = "00112233445566778899aabbccddeeff".parse().expect("id");
    let dir = StorageLocation::parse("/chk").expect("dir");
    let lease = Lease::new(store.clone(), &dir, &job, &ha(D.as_millis() as u64), owner);
    let search = StateSearch::new(Arc::new(LocalResolver), Vec::new(), None);
    Standby::new(Arc::new(lease), search)
}

#[tokio::test]
async fn a_standby_does_not_take_an_unreadable_lease_for_a_silent_one() {
    let shared = Arc::new(MemoryStateStore::new());
    let store = Flaky::new(&shared);
    let mut active = standby(&store, "active");
    let claim = active
        .claim(Role::Active, |_| {}, async || {})
        .await
        .expect("claim");
    let holding = active.hold(claim.held);
    let mut waiting = standby(&store, "standby");
    let (mut read_failures, mut claimed_at_lapse) = (0, None);
    let outage = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        store.set_down(true);
        // Five lease durations without a successful read.
        tokio::time::sleep(5 * D).await;
        store.set_down(false);
        Instant::now()
    };
    let (claim, back) = tokio::join!(
        waiting.claim(
            Role::Standby,
            |e| match e {
                Event::ReadFailed(_) => read_failures += 1,
                Event::Lapsed { silent, .. } => claimed_at_lapse = Some(silent),
                _ => {}
            },
            async || {}
        ),
        outage
    );
    let claim = claim.expect("a standby retries");
    // Not during the outage: a full duration of successful reads after it.
    let after = claim.detected.saturating_duration_since(back);
    assert!(after >= D, "claimed {after:?} after the store came back");
    assert!(read_failures > 0);
    assert_eq!(claim.held.generation, 2);
    assert!(claimed_at_lapse.is_some_and(|s| s >= D && s < D + 3 * D / 2));
    // The outage is reported as such, and the RTO counts from the last
    // renewal seen (before the outage).
    assert!(claim.unreadable() >= 4 * D, "{:?}", claim.unreadable());
    assert!(claim.detected.duration_since(claim.last_renewal_seen()) >= 5 * D);
    // The holder could not renew: its fence closed long before the claim.
    assert!(matches!(
        holding.fence.check(),
        Err(Fenced::Expired { generation: 1, .. })
    ));
    holding.release();
}

#[tokio::test]
async fn a_fenced_holder_stands_by_and_wins_the_lease_again() {
    let shared = Arc::new(MemoryStateStore::new());
    let (a_view, b_view) = (Flaky::new(&shared), Flaky::new(&shared));
    let mut a = standby(&a_view, "a");
    let claim = a
        .claim(Role::Active, |_| {}, async || {})
        .await
        .expect("claim");
    let a_holding = a.hold(claim.held);
    // a loses the store: it cannot renew, its fence closes, b takes over.
    let mut b = standby(&b_view, "b");
    a_view.set_down(true);
    let (fenced, b_claim) = tokio::join!(
        a_holding.fenced(),
        b.claim(Role::Standby, |_| {}, async || {})
    );
    assert!(matches!(fenced, Fenced::Expired { generation: 1, .. }));
    let b_claim = b_claim.expect("claim");
    assert_eq!(b_claim.held.generation, 2);
    a_holding.release();
    let b_holding = b.hold(b_claim.held);
    // a stands by again once the store is back: b renews, so it waits …
    a_view.set_down(false);
    let b_fence = b_holding.fence.clone();
    let b_stops = async {
        tokio::time::sleep(3 * D).await;
        assert!(b_fence.check().is_ok(), "b kept the lease meanwhile");
        // … until b stops renewing.
        b_holding.release();
        Instant::now()
    };
    let (again, b_stopped) = tokio::join!(a.claim(Role::Standby, |_| {}, async || {}), b_stops);
    let again = again.expect("claim");
    assert_eq!(again.held.generation, 3);
    assert!(again.detected.saturating_duration_since(b_stopped) >= D - D / 4);
    // b's deadline passed before a's claim: never two holders.
    assert!(b_fence.check().is_err());
    let a_again = a.hold(again.held);
    assert!(a_again.fence.check().is_ok());
    a_again.release();
}
