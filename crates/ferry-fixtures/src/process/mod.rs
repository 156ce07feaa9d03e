//! The one harness for `ferry` processes in end-to-end tests.
//!
//! [`FerryCommand`] builds a command line — the verb and its arguments, the
//! environment (`FERRY_LOG=warn` unless told otherwise), free or given REST
//! and metrics ports, a network namespace to run in — and either runs it to
//! the end ([`FerryCommand::output`]) or starts a [`FerryProcess`]:
//! [`FerryCommand::spawn`] returns at once, [`FerryCommand::start`] waits
//! for `ferry run`'s job id (the REST API listens by then),
//! [`FerryCommand::start_server`] for a `ferry server`'s REST API.
//!
//! A [`FerryProcess`] keeps its stdout lines in memory and its stderr in a
//! file, answers REST and Prometheus calls, is stopped with SIGTERM,
//! SIGKILL or `ferry stop`, prints the tail of its output when the test
//! panics, and is killed (SIGKILL) when dropped.

mod command;

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use command::FerryCommand;

use crate::http::try_http_at;

/// The line `ferry run` prints once its job is submitted.
const JOB_ID_LINE: &str = "Job has been submitted with JobID ";
/// How long [`FerryCommand::start`] waits for the job id: a job that
/// reaches two clusters (and, with Kerberos, logs in) on a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a REST poll waits for one answer.
const POLL_TIMEOUT: Duration = Duration::from_secs(5);
/// Lines of output shown when a test panics.
const TAIL: usize = 40;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running (or ended) `ferry` process.
pub struct FerryProcess {
    label: String,
    bin: String,
    child: Child,
    /// Set once the process was reaped.
    status: Option<ExitStatus>,
    rest: Option<u16>,
    metrics: Option<u16>,
    host: String,
    stdout: Arc<Mutex<Vec<String>>>,
    stdout_closed: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
    job_id: Arc<OnceLock<String>>,
    stderr: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl FerryProcess {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The job id `ferry run` printed; waits for it (at most 90 s) and
    /// panics with the output if the process ends first.
    pub fn job_id(&self) -> String {
        self.job_id_within(START_TIMEOUT)
    }

    /// The job id, if printed yet.
    pub fn try_job_id(&self) -> Option<String> {
        self.job_id.get().cloned()
    }

    fn job_id_within(&self, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            // Read before the id: once stdout is closed, every line is in.
            let closed = self.stdout_closed.load(Ordering::SeqCst);
            if let Some(id) = self.job_id.get() {
                return id.clone();
            }
            assert!(
                !closed,
                "{} ended before printing its job id:\n{}",
                self.label,
                self.output_text()
            );
            assert!(
                Instant::now() < deadline,
                "{} printed no job id within {limit:?}:\n{}",
                self.label,
                self.output_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The REST API's port.
    pub fn rest(&self) -> u16 {
        self.rest
            .unwrap_or_else(|| panic!("{} was started without a REST port", self.label))
    }

    /// The metrics endpoint's port.
    pub fn metrics(&self) -> u16 {
        self.metrics
            .unwrap_or_else(|| panic!("{} was started without a metrics port", self.label))
    }

    /// `host:port` of the REST API, as `--jobmanager` takes it.
    pub fn jobmanager(&self) -> String {
        format!("{}:{}", self.host, self.rest())
    }

    /// Waits (at most `limit`) until the REST API accepts connections.
    pub fn wait_rest(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let port = self.rest();
        while std::net::TcpStream::connect((self.host.as_str(), port)).is_err() {
            self.assert_running("before its REST API listened");
            assert!(
                Instant::now() < deadline,
                "{}: no REST API on {}:{port} within {limit:?}",
                self.label,
                self.host
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One REST call: (status, body). Panics when the API cannot be
    /// reached.
    pub fn http(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        try_http_at(
            &self.host,
            self.rest(),
            method,
            path,
            body,
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("{method} {}{path}: {e}", self.jobmanager()))
    }

    /// One REST call that may find no answer (at most 5 s): for polls of
    /// a process that may be restarting or cut off.
    pub fn try_http(&self, method: &str, path: &str) -> Option<(u16, String)> {
        try_http_at(&self.host, self.rest(), method, path, None, POLL_TIMEOUT).ok()
    }

    /// `GET path`, which must answer 200 with JSON.
    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let (status, body) = self.http("GET", path, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    /// `GET /ferry/jobs/<job id>/live`.
    pub fn live(&self) -> serde_json::Value {
        let id = self.job_id();
        self.get_json(&format!("/ferry/jobs/{id}/live"))
    }

    /// The job's Flink state from `GET /jobs/<job id>/status`.
    pub fn job_status(&self) -> String {
        let id = self.job_id();
        self.get_json(&format!("/jobs/{id}/status"))["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// `/metrics` (Prometheus text); empty when the endpoint does not answer.
    pub fn metrics_text(&self) -> String {
        try_http_at(
            &self.host,
            self.metrics(),
            "GET",
            "/metrics",
            None,
            Duration::from_secs(30),
        )
        .map(|(status, body)| if status == 200 { body } else { String::new() })
        .unwrap_or_default()
    }

    /// The stdout lines so far.
    pub fn stdout_lines(&self) -> Vec<String> {
        lock(&self.stdout).clone()
    }

    /// Stdout so far, one line per line.
    pub fn stdout_text(&self) -> String {
        let mut text = lock(&self.stdout).join("\n");
        text.push('\n');
        text
    }

    /// What the process wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Where stderr goes.
    pub fn stderr_path(&self) -> &Path {
        &self.stderr
    }

    /// Stdout, then stderr.
    pub fn output_text(&self) -> String {
        format!(
            "stdout:\n{}stderr:\n{}",
            self.stdout_text(),
            self.stderr_text()
        )
    }

    /// The first stdout line `pick` accepts, waiting up to `limit`; panics
    /// when the process ends or the time is up first.
    pub fn wait_line<T>(&self, limit: Duration, pick: impl Fn(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + limit;
        loop {
            let closed = self.stdout_closed.load(Ordering::SeqCst);
            if let Some(found) = self.find_line(&pick) {
                return found;
            }
            self.check_line_wait(closed, deadline, limit);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// [`FerryProcess::wait_line`] for async tests (sleeps on the runtime).
    pub async fn wait_line_async<T>(&self, limit: Duration, pick: impl Fn(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + limit;
        loop {
            let closed = self.stdout_closed.load(Ordering::SeqCst);
            if let Some(found) = self.find_line(&pick) {
                return found;
            }
            self.check_line_wait(closed, deadline, limit);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn find_line<T>(&self, pick: &impl Fn(&str) -> Option<T>) -> Option<T> {
        lock(&self.stdout).iter().find_map(|l| pick(l))
    }

    /// Panics when stdout was `closed` (the process ended) or the wait is
    /// over.
    fn check_line_wait(&self, closed: bool, deadline: Instant, limit: Duration) {
        assert!(
            !closed,
            "{} ended before the expected line:\n{}",
            self.label,
            self.output_text()
        );
        assert!(
            Instant::now() < deadline,
            "{}: no expected line within {limit:?}:\n{}",
            self.label,
            self.output_text()
        );
    }

    /// Waits (at most `limit`) until stderr contains `needle`; panics if
    /// the process ends first.
    pub fn wait_stderr(&mut self, needle: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.stderr_text().contains(needle) {
            self.assert_running(&format!("before logging {needle:?}"));
            assert!(
                Instant::now() < deadline,
                "{}: no {needle:?} on stderr within {limit:?}:\n{}",
                self.label,
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The exit status once the process ended (reaping it), else `None`.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("try_wait");
        }
        self.status
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        self.exit_status().is_none()
    }

    /// Panics, showing the tail of the output, if the process ended.
    pub fn assert_running(&mut self, when: &str) {
        if let Some(status) = self.exit_status() {
            panic!(
                "{} ended ({status}) {when}:\n{}",
                self.label,
                tail(&self.output_text(), 2 * TAIL)
            );
        }
    }

    /// Sends `signal` (SIGTERM, SIGSTOP, SIGCONT, ...); a process already
    /// reaped is left alone.
    pub fn signal(&mut self, signal: libc::c_int) {
        assert!(self.send(signal), "kill -{signal} {}", self.child.id());
    }

    /// Sends `signal` unless the process was reaped; whether kill(2)
    /// succeeded (or there was nothing to signal).
    fn send(&mut self, signal: libc::c_int) -> bool {
        if self.exit_status().is_some() {
            return true;
        }
        // SAFETY: kill(2) on our own, not yet reaped, child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) == 0 }
    }

    /// SIGTERM: `ferry run` stops with a savepoint (or cancels), a server
    /// stops its jobs.
    pub fn sigterm(&mut self) {
        self.signal(libc::SIGTERM);
    }

    /// SIGKILL, then reap; a no-op once the process ended.
    pub fn kill9(&mut self) {
        if self.exit_status().is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
        self.join_reader();
    }

    /// Waits (at most `limit`) for the process to end on its own.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exit_status() {
                self.join_reader();
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} still runs after {limit:?}:\n{}",
                self.label,
                tail(&self.output_text(), 2 * TAIL)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `ferry stop -m <REST> -p <dir> <job>`: the savepoint's path; the
    /// process has ended (successfully) when this returns.
    pub fn stop_with_savepoint(&mut self, dir: &Path) -> String {
        self.stop(dir, false)
    }

    /// `ferry stop -d …`: the open window finished first, so the savepoint
    /// is taken between windows; its path.
    pub fn stop_drained(&mut self, dir: &Path) -> String {
        self.stop(dir, true)
    }

    fn stop(&mut self, dir: &Path, drain: bool) -> String {
        let id = self.job_id();
        let out = FerryCommand::new(&self.bin)
            .args([
                "stop",
                "-m",
                &self.jobmanager(),
                "-p",
                &dir.to_string_lossy(),
            ])
            .args(drain.then_some("-d"))
            .arg(&id)
            .output();
        let o = String::from_utf8_lossy(&out.stdout).into_owned();
        let e = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "ferry stop: {o}{e}");
        let path = o
            .lines()
            .find_map(|l| l.strip_prefix("Savepoint completed. Path: "))
            .unwrap_or_else(|| panic!("no savepoint path in {o}"))
            .to_string();
        let status = self.wait_exit(Duration::from_secs(60));
        assert!(status.success(), "{status:?}: {}", self.stderr_text());
        path
    }

    /// Waits for the stdout reader once the process ended, so that every
    /// line it printed is in [`FerryProcess::stdout_lines`].
    fn join_reader(&mut self) {
        // The pipe closes with the process (ferry starts no children that
        // could keep it open); a bounded wait all the same.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.stdout_closed.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.stdout_closed.load(Ordering::SeqCst) {
            if let Some(reader) = self.reader.take() {
                let _ = reader.join();
            }
        }
    }
}

impl Drop for FerryProcess {
    fn drop(&mut self) {
        // A failing test shows what ferry said (its stderr file goes with
        // the test's or the process's temporary directory).
        if std::thread::panicking() {
            let id = self.try_job_id().unwrap_or_default();
            eprintln!(
                "--- {} (pid {}, job {id}), last lines:\n{}",
                self.label,
                self.child.id(),
                tail(&self.output_text(), TAIL)
            );
        }
        // A stopped (SIGSTOP) process is continued first, as a test that
        // paused it would.
        let _ = self.send(libc::SIGCONT);
        self.kill9();
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A one-shot command's exit code, stdout and stderr, for assertion
/// messages (and `contains` checks on either stream).
pub fn output_text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
