//! Spawning daemons so that none outlives the test that started it.
//!
//! `Drop` covers normal ends and panics. For a test process killed outright,
//! attached daemons carry `PR_SET_PDEATHSIG(SIGKILL)`. Linux delivers that
//! signal when the *thread* that forked the child exits, not the process, so
//! all attached daemons are forked from one long-lived spawner thread
//! instead of from whichever (possibly short-lived) thread asked.
//! Detached daemons (`ferry-testkit up`) get their own session instead.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

/// Starts `cmd` so that it dies with this process (attached) or survives it
/// in a session of its own (detached).
pub fn spawn(mut cmd: Command, detached: bool) -> io::Result<Child> {
    if detached {
        // SAFETY: setsid is async-signal-safe and touches no Rust state.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        return cmd.spawn();
    }
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl/getppid are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    spawner()
        .lock()
        .map_err(|_| io::Error::other("spawner lock poisoned"))?
        .send((cmd, tx))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("spawner thread did not answer"))?
}

fn spawner() -> &'static Mutex<mpsc::Sender<Request>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("ferry-testkit-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .map(|_| ())
            .unwrap_or_else(|e| eprintln!("ferry-testkit: cannot start spawner thread: {e}"));
        Mutex::new(tx)
    })
}

/// Sends `signal` to `pid`; a process that is already gone is not an error.
/// SIGSTOP returns only once every thread of the process has stopped.
pub fn signal(pid: u32, signal: i32) -> io::Result<()> {
    // SAFETY: kill(2) with a pid we started.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ESRCH) => Ok(()),
            _ => Err(err),
        };
    }
    if signal == libc::SIGSTOP {
        wait_stopped(pid)?;
    }
    Ok(())
}

/// Waits until no thread of `pid` runs. kill(2) only marks the stop
/// pending: each thread stops when it is next scheduled, so on a busy
/// machine a server thread could still answer a request sent just after
/// SIGSTOP (a "frozen" tablet server once returned a scan batch).
fn wait_stopped(pid: u32) -> io::Result<()> {
    const DEADLINE: Duration = Duration::from_secs(10);
    let start = Instant::now();
    loop {
        let running = running_threads(pid);
        if running.is_empty() {
            return Ok(());
        }
        if start.elapsed() > DEADLINE {
            return Err(io::Error::other(format!(
                "process {pid} still has running threads {running:?} {DEADLINE:?} after SIGSTOP"
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Threads of `pid` that are neither stopped nor gone.
fn running_threads(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| t.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
                .ok()
                .and_then(|stat| state_of(&stat).map(|s| !matches!(s, "T" | "t" | "Z" | "X")))
                .unwrap_or(false)
        })
        .collect()
}

/// Field 3 of a `/proc/.../stat` line: the state letter.
fn state_of(stat: &str) -> Option<&str> {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
}

/// Whether a process with this pid exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Z = zombie, X = dead.
        Ok(stat) => state_of(&stat).is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Pids of live processes whose command line mentions `path` (a cluster
/// root): how tests prove that nothing was left behind.
pub fn processes_under(path: &Path) -> Vec<u32> {
    let needle = path.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                .unwrap_or(false)
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// SIGKILLs the process `pid` (taken: it is gone afterwards) and reaps it:
/// through `child` when we spawned it, else by waiting (up to 5 s) for a
/// process started by an earlier run of the kit to disappear.
pub(crate) fn kill_and_reap(
    pid: &mut Option<u32>,
    child: &mut Option<std::process::Child>,
) -> crate::Result<()> {
    let Some(pid) = pid.take() else {
        return Ok(());
    };
    signal(pid, libc::SIGKILL).map_err(crate::io_err(format!("killing {pid}")))?;
    match child.take() {
        Some(mut child) => {
            let _ = child.wait();
        }
        None => {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while alive(pid) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigstop_returns_once_the_process_is_stopped() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
        let pid = child.id();
        assert_eq!(running_threads(pid), vec![pid], "a sleeping process runs");
        signal(pid, libc::SIGSTOP).expect("SIGSTOP");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        assert_eq!(state_of(&stat), Some("T"), "{stat}");
        assert!(running_threads(pid).is_empty());
        signal(pid, libc::SIGCONT).expect("SIGCONT");
        let _ = child.kill();
        let _ = child.wait();
    }
}
