//! Daemon control: spawning a daemon and waiting until it is up, crashing,
//! stopping, restarting, pausing and resuming one or all of them, stopping
//! and starting the whole cluster, detaching from and tearing it down.

use super::{ClusterInfo, DaemonKind, MiniCluster};
use crate::process;
use crate::{io_err, Error, Result};
use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long one daemon may take to come up (the Java harness allows 70 s).
const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(70);
/// How long a graceful stop may take before the daemon is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);
impl MiniCluster {
    /// Kills a daemon with SIGKILL (a crash).
    pub fn kill(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
        self.terminate(kind, index, libc::SIGKILL, Duration::from_secs(10))
    }

    /// Stops a daemon gracefully (SIGTERM, then SIGKILL after a grace period).
    pub fn stop(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
        self.terminate(kind, index, libc::SIGTERM, STOP_GRACE)
    }

    /// Starts a stopped or killed daemon again with the same address, folder
    /// and flags, and waits until it is up.
    pub fn start(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
        if let Some(pid) = self.daemon(kind, index)?.pid {
            if process::alive(pid) {
                return Err(Error::Invalid(format!(
                    "{} is still running (pid {pid})",
                    self.daemon(kind, index)?.id
                )));
            }
        }
        self.spawn_daemon(kind, index)?;
        self.wait_daemon_up(kind, index)?;
        self.save()
    }

    /// Stop followed by start.
    pub fn restart(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
        self.stop(kind, index)?;
        self.start(kind, index)
    }

    /// Freezes a daemon (SIGSTOP): it keeps its sockets but answers nothing.
    pub fn pause(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
        self.signal_running(kind, index, libc::SIGSTOP)
    }

    /// Thaws a paused daemon (SIGCONT).
    pub fn resume(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
        self.signal_running(kind, index, libc::SIGCONT)
    }

    /// Freezes every daemon of `kind` (SIGSTOP), e.g. all tablet servers
    /// hung at once. Daemons that are not running are skipped.
    pub fn pause_all(&mut self, kind: DaemonKind) -> Result<()> {
        self.signal_all(kind, libc::SIGSTOP)
    }

    /// Thaws every daemon of `kind` (SIGCONT).
    pub fn resume_all(&mut self, kind: DaemonKind) -> Result<()> {
        self.signal_all(kind, libc::SIGCONT)
    }

    /// Stops the whole cluster gracefully: SIGTERM to every daemon at once,
    /// SIGKILL to those still running after the grace period. Folders are
    /// kept, so [`MiniCluster::start_all`] brings the same cluster back.
    pub fn stop_all(&mut self) -> Result<()> {
        let ids: Vec<(DaemonKind, usize, String, u32)> = self
            .info
            .daemons()
            .filter_map(|d| d.pid.map(|pid| (d.kind, d.index, d.id.clone(), pid)))
            .collect();
        for (_, _, id, pid) in &ids {
            let _ = process::signal(*pid, libc::SIGCONT);
            process::signal(*pid, libc::SIGTERM).map_err(io_err(format!("signalling {id}")))?;
        }
        let deadline = Instant::now() + STOP_GRACE;
        for (kind, index, id, pid) in ids {
            while process::alive(pid) && Instant::now() < deadline {
                self.reap(&id);
                std::thread::sleep(Duration::from_millis(50));
            }
            if process::alive(pid) {
                process::signal(pid, libc::SIGKILL).map_err(io_err(format!("killing {id}")))?;
            }
            if let Some(mut child) = self.children.remove(&id) {
                let _ = child.wait();
            }
            while process::alive(pid) {
                std::thread::sleep(Duration::from_millis(20));
            }
            self.daemon_mut(kind, index)?.pid = None;
        }
        self.save()
    }

    /// Starts every daemon that is not running (same addresses, folders and
    /// flags) and waits until all tablet servers are registered again.
    pub fn start_all(&mut self) -> Result<()> {
        let stopped: Vec<(DaemonKind, usize)> = self
            .info
            .daemons()
            .filter(|d| !d.pid.is_some_and(process::alive))
            .map(|d| (d.kind, d.index))
            .collect();
        for (kind, i) in &stopped {
            self.spawn_daemon(*kind, *i)?;
        }
        for (kind, i) in &stopped {
            self.wait_daemon_up(*kind, *i)?;
        }
        self.save()?;
        self.wait_registered()
    }

    /// Waits until the leader master sees every tablet server live.
    pub(super) fn wait_registered(&self) -> Result<()> {
        let expected = self.info.tservers.len();
        self.wait_for(DAEMON_START_TIMEOUT, "all tablet servers registered", |c| {
            Ok(c.tserver_status()?.iter().filter(|t| t.live).count() == expected)
        })
    }

    /// Pids of every live process started for this cluster.
    pub fn pids(&self) -> Vec<u32> {
        process::processes_under(&self.info.root)
    }

    /// Leaves the daemons running past this handle (and this process) and
    /// returns the cluster's description.
    pub fn detach(mut self) -> ClusterInfo {
        self.owned = false;
        // Children are not waited for: they belong to init once we exit.
        self.children.clear();
        self.info.clone()
    }

    /// Kills every daemon and removes the folder.
    pub fn destroy(mut self) -> Result<()> {
        self.owned = false;
        self.teardown(false)
    }

    pub(super) fn teardown(&mut self, keep_files: bool) -> Result<()> {
        let ids: Vec<(DaemonKind, usize)> =
            self.info.daemons().map(|d| (d.kind, d.index)).collect();
        // Kill first, wait after, so all daemons die at about the same time.
        for (kind, i) in &ids {
            if let Ok(d) = self.daemon(*kind, *i) {
                if let Some(pid) = d.pid {
                    let _ = process::signal(pid, libc::SIGCONT);
                    let _ = process::signal(pid, libc::SIGKILL);
                }
            }
        }
        for (_, mut child) in self.children.drain() {
            let _ = child.wait();
        }
        // Anything else started under this root (e.g. by a previous handle).
        for pid in process::processes_under(&self.info.root) {
            let _ = process::signal(pid, libc::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !process::processes_under(&self.info.root).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if keep_files || std::env::var_os("FERRY_KEEP_CLUSTERS").is_some() {
            return Ok(());
        }
        fs::remove_dir_all(&self.info.root)
            .map_err(io_err(format!("removing {}", self.info.root.display())))
    }

    fn signal_all(&mut self, kind: DaemonKind, sig: i32) -> Result<()> {
        let list = match kind {
            DaemonKind::Master => &self.info.masters,
            DaemonKind::TabletServer => &self.info.tservers,
        };
        for d in list {
            if let Some(pid) = d.pid.filter(|p| process::alive(*p)) {
                process::signal(pid, sig).map_err(io_err(format!("signalling {}", d.id)))?;
            }
        }
        Ok(())
    }

    fn signal_running(&mut self, kind: DaemonKind, index: usize, sig: i32) -> Result<()> {
        let d = self.daemon(kind, index)?;
        let pid = d
            .pid
            .filter(|p| process::alive(*p))
            .ok_or_else(|| Error::Invalid(format!("{} is not running", d.id)))?;
        process::signal(pid, sig).map_err(io_err(format!("signalling {}", d.id)))
    }

    fn terminate(
        &mut self,
        kind: DaemonKind,
        index: usize,
        sig: i32,
        grace: Duration,
    ) -> Result<()> {
        let d = self.daemon(kind, index)?.clone();
        let Some(pid) = d.pid else {
            return Ok(());
        };
        // A paused daemon cannot act on SIGTERM.
        let _ = process::signal(pid, libc::SIGCONT);
        process::signal(pid, sig).map_err(io_err(format!("signalling {}", d.id)))?;
        let deadline = Instant::now() + grace;
        while process::alive(pid) && Instant::now() < deadline {
            self.reap(&d.id);
            std::thread::sleep(Duration::from_millis(50));
        }
        if process::alive(pid) {
            process::signal(pid, libc::SIGKILL).map_err(io_err(format!("killing {}", d.id)))?;
        }
        if let Some(mut child) = self.children.remove(&d.id) {
            let _ = child.wait();
        }
        while process::alive(pid) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.daemon_mut(kind, index)?.pid = None;
        self.save()
    }

    fn reap(&mut self, id: &str) {
        if let Some(child) = self.children.get_mut(id) {
            let _ = child.try_wait();
        }
    }

    pub(super) fn spawn_daemon(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
        let detached = self.info.detached;
        let d = self.daemon(kind, index)?.clone();
        fs::create_dir_all(d.log_dir())
            .map_err(io_err(format!("creating {}", d.log_dir().display())))?;
        let _ = fs::remove_file(d.info_file());
        let log = |name: &str| {
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(d.log_dir().join(name))
                .map_err(io_err(format!("opening {name} of {}", d.id)))
        };
        let mut cmd = self.bins.command();
        cmd.args(&d.args)
            .envs(d.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log("stdout.log")?)
            .stderr(log("stderr.log")?);
        let child = process::spawn(cmd, detached).map_err(|e| Error::DaemonStart {
            daemon: d.id.clone(),
            reason: e.to_string(),
            logs: d.log_dir(),
        })?;
        let pid = child.id();
        self.children.insert(d.id.clone(), child);
        self.daemon_mut(kind, index)?.pid = Some(pid);
        Ok(())
    }

    /// Waits for the daemon's info file, which it writes once its RPC and
    /// web servers listen.
    pub(super) fn wait_daemon_up(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
        let d = self.daemon(kind, index)?.clone();
        let start = Instant::now();
        loop {
            if let Some(child) = self.children.get_mut(&d.id) {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(Error::DaemonStart {
                        daemon: d.id.clone(),
                        reason: format!(
                            "exited with {status}: {}",
                            tail(&d.log_dir().join("stderr.log"))
                        ),
                        logs: d.log_dir(),
                    });
                }
            }
            let ready = fs::read_to_string(d.info_file())
                .ok()
                .is_some_and(|t| serde_json::from_str::<serde_json::Value>(&t).is_ok());
            if ready {
                return Ok(());
            }
            if start.elapsed() > DAEMON_START_TIMEOUT {
                return Err(Error::DaemonStart {
                    daemon: d.id.clone(),
                    reason: format!("no info file after {DAEMON_START_TIMEOUT:?}"),
                    logs: d.log_dir(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}
