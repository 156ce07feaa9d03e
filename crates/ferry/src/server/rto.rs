//! [`Rto`]: the timings of a takeover (lease, find, verify, connect, first
//! window completed), printed once the job's first window completes.

use crate::server::registry::JobEntry;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Timings of a takeover, printed when the first window completes.
/// [`Rto::default`] records but prints nothing (a plain `ferry run`).
#[derive(Debug, Clone, Default)]
pub struct Rto {
    /// Steps before the job started, in order, with their durations.
    pub steps: Vec<(&'static str, Duration)>,
    print: bool,
    /// What took over (`shard 3`), printed before the breakdown.
    label: Option<String>,
}

impl Rto {
    /// A breakdown that is printed.
    pub fn printed() -> Self {
        Rto {
            steps: Vec::new(),
            print: true,
            label: None,
        }
    }

    /// A breakdown that is printed, for what `label` names (`shard 3`).
    pub fn printed_for(label: String) -> Self {
        Rto {
            label: Some(label),
            ..Self::printed()
        }
    }

    /// Adds a step.
    pub fn step(&mut self, name: &'static str, took: Duration) {
        self.steps.push((name, took));
    }

    /// Watches `entry` and prints the breakdown once its first window
    /// completed (`began`: when the takeover began).
    pub fn report_when_first_window_completes(
        self,
        entry: &Arc<JobEntry>,
        began: Instant,
        json: bool,
    ) {
        if !self.print {
            return;
        }
        let entry = entry.clone();
        let started = Instant::now();
        tokio::spawn(async move {
            let metrics = entry.handle.metrics().clone();
            while metrics.snapshot().windows_completed == 0 {
                if entry.status().is_terminal() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut rto = self;
            rto.step("first window completed", started.elapsed());
            let total = began.elapsed();
            let ms = |d: Duration| d.as_millis() as u64;
            entry.took_over_in(ms(total));
            if json {
                let steps: serde_json::Map<String, serde_json::Value> = rto
                    .steps
                    .iter()
                    .map(|(n, d)| (n.replace(' ', "_"), ms(*d).into()))
                    .collect();
                let mut line = serde_json::json!({ "rtoMs": ms(total), "steps": steps });
                if let Some(label) = &rto.label {
                    line["of"] = label.clone().into();
                }
                crate::say!("{line}");
            } else {
                let parts: Vec<String> = rto
                    .steps
                    .iter()
                    .map(|(n, d)| format!("{n} {} ms", ms(*d)))
                    .collect();
                let of = rto
                    .label
                    .as_ref()
                    .map(|l| format!("{l}: "))
                    .unwrap_or_default();
                crate::say!("{of}RTO: {} ms ({})", ms(total), parts.join(", "));
            }
        });
    }
}
