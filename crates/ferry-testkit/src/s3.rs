//! [`S3Server`]: a real S3-compatible server on loopback (`s3s-fs`), for the
//! tests and demos of state on object stores.
//!
//! `s3s-fs` serves a directory over the S3 HTTP protocol with SigV4
//! authentication; each bucket is a sub-directory of its root. A server
//! lives in `<home>/s3/<name>/` (`data/` = the buckets, `server.log`,
//! `s3.json` = its description), so a detached one (`ferry-testkit s3 up`)
//! can be found again by name. [`S3Server::stop`] kills the process but
//! keeps port and data; [`S3Server::restart`] brings it back on the same
//! port with the same data (an outage of the DR store, for example).
//!
//! ```no_run
//! let mut s3 = ferry_testkit::S3Server::start("primary")?;
//! s3.create_bucket("state")?;
//! println!("{} {} {}", s3.endpoint(), s3.access_key(), s3.secret_key());
//! s3.stop()?;
//! s3.restart()?;
//! # Ok::<(), ferry_testkit::Error>(())
//! ```
//!
//! The binary: `$FERRY_S3S_FS`, else the `cargo install` root that
//! `scripts/lib/setup.sh` (`ensure_s3`) uses, else `s3s-fs` on `PATH`.

use crate::{home_dir, io_err, process, Error, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The s3s-fs version the kit installs and expects.
pub const S3S_FS_VERSION: &str = "0.14.1";
/// Access key of every kit server (not a secret; the secret key is random).
pub const ACCESS_KEY: &str = "ferry-testkit";
const READY_TIMEOUT: Duration = Duration::from_secs(15);
const HOST: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The persistent description of a server (`<root>/s3.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct S3Info {
    pub name: String,
    pub root: PathBuf,
    pub port: u16,
    pub access_key: String,
    pub secret_key: String,
    pub detached: bool,
    pub pid: Option<u32>,
}

impl S3Info {
    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{HOST}:{}", self.port)
    }

    /// The directory holding the buckets.
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }
}

/// A running (or stopped) s3s-fs server. Dropping an attached one kills it
/// and removes its folder (kept, with its log, when the thread panics).
pub struct S3Server {
    info: S3Info,
    child: Option<Child>,
    owned: bool,
}

impl std::fmt::Debug for S3Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Server")
            .field("name", &self.info.name)
            .field("endpoint", &self.info.endpoint())
            .finish()
    }
}

impl S3Server {
    /// Starts a server named `name` that dies with this process.
    pub fn start(name: &str) -> Result<S3Server> {
        Self::launch(name, false)
    }

    /// Starts a server that outlives this process (`ferry-testkit s3 up`).
    pub fn start_detached(name: &str) -> Result<S3Server> {
        Self::launch(name, true)
    }

    fn launch(name: &str, detached: bool) -> Result<S3Server> {
        let name = validate_name(name)?;
        let root = home_dir().join("s3").join(&name);
        if let Ok(existing) = Self::attach(&name) {
            if existing.is_running() {
                return Err(Error::Invalid(format!(
                    "an S3 server named '{name}' is running ({}); `ferry-testkit s3 down --name {name}` first",
                    existing.endpoint()
                )));
            }
        }
        if root.exists() {
            fs::remove_dir_all(&root).map_err(io_err(format!("clearing {}", root.display())))?;
        }
        fs::create_dir_all(root.join("data"))
            .map_err(io_err(format!("creating {}", root.display())))?;
        let info = S3Info {
            name,
            root,
            port: free_port()?,
            access_key: ACCESS_KEY.to_string(),
            secret_key: random_secret()?,
            detached,
            pid: None,
        };
        let mut server = S3Server {
            info,
            child: None,
            owned: !detached,
        };
        server.restart()?;
        Ok(server)
    }

    /// Finds a server started earlier by name; the handle does not tear it
    /// down on drop.
    pub fn attach(name: &str) -> Result<S3Server> {
        let name = validate_name(name)?;
        let info: S3Info = crate::load_description("s3", &name, "s3.json", "S3 server")?;
        Ok(S3Server {
            info,
            child: None,
            owned: false,
        })
    }

    /// Names of the servers recorded under the kit's home folder.
    pub fn list_names() -> Vec<String> {
        crate::recorded_names("s3", "s3.json")
    }

    /// The description (endpoint, keys, folders).
    pub fn info(&self) -> &S3Info {
        &self.info
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        self.info.endpoint()
    }

    /// The access key.
    pub fn access_key(&self) -> &str {
        &self.info.access_key
    }

    /// The secret key.
    pub fn secret_key(&self) -> &str {
        &self.info.secret_key
    }

    /// Whether the server process is alive.
    pub fn is_running(&self) -> bool {
        self.info.pid.is_some_and(process::alive)
    }

    /// Creates bucket `bucket` (a directory under the data root).
    pub fn create_bucket(&self, bucket: &str) -> Result<()> {
        validate_bucket(bucket)?;
        let dir = self.info.data_dir().join(bucket);
        fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))
    }

    /// The file behind `bucket/key`, for tests that damage objects behind
    /// the server's back.
    pub fn object_path(&self, bucket: &str, key: &str) -> PathBuf {
        self.info.data_dir().join(bucket).join(key)
    }

    /// Starts the server process again on its port, with its data (no-op
    /// when it runs). Waits until it accepts connections.
    pub fn restart(&mut self) -> Result<()> {
        if self.is_running() {
            return Ok(());
        }
        let bin = s3s_fs_binary()?;
        let log_path = self.info.root.join("server.log");
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io_err(format!("opening {}", log_path.display())))?;
        let log_err = log
            .try_clone()
            .map_err(io_err(format!("opening {}", log_path.display())))?;
        let mut cmd = Command::new(&bin);
        cmd.arg("--host")
            .arg(HOST.to_string())
            .arg("--port")
            .arg(self.info.port.to_string())
            .arg("--access-key")
            .arg(&self.info.access_key)
            .arg("--secret-key")
            .arg(&self.info.secret_key)
            .arg(self.info.data_dir())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        let child = process::spawn(cmd, self.info.detached)
            .map_err(io_err(format!("starting {}", bin.display())))?;
        self.info.pid = Some(child.id());
        self.child = Some(child);
        self.save()?;
        self.wait_ready(&log_path)
    }

    fn wait_ready(&mut self, log: &Path) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let addr = SocketAddrV4::new(HOST, self.info.port);
        loop {
            if TcpStream::connect_timeout(&addr.into(), Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            let exited = match &mut self.child {
                Some(child) => matches!(child.try_wait(), Ok(Some(_))),
                None => !self.is_running(),
            };
            if exited || Instant::now() > deadline {
                return Err(Error::DaemonStart {
                    daemon: format!("s3s-fs '{}'", self.info.name),
                    reason: if exited {
                        "the process exited".into()
                    } else {
                        format!("port {} not open after {READY_TIMEOUT:?}", self.info.port)
                    },
                    logs: log.to_path_buf(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the server process; port and data are kept for
    /// [`restart`](Self::restart).
    pub fn stop(&mut self) -> Result<()> {
        process::kill_and_reap(&mut self.info.pid, &mut self.child)?;
        self.save()
    }

    /// Stops the server and removes its folder.
    pub fn destroy(mut self) -> Result<()> {
        self.owned = false;
        self.stop()?;
        fs::remove_dir_all(&self.info.root)
            .map_err(io_err(format!("removing {}", self.info.root.display())))
    }

    /// Stops owning the server: it keeps running after this handle.
    pub fn detach(mut self) -> S3Info {
        self.owned = false;
        self.child = None;
        self.info.clone()
    }

    fn save(&self) -> Result<()> {
        crate::save_description(&self.info.root, "s3.json", &self.info)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = self.stop();
        if std::thread::panicking() {
            eprintln!(
                "ferry-testkit: test failed; S3 server '{}' data and log kept under {}",
                self.info.name,
                self.info.root.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.info.root);
        }
    }
}

/// The s3s-fs executable (see the module docs).
pub fn s3s_fs_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("FERRY_S3S_FS") {
        return Ok(PathBuf::from(path));
    }
    let cached = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
        .join(format!(".cache/ferry/s3s-fs-{S3S_FS_VERSION}/bin/s3s-fs"));
    if cached.is_file() {
        return Ok(cached);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("s3s-fs"))
            .find(|p| p.is_file())
    });
    on_path.ok_or_else(|| {
        Error::Binaries(format!(
            "s3s-fs not found (looked at $FERRY_S3S_FS, {}, PATH); install it with \
             `cargo install --root ~/.cache/ferry/s3s-fs-{S3S_FS_VERSION} s3s-fs --version {S3S_FS_VERSION} --features binary --locked` \
             (scripts/test does this)",
            cached.display()
        ))
    })
}

/// Checks an S3 bucket name (3-63 characters of `[a-z0-9.-]`).
pub fn validate_bucket(bucket: &str) -> Result<()> {
    let valid = (3..=63).contains(&bucket.len())
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if valid {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "bucket name '{bucket}' must be 3-63 characters of [a-z0-9.-]"
        )))
    }
}

/// Checks a component's name (`what`: "S3 server", "Kafka broker").
pub(crate) fn validate_component_name(what: &str, name: &str) -> Result<String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(name.to_string())
    } else {
        Err(Error::Invalid(format!(
            "{what} name '{name}' must be 1-64 characters of [A-Za-z0-9_-]"
        )))
    }
}

fn validate_name(name: &str) -> Result<String> {
    validate_component_name("S3 server", name)
}

/// A free port on loopback (the kernel's pick; the server binds it right
/// after).
pub(crate) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind(SocketAddrV4::new(HOST, 0))
        .map_err(io_err("finding a free loopback port"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(io_err("finding a free loopback port"))
}

/// 32 random hex characters from the kernel.
fn random_secret() -> Result<String> {
    Ok(random_bytes()?.iter().map(|b| format!("{b:02x}")).collect())
}

/// 16 random bytes from the kernel.
pub(crate) fn random_bytes() -> Result<[u8; 16]> {
    let mut bytes = [0u8; 16];
    let mut file = fs::File::open("/dev/urandom").map_err(io_err("opening /dev/urandom"))?;
    std::io::Read::read_exact(&mut file, &mut bytes).map_err(io_err("reading /dev/urandom"))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_buckets_are_checked() {
        assert!(validate_name("dr-store_1").is_ok());
        assert!(validate_name("a/b").is_err());
        assert_eq!(random_secret().expect("random").len(), 32);
    }
}
