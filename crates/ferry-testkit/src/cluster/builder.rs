//! [`ClusterBuilder`]: choosing a cluster's shape, planning each daemon's
//! address, folder and flags, and starting it.

use super::kerberos::{self, KerberosInfo};
use super::{validate_name, ClusterInfo, Daemon, DaemonKind, MiniCluster};
use crate::binaries::{KuduBinaries, KuduVersion};
use crate::kdc::{Kdc, KdcInfo};
use crate::net::{self, Block};
use crate::process;
use crate::{home_dir, io_err, Error, Result};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Builds and starts a [`MiniCluster`].
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    name: Option<String>,
    masters: usize,
    tservers: usize,
    master_flags: Vec<String>,
    tserver_flags: Vec<String>,
    detached: bool,
    kdc: Option<KdcInfo>,
    version: Option<KuduVersion>,
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
            kdc: None,
            version: None,
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

    /// The Kudu release the daemons run (default:
    /// [`KuduVersion::default_version`]).
    pub fn version(mut self, version: KuduVersion) -> Self {
        self.version = Some(version);
        self
    }

    /// Detached clusters outlive this process (for `ferry-testkit up`).
    pub fn detached(mut self, detached: bool) -> Self {
        self.detached = detached;
        self
    }

    /// Kerberizes the cluster against `kdc`: every daemon logs in as
    /// `kudu/<its ip>` and requires authentication and encryption on every
    /// RPC (see [`kerberos`](super::kerberos)). The KDC must outlive the
    /// cluster: declare it first in a test, so it is dropped last.
    pub fn kerberos(mut self, kdc: &Kdc) -> Self {
        self.kdc = Some(kdc.info().clone());
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
        let version = match self.version {
            Some(v) => v,
            None => KuduVersion::default_version()?,
        };
        let bins = KuduBinaries::of(version)?.clone();
        let name = match &self.name {
            Some(n) => validate_name(n)?,
            None => unique_name(),
        };
        let root = home_dir().join("clusters").join(&name);
        prepare_root(&name, &root)?;
        let block = Block::allocate(self.masters, self.tservers).ok_or_else(|| {
            Error::NotReady("no free 127.x.y.0/24 loopback block with free Kudu ports".into())
        })?;
        let krb = self.kdc.as_ref().map(|k| KerberosInfo::new(k, &root));
        let info = plan(&self, name, root, block, krb, version);
        let mut cluster = MiniCluster {
            info,
            bins,
            children: HashMap::new(),
            owned: true,
        };
        cluster.save()?;
        if let Some(kdc) = &self.kdc {
            kerberos::provision(kdc, &cluster.info)?;
        }
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
        cluster.wait_registered()?;
        cluster.save()?;
        Ok(cluster)
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

/// Lays out every daemon of the cluster: address, folder and flags.
fn plan(
    b: &ClusterBuilder,
    name: String,
    root: PathBuf,
    block: Block,
    kerberos: Option<KerberosInfo>,
    version: KuduVersion,
) -> ClusterInfo {
    let all_masters = (0..b.masters)
        .map(|i| format!("{}:{}", block.master(i), net::MASTER_RPC_PORT))
        .collect::<Vec<_>>()
        .join(",");
    // Tables default to 3 replicas when there are enough tablet servers.
    let replicas = if b.tservers >= 3 { 3 } else { 1 };
    let masters = (0..b.masters)
        .map(|i| {
            let ip = block.master(i);
            let role_flags = [
                format!("--master_addresses={all_masters}"),
                format!("--default_num_replicas={replicas}"),
            ];
            let port = (net::MASTER_RPC_PORT, net::MASTER_HTTP_PORT);
            let d = plan_daemon(
                DaemonKind::Master,
                i,
                &root,
                ip,
                port,
                role_flags,
                &b.master_flags,
            );
            with_kerberos(d, ip, kerberos.as_ref(), b.master_flags.len())
        })
        .collect();
    let tservers = (0..b.tservers)
        .map(|i| {
            let ip = block.tserver(i);
            let role_flags = [format!("--tserver_master_addrs={all_masters}")];
            let port = (net::TSERVER_RPC_PORT, net::TSERVER_HTTP_PORT);
            let d = plan_daemon(
                DaemonKind::TabletServer,
                i,
                &root,
                ip,
                port,
                role_flags,
                &b.tserver_flags,
            );
            with_kerberos(d, ip, kerberos.as_ref(), b.tserver_flags.len())
        })
        .collect();
    ClusterInfo {
        name,
        root,
        detached: b.detached,
        masters,
        tservers,
        kerberos,
        version,
    }
}

/// One daemon: `kudu master|tserver run`, the flags every daemon gets, its
/// addresses, the flags of its role, then those the caller added.
fn plan_daemon(
    kind: DaemonKind,
    index: usize,
    root: &Path,
    ip: std::net::Ipv4Addr,
    (rpc_port, http_port): (u16, u16),
    role_flags: impl IntoIterator<Item = String>,
    extra_flags: &[String],
) -> Daemon {
    let id = format!("{}-{index}", kind.prefix());
    let dir = root.join(&id);
    let role = match kind {
        DaemonKind::Master => "master",
        DaemonKind::TabletServer => "tserver",
    };
    let mut args = vec![role.to_string(), "run".to_string()];
    args.extend(common_flags(&dir));
    args.extend([
        format!("--rpc_bind_addresses={ip}:{rpc_port}"),
        format!("--webserver_interface={ip}"),
        format!("--webserver_port={http_port}"),
        format!("--local_ip_for_outbound_sockets={ip}"),
    ]);
    args.extend(role_flags);
    args.extend(extra_flags.iter().cloned());
    Daemon {
        kind,
        index,
        id,
        rpc_addr: format!("{ip}:{rpc_port}"),
        http_addr: format!("{ip}:{http_port}"),
        dir,
        args,
        pid: None,
        env: Vec::new(),
    }
}

/// Kerberizes a planned daemon: its Kerberos flags go before the caller's
/// `extra` flags (which thus still override them), and its environment.
fn with_kerberos(
    mut d: Daemon,
    ip: std::net::Ipv4Addr,
    kerberos: Option<&KerberosInfo>,
    extra: usize,
) -> Daemon {
    if let Some(krb) = kerberos {
        let at = d.args.len().saturating_sub(extra);
        d.args.splice(at..at, krb.daemon_flags(ip, &d.dir));
        d.env = krb.daemon_env(&d.dir);
    }
    d
}

/// Flags every daemon gets: its folders, and settings for a fast, local,
/// unsynchronised test cluster.
fn common_flags(dir: &Path) -> Vec<String> {
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
        // Not an 8 MiB WAL segment up front per tablet: a cluster with a
        // thousand tablets would take gigabytes of disk before any row.
        "--log_preallocate_segments=false".into(),
        "--enable_minidumps=false".into(),
        "--redact=none".into(),
        "--logbuflevel=-1".into(),
        "--metrics_log_interval_ms=1000".into(),
    ]
}
