//! [`Watcher`]: how long has a lease holder been silent, as far as this
//! instance *knows*? Measured on this instance's monotonic clock (clocks of
//! different machines are never compared), and only over time the lease
//! could be read: a failed read makes the interval around it unknown, not
//! silent. So a standby that cannot reach the coordination store never
//! concludes that the holder stopped renewing; after the store returns, it
//! needs a full lease duration of successful reads that all show the same
//! record before it may claim.

use std::time::{Duration, Instant};

use super::backend::{LeaseError, LeaseRecord};
use super::protocol::Lease;

/// Watches a lease: the newest record and how long it has been observed
/// unchanged through successful reads.
#[derive(Debug)]
pub struct Watcher {
    /// When the current record was first read (or the watch started).
    seen_at: Instant,
    /// When the last read returned, if it succeeded (None: the last read
    /// failed, or none was made yet).
    last_ok: Option<Instant>,
    /// Time between consecutive successful reads of the same record.
    silent: Duration,
    last_seq: Option<u64>,
    /// The first position at which a held record of another job was seen
    /// (reset by any other record).
    other_job_since: Option<u64>,
    /// The newest record seen.
    pub newest: Option<LeaseRecord>,
}

impl Default for Watcher {
    fn default() -> Self {
        Self::new()
    }
}

impl Watcher {
    /// Starts watching now (nothing is known yet).
    pub fn new() -> Self {
        Watcher {
            seen_at: Instant::now(),
            last_ok: None,
            silent: Duration::ZERO,
            last_seq: None,
            other_job_since: None,
            newest: None,
        }
    }

    /// Reads the newest record and notes what it says (see
    /// [`observe`](Self::observe)). A lease another job holds *and renews*
    /// (a record of its own seen at two positions) is
    /// [`LeaseError::OtherJob`]: two jobs were given one cluster id. A
    /// record of another job that stays unchanged is a dead holder's, and
    /// may be taken over like any (a job whose clusters were renamed).
    pub async fn poll(&mut self, lease: &Lease) -> Result<Option<&LeaseRecord>, LeaseError> {
        let read = lease.newest().await;
        self.observe(read, Instant::now())?;
        match &self.newest {
            Some(r) if lease.is_other_job(r) && !r.is_released() => match self.other_job_since {
                Some(first) if r.seq > first => return Err(lease.other_job(r)),
                Some(_) => {}
                None => self.other_job_since = Some(r.seq),
            },
            _ => self.other_job_since = None,
        }
        Ok(self.newest.as_ref())
    }

    /// Notes the outcome of a read that returned at `at`. A changed record
    /// restarts the silence; the same record as the previous *successful*
    /// read adds the time since that read; a failure adds nothing and makes
    /// the time until the next success unknown. A change is dated when the
    /// read returned, which is no earlier than its writing.
    pub fn observe(
        &mut self,
        read: Result<Option<LeaseRecord>, LeaseError>,
        at: Instant,
    ) -> Result<(), LeaseError> {
        let newest = match read {
            Ok(newest) => newest,
            Err(e) => {
                self.last_ok = None;
                return Err(e);
            }
        };
        let seq = newest.as_ref().map(|r| r.seq);
        if seq != self.last_seq {
            self.last_seq = seq;
            self.seen_at = at;
            self.silent = Duration::ZERO;
        } else if let Some(before) = self.last_ok {
            self.silent += at.saturating_duration_since(before);
        }
        self.last_ok = Some(at);
        self.newest = newest;
        Ok(())
    }

    /// How long the newest record has been seen unchanged, counting only
    /// the time between successful reads: what a claim may rely on.
    pub fn silent_for(&self) -> Duration {
        self.silent
    }

    /// When the newest record was first read: the last renewal this
    /// instance saw (whatever happened since, readable or not).
    pub fn seen_at(&self) -> Instant {
        self.seen_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64) -> LeaseRecord {
        LeaseRecord {
            seq,
            generation: 1,
            owner: "a".into(),
            ..LeaseRecord::default()
        }
    }

    fn failed() -> Result<Option<LeaseRecord>, LeaseError> {
        Err(LeaseError::Damaged {
            path: "p".into(),
            reason: "unreachable".into(),
        })
    }

    #[test]
    fn unreadable_time_is_not_silence() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut w = Watcher::new();
        w.observe(Ok(Some(record(7))), at(0)).expect("read");
        w.observe(Ok(Some(record(7))), at(1_000)).expect("read");
        assert_eq!(w.silent_for(), Duration::from_millis(1_000));
        // 20 s in which the store could not be read: unknown, not silent.
        for ms in (1_500..21_000).step_by(500) {
            assert!(w.observe(failed(), at(ms)).is_err());
            assert_eq!(w.silent_for(), Duration::from_millis(1_000));
        }
        // Back: the first successful read adds nothing (the time since the
        // last success was unknown), the following ones count again.
        w.observe(Ok(Some(record(7))), at(21_000)).expect("read");
        assert_eq!(w.silent_for(), Duration::from_millis(1_000));
        w.observe(Ok(Some(record(7))), at(23_500)).expect("read");
        assert_eq!(w.silent_for(), Duration::from_millis(3_500));
        // The last renewal seen stays the first read of that record.
        assert_eq!(w.seen_at(), at(0));
    }

    #[test]
    fn a_change_restarts_the_silence() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut w = Watcher::new();
        w.observe(Ok(None), at(0)).expect("read");
        w.observe(Ok(None), at(400)).expect("read");
        assert_eq!(w.silent_for(), Duration::from_millis(400));
        w.observe(Ok(Some(record(1))), at(500)).expect("read");
        assert_eq!(
            (
                w.silent_for(),
                w.seen_at(),
                w.newest.as_ref().map(|r| r.seq)
            ),
            (Duration::ZERO, at(500), Some(1))
        );
        assert!(w.observe(failed(), at(600)).is_err());
        // A renewal observed across the failure is a change.
        w.observe(Ok(Some(record(2))), at(900)).expect("read");
        w.observe(Ok(Some(record(2))), at(1_200)).expect("read");
        assert_eq!(w.silent_for(), Duration::from_millis(300));
        assert_eq!(w.seen_at(), at(900));
    }
}
