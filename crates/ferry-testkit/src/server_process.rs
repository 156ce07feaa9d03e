//! What every single-process server of the kit shares (the S3 server,
//! the Kafka broker, ZooKeeper, the KDC): a folder `<home>/<kind>/<name>/`
//! with its description `<kind>.json`, so a detached server (`ferry-testkit
//! <kind> up`) is found again by name; one process, attached (it dies
//! with the test) or detached; waiting until it serves; stop (kill, keep
//! port and data), destroy, detach; and on drop of an attached one, the
//! process killed and the folder removed — kept, with its logs, when the
//! thread panics.
//!
//! A server is a [`ServerProcess`] of its description type, which says what it
//! is through [`Described`]; what differs (its configuration, command line
//! and readiness probe) stays in the server's own module.

use crate::s3::validate_component_name;
use crate::{home_dir, io_err, process, Error, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A server's persistent description and what kind of server it is.
pub(crate) trait Described: Serialize + DeserializeOwned + Clone {
    /// The kind in messages ("Kafka broker").
    const WHAT: &'static str;
    /// The folder under the kit's home and the `ferry-testkit` subcommand
    /// ("kafka").
    const KIND: &'static str;
    /// The description's file name in the server's folder ("kafka.json").
    const FILE: &'static str;

    fn name(&self) -> &str;
    fn root(&self) -> &Path;
    fn detached(&self) -> bool;
    fn pid(&self) -> Option<u32>;
    fn pid_mut(&mut self) -> &mut Option<u32>;
    /// Where clients reach it, for messages.
    fn address(&self) -> String;
}

/// One server process of the kit and its description.
pub(crate) struct ServerProcess<I: Described> {
    pub(crate) info: I,
    child: Option<Child>,
    owned: bool,
}

/// A fresh, empty folder for a new server named `name`, with the
/// sub-folders `dirs`; refused while a server of that name runs.
pub(crate) fn fresh_root<I: Described>(name: &str, dirs: &[&str]) -> Result<(String, PathBuf)> {
    let name = validate_component_name(I::WHAT, name)?;
    if let Ok(existing) = ServerProcess::<I>::attach(&name) {
        if existing.is_running() {
            return Err(Error::Invalid(format!(
                "a {} named '{name}' is running ({}); `ferry-testkit {} down --name {name}` first",
                I::WHAT,
                existing.info.address(),
                I::KIND
            )));
        }
    }
    let root = home_dir().join(I::KIND).join(&name);
    if root.exists() {
        fs::remove_dir_all(&root).map_err(io_err(format!("clearing {}", root.display())))?;
    }
    fs::create_dir_all(&root).map_err(io_err(format!("creating {}", root.display())))?;
    for dir in dirs {
        let path = root.join(dir);
        fs::create_dir_all(&path).map_err(io_err(format!("creating {}", path.display())))?;
    }
    Ok((name, root))
}

impl<I: Described> ServerProcess<I> {
    /// A server not started yet; it is torn down on drop unless detached.
    pub(crate) fn new(info: I) -> Self {
        let owned = !info.detached();
        ServerProcess {
            info,
            child: None,
            owned,
        }
    }

    /// A handle on a recorded server that never tears it down.
    pub(crate) fn from_info(info: I) -> Self {
        ServerProcess {
            info,
            child: None,
            owned: false,
        }
    }

    /// Finds a server started earlier by name; the handle does not tear it
    /// down on drop.
    pub(crate) fn attach(name: &str) -> Result<Self> {
        let name = validate_component_name(I::WHAT, name)?;
        let info: I = crate::load_description(I::KIND, &name, I::FILE, I::WHAT)?;
        Ok(Self::from_info(info))
    }

    /// Names of the servers of this kind recorded under the kit's home.
    pub(crate) fn list_names() -> Vec<String> {
        crate::recorded_names(I::KIND, I::FILE)
    }

    /// Whether the process is alive (a paused one is).
    pub(crate) fn is_running(&self) -> bool {
        self.info.pid().is_some_and(process::alive)
    }

    /// Stdout and stderr for the process: `file` in its folder, appended.
    pub(crate) fn log_files(&self, file: &str) -> Result<(fs::File, fs::File, PathBuf)> {
        let path = self.info.root().join(file);
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err(format!("opening {}", path.display())))?;
        let err = out
            .try_clone()
            .map_err(io_err(format!("opening {}", path.display())))?;
        Ok((out, err, path))
    }

    /// Starts `cmd` as the server's process and records its pid;
    /// `program` names it if it cannot start.
    pub(crate) fn spawn(&mut self, cmd: Command, program: &str) -> Result<()> {
        let child = process::spawn(cmd, self.info.detached())
            .map_err(io_err(format!("starting the {} ({program})", I::WHAT)))?;
        *self.info.pid_mut() = Some(child.id());
        self.child = Some(child);
        self.save()
    }

    /// Polls `ready` until it says the server serves: `Err(why not)` while
    /// it does not. Fails, naming `logs`, when the process exits or
    /// `timeout` passes.
    pub(crate) fn wait_ready(
        &mut self,
        timeout: Duration,
        every: Duration,
        logs: &Path,
        mut ready: impl FnMut(&I) -> std::result::Result<(), String>,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match ready(&self.info) {
                Ok(()) => return Ok(()),
                Err(why) => why,
            };
            let exited = match &mut self.child {
                Some(child) => matches!(child.try_wait(), Ok(Some(_))),
                None => !self.is_running(),
            };
            if exited || Instant::now() > deadline {
                return Err(Error::DaemonStart {
                    daemon: format!("{} '{}'", I::WHAT, self.info.name()),
                    reason: if exited {
                        "the process exited".into()
                    } else {
                        format!("{last} after {timeout:?}")
                    },
                    logs: logs.to_path_buf(),
                });
            }
            std::thread::sleep(every);
        }
    }

    /// Kills the process (SIGKILL); port and data are kept for a restart.
    pub(crate) fn stop(&mut self) -> Result<()> {
        if let Some(pid) = self.info.pid() {
            // A paused process must run again to be reaped promptly.
            let _ = process::signal(pid, libc::SIGCONT);
        }
        process::kill_and_reap(self.info.pid_mut(), &mut self.child)?;
        self.save()
    }

    /// Sends `signal` to the running process.
    pub(crate) fn signal(&self, signal: i32) -> Result<()> {
        let pid = self
            .info
            .pid()
            .filter(|pid| process::alive(*pid))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "the {} '{}' is not running",
                    I::WHAT,
                    self.info.name()
                ))
            })?;
        process::signal(pid, signal).map_err(io_err(format!("signalling {pid}")))
    }

    /// Stops the server and removes its folder.
    pub(crate) fn destroy(mut self) -> Result<()> {
        self.owned = false;
        self.stop()?;
        let root = self.info.root();
        fs::remove_dir_all(root).map_err(io_err(format!("removing {}", root.display())))
    }

    /// Stops owning the server: it keeps running after this handle.
    pub(crate) fn detach(mut self) -> I {
        self.owned = false;
        self.child = None;
        self.info.clone()
    }

    /// Writes the description (pid included) to its file.
    pub(crate) fn save(&self) -> Result<()> {
        crate::save_description(self.info.root(), I::FILE, &self.info)
    }
}

impl<I: Described> Drop for ServerProcess<I> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = self.stop();
        if std::thread::panicking() {
            eprintln!(
                "ferry-testkit: test failed; {} '{}' data and logs kept under {}",
                I::WHAT,
                self.info.name(),
                self.info.root().display()
            );
        } else {
            let _ = fs::remove_dir_all(self.info.root());
        }
    }
}

/// Implements [`Described`] for a description struct with the fields
/// `name`, `root`, `detached` and `pid`.
macro_rules! described {
    ($info:ty, $what:literal, $kind:literal, $file:literal, |$i:ident| $address:expr) => {
        impl $crate::server_process::Described for $info {
            const WHAT: &'static str = $what;
            const KIND: &'static str = $kind;
            const FILE: &'static str = $file;
            fn name(&self) -> &str {
                &self.name
            }
            fn root(&self) -> &std::path::Path {
                &self.root
            }
            fn detached(&self) -> bool {
                self.detached
            }
            fn pid(&self) -> Option<u32> {
                self.pid
            }
            fn pid_mut(&mut self) -> &mut Option<u32> {
                &mut self.pid
            }
            fn address(&self) -> String {
                let $i = self;
                $address
            }
        }
    };
}
pub(crate) use described;
