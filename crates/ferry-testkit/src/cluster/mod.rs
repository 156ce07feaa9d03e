//! [`MiniCluster`]: 1 or 3 Kudu masters and N tablet servers on loopback.
//!
//! A cluster lives in its own folder (`<home>/clusters/<name>/`), one
//! sub-folder per daemon (`master-0`, `ts-2`, ...) holding its WAL, data, logs
//! and the info file the daemon writes once it is up. `cluster.json` in the
//! root describes the daemons, so a detached cluster (`ferry-testkit up`) can
//! be found again by name to be inspected or torn down.
//!
//! A cluster built with [`ClusterBuilder::kerberos`] requires Kerberos
//! (and encryption) on every RPC; see [`kerberos`] for how its daemons and
//! the kit's own CLI calls get their credentials.
//!
//! Dropping an attached cluster kills every daemon and removes its folder;
//! if the thread is panicking the folder is kept and its path printed, so the
//! daemon logs of a failed test can be read.

mod builder;
mod control;
pub mod kerberos;
mod query;

pub use builder::ClusterBuilder;
pub use kerberos::{KerberosInfo, TESTKIT_PRINCIPAL};
pub use query::{MasterStatus, TserverStatus};

use crate::binaries::{KuduBinaries, KuduVersion};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Child;

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
    /// Environment variables beyond the binaries' own (Kerberos), set
    /// again on every restart.
    #[serde(default)]
    pub env: Vec<(String, String)>,
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
    /// Set for a Kerberized cluster.
    #[serde(default)]
    pub kerberos: Option<KerberosInfo>,
    /// The Kudu release the daemons run (1.17.1 for clusters recorded
    /// before the kit knew more than one).
    #[serde(default = "legacy_version")]
    pub version: KuduVersion,
}

fn legacy_version() -> KuduVersion {
    KuduVersion::V1_17_1
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
        let info: ClusterInfo =
            crate::load_description("clusters", &name, "cluster.json", "cluster")?;
        let bins = KuduBinaries::of(info.version)?.clone();
        Ok(MiniCluster {
            info,
            bins,
            children: HashMap::new(),
            owned: false,
        })
    }

    /// Names of the clusters recorded under the kit's home folder.
    pub fn list_names() -> Vec<String> {
        crate::recorded_names("clusters", "cluster.json")
    }

    /// The Kudu release the cluster runs.
    pub fn version(&self) -> KuduVersion {
        self.info.version
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

    /// The cluster's loopback block, `127.a.b.0/24`: every daemon's address
    /// is in it, so one rule on it cuts the whole cluster off.
    pub fn subnet(&self) -> String {
        let addr = self
            .info
            .masters
            .first()
            .map(|d| d.rpc_addr.as_str())
            .unwrap_or_default();
        let ip = addr.split(':').next().unwrap_or_default();
        let prefix: Vec<&str> = ip.split('.').take(3).collect();
        format!("{}.0/24", prefix.join("."))
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

    fn save(&self) -> Result<()> {
        crate::save_description(&self.info.root, "cluster.json", &self.info)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(validate_name("demo_1-a").is_ok());
        assert!(validate_name("../x").is_err());
        assert!(validate_name("").is_err());
    }
}
