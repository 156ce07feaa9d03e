//! [`Fence`]: the active instance's local, cheap answer to "may I still
//! write?", checked before every checkpoint, savepoint and sink write.
//!
//! Two things close it for good: the lease keeper seeing a higher
//! generation in the store, or the monotonic deadline (last successful
//! renewal's start + lease duration − safety margin) passing. The deadline
//! needs no store round trip, so an instance that was paused (SIGSTOP, a
//! long GC-like stall, a frozen VM) finds itself fenced on its very first
//! check after it resumes, before the keeper had a chance to look.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why an instance may no longer write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Fenced {
    /// Another instance claimed a higher generation.
    #[error(
        "fenced: generation {taken_by} took over (this instance held generation {generation})"
    )]
    TakenOver {
        /// This instance's generation.
        generation: u64,
        /// The generation that took over.
        taken_by: u64,
    },
    /// The lease was not renewed in time; a standby may have taken over.
    #[error("fenced: the lease of generation {generation} was not renewed in time (deadline passed {late_ms} ms ago); generation {} may have taken over", generation + 1)]
    Expired {
        /// This instance's generation.
        generation: u64,
        /// How long ago the deadline passed when it was noticed.
        late_ms: u64,
    },
    /// This instance released the lease (it handed its job over).
    #[error("fenced: generation {generation} released the lease")]
    Released {
        /// This instance's generation.
        generation: u64,
    },
}

#[derive(Debug)]
struct State {
    generation: u64,
    /// The clock the deadline is measured on (monotonic).
    epoch: Instant,
    /// Deadline in ms since `epoch`.
    deadline_ms: AtomicU64,
    /// A higher generation seen in the store (0: none).
    taken_by: AtomicU64,
    /// Closed by this instance releasing the lease.
    released: AtomicBool,
    /// Set once the deadline was found passed: a lapsed lease is never
    /// extended again, even if a late renewal succeeds.
    lapsed: AtomicBool,
}

/// The local fence of one lease holder; cheap to clone and to check.
/// [`Fence::none`] (no high availability) never closes.
#[derive(Debug, Clone, Default)]
pub struct Fence(Option<Arc<State>>);

impl Fence {
    /// No lease: every check passes.
    pub fn none() -> Self {
        Fence(None)
    }

    /// A holder of `generation` whose lease is good until `deadline`.
    pub fn new(generation: u64, deadline: Instant) -> Self {
        let epoch = Instant::now();
        let fence = Fence(Some(Arc::new(State {
            generation,
            epoch,
            deadline_ms: AtomicU64::new(0),
            taken_by: AtomicU64::new(0),
            released: AtomicBool::new(false),
            lapsed: AtomicBool::new(false),
        })));
        fence.store_deadline(deadline);
        fence
    }

    /// The generation held (0 without a lease).
    pub fn generation(&self) -> u64 {
        self.0.as_ref().map_or(0, |s| s.generation)
    }

    /// Whether this fence belongs to a lease (`high-availability.type lease`).
    pub fn is_leased(&self) -> bool {
        self.0.is_some()
    }

    /// `Ok` while this instance may write; checked before each checkpoint,
    /// savepoint and sink write. Once it fails it keeps failing.
    pub fn check(&self) -> Result<(), Fenced> {
        let Some(s) = &self.0 else { return Ok(()) };
        if s.released.load(Ordering::Acquire) {
            return Err(Fenced::Released {
                generation: s.generation,
            });
        }
        let taken_by = s.taken_by.load(Ordering::Acquire);
        if taken_by != 0 {
            return Err(Fenced::TakenOver {
                generation: s.generation,
                taken_by,
            });
        }
        let now = s.epoch.elapsed().as_millis() as u64;
        let deadline = s.deadline_ms.load(Ordering::Acquire);
        if s.lapsed.load(Ordering::Acquire) || now >= deadline {
            s.lapsed.store(true, Ordering::Release);
            return Err(Fenced::Expired {
                generation: s.generation,
                late_ms: now.saturating_sub(deadline),
            });
        }
        Ok(())
    }

    /// A renewal that started at `started` succeeded: the lease is good
    /// until `started + valid_for`. Ignored once the fence has closed — a
    /// lease that lapsed may already belong to a standby.
    pub fn renewed(&self, started: Instant, valid_for: Duration) -> bool {
        if self.check().is_err() {
            return false;
        }
        self.store_deadline(started + valid_for);
        true
    }

    /// The store shows generation `taken_by` (higher than ours): close.
    pub fn taken_over(&self, taken_by: u64) {
        if let Some(s) = &self.0 {
            s.taken_by.store(taken_by, Ordering::Release);
        }
    }

    /// This instance is releasing the lease: close for good.
    pub fn release(&self) {
        if let Some(s) = &self.0 {
            s.released.store(true, Ordering::Release);
        }
    }

    fn store_deadline(&self, deadline: Instant) {
        if let Some(s) = &self.0 {
            let ms = deadline.saturating_duration_since(s.epoch).as_millis() as u64;
            s.deadline_ms.store(ms, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_lease_never_fences() {
        let f = Fence::none();
        assert!(f.check().is_ok());
        f.taken_over(9);
        assert!(f.check().is_ok());
        assert_eq!(f.generation(), 0);
    }

    #[test]
    fn a_higher_generation_closes_for_good() {
        let f = Fence::new(3, Instant::now() + Duration::from_secs(60));
        assert!(f.check().is_ok());
        f.taken_over(4);
        let err = f.check().expect_err("fenced");
        assert_eq!(
            err.to_string(),
            "fenced: generation 4 took over (this instance held generation 3)"
        );
        assert!(!f.renewed(Instant::now(), Duration::from_secs(60)));
        assert!(f.check().is_err());
    }

    #[test]
    fn a_passed_deadline_closes_and_late_renewals_do_not_reopen() {
        let f = Fence::new(1, Instant::now() + Duration::from_millis(30));
        assert!(f.check().is_ok());
        std::thread::sleep(Duration::from_millis(40));
        let err = f.check().expect_err("expired");
        assert!(
            err.to_string()
                .starts_with("fenced: the lease of generation 1 was not renewed in time"),
            "{err}"
        );
        assert!(!f.renewed(Instant::now(), Duration::from_secs(60)));
        assert!(f.check().is_err());
    }

    #[test]
    fn a_released_fence_stays_closed() {
        let f = Fence::new(2, Instant::now() + Duration::from_secs(60));
        f.release();
        assert_eq!(f.check(), Err(Fenced::Released { generation: 2 }));
        assert!(!f.renewed(Instant::now(), Duration::from_secs(60)));
        assert!(f.check().is_err());
    }

    #[test]
    fn renewals_extend_the_deadline() {
        let f = Fence::new(1, Instant::now() + Duration::from_millis(30));
        assert!(f.renewed(Instant::now(), Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(40));
        assert!(f.check().is_ok());
    }
}
