//! How quiet the machine was. The load average counts the benchmark's own
//! processes too, so the monitor also measures *other* load: CPU time the
//! whole machine spent (from `/proc/stat`) minus what this benchmark, its
//! children and its clusters' daemons spent, sampled every 2 s.

use crate::env::load_average;
use crate::procs::cpu_seconds;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Shared, cheap to clone.
#[derive(Clone, Default)]
pub struct Monitor {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    tracked: BTreeSet<u32>,
    /// (seconds since start, other cores busy, 1-min load average)
    samples: Vec<(f64, f64, f64)>,
    load_before: Option<[f64; 3]>,
}

/// What the monitor saw.
#[derive(Debug, Clone, Serialize)]
pub struct LoadSummary {
    /// `/proc/loadavg` when the scenario started and ended.
    pub load_average_before: [f64; 3],
    pub load_average_after: [f64; 3],
    pub load_average_1m_max: f64,
    /// Cores kept busy by processes outside this benchmark (mean, max of
    /// 2-second samples). Above ~0.3 on a 2-core machine the figures are
    /// noisy and the run should be repeated.
    pub other_cores_mean: f64,
    pub other_cores_max: f64,
    pub samples: usize,
}

impl Monitor {
    /// Starts sampling in the background.
    pub fn start() -> Monitor {
        let m = Monitor::default();
        if let Ok(mut g) = m.inner.lock() {
            g.load_before = Some(load_average());
        }
        let inner = m.inner.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let mut prev: Option<(f64, f64, Instant)> = None;
            // CPU seconds of each tracked process at the previous sample: a
            // process that ended (a killed daemon) must not count as negative
            // time of ours, which would show up as other load.
            let mut last: HashMap<u32, f64> = HashMap::new();
            loop {
                let busy = machine_busy_seconds();
                let pids: Vec<u32> = inner
                    .lock()
                    .map(|g| g.tracked.iter().copied().collect())
                    .unwrap_or_default();
                let now: HashMap<u32, f64> = pids
                    .iter()
                    .filter_map(|p| cpu_seconds(*p).map(|c| (*p, c)))
                    .collect();
                let children: f64 = now
                    .iter()
                    .map(|(p, c)| c - last.get(p).copied().unwrap_or(*c))
                    .sum();
                last = now;
                let me = self_seconds();
                if let (Some((b0, me0, t0)), Some(b1)) = (prev, busy) {
                    let dt = t0.elapsed().as_secs_f64().max(0.1);
                    let ours = (me - me0).max(0.0) + children.max(0.0);
                    let other = ((b1 - b0) - ours).max(0.0) / dt;
                    if let Ok(mut g) = inner.lock() {
                        g.samples
                            .push((started.elapsed().as_secs_f64(), other, load_average()[0]));
                    }
                }
                prev = busy.map(|b| (b, me, Instant::now()));
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
        m
    }

    /// Starts a new summary period (one per scenario).
    pub fn reset(&self) {
        if let Ok(mut g) = self.inner.lock() {
            g.samples.clear();
            g.load_before = Some(load_average());
        }
    }

    /// Counts these processes as the benchmark's own.
    pub fn track(&self, pids: impl IntoIterator<Item = u32>) {
        if let Ok(mut g) = self.inner.lock() {
            g.tracked.extend(pids);
        }
    }

    pub fn summary(&self) -> LoadSummary {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let n = g.samples.len();
        let other: Vec<f64> = g.samples.iter().map(|s| s.1).collect();
        let mean = if n == 0 {
            0.0
        } else {
            other.iter().sum::<f64>() / n as f64
        };
        let max = other.iter().copied().fold(0.0, f64::max);
        let after = load_average();
        LoadSummary {
            load_average_before: g.load_before.unwrap_or(after),
            load_average_after: after,
            load_average_1m_max: g.samples.iter().map(|s| s.2).fold(after[0], f64::max),
            other_cores_mean: round2(mean),
            other_cores_max: round2(max),
            samples: n,
        }
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Busy CPU seconds of the whole machine since boot (all cores).
fn machine_busy_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let busy =
        v.first()? + v.get(1)? + v.get(2)? + v.get(5).unwrap_or(&0.0) + v.get(6).unwrap_or(&0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(busy / hz)
}

/// This process plus its reaped children.
fn self_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let f: Vec<f64> = rest
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // After the state field (not numeric, skipped by the parse filter):
    // utime, stime, cutime, cstime are fields 14..17 of the full line.
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let get = |i: usize| f.get(i).copied().unwrap_or(0.0);
    // `rest` fields: state ppid pgrp session tty tpgid flags minflt cminflt
    // majflt cmajflt utime stime cutime cstime; state is dropped by the filter.
    (get(10) + get(11) + get(12) + get(13)) / hz
}
