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
use crate::s3::{free_port, validate_component_name};
use crate::{home_dir, io_err, process, Error, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    info: ZooKeeperInfo,
    child: Option<Child>,
    owned: bool,
}

impl std::fmt::Debug for ZooKeeperServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperServer")
            .field("name", &self.info.name)
            .field("connect", &self.info.connect_string())
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
        let name = validate_component_name("ZooKeeper server", name)?;
        let root = home_dir().join("zookeeper").join(&name);
        if let Ok(existing) = Self::attach(&name) {
            if existing.is_running() {
                return Err(Error::Invalid(format!(
                    "a ZooKeeper server named '{name}' is running ({}); `ferry-testkit zookeeper down --name {name}` first",
                    existing.connect_string()
                )));
            }
        }
        if root.exists() {
            fs::remove_dir_all(&root).map_err(io_err(format!("clearing {}", root.display())))?;
        }
        fs::create_dir_all(root.join("data"))
            .map_err(io_err(format!("creating {}", root.display())))?;
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
            info,
            child: None,
            owned: !detached,
        };
        server.write_config()?;
        server.restart()?;
        Ok(server)
    }

    /// Finds a server started earlier by name; the handle does not tear it
    /// down on drop.
    pub fn attach(name: &str) -> Result<ZooKeeperServer> {
        let name = validate_component_name("ZooKeeper server", name)?;
        let info: ZooKeeperInfo =
            crate::load_description("zookeeper", &name, "zookeeper.json", "ZooKeeper server")?;
        Ok(ZooKeeperServer {
            info,
            child: None,
            owned: false,
        })
    }

    /// Names of the servers recorded under the kit's home folder.
    pub fn list_names() -> Vec<String> {
        crate::recorded_names("zookeeper", "zookeeper.json")
    }

    /// The description (port, folders).
    pub fn info(&self) -> &ZooKeeperInfo {
        &self.info
    }

    /// `127.0.0.1:<port>`.
    pub fn connect_string(&self) -> String {
        self.info.connect_string()
    }

    /// Whether the server process is alive (a paused one is).
    pub fn is_running(&self) -> bool {
        self.info.pid.is_some_and(process::alive)
    }

    fn write_config(&self) -> Result<()> {
        let root = &self.info.root;
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
            port = self.info.port,
        );
        let path = root.join("zoo.cfg");
        let Some(kerberos) = &self.info.kerberos else {
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
        let log_path = self.info.root.join("server.log");
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io_err(format!("opening {}", log_path.display())))?;
        let err = out
            .try_clone()
            .map_err(io_err(format!("opening {}", log_path.display())))?;
        let libs = zookeeper_libs()?;
        let mut cmd = Command::new(java_binary());
        cmd.arg("-Xms32m")
            .arg("-Xmx256m")
            // Starts faster and costs less CPU on a 2-core test machine.
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1")
            .arg("-Dorg.slf4j.simpleLogger.showDateTime=true");
        if let Some(kerberos) = &self.info.kerberos {
            cmd.arg(format!(
                "-Djava.security.auth.login.config={}",
                self.info.root.join("jaas.conf").display()
            ))
            .arg(format!(
                "-Djava.security.krb5.conf={}",
                kerberos.krb5_conf.display()
            ));
        }
        cmd.arg("-cp")
            .arg(format!("{}/*", libs.display()))
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(self.info.root.join("zoo.cfg"))
            .current_dir(&self.info.root)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let child = process::spawn(cmd, self.info.detached)
            .map_err(io_err("starting the ZooKeeper server (java)"))?;
        self.info.pid = Some(child.id());
        self.child = Some(child);
        self.save()?;
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if self.serving() {
                return Ok(());
            }
            let exited = match &mut self.child {
                Some(child) => matches!(child.try_wait(), Ok(Some(_))),
                None => !self.is_running(),
            };
            if exited || Instant::now() > deadline {
                return Err(Error::DaemonStart {
                    daemon: format!("ZooKeeper server '{}'", self.info.name),
                    reason: if exited {
                        "the process exited".into()
                    } else {
                        format!("it did not answer `srvr` after {READY_TIMEOUT:?}")
                    },
                    logs: self.info.root.join("server.log"),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the server answers the `srvr` four-letter command as a
    /// serving standalone server.
    pub fn serving(&self) -> bool {
        let addr = SocketAddrV4::new(HOST, self.info.port);
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

    /// Kills the server process (SIGKILL); port and data are kept for
    /// [`restart`](Self::restart).
    pub fn stop(&mut self) -> Result<()> {
        if let Some(pid) = self.info.pid {
            // A paused JVM must run again to be reaped promptly.
            let _ = process::signal(pid, libc::SIGCONT);
        }
        process::kill_and_reap(&mut self.info.pid, &mut self.child)?;
        self.save()
    }

    /// Freezes the server (SIGSTOP): it keeps its socket but answers
    /// nothing, as a server stuck in a long pause.
    pub fn pause(&self) -> Result<()> {
        self.signal(libc::SIGSTOP)
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) -> Result<()> {
        self.signal(libc::SIGCONT)
    }

    fn signal(&self, signal: i32) -> Result<()> {
        let pid = self
            .info
            .pid
            .filter(|pid| process::alive(*pid))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "the ZooKeeper server '{}' is not running",
                    self.info.name
                ))
            })?;
        process::signal(pid, signal).map_err(io_err(format!("signalling {pid}")))
    }

    /// Stops the server and removes its folder.
    pub fn destroy(mut self) -> Result<()> {
        self.owned = false;
        self.stop()?;
        fs::remove_dir_all(&self.info.root)
            .map_err(io_err(format!("removing {}", self.info.root.display())))
    }

    /// Stops owning the server: it keeps running after this handle.
    pub fn detach(mut self) -> ZooKeeperInfo {
        self.owned = false;
        self.child = None;
        self.info.clone()
    }

    fn save(&self) -> Result<()> {
        crate::save_description(&self.info.root, "zookeeper.json", &self.info)
    }
}

impl Drop for ZooKeeperServer {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = self.stop();
        if std::thread::panicking() {
            eprintln!(
                "ferry-testkit: test failed; ZooKeeper server '{}' data and log kept under {}",
                self.info.name,
                self.info.root.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.info.root);
        }
    }
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
