//! `ferry failover --report`: what an unplanned failover would lose, as a
//! time span. When the source cluster is gone, the sink holds the source as
//! of the end of the last completed window; every write to the source after
//! that is not in the sink. The newest valid state in the stores says which
//! window that is (the same search as a failover), and the sink position on
//! the sink cluster — if the sink answers — may know a later one (it is
//! written when a window opens, so its `last_end` is a window the sink has
//! completed). The data RPO is now − the later of the two ends (read on
//! the wall clock as the source's clock says: for Kudu the hybrid time's
//! physical part; against this machine's clock, since the source cannot be
//! asked). Nothing is started.
//!
//! Also used by `ferry cutover` when the source is unreachable.

use super::{DrArgs, Outcome};
use anyhow::Result;
use ferry_engine::sink_position::SinkPosition;
use ferry_engine::time::now_ms;
use ferry_engine::{SinkTime, SourceClock, SourceTime};
use ferry_kudu::position::PositionTable;
use std::fmt;
use std::time::Duration;

/// How long the sink cluster may take to answer the position lookup.
const SINK_TIMEOUT: Duration = Duration::from_secs(10);

/// The report.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RpoReport {
    /// This machine's clock when the report was made (ms since the epoch).
    pub now_ms: u64,
    /// The newest valid state's directory.
    pub state: String,
    /// Its job id.
    pub job_id: String,
    /// Its last completed window end (source time, raw).
    pub state_last_end: Option<SourceTime>,
    /// The sink position, if the sink answered and has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<PositionView>,
    /// Why the sink position is not known (unreachable, no record, no
    /// position table configured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position_unknown: Option<String>,
    /// The end of the last window the sink surely holds: the later of the
    /// state's and the position's `last_end` (source time, raw).
    pub last_end: Option<SourceTime>,
    /// `last_end` in UTC.
    pub last_end_utc: Option<String>,
    /// Data lost by failing over now: `now_ms` − `last_end`'s physical
    /// time; `None` before the first snapshot completed (then the sink is
    /// not a copy at all).
    pub rpo_ms: Option<u64>,
    /// How the source's times read as wall-clock time.
    #[serde(skip)]
    pub clock: SourceClock,
}

/// The sink position as the report shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PositionView {
    /// The sink table.
    pub table: String,
    /// The job that wrote the record.
    pub job_id: String,
    /// The end of the last completed window the sink holds.
    pub last_end: Option<SourceTime>,
    /// The same as a UTC time.
    pub last_end_utc: Option<String>,
    /// A sink hybrid time at which the sink equals the source at
    /// `last_end` (what `ferry verify` compares with).
    pub last_end_sink_time: Option<SinkTime>,
    /// The end of the window the record was written for.
    pub window_end: SourceTime,
}

impl PositionView {
    fn new(table: &str, p: &SinkPosition, clock: SourceClock) -> Self {
        PositionView {
            table: table.to_owned(),
            job_id: p.job_id.clone(),
            last_end: p.last_end,
            last_end_utc: p.last_end.map(|t| utc(clock, t)),
            last_end_sink_time: p.last_end_sink_time,
            window_end: p.window.end_timestamp,
        }
    }
}

/// A source time, read on `clock`, as an RFC 3339 UTC time, milliseconds.
pub fn utc(clock: SourceClock, t: SourceTime) -> String {
    utc_ms(clock.epoch_millis(t))
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    )
}

impl fmt::Display for RpoReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ht = |t: SourceTime| format!("{t} ({})", utc(self.clock, t));
        writeln!(
            f,
            "Newest valid state: {} (job {})",
            self.state, self.job_id
        )?;
        match self.state_last_end {
            Some(t) => writeln!(f, "  last completed window end: {}", ht(t))?,
            None => writeln!(f, "  no window completed (the snapshot was in progress)")?,
        }
        match (&self.position, &self.position_unknown) {
            (Some(p), _) => {
                write!(
                    f,
                    "Sink position (table {}, job {}): last end ",
                    p.table, p.job_id
                )?;
                match p.last_end {
                    Some(t) => write!(f, "{}", ht(t))?,
                    None => write!(f, "none (snapshot in progress)")?,
                }
                if let Some(s) = p.last_end_sink_time {
                    write!(f, ", sink time {s}")?;
                }
                writeln!(f)?;
            }
            (None, Some(why)) => writeln!(f, "Sink position: unknown ({why})")?,
            (None, None) => {}
        }
        match (self.rpo_ms, &self.last_end_utc) {
            (Some(rpo), Some(at)) => writeln!(
                f,
                "Data RPO of a failover now: {rpo} ms — writes to the source after {at} are not in the sink"
            ),
            _ => writeln!(
                f,
                "Data RPO: unknown — no window has completed, the sink is not a copy of the source yet"
            ),
        }
    }
}

/// `ferry failover --report`: prints the report; `NothingFound` when no
/// valid state exists.
pub async fn report(args: &DrArgs) -> Result<Outcome> {
    let search = crate::wiring::state_search(&args.run.process, &args.from, args.job)
        .find_newest()
        .await?;
    for s in &search.skipped {
        tracing::warn!(path = %s.location, reason = %s.reason, "skipped a damaged state");
    }
    let Some(found) = search.newest else {
        if args.json {
            crate::say!("{}", serde_json::json!({ "found": null }));
        } else {
            crate::say!("No complete, valid savepoint or checkpoint found.");
        }
        return Ok(Outcome::NothingFound);
    };
    let cfg = &args.run.config;
    let clock = crate::wiring::source_clock(cfg);
    let (position, position_unknown) = match &cfg.position_table {
        None => (None, Some("job.positionTable is empty".to_string())),
        Some(table) => match sink_position(&args.run, table).await {
            Ok(Some(p)) => (Some(PositionView::new(table, &p, clock)), None),
            Ok(None) => (None, Some(format!("no record in table '{table}'"))),
            Err(why) => (None, Some(why)),
        },
    };
    let state_last_end = found.state.last_end_timestamp;
    let position_end = position.as_ref().and_then(|p| p.last_end);
    let last_end = state_last_end.max(position_end);
    let now = now_ms();
    let report = RpoReport {
        now_ms: now,
        state: found.location.to_uri(),
        job_id: found.state.job_id.to_string(),
        state_last_end,
        position,
        position_unknown,
        last_end,
        last_end_utc: last_end.map(|t| utc(clock, t)),
        rpo_ms: last_end.map(|t| now.saturating_sub(clock.epoch_millis(t))),
        clock,
    };
    if args.json {
        crate::say!(
            "{}",
            serde_json::to_string(&report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
        );
    } else {
        crate::say!("{}", report.to_string().trim_end());
    }
    Ok(Outcome::Reported)
}

/// The sink position of the job's sink table, within [`SINK_TIMEOUT`];
/// the error says why not, for the report.
async fn sink_position(
    run: &crate::run_args::RunArgs,
    table: &str,
) -> Result<Option<SinkPosition>, String> {
    let (_, sink) = crate::wiring::clients(&run.config).map_err(|e| format!("{e:#}"))?;
    let sink_table = run.config.sink_table_name();
    let lookup = PositionTable::lookup(&sink, table, &sink_table);
    match tokio::time::timeout(SINK_TIMEOUT, lookup).await {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "the sink cluster did not answer within {} s",
            SINK_TIMEOUT.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_engine::connector::Source;
    use ferry_kudu::KuduSource;
    use kudu_client::HybridTime;

    #[test]
    fn utc_times() {
        assert_eq!(utc_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc_ms(1_796_325_294_553), "2026-12-03T19:14:54.553Z");
        let ht = HybridTime::from_micros(1_796_325_294_553_000).raw() | 7;
        let ht = SourceTime::from_raw(ht);
        assert_eq!(utc(KuduSource::CLOCK, ht), "2026-12-03T19:14:54.553Z");
        // A Kafka source's times are epoch milliseconds already.
        let ms = SourceTime::from_raw(1_796_325_294_553);
        assert_eq!(
            utc(SourceClock::EPOCH_MILLIS, ms),
            "2026-12-03T19:14:54.553Z"
        );
    }
}
