//! A `ferry run` child process for end-to-end tests: started with its own
//! REST and metrics ports, its log collected, its `/live` JSON and
//! `/metrics` text read, killed with SIGKILL when dropped.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::http::{get_json, http};
use crate::{free_port, read_job_id};

/// A running `ferry run`.
pub struct FerryProcess {
    pub child: Child,
    /// The job id it printed.
    pub id: String,
    pub rest: u16,
    pub metrics: u16,
    log: Arc<Mutex<String>>,
}

/// Collects a child's output lines (echoed to the test's stderr).
fn collect(from: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            eprintln!("ferry: {line}");
            if let Ok(mut l) = into.lock() {
                l.push_str(&line);
                l.push('\n');
            }
        }
    });
}

/// Milliseconds since the Unix epoch (the unit of `/live`'s
/// `last_end_timestamp`).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl FerryProcess {
    /// `bin run <args> --rest.port R --metrics.port M` with `env` set;
    /// waits for the job id line.
    pub fn run(bin: &str, args: &[String], env: &[(&str, &str)]) -> FerryProcess {
        let (rest, metrics) = (free_port(), free_port());
        let mut cmd = Command::new(bin);
        cmd.arg("run")
            .args(args)
            .args(["--rest.port", &rest.to_string()])
            .args(["--metrics.port", &metrics.to_string()])
            .env("FERRY_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn ferry");
        let log = Arc::new(Mutex::new(String::new()));
        collect(child.stderr.take().expect("stderr"), log.clone());
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let id = read_job_id(&mut out);
        collect(out, log.clone());
        FerryProcess {
            child,
            id,
            rest,
            metrics,
            log,
        }
    }

    /// Everything the process wrote so far (stdout and stderr).
    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The exit status if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits (at most `limit`) for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.exited() {
                // Let the output threads drain the last lines.
                std::thread::sleep(Duration::from_millis(200));
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "ferry did not exit; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Panics with the log if the process has ended.
    pub fn assert_alive(&mut self) {
        if let Some(s) = self.exited() {
            panic!("ferry exited ({s}); log:\n{}", self.log());
        }
    }

    /// `GET /ferry/jobs/<id>/live`.
    pub fn live(&self) -> serde_json::Value {
        get_json(self.rest, &format!("/ferry/jobs/{}/live", self.id))
    }

    /// The Prometheus exposition text at `/metrics`.
    pub fn metrics_text(&self) -> String {
        http("GET", self.metrics, "/metrics", None).1
    }

    /// Waits (at most `limit`) until the job is RUNNING with
    /// `last_end_timestamp` (the minimum over its tables) after `after_ms`.
    pub fn wait_caught_up(&mut self, after_ms: u64, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            self.assert_alive();
            let v = self.live();
            if v["state"] == "RUNNING" && v["last_end_timestamp"].as_u64().unwrap_or(0) > after_ms {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the job did not catch up past {after_ms}: {v}\nlog:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// `ferry stop -p <dir> <id>` against this process; waits for it to
    /// exit and returns the savepoint's path.
    pub fn stop_with_savepoint(&mut self, bin: &str, dir: &str) -> String {
        let o = Command::new(bin)
            .args(["stop", "-m", &format!("127.0.0.1:{}", self.rest)])
            .args(["-p", dir, &self.id])
            .env("FERRY_LOG", "warn")
            .output()
            .expect("ferry stop");
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "ferry stop: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let path = out
            .lines()
            .find_map(|l| l.strip_prefix("Savepoint completed. Path: "))
            .unwrap_or_else(|| panic!("no savepoint path in {out}"))
            .to_string();
        let status = self.wait_exit(Duration::from_secs(60));
        assert!(status.success(), "{status:?}; log:\n{}", self.log());
        path
    }

    /// SIGKILL, waited for.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for FerryProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}
