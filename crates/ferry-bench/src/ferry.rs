//! `ferry run` as a measured child process.
//!
//! Progress comes from what ferry itself reports: its log lines
//! (`window opened …`, `window completed end=… snapshot=… took_ms=…`) and,
//! when the binary serves Prometheus metrics (`--metrics.port`), the
//! `…enumerator_lastEndTimestamp` gauge. A reader thread tees stderr into a
//! log file, parses window events, and notes ferry's memory (VmRSS/VmHWM)
//! at the moment each window completes.

use crate::kudu::http_get;
use crate::monitor::Monitor;
use crate::procs::{proc_memory, Proc, Usage};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The Prometheus gauge holding the end of the last completed window (epoch ms).
pub const LAST_END_METRIC: &str =
    "flink_jobmanager_job_operator_coordinator_enumerator_lastEndTimestamp";

/// How ferry is started.
#[derive(Debug, Clone)]
pub struct FerryOptions {
    pub bin: PathBuf,
    /// Masters of the source / sink cluster; empty for a Kafka side.
    pub source_masters: String,
    pub sink_masters: String,
    pub table: String,
    pub table_suffix: Option<String>,
    pub checkpoints: PathBuf,
    /// `None` keeps ferry's default.
    pub discovery_s: Option<u64>,
    pub checkpointing_ms: Option<u64>,
    /// `-p`; `None` keeps ferry's default (the core count).
    pub parallelism: Option<usize>,
    pub extra: Vec<String>,
    pub log: PathBuf,
    /// Attach `perf record -g` to ferry, writing this file.
    pub perf: Option<PathBuf>,
    /// Extra environment for ferry.
    pub env: Vec<(&'static str, String)>,
    /// Resume from this checkpoint or savepoint (`-s`).
    pub resume: Option<String>,
    /// A command ferry runs under, e.g. `ip netns exec <ns>`.
    pub wrapper: Vec<String>,
    /// Address the metrics endpoint listens on and is scraped at (ferry's
    /// default, loopback, when `None`); another one for a ferry inside a
    /// network namespace.
    pub metrics_address: Option<String>,
    /// The REST port (`None`: any free one, which nobody here can reach).
    pub rest_port: Option<u16>,
}

/// One completed window as ferry logged it.
#[derive(Debug, Clone, Serialize)]
pub struct WindowDone {
    /// Seconds since ferry was started, when the line was read.
    pub at_s: f64,
    /// Hybrid time of the window's end (`>> 12` = epoch µs).
    pub end_ht: u64,
    pub snapshot: bool,
    pub took_ms: u64,
    /// ferry's VmRSS / VmHWM (MiB) right then.
    pub rss_mib: Option<f64>,
    pub hwm_mib: Option<f64>,
}

impl WindowDone {
    pub fn end_epoch_ms(&self) -> f64 {
        (self.end_ht >> 12) as f64 / 1000.0
    }
}

#[derive(Debug, Default)]
struct Shared {
    job_id: Option<String>,
    windows: Vec<WindowDone>,
    errors: Vec<String>,
    /// `job restarting` lines the engine logged (its restart strategy at work).
    restarts: Vec<String>,
    /// Takeover lines (`RTO: …`) on stdout, with when they were read.
    rto_lines: Vec<(Instant, String)>,
}

/// A running `ferry run`.
pub struct Ferry {
    proc: Proc,
    shared: Arc<Mutex<Shared>>,
    pub command: String,
    /// `host:port` of the metrics endpoint, if this ferry serves one.
    pub metrics_addr: Option<String>,
    pub log: PathBuf,
    /// `perf record` attached to ferry, and where its data go.
    perf: Option<(Proc, PathBuf)>,
}

/// `ferry run --help`, to see which process options this binary has.
fn run_help(bin: &Path) -> String {
    std::process::Command::new(bin)
        .args(["run", "--help"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The `ferry run` arguments for `o`, and the metrics port if this ferry has one.
fn run_args(o: &FerryOptions) -> Result<(Vec<String>, Option<u16>)> {
    let mut args: Vec<String> = vec!["run".into()];
    // An empty address list leaves the key out: a Kafka source or sink
    // refuses the Kudu masters of that side.
    if !o.source_masters.is_empty() {
        args.extend([
            "--job.sourceMasterAddresses".into(),
            o.source_masters.clone(),
        ]);
    }
    if !o.sink_masters.is_empty() {
        args.extend(["--job.sinkMasterAddresses".into(), o.sink_masters.clone()]);
    }
    args.extend([
        "--job.tableName".into(),
        o.table.clone(),
        "--job.checkpointsDirectory".into(),
        o.checkpoints.to_string_lossy().into_owned(),
    ]);
    if let Some(s) = &o.table_suffix {
        args.extend(["--job.tableSuffix".into(), s.clone()]);
    }
    if let Some(d) = o.discovery_s {
        args.extend(["--job.discoveryIntervalSeconds".into(), d.to_string()]);
    }
    if let Some(c) = o.checkpointing_ms {
        args.extend(["--job.checkpointingIntervalMillis".into(), c.to_string()]);
    }
    if let Some(p) = o.parallelism {
        args.extend(["-p".into(), p.to_string()]);
    }
    if let Some(r) = &o.resume {
        args.extend(["-s".into(), r.clone()]);
    }
    let help = run_help(&o.bin);
    let metrics_port = if help.contains("--metrics.port") {
        let port = free_port()?;
        args.extend(["--metrics.port".into(), port.to_string()]);
        if let Some(a) = &o.metrics_address {
            args.extend(["--metrics.address".into(), a.clone()]);
        }
        Some(port)
    } else {
        None
    };
    if help.contains("--rest.port") {
        // The default (8081) would collide with any other ferry here.
        let port = o.rest_port.unwrap_or(0);
        args.extend(["--rest.port".into(), port.to_string()]);
    }
    args.extend(o.extra.iter().cloned());
    Ok((args, metrics_port))
}

/// Picks the job id and the takeover lines out of ferry's stdout.
fn watch_stdout(stdout: std::process::ChildStdout, shared: Arc<Mutex<Shared>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if let Some(id) = line.strip_prefix("Job has been submitted with JobID ") {
                if let Ok(mut g) = shared.lock() {
                    g.job_id = Some(id.trim().to_string());
                }
            } else if line.contains("RTO: ") {
                if let Ok(mut g) = shared.lock() {
                    g.rto_lines.push((Instant::now(), line));
                }
            }
        }
    });
}

/// Copies ferry's log to `log` and records each completed window (with the
/// process's memory then) and each error line.
fn watch_stderr(
    stderr: std::process::ChildStderr,
    mut log: std::fs::File,
    started: std::time::Instant,
    pid: u32,
    shared: Arc<Mutex<Shared>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            let _ = writeln!(log, "{line}");
            let clean = strip_ansi(&line);
            if clean.contains("window completed") {
                let mem = proc_memory(pid);
                let w = WindowDone {
                    at_s: started.elapsed().as_secs_f64(),
                    end_ht: field(&clean, "end")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0),
                    snapshot: field(&clean, "snapshot").is_some_and(|v| v == "true"),
                    took_ms: field(&clean, "took_ms")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0),
                    rss_mib: mem.map(|m| m.0),
                    hwm_mib: mem.map(|m| m.1),
                };
                if let Ok(mut g) = shared.lock() {
                    g.windows.push(w);
                }
            } else if clean.contains(" ERROR ") || clean.starts_with("error:") {
                if let Ok(mut g) = shared.lock() {
                    g.errors.push(clean);
                }
            } else if clean.contains("job restarting") {
                if let Ok(mut g) = shared.lock() {
                    g.restarts.push(clean);
                }
            }
        }
    });
}

/// Attaches `perf record` to `pid`, writing to `data`.
fn start_perf(data: &std::path::Path, pid: u32, monitor: &Monitor) -> Result<Proc> {
    let args: Vec<String> = vec![
        "record".into(),
        "-F".into(),
        "499".into(),
        // Release builds keep no frame pointers: unwind with DWARF.
        "--call-graph".into(),
        "dwarf,32768".into(),
        "-o".into(),
        data.to_string_lossy().into_owned(),
        "-p".into(),
        pid.to_string(),
    ];
    let log = std::fs::File::create(data.with_extension("record.log"))?;
    let p = Proc::spawn(
        std::ffi::OsStr::new("perf"),
        &args,
        &[],
        Stdio::null(),
        Stdio::from(log),
        None,
    )?;
    monitor.track([p.pid]);
    Ok(p)
}

impl Ferry {
    pub fn start(o: &FerryOptions, monitor: &Monitor) -> Result<Ferry> {
        std::fs::create_dir_all(&o.checkpoints)?;
        let (args, metrics_port) = run_args(o)?;
        let mut env = vec![
            ("FERRY_LOG", "info".to_string()),
            ("NO_COLOR", "1".to_string()),
        ];
        env.extend(o.env.iter().map(|(k, v)| (*k, v.clone())));
        let (program, args) = match o.wrapper.split_first() {
            None => (o.bin.clone().into_os_string(), args),
            Some((first, rest)) => {
                let mut all = rest.to_vec();
                all.push(o.bin.to_string_lossy().into_owned());
                all.extend(args);
                (first.into(), all)
            }
        };
        let mut proc = Proc::spawn(&program, &args, &env, Stdio::piped(), Stdio::piped(), None)?;
        monitor.track([proc.pid]);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stdout = proc
            .child
            .as_mut()
            .ok_or_else(|| anyhow!("no child"))?
            .stdout
            .take()
            .ok_or_else(|| anyhow!("no stdout"))?;
        let stderr = proc
            .child
            .as_mut()
            .ok_or_else(|| anyhow!("no child"))?
            .stderr
            .take()
            .ok_or_else(|| anyhow!("no stderr"))?;
        let log = std::fs::File::create(&o.log)
            .with_context(|| format!("creating {}", o.log.display()))?;
        watch_stdout(stdout, shared.clone());
        watch_stderr(stderr, log, proc.started, proc.pid, shared.clone());
        let perf = match &o.perf {
            None => None,
            Some(data) => Some((start_perf(data, proc.pid, monitor)?, data.clone())),
        };
        let host = o.metrics_address.as_deref().unwrap_or("127.0.0.1");
        Ok(Ferry {
            command: proc.command.clone(),
            proc,
            shared,
            metrics_addr: metrics_port.map(|p| format!("{host}:{p}")),
            log: o.log.clone(),
            perf,
        })
    }

    /// The job id ferry printed, once it has.
    pub fn job_id(&self) -> Option<String> {
        self.shared.lock().ok().and_then(|g| g.job_id.clone())
    }

    /// Whether the process is still running.
    pub fn alive(&self) -> bool {
        ferry_testkit::process::alive(self.proc.pid)
    }

    /// `job restarting` lines logged so far.
    pub fn restart_lines(&self) -> Vec<String> {
        self.shared
            .lock()
            .map(|g| g.restarts.clone())
            .unwrap_or_default()
    }

    /// Takeover lines (`shard k: RTO: …`) printed so far, with when they
    /// were read.
    pub fn rto_lines(&self) -> Vec<(Instant, String)> {
        self.shared
            .lock()
            .map(|g| g.rto_lines.clone())
            .unwrap_or_default()
    }

    /// ERROR lines logged so far.
    pub fn error_lines(&self) -> Vec<String> {
        self.shared
            .lock()
            .map(|g| g.errors.clone())
            .unwrap_or_default()
    }

    /// Waits for a process that has ended (or kills it after `timeout`).
    pub async fn reap(self, timeout: Duration) -> Result<Usage> {
        self.proc.wait_or_kill(timeout).await
    }

    /// `kill -9`, then reaps the process.
    pub async fn kill(self) -> Result<Usage> {
        self.proc.signal(libc::SIGKILL);
        self.proc.wait_or_kill(Duration::from_secs(10)).await
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid
    }

    pub fn elapsed_s(&self) -> f64 {
        self.proc.started.elapsed().as_secs_f64()
    }

    pub fn cpu_s(&self) -> f64 {
        self.proc.cpu_s().unwrap_or(0.0)
    }

    /// Completed windows so far.
    pub fn windows(&self) -> Vec<WindowDone> {
        self.shared
            .lock()
            .map(|g| g.windows.clone())
            .unwrap_or_default()
    }

    /// How many windows have completed so far.
    pub fn windows_len(&self) -> usize {
        self.shared.lock().map(|g| g.windows.len()).unwrap_or(0)
    }

    fn check_alive(&self) -> Result<()> {
        if !ferry_testkit::process::alive(self.proc.pid) {
            let errors = self
                .shared
                .lock()
                .map(|g| g.errors.join("\n"))
                .unwrap_or_default();
            bail!(
                "ferry exited early (log {}): {errors}\n{}",
                self.log.display(),
                crate::kudu::tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), 10)
            );
        }
        Ok(())
    }

    /// Waits until `n` windows have completed (and returns the n-th).
    pub async fn wait_windows(&self, n: usize, timeout: Duration) -> Result<WindowDone> {
        let deadline = Instant::now() + timeout;
        loop {
            let w = self.windows();
            if w.len() >= n {
                return Ok(w[n - 1].clone());
            }
            self.check_alive()?;
            if Instant::now() > deadline {
                bail!(
                    "ferry completed {} of {n} windows within {timeout:?} (log {})",
                    w.len(),
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A handle that reads progress without owning the process.
    pub fn progress(&self) -> Progress {
        Progress {
            shared: self.shared.clone(),
            metrics_addr: self.metrics_addr.clone(),
        }
    }

    /// SIGTERM (cancel: no savepoint directory is configured), then waits.
    /// Ends `perf record` (if attached) and writes `perf report` text
    /// next to its data; returns the report's path.
    pub async fn finish_profile(&mut self) -> Result<Option<PathBuf>> {
        let Some((perf, data)) = self.perf.take() else {
            return Ok(None);
        };
        perf.signal(libc::SIGINT);
        perf.wait_or_kill(Duration::from_secs(60)).await?;
        let text = data.with_extension("txt");
        let out = tokio::process::Command::new("perf")
            .args([
                "report",
                "--stdio",
                "--no-children",
                "--percent-limit",
                "0.7",
                "-g",
                "none",
                "--sort",
                "dso,symbol",
                "-i",
            ])
            .arg(&data)
            .output()
            .await?;
        std::fs::write(&text, &out.stdout)?;
        Ok(Some(text))
    }

    pub async fn stop(mut self) -> Result<Usage> {
        self.finish_profile().await?;
        self.proc.signal(libc::SIGTERM);
        self.proc.wait_or_kill(Duration::from_secs(30)).await
    }
}

/// Reads ferry's progress from a sampler task.
#[derive(Clone)]
pub struct Progress {
    shared: Arc<Mutex<Shared>>,
    metrics_addr: Option<String>,
}

impl Progress {
    /// The end of the last completed window, epoch ms, and where it came
    /// from: ferry's metrics endpoint when it serves one, else its log.
    pub async fn last_end_ms(&self) -> Option<(f64, &'static str)> {
        if let Some(addr) = &self.metrics_addr {
            if let Ok(v) = scrape_metric(addr, LAST_END_METRIC).await {
                if v > 0.0 {
                    return Some((v, "metrics"));
                }
            }
        }
        let g = self.shared.lock().ok()?;
        g.windows.last().map(|w| (w.end_epoch_ms(), "log"))
    }
}

/// Reads one Prometheus sample (the first series of `name`) from ferry's
/// metrics endpoint at `addr` (`host:port`).
pub async fn scrape_metric(addr: &str, name: &str) -> Result<f64> {
    let body = http_get(addr, "/metrics").await?;
    let line = body
        .lines()
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '{']))
        })
        .ok_or_else(|| anyhow!("no {name} in ferry's metrics"))?;
    let value = line.rsplit(' ').next().unwrap_or_default();
    value
        .parse::<f64>()
        .map_err(|e| anyhow!("{name} value {value:?}: {e}"))
}

/// Reads several Prometheus samples (the first series of each name) from
/// one scrape of ferry's metrics endpoint at `addr`; names it does not
/// serve are left out.
pub async fn scrape_metrics(
    addr: &str,
    names: &[&str],
) -> Result<std::collections::BTreeMap<String, f64>> {
    let body = http_get(addr, "/metrics").await?;
    Ok(metric_values(&body, names))
}

/// The first sample of each of `names` in a Prometheus text exposition.
fn metric_values(body: &str, names: &[&str]) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        for name in names {
            if out.contains_key(*name) {
                continue;
            }
            let matches = line
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '{']));
            if let Some(v) = matches
                .then(|| line.rsplit(' ').next())
                .flatten()
                .and_then(|v| v.parse::<f64>().ok())
            {
                out.insert(name.to_string(), v);
            }
        }
    }
    out
}

/// Removes ANSI escape sequences.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The value of ` name=value` in a tracing line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let pat = format!(" {name}=");
    let start = line.find(&pat)? + pat.len();
    let rest = &line[start..];
    Some(
        rest.split_whitespace()
            .next()
            .unwrap_or("")
            .trim_matches('"'),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_several_metrics_from_one_scrape() {
        let body = "# HELP ferry_rows_read_total Rows read\n# TYPE ferry_rows_read_total counter\n\
                    ferry_rows_read_total{job_id=\"a\"} 1234\n\
                    ferry_rows_read_total_other 5\n\
                    ferry_table_tablet_scans_skipped_total{job_id=\"a\",table_name=\"t\"} 6\n\
                    ferry_table_tablet_scans_skipped_total{job_id=\"a\",table_name=\"u\"} 7\n";
        let m = metric_values(
            body,
            &[
                "ferry_rows_read_total",
                "ferry_table_tablet_scans_skipped_total",
                "missing",
            ],
        );
        assert_eq!(m.get("ferry_rows_read_total"), Some(&1234.0));
        assert_eq!(m.get("ferry_table_tablet_scans_skipped_total"), Some(&6.0));
        assert_eq!(m.get("missing"), None);
    }

    #[test]
    fn parses_window_lines() {
        let line = "2026-12-02T15:04:04.846753Z  \u{1b}[32m INFO\u{1b}[0m \u{1b}[2mferry_engine::job\u{1b}[0m\u{1b}[2m:\u{1b}[0m window completed \u{1b}[3mend\u{1b}[0m\u{1b}[2m=\u{1b}[0m7234567890123 \u{1b}[3msnapshot\u{1b}[0m\u{1b}[2m=\u{1b}[0mtrue \u{1b}[3mtook_ms\u{1b}[0m\u{1b}[2m=\u{1b}[0m1234 \u{1b}[3mcheckpoint\u{1b}[0m\u{1b}[2m=\u{1b}[0m3";
        let clean = strip_ansi(line);
        assert!(clean.contains("window completed end=7234567890123 snapshot=true"));
        assert_eq!(field(&clean, "end"), Some("7234567890123"));
        assert_eq!(field(&clean, "snapshot"), Some("true"));
        assert_eq!(field(&clean, "took_ms"), Some("1234"));
        assert_eq!(field(&clean, "checkpoint"), Some("3"));
        assert_eq!(field(&clean, "missing"), None);
    }
}
