//! [`KubeServer`]: a real Kubernetes API server with its etcd on loopback,
//! for ferry's Kubernetes HA tests (no kubelet: ferry processes play the
//! pods).
//!
//! `etcd` and `kube-apiserver` are built from the Go module proxy once per
//! machine ([`install`]). A server lives in `<home>/kube/<name>/`:
//! `etcd/` (its data), `certs/` (the serving certificate the API server
//! generates for itself, self-signed, and `ca.crt` cut from it),
//! `tokens.csv` (static bearer tokens), `sa.key` (service-account signing
//! key), `kubeconfig-<identity>` for each [`Identity`], the two logs and
//! `kube.json`, its description. Authorization is RBAC: the kit creates the
//! namespace [`NAMESPACE`] and binds [`Identity::Ferry`] to a Role with
//! get/create/update on `leases` there, [`Identity::Reader`] to one with
//! get only (the "missing RBAC permission" case).
//!
//! ```no_run
//! let mut kube = ferry_testkit::KubeServer::start("ha")?;
//! println!("{}", kube.kubeconfig(ferry_testkit::kube::Identity::Ferry).display());
//! kube.stop_api()?; // an API server outage; etcd keeps the objects
//! kube.restart_api()?;
//! # Ok::<(), ferry_testkit::Error>(())
//! ```

mod install;
mod setup;

pub use install::{go_module_dir, install, kube_bin_dir, ETCD_VERSION, KUBE_VERSION};
pub use setup::Identity;

use crate::s3::{free_port, validate_component_name};
use crate::{home_dir, io_err, process, Error, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The namespace the kit prepares for ferry's Lease objects.
pub const NAMESPACE: &str = "ferry";
// First boot: etcd, then the API server's bootstrap (RBAC roles, priority
// levels) on a loaded 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The persistent description of a server (`<root>/kube.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KubeInfo {
    pub name: String,
    pub root: PathBuf,
    /// The API server's HTTPS port on 127.0.0.1.
    pub port: u16,
    pub etcd_client_port: u16,
    pub etcd_peer_port: u16,
    pub detached: bool,
    pub etcd_pid: Option<u32>,
    pub api_pid: Option<u32>,
    /// Bearer tokens by identity (admin, ferry, reader).
    pub tokens: [String; 3],
}

impl KubeInfo {
    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

/// A running (or stopped) API server and its etcd. Dropping an attached
/// one kills both and removes its folder (kept, with the logs, when the
/// thread panics).
pub struct KubeServer {
    /// Behind a lock: tests share one server and one of them stops it.
    inner: Mutex<Inner>,
    owned: bool,
}

struct Inner {
    info: KubeInfo,
    etcd: Option<Child>,
    api: Option<Child>,
}

impl std::fmt::Debug for KubeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = self.info();
        f.debug_struct("KubeServer")
            .field("name", &info.name)
            .field("server", &info.server_url())
            .finish()
    }
}

impl KubeServer {
    /// Starts a server named `name` that dies with this process.
    pub fn start(name: &str) -> Result<KubeServer> {
        Self::launch(name, false)
    }

    /// Starts a server that outlives this process (`ferry-testkit kube up`).
    pub fn start_detached(name: &str) -> Result<KubeServer> {
        Self::launch(name, true)
    }

    fn launch(name: &str, detached: bool) -> Result<KubeServer> {
        let name = validate_component_name("Kubernetes API server", name)?;
        kube_bin_dir()?;
        let root = home_dir().join("kube").join(&name);
        if let Ok(existing) = Self::attach(&name) {
            if existing.is_running() {
                return Err(Error::Invalid(format!(
                    "a Kubernetes API server named '{name}' is running ({}); `ferry-testkit kube down --name {name}` first",
                    existing.server_url()
                )));
            }
        }
        if root.exists() {
            fs::remove_dir_all(&root).map_err(io_err(format!("clearing {}", root.display())))?;
        }
        fs::create_dir_all(root.join("certs"))
            .map_err(io_err(format!("creating {}", root.display())))?;
        let info = KubeInfo {
            name,
            root,
            port: free_port()?,
            etcd_client_port: free_port()?,
            etcd_peer_port: free_port()?,
            detached,
            etcd_pid: None,
            api_pid: None,
            tokens: setup::new_tokens()?,
        };
        setup::write_credentials(&info)?;
        let server = KubeServer::of(info, !detached);
        server.restart()?;
        let info = server.info();
        setup::write_kubeconfigs(&info)?;
        setup::grant_roles(&info)?;
        Ok(server)
    }

    /// Finds a server started earlier by name; the handle does not tear it
    /// down on drop.
    pub fn attach(name: &str) -> Result<KubeServer> {
        let name = validate_component_name("Kubernetes API server", name)?;
        let info: KubeInfo =
            crate::load_description("kube", &name, "kube.json", "Kubernetes API server")?;
        Ok(KubeServer::of(info, false))
    }

    fn of(info: KubeInfo, owned: bool) -> KubeServer {
        KubeServer {
            inner: Mutex::new(Inner {
                info,
                etcd: None,
                api: None,
            }),
            owned,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Names of the servers recorded under the kit's home folder.
    pub fn list_names() -> Vec<String> {
        crate::recorded_names("kube", "kube.json")
    }

    /// The description (ports, folders, tokens, pids).
    pub fn info(&self) -> KubeInfo {
        self.lock().info.clone()
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> String {
        self.lock().info.server_url()
    }

    /// The kubeconfig file of `identity` (server, CA, token, namespace
    /// [`NAMESPACE`]).
    pub fn kubeconfig(&self, identity: Identity) -> PathBuf {
        setup::kubeconfig_path(&self.lock().info, identity)
    }

    /// Sends one request to the API server as the admin (through `curl`);
    /// returns the HTTP status and the body.
    pub fn request(&self, method: &str, path: &str) -> Result<(u16, String)> {
        setup::request(&self.info(), method, path, None)
    }

    /// The API server's pid while it runs.
    pub fn api_pid(&self) -> Option<u32> {
        self.lock().info.api_pid
    }

    /// Whether both processes are alive.
    pub fn is_running(&self) -> bool {
        let inner = self.lock();
        inner.info.etcd_pid.is_some_and(process::alive)
            && inner.info.api_pid.is_some_and(process::alive)
    }

    /// Starts whichever of etcd and the API server is not running, on their
    /// ports and data, and waits until the API server is ready.
    pub fn restart(&self) -> Result<()> {
        let mut inner = self.lock();
        if !inner.info.etcd_pid.is_some_and(process::alive) {
            inner.start_etcd()?;
        }
        inner.restart_api()
    }

    /// Starts the API server again (same port, certificates and etcd) and
    /// waits until it is ready; no-op when it runs.
    pub fn restart_api(&self) -> Result<()> {
        self.lock().restart_api()
    }

    /// Kills the API server (SIGKILL); etcd keeps the objects for
    /// [`restart_api`](Self::restart_api).
    pub fn stop_api(&self) -> Result<()> {
        let mut inner = self.lock();
        let Inner { info, api, .. } = &mut *inner;
        process::kill_and_reap(&mut info.api_pid, api)?;
        inner.save()
    }

    /// Freezes the API server (SIGSTOP): connections hang instead of being
    /// refused.
    pub fn pause_api(&self) -> Result<()> {
        self.signal_api(libc::SIGSTOP)
    }

    /// Thaws a paused API server (SIGCONT).
    pub fn resume_api(&self) -> Result<()> {
        self.signal_api(libc::SIGCONT)
    }

    fn signal_api(&self, signal: i32) -> Result<()> {
        match self.api_pid() {
            Some(pid) => process::signal(pid, signal).map_err(io_err(format!("signalling {pid}"))),
            None => Err(Error::Invalid("the API server is not running".to_string())),
        }
    }

    /// Kills both processes; ports and data are kept for
    /// [`restart`](Self::restart).
    pub fn stop(&self) -> Result<()> {
        self.lock().stop()
    }

    /// Stops the server and removes its folder.
    pub fn destroy(mut self) -> Result<()> {
        self.owned = false;
        self.stop()?;
        let root = self.info().root;
        fs::remove_dir_all(&root).map_err(io_err(format!("removing {}", root.display())))
    }

    /// Stops owning the server: it keeps running after this handle.
    pub fn detach(mut self) -> KubeInfo {
        self.owned = false;
        let mut inner = self.lock();
        inner.etcd = None;
        inner.api = None;
        inner.info.clone()
    }

    /// The folder of the server's files.
    pub fn root(&self) -> PathBuf {
        self.info().root
    }
}

impl Inner {
    fn stop(&mut self) -> Result<()> {
        // A frozen process dies on SIGKILL too.
        process::kill_and_reap(&mut self.info.api_pid, &mut self.api)?;
        process::kill_and_reap(&mut self.info.etcd_pid, &mut self.etcd)?;
        self.save()
    }

    fn save(&self) -> Result<()> {
        crate::save_description(&self.info.root, "kube.json", &self.info)
    }

    fn log_files(&self, file: &str) -> Result<(fs::File, fs::File)> {
        let path = self.info.root.join(file);
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err(format!("opening {}", path.display())))?;
        let err = out
            .try_clone()
            .map_err(io_err(format!("opening {}", path.display())))?;
        Ok((out, err))
    }

    fn start_etcd(&mut self) -> Result<()> {
        let (out, err) = self.log_files("etcd.log")?;
        let client = format!("http://127.0.0.1:{}", self.info.etcd_client_port);
        let peer = format!("http://127.0.0.1:{}", self.info.etcd_peer_port);
        let mut cmd = Command::new(kube_bin_dir()?.join("etcd"));
        cmd.arg("--name=ferry")
            .arg(format!(
                "--data-dir={}",
                self.info.root.join("etcd").display()
            ))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=ferry={peer}"))
            // Test data: an fsync per write only slows a shared machine.
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = process::spawn(cmd, self.info.detached).map_err(io_err("starting etcd"))?;
        self.info.etcd_pid = Some(child.id());
        self.etcd = Some(child);
        self.save()
    }

    fn restart_api(&mut self) -> Result<()> {
        if self.info.api_pid.is_some_and(process::alive) {
            return Ok(());
        }
        let (out, err) = self.log_files("apiserver.log")?;
        let root = &self.info.root;
        let mut cmd = Command::new(kube_bin_dir()?.join("kube-apiserver"));
        cmd.arg(format!(
            "--etcd-servers=http://127.0.0.1:{}",
            self.info.etcd_client_port
        ))
        .arg("--bind-address=127.0.0.1")
        .arg("--advertise-address=127.0.0.1")
        .arg(format!("--secure-port={}", self.info.port))
        .arg(format!("--cert-dir={}", root.join("certs").display()))
        .arg(format!(
            "--token-auth-file={}",
            root.join("tokens.csv").display()
        ))
        .arg("--authorization-mode=RBAC")
        .arg("--service-account-issuer=https://kubernetes.default.svc")
        .arg(format!(
            "--service-account-key-file={}",
            root.join("sa.key").display()
        ))
        .arg(format!(
            "--service-account-signing-key-file={}",
            root.join("sa.key").display()
        ))
        // Service IPs are only numbers in objects here: no network is set up.
        .arg("--service-cluster-ip-range=10.96.0.0/24")
        .arg("--endpoint-reconciler-type=none")
        .arg("--profiling=false")
        .arg("--v=1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
        let child =
            process::spawn(cmd, self.info.detached).map_err(io_err("starting kube-apiserver"))?;
        self.info.api_pid = Some(child.id());
        self.api = Some(child);
        self.save()?;
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let log = self.info.root.join("apiserver.log");
        loop {
            if setup::ca_ready(&self.info)? && setup::ready(&self.info) {
                return Ok(());
            }
            let exited = |child: &mut Option<Child>, pid: Option<u32>| match child {
                Some(child) => matches!(child.try_wait(), Ok(Some(_))),
                None => !pid.is_some_and(process::alive),
            };
            let etcd_gone = exited(&mut self.etcd, self.info.etcd_pid);
            let api_gone = exited(&mut self.api, self.info.api_pid);
            if etcd_gone || api_gone || Instant::now() > deadline {
                return Err(Error::DaemonStart {
                    daemon: format!("Kubernetes API server '{}'", self.info.name),
                    reason: match (etcd_gone, api_gone) {
                        (true, _) => "etcd exited (see etcd.log)".to_string(),
                        (_, true) => "kube-apiserver exited".to_string(),
                        _ => format!("/readyz did not answer ok within {READY_TIMEOUT:?}"),
                    },
                    logs: log,
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for KubeServer {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = self.stop();
        let info = self.info();
        if std::thread::panicking() {
            eprintln!(
                "ferry-testkit: test failed; Kubernetes API server '{}' data and logs kept under {}",
                info.name,
                info.root.display()
            );
        } else {
            let _ = fs::remove_dir_all(&info.root);
        }
    }
}
