//! The drill's standby section: the job's lease as a standby sees it —
//! the holder's generation and owner, when it last wrote, and whether it
//! is being renewed (read, then read again until a renewal shows, for at
//! most two renew intervals). A lease not renewed means no active holds
//! the job: a standby would take over within the lease duration.
//!
//! Whether a standby is running is not observable: `ferry standby` only
//! reads the lease until it claims it, and writes nothing a drill could
//! see. The report says so rather than guess.

use super::report::{mark, ms};
use super::Ctx;
use crate::cli::failover::report::utc_ms;
use ferry_engine::config::HaKind;
use ferry_engine::lease::{Lease, LeaseRecord};
use ferry_engine::time::now_ms;
use std::fmt;
use std::time::{Duration, Instant};

/// What the report says about a running standby.
pub const STANDBY_NOT_OBSERVABLE: &str = "not observable: a standby only reads the lease until it claims it and leaves no trace a drill can see; check its process (its log shows 'waiting for the lease')";

/// The lease record as the report shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseView {
    /// The holder's generation (the fencing token).
    pub generation: u64,
    /// Who wrote it (host/pid).
    pub owner: String,
    /// Its position in the lease sequence.
    pub seq: u64,
    /// When it was written (the holder's clock, ms since the epoch).
    pub written_at_ms: u64,
    /// This machine's clock minus `written_at_ms` when first read.
    pub age_ms: u64,
}

impl LeaseView {
    fn new(r: &LeaseRecord, now: u64) -> Self {
        LeaseView {
            generation: r.generation,
            owner: r.owner.clone(),
            seq: r.seq,
            written_at_ms: r.at_ms,
            age_ms: now.saturating_sub(r.at_ms),
        }
    }
}

/// The standby section.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StandbySection {
    /// The lease is held and renewed (true without HA: nothing to check).
    pub ok: bool,
    /// `high-availability.type lease`.
    pub ha: bool,
    /// Where the lease lives.
    pub location: Option<String>,
    /// `high-availability.lease-duration` in ms.
    pub lease_duration_ms: Option<u64>,
    /// `high-availability.renew-interval` in ms.
    pub renew_interval_ms: Option<u64>,
    /// The newest lease record at the first read.
    pub holder: Option<LeaseView>,
    /// Whether a renewal (a newer record) was seen.
    pub renewed: Option<bool>,
    /// How long the lease was watched.
    pub observed_for_ms: Option<u64>,
    /// The newest record at the last read, when it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<LeaseView>,
    /// Whether a standby is connected.
    pub standby: String,
    /// What the result means.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Why the lease could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The section and the time of one lease read (a failover's first step).
pub(super) struct Measured {
    pub section: StandbySection,
    pub lease_read: Option<Duration>,
    pub lease_duration: Option<Duration>,
}

/// Reads the lease twice, a renewal apart.
pub(super) async fn section(ctx: &Ctx<'_>) -> Measured {
    let cfg = ctx.cfg();
    let mut s = StandbySection {
        ok: true,
        ha: cfg.ha.kind == HaKind::Lease,
        location: None,
        lease_duration_ms: None,
        renew_interval_ms: None,
        holder: None,
        renewed: None,
        observed_for_ms: None,
        after: None,
        standby: STANDBY_NOT_OBSERVABLE.into(),
        note: None,
        error: None,
    };
    if !s.ha {
        s.note = Some("high-availability.type is none: no lease, no automatic takeover; a takeover is `ferry failover` by hand".into());
        return Measured {
            section: s,
            lease_read: None,
            lease_duration: None,
        };
    }
    s.lease_duration_ms = Some(ms(cfg.ha.lease_duration));
    s.renew_interval_ms = Some(ms(cfg.ha.renew_interval));
    let lease_read = observe(ctx, &mut s).await;
    Measured {
        section: s,
        lease_read,
        lease_duration: Some(cfg.ha.lease_duration),
    }
}

/// Fills `s` with what the lease shows; the time of the first read.
async fn observe(ctx: &Ctx<'_>, s: &mut StandbySection) -> Option<Duration> {
    let ha = &ctx.cfg().ha;
    s.ok = false;
    let standby =
        match crate::server::lease::standby_for(&ctx.args.run, &ctx.args.from, ctx.args.job) {
            Ok(standby) => standby,
            Err(e) => {
                s.error = Some(crate::error_line(&e));
                return None;
            }
        };
    let lease = standby.lease();
    s.location = Some(lease.location());
    let began = Instant::now();
    let first = lease.newest().await;
    let lease_read = Some(began.elapsed());
    let first = match first {
        Ok(Some(first)) => first,
        Ok(None) => {
            s.note = Some("nobody ever held the lease: the job does not run with high availability, or under another high-availability.cluster-id".into());
            return lease_read;
        }
        Err(e) => {
            s.error = Some(ferry_engine::error::display_chain(&e));
            return lease_read;
        }
    };
    s.holder = Some(LeaseView::new(&first, now_ms()));
    let watched = watch(lease, &first, ha.renew_interval).await;
    s.observed_for_ms = Some(ms(watched.over));
    let renewed = watched.last.seq > first.seq;
    let last = watched.last;
    s.error = watched.error;
    s.renewed = Some(renewed);
    if renewed {
        s.after = Some(LeaseView::new(&last, now_ms()));
        if last.generation != first.generation {
            s.note = Some(format!(
                "generation {} took over from {} while watching",
                last.generation, first.generation
            ));
        }
    } else {
        s.note = Some(format!(
            "not renewed for {} ms (renew interval {} ms): no active instance holds the lease; a standby takes over once it has been silent for {} ms",
            ms(watched.over),
            ms(ha.renew_interval),
            ms(ha.lease_duration)
        ));
    }
    s.ok = renewed && s.error.is_none();
    lease_read
}

/// What watching the lease showed.
struct Watched {
    /// The newest record at the last read.
    last: LeaseRecord,
    /// How long it was watched.
    over: Duration,
    /// A read that failed.
    error: Option<String>,
}

/// Reads the lease until a record newer than `first` shows, for at most
/// two renew intervals: a holder renews every interval, so two without a
/// renewal mean it stopped.
async fn watch(lease: &Lease, first: &LeaseRecord, renew: Duration) -> Watched {
    let poll = (renew / 4).max(Duration::from_millis(50));
    let began = Instant::now();
    let mut last = first.clone();
    let mut error = None;
    while began.elapsed() < renew * 2 && last.seq == first.seq {
        tokio::time::sleep(poll).await;
        match lease.newest().await {
            Ok(Some(r)) => last = r,
            Ok(None) => break,
            Err(e) => {
                error = Some(ferry_engine::error::display_chain(&e));
                break;
            }
        }
    }
    Watched {
        last,
        over: began.elapsed(),
        error,
    }
}

impl fmt::Display for StandbySection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[{}] Standby readiness", mark(self.ok))?;
        if let Some(at) = &self.location {
            writeln!(f, "  lease at {at}")?;
        }
        if let Some(e) = &self.error {
            writeln!(f, "  cannot read the lease: {e}")?;
        }
        if let Some(h) = &self.holder {
            writeln!(
                f,
                "  holder: generation {} ({}), last written {} ({} ms ago)",
                h.generation,
                h.owner,
                utc_ms(h.written_at_ms),
                h.age_ms
            )?;
        }
        if let (Some(renewed), Some(over)) = (self.renewed, self.observed_for_ms) {
            writeln!(
                f,
                "  renewed while watching ({over} ms): {}",
                if renewed { "yes" } else { "NO" }
            )?;
        }
        if let Some(n) = &self.note {
            writeln!(f, "  {n}")?;
        }
        writeln!(f, "  standby connected: {}", self.standby)
    }
}
