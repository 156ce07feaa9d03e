//! Checkpoint and savepoint storage on object stores for ferry.
//!
//! The engine ([`ferry_engine::checkpoint`]) knows locations
//! (`s3://bucket/prefix`, `gs://…`, `az://…`) and the [`StoreResolver`]
//! trait; this crate opens the stores behind them with the `object_store`
//! crate: Amazon S3 and S3-compatible servers (cargo feature `s3`, on by
//! default), Google Cloud Storage (`gcs`) and Azure Blob Storage (`azure`).
//! The engine builds without it.
//!
//! - `settings`: [`S3Settings`], Flink's `s3.*` keys ([`S3_KEYS`]) plus
//!   `AWS_*` variables.
//! - `secret`: [`Secret`], which never prints.
//! - `backend`: one object_store client per bucket, short retries.
//! - `redact`: [`RedactingStore`], errors without secrets or raw XML.
//! - [`ObjectStoreResolver`] (here): the resolver the binary hands to
//!   `CheckpointStore::open`, and [`ObjectStoreResolver::probe`], the early
//!   "can we use this location at all" check.

mod backend;
mod bucket;
mod redact;
mod secret;
mod settings;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ferry_engine::checkpoint::{
    ObjectScheme, ObjectStateStore, StateStore, StorageLocation, StoreError, StoreResolver,
};
use object_store::ObjectStore;

pub use backend::{CONNECT_TIMEOUT, MAX_RETRIES, REQUEST_TIMEOUT, RETRY_TIMEOUT};
pub use bucket::{
    bucket_key_names, is_bucket_key, is_secret_bucket_key, BucketKeyError, BUCKET_KEY_PREFIX,
    BUCKET_KEY_SUFFIXES,
};
pub use redact::{describe, RedactedError, RedactingStore};
pub use secret::{redact, Secret};
pub use settings::{
    ResolvedS3, S3SettingError, S3Settings, DEFAULT_REGION, S3_ACCESS_KEY, S3_ALLOW_HTTP,
    S3_ENDPOINT, S3_KEYS, S3_PATH_STYLE_ACCESS, S3_REGION, S3_SECRET_KEY, S3_SESSION_TOKEN,
};

/// A bucket's client, raw (for the probe) and as a [`StateStore`].
#[derive(Debug, Clone)]
struct Opened {
    raw: Arc<dyn ObjectStore>,
    state: Arc<dyn StateStore>,
}

/// Opens local paths and object store buckets; one client per bucket,
/// cached.
#[derive(Debug)]
pub struct ObjectStoreResolver {
    /// The S3 settings with the environment; each bucket's are resolved
    /// when it is opened (`s3.bucket.<bucket>.*` over `s3.*`), and a
    /// problem is reported then, naming the location.
    s3: S3Settings,
    secrets: Arc<[Secret]>,
    buckets: Mutex<HashMap<(ObjectScheme, String), Opened>>,
}

/// A location that cannot be used (see [`ObjectStoreResolver::probe`]).
#[derive(Debug, thiserror::Error)]
#[error("cannot use checkpoint storage {location}: {problem}")]
pub struct ProbeError {
    /// The location, as a URI.
    pub location: String,
    /// What is wrong, secrets removed.
    pub problem: String,
}

impl ObjectStoreResolver {
    /// A resolver with these S3 settings (already merged with the
    /// environment: see [`S3Settings::with_process_env`]).
    pub fn from_settings(s3: &S3Settings) -> Self {
        let mut secrets = s3.secrets();
        // GCS and Azure read their own environment; keep their keys out of
        // messages too.
        for (name, value) in std::env::vars() {
            let cloud = name.starts_with("GOOGLE_") || name.starts_with("AZURE_");
            let secret = ["KEY", "SECRET", "TOKEN", "PASSWORD"]
                .iter()
                .any(|w| name.contains(w));
            if cloud && secret {
                secrets.push(Secret::new(value));
            }
        }
        ObjectStoreResolver {
            s3: s3.clone(),
            secrets: secrets.into(),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// The secrets this resolver keeps out of messages (for callers that
    /// print errors of their own).
    pub fn secrets(&self) -> &[Secret] {
        &self.secrets
    }

    fn bucket(&self, location: &StorageLocation) -> Result<Option<Opened>, StoreError> {
        let Some(object) = location.as_object() else {
            return Ok(None);
        };
        let key = (object.scheme, object.bucket.clone());
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(opened) = buckets.get(&key) {
            return Ok(Some(opened.clone()));
        }
        let fail = |reason: String| StoreError::Open {
            location: location.to_uri(),
            reason: redact(&reason, &self.secrets),
        };
        let s3 = match (self.resolved(&object.bucket), object.scheme) {
            (Err(e), ObjectScheme::S3) => return Err(fail(e.to_string())),
            (s3, _) => s3.ok(),
        };
        let raw = backend::build(object.scheme, &object.bucket, s3.as_ref()).map_err(fail)?;
        let state: Arc<dyn StateStore> = Arc::new(RedactingStore::new(
            ObjectStateStore::new(raw.clone()),
            self.secrets.clone(),
        ));
        let opened = Opened { raw, state };
        buckets.insert(key, opened.clone());
        Ok(Some(opened))
    }

    /// The S3 settings of `bucket`, merged.
    fn resolved(&self, bucket: &str) -> Result<ResolvedS3, S3SettingError> {
        self.s3.for_bucket(bucket).resolve()
    }

    /// Checks that `location` can be used: for an object store, one listing
    /// request under its prefix (answers "wrong credentials", "no such
    /// bucket" and "endpoint unreachable" before a job starts); local paths
    /// pass (the directory is created on first write).
    pub async fn probe(&self, location: &StorageLocation) -> Result<(), ProbeError> {
        let fail = |problem: String| ProbeError {
            location: location.to_uri(),
            problem,
        };
        let opened = match self.bucket(location) {
            Ok(Some(opened)) => opened,
            Ok(None) => return Ok(()),
            Err(StoreError::Open { reason, .. }) => return Err(fail(reason)),
            Err(other) => return Err(fail(describe(&other, &self.secrets))),
        };
        let prefix = object_store::path::Path::from(location.key().as_str());
        match opened.raw.list_with_delimiter(Some(&prefix)).await {
            Ok(_) => Ok(()),
            Err(e) => Err(fail(self.explain(location, &e))),
        }
    }

    /// A probe failure in words: the likely cause first, then the detail.
    fn explain(&self, location: &StorageLocation, error: &object_store::Error) -> String {
        let detail = describe(error, &self.secrets);
        let bucket = location.as_object().map_or("", |o| o.bucket.as_str());
        let unreachable = is_unreachable(error);
        let hint = match redact::s3_code(&detail) {
            Some("NoSuchBucket") => format!("the bucket '{bucket}' does not exist"),
            Some(
                "InvalidAccessKeyId"
                | "SignatureDoesNotMatch"
                | "AccessDenied"
                | "ExpiredToken"
                | "InvalidToken",
            ) => format!(
                "access denied: check s3.access-key and s3.secret-key (or \
                 s3.bucket.{bucket}.access-key and .secret-key, or AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY)"
            ),
            _ if unreachable => {
                let endpoint = match self.resolved(bucket) {
                    Ok(ResolvedS3 {
                        endpoint: Some(e), ..
                    }) if location
                        .as_object()
                        .is_some_and(|o| o.scheme == ObjectScheme::S3) =>
                    {
                        e
                    }
                    _ => "the storage service".to_string(),
                };
                format!("cannot reach {endpoint}")
            }
            _ => match error {
                object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. } => {
                    "access denied: check the credentials".to_string()
                }
                object_store::Error::NotFound { .. } => {
                    format!("the bucket '{bucket}' does not exist")
                }
                _ => "the store returned an error".to_string(),
            },
        };
        format!("{hint} ({detail})")
    }
}

/// Whether the error chain says the server could not be reached at all.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
fn is_unreachable(error: &(dyn std::error::Error + 'static)) -> bool {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(http) = e.downcast_ref::<HttpError>() {
            return matches!(
                http.kind(),
                HttpErrorKind::Connect | HttpErrorKind::Timeout | HttpErrorKind::Request
            );
        }
        next = e.source();
    }
    false
}

/// Without a cloud backend nothing is ever reached over the network.
#[cfg(not(any(feature = "s3", feature = "gcs", feature = "azure")))]
fn is_unreachable(_: &(dyn std::error::Error + 'static)) -> bool {
    false
}

impl StoreResolver for ObjectStoreResolver {
    fn open(&self, location: &StorageLocation) -> Result<Arc<dyn StateStore>, StoreError> {
        match self.bucket(location)? {
            Some(opened) => Ok(opened.state),
            None => Ok(Arc::new(ObjectStateStore::local())),
        }
    }
}

#[cfg(test)]
#[cfg(feature = "s3")]
mod tests {
    use super::*;

    fn s3_settings(endpoint: &str, credentials: Option<(&str, &str)>) -> S3Settings {
        let mut keys = ferry_engine::config::Config::new();
        keys.set(&S3_ENDPOINT, endpoint);
        if let Some((id, secret)) = credentials {
            keys.set(&S3_ACCESS_KEY, id);
            keys.set(&S3_SECRET_KEY, secret);
        }
        S3Settings::from_config(&keys).expect("valid")
    }

    fn loc(s: &str) -> StorageLocation {
        StorageLocation::parse(s).expect("valid location")
    }

    #[test]
    fn local_paths_open_the_local_store_and_buckets_are_cached() {
        let s3 = s3_settings("http://127.0.0.1:1", Some(("id", "sekrit-value")));
        let r = ObjectStoreResolver::from_settings(&s3);
        r.open(&loc("/tmp/x")).expect("local");
        let a = r.open(&loc("s3://bkt/a")).expect("s3");
        let b = r.open(&loc("s3://bkt/b")).expect("s3");
        assert!(Arc::ptr_eq(&a, &b), "one client per bucket");
        let shown = format!("{r:?}");
        assert!(!shown.contains("sekrit-value"), "{shown}");
    }

    #[test]
    fn invalid_s3_settings_are_reported_against_the_location() {
        let s3 = s3_settings("http://s3.example.com", None);
        let r = ObjectStoreResolver::from_settings(&s3);
        let err = r.open(&loc("s3://bkt/ckpt")).unwrap_err().to_string();
        assert!(
            err.contains("s3://bkt/ckpt") && err.contains("s3.allow-http"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn unreachable_endpoint_fails_fast_naming_location_without_secret() {
        // Port 1 on loopback: connection refused.
        let s3 = s3_settings("http://127.0.0.1:1", Some(("id", "sekrit-value")));
        let r = ObjectStoreResolver::from_settings(&s3);
        let started = std::time::Instant::now();
        let err = r
            .probe(&loc("s3://bkt/ckpt"))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            started.elapsed() < RETRY_TIMEOUT + CONNECT_TIMEOUT,
            "{:?}",
            started.elapsed()
        );
        assert!(err.contains("s3://bkt/ckpt"), "{err}");
        assert!(err.contains("cannot reach http://127.0.0.1:1"), "{err}");
        assert!(!err.contains("sekrit-value"), "{err}");
        // Through the StateStore too, with the secret in the request URL
        // (a key named like it): the error shows the URL, scrubbed.
        let store = r.open(&loc("s3://bkt/ckpt")).expect("open");
        let key = loc("s3://bkt/ckpt/sekrit-value").key();
        let err = store.get(&key).await.unwrap_err();
        // (The key itself is ours and shown as given; the backend's text,
        // with the request URL, is scrubbed.)
        let backend = std::error::Error::source(&err)
            .expect("backend error")
            .to_string();
        assert!(backend.contains("/bkt/ckpt/***"), "{backend}");
        assert!(!backend.contains("sekrit-value"), "{backend}");
    }
}
