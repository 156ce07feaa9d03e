//! A `ferry run` process for end-to-end tests: started with free REST and
//! metrics ports and its stderr kept in a file (fatal messages are
//! asserted on), killed with SIGKILL, stopped with a savepoint through
//! `ferry stop`, scraped on `/metrics`.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, read_job_id};

/// A running (or ended) `ferry run`.
pub struct FerryProcess {
    pub child: Child,
    /// The job id `ferry run` printed.
    pub job_id: String,
    pub rest: u16,
    pub metrics: u16,
    stderr: PathBuf,
}

impl FerryProcess {
    /// Starts `bin run <args>` with `--rest.port`/`--metrics.port` added,
    /// `env` set, stderr written to `<log_dir>/ferry-<n>.stderr`; waits for
    /// the job id line.
    pub fn start(bin: &str, args: &[String], env: &[(&str, &str)], log_dir: &Path) -> Self {
        let (rest, metrics) = (free_port(), free_port());
        let n = std::fs::read_dir(log_dir).map(|d| d.count()).unwrap_or(0);
        let stderr = log_dir.join(format!("ferry-{n}.stderr"));
        let file = std::fs::File::create(&stderr).expect("stderr file");
        let mut cmd = Command::new(bin);
        cmd.arg("run")
            .args(args)
            .args([
                "--rest.port",
                &rest.to_string(),
                "--metrics.port",
                &metrics.to_string(),
            ])
            .env("FERRY_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(file));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn ferry");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let job_id = read_job_id(&mut out);
        // Keep reading stdout so that the process never blocks on a pipe.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        FerryProcess {
            child,
            job_id,
            rest,
            metrics,
            stderr,
        }
    }

    /// What the process wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// SIGKILL, then reap.
    pub fn kill9(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }

    /// Waits (at most `limit`) for the process to end on its own.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "ferry still runs; stderr:\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `/metrics` (Prometheus text); empty when the endpoint does not answer.
    pub fn metrics_text(&self) -> String {
        let port = self.metrics;
        crate::http::try_http("GET", port, "/metrics", None)
            .map(|(status, body)| if status == 200 { body } else { String::new() })
            .unwrap_or_default()
    }

    /// `bin stop -m <rest> -p <dir> <job>`: the savepoint's path; the
    /// process has ended (successfully) when this returns.
    pub fn stop_with_savepoint(&mut self, bin: &str, dir: &Path) -> String {
        let out = Command::new(bin)
            .args([
                "stop",
                "-m",
                &format!("127.0.0.1:{}", self.rest),
                "-p",
                &dir.to_string_lossy(),
                &self.job_id,
            ])
            .env("FERRY_LOG", "warn")
            .output()
            .expect("ferry stop");
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
}

impl Drop for FerryProcess {
    fn drop(&mut self) {
        // A failing test shows what ferry said (its log file goes with the
        // test's temporary directory).
        if std::thread::panicking() {
            let text = self.stderr_text();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!(
                "--- ferry (job {}) stderr, last {} lines:",
                self.job_id,
                tail.len()
            );
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill9();
        }
    }
}
