//! [`ZooKeeperServer`]: a real Apache ZooKeeper 3.9 server on loopback, for
//! the tests of ferry's ZooKeeper HA (`high-availability.type zookeeper`).
//!
//! One JVM running `org.apache.zookeeper.server.ZooKeeperServerMain`: a
//! **standalone** server (no quorum; ferry's lease needs one linearizable
//! server, and the tests stop, pause and restart it as a whole), started
//! from the Maven Central jars that `scripts/lib/setup.sh`
//! (`ensure_zookeeper`) copies into `~/.cache/ferry/zookeeper-<version>/libs`
//! (the closure of `crates/ferry-testkit/zookeeper/pom.xml`). A server lives
//! in `<home>/zookeeper/<name>/` (`data/`, `zoo.cfg`, `server.log`,
//! `zookeeper.json` = its description), so a detached one (`ferry-testkit
//! zookeeper up`) can be found again by name; stop/restart keeps its port
//! and data.
//!
//! ```no_run
//! let zk = ferry_testkit::ZooKeeperServer::start("ha")?;
//! println!("{}", zk.connect_string());
//! # Ok::<(), ferry_testkit::Error>(())
//! ```
//!
//! The jars: `$FERRY_ZOOKEEPER_LIBS`, else the cache folder above; Java:
//! `$JAVA_HOME/bin/java`, else `java` on `PATH`.
//!
//! **Kerberos mode** ([`ZooKeeperServer::start_kerberized`], `ferry-testkit
//! zookeeper up --kdc NAME`): the server authenticates clients with SASL
//! GSSAPI as `zookeeper/127.0.0.1@REALM` (a keytab from the test kit's KDC,
//! a JAAS `Server` section with `Krb5LoginModule`) and closes every session
//! that has not authenticated with SASL (`enforce.auth.enabled`,
//! `enforce.auth.schemes=sasl`). A client's SASL identity (and so a
//! `creator` ACL's id) is its full principal.

use crate::kafka::java_binary;
use crate::kdc::Kdc;
use crate::s3::free_port;
use crate::server_process::{described, fresh_root, ServerProcess};
use crate::{io_err, Error, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The ZooKeeper version the kit installs and runs.
pub const ZOOKEEPER_VERSION: &str = "3.9.5";
// A cold JVM on a loaded 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const HOST: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The persistent description of a server (`<root>/zookeeper.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZooKeeperInfo {
    pub name: String,
    pub root: PathBuf,
    /// The client port.
    pub port: u16,
    pub detached: bool,
    pub pid: Option<u32>,
    /// Kerberos mode: the server's login; `None`: no authentication.
    #[serde(default)]
    pub kerberos: Option<ZooKeeperKerberos>,
}

/// The Kerberos login of a server in Kerberos mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZooKeeperKerberos {
    /// `zookeeper/127.0.0.1@REALM`.
    pub principal: String,
    /// Its keytab (exported by the KDC).
    pub keytab: PathBuf,
    /// The KDC's `krb5.conf`.
    pub krb5_conf: PathBuf,
}

/// The server's Kerberos principal (instance: the address clients dial).
const SERVICE_PRINCIPAL: &str = "zookeeper/127.0.0.1";

described!(
    ZooKeeperInfo,
    "ZooKeeper server",
    "zookeeper",
    "zookeeper.json",
    |i| i.connect_string()
);

impl ZooKeeperInfo {
    /// `127.0.0.1:<port>`, a ZooKeeper connect string (Flink's
    /// `high-availability.zookeeper.quorum`).
    pub fn connect_string(&self) -> String {
        format!("{HOST}:{}", self.port)
    }
}

/// A running (or stopped) server. Dropping an attached one kills it and
/// removes its folder (kept, with its log, when the thread panics).
pub struct ZooKeeperServer {
    process: ServerProcess<ZooKeeperInfo>,
}

impl std::fmt::Debug for ZooKeeperServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperServer")
            .field("name", &self.info().name)
            .field("connect", &self.connect_string())
            .finish()
    }
}

impl ZooKeeperServer {
    /// Starts a server named `name` that dies with this process.
    pub fn start(name: &str) -> Result<ZooKeeperServer> {
        Self::launch(name, false, None)
    }

    /// Starts a server that outlives this process (`ferry-testkit
    /// zookeeper up`).
    pub fn start_detached(name: &str) -> Result<ZooKeeperServer> {
        Self::launch(name, true, None)
    }

    /// Starts a server in Kerberos mode (see the module docs) with a
    /// principal of `kdc`; `detached`: it outlives this process.
    pub fn start_kerberized(name: &str, kdc: &Kdc, detached: bool) -> Result<ZooKeeperServer> {
        Self::launch(name, detached, Some(kdc))
    }

    fn launch(name: &str, detached: bool, kdc: Option<&Kdc>) -> Result<ZooKeeperServer> {
        let (name, root) = fresh_root::<ZooKeeperInfo>(name, &["data"])?;
        let kerberos = match kdc {
            Some(kdc) => Some(ZooKeeperKerberos {
                keytab: kdc.add_principal(SERVICE_PRINCIPAL)?,
                principal: kdc.principal(SERVICE_PRINCIPAL)?,
                krb5_conf: kdc.krb5_conf(),
            }),
            None => None,
        };
        let info = ZooKeeperInfo {
            name,
            root,
            port: free_port()?,
            detached,
            pid: None,
            kerberos,
        };
        let mut server = ZooKeeperServer {
            process: ServerProcess::new(info),
        };
        server.write_config()?;
        server.restart()?;
        Ok(server)
    }

    /// Finds a server started earlier by name; the handle does not tear it
    /// down on drop.
    pub fn attach(name: &str) -> Result<ZooKeeperServer> {
        Ok(ZooKeeperServer {
            process: ServerProcess::attach(name)?,
        })
    }

    /// Names of the servers recorded under the kit's home folder.
    pub fn list_names() -> Vec<String> {
        ServerProcess::<ZooKeeperInfo>::list_names()
    }

    /// The description (port, folders).
    pub fn info(&self) -> &ZooKeeperInfo {
        &self.process.info
    }

    /// `127.0.0.1:<port>`.
    pub fn connect_string(&self) -> String {
        self.info().connect_string()
    }

    /// Whether the server process is alive (a paused one is).
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    fn write_config(&self) -> Result<()> {
        let root = &self.info().root;
        // Short ticks so session timeouts as low as 1 s are accepted
        // (the server clamps them to 2..20 ticks unless told otherwise).
        let cfg = format!(
            "tickTime=500\n\
             dataDir={data}\n\
             clientPort={port}\n\
             clientPortAddress={HOST}\n\
             minSessionTimeout=1000\n\
             maxSessionTimeout=120000\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=ruok,srvr\n\
             autopurge.purgeInterval=0\n",
            data = root.join("data").display(),
            port = self.info().port,
        );
        let path = root.join("zoo.cfg");
        let Some(kerberos) = &self.info().kerberos else {
            return fs::write(&path, cfg).map_err(io_err(format!("writing {}", path.display())));
        };
        // Keys the server does not know become `zookeeper.<key>` system
        // properties: SASL accepted, and required of every session.
        let cfg = format!(
            "{cfg}authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
             enforce.auth.enabled=true\n\
             enforce.auth.schemes=sasl\n"
        );
        fs::write(&path, cfg).map_err(io_err(format!("writing {}", path.display())))?;
        // isInitiator=false: the server only accepts, so it logs in from
        // the keytab without asking the KDC for a ticket.
        let jaas = format!(
            "Server {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  \
             useKeyTab=true\n  keyTab=\"{keytab}\"\n  storeKey=true\n  useTicketCache=false\n  \
             isInitiator=false\n  principal=\"{principal}\";\n}};\n",
            keytab = kerberos.keytab.display(),
            principal = kerberos.principal,
        );
        let path = root.join("jaas.conf");
        fs::write(&path, jaas).map_err(io_err(format!("writing {}", path.display())))
    }

    /// Starts the server process again on its port, with its data (no-op
    /// when it runs). Waits until it serves clients.
    pub fn restart(&mut self) -> Result<()> {
        if self.is_running() {
            return Ok(());
        }
        let (out, err, log) = self.process.log_files("server.log")?;
        let libs = zookeeper_libs()?;
        let root = &self.info().root;
        let mut cmd = Command::new(java_binary());
        cmd.arg("-Xms32m")
            .arg("-Xmx256m")
            // Starts faster and costs less CPU on a 2-core test machine.
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1")
            .arg("-Dorg.slf4j.simpleLogger.showDateTime=true");
        if let Some(kerberos) = &self.info().kerberos {
            cmd.arg(format!(
                "-Djava.security.auth.login.config={}",
                root.join("jaas.conf").display()
            ))
            .arg(format!(
                "-Djava.security.krb5.conf={}",
                kerberos.krb5_conf.display()
            ));
        }
        cmd.arg("-cp")
            .arg(format!("{}/*", libs.display()))
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(root.join("zoo.cfg"))
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        self.process.spawn(cmd, "java")?;
        self.process
            .wait_ready(READY_TIMEOUT, Duration::from_millis(100), &log, |info| {
                serving(info.port)
                    .then_some(())
                    .ok_or_else(|| "it did not answer `srvr`".to_string())
            })
    }

    /// Whether the server answers the `srvr` four-letter command as a
    /// serving standalone server.
    pub fn serving(&self) -> bool {
        serving(self.info().port)
    }

    /// Kills the server process (SIGKILL); port and data are kept for
    /// [`restart`](Self::restart).
    pub fn stop(&mut self) -> Result<()> {
        self.process.stop()
    }

    /// Freezes the server (SIGSTOP): it keeps its socket but answers
    /// nothing, as a server stuck in a long pause.
    pub fn pause(&self) -> Result<()> {
        self.process.signal(libc::SIGSTOP)
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) -> Result<()> {
        self.process.signal(libc::SIGCONT)
    }

    /// Stops the server and removes its folder.
    pub fn destroy(self) -> Result<()> {
        self.process.destroy()
    }

    /// Stops owning the server: it keeps running after this handle.
    pub fn detach(self) -> ZooKeeperInfo {
        self.process.detach()
    }
}

/// Whether the server on `port` answers `srvr` as a serving standalone
/// server.
fn serving(port: u16) -> bool {
    let addr = SocketAddrV4::new(HOST, port);
    let Ok(mut stream) = TcpStream::connect_timeout(&addr.into(), Duration::from_millis(500))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"srvr").is_err() {
        return false;
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.contains("Mode: standalone")
}

/// The folder of the server's jars (see the module docs).
pub fn zookeeper_libs() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("FERRY_ZOOKEEPER_LIBS") {
        return Ok(PathBuf::from(path));
    }
    let cached = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
        .join(format!(".cache/ferry/zookeeper-{ZOOKEEPER_VERSION}/libs"));
    if cached
        .join(format!("zookeeper-{ZOOKEEPER_VERSION}.jar"))
        .is_file()
    {
        return Ok(cached);
    }
    Err(Error::Binaries(format!(
        "the ZooKeeper {ZOOKEEPER_VERSION} jars are not in {} (or $FERRY_ZOOKEEPER_LIBS); fetch them with \
         `mvn -q dependency:copy-dependencies -f crates/ferry-testkit/zookeeper/pom.xml -DincludeScope=runtime -DoutputDirectory={}` \
         (scripts/test does this)",
        cached.display(),
        cached.display()
    )))
}
