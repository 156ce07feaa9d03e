//! Real Apache Kudu clusters on loopback, for ferry's tests, demos and
//! benchmarks.
//!
//! Nothing that claims to work with Kudu counts unless it ran against real
//! Kudu servers, so this crate starts real `kudu master` / `kudu tserver`
//! processes from the `org.apache.kudu:kudu-binary` jar.
//!
//! # Layout
//! - [`binaries`]: fetch the jar with Maven, unpack it into a cache folder
//!   that survives between runs, and build the daemon environment.
//! - [`net`]: one private loopback block (`127.a.b.0/24`) per cluster, so
//!   daemons keep their address across restarts and clusters never collide.
//! - [`process`]: spawning daemons so they die with the test process, and
//!   finding leftover processes.
//! - [`cluster`]: [`MiniCluster`] — start 1 or 3 masters and N tablet servers,
//!   wait until they are registered, stop/kill/restart/pause single daemons,
//!   tear everything down on drop (also when a test panics).
//! - [`fault`]: faults to survive — a network namespace whose traffic can be
//!   dropped, a small filesystem that can turn read-only.
//! - [`s3`]: [`S3Server`] — a real S3-compatible server (`s3s-fs`) on
//!   loopback, for state on object stores; stop/start keeps port and data.
//! - [`kafka`]: [`KafkaBroker`] — a real Apache Kafka 4.x broker (KRaft, one
//!   node) on loopback, for the Kafka connectors; stop/start keeps its data.
//! - [`kdc`]: [`Kdc`] — a real MIT Kerberos KDC on loopback with a realm of
//!   its own, for Kerberized clusters ([`ClusterBuilder::kerberos`]);
//!   stop/start simulates a KDC outage, a clock offset a skewed KDC.
//! - [`kube`]: [`KubeServer`] — a real Kubernetes API server and its etcd on
//!   loopback (built once from the Go module proxy), with RBAC identities
//!   and kubeconfigs, for Kubernetes HA; stop/restart/freeze the API server.
//! - [`zookeeper`]: [`ZooKeeperServer`] — a real Apache ZooKeeper 3.9 server
//!   (standalone) on loopback, for ZooKeeper HA; stop/start keeps port and
//!   data, pause/resume freezes it.
//!
//! # Example
//! ```no_run
//! let cluster = ferry_testkit::MiniCluster::builder().tservers(3).start()?;
//! let out = cluster.kudu(&["tserver", "list", &cluster.master_addrs_joined()])?;
//! assert!(out.status.success());
//! # Ok::<(), ferry_testkit::Error>(())
//! ```

pub mod binaries;
pub mod cluster;
pub mod fault;
pub mod kafka;
pub mod kdc;
pub mod kube;
pub mod net;
pub mod process;
pub mod s3;
mod server_process;
pub mod zookeeper;

pub use binaries::{KuduBinaries, KuduVersion};
pub use cluster::{ClusterBuilder, ClusterInfo, Daemon, DaemonKind, MiniCluster};
pub use kafka::{KafkaBroker, KafkaInfo};
pub use kdc::{Kdc, KdcBuilder, KdcInfo};
pub use kube::{KubeInfo, KubeServer};
pub use s3::{S3Info, S3Server};
pub use zookeeper::{ZooKeeperInfo, ZooKeeperKerberos, ZooKeeperServer};

use std::path::PathBuf;

/// Errors from the test kit. Each says what failed and where to look.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Kudu binaries could not be obtained or do not run on this host.
    #[error("Kudu binaries unavailable: {0}")]
    Binaries(String),
    /// A daemon failed to start or to become ready in time.
    #[error("{daemon} did not start: {reason} (logs: {logs})")]
    DaemonStart {
        daemon: String,
        reason: String,
        logs: PathBuf,
    },
    /// The cluster did not reach the expected state in time.
    #[error("cluster not ready: {0}")]
    NotReady(String),
    /// A caller asked for something the kit does not support.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A fault could not be set up or undone (a command such as `ip` or
    /// `nft` failed).
    #[error("fault: {0}")]
    Fault(String),
    /// A Kerberos tool (`kinit`, `kadmin.local`) failed; the message
    /// carries its own ("Clock skew too great", "Cannot contact any KDC").
    #[error("kerberos: {0}")]
    Kerberos(String),
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// Result alias for the test kit.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// The folder under which the kit keeps clusters and their state:
/// `$FERRY_TESTKIT_HOME`, else `<tmp>/ferry-testkit`.
pub fn home_dir() -> PathBuf {
    std::env::var_os("FERRY_TESTKIT_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("ferry-testkit"))
}

/// Writes a component's description (`cluster.json`, `s3.json`) into its
/// folder atomically (temporary file, then rename), so `attach` never reads
/// half a file.
pub(crate) fn save_description<T: serde::Serialize>(
    dir: &std::path::Path,
    file: &str,
    value: &T,
) -> Result<()> {
    let path = dir.join(file);
    let tmp = dir.join(format!("{file}.tmp"));
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::Invalid(format!("serialising {file}: {e}")))?;
    std::fs::write(&tmp, text).map_err(io_err(format!("writing {}", tmp.display())))?;
    std::fs::rename(&tmp, &path).map_err(io_err(format!("writing {}", path.display())))
}

/// Reads the description `<home>/<kind>/<name>/<file>` of a component
/// started earlier; `what` names the kind in errors ("cluster").
pub(crate) fn load_description<T: serde::de::DeserializeOwned>(
    kind: &str,
    name: &str,
    file: &str,
    what: &str,
) -> Result<T> {
    let path = home_dir().join(kind).join(name).join(file);
    let text = std::fs::read_to_string(&path).map_err(|_| {
        Error::Invalid(format!(
            "no {what} named '{name}' ({} missing)",
            path.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| {
        Error::Invalid(format!(
            "{} is not a {what} description: {e}",
            path.display()
        ))
    })
}

/// Names of the components recorded under `<home>/<kind>/`: the folders
/// that hold a `marker` description file, sorted.
pub(crate) fn recorded_names(kind: &str, marker: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(home_dir().join(kind)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(marker).exists())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}
