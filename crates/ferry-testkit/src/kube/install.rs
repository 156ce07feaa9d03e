//! The `etcd` and `kube-apiserver` binaries: built once per machine with
//! `go build` from the small Go module in `crates/ferry-testkit/go/kube`
//! (its go.mod pins `k8s.io/kubernetes` and every staging module, its
//! go.sum makes the build reproducible) into
//! `~/.cache/ferry/kube-<version>/bin`. A marker file written last says
//! the build finished; a lock keeps two tests from building at once.

use crate::binaries::cache_dir;
use crate::{io_err, Error, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Kubernetes release whose API server the kit runs.
pub const KUBE_VERSION: &str = "1.37.2";
/// The etcd release it stores its objects in (the one that release of
/// Kubernetes names).
pub const ETCD_VERSION: &str = "3.7.0";
const MARKER: &str = ".ferry-installed";

/// The folder holding `etcd` and `kube-apiserver`: `$FERRY_KUBE_BIN`, else
/// the cache folder of [`KUBE_VERSION`] once built.
pub fn kube_bin_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("FERRY_KUBE_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let prefix = prefix();
    if prefix.join(MARKER).is_file() {
        return Ok(prefix.join("bin"));
    }
    Err(Error::Binaries(format!(
        "the Kubernetes API server and etcd are not built in {} (or $FERRY_KUBE_BIN); \
         build them with `ferry-testkit kube install` (scripts/test does this; needs Go)",
        prefix.display()
    )))
}

fn prefix() -> PathBuf {
    cache_dir().join(format!("kube-{KUBE_VERSION}"))
}

/// The Go module the binaries are built from (in this crate's sources).
pub fn go_module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("go/kube")
}

/// Builds the binaries unless they are cached; returns their folder and
/// whether this call built them.
pub fn install() -> Result<(PathBuf, bool)> {
    let prefix = prefix();
    if prefix.join(MARKER).is_file() {
        return Ok((prefix.join("bin"), false));
    }
    let cache = cache_dir();
    fs::create_dir_all(&cache).map_err(io_err(format!("creating {}", cache.display())))?;
    let _lock =
        crate::binaries::FileLock::acquire(&cache.join(format!("kube-{KUBE_VERSION}.lock")))?;
    // Another process may have built them while this one waited.
    if prefix.join(MARKER).is_file() {
        return Ok((prefix.join("bin"), false));
    }
    let staging = cache.join(format!(
        "kube-{KUBE_VERSION}.partial-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).map_err(io_err(format!("creating {}", staging.display())))?;
    eprintln!(
        "ferry-testkit: building kube-apiserver {KUBE_VERSION} and etcd {ETCD_VERSION} with go build \
         (once per machine; minutes)"
    );
    let out = Command::new("go")
        .args([
            "build",
            "-buildvcs=false",
            "-trimpath",
            "-ldflags=-s -w",
            "-o",
        ])
        .arg(format!("{}/", staging.display()))
        .args(["./etcd", "./kube-apiserver"])
        .current_dir(go_module_dir())
        .output()
        .map_err(|e| {
            Error::Binaries(format!(
                "cannot run go (install Go 1.26 or newer, or run scripts/test): {e}"
            ))
        })?;
    if !out.status.success() {
        return Err(Error::Binaries(format!(
            "go build in {} failed: {}",
            go_module_dir().display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let _ = fs::remove_dir_all(&prefix);
    fs::create_dir_all(&prefix).map_err(io_err(format!("creating {}", prefix.display())))?;
    fs::rename(&staging, prefix.join("bin"))
        .map_err(io_err(format!("moving binaries to {}", prefix.display())))?;
    // Written last: a crash mid-build leaves no marker.
    fs::write(prefix.join(MARKER), KUBE_VERSION).map_err(io_err("writing install marker"))?;
    Ok((prefix.join("bin"), true))
}
