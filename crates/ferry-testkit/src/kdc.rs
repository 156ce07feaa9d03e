//! [`Kdc`]: a real MIT Kerberos KDC on loopback, for tests that run ferry
//! against Kerberized Kudu clusters (`--rpc_authentication=required`).
//!
//! `krb5kdc` from Debian's `krb5-kdc` package runs in the foreground on a
//! free `127.0.0.1` port (TCP and UDP) with a realm of its own. A KDC lives
//! in `<home>/kdc/<name>/`: `krb5.conf` (what clients put in
//! `KRB5_CONFIG`), `kdc.conf`, the principal database and its stash,
//! `keytabs/` (one keytab per principal), `kdc.log` and `kdc.json` (its
//! description, so a detached one, `ferry-testkit kdc up`, can be found
//! again by name). Nothing under `/etc` is read or written: every tool runs
//! with `KRB5_CONFIG` and `KRB5_KDC_PROFILE` pointing into that folder.
//!
//! Every principal requires pre-authentication and clients do not adopt
//! the KDC's clock (`kdc_timesync = 0`), so a KDC started with
//! [`KdcBuilder::clock_offset`] (under libfaketime) makes `kinit` fail with
//! "Clock skew too great", as a skewed production KDC does.
//!
//! ```no_run
//! let kdc = ferry_testkit::Kdc::builder().ticket_lifetime(std::time::Duration::from_secs(120)).start()?;
//! let keytab = kdc.add_principal("ferry-source")?;
//! kdc.kinit("ferry-source", &keytab, std::path::Path::new("/tmp/cc"))?;
//! // KRB5_CONFIG=<kdc.krb5_conf()> KRB5CCNAME=FILE:/tmp/cc for a client.
//! # Ok::<(), ferry_testkit::Error>(())
//! ```
//!
//! The tools: `krb5kdc`, `kdb5_util`, `kadmin.local` (krb5-kdc,
//! krb5-admin-server), `kinit`, `klist` (krb5-user) from `PATH`, `/usr/sbin`
//! or `/usr/bin`; libfaketime (faketime) for a skewed clock.
//! `scripts/lib/setup.sh` (`ensure_kdc`) installs them.

mod config;

pub use config::ENCTYPES;

use crate::s3::{free_port, random_bytes, validate_component_name};
use crate::server_process::{described, fresh_root, ServerProcess};
use crate::{io_err, Error, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The realm of a KDC unless [`KdcBuilder::realm`] says otherwise.
pub const DEFAULT_REALM: &str = "FERRY.TEST";
/// The principal whose keytab proves the KDC answers.
const PROBE_PRINCIPAL: &str = "kdc-probe";
// krb5kdc opens its database and sockets in milliseconds; this is for a
// loaded machine.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const HOST: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The persistent description of a KDC (`<root>/kdc.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KdcInfo {
    pub name: String,
    pub root: PathBuf,
    pub realm: String,
    /// The KDC's port, on 127.0.0.1, TCP and UDP.
    pub port: u16,
    /// Longest ticket (realm `max_life`, `ticket_lifetime` of clients).
    pub ticket_lifetime_secs: u64,
    /// Longest renewal (realm `max_renewable_life`, clients'
    /// `renew_lifetime`).
    pub renew_lifetime_secs: u64,
    /// How far the KDC's clock is off (seconds, may be negative).
    pub clock_offset_secs: i64,
    pub detached: bool,
    pub pid: Option<u32>,
}

described!(KdcInfo, "KDC", "kdc", "kdc.json", |i| i.address());

impl KdcInfo {
    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        format!("{HOST}:{}", self.port)
    }

    /// The `krb5.conf` clients must use (`KRB5_CONFIG`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.root.join("krb5.conf")
    }

    /// The folder of the exported keytabs.
    pub fn keytab_dir(&self) -> PathBuf {
        self.root.join("keytabs")
    }
}

/// Chooses a KDC's realm, lifetimes and clock, and starts it.
#[derive(Debug, Clone)]
pub struct KdcBuilder {
    name: Option<String>,
    realm: String,
    ticket_lifetime: Duration,
    renew_lifetime: Duration,
    clock_offset_secs: i64,
    detached: bool,
}

impl Default for KdcBuilder {
    fn default() -> Self {
        KdcBuilder {
            name: None,
            realm: DEFAULT_REALM.to_string(),
            // Kudu's own MiniKdc defaults.
            ticket_lifetime: Duration::from_secs(24 * 3600),
            renew_lifetime: Duration::from_secs(7 * 24 * 3600),
            clock_offset_secs: 0,
            detached: false,
        }
    }
}

impl KdcBuilder {
    /// Names the KDC (its folder is `<home>/kdc/<name>`); by default a
    /// unique name is made up.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The realm (default [`DEFAULT_REALM`]), `[A-Z0-9.-]`.
    pub fn realm(mut self, realm: impl Into<String>) -> Self {
        self.realm = realm.into();
        self
    }

    /// The longest ticket the realm issues and the lifetime clients ask
    /// for (default 24 h). Whole seconds, at least 1 minute.
    pub fn ticket_lifetime(mut self, lifetime: Duration) -> Self {
        self.ticket_lifetime = lifetime;
        self
    }

    /// The longest a ticket can be renewed to (default 7 days).
    pub fn renew_lifetime(mut self, lifetime: Duration) -> Self {
        self.renew_lifetime = lifetime;
        self
    }

    /// Runs the KDC with its clock this many seconds ahead (negative:
    /// behind) of the machine's, under libfaketime. Beyond the 300 s that
    /// krb5 tolerates, clients get "Clock skew too great".
    pub fn clock_offset(mut self, secs: i64) -> Self {
        self.clock_offset_secs = secs;
        self
    }

    /// Detached KDCs outlive this process (for `ferry-testkit kdc up`).
    pub fn detached(mut self, detached: bool) -> Self {
        self.detached = detached;
        self
    }

    /// Creates the realm's database and starts `krb5kdc`; returns once a
    /// `kinit` against it gets an answer.
    pub fn start(self) -> Result<Kdc> {
        let name = match &self.name {
            Some(n) => validate_component_name("KDC", n)?,
            None => unique_name(),
        };
        let realm = config::validate_realm(&self.realm)?;
        let ticket_secs = self.ticket_lifetime.as_secs();
        let renew_secs = self.renew_lifetime.as_secs();
        if ticket_secs < 60 || renew_secs < ticket_secs {
            return Err(Error::Invalid(format!(
                "ticket lifetime {ticket_secs} s must be at least 60 s and at most the renew lifetime {renew_secs} s"
            )));
        }
        let (name, root) = fresh_root::<KdcInfo>(&name, &["keytabs"])?;
        let info = KdcInfo {
            name,
            root,
            realm,
            port: free_tcp_udp_port()?,
            ticket_lifetime_secs: ticket_secs,
            renew_lifetime_secs: renew_secs,
            clock_offset_secs: self.clock_offset_secs,
            detached: self.detached,
            pid: None,
        };
        let mut kdc = Kdc {
            process: ServerProcess::new(info),
        };
        kdc.write_config()?;
        kdc.create_database()?;
        kdc.add_principal(PROBE_PRINCIPAL)?;
        kdc.start_again()?;
        Ok(kdc)
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

/// A running (or stopped) KDC. Dropping an attached one kills it and
/// removes its folder (kept, with its log, when the thread panics).
pub struct Kdc {
    process: ServerProcess<KdcInfo>,
}

impl std::fmt::Debug for Kdc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kdc")
            .field("name", &self.info().name)
            .field("realm", &self.info().realm)
            .field("address", &self.info().address())
            .finish()
    }
}

impl Kdc {
    /// A builder for a KDC of realm [`DEFAULT_REALM`].
    pub fn builder() -> KdcBuilder {
        KdcBuilder::default()
    }

    /// Finds a KDC started earlier by name; the handle does not tear it
    /// down on drop.
    pub fn attach(name: &str) -> Result<Kdc> {
        Ok(Kdc {
            process: ServerProcess::attach(name)?,
        })
    }

    /// Names of the KDCs recorded under the kit's home folder.
    pub fn list_names() -> Vec<String> {
        ServerProcess::<KdcInfo>::list_names()
    }

    /// The description (port, realm, folders).
    pub fn info(&self) -> &KdcInfo {
        &self.process.info
    }

    /// The KDC's name.
    pub fn name(&self) -> &str {
        &self.info().name
    }

    /// The realm.
    pub fn realm(&self) -> &str {
        &self.info().realm
    }

    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        self.info().address()
    }

    /// The `krb5.conf` clients must use (`KRB5_CONFIG`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.info().krb5_conf()
    }

    /// What a client process needs in its environment: `KRB5_CONFIG`
    /// (credentials come from its own `KRB5CCNAME` or keytab).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![(
            "KRB5_CONFIG".to_string(),
            self.krb5_conf().display().to_string(),
        )]
    }

    /// Whether the `krb5kdc` process is alive.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// `name` with the realm: `ferry-source` → `ferry-source@FERRY.TEST`.
    pub fn principal(&self, name: &str) -> Result<String> {
        config::full_principal(name, &self.info().realm)
    }

    /// Creates principal `name` (`primary[/instance][@REALM]`) with a
    /// random key, exports its keys to `keytabs/<name>.keytab` and returns
    /// that path. Idempotent: an existing principal keeps its key and
    /// keytab. Works whether or not the KDC process runs.
    pub fn add_principal(&self, name: &str) -> Result<PathBuf> {
        let full = self.principal(name)?;
        let keytab = self
            .info()
            .keytab_dir()
            .join(config::keytab_file_name(&full));
        if !self.has_principal(&full)? {
            self.kadmin_create(&format!("addprinc -randkey {full}"), &full)?;
        }
        if keytab.is_file() {
            return Ok(keytab);
        }
        // Exported beside it, then renamed: concurrent callers never see a
        // half-written keytab, and `ktadd` never appends a second copy.
        let tmp = keytab.with_extension(format!("keytab.tmp-{}", unique_name()));
        let out = self.kadmin(&format!("ktadd -k {} -norandkey {full}", tmp.display()))?;
        if !tmp.is_file() {
            return Err(Error::Kerberos(format!(
                "exporting the keytab of {full} failed: {}",
                text(&out.stderr)
            )));
        }
        fs::rename(&tmp, &keytab).map_err(io_err(format!("writing {}", keytab.display())))?;
        Ok(keytab)
    }

    /// Creates principal `name` with password `password` (for `kinit` with
    /// a password); an existing principal gets the new password.
    pub fn add_principal_with_password(&self, name: &str, password: &str) -> Result<()> {
        let full = self.principal(name)?;
        config::validate_password(password)?;
        if self.has_principal(&full)? {
            let out = self.kadmin(&format!("cpw -pw {password} {full}"))?;
            return kadmin_checked(&out, "change_password", &full);
        }
        self.kadmin_create(&format!("addprinc -pw {password} {full}"), &full)
    }

    /// Deletes principal `name` (its keytab file goes too): a revoked
    /// account, whose `kinit` then fails with "not found in Kerberos
    /// database".
    pub fn remove_principal(&self, name: &str) -> Result<()> {
        let full = self.principal(name)?;
        let out = self.kadmin(&format!("delprinc -force {full}"))?;
        kadmin_checked(&out, "delete_principal", &full)?;
        let keytab = self
            .info()
            .keytab_dir()
            .join(config::keytab_file_name(&full));
        match fs::remove_file(&keytab) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io_err(format!("removing {}", keytab.display()))(e))
            }
            _ => Ok(()),
        }
    }

    /// `kinit -k -t <keytab> -c FILE:<ccache> <principal>` against this
    /// KDC; the error carries kinit's message ("Clock skew too great",
    /// "Cannot contact any KDC", ...).
    pub fn kinit(&self, principal: &str, keytab: &Path, ccache: &Path) -> Result<()> {
        let full = self.principal(principal)?;
        kinit(&self.krb5_conf(), &full, keytab, ccache)
    }

    /// `kinit` with a password (given on its standard input).
    pub fn kinit_with_password(
        &self,
        principal: &str,
        password: &str,
        ccache: &Path,
    ) -> Result<()> {
        let full = self.principal(principal)?;
        let mut child = Command::new(tool("kinit")?)
            .env("KRB5_CONFIG", self.krb5_conf())
            .env_remove("KRB5CCNAME")
            .arg("-c")
            .arg(format!("FILE:{}", ccache.display()))
            .arg(&full)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io_err("running kinit"))?;
        if let Some(mut stdin) = child.stdin.take() {
            std::io::Write::write_all(&mut stdin, format!("{password}\n").as_bytes())
                .map_err(io_err("writing kinit's password"))?;
        }
        let out = child.wait_with_output().map_err(io_err("running kinit"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error::Kerberos(format!(
                "kinit {full} (password) failed: {}",
                text(&out.stderr)
            )))
        }
    }

    /// Starts `krb5kdc` again on its port with its database (no-op when it
    /// runs), e.g. after [`stop`](Self::stop); waits until it answers.
    pub fn start_again(&mut self) -> Result<()> {
        if self.is_running() {
            return Ok(());
        }
        let (out, err, log) = self.process.log_files("kdc.log")?;
        let info = self.info();
        let mut cmd = self.kdc_tool("krb5kdc")?;
        // -n: foreground, so the kit owns the pid. -P puts the folder on
        // the command line, where leftover checks look for it.
        cmd.arg("-n")
            .arg("-r")
            .arg(&info.realm)
            .arg("-P")
            .arg(info.root.join("kdc.pid"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if info.clock_offset_secs != 0 {
            cmd.env("LD_PRELOAD", libfaketime()?)
                .env("FAKETIME", format!("{:+}", info.clock_offset_secs))
                // Only the wall clock is skewed; timers keep working.
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        self.process.spawn(cmd, "krb5kdc")?;
        self.wait_ready(&log)
    }

    /// Polls with a probe `kinit` until the KDC answers. A skewed KDC
    /// answers with "Clock skew too great", which is an answer too.
    fn wait_ready(&mut self, log: &Path) -> Result<()> {
        let probe = self.principal(PROBE_PRINCIPAL)?;
        let keytab = self
            .info()
            .keytab_dir()
            .join(config::keytab_file_name(&probe));
        let ccache = self.info().root.join("probe.krb5cc");
        self.process.wait_ready(
            READY_TIMEOUT,
            Duration::from_millis(50),
            log,
            |info| match kinit(&info.krb5_conf(), &probe, &keytab, &ccache) {
                Ok(()) => Ok(()),
                Err(e) if info.clock_offset_secs != 0 && is_clock_skew(&e) => Ok(()),
                Err(e) => Err(format!("no answer ({e})")),
            },
        )
    }

    /// Kills `krb5kdc` (a KDC outage); port, database and keytabs are
    /// kept for [`start_again`](Self::start_again).
    pub fn stop(&mut self) -> Result<()> {
        self.process.stop()
    }

    /// Stops the KDC and removes its folder.
    pub fn destroy(self) -> Result<()> {
        self.process.destroy()
    }

    /// Stops owning the KDC: it keeps running after this handle.
    pub fn detach(self) -> KdcInfo {
        self.process.detach()
    }

    /// A handle on a recorded KDC that never tears it down (for clusters,
    /// which keep only the description).
    pub(crate) fn from_info(info: KdcInfo) -> Kdc {
        Kdc {
            process: ServerProcess::from_info(info),
        }
    }

    fn write_config(&self) -> Result<()> {
        let i = self.info();
        let files = [
            (
                "krb5.conf",
                config::krb5_conf(
                    &i.realm,
                    i.port,
                    i.ticket_lifetime_secs,
                    i.renew_lifetime_secs,
                ),
            ),
            (
                "kdc.conf",
                config::kdc_conf(
                    &i.realm,
                    &i.root,
                    i.port,
                    i.ticket_lifetime_secs,
                    i.renew_lifetime_secs,
                ),
            ),
            // kadmind is not run; the file only keeps kadmin.local quiet.
            ("kadm5.acl", String::new()),
        ];
        for (file, text) in files {
            let path = i.root.join(file);
            fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))?;
        }
        Ok(())
    }

    /// `kdb5_util create -s`: the database, with a random master password
    /// stashed next to it (nobody ever types it).
    fn create_database(&self) -> Result<()> {
        let master: String = random_bytes()?.iter().map(|b| format!("{b:02x}")).collect();
        let out = self
            .kdc_tool("kdb5_util")?
            .args(["create", "-s", "-W", "-r"])
            .arg(&self.info().realm)
            .arg("-P")
            .arg(master)
            .stdin(Stdio::null())
            .output()
            .map_err(io_err("running kdb5_util"))?;
        if !out.status.success() {
            return Err(Error::DaemonStart {
                daemon: format!("KDC '{}' (kdb5_util create)", self.info().name),
                reason: text(&out.stderr),
                logs: self.info().root.clone(),
            });
        }
        Ok(())
    }

    fn has_principal(&self, full: &str) -> Result<bool> {
        let out = self.kadmin(&format!("getprinc {full}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).contains(&format!("Principal: {full}")))
    }

    /// `addprinc`, where a concurrent caller having created it first is
    /// fine.
    fn kadmin_create(&self, query: &str, full: &str) -> Result<()> {
        let out = self.kadmin(query)?;
        if text(&out.stderr).contains("already exists") {
            return Ok(());
        }
        kadmin_checked(&out, "add_principal", full)
    }

    /// `kadmin.local -q <query>` on this realm's database.
    fn kadmin(&self, query: &str) -> Result<Output> {
        self.kdc_tool("kadmin.local")?
            .arg("-r")
            .arg(&self.info().realm)
            .arg("-q")
            .arg(query)
            .stdin(Stdio::null())
            .output()
            .map_err(io_err("running kadmin.local"))
    }

    /// A KDC-side tool with this KDC's configuration and nothing of the
    /// host's.
    fn kdc_tool(&self, name: &str) -> Result<Command> {
        let mut cmd = Command::new(tool(name)?);
        cmd.env("KRB5_CONFIG", self.krb5_conf())
            .env("KRB5_KDC_PROFILE", self.info().root.join("kdc.conf"))
            .env_remove("KRB5CCNAME")
            .current_dir(&self.info().root);
        Ok(cmd)
    }
}

/// `kinit -k -t <keytab> -c FILE:<ccache> <principal>` with `krb5_conf`
/// (a full principal name). Shared by [`Kdc::kinit`] and Kerberized
/// clusters, which keep only the KDC's description.
pub(crate) fn kinit(krb5_conf: &Path, principal: &str, keytab: &Path, ccache: &Path) -> Result<()> {
    let out = Command::new(tool("kinit")?)
        .env("KRB5_CONFIG", krb5_conf)
        .env_remove("KRB5CCNAME")
        .arg("-k")
        .arg("-t")
        .arg(keytab)
        .arg("-c")
        .arg(format!("FILE:{}", ccache.display()))
        .arg(principal)
        .stdin(Stdio::null())
        .output()
        .map_err(io_err("running kinit"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Kerberos(format!(
            "kinit {principal} -t {} failed: {}",
            keytab.display(),
            text(&out.stderr)
        )))
    }
}

/// Whether `klist -s` finds an unexpired ticket in `ccache`.
pub(crate) fn has_valid_ticket(krb5_conf: &Path, ccache: &Path) -> bool {
    let Ok(klist) = tool("klist") else {
        return false;
    };
    Command::new(klist)
        .env("KRB5_CONFIG", krb5_conf)
        .arg("-s")
        .arg("-c")
        .arg(format!("FILE:{}", ccache.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `e` is krb5's clock skew error.
pub fn is_clock_skew(e: &Error) -> bool {
    e.to_string().contains("Clock skew too great")
}

/// kadmin.local exits 0 even when its command fails; its error lines start
/// with the operation's name (`add_principal: ...`).
fn kadmin_checked(out: &Output, operation: &str, full: &str) -> Result<()> {
    let stderr = text(&out.stderr);
    if out.status.success() && !stderr.contains(&format!("{operation}:")) {
        Ok(())
    } else {
        Err(Error::Kerberos(format!(
            "kadmin.local {operation} {full} failed: {stderr}"
        )))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}

/// A port free on 127.0.0.1 for both TCP and UDP (krb5kdc binds both).
fn free_tcp_udp_port() -> Result<u16> {
    for _ in 0..20 {
        let port = free_port()?;
        if UdpSocket::bind(SocketAddrV4::new(HOST, port)).is_ok() {
            return Ok(port);
        }
    }
    Err(Error::NotReady(
        "no loopback port free for both TCP and UDP after 20 tries".into(),
    ))
}

/// A MIT Kerberos tool: `PATH`, then `/usr/sbin`, `/usr/bin`, `/sbin`
/// (the KDC tools live in sbin, often not on a user's `PATH`).
pub fn tool(name: &str) -> Result<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(["/usr/sbin", "/usr/bin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::Binaries(format!(
                "{name} not found (PATH, /usr/sbin, /usr/bin); install it with \
                 `apt-get install krb5-kdc krb5-admin-server krb5-user` (scripts/test does this)"
            ))
        })
}

/// libfaketime's preload library: `$FERRY_LIBFAKETIME`, else where
/// Debian's `libfaketime` package puts it.
pub fn libfaketime() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("FERRY_LIBFAKETIME") {
        return Ok(PathBuf::from(path));
    }
    [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
    .ok_or_else(|| {
        Error::Binaries(
            "libfaketime.so.1 not found (or set $FERRY_LIBFAKETIME); install it with \
             `apt-get install faketime` (scripts/test does this)"
                .into(),
        )
    })
}
