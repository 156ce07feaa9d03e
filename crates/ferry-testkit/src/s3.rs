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

use crate::server_process::{described, fresh_root, ServerProcess};
use crate::{io_err, Error, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

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

described!(S3Info, "S3 server", "s3", "s3.json", |i| i.endpoint());

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
    process: ServerProcess<S3Info>,
}

impl std::fmt::Debug for S3Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Server")
            .field("name", &self.info().name)
            .field("endpoint", &self.endpoint())
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
        let (name, root) = fresh_root::<S3Info>(name, &["data"])?;
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
            process: ServerProcess::new(info),
        };
        server.restart()?;
        Ok(server)
    }

    /// Finds a server started earlier by name; the handle does not tear it
    /// down on drop.
    pub fn attach(name: &str) -> Result<S3Server> {
        Ok(S3Server {
            process: ServerProcess::attach(name)?,
        })
    }

    /// Names of the servers recorded under the kit's home folder.
    pub fn list_names() -> Vec<String> {
        ServerProcess::<S3Info>::list_names()
    }

    /// The description (endpoint, keys, folders).
    pub fn info(&self) -> &S3Info {
        &self.process.info
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        self.info().endpoint()
    }

    /// The access key.
    pub fn access_key(&self) -> &str {
        &self.info().access_key
    }

    /// The secret key.
    pub fn secret_key(&self) -> &str {
        &self.info().secret_key
    }

    /// Whether the server process is alive.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Creates bucket `bucket` (a directory under the data root).
    pub fn create_bucket(&self, bucket: &str) -> Result<()> {
        validate_bucket(bucket)?;
        let dir = self.info().data_dir().join(bucket);
        fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))
    }

    /// The file behind `bucket/key`, for tests that damage objects behind
    /// the server's back.
    pub fn object_path(&self, bucket: &str, key: &str) -> PathBuf {
        self.info().data_dir().join(bucket).join(key)
    }

    /// Starts the server process again on its port, with its data (no-op
    /// when it runs). Waits until it accepts connections.
    pub fn restart(&mut self) -> Result<()> {
        if self.is_running() {
            return Ok(());
        }
        let bin = s3s_fs_binary()?;
        let (out, err, log) = self.process.log_files("server.log")?;
        let info = self.info();
        let mut cmd = Command::new(&bin);
        cmd.arg("--host")
            .arg(HOST.to_string())
            .arg("--port")
            .arg(info.port.to_string())
            .arg("--access-key")
            .arg(&info.access_key)
            .arg("--secret-key")
            .arg(&info.secret_key)
            .arg(info.data_dir())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        self.process.spawn(cmd, &bin.display().to_string())?;
        self.process
            .wait_ready(READY_TIMEOUT, Duration::from_millis(50), &log, |info| {
                let addr = SocketAddrV4::new(HOST, info.port);
                TcpStream::connect_timeout(&addr.into(), Duration::from_millis(200))
                    .map(|_| ())
                    .map_err(|_| format!("port {} not open", info.port))
            })
    }

    /// Kills the server process; port and data are kept for
    /// [`restart`](Self::restart).
    pub fn stop(&mut self) -> Result<()> {
        self.process.stop()
    }

    /// Stops the server and removes its folder.
    pub fn destroy(self) -> Result<()> {
        self.process.destroy()
    }

    /// Stops owning the server: it keeps running after this handle.
    pub fn detach(self) -> S3Info {
        self.process.detach()
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
        assert!(validate_component_name("S3 server", "dr-store_1").is_ok());
        assert!(validate_component_name("S3 server", "a/b").is_err());
        assert_eq!(random_secret().expect("random").len(), 32);
    }
}
