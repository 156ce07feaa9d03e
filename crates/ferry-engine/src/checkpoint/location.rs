//! [`StorageLocation`]: where checkpoints and savepoints live, as given by a
//! user (`job.checkpointsDirectory`, `ferry run -s PATH`, a savepoint target).
//!
//! Today only the local filesystem is supported, given as a plain path or a
//! `file://` URI. The type is an enum so `s3://bucket/prefix` can be added
//! without changing its users; until then such URIs are rejected with a clear
//! message instead of being mistaken for relative paths.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use super::key::StateKey;

/// A directory (or file) in checkpoint storage.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StorageLocation {
    /// A local or mounted filesystem path; always absolute and lexically
    /// normalized (no `.` or `..` components).
    Local(PathBuf),
}

/// Why a string is not a usable [`StorageLocation`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid storage location '{input}': {reason}")]
pub struct LocationError {
    /// The text as given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl StorageLocation {
    /// Parses a plain path (absolute or relative to the current directory)
    /// or a `file:` URI (`file:///abs/path`, `file://localhost/abs/path`).
    /// Other URI schemes are rejected for now.
    pub fn parse(input: &str) -> Result<Self, LocationError> {
        let fail = |reason: String| LocationError {
            input: input.to_string(),
            reason,
        };
        if input.trim().is_empty() {
            return Err(fail("it is empty".to_string()));
        }
        match uri_scheme(input) {
            Some(scheme) if scheme.eq_ignore_ascii_case("file") => {
                let url =
                    url::Url::parse(input).map_err(|e| fail(format!("not a valid URI: {e}")))?;
                let path = url.to_file_path().map_err(|()| {
                    fail(
                        "a file:// URI must name an absolute local path (file:///path)".to_string(),
                    )
                })?;
                Self::local(&path).map_err(|e| fail(e.reason))
            }
            Some(scheme) => Err(fail(format!(
                "the '{scheme}' scheme is not supported yet; use a local path or a file:// URI"
            ))),
            None => Self::local(Path::new(input)).map_err(|e| fail(e.reason)),
        }
    }

    /// A local path, made absolute against the current directory and
    /// lexically normalized. `..` is resolved textually (as a shell would for
    /// `cd -L`), which matters only if the path goes through a symlink.
    pub fn local(path: &Path) -> Result<Self, LocationError> {
        let fail = |reason: &str| LocationError {
            input: path.display().to_string(),
            reason: reason.to_string(),
        };
        let absolute = std::path::absolute(path)
            .map_err(|e| fail(&format!("cannot make it absolute: {e}")))?;
        let mut normal = PathBuf::from("/");
        for component in absolute.components() {
            match component {
                Component::RootDir | Component::CurDir => {}
                Component::ParentDir => {
                    normal.pop();
                }
                Component::Normal(part) => {
                    let part = part
                        .to_str()
                        .ok_or_else(|| fail("the path is not valid UTF-8"))?;
                    // Validate against the object-key rules up front so
                    // `key()` can never fail later.
                    StateKey::root()
                        .child(part)
                        .map_err(|e| fail(&e.to_string()))?;
                    normal.push(part);
                }
                Component::Prefix(_) => return Err(fail("path prefixes are not supported")),
            }
        }
        Ok(StorageLocation::Local(normal))
    }

    /// The local path, for local locations.
    pub fn as_local_path(&self) -> Option<&Path> {
        match self {
            StorageLocation::Local(path) => Some(path),
        }
    }

    /// The location as a URI (`file:///abs/path`).
    pub fn to_uri(&self) -> String {
        match self {
            StorageLocation::Local(path) => match url::Url::from_file_path(path) {
                Ok(url) => url.to_string(),
                Err(()) => format!("file://{}", path.display()),
            },
        }
    }

    /// The object-store key of this location in a store rooted at `/`
    /// (what [`super::ObjectStateStore::local`] uses): the absolute path
    /// without its leading slash.
    pub fn key(&self) -> StateKey {
        match self {
            StorageLocation::Local(path) => {
                let mut key = StateKey::root();
                for component in path.components() {
                    if let Component::Normal(part) = component {
                        // Checked in `local()`; the only way to get a Local.
                        key = key.join_valid(&part.to_string_lossy());
                    }
                }
                key
            }
        }
    }

    /// The local location whose [`key`](Self::key) is `key`.
    pub fn local_from_key(key: &StateKey) -> Self {
        let mut path = PathBuf::from("/");
        for segment in key.segments() {
            path.push(segment);
        }
        StorageLocation::Local(path)
    }
}

impl fmt::Display for StorageLocation {
    /// Local locations print as plain paths, which is what an operator
    /// pastes back into `ferry run -s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageLocation::Local(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The scheme of `input` if it looks like a URI (`scheme://…` or `file:…`),
/// else `None` (a path, even one with a `:` in it).
fn uri_scheme(input: &str) -> Option<&str> {
    let (scheme, rest) = input.split_once(':')?;
    let valid_scheme = scheme.len() > 1
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (valid_scheme && (rest.starts_with("//") || scheme.eq_ignore_ascii_case("file")))
        .then_some(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(s: &str) -> PathBuf {
        match StorageLocation::parse(s) {
            Ok(StorageLocation::Local(p)) => p,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    #[test]
    fn plain_paths_and_file_uris() {
        assert_eq!(local("/var/ferry/ckpt"), PathBuf::from("/var/ferry/ckpt"));
        assert_eq!(local("/var/ferry/ckpt/"), PathBuf::from("/var/ferry/ckpt"));
        assert_eq!(
            local("file:///var/ferry/ckpt"),
            PathBuf::from("/var/ferry/ckpt")
        );
        assert_eq!(
            local("file://localhost/var/ferry/ckpt"),
            PathBuf::from("/var/ferry/ckpt")
        );
        assert_eq!(local("file:///tmp/a%20b"), PathBuf::from("/tmp/a b"));
        assert_eq!(local("/a/./b/../c"), PathBuf::from("/a/c"));
        // A colon in a plain path is not a scheme.
        assert_eq!(local("/tmp/a:b"), PathBuf::from("/tmp/a:b"));
    }

    #[test]
    fn relative_paths_become_absolute() {
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(local("ckpt"), cwd.join("ckpt"));
    }

    #[test]
    fn rejected_locations() {
        for (bad, why) in [
            ("", "empty"),
            ("  ", "empty"),
            ("s3://bucket/prefix", "'s3' scheme is not supported yet"),
            ("hdfs:///ckpt", "'hdfs' scheme is not supported yet"),
            ("file://otherhost/ckpt", "absolute local path"),
            ("/tmp/a\u{1}b", "control characters"),
        ] {
            let err = StorageLocation::parse(bad).unwrap_err();
            assert!(err.to_string().contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn key_and_back() {
        let loc = StorageLocation::parse("/var/ferry/ckpt").expect("valid");
        assert_eq!(loc.key().as_str(), "var/ferry/ckpt");
        assert_eq!(StorageLocation::local_from_key(&loc.key()), loc);
        assert_eq!(loc.to_uri(), "file:///var/ferry/ckpt");
        assert_eq!(loc.to_string(), "/var/ferry/ckpt");
        let root = StorageLocation::parse("/").expect("valid");
        assert!(root.key().is_root());
    }
}
