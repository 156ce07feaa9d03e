//! [`SmallFs`]: a small tmpfs mounted in a folder of its own, which a test
//! can make read-only and writable again — a checkpoint directory that
//! stops accepting writes (root ignores permission bits, so `chmod` is no
//! fault for a test running as root; a read-only mount is).

use crate::{home_dir, io_err, Error, Result};
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a remount may wait for writers to close their files.
const REMOUNT_TIMEOUT: Duration = Duration::from_secs(10);

/// A mounted tmpfs of a fixed size. Dropping it unmounts (lazily, so files
/// still open elsewhere do not stop it) and removes the folder.
#[derive(Debug)]
pub struct SmallFs {
    path: PathBuf,
    size_bytes: u64,
}

impl SmallFs {
    /// Mounts a tmpfs of `size_bytes` on a new folder under the kit's home.
    pub fn mount(size_bytes: u64) -> Result<SmallFs> {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = home_dir().join("fs").join(format!(
            "smallfs-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).map_err(io_err(format!("creating {}", path.display())))?;
        let fs = SmallFs { path, size_bytes };
        if let Err(e) = fs.mount_with(0) {
            let _ = std::fs::remove_dir(&fs.path);
            std::mem::forget(fs);
            return Err(e);
        }
        Ok(fs)
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remounts read-only: writes fail with EROFS from now on. Waits (up to
    /// 10 s) while a file is open for writing, which blocks the remount.
    pub fn make_unwritable(&self) -> Result<()> {
        self.remount(libc::MS_RDONLY)
    }

    /// Remounts read-write.
    pub fn make_writable(&self) -> Result<()> {
        self.remount(0)
    }

    fn remount(&self, flags: libc::c_ulong) -> Result<()> {
        let start = Instant::now();
        loop {
            match self.mount_with(libc::MS_REMOUNT | flags) {
                Err(Error::Io { source, .. })
                    if source.raw_os_error() == Some(libc::EBUSY)
                        && start.elapsed() < REMOUNT_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    fn mount_with(&self, flags: libc::c_ulong) -> Result<()> {
        let target = c_path(&self.path)?;
        let data = CString::new(format!("size={},mode=0755", self.size_bytes))
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let fstype = c"tmpfs";
        // SAFETY: all pointers are valid NUL-terminated strings for the call.
        let rc = unsafe {
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                flags,
                data.as_ptr().cast(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Io {
                context: format!("mounting tmpfs on {}", self.path.display()),
                source: io::Error::last_os_error(),
            })
        }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let Ok(target) = c_path(&self.path) else {
            return;
        };
        // SAFETY: target is a valid NUL-terminated path.
        let rc = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        if rc != 0 {
            eprintln!(
                "ferry-testkit: unmounting {}: {}",
                self.path.display(),
                io::Error::last_os_error()
            );
            return;
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::Invalid(format!("{} contains a NUL byte", path.display())))
}
