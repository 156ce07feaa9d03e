//! [`FerryCommand`]: a `ferry` command line, run to its end or started.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::{lock, FerryProcess, JOB_ID_LINE, START_TIMEOUT};
use crate::free_port;

/// A `ferry` command line, run to its end or started as a [`FerryProcess`].
#[derive(Debug, Clone)]
pub struct FerryCommand {
    /// The program and the arguments before ferry's own (a network
    /// namespace's `ip netns exec NAME` in front of the binary).
    program: Vec<String>,
    bin: String,
    args: Vec<String>,
    env: Vec<(String, Option<String>)>,
    rest: Option<u16>,
    metrics: Option<u16>,
    host: String,
    stderr: Option<PathBuf>,
}

impl FerryCommand {
    /// `bin` (the `ferry` binary: `env!("CARGO_BIN_EXE_ferry")` in the
    /// binary crate's tests) with no arguments yet and `FERRY_LOG=warn`.
    pub fn new(bin: &str) -> FerryCommand {
        FerryCommand {
            program: vec![bin.to_string()],
            bin: bin.to_string(),
            args: Vec::new(),
            env: vec![("FERRY_LOG".into(), Some("warn".into()))],
            rest: None,
            metrics: None,
            host: "127.0.0.1".into(),
            stderr: None,
        }
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<str>) -> FerryCommand {
        self.args.push(arg.as_ref().to_string());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> FerryCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// Sets an environment variable (the last setting of a name wins).
    pub fn env(mut self, key: &str, value: impl AsRef<str>) -> FerryCommand {
        self.env
            .push((key.to_string(), Some(value.as_ref().to_string())));
        self
    }

    /// Sets each of `pairs`.
    pub fn envs(self, pairs: &[(&str, &str)]) -> FerryCommand {
        pairs.iter().fold(self, |c, (k, v)| c.env(k, v))
    }

    /// Removes `key` from the environment the process inherits.
    pub fn env_remove(mut self, key: &str) -> FerryCommand {
        self.env.push((key.to_string(), None));
        self
    }

    /// `FERRY_LOG` (default `warn`).
    pub fn log_level(self, filter: &str) -> FerryCommand {
        self.env("FERRY_LOG", filter)
    }

    /// `--rest.port PORT`, which the REST helpers then call.
    pub fn rest_port(mut self, port: u16) -> FerryCommand {
        self.rest = Some(port);
        self.args(["--rest.port".to_string(), port.to_string()])
    }

    /// `--metrics.port PORT`, which [`FerryProcess::metrics_text`] scrapes.
    pub fn metrics_port(mut self, port: u16) -> FerryCommand {
        self.metrics = Some(port);
        self.args(["--metrics.port".to_string(), port.to_string()])
    }

    /// A free REST port and a free metrics port.
    pub fn free_ports(self) -> FerryCommand {
        self.rest_port(free_port()).metrics_port(free_port())
    }

    /// Records `port` as the REST API's without adding an argument (the
    /// process reaches another process's REST API, as `ferry run
    /// --jobmanager` does).
    pub fn rest_at(mut self, port: u16) -> FerryCommand {
        self.rest = Some(port);
        self
    }

    /// Runs the process in network namespace `ns`: its REST API is called
    /// at the namespace's address (bind it with `--rest.address 0.0.0.0`).
    pub fn in_netns(mut self, ns: &ferry_testkit::fault::NetNs) -> FerryCommand {
        let cmd = ns.command(&self.bin);
        let mut program = vec![cmd.get_program().to_string_lossy().into_owned()];
        program.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
        self.program = program;
        self.host = ns.addr_inside().to_string();
        self
    }

    /// Writes stderr to `path` (default: a file in a temporary directory
    /// the process owns).
    pub fn stderr_file(mut self, path: &Path) -> FerryCommand {
        self.stderr = Some(path.to_path_buf());
        self
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program[0]);
        cmd.args(&self.program[1..]).args(&self.args);
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    fn label(&self) -> String {
        format!("ferry {}", self.args.first().map_or("", String::as_str))
    }

    /// Runs the command to its end.
    pub fn output(self) -> Output {
        self.command()
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", self.label()))
    }

    /// Starts the process and returns at once.
    pub fn spawn(self) -> FerryProcess {
        let (stderr, dir) = match &self.stderr {
            Some(path) => (path.clone(), None),
            None => {
                let dir = tempfile::tempdir().expect("a directory for ferry's stderr");
                (dir.path().join("ferry.stderr"), Some(dir))
            }
        };
        let file =
            std::fs::File::create(&stderr).unwrap_or_else(|e| panic!("{}: {e}", stderr.display()));
        let mut child = self
            .command()
            .stdout(Stdio::piped())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", self.label()));
        let out = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let job_id = Arc::new(OnceLock::new());
        let closed = Arc::new(AtomicBool::new(false));
        let reader = {
            let (lines, job_id, closed) = (lines.clone(), job_id.clone(), closed.clone());
            // Reads every line, so the process never blocks on a full pipe.
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if let Some(id) = line.strip_prefix(JOB_ID_LINE) {
                        let _ = job_id.set(id.trim().to_string());
                    }
                    lock(&lines).push(line);
                }
                closed.store(true, Ordering::SeqCst);
            })
        };
        FerryProcess {
            label: self.label(),
            bin: self.bin,
            child,
            status: None,
            rest: self.rest,
            metrics: self.metrics,
            host: self.host,
            stdout: lines,
            stdout_closed: closed,
            reader: Some(reader),
            job_id,
            stderr,
            _dir: dir,
        }
    }

    /// Starts `ferry run` (or `ferry run --jobmanager`) and waits for its
    /// job id; panics with its output if it ends first.
    pub fn start(self) -> FerryProcess {
        let p = self.spawn();
        p.job_id_within(START_TIMEOUT);
        p
    }

    /// Starts a process with a REST API (`ferry server`) and waits until the
    /// API accepts connections.
    pub fn start_server(self) -> FerryProcess {
        let mut p = self.spawn();
        p.wait_rest(Duration::from_secs(30));
        p
    }
}
