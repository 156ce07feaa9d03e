//! [`MiniCluster`]: 1 or 3 Kudu masters and N tablet servers on loopback.
//!
//! A cluster lives in its own folder (`<home>/clusters/<name>/`), one
//! sub-folder per daemon (`master-0`, `ts-2`, ...) holding its WAL, data, logs
//! and the info file the daemon writes once it is up. `cluster.json` in the
//! root describes the daemons, so a detached cluster (`ferry-testkit up`) can
//! be found again by name to be inspected or torn down.
//!
//! Dropping an attached cluster kills every daemon and removes its folder;
//! if the thread is panicking the folder is kept and its path printed, so the
//! daemon logs of a failed test can be read.

use crate::binaries::KuduBinaries;
use crate::net::{self, Block};
use crate::process;
use crate::{home_dir, io_err, Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long one daemon may take to come up (the Java harness allows 70 s).
const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(70);
/// How long a graceful stop may take before the daemon is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// Master or tablet server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DaemonKind {
    Master,
    TabletServer,
}

impl DaemonKind {
    fn prefix(self) -> &'static str {
        match self {
            DaemonKind::Master => "master",
            DaemonKind::TabletServer => "ts",
        }
    }
}

/// One daemon of a cluster, as recorded in `cluster.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Daemon {
    pub kind: DaemonKind,
    pub index: usize,
    /// `master-0`, `ts-1`, ...: also the name of its folder.
    pub id: String,
    /// RPC address, `127.a.b.c:port`.
    pub rpc_addr: String,
    /// Web server address (JSON metrics at `/metrics`).
    pub http_addr: String,
    /// The daemon's folder.
    pub dir: PathBuf,
    /// Full argument list after the `kudu` executable.
    pub args: Vec<String>,
    /// Pid of the running process, if started.
    pub pid: Option<u32>,
}

impl Daemon {
    /// Folder holding the daemon's glog files and captured stdout/stderr.
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    fn info_file(&self) -> PathBuf {
        self.dir.join("info.json")
    }
}

/// The persistent description of a cluster (`<root>/cluster.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterInfo {
    pub name: String,
    pub root: PathBuf,
    pub detached: bool,
    pub masters: Vec<Daemon>,
    pub tservers: Vec<Daemon>,
}

impl ClusterInfo {
    /// Comma-separated master RPC addresses.
    pub fn master_addrs_joined(&self) -> String {
        self.masters
            .iter()
            .map(|d| d.rpc_addr.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn daemons(&self) -> impl Iterator<Item = &Daemon> {
        self.masters.iter().chain(self.tservers.iter())
    }
}

/// Builds and starts a [`MiniCluster`].
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    name: Option<String>,
    masters: usize,
    tservers: usize,
    master_flags: Vec<String>,
    tserver_flags: Vec<String>,
    detached: bool,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            name: None,
            masters: 1,
            tservers: 3,
            master_flags: Vec::new(),
            tserver_flags: Vec::new(),
            detached: false,
        }
    }
}

impl ClusterBuilder {
    /// Names the cluster (its folder is `<home>/clusters/<name>`); by default
    /// a unique name is made up.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Number of masters: 1 (default) or 3.
    pub fn masters(mut self, n: usize) -> Self {
        self.masters = n;
        self
    }

    /// Number of tablet servers (default 3).
    pub fn tservers(mut self, n: usize) -> Self {
        self.tservers = n;
        self
    }

    /// An extra master flag, e.g. `--rpc_encryption=required`. Extra flags
    /// come last, so they override the kit's own.
    pub fn master_flag(mut self, flag: impl Into<String>) -> Self {
        self.master_flags.push(flag.into());
        self
    }

    /// An extra tablet server flag, e.g. `--tablet_history_max_age_sec=5`.
    pub fn tserver_flag(mut self, flag: impl Into<String>) -> Self {
        self.tserver_flags.push(flag.into());
        self
    }

    /// The same extra flag for masters and tablet servers.
    pub fn flag(self, flag: impl Into<String>) -> Self {
        let flag = flag.into();
        self.master_flag(flag.clone()).tserver_flag(flag)
    }

    /// Detached clusters outlive this process (for `ferry-testkit up`).
    pub fn detached(mut self, detached: bool) -> Self {
        self.detached = detached;
        self
    }

    /// Starts every daemon and waits until all tablet servers are
    /// registered with the leader master.
    pub fn start(self) -> Result<MiniCluster> {
        if self.masters != 1 && self.masters != 3 {
            return Err(Error::Invalid(format!(
                "a cluster has 1 or 3 masters, not {}",
                self.masters
            )));
        }
        let bins = KuduBinaries::get()?.clone();
        let name = match &self.name {
            Some(n) => validate_name(n)?,
            None => unique_name(),
        };
        let root = home_dir().join("clusters").join(&name);
        prepare_root(&name, &root)?;
        let block = Block::allocate(self.masters, self.tservers).ok_or_else(|| {
            Error::NotReady("no free 127.x.y.0/24 loopback block with free Kudu ports".into())
        })?;
        let info = plan(&self, name, root, block);
        let mut cluster = MiniCluster {
            info,
            bins,
            children: HashMap::new(),
            owned: true,
        };
        cluster.save()?;
        let ids: Vec<(DaemonKind, usize)> =
            cluster.info.daemons().map(|d| (d.kind, d.index)).collect();
        for (kind, i) in ids {
            cluster.spawn_daemon(kind, i)?;
        }
        for (kind, i) in cluster
            .info
            .daemons()
            .map(|d| (d.kind, d.index))
            .collect::<Vec<_>>()
        {
            cluster.wait_daemon_up(kind, i)?;
        }
        let expected = self.tservers;
        cluster.wait_for(
            Duration::from_secs(70),
            "all tablet servers registered",
            |c| Ok(c.tserver_status()?.iter().filter(|t| t.live).count() == expected),
        )?;
        cluster.save()?;
        Ok(cluster)
    }
}

fn validate_name(name: &str) -> Result<String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(name.to_string())
    } else {
        Err(Error::Invalid(format!(
            "cluster name '{name}' must be 1-64 characters of [A-Za-z0-9_-]"
        )))
    }
}

fn unique_name() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Refuses to reuse the folder of a cluster that still runs; clears a dead one.
fn prepare_root(name: &str, root: &Path) -> Result<()> {
    if root.exists() {
        let alive = process::processes_under(root);
        if !alive.is_empty() {
            return Err(Error::Invalid(format!(
                "cluster '{name}' is already up (pids {alive:?}); run `ferry-testkit down {name}` first"
            )));
        }
        fs::remove_dir_all(root).map_err(io_err(format!("clearing {}", root.display())))?;
    }
    fs::create_dir_all(root).map_err(io_err(format!("creating {}", root.display())))
}

fn plan(b: &ClusterBuilder, name: String, root: PathBuf, block: Block) -> ClusterInfo {
    let master_rpc: Vec<String> = (0..b.masters)
        .map(|i| format!("{}:{}", block.master(i), net::MASTER_RPC_PORT))
        .collect();
    let all_masters = master_rpc.join(",");
    // Tables default to 3 replicas when there are enough tablet servers.
    let replicas = if b.tservers >= 3 { 3 } else { 1 };
    let common = |dir: &Path| -> Vec<String> {
        vec![
            format!("--fs_wal_dir={}", dir.join("wal").display()),
            format!("--fs_data_dirs={}", dir.join("data").display()),
            format!("--log_dir={}", dir.join("logs").display()),
            format!(
                "--server_dump_info_path={}",
                dir.join("info.json").display()
            ),
            "--server_dump_info_format=json".into(),
            "--time_source=system_unsync".into(),
            "--unlock_unsafe_flags".into(),
            "--unlock_experimental_flags".into(),
            "--never_fsync".into(),
            "--enable_minidumps=false".into(),
            "--redact=none".into(),
            "--logbuflevel=-1".into(),
            "--metrics_log_interval_ms=1000".into(),
        ]
    };
    let masters = (0..b.masters)
        .map(|i| {
            let id = format!("master-{i}");
            let dir = root.join(&id);
            let ip = block.master(i);
            let mut args = vec!["master".to_string(), "run".to_string()];
            args.extend(common(&dir));
            args.extend([
                format!("--rpc_bind_addresses={ip}:{}", net::MASTER_RPC_PORT),
                format!("--webserver_interface={ip}"),
                format!("--webserver_port={}", net::MASTER_HTTP_PORT),
                format!("--local_ip_for_outbound_sockets={ip}"),
                format!("--master_addresses={all_masters}"),
                format!("--default_num_replicas={replicas}"),
            ]);
            args.extend(b.master_flags.iter().cloned());
            Daemon {
                kind: DaemonKind::Master,
                index: i,
                id,
                rpc_addr: format!("{ip}:{}", net::MASTER_RPC_PORT),
                http_addr: format!("{ip}:{}", net::MASTER_HTTP_PORT),
                dir,
                args,
                pid: None,
            }
        })
        .collect();
    let tservers = (0..b.tservers)
        .map(|i| {
            let id = format!("ts-{i}");
            let dir = root.join(&id);
            let ip = block.tserver(i);
            let mut args = vec!["tserver".to_string(), "run".to_string()];
            args.extend(common(&dir));
            args.extend([
                format!("--rpc_bind_addresses={ip}:{}", net::TSERVER_RPC_PORT),
                format!("--webserver_interface={ip}"),
                format!("--webserver_port={}", net::TSERVER_HTTP_PORT),
                format!("--local_ip_for_outbound_sockets={ip}"),
                format!("--tserver_master_addrs={all_masters}"),
            ]);
            args.extend(b.tserver_flags.iter().cloned());
            Daemon {
                kind: DaemonKind::TabletServer,
                index: i,
                id,
                rpc_addr: format!("{ip}:{}", net::TSERVER_RPC_PORT),
                http_addr: format!("{ip}:{}", net::TSERVER_HTTP_PORT),
                dir,
                args,
                pid: None,
            }
        })
        .collect();
    ClusterInfo {
        name,
        root,
        detached: b.detached,
        masters,
        tservers,
    }
}

/// A tablet server as the leader master sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TserverStatus {
    pub uuid: String,
    pub rpc_addr: String,
    /// Time since its last heartbeat, as the master reports it.
    pub since_heartbeat: Duration,
    /// Heartbeating recently (within 3 s).
    pub live: bool,
}

/// A master and its role as reported by `kudu master list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterStatus {
    pub rpc_addr: String,
    pub role: String,
}

/// A running cluster. Dropping it tears it down unless it was detached.
pub struct MiniCluster {
    info: ClusterInfo,
    bins: KuduBinaries,
    children: HashMap<String, Child>,
    owned: bool,
}

impl std::fmt::Debug for MiniCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniCluster")
            .field("name", &self.info.name)
            .field("masters", &self.info.master_addrs_joined())
            .finish()
    }
}

impl MiniCluster {
    /// A builder for 1 master and 3 tablet servers.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Finds a cluster started earlier (e.g. by `ferry-testkit up`) by name.
    /// The returned handle does not tear the cluster down on drop.
    pub fn attach(name: &str) -> Result<MiniCluster> {
        let name = validate_name(name)?;
        let file = home_dir().join("clusters").join(&name).join("cluster.json");
        let text = fs::read_to_string(&file).map_err(|_| {
            Error::Invalid(format!(
                "no cluster named '{name}' ({} missing)",
                file.display()
            ))
        })?;
        let info: ClusterInfo = serde_json::from_str(&text).map_err(|e| {
            Error::Invalid(format!(
                "{} is not a cluster description: {e}",
                file.display()
            ))
        })?;
        Ok(MiniCluster {
            info,
            bins: KuduBinaries::get()?.clone(),
            children: HashMap::new(),
            owned: false,
        })
    }

    /// Names of the clusters recorded under the kit's home folder.
    pub fn list_names() -> Vec<String> {
        let Ok(entries) = fs::read_dir(home_dir().join("clusters")) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("cluster.json").exists())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The cluster's folder.
    pub fn root(&self) -> &Path {
        &self.info.root
    }

    /// The persistent description.
    pub fn info(&self) -> &ClusterInfo {
        &self.info
    }

    /// Master RPC addresses (`127.a.b.c:7051`).
    pub fn master_addrs(&self) -> Vec<String> {
        self.info
            .masters
            .iter()
            .map(|d| d.rpc_addr.clone())
            .collect()
    }

    /// Comma-separated master addresses, as Kudu tools take them.
    pub fn master_addrs_joined(&self) -> String {
        self.info.master_addrs_joined()
    }

    /// Tablet server RPC addresses.
    pub fn tserver_addrs(&self) -> Vec<String> {
        self.info
            .tservers
            .iter()
            .map(|d| d.rpc_addr.clone())
            .collect()
    }

    /// The recorded daemon of this kind and index.
    pub fn daemon(&self, kind: DaemonKind, index: usize) -> Result<&Daemon> {
        let list = match kind {
            DaemonKind::Master => &self.info.masters,
            DaemonKind::TabletServer => &self.info.tservers,
        };
        list.get(index).ok_or_else(|| {
            Error::Invalid(format!(
                "cluster '{}' has no {}-{index}",
                self.info.name,
                kind.prefix()
            ))
        })
    }

    fn daemon_mut(&mut self, kind: DaemonKind, index: usize) -> Result<&mut Daemon> {
        self.daemon(kind, index)?;
        let list = match kind {
            DaemonKind::Master => &mut self.info.masters,
            DaemonKind::TabletServer => &mut self.info.tservers,
        };
        list.get_mut(index)
            .ok_or_else(|| Error::Invalid(format!("no {}-{index}", kind.prefix())))
    }

    /// Runs the bundled `kudu` CLI with `args`.
    pub fn kudu(&self, args: &[&str]) -> Result<Output> {
        self.bins
            .command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(io_err(format!("running kudu {}", args.join(" "))))
    }

    /// Runs the `kudu` CLI and returns its stdout, or an error with its
    /// stderr if it exited non-zero.
    pub fn kudu_ok(&self, args: &[&str]) -> Result<String> {
        let out = self.kudu(args)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(Error::NotReady(format!(
                "kudu {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Tablet servers known to the leader master (`kudu tserver list`).
    pub fn tserver_status(&self) -> Result<Vec<TserverStatus>> {
        let masters = self.master_addrs_joined();
        let out = self.kudu_ok(&[
            "tserver",
            "list",
            &masters,
            "-columns=uuid,rpc-addresses,heartbeat",
            "-format=json",
            "-timeout_ms=5000",
        ])?;
        let rows: Vec<HashMap<String, serde_json::Value>> = serde_json::from_str(out.trim())
            .map_err(|e| {
                Error::NotReady(format!(
                    "unexpected `kudu tserver list` output {out:?}: {e}"
                ))
            })?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let text = |k: &str| {
                    row.get(k)
                        .map(|v| {
                            v.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| v.to_string())
                        })
                        .unwrap_or_default()
                };
                let since_heartbeat = parse_heartbeat(&text("heartbeat"));
                TserverStatus {
                    uuid: text("uuid"),
                    rpc_addr: text("rpc-addresses"),
                    since_heartbeat,
                    live: since_heartbeat < Duration::from_secs(3),
                }
            })
            .collect())
    }

    /// Masters and their Raft roles (`kudu master list`).
    pub fn master_status(&self) -> Result<Vec<MasterStatus>> {
        let masters = self.master_addrs_joined();
        let out = self.kudu_ok(&[
            "master",
            "list",
            &masters,
            "-columns=rpc-addresses,role",
            "-format=json",
            "-timeout_ms=5000",
        ])?;
        let rows: Vec<HashMap<String, serde_json::Value>> = serde_json::from_str(out.trim())
            .map_err(|e| {
                Error::NotReady(format!("unexpected `kudu master list` output {out:?}: {e}"))
            })?;
        Ok(rows
            .into_iter()
            .map(|row| MasterStatus {
                rpc_addr: row
                    .get("rpc-addresses")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string(),
                role: row
                    .get("role")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string(),
            })
            .collect())
    }

    /// Index of the current leader master.
    pub fn leader_master(&self) -> Result<usize> {
        let status = self.master_status()?;
        let leader = status
            .iter()
            .find(|m| m.role == "LEADER")
            .ok_or_else(|| Error::NotReady(format!("no leader master: {status:?}")))?;
        self.info
            .masters
            .iter()
            .position(|d| d.rpc_addr == leader.rpc_addr)
            .ok_or_else(|| {
                Error::NotReady(format!("leader {} is not one of ours", leader.rpc_addr))
            })
    }

    /// Polls `check` every 250 ms until it returns true or `timeout` passes.
    /// Errors from `check` count as "not yet"; the last one is reported.
    pub fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&Self) -> Result<bool>,
    ) -> Result<()> {
        let start = Instant::now();
        loop {
            let last = match check(self) {
                Ok(true) => return Ok(()),
                Ok(false) => "condition false".to_string(),
                Err(e) => e.to_string(),
            };
            if start.elapsed() > timeout {
                return Err(Error::NotReady(format!(
                    "cluster '{}': {what} not reached within {timeout:?} ({last}); logs under {}",
                    self.info.name,
                    self.info.root.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

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

    fn teardown(&mut self, keep_files: bool) -> Result<()> {
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

    fn spawn_daemon(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
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
    fn wait_daemon_up(&mut self, kind: DaemonKind, index: usize) -> Result<()> {
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

    fn save(&self) -> Result<()> {
        let path = self.info.root.join("cluster.json");
        let tmp = self.info.root.join("cluster.json.tmp");
        let text = serde_json::to_string_pretty(&self.info)
            .map_err(|e| Error::Invalid(format!("serialising cluster description: {e}")))?;
        fs::write(&tmp, text).map_err(io_err(format!("writing {}", tmp.display())))?;
        fs::rename(&tmp, &path).map_err(io_err(format!("writing {}", path.display())))
    }
}

impl Drop for MiniCluster {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let panicking = std::thread::panicking();
        if panicking {
            eprintln!(
                "ferry-testkit: test failed; daemon logs of cluster '{}' kept under {}",
                self.info.name,
                self.info.root.display()
            );
            for d in self.info.daemons() {
                eprintln!("  {} ({}): {}", d.id, d.rpc_addr, d.log_dir().display());
            }
        }
        if let Err(e) = self.teardown(panicking) {
            eprintln!("ferry-testkit: teardown of '{}': {e}", self.info.name);
        }
    }
}

/// `kudu tserver list` prints the heartbeat age like `0.523s`.
fn parse_heartbeat(text: &str) -> Duration {
    let t = text.trim();
    let secs = t
        .strip_suffix("ms")
        .and_then(|v| v.parse::<f64>().ok().map(|ms| ms / 1000.0))
        .or_else(|| t.strip_suffix('s').and_then(|v| v.parse::<f64>().ok()))
        .or_else(|| t.parse::<f64>().ok());
    match secs {
        Some(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s),
        _ => Duration::MAX,
    }
}

fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_formats() {
        assert_eq!(parse_heartbeat("0.5s"), Duration::from_millis(500));
        assert_eq!(parse_heartbeat("250ms"), Duration::from_millis(250));
        assert_eq!(parse_heartbeat("garbage"), Duration::MAX);
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("demo_1-a").is_ok());
        assert!(validate_name("../x").is_err());
        assert!(validate_name("").is_err());
    }
}
