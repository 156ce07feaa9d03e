//! Per-bucket S3 settings: `s3.bucket.<bucket>.<key>` overrides `s3.<key>`
//! for that bucket only, as Hadoop S3A's `fs.s3a.bucket.<bucket>.<key>`
//! does (Flink forwards `s3.*` to `fs.s3a.*`). A job whose DR replica is a
//! bucket on another endpoint, with other credentials, names it so:
//!
//! ```text
//! s3.endpoint = https://s3.eu-west-1.amazonaws.com      # the primary
//! s3.bucket.dr-state.endpoint = https://minio.dr:9000  # the replica's
//! s3.bucket.dr-state.access-key = …
//! s3.bucket.dr-state.secret-key = …
//! ```
//!
//! Credentials come as a set, as for `s3.*`: a bucket that sets its
//! `access-key` takes its secret key and session token from its own keys
//! only. Every other setting falls back to `s3.<key>`, then to the
//! environment.

use crate::settings::{
    S3Settings, S3_ACCESS_KEY, S3_ALLOW_HTTP, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION,
    S3_SECRET_KEY, S3_SESSION_TOKEN,
};
use ferry_engine::config::{AnyOption, ConfigOption};

/// The prefix of the per-bucket keys.
pub const BUCKET_KEY_PREFIX: &str = "s3.bucket.";

/// The settings a bucket may override (the part after `s3.bucket.<b>.`).
pub const BUCKET_KEY_SUFFIXES: &[&str] = &[
    "endpoint",
    "access-key",
    "secret-key",
    "session-token",
    "region",
    "path.style.access",
    "allow-http",
];

/// A bad `s3.bucket.*` key or value (the value is never part of it: it
/// may be a secret).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct BucketKeyError {
    /// The key as given.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

/// Whether `name` is a per-bucket key (`s3.bucket.…`), valid or not.
pub fn is_bucket_key(name: &str) -> bool {
    name.get(..BUCKET_KEY_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(BUCKET_KEY_PREFIX))
}

/// Whether the per-bucket key `name` holds a secret (its value is never
/// shown).
pub fn is_secret_bucket_key(name: &str) -> bool {
    name.ends_with(".secret-key") || name.ends_with(".session-token")
}

fn parsed<T>(key: &ConfigOption<T>, value: &str, name: &str) -> Result<T, BucketKeyError> {
    key.parse(value).map_err(|e| BucketKeyError {
        key: name.to_string(),
        reason: e.to_string(),
    })
}

impl S3Settings {
    /// Sets the per-bucket key `name` (`s3.bucket.<bucket>.<suffix>`) to
    /// `value`, checked as its `s3.<suffix>` counterpart is.
    pub fn set_bucket_key(&mut self, name: &str, value: &str) -> Result<(), BucketKeyError> {
        let fail = |reason: String| BucketKeyError {
            key: name.to_string(),
            reason,
        };
        if !is_bucket_key(name) {
            return Err(fail(format!("not a {BUCKET_KEY_PREFIX}<bucket>.<key> key")));
        }
        let rest = &name[BUCKET_KEY_PREFIX.len()..];
        if BUCKET_KEY_SUFFIXES.contains(&rest) {
            return Err(fail(
                "the bucket name is empty (s3.bucket.<bucket>.<key>)".to_string(),
            ));
        }
        // The longest known suffix: bucket names may hold dots.
        let Some((bucket, suffix)) = BUCKET_KEY_SUFFIXES
            .iter()
            .filter_map(|s| {
                let bucket = rest.strip_suffix(s)?.strip_suffix('.')?;
                Some((bucket, *s))
            })
            .max_by_key(|(_, s)| s.len())
        else {
            return Err(fail(format!(
                "unknown setting; expected {BUCKET_KEY_PREFIX}<bucket>.<key> with <key> one of {}",
                BUCKET_KEY_SUFFIXES.join(", ")
            )));
        };
        if bucket.is_empty() {
            return Err(fail(
                "the bucket name is empty (s3.bucket.<bucket>.<key>)".to_string(),
            ));
        }
        let o = self.buckets.entry(bucket.to_string()).or_default();
        match suffix {
            "endpoint" => o.endpoint = Some(parsed(&S3_ENDPOINT, value, name)?),
            "access-key" => o.access_key = Some(parsed(&S3_ACCESS_KEY, value, name)?),
            "secret-key" => o.secret_key = Some(parsed(&S3_SECRET_KEY, value, name)?),
            "session-token" => o.session_token = Some(parsed(&S3_SESSION_TOKEN, value, name)?),
            "region" => o.region = Some(parsed(&S3_REGION, value, name)?),
            "path.style.access" => {
                o.path_style_access = Some(parsed(&S3_PATH_STYLE_ACCESS, value, name)?)
            }
            _ => o.allow_http = Some(parsed(&S3_ALLOW_HTTP, value, name)?),
        }
        Ok(())
    }

    /// The settings for `bucket`: its `s3.bucket.<bucket>.*` keys over the
    /// `s3.*` ones (credentials as a set), with the same environment.
    pub fn for_bucket(&self, bucket: &str) -> S3Settings {
        let mut base = S3Settings {
            buckets: Default::default(),
            ..self.clone()
        };
        let Some(o) = self.buckets.get(bucket) else {
            return base;
        };
        if o.access_key.is_some() {
            base.access_key = o.access_key.clone();
            base.secret_key = o.secret_key.clone();
            base.session_token = o.session_token.clone();
        } else if o.session_token.is_some() {
            base.session_token = o.session_token.clone();
        }
        if o.secret_key.is_some() && o.access_key.is_none() {
            base.secret_key = o.secret_key.clone();
        }
        base.endpoint = o.endpoint.clone().or(base.endpoint);
        base.region = o.region.clone().or(base.region);
        base.path_style_access = o.path_style_access.or(base.path_style_access);
        base.allow_http = o.allow_http.or(base.allow_http);
        base
    }
}

/// The names of the per-bucket counterparts of `s3.*` keys, for docs.
pub fn bucket_key_names() -> Vec<String> {
    [
        &S3_ENDPOINT as &dyn AnyOption,
        &S3_ACCESS_KEY,
        &S3_SECRET_KEY,
        &S3_SESSION_TOKEN,
        &S3_REGION,
        &S3_PATH_STYLE_ACCESS,
        &S3_ALLOW_HTTP,
    ]
    .iter()
    .map(|k| k.name().replacen("s3.", "s3.bucket.<bucket>.", 1))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> Result<S3Settings, BucketKeyError> {
        let mut s = S3Settings {
            endpoint: Some("http://127.0.0.1:9000".into()),
            access_key: Some("primary".into()),
            secret_key: Some(crate::Secret::new("primary-secret")),
            ..S3Settings::default()
        };
        for (k, v) in pairs {
            s.set_bucket_key(k, v)?;
        }
        Ok(s)
    }

    #[test]
    fn a_bucket_overrides_endpoint_and_credentials_as_a_set() {
        let s = with(&[
            ("s3.bucket.dr.state.endpoint", "http://127.0.0.2:9100"),
            ("s3.bucket.dr.state.access-key", "dr"),
            ("s3.bucket.dr.state.secret-key", "dr-secret"),
            ("s3.bucket.dr.state.path.style.access", "true"),
        ])
        .expect("valid");
        let dr = s.for_bucket("dr.state").resolve().expect("resolves");
        assert_eq!(dr.endpoint.as_deref(), Some("http://127.0.0.2:9100"));
        let (id, secret) = dr.credentials.expect("credentials");
        assert_eq!((id.as_str(), secret.expose()), ("dr", "dr-secret"));
        assert!(dr.path_style);
        // Other buckets keep the s3.* settings.
        let primary = s.for_bucket("primary").resolve().expect("resolves");
        assert_eq!(primary.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        let (id, _) = primary.credentials.expect("credentials");
        assert_eq!(id, "primary");
        // The secret is one of those kept out of messages.
        assert!(s.secrets().iter().any(|x| x.expose() == "dr-secret"));
    }

    #[test]
    fn a_bucket_access_key_without_its_secret_does_not_borrow_the_primary_one() {
        let s = with(&[("s3.bucket.dr.access-key", "dr")]).expect("valid");
        let err = s.for_bucket("dr").resolve().expect_err("no secret");
        assert!(err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn bad_bucket_keys_are_refused_naming_the_key() {
        for (key, value, says) in [
            ("s3.bucket.dr.colour", "x", "unknown setting"),
            (
                "s3.bucket..endpoint",
                "http://127.0.0.1:1",
                "bucket name is empty",
            ),
            (
                "s3.bucket.endpoint",
                "http://127.0.0.1:1",
                "bucket name is empty",
            ),
            ("s3.bucket.dr.endpoint", "ftp://x", "http"),
            ("s3.bucket.dr.allow-http", "maybe", "true or false"),
        ] {
            let err = with(&[(key, value)]).expect_err(key);
            assert_eq!(err.key, key);
            assert!(err.to_string().contains(says), "{key}: {err}");
        }
        let err = with(&[("s3.bucket.dr.secret-key", "")]).expect_err("empty");
        assert!(!err.to_string().contains("primary-secret"));
    }
}
