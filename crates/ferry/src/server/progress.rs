//! Snapshot progress for a foreground `ferry run`: on a terminal, one
//! status line redrawn twice a second (rows copied, rows/s, ETA from the
//! master's live row count); otherwise a plain log line every ten seconds.
//! Log records clear the status line first (see [`LogWriter`]), so the two
//! never interleave. `ferry verify` shows its ranges and rows the same way.

use crate::server::registry::JobEntry;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Whether a status line is on screen.
static LINE_SHOWN: AtomicBool = AtomicBool::new(false);

const CLEAR_LINE: &str = "\r\x1b[2K";

/// A `tracing` writer for stderr that first clears the progress line.
pub struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = std::io::Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        let mut err = std::io::stderr();
        if LINE_SHOWN.swap(false, Ordering::Relaxed) {
            let _ = err.write_all(CLEAR_LINE.as_bytes());
        }
        err
    }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn clock(secs: u64) -> String {
    if secs >= 3600 {
        format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
    } else {
        format!("{}:{:02}", secs / 60, secs % 60)
    }
}

/// The progress text for `copied` rows so far.
pub fn describe(table: &str, copied: u64, rate: f64, estimate: Option<u64>) -> String {
    let mut s = format!("snapshot of '{table}': {} rows copied", thousands(copied));
    if let Some(total) = estimate.filter(|t| *t > 0) {
        let pct = (copied as f64 / total as f64 * 100.0).min(100.0);
        s = format!(
            "snapshot of '{table}': {} / ~{} rows ({pct:.1}%)",
            thousands(copied),
            thousands(total)
        );
        if rate > 0.0 {
            let left = total.saturating_sub(copied) as f64 / rate;
            s.push_str(&format!(
                ", {} rows/s, ETA {}",
                thousands(rate as u64),
                clock(left as u64)
            ));
            return s;
        }
    }
    if rate > 0.0 {
        s.push_str(&format!(", {} rows/s", thousands(rate as u64)));
    }
    s
}

/// Longest status line while restarting (it must not wrap, or clearing it
/// leaves the wrapped part behind).
const RESTART_LINE_CHARS: usize = 100;

/// The status line while the job restarts during the snapshot.
pub fn restarting_line(table: &str, restarts: u64, cause: &str) -> String {
    let mut s = format!("snapshot of '{table}': restarting (restart {restarts}): {cause}");
    if s.chars().count() > RESTART_LINE_CHARS {
        s = s.chars().take(RESTART_LINE_CHARS - 1).collect();
        s.push('…');
    }
    s
}

/// Shows snapshot progress until the snapshot completes or `stop`.
pub fn spawn(job: Arc<JobEntry>, interactive: bool, stop: CancellationToken) {
    tokio::spawn(async move {
        let started = Instant::now();
        let every = if interactive {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(10)
        };
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        let table = job.config.table_name.clone();
        let mut shown = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.cancelled() => break,
            }
            let view = job.view();
            if view.is_terminal() {
                break;
            }
            if view.is_restarting() {
                // The engine logs each restart; on a terminal the status
                // line says it too instead of standing still.
                if interactive {
                    let cause = view.newest_failure().map_or("", |f| f.message.as_str());
                    let text = restarting_line(&table, view.num_restarts(), cause);
                    let mut err = std::io::stderr();
                    let _ = write!(err, "{CLEAR_LINE}{text}");
                    let _ = err.flush();
                    LINE_SHOWN.store(true, Ordering::Relaxed);
                }
                continue;
            }
            let m = &view.metrics;
            if m.last_end_timestamp_ms > 0 {
                // The snapshot (or the restored position) is complete.
                if shown {
                    let secs = started.elapsed().as_secs_f64();
                    let line = format!(
                        "snapshot of '{table}' complete: {} rows in {:.1}s; now applying changes every {}s",
                        thousands(m.rows_upserted),
                        secs,
                        job.config.discovery_interval.as_secs()
                    );
                    if interactive {
                        eprintln!("{CLEAR_LINE}{line}");
                        LINE_SHOWN.store(false, Ordering::Relaxed);
                    } else {
                        tracing::info!("{line}");
                    }
                }
                break;
            }
            let rate = job.sampler.rates(5_000).records_in_per_second;
            let text = describe(&table, m.rows_upserted, rate, job.source_rows_estimate);
            if interactive {
                let mut err = std::io::stderr();
                let _ = write!(err, "{CLEAR_LINE}{text}");
                let _ = err.flush();
                LINE_SHOWN.store(true, Ordering::Relaxed);
            } else {
                tracing::info!("{text}");
            }
            shown = true;
        }
        if interactive && LINE_SHOWN.swap(false, Ordering::Relaxed) {
            eprint!("{CLEAR_LINE}");
        }
    });
}

/// The status line of `ferry verify`.
pub fn verify_line(p: &ferry_verify::Progress) -> String {
    format!(
        "verify: {} / {} ranges, {} rows compared, {} differences",
        thousands(p.ranges_done),
        thousands(p.ranges_total),
        thousands(p.rows_compared),
        thousands(p.differences)
    )
}

/// Shows `ferry verify`'s progress on the terminal until aborted.
pub fn spawn_verify(
    mut rx: tokio::sync::watch::Receiver<ferry_verify::Progress>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tick.tick().await;
            let text = verify_line(&rx.borrow_and_update());
            let mut err = std::io::stderr();
            let _ = write!(err, "{CLEAR_LINE}{text}");
            let _ = err.flush();
            LINE_SHOWN.store(true, Ordering::Relaxed);
        }
    })
}

/// Clears the status line, if one is shown.
pub fn clear_line() {
    if LINE_SHOWN.swap(false, Ordering::Relaxed) {
        eprint!("{CLEAR_LINE}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_text() {
        assert_eq!(
            describe("t", 250_000, 50_000.0, Some(1_000_000)),
            "snapshot of 't': 250,000 / ~1,000,000 rows (25.0%), 50,000 rows/s, ETA 0:15"
        );
        assert_eq!(
            describe("t", 12, 0.0, None),
            "snapshot of 't': 12 rows copied"
        );
        assert_eq!(clock(3725), "1:02:05");
        assert_eq!(
            restarting_line("t", 2, "writing sink table 't_copy': timed out"),
            "snapshot of 't': restarting (restart 2): writing sink table 't_copy': timed out"
        );
        let long = restarting_line("t", 1, &"x".repeat(500));
        assert_eq!(long.chars().count(), RESTART_LINE_CHARS);
        assert!(long.ends_with('…'));
    }
}
