//! [`KafkaBroker`]: a real Apache Kafka 4.x broker on loopback, for the
//! tests, demos and benchmarks of ferry's Kafka connectors.
//!
//! One JVM in KRaft combined mode (broker and controller, node 1), started
//! from the Maven Central jars that `scripts/lib/setup.sh` (`ensure_kafka`)
//! copies into `~/.cache/ferry/kafka-<version>/libs` (the closure of
//! `crates/ferry-testkit/kafka/pom.xml`). A broker lives in
//! `<home>/kafka/<name>/` (`data/` = its log dirs, `server.properties`,
//! `server.log`, `kafka.json` = its description), so a detached one
//! (`ferry-testkit kafka up`) can be found again by name. Topics are not
//! created automatically (`auto.create.topics.enable=false`): a client
//! that needs one creates it, as against a production cluster.
//!
//! ```no_run
//! let broker = ferry_testkit::KafkaBroker::start("events")?;
//! println!("{}", broker.bootstrap());
//! # Ok::<(), ferry_testkit::Error>(())
//! ```
//!
//! The jars: `$FERRY_KAFKA_LIBS`, else the cache folder above; Java:
//! `$JAVA_HOME/bin/java`, else `java` on `PATH`.

use crate::s3::{free_port, random_bytes};
use crate::server_process::{described, fresh_root, ServerProcess};
use crate::{io_err, Error, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The Kafka version the kit installs and runs.
pub const KAFKA_VERSION: &str = "4.1.1";
// A cold JVM formatting and starting KRaft on a loaded 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
const HOST: Ipv4Addr = Ipv4Addr::LOCALHOST;
/// The line the broker logs once it serves clients.
const STARTED_LINE: &str = "Kafka Server started";

/// The persistent description of a broker (`<root>/kafka.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KafkaInfo {
    pub name: String,
    pub root: PathBuf,
    /// The client (PLAINTEXT) listener's port.
    pub port: u16,
    /// The KRaft controller listener's port.
    pub controller_port: u16,
    pub detached: bool,
    pub pid: Option<u32>,
}

described!(KafkaInfo, "Kafka broker", "kafka", "kafka.json", |i| i
    .bootstrap());

impl KafkaInfo {
    /// `127.0.0.1:<port>`, Kafka's `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("{HOST}:{}", self.port)
    }
}

/// A running (or stopped) broker. Dropping an attached one kills it and
/// removes its folder (kept, with its log, when the thread panics).
pub struct KafkaBroker {
    process: ServerProcess<KafkaInfo>,
}

impl std::fmt::Debug for KafkaBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaBroker")
            .field("name", &self.info().name)
            .field("bootstrap", &self.bootstrap())
            .finish()
    }
}

impl KafkaBroker {
    /// Starts a broker named `name` that dies with this process.
    pub fn start(name: &str) -> Result<KafkaBroker> {
        Self::launch(name, false)
    }

    /// Starts a broker that outlives this process (`ferry-testkit kafka up`).
    pub fn start_detached(name: &str) -> Result<KafkaBroker> {
        Self::launch(name, true)
    }

    fn launch(name: &str, detached: bool) -> Result<KafkaBroker> {
        let (name, root) = fresh_root::<KafkaInfo>(name, &["data"])?;
        let info = KafkaInfo {
            name,
            root,
            port: free_port()?,
            controller_port: free_port()?,
            detached,
            pid: None,
        };
        let mut broker = KafkaBroker {
            process: ServerProcess::new(info),
        };
        broker.write_config()?;
        broker.format_storage()?;
        broker.restart()?;
        Ok(broker)
    }

    /// Finds a broker started earlier by name; the handle does not tear it
    /// down on drop.
    pub fn attach(name: &str) -> Result<KafkaBroker> {
        Ok(KafkaBroker {
            process: ServerProcess::attach(name)?,
        })
    }

    /// Names of the brokers recorded under the kit's home folder.
    pub fn list_names() -> Vec<String> {
        ServerProcess::<KafkaInfo>::list_names()
    }

    /// The description (ports, folders).
    pub fn info(&self) -> &KafkaInfo {
        &self.process.info
    }

    /// `127.0.0.1:<port>`.
    pub fn bootstrap(&self) -> String {
        self.info().bootstrap()
    }

    /// Whether the broker process is alive.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    fn write_config(&self) -> Result<()> {
        let root = &self.info().root;
        let (port, controller) = (self.info().port, self.info().controller_port);
        let properties = format!(
            "process.roles=broker,controller\n\
             node.id=1\n\
             controller.quorum.voters=1@{HOST}:{controller}\n\
             listeners=PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller}\n\
             advertised.listeners=PLAINTEXT://{HOST}:{port}\n\
             controller.listener.names=CONTROLLER\n\
             inter.broker.listener.name=PLAINTEXT\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             log.dirs={data}\n\
             num.partitions=1\n\
             auto.create.topics.enable=false\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=4\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             transaction.state.log.num.partitions=4\n\
             share.coordinator.state.topic.replication.factor=1\n\
             share.coordinator.state.topic.min.isr=1\n\
             group.initial.rebalance.delay.ms=0\n",
            data = root.join("data").display(),
        );
        let log4j = format!(
            "status = error\n\
             appender.file.type = File\n\
             appender.file.name = file\n\
             appender.file.fileName = {log}\n\
             appender.file.layout.type = PatternLayout\n\
             appender.file.layout.pattern = [%d] %p %m (%c)%n\n\
             rootLogger.level = INFO\n\
             rootLogger.appenderRef.file.ref = file\n",
            log = root.join("server.log").display(),
        );
        let write = |file: &str, text: String| {
            let path = root.join(file);
            fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))
        };
        write("server.properties", properties)?;
        write("log4j2.properties", log4j)
    }

    fn java(&self, class: &str) -> Result<Command> {
        let libs = kafka_libs()?;
        let mut cmd = Command::new(java_binary());
        cmd.arg("-Xms128m")
            .arg("-Xmx512m")
            // Starts faster and costs less CPU on a 2-core test machine.
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1")
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                self.info().root.join("log4j2.properties").display()
            ))
            .arg("-cp")
            .arg(format!("{}/*", libs.display()))
            .arg(class)
            .current_dir(&self.info().root)
            .stdin(Stdio::null());
        Ok(cmd)
    }

    /// `kafka-storage format` with a fresh cluster id.
    fn format_storage(&self) -> Result<()> {
        self.format_storage_as(&cluster_id(random_bytes()?))
    }

    fn format_storage_as(&self, id: &str) -> Result<()> {
        let mut cmd = self.java("kafka.tools.StorageTool")?;
        cmd.arg("format")
            .arg(cluster_id_arg(id))
            .arg("-c")
            .arg(self.info().root.join("server.properties"));
        let out = cmd
            .output()
            .map_err(io_err("running kafka.tools.StorageTool"))?;
        if !out.status.success() {
            return Err(Error::DaemonStart {
                daemon: format!("Kafka broker '{}' (storage format)", self.info().name),
                reason: String::from_utf8_lossy(&out.stderr).trim().to_string(),
                logs: self.info().root.clone(),
            });
        }
        Ok(())
    }

    /// Starts the broker process again on its ports, with its data (no-op
    /// when it runs). Waits until it serves clients.
    pub fn restart(&mut self) -> Result<()> {
        if self.is_running() {
            return Ok(());
        }
        let (out, err, _) = self.process.log_files("stdout.log")?;
        let log = self.info().root.join("server.log");
        let seen_before = started_lines(&log);
        let mut cmd = self.java("kafka.Kafka")?;
        cmd.arg(self.info().root.join("server.properties"))
            .stdout(out)
            .stderr(err);
        self.process.spawn(cmd, "java")?;
        self.process
            .wait_ready(READY_TIMEOUT, Duration::from_millis(100), &log, |_| {
                (started_lines(&log) > seen_before)
                    .then_some(())
                    .ok_or_else(|| format!("no \"{STARTED_LINE}\" in its log"))
            })
    }

    /// Kills the broker process (SIGKILL); ports and data are kept for
    /// [`restart`](Self::restart).
    pub fn stop(&mut self) -> Result<()> {
        self.process.stop()
    }

    /// Stops the broker and removes its folder.
    pub fn destroy(self) -> Result<()> {
        self.process.destroy()
    }

    /// Stops owning the broker: it keeps running after this handle.
    pub fn detach(self) -> KafkaInfo {
        self.process.detach()
    }
}

/// How many times the broker logged that it started.
fn started_lines(log: &Path) -> usize {
    fs::read_to_string(log)
        .map(|text| text.matches(STARTED_LINE).count())
        .unwrap_or(0)
}

/// A KRaft cluster id: 16 bytes in URL-safe base64 without padding (the
/// form `kafka-storage random-uuid` prints).
fn cluster_id(bytes: [u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            let index = ((n >> (18 - 6 * i)) & 63) as usize;
            out.push(char::from(ALPHABET[index]));
        }
    }
    out
}

/// The cluster id as one `--cluster-id=<id>` argument: an id may start with
/// `-` (1 in 64 does), which the tool's parser would otherwise take
/// for an option and fail with "expected one argument".
fn cluster_id_arg(id: &str) -> String {
    format!("--cluster-id={id}")
}

/// The folder of the broker's jars (see the module docs).
pub fn kafka_libs() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("FERRY_KAFKA_LIBS") {
        return Ok(PathBuf::from(path));
    }
    let cached = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
        .join(format!(".cache/ferry/kafka-{KAFKA_VERSION}/libs"));
    let has_broker = cached
        .join(format!("kafka_2.13-{KAFKA_VERSION}.jar"))
        .is_file();
    if has_broker {
        return Ok(cached);
    }
    Err(Error::Binaries(format!(
        "the Kafka {KAFKA_VERSION} jars are not in {} (or $FERRY_KAFKA_LIBS); fetch them with \
         `mvn -q dependency:copy-dependencies -f crates/ferry-testkit/kafka/pom.xml -DoutputDirectory={}` \
         (scripts/test does this)",
        cached.display(),
        cached.display()
    )))
}

/// `$JAVA_HOME/bin/java`, else `java` (from `PATH`).
pub(crate) fn java_binary() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin/java"))
        .filter(|java| java.is_file())
        .unwrap_or_else(|| PathBuf::from("java"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_22_url_safe_characters() {
        assert_eq!(cluster_id([0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        // 0xfb 0xff … encodes to '-' and '_' in the URL-safe alphabet.
        let id = cluster_id([0xfb; 16]);
        assert_eq!(id.len(), 22);
        assert!(id.starts_with("-_v7"), "{id}");
        assert!(id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    }

    /// Kafka's own storage tool formats with an id that starts with `-`
    /// (once taken for an option: "expected one argument").
    #[test]
    fn storage_formats_with_a_cluster_id_starting_with_a_dash() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("dash");
        fs::create_dir_all(root.join("data")).expect("data dir");
        let broker = KafkaBroker {
            process: ServerProcess::from_info(KafkaInfo {
                name: "dash".into(),
                root: root.clone(),
                port: free_port().expect("port"),
                controller_port: free_port().expect("port"),
                detached: true,
                pid: None,
            }),
        };
        broker.write_config().expect("config");
        let id = cluster_id([0xfb; 16]);
        assert!(id.starts_with('-'), "{id}");
        broker.format_storage_as(&id).expect("storage format");
        let meta = fs::read_to_string(root.join("data/meta.properties")).expect("meta.properties");
        assert!(meta.contains(&format!("cluster.id={id}")), "{meta}");
    }
}
