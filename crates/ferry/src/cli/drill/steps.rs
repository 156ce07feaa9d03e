//! The drill's failover steps: each step a takeover goes through, timed
//! for real here without acting — one lease read (the claim is one more
//! write), the search of the DR store (listing, then the `_metadata` of
//! the states that may be the newest read and checked), loading the newest state again, new connections to both
//! clusters with every table opened, the sink positions read — plus the
//! lease wait (a standby claims after the lease duration of silence).
//! Their sum is the estimated RTO up to the restored job's first window;
//! that window's own time depends on the backlog since the state and
//! comes on top.

use super::report::ms;
use super::rpo::CLUSTER_TIMEOUT;
use super::{dr_store, lease, Ctx};
use ferry_kudu::position::PositionTable;
use std::fmt;
use std::time::{Duration, Instant};

/// A step's time, or why it could not be measured.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Its name (`leaseRead`, `stateSearch`, `stateLoad`, `connect`,
    /// `positions`, `leaseWait`).
    pub step: String,
    /// How long it took (`leaseWait`: the lease duration).
    pub ms: Option<u64>,
    /// Why there is no time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The failover steps section.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepsSection {
    /// Every step measured.
    pub ok: bool,
    /// In the order a takeover runs them.
    pub steps: Vec<Step>,
    /// The sum of the steps: the RTO up to the first window.
    pub estimated_rto_ms: u64,
}

/// The connect and positions steps, measured on fresh clients.
#[derive(Debug, Clone)]
pub(super) struct Connected {
    connect: Result<Duration, String>,
    positions: Result<Duration, String>,
}

/// New clients of both clusters, every table opened; then the positions.
pub(super) async fn connect(ctx: &Ctx<'_>) -> Connected {
    let began = Instant::now();
    let opened = async {
        let (source, sink) =
            crate::wiring::clients(ctx.cfg()).map_err(|e| crate::error_line(&e))?;
        for pair in &ctx.tables {
            source
                .open_table(&pair.source)
                .await
                .map_err(|e| format!("source table '{}': {e}", pair.source))?;
            sink.open_table(&pair.sink)
                .await
                .map_err(|e| format!("sink table '{}': {e}", pair.sink))?;
        }
        Ok::<_, String>(sink)
    };
    let sink = match tokio::time::timeout(CLUSTER_TIMEOUT, opened).await {
        Ok(Ok(sink)) => sink,
        Ok(Err(e)) => {
            return Connected {
                connect: Err(e),
                positions: Err("not connected".into()),
            }
        }
        Err(_) => {
            let e = format!("no answer within {} s", CLUSTER_TIMEOUT.as_secs());
            return Connected {
                connect: Err(e),
                positions: Err("not connected".into()),
            };
        }
    };
    let connect = Ok(began.elapsed());
    let Some(position_table) = &ctx.cfg().position_table else {
        return Connected {
            connect,
            positions: Err("job.positionTable is off".into()),
        };
    };
    let began = Instant::now();
    let read = async {
        for pair in &ctx.tables {
            PositionTable::lookup(&sink, position_table, &pair.sink)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    };
    let positions = match tokio::time::timeout(CLUSTER_TIMEOUT, read).await {
        Ok(Ok(())) => Ok(began.elapsed()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no answer within {} s", CLUSTER_TIMEOUT.as_secs())),
    };
    Connected { connect, positions }
}

fn step(name: &str, time: Result<Duration, String>) -> Step {
    match time {
        Ok(d) => Step {
            step: name.into(),
            ms: Some(ms(d)),
            note: None,
        },
        Err(note) => Step {
            step: name.into(),
            ms: None,
            note: Some(note),
        },
    }
}

/// Puts the measured steps together.
pub(super) fn section(
    connected: Connected,
    dr: &dr_store::Timing,
    standby: &lease::Measured,
) -> StepsSection {
    let no_ha = || "high-availability.type is none (no lease)".to_string();
    let lease_read = standby.lease_read.ok_or_else(no_ha);
    let lease_wait = standby.lease_duration.ok_or_else(no_ha);
    let steps = vec![
        step("leaseWait", lease_wait),
        step("leaseRead", lease_read),
        step(
            "stateSearch",
            dr.search
                .ok_or_else(|| "the DR store was not searched".to_string()),
        ),
        step(
            "stateLoad",
            dr.load.ok_or_else(|| "no valid state to load".to_string()),
        ),
        step("connect", connected.connect),
        step("positions", connected.positions),
    ];
    // Without a lease the lease steps do not exist: not a failure.
    let measured = |s: &Step| {
        s.ms.is_some() || (s.step.starts_with("lease") && standby.lease_duration.is_none())
    };
    StepsSection {
        ok: steps.iter().all(measured),
        estimated_rto_ms: steps.iter().filter_map(|s| s.ms).sum(),
        steps,
    }
}

impl fmt::Display for StepsSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "[{}] Failover steps, measured: estimated RTO {} ms (+ the first window's backlog)",
            super::report::mark(self.ok),
            self.estimated_rto_ms
        )?;
        for s in &self.steps {
            match (s.ms, &s.note) {
                (Some(ms), _) => writeln!(f, "  {}: {ms} ms", s.step)?,
                (None, Some(n)) => writeln!(f, "  {}: not measured — {n}", s.step)?,
                (None, None) => writeln!(f, "  {}: not measured", s.step)?,
            }
        }
        Ok(())
    }
}
