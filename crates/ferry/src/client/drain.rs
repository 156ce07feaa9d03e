//! `ferry stop --drain-check`: the reference's pre-stop checklist, then a
//! stop with savepoint. Four steps, each printed as it passes:
//!
//! 1. the source table's write counters stop moving (the writers stopped);
//! 2. a window completes that ends after the last source write;
//! 3. no split is in flight;
//! 4. the sink table's write counters stop moving.
//!
//! A source write seen during step 4 starts the checklist over. The
//! numbers come from `GET /ferry/jobs/:jobid/live`.

use super::{stop_at, Rest};
use crate::api::live::JobLive;
use crate::kudu_activity::TableCounters;
use anyhow::{bail, Result};
use std::time::{Duration, Instant};

/// Options of `ferry stop --drain-check`.
#[derive(Debug, Clone, Copy)]
pub struct DrainCheck {
    /// Give up after this long.
    pub timeout: Duration,
    /// A table is quiet when its write counters did not move for this long.
    pub quiet: Duration,
}

/// How often the live numbers are polled.
const TICK: Duration = Duration::from_millis(250);

/// The outcome of one pass over the four steps.
enum Pass {
    Drained,
    /// The source was written again after step 1.
    SourceWritten,
}

/// One drain check in progress.
struct Drain<'a> {
    rest: &'a Rest,
    job: &'a str,
    live_path: String,
    timeout: Duration,
    deadline: Instant,
    /// How long counters must stand still to count as "no writes".
    quiet_ms: u64,
    source: String,
    sink: String,
}

/// How long the cluster's counters have not moved, if known.
fn quiet_for(live: &JobLive, cluster: &str) -> Result<Option<u64>> {
    let Some(t) = live.kudu.table(cluster) else {
        bail!("the job reports no {cluster} table activity")
    };
    if let Some(e) = &t.error {
        bail!("cannot read the {cluster} tablet servers' metrics: {e}");
    }
    if t.polls < 2 {
        return Ok(None);
    }
    Ok(Some(live.now.saturating_sub(t.unchanged_since_ms)))
}

fn table_name(live: &JobLive, cluster: &str) -> String {
    live.kudu
        .table(cluster)
        .map_or_else(|| "?".to_string(), |t| t.table_name.clone())
}

fn describe_movement(before: &Option<TableCounters>, after: &Option<TableCounters>) -> String {
    let (Some(b), Some(a)) = (before, after) else {
        return "no counters yet".into();
    };
    let parts: Vec<String> = a
        .named()
        .iter()
        .zip(b.named())
        .filter_map(|((name, after), (_, before))| {
            let d = *after as i64 - before as i64;
            (d != 0).then(|| format!("rows_{name} {d:+}"))
        })
        .collect();
    if parts.is_empty() {
        "counters unchanged".into()
    } else {
        parts.join(", ")
    }
}

impl<'a> Drain<'a> {
    /// Checks the job can be drained and prints the plan.
    async fn start(
        rest: &'a Rest,
        job: &'a str,
        opts: &DrainCheck,
        started: Instant,
    ) -> Result<Drain<'a>> {
        let live_path = format!("/ferry/jobs/{job}/live");
        let first: JobLive = rest.get(&live_path).await?;
        if first.state != "RUNNING" {
            bail!("job {job} is not running ({})", first.state);
        }
        if !first.kudu.enabled {
            bail!("the drain check needs the tablet servers' metrics, but the job polls none (metrics.kudu.pollIntervalMillis=0)");
        }
        let quiet_ms = (opts.quiet.as_millis() as u64).max(2 * first.kudu.poll_interval_ms + 500);
        println!(
            "Drain check for job {job} (timeout {}s; a table is quiet when its write counters do not move for {:.1}s).",
            opts.timeout.as_secs(),
            quiet_ms as f64 / 1000.0
        );
        Ok(Drain {
            rest,
            job,
            live_path,
            timeout: opts.timeout,
            deadline: started + opts.timeout,
            quiet_ms,
            source: table_name(&first, "source"),
            sink: table_name(&first, "sink"),
        })
    }

    async fn fetch(&self) -> Result<JobLive> {
        self.rest.get(&self.live_path).await
    }

    fn timed_out(&self) -> bool {
        Instant::now() > self.deadline
    }

    /// Step 1: waits until the source's counters stand still; returns the
    /// numbers at that moment.
    async fn source_quiet(&self) -> Result<JobLive> {
        let source = &self.source;
        println!("[1/4] waiting until the source table '{source}' has no writes ...");
        // The counters at the start of the last ten seconds, for the
        // timeout message.
        let mut window_start = (Instant::now(), self.fetch().await?.kudu.counters("source"));
        loop {
            let l = self.fetch().await?;
            if let Some(q) = quiet_for(&l, "source")? {
                if q >= self.quiet_ms {
                    println!(
                        "      source quiet: write counters unchanged for {:.1}s",
                        q as f64 / 1000.0
                    );
                    return Ok(l);
                }
            }
            if self.timed_out() {
                bail!(
                    "drain check timed out after {}s: the source table '{source}' is still being written ({} in the last {:.0}s). \
                     Stop the writers first, or stop without --drain-check.",
                    self.timeout.as_secs(),
                    describe_movement(&window_start.1, &l.kudu.counters("source")),
                    window_start.0.elapsed().as_secs_f64()
                );
            }
            if window_start.0.elapsed() > Duration::from_secs(10) {
                window_start = (Instant::now(), l.kudu.counters("source"));
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// Step 2: waits for a window ending at or after `quiet_at`.
    async fn window_after(&self, quiet_at: u64, windows_before: u64) -> Result<()> {
        println!("[2/4] waiting for a window that ends after the last source write ...");
        loop {
            let l = self.fetch().await?;
            let end = l.last_end_timestamp;
            if end >= quiet_at && l.totals.windows_completed > windows_before {
                println!(
                    "      window completed (lastEndTimestamp {end}, lag {:.1}s)",
                    l.now.saturating_sub(end) as f64 / 1000.0
                );
                return Ok(());
            }
            // A restart redoes the open window: keep waiting for it.
            if matches!(l.state.as_str(), "FINISHED" | "CANCELED" | "FAILED") {
                bail!(
                    "job {} ended ({}) during the drain check",
                    self.job,
                    l.state
                );
            }
            if self.timed_out() {
                bail!(
                    "drain check timed out after {}s waiting for a window to complete (lastEndTimestamp {end}, needed >= {quiet_at})",
                    self.timeout.as_secs()
                );
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// Step 3: waits until no split is pending, unassigned or being removed.
    async fn splits_idle(&self) -> Result<()> {
        println!("[3/4] waiting until split counts are 0 ...");
        loop {
            let s = self.fetch().await?.splits;
            if s.all_zero() {
                println!("      pendingCount 0, unassignedCount 0, pendingRemovalCount 0");
                return Ok(());
            }
            if self.timed_out() {
                bail!(
                    "drain check timed out after {}s: splits still in flight (pending {}, unassigned {}, pendingRemoval {})",
                    self.timeout.as_secs(),
                    s.pending,
                    s.unassigned,
                    s.pending_removal
                );
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// Step 4: waits until the sink's counters stand still, unless the
    /// source moves away from `source_counters` first.
    async fn sink_quiet(&self, source_counters: &Option<TableCounters>) -> Result<Pass> {
        println!(
            "[4/4] waiting until the sink table '{}' has no writes ...",
            self.sink
        );
        loop {
            let l = self.fetch().await?;
            if &l.kudu.counters("source") != source_counters {
                return Ok(Pass::SourceWritten);
            }
            if let Some(q) = quiet_for(&l, "sink")? {
                if q >= self.quiet_ms {
                    println!(
                        "      sink quiet: write counters unchanged for {:.1}s",
                        q as f64 / 1000.0
                    );
                    return Ok(Pass::Drained);
                }
            }
            if self.timed_out() {
                bail!(
                    "drain check timed out after {}s: the sink table '{}' is still being written",
                    self.timeout.as_secs(),
                    self.sink
                );
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// Steps 1 to 4, then a last look at the source.
    async fn pass(&self) -> Result<Pass> {
        let quiet = self.source_quiet().await?;
        let source_counters = quiet.kudu.counters("source");
        self.window_after(quiet.now, quiet.totals.windows_completed)
            .await?;
        self.splits_idle().await?;
        if let Pass::SourceWritten = self.sink_quiet(&source_counters).await? {
            return Ok(Pass::SourceWritten);
        }
        if self.fetch().await?.kudu.counters("source") != source_counters {
            return Ok(Pass::SourceWritten);
        }
        Ok(Pass::Drained)
    }
}

/// `ferry stop --drain-check`: the checklist, then a stop with savepoint.
pub async fn drain_check(
    rest: &Rest,
    job: &str,
    dir: Option<&str>,
    opts: DrainCheck,
) -> Result<()> {
    drain_then_stop(rest, job, dir, opts, false)
        .await
        .map(|_| ())
}

/// [`drain_check`], returning the savepoint's location (`ferry cutover`).
/// `finish_window`: stop with `drain` too, so a window opened after the
/// checklist passed finishes before the savepoint (which then holds none).
pub async fn drain_then_stop(
    rest: &Rest,
    job: &str,
    dir: Option<&str>,
    opts: DrainCheck,
    finish_window: bool,
) -> Result<String> {
    let started = Instant::now();
    let drain = Drain::start(rest, job, &opts, started).await?;
    while let Pass::SourceWritten = drain.pass().await? {
        println!("      the source table was written again; starting over");
    }
    println!(
        "Drain check passed in {:.1}s; stopping with a savepoint.",
        started.elapsed().as_secs_f64()
    );
    stop_at(rest, job, dir, finish_window).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn movement_names_the_counters_that_moved() {
        let before = TableCounters {
            rows_inserted: 5,
            rows_upserted: 10,
            ..Default::default()
        };
        let after = TableCounters {
            rows_inserted: 5,
            rows_upserted: 13,
            rows_deleted: 1,
            ..Default::default()
        };
        assert_eq!(
            describe_movement(&Some(before), &Some(after)),
            "rows_upserted +3, rows_deleted +1"
        );
        assert_eq!(
            describe_movement(&Some(before), &Some(before)),
            "counters unchanged"
        );
        assert_eq!(describe_movement(&None, &Some(after)), "no counters yet");
    }
}
