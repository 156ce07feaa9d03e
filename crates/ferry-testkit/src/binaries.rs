//! The Kudu server binaries: `org.apache.kudu:kudu-binary:<version>`
//! (classifier `linux-x86_64`) from Maven Central, unpacked once per release
//! into a cache folder that survives between runs
//! (`~/.cache/ferry/kudu-1.17.1`, `~/.cache/ferry/kudu-1.18.1`). A cluster
//! picks its release ([`KuduVersion`]); 1.17.1 is the default, and
//! `FERRY_KUDU_VERSION` changes the default (to run a suite on 1.18.1).
//!
//! The jar's `bin/kudu` carries a RUNPATH of `$ORIGIN/../lib`, but its bundled
//! libraries do not, so on Debian 12 the dynamic loader would resolve their
//! dependencies (libkrb5support, libk5crypto, ...) from the system and fail
//! with a symbol error. Every daemon and CLI call therefore gets
//! `LD_LIBRARY_PATH=<prefix>/lib`, and `SASL_PATH=<prefix>/lib/sasl2` for the
//! bundled SASL plugins. Nothing is written outside the cache folder.

use crate::{io_err, Error, Result};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Kudu release the kit runs unless told otherwise.
pub const KUDU_VERSION: &str = "1.17.1";
const MARKER: &str = ".ferry-installed";

/// A Kudu release the kit can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum KuduVersion {
    /// 1.17.1: immutable columns and non-unique primary keys arrived in 1.17.
    #[serde(rename = "1.17.1")]
    V1_17_1,
    /// 1.18.1, the newest release: tablet metrics in
    /// `/metrics_prometheus` (UPSERT with an explicit
    /// `auto_incrementing_id` works on 1.17.1 already).
    #[serde(rename = "1.18.1")]
    V1_18_1,
}

impl KuduVersion {
    /// Every release the kit knows, oldest first.
    pub const ALL: [KuduVersion; 2] = [KuduVersion::V1_17_1, KuduVersion::V1_18_1];

    /// `1.17.1`, `1.18.1`.
    pub fn as_str(self) -> &'static str {
        match self {
            KuduVersion::V1_17_1 => "1.17.1",
            KuduVersion::V1_18_1 => "1.18.1",
        }
    }

    /// `FERRY_KUDU_VERSION`, else 1.17.1.
    pub fn default_version() -> Result<KuduVersion> {
        match std::env::var("FERRY_KUDU_VERSION") {
            Ok(v) if !v.is_empty() => v
                .parse()
                .map_err(|e: Error| Error::Invalid(format!("FERRY_KUDU_VERSION: {e}"))),
            _ => Ok(KuduVersion::V1_17_1),
        }
    }

    fn artifact(self) -> String {
        format!(
            "org.apache.kudu:kudu-binary:{}:jar:linux-x86_64",
            self.as_str()
        )
    }

    fn jar_prefix(self) -> String {
        format!("kudu-binary-{}-linux-x86_64", self.as_str())
    }
}

impl std::fmt::Display for KuduVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for KuduVersion {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        KuduVersion::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = KuduVersion::ALL.iter().map(|v| v.as_str()).collect();
                Error::Invalid(format!(
                    "unknown Kudu version '{s}' (the kit runs {})",
                    known.join(", ")
                ))
            })
    }
}

/// How [`KuduBinaries::ensure`] found the binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// `FERRY_KUDU_HOME` pointed at an unpacked tree.
    Override,
    /// Already unpacked in the cache folder; nothing was downloaded.
    Cached,
    /// Downloaded with Maven and unpacked by this call.
    Installed,
}

/// An unpacked, runnable Kudu binary tree.
#[derive(Debug, Clone)]
pub struct KuduBinaries {
    prefix: PathBuf,
    provenance: Provenance,
    version: KuduVersion,
}

impl KuduBinaries {
    /// The process-wide binaries of the default release
    /// ([`KuduVersion::default_version`]), installed on first use.
    pub fn get() -> Result<&'static KuduBinaries> {
        Self::of(KuduVersion::default_version()?)
    }

    /// The process-wide binaries of `version`, installed on first use.
    pub fn of(version: KuduVersion) -> Result<&'static KuduBinaries> {
        type Slot = OnceLock<std::result::Result<KuduBinaries, String>>;
        static BINARIES: [Slot; KuduVersion::ALL.len()] = [OnceLock::new(), OnceLock::new()];
        let slot = KuduVersion::ALL
            .iter()
            .position(|v| *v == version)
            .and_then(|i| BINARIES.get(i))
            .ok_or_else(|| Error::Binaries(format!("no slot for Kudu {version}")))?;
        slot.get_or_init(|| Self::ensure_version(version).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Binaries(e.clone()))
    }

    /// [`ensure_version`](Self::ensure_version) of the default release.
    pub fn ensure() -> Result<Self> {
        Self::ensure_version(KuduVersion::default_version()?)
    }

    /// Finds the binaries of `version` (`FERRY_KUDU_HOME` for the default
    /// release, else the cache folder) and installs them into the cache
    /// folder if they are not there yet.
    pub fn ensure_version(version: KuduVersion) -> Result<Self> {
        if let Some(home) = std::env::var_os("FERRY_KUDU_HOME") {
            if version == KuduVersion::default_version()? {
                let bins = KuduBinaries {
                    prefix: PathBuf::from(home),
                    provenance: Provenance::Override,
                    version,
                };
                bins.check_runs()?;
                return Ok(bins);
            }
        }
        let cache = cache_dir();
        fs::create_dir_all(&cache).map_err(io_err(format!("creating {}", cache.display())))?;
        let prefix = cache.join(format!("kudu-{version}"));
        // Serialise installers: test binaries run in parallel on a fresh machine.
        let _lock = FileLock::acquire(&cache.join(format!("kudu-{version}.lock")))?;
        let provenance = if prefix.join(MARKER).exists() {
            Provenance::Cached
        } else {
            install(version, &cache, &prefix)?;
            Provenance::Installed
        };
        let bins = KuduBinaries {
            prefix,
            provenance,
            version,
        };
        bins.check_runs()?;
        Ok(bins)
    }

    /// The release these binaries are.
    pub fn version(&self) -> KuduVersion {
        self.version
    }

    /// Root of the unpacked tree (holds `bin/`, `lib/`, `www/`).
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// Whether this call found the binaries cached or had to install them.
    pub fn provenance(&self) -> Provenance {
        self.provenance
    }

    /// Path of the `kudu` executable.
    pub fn kudu(&self) -> PathBuf {
        self.prefix.join("bin").join("kudu")
    }

    /// The environment every Kudu process needs.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            (
                "LD_LIBRARY_PATH".into(),
                self.prefix.join("lib").into_os_string(),
            ),
            (
                "SASL_PATH".into(),
                self.prefix.join("lib").join("sasl2").into_os_string(),
            ),
        ]
    }

    /// A `kudu` command with the right environment.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(self.kudu());
        cmd.envs(self.env());
        cmd
    }

    fn check_runs(&self) -> Result<()> {
        let out =
            self.command().arg("--version").output().map_err(|e| {
                Error::Binaries(format!("cannot run {}: {e}", self.kudu().display()))
            })?;
        if out.status.success() {
            return Ok(());
        }
        let ldd = Command::new("ldd")
            .arg(self.kudu())
            .envs(self.env())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let missing: Vec<&str> = ldd.lines().filter(|l| l.contains("not found")).collect();
        Err(Error::Binaries(format!(
            "{} --version failed: {}{}",
            self.kudu().display(),
            String::from_utf8_lossy(&out.stderr).trim(),
            if missing.is_empty() {
                String::new()
            } else {
                format!(
                    "; missing host libraries (install them with apt, or run scripts/test): {}",
                    missing.join(", ")
                )
            }
        )))
    }
}

/// `$FERRY_CACHE_DIR`, else `$XDG_CACHE_HOME/ferry`, else `~/.cache/ferry`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FERRY_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("ferry");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache").join("ferry"),
        None => std::env::temp_dir().join("ferry-cache"),
    }
}

fn install(version: KuduVersion, cache: &Path, prefix: &Path) -> Result<()> {
    let artifact = version.artifact();
    eprintln!(
        "ferry-testkit: fetching {artifact} with Maven into {}",
        cache.display()
    );
    let staging = cache.join(format!("kudu-{version}.partial-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).map_err(io_err(format!("creating {}", staging.display())))?;
    let out = Command::new("mvn")
        .args(["-q", "-B", "dependency:copy"])
        .arg(format!("-Dartifact={artifact}"))
        .arg(format!("-DoutputDirectory={}", staging.display()))
        .output()
        .map_err(|e| {
            Error::Binaries(format!(
                "cannot run mvn (install Maven and a JDK, or run scripts/test): {e}"
            ))
        })?;
    if !out.status.success() {
        return Err(Error::Binaries(format!(
            "mvn dependency:copy -Dartifact={artifact} failed: {}{}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let jar_prefix = version.jar_prefix();
    let jar = staging.join(format!("{jar_prefix}.jar"));
    unzip(&jar, &staging)?;
    let unpacked = staging.join(&jar_prefix);
    for entry in fs::read_dir(unpacked.join("bin")).map_err(io_err("reading unpacked bin/"))? {
        let path = entry.map_err(io_err("reading unpacked bin/"))?.path();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
            .map_err(io_err(format!("chmod {}", path.display())))?;
    }
    let _ = fs::remove_dir_all(prefix);
    fs::rename(&unpacked, prefix)
        .map_err(io_err(format!("moving binaries to {}", prefix.display())))?;
    let _ = fs::remove_dir_all(&staging);
    let bins = KuduBinaries {
        prefix: prefix.to_path_buf(),
        provenance: Provenance::Installed,
        version,
    };
    bins.check_runs()?;
    // The marker is written last: a crash mid-install leaves no marker and the
    // next run starts over.
    fs::write(prefix.join(MARKER), &artifact).map_err(io_err("writing install marker"))?;
    eprintln!(
        "ferry-testkit: Kudu {version} installed at {}",
        prefix.display()
    );
    Ok(())
}

fn unzip(jar: &Path, into: &Path) -> Result<()> {
    let attempts: [(&str, Vec<OsString>); 2] = [
        (
            "unzip",
            vec![
                "-q".into(),
                "-o".into(),
                jar.into(),
                "-d".into(),
                into.into(),
            ],
        ),
        ("jar", vec!["xf".into(), jar.into()]),
    ];
    let mut failures = Vec::new();
    for (tool, args) in attempts {
        match Command::new(tool).args(&args).current_dir(into).output() {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => failures.push(format!(
                "{tool}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => failures.push(format!("{tool}: {e}")),
        }
    }
    Err(Error::Binaries(format!(
        "cannot unpack {}: {}",
        jar.display(),
        failures.join("; ")
    )))
}

/// An exclusive `flock` held until drop.
pub(crate) struct FileLock(#[allow(dead_code)] fs::File);

impl FileLock {
    pub(crate) fn acquire(path: &Path) -> Result<Self> {
        use std::os::fd::AsRawFd;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_err(format!("opening lock {}", path.display())))?;
        // SAFETY: flock on a file descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(io_err(format!("locking {}", path.display()))(
                std::io::Error::last_os_error(),
            ));
        }
        Ok(FileLock(file))
    }
}
