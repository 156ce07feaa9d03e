//! The drill's report: every section, whether the setup is healthy, and
//! which checks failed; JSON (camelCase, the shape docs/dr.md describes)
//! and a human rendering.

use super::dr_store::DrStoreSection;
use super::lease::StandbySection;
use super::rpo::RpoSection;
use super::steps::StepsSection;
use super::verify_cut::VerifySection;
use crate::cli::failover::report::utc_ms;
use ferry_engine::config::JobConfig;
use ferry_engine::time::now_ms;
use std::fmt;
use std::time::Duration;

/// Version of the report's JSON shape.
pub const DRILL_REPORT_VERSION: u32 = 1;

/// Milliseconds of `d`, saturated.
pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A section's headline mark.
pub(super) fn mark(ok: bool) -> &'static str {
    if ok {
        "OK"
    } else {
        "FAILED"
    }
}

/// What `ferry drill` found.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrillReport {
    /// [`DRILL_REPORT_VERSION`].
    pub version: u32,
    /// This machine's clock when the report was made (ms since the epoch).
    pub now_ms: u64,
    /// The same in UTC.
    pub now_utc: String,
    /// The job's name (`job.name`).
    pub job: String,
    /// Every check passed.
    pub healthy: bool,
    /// The DR store's newest state is too old.
    pub stale: bool,
    /// The sections whose check failed (`rpo`, `verify`, `drStore`,
    /// `standby`, `failoverSteps`).
    pub failed: Vec<String>,
    /// RPO now, per table.
    pub rpo: RpoSection,
    /// Verify at a consistent cut.
    pub verify: VerifySection,
    /// The DR state store's freshness and the dry-run restore.
    pub dr_store: DrStoreSection,
    /// The lease as observed.
    pub standby: StandbySection,
    /// The failover steps, measured.
    pub failover_steps: StepsSection,
}

impl DrillReport {
    /// Puts the sections together and decides `healthy`.
    pub(super) fn new(
        cfg: &JobConfig,
        rpo: RpoSection,
        verify: VerifySection,
        dr_store: DrStoreSection,
        standby: StandbySection,
        failover_steps: StepsSection,
    ) -> Self {
        let failed: Vec<String> = [
            ("rpo", rpo.ok),
            ("verify", verify.ok),
            ("drStore", dr_store.ok),
            ("standby", standby.ok),
            ("failoverSteps", failover_steps.ok),
        ]
        .into_iter()
        .filter(|(_, ok)| !ok)
        .map(|(name, _)| name.to_string())
        .collect();
        let now = now_ms();
        DrillReport {
            version: DRILL_REPORT_VERSION,
            now_ms: now,
            now_utc: utc_ms(now),
            job: cfg.job_name.clone(),
            healthy: failed.is_empty(),
            stale: dr_store.stale,
            failed,
            rpo,
            verify,
            dr_store,
            standby,
            failover_steps,
        }
    }
}

impl fmt::Display for DrillReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "DR drill of job {} at {}", self.job, self.now_utc)?;
        write!(f, "{}", self.rpo)?;
        write!(f, "{}", self.verify)?;
        write!(f, "{}", self.dr_store)?;
        write!(f, "{}", self.standby)?;
        write!(f, "{}", self.failover_steps)?;
        if self.stale {
            writeln!(
                f,
                "DR STORE STALE: {}",
                self.dr_store.stale_reason.as_deref().unwrap_or("")
            )?;
        }
        if self.healthy {
            writeln!(f, "HEALTHY: every check passed")
        } else {
            writeln!(f, "NOT HEALTHY: failed: {}", self.failed.join(", "))
        }
    }
}
