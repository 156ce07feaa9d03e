//! [`StorageLocation`]: where checkpoints and savepoints live, as given by a
//! user (`job.checkpointsDirectory`, `ferry run -s PATH`, a savepoint target).
//!
//! Two kinds: the local filesystem (a plain path or a `file://` URI) and an
//! object store bucket (`s3://bucket/prefix`, `gs://…`, `az://container/…`).
//! A location is a *store* (the filesystem, or one bucket) plus a *key* in
//! it ([`StorageLocation::key`]); [`super::StoreResolver`] opens the store,
//! and [`StorageLocation::with_key`] turns a key found in that store back
//! into a location an operator can paste into `ferry run -s`.

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
    /// A prefix in an object store bucket.
    Object(ObjectLocation),
}

/// A prefix in one bucket of an object store.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectLocation {
    /// Which kind of object store.
    pub scheme: ObjectScheme,
    /// The bucket (S3, GCS) or container (Azure).
    pub bucket: String,
    /// The key prefix inside the bucket (the root for the whole bucket).
    pub prefix: StateKey,
}

/// The object stores a location can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ObjectScheme {
    /// Amazon S3 or an S3-compatible server: `s3://` (`s3a://` and `s3p://`,
    /// Flink's spellings, are read as `s3://`).
    S3,
    /// Google Cloud Storage: `gs://`.
    Gs,
    /// Azure Blob Storage: `az://container/…`.
    Az,
}

impl ObjectScheme {
    /// The canonical URI scheme: `s3`, `gs` or `az`.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectScheme::S3 => "s3",
            ObjectScheme::Gs => "gs",
            ObjectScheme::Az => "az",
        }
    }

    fn from_uri_scheme(scheme: &str) -> Option<Self> {
        match scheme.to_ascii_lowercase().as_str() {
            "s3" | "s3a" | "s3p" => Some(ObjectScheme::S3),
            "gs" => Some(ObjectScheme::Gs),
            "az" => Some(ObjectScheme::Az),
            _ => None,
        }
    }
}

impl fmt::Display for ObjectScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ObjectLocation {
    /// `scheme://bucket/prefix` (`scheme://bucket` for the bucket root).
    pub fn to_uri(&self) -> String {
        if self.prefix.is_root() {
            format!("{}://{}", self.scheme, self.bucket)
        } else {
            format!("{}://{}/{}", self.scheme, self.bucket, self.prefix)
        }
    }
}

impl fmt::Display for ObjectLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_uri())
    }
}

/// Why a string is not a usable [`StorageLocation`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid storage location '{input}': {reason}")]
pub struct LocationError {
    /// The text as given (credentials embedded in a URI are replaced by `***`).
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl StorageLocation {
    /// Parses a plain path (absolute or relative to the current directory),
    /// a `file:` URI (`file:///abs/path`, `file://localhost/abs/path`) or an
    /// object store URI (`s3://bucket/prefix`, `gs://…`, `az://…`).
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
            Some(scheme) => match ObjectScheme::from_uri_scheme(scheme) {
                Some(object) => parse_object(object, scheme, input),
                None => Err(fail(format!(
                    "the '{scheme}' scheme is not supported; use a local path, a file:// URI, \
                     or s3://, gs:// or az://"
                ))),
            },
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
            StorageLocation::Object(_) => None,
        }
    }

    /// The bucket and prefix, for object store locations.
    pub fn as_object(&self) -> Option<&ObjectLocation> {
        match self {
            StorageLocation::Local(_) => None,
            StorageLocation::Object(object) => Some(object),
        }
    }

    /// The location as a URI (`file:///abs/path`, `s3://bucket/prefix`).
    pub fn to_uri(&self) -> String {
        match self {
            StorageLocation::Local(path) => match url::Url::from_file_path(path) {
                Ok(url) => url.to_string(),
                Err(()) => format!("file://{}", path.display()),
            },
            StorageLocation::Object(object) => object.to_uri(),
        }
    }

    /// The key of this location inside its store. Local: the absolute path
    /// without its leading slash (the local store is rooted at `/`, see
    /// [`super::ObjectStateStore::local`]); object: the prefix in the bucket.
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
            StorageLocation::Object(object) => object.prefix.clone(),
        }
    }

    /// The location of `key` in the same store as this one (same
    /// filesystem, or same bucket).
    pub fn with_key(&self, key: StateKey) -> StorageLocation {
        match self {
            StorageLocation::Local(_) => Self::local_from_key(&key),
            StorageLocation::Object(object) => StorageLocation::Object(ObjectLocation {
                scheme: object.scheme,
                bucket: object.bucket.clone(),
                prefix: key,
            }),
        }
    }

    /// This location with one more path segment.
    pub fn join(&self, segment: &str) -> Result<StorageLocation, LocationError> {
        let key = self.key().child(segment).map_err(|e| LocationError {
            input: format!("{self}/{segment}"),
            reason: e.to_string(),
        })?;
        Ok(self.with_key(key))
    }

    /// Whether `other` lives in the same store as this location, so one
    /// opened [`super::StateStore`] serves both.
    pub fn same_store(&self, other: &StorageLocation) -> bool {
        match (self, other) {
            (StorageLocation::Local(_), StorageLocation::Local(_)) => true,
            (StorageLocation::Object(a), StorageLocation::Object(b)) => {
                a.scheme == b.scheme && a.bucket == b.bucket
            }
            _ => false,
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
    /// Local locations print as plain paths, object locations as URIs:
    /// what an operator pastes back into `ferry run -s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageLocation::Local(path) => write!(f, "{}", path.display()),
            StorageLocation::Object(object) => write!(f, "{object}"),
        }
    }
}

/// `scheme://bucket/prefix` → an object location. Credentials in the URI
/// (`s3://key:secret@bucket`) are refused, and blanked in the error.
fn parse_object(
    scheme: ObjectScheme,
    given_scheme: &str,
    input: &str,
) -> Result<StorageLocation, LocationError> {
    let rest = &input[given_scheme.len() + "://".len()..];
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if let Some((_, host)) = authority.rsplit_once('@') {
        return Err(LocationError {
            input: format!("{given_scheme}://***@{host}/{path}"),
            reason: "credentials do not belong in a location; use the s3.* settings or \
                     AWS_* environment variables"
                .to_string(),
        });
    }
    let fail = |reason: String| LocationError {
        input: input.to_string(),
        reason,
    };
    let bucket_ok = !authority.is_empty()
        && authority
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        && authority != "."
        && authority != "..";
    if !bucket_ok {
        return Err(fail(format!(
            "'{authority}' is not a bucket name ({scheme}://bucket/prefix; letters, digits, \
             '-', '.' and '_')"
        )));
    }
    let prefix = StateKey::parse(path.trim_matches('/')).map_err(|e| fail(e.to_string()))?;
    Ok(StorageLocation::Object(ObjectLocation {
        scheme,
        bucket: authority.to_string(),
        prefix,
    }))
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
            Ok(other) => panic!("{s}: not local: {other:?}"),
            Err(e) => panic!("{s}: {e}"),
        }
    }

    fn object(s: &str) -> ObjectLocation {
        match StorageLocation::parse(s) {
            Ok(StorageLocation::Object(o)) => o,
            Ok(other) => panic!("{s}: not an object location: {other:?}"),
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
    fn object_uris() {
        let o = object("s3://my-bucket/ferry/ckpt/");
        assert_eq!(o.scheme, ObjectScheme::S3);
        assert_eq!(o.bucket, "my-bucket");
        assert_eq!(o.prefix.as_str(), "ferry/ckpt");
        assert_eq!(o.to_uri(), "s3://my-bucket/ferry/ckpt");
        assert_eq!(object("s3a://b/x").to_uri(), "s3://b/x");
        assert_eq!(object("S3P://b/x").scheme, ObjectScheme::S3);
        assert_eq!(object("gs://b").to_uri(), "gs://b");
        assert!(object("gs://b/").prefix.is_root());
        assert_eq!(object("az://container/a/b").scheme, ObjectScheme::Az);
    }

    #[test]
    fn keys_stay_in_their_store() {
        let loc = StorageLocation::parse("s3://bkt/ferry/ckpt").expect("valid");
        assert_eq!(loc.key().as_str(), "ferry/ckpt");
        assert_eq!(loc.to_string(), "s3://bkt/ferry/ckpt");
        let other = loc.with_key(StateKey::parse("elsewhere/sp").expect("valid"));
        assert_eq!(other.to_uri(), "s3://bkt/elsewhere/sp");
        assert!(loc.same_store(&other));
        let joined = loc.join("chk-1").expect("valid");
        assert_eq!(joined.to_string(), "s3://bkt/ferry/ckpt/chk-1");
        assert!(loc.join("a/b").is_err());
        assert!(!loc.same_store(&StorageLocation::parse("s3://other/ferry").expect("valid")));
        assert!(!loc.same_store(&StorageLocation::parse("gs://bkt/ferry").expect("valid")));
        assert!(!loc.same_store(&StorageLocation::parse("/bkt/ferry").expect("valid")));
        let disk = StorageLocation::parse("/var/a").expect("valid");
        assert_eq!(
            disk.join("b").expect("valid"),
            StorageLocation::parse("/var/a/b").expect("valid")
        );
        assert!(disk.same_store(&StorageLocation::parse("/tmp").expect("valid")));
    }

    #[test]
    fn rejected_locations() {
        for (bad, why) in [
            ("", "empty"),
            ("  ", "empty"),
            ("hdfs:///ckpt", "'hdfs' scheme is not supported"),
            ("file://otherhost/ckpt", "absolute local path"),
            ("/tmp/a\u{1}b", "control characters"),
            ("s3://", "not a bucket name"),
            ("s3:///prefix", "not a bucket name"),
            ("s3://bad*bucket/x", "not a bucket name"),
            ("s3://b/a//c", "empty path segment"),
            ("s3://b/a/../c", "'..'"),
            ("s3://b/a?x=1", "not allowed"),
        ] {
            let err = StorageLocation::parse(bad).unwrap_err();
            assert!(err.to_string().contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn credentials_in_a_uri_are_refused_and_not_echoed() {
        let err = StorageLocation::parse("s3://AKIDEXAMPLE:s3cr3t@bucket/x").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("s3://***@bucket/x"), "{text}");
        assert!(
            !text.contains("s3cr3t") && !text.contains("AKIDEXAMPLE"),
            "{text}"
        );
    }

    #[test]
    fn key_and_back() {
        let loc = StorageLocation::parse("/var/ferry/ckpt").expect("valid");
        assert_eq!(loc.key().as_str(), "var/ferry/ckpt");
        assert_eq!(StorageLocation::local_from_key(&loc.key()), loc);
        assert_eq!(loc.with_key(loc.key()), loc);
        assert_eq!(loc.to_uri(), "file:///var/ferry/ckpt");
        assert_eq!(loc.to_string(), "/var/ferry/ckpt");
        let root = StorageLocation::parse("/").expect("valid");
        assert!(root.key().is_root());
    }
}
