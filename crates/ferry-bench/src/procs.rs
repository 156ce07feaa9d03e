//! Child processes under measurement: spawned so they die with the bench
//! (PR_SET_PDEATHSIG via the test kit's spawner thread), reaped with
//! `wait4` so each one's own peak RSS and CPU time come from the kernel,
//! and sampled through `/proc/<pid>/status` (VmRSS, VmHWM) while running.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A command line as a copy-pasteable shell string, environment first.
pub fn shell_line(env: &[(&str, String)], program: &OsStr, args: &[String]) -> String {
    let mut parts: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect();
    parts.push(quote(&program.to_string_lossy()));
    parts.extend(args.iter().map(|a| quote(a)));
    parts.join(" ")
}

fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// How a measured process ended and what it cost.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Usage {
    /// Exit code, or minus the signal number that ended it.
    pub exit: i32,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// Peak resident set (the kernel's `ru_maxrss`), MiB.
    pub peak_rss_mib: f64,
}

impl Usage {
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

/// A running child process; killed (SIGKILL) and reaped if dropped
/// before it was waited for, e.g. when a scenario fails half-way.
pub struct Proc {
    pub pid: u32,
    /// `None` once the process has been waited for.
    pub child: Option<Child>,
    pub started: Instant,
    pub command: String,
}

impl Proc {
    /// Starts `program args` with `env` added, stdout and stderr as given.
    pub fn spawn(
        program: &OsStr,
        args: &[String],
        env: &[(&str, String)],
        stdout: Stdio,
        stderr: Stdio,
        cwd: Option<&Path>,
    ) -> Result<Proc> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let command = shell_line(env, program, args);
        let started = Instant::now();
        let child = ferry_testkit::process::spawn(cmd, false)
            .with_context(|| format!("starting {command}"))?;
        Ok(Proc {
            pid: child.id(),
            child: Some(child),
            started,
            command,
        })
    }

    /// User + system CPU seconds so far.
    pub fn cpu_s(&self) -> Option<f64> {
        cpu_seconds(self.pid)
    }

    pub fn signal(&self, sig: i32) {
        let _ = ferry_testkit::process::signal(self.pid, sig);
    }

    /// Waits for the process (on a blocking thread) and returns its usage.
    pub async fn wait(mut self) -> Result<Usage> {
        let pid = self.pid;
        let started = self.started;
        // The Child handle is never waited on: wait4 reaps the process.
        let _child = self.child.take();
        tokio::task::spawn_blocking(move || wait4(pid, started))
            .await
            .context("waiting for a child")?
    }

    /// Waits at most `timeout`; kills the process if it has not ended.
    pub async fn wait_or_kill(self, timeout: Duration) -> Result<Usage> {
        let pid = self.pid;
        let killer = tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let _ = ferry_testkit::process::signal(pid, libc::SIGKILL);
        });
        let usage = self.wait().await;
        killer.abort();
        usage
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.take().is_some() {
            let _ = ferry_testkit::process::signal(self.pid, libc::SIGKILL);
            let _ = wait4(self.pid, self.started);
        }
    }
}

fn wait4(pid: u32, started: Instant) -> Result<Usage> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data, zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 on our own child with valid out-pointers.
        let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut ru) };
        if rc == pid as libc::pid_t {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        bail!("wait4({pid}): {err}");
    }
    let wall_s = started.elapsed().as_secs_f64();
    let exit = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        -libc::WTERMSIG(status)
    } else {
        -1
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Usage {
        exit,
        wall_s,
        user_s: secs(ru.ru_utime),
        sys_s: secs(ru.ru_stime),
        // Linux reports ru_maxrss in KiB.
        peak_rss_mib: ru.ru_maxrss as f64 / 1024.0,
    })
}

/// VmRSS and VmHWM of `pid` in MiB.
pub fn proc_memory(pid: u32) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
    };
    Some((kib("VmRSS:")? / 1024.0, kib("VmHWM:")? / 1024.0))
}

/// User + system CPU seconds of `pid` (its own threads, not its children).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // After the command name: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((utime + stime) / hz)
}

/// Summed CPU seconds of several processes (missing ones count 0).
pub fn cpu_seconds_of(pids: &[u32]) -> f64 {
    pids.iter().filter_map(|p| cpu_seconds(*p)).sum()
}

/// A measured run of a tool: its command line, usage and output.
pub struct MeasuredRun {
    pub command: String,
    pub usage: Usage,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args` (with `env`) as a measured child, its stdout and
/// stderr kept under `dir` as `<label>.stdout` / `<label>.stderr`; a
/// non-zero exit is an error quoting the end of stderr.
pub async fn run_measured(
    program: &OsStr,
    args: &[String],
    env: &[(&str, String)],
    (dir, label): (&Path, &str),
    monitor: &crate::monitor::Monitor,
    timeout: Duration,
) -> Result<MeasuredRun> {
    let out_path = dir.join(format!("{label}.stdout"));
    let err_path = dir.join(format!("{label}.stderr"));
    let proc = Proc::spawn(
        program,
        args,
        env,
        Stdio::from(std::fs::File::create(&out_path)?),
        Stdio::from(std::fs::File::create(&err_path)?),
        None,
    )?;
    monitor.track([proc.pid]);
    let command = proc.command.clone();
    let usage = proc.wait_or_kill(timeout).await?;
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    if usage.exit != 0 {
        bail!(
            "{command} exited with {} after {:.1} s: {}",
            usage.exit,
            usage.wall_s,
            tail(&stderr, 8)
        );
    }
    Ok(MeasuredRun {
        command,
        usage,
        stdout,
        stderr,
    })
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("a-b_c.d/e:1,2"), "a-b_c.d/e:1,2");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn own_process_is_readable() {
        let me = std::process::id();
        assert!(proc_memory(me).is_some_and(|(rss, hwm)| rss > 0.0 && hwm >= rss));
        assert!(cpu_seconds(me).is_some());
    }
}
