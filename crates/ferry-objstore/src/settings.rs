//! [`S3Settings`]: how to reach S3 (or an S3-compatible server), from
//! Flink's key names and the standard `AWS_*` environment variables.
//!
//! Keys ([`S3_KEYS`]: process keys of the `ferry` binary, also in
//! `--config` and `-D`): `s3.endpoint`, `s3.access-key`, `s3.secret-key`,
//! `s3.session-token`, `s3.path.style.access`, `s3.region`,
//! `s3.allow-http`. A key given wins
//! over the environment; credentials come as a set: when `s3.access-key` is
//! given, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
//! `AWS_SESSION_TOKEN` are ignored. Other `AWS_*` variables (web identity,
//! container credentials, profile-less STS) reach the client unchanged.

use std::net::IpAddr;

use ferry_engine::config::{
    Config, ConfigOption, KeyOrigin::Flink, Section, ValueError, ValueKind,
};

use crate::secret::Secret;

ferry_engine::config_section! {
    /// Flink's `s3.*` keys (process keys of the `ferry` binary).
    pub static S3_KEYS = Section::process("s3");
    /// `s3.endpoint`: an S3-compatible server's URL.
    pub const S3_ENDPOINT: ConfigOption<String> = ConfigOption::new("s3.endpoint", ValueKind::Text, endpoint, String::clone)
        .origin(Flink)
        .derived("AWS_ENDPOINT_URL, else AWS")
        .doc("URL of an S3-compatible server for s3:// state (http only on loopback unless s3.allow-http).");
    /// `s3.access-key`.
    pub const S3_ACCESS_KEY: ConfigOption<String> = ConfigOption::new("s3.access-key", ValueKind::Text, text, String::clone)
        .origin(Flink)
        .derived("AWS_ACCESS_KEY_ID")
        .aliases(&["s3.access.key"])
        .doc("S3 access key; when set, the AWS_* credentials are ignored.");
    /// `s3.secret-key` (a secret).
    pub const S3_SECRET_KEY: ConfigOption<Secret> = secret("s3.secret-key")
        .origin(Flink)
        .derived("AWS_SECRET_ACCESS_KEY")
        .aliases(&["s3.secret.key"])
        .doc("S3 secret key; never shown in logs, REST or errors.");
    /// `s3.session-token` (a secret).
    pub const S3_SESSION_TOKEN: ConfigOption<Secret> = secret("s3.session-token")
        .derived("AWS_SESSION_TOKEN")
        .aliases(&["s3.session.token"])
        .doc("Session token of temporary S3 credentials; never shown.");
    /// `s3.path.style.access`.
    pub const S3_PATH_STYLE_ACCESS: ConfigOption<bool> = flag("s3.path.style.access")
        .origin(Flink)
        .derived("true with s3.endpoint, else false")
        .doc("Path-style S3 requests (endpoint/bucket/key) instead of virtual-hosted ones.");
    /// `s3.region`.
    pub const S3_REGION: ConfigOption<String> = ConfigOption::new("s3.region", ValueKind::Text, region, String::clone)
        .derived("AWS_REGION, else us-east-1")
        .aliases(&["s3.endpoint.region"])
        .doc("S3 region.");
    /// `s3.allow-http`.
    pub const S3_ALLOW_HTTP: ConfigOption<bool> = flag("s3.allow-http")
        .derived("true for a loopback s3.endpoint")
        .doc("Allow plain http to s3.endpoint.");
}

fn not_blank(value: &str) -> Result<&str, ValueError> {
    match value.trim() {
        "" => Err(ValueError::Invalid("must not be empty".to_string())),
        text => Ok(text),
    }
}

fn text(value: &str) -> Result<String, ValueError> {
    not_blank(value).map(str::to_string)
}

fn endpoint(value: &str) -> Result<String, ValueError> {
    let text = not_blank(value)?;
    check_endpoint(text).map_err(ValueError::Invalid)?;
    Ok(text.trim_end_matches('/').to_string())
}

fn region(value: &str) -> Result<String, ValueError> {
    let text = not_blank(value)?;
    if !text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(ValueError::Invalid(
            "expected a region name such as us-east-1".to_string(),
        ));
    }
    Ok(text.to_string())
}

/// A secret, taken verbatim (no trim: a space may be part of it).
const fn secret(name: &'static str) -> ConfigOption<Secret> {
    ConfigOption::new(name, ValueKind::Secret, parse_secret, print_secret)
}

fn parse_secret(value: &str) -> Result<Secret, ValueError> {
    not_blank(value)?;
    Ok(Secret::new(value))
}

fn print_secret(_: &Secret) -> String {
    "***".to_string()
}

/// `true` or `false`, exactly (after trimming).
const fn flag(name: &'static str) -> ConfigOption<bool> {
    ConfigOption::new(name, ValueKind::Bool, parse_flag, print_flag)
}

fn parse_flag(value: &str) -> Result<bool, ValueError> {
    match not_blank(value)? {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ValueError::Invalid("expected true or false".to_string())),
    }
}

fn print_flag(b: &bool) -> String {
    b.to_string()
}

/// A bad `s3.*` value. The value itself is not part of the message (it may
/// be a secret); the caller shows it when the key is not secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct S3SettingError {
    /// The key.
    pub key: &'static str,
    /// What is wrong.
    pub reason: String,
}

/// Region used when none is configured (what the AWS SDKs assume too).
pub const DEFAULT_REGION: &str = "us-east-1";

/// The `s3.*` keys as given, plus a snapshot of the `AWS_*` environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Settings {
    /// `s3.endpoint`.
    pub endpoint: Option<String>,
    /// `s3.access-key`.
    pub access_key: Option<String>,
    /// `s3.secret-key`.
    pub secret_key: Option<Secret>,
    /// `s3.session-token`.
    pub session_token: Option<Secret>,
    /// `s3.path.style.access`.
    pub path_style_access: Option<bool>,
    /// `s3.region`.
    pub region: Option<String>,
    /// `s3.allow-http`.
    pub allow_http: Option<bool>,
    /// `AWS_*` environment variables (values kept as secrets: some are).
    pub env: Vec<(String, Secret)>,
    /// `s3.bucket.<bucket>.*`: each bucket's overrides (see `bucket.rs`).
    pub buckets: std::collections::BTreeMap<String, S3Settings>,
}

/// Everything the S3 client needs, after keys and environment are merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedS3 {
    /// Endpoint URL, `None` for AWS itself.
    pub endpoint: Option<String>,
    /// Access key and secret, when given (else the client's own chain:
    /// web identity, container or instance credentials).
    pub credentials: Option<(String, Secret)>,
    /// Session token for temporary credentials.
    pub session_token: Option<Secret>,
    /// Region.
    pub region: String,
    /// Path-style requests (`endpoint/bucket/key`) instead of
    /// virtual-hosted ones (`bucket.endpoint/key`).
    pub path_style: bool,
    /// Whether plain `http://` is allowed.
    pub allow_http: bool,
    /// Other `AWS_*` variables for the client's own configuration.
    pub passthrough: Vec<(String, Secret)>,
}

/// Environment variables [`ResolvedS3`] reads itself.
const OWN_ENV: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT",
    "AWS_ALLOW_HTTP",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
];

impl S3Settings {
    /// The `s3.*` keys given in `keys`, each validated (the environment is
    /// added later, [`S3Settings::with_process_env`]).
    pub fn from_config(keys: &Config) -> Result<Self, S3SettingError> {
        fn read<T>(keys: &Config, key: &ConfigOption<T>) -> Result<Option<T>, S3SettingError> {
            keys.raw(key)
                .map(|value| key.parse(value))
                .transpose()
                .map_err(|e| S3SettingError {
                    key: key.name(),
                    reason: e.to_string(),
                })
        }
        Ok(S3Settings {
            endpoint: read(keys, &S3_ENDPOINT)?,
            access_key: read(keys, &S3_ACCESS_KEY)?,
            secret_key: read(keys, &S3_SECRET_KEY)?,
            session_token: read(keys, &S3_SESSION_TOKEN)?,
            path_style_access: read(keys, &S3_PATH_STYLE_ACCESS)?,
            region: read(keys, &S3_REGION)?,
            allow_http: read(keys, &S3_ALLOW_HTTP)?,
            env: Vec::new(),
            buckets: Default::default(),
        })
    }

    /// These settings with the process environment's `AWS_*` variables.
    pub fn with_process_env(self) -> Self {
        self.with_env(std::env::vars().filter(|(k, _)| k.starts_with("AWS_")))
    }

    /// These settings with `vars` as the `AWS_*` environment (tests).
    pub fn with_env(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Self {
        self.env = vars
            .into_iter()
            .filter(|(k, _)| k.starts_with("AWS_"))
            .map(|(k, v)| (k, Secret::new(v)))
            .collect();
        self
    }

    /// Every secret a message must not show: the secret key, the session
    /// token, and every `AWS_*` value that looks like one.
    pub fn secrets(&self) -> Vec<Secret> {
        let mut out: Vec<Secret> = self
            .secret_key
            .iter()
            .chain(&self.session_token)
            .cloned()
            .collect();
        for bucket in self.buckets.values() {
            out.extend(bucket.secrets());
        }
        for (name, value) in &self.env {
            if name.contains("SECRET") || name.contains("TOKEN") || name.contains("PASSWORD") {
                out.push(value.clone());
            }
        }
        out
    }

    fn env(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.expose())
            .filter(|v| !v.is_empty())
    }

    /// The endpoint: the key's, else the environment's (checked here: the
    /// key's was checked when read), without a trailing slash.
    fn endpoint(&self) -> Result<Option<String>, S3SettingError> {
        if let Some(e) = &self.endpoint {
            return Ok(Some(e.clone()));
        }
        let from_env = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
            .iter()
            .find_map(|n| self.env(n));
        let Some(e) = from_env else {
            return Ok(None);
        };
        check_endpoint(e).map_err(|reason| S3SettingError {
            key: "AWS_ENDPOINT_URL",
            reason,
        })?;
        Ok(Some(e.trim_end_matches('/').to_string()))
    }

    /// The access key id with its secret, and the session token: the keys'
    /// if `s3.access-key` is set, else the environment's.
    fn credentials(&self) -> (Option<(String, Secret)>, Option<Secret>) {
        match &self.access_key {
            Some(key) => (
                Some((
                    key.clone(),
                    self.secret_key.clone().unwrap_or_else(|| Secret::new("")),
                )),
                self.session_token.clone(),
            ),
            None => match (
                self.env("AWS_ACCESS_KEY_ID"),
                self.env("AWS_SECRET_ACCESS_KEY"),
            ) {
                (Some(id), Some(secret)) => (
                    Some((id.to_string(), Secret::new(secret))),
                    self.session_token
                        .clone()
                        .or_else(|| self.env("AWS_SESSION_TOKEN").map(Secret::new)),
                ),
                _ => (None, self.session_token.clone()),
            },
        }
    }

    /// Merges keys over environment and applies the defaults. Fails on an
    /// endpoint from the environment that is not a usable URL, and on plain
    /// http to a host other than loopback without `s3.allow-http=true`.
    pub fn resolve(&self) -> Result<ResolvedS3, S3SettingError> {
        let endpoint = self.endpoint()?;
        let (credentials, session_token) = self.credentials();
        if matches!(&credentials, Some((_, secret)) if secret.expose().is_empty()) {
            return Err(S3SettingError {
                key: S3_SECRET_KEY.name(),
                reason: "s3.access-key is set but the secret key is not".to_string(),
            });
        }
        let region = self
            .region
            .clone()
            .or_else(|| self.env("AWS_REGION").map(str::to_string))
            .or_else(|| self.env("AWS_DEFAULT_REGION").map(str::to_string))
            .unwrap_or_else(|| DEFAULT_REGION.to_string());
        // S3-compatible servers almost always want path-style requests;
        // AWS itself prefers virtual-hosted ones (Flink's default).
        let path_style = self.path_style_access.unwrap_or(endpoint.is_some());
        let loopback = endpoint.as_deref().is_some_and(is_loopback_url);
        let allow_http = self.allow_http.unwrap_or(loopback);
        if let Some(e) = &endpoint {
            if e.starts_with("http://") && !allow_http {
                return Err(S3SettingError {
                    key: if self.endpoint.is_some() {
                        S3_ENDPOINT.name()
                    } else {
                        "AWS_ENDPOINT_URL"
                    },
                    reason: "plain http to a host that is not loopback; use https or set \
                             s3.allow-http=true"
                        .to_string(),
                });
            }
        }
        let passthrough = self
            .env
            .iter()
            .filter(|(k, _)| !OWN_ENV.contains(&k.as_str()))
            .cloned()
            .collect();
        Ok(ResolvedS3 {
            endpoint,
            credentials,
            session_token,
            region,
            path_style,
            allow_http,
            passthrough,
        })
    }
}

/// `http(s)://host[:port]`, with no credentials, query or fragment.
fn check_endpoint(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text)
        .map_err(|e| format!("not a URL ({e}); expected http(s)://host[:port]"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("expected an http:// or https:// URL".to_string());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "credentials do not belong in the endpoint; use s3.access-key and s3.secret-key"
                .to_string(),
        );
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL has no host".to_string());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("the URL must not have a query or fragment".to_string());
    }
    Ok(())
}

/// Whether an endpoint URL points at this machine.
fn is_loopback_url(text: &str) -> bool {
    let Ok(url) = url::Url::parse(text) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_engine::config::AnyOption;

    fn settings(pairs: &[(&dyn AnyOption, &str)]) -> S3Settings {
        let mut c = Config::new();
        for (k, v) in pairs {
            c.set(*k, *v);
        }
        S3Settings::from_config(&c).expect("valid")
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_win_over_the_environment_and_credentials_come_as_a_set() {
        let s = settings(&[
            (&S3_ENDPOINT, "http://127.0.0.1:9000/"),
            (&S3_ACCESS_KEY, "ferry"),
            (&S3_SECRET_KEY, "from-key"),
        ])
        .with_env(env(&[
            ("AWS_ACCESS_KEY_ID", "envid"),
            ("AWS_SECRET_ACCESS_KEY", "envsecret"),
            ("AWS_SESSION_TOKEN", "envtoken"),
            ("AWS_ENDPOINT_URL", "https://elsewhere"),
            ("AWS_REGION", "eu-west-1"),
            ("HOME", "/root"),
        ]));
        let r = s.resolve().expect("resolves");
        assert_eq!(r.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(
            r.credentials,
            Some(("ferry".into(), Secret::new("from-key")))
        );
        assert_eq!(
            r.session_token, None,
            "env token ignored with explicit keys"
        );
        assert_eq!(r.region, "eu-west-1");
        assert!(r.path_style, "path style by default with an endpoint");
        assert!(r.allow_http, "http is fine on loopback");
        assert!(r.passthrough.is_empty());
    }

    #[test]
    fn environment_alone() {
        let r = S3Settings::default()
            .with_env(env(&[
                ("AWS_ACCESS_KEY_ID", "envid"),
                ("AWS_SECRET_ACCESS_KEY", "envsecret"),
                ("AWS_SESSION_TOKEN", "envtoken"),
                ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ]))
            .resolve()
            .expect("resolves");
        assert_eq!(r.endpoint, None);
        assert_eq!(
            r.credentials,
            Some(("envid".into(), Secret::new("envsecret")))
        );
        assert_eq!(r.session_token, Some(Secret::new("envtoken")));
        assert_eq!(r.region, DEFAULT_REGION);
        assert!(!r.path_style, "virtual-hosted on AWS, as in Flink");
        assert_eq!(r.passthrough.len(), 1);
    }

    #[test]
    fn bad_values_are_refused_without_echoing_them() {
        for (key, value, why) in [
            (
                &S3_ENDPOINT as &dyn AnyOption,
                "ftp://x",
                "http:// or https://",
            ),
            (
                &S3_ENDPOINT,
                "http://user:pw@host",
                "credentials do not belong",
            ),
            (&S3_ENDPOINT, "not a url", "not a URL"),
            (&S3_PATH_STYLE_ACCESS, "yes", "true or false"),
            (&S3_REGION, "us east", "region name"),
            (&S3_SECRET_KEY, "  ", "empty"),
        ] {
            let mut c = Config::new();
            c.set(key, value);
            let err = S3Settings::from_config(&c).unwrap_err();
            assert!(
                err.to_string().contains(why),
                "{} {value}: {err}",
                key.name()
            );
            assert!(err.to_string().starts_with(key.name()), "{err}");
            assert!(!err.to_string().contains("pw@"), "{err}");
        }
        let err = settings(&[(&S3_ENDPOINT, "http://s3.example.com")])
            .resolve()
            .unwrap_err();
        assert!(err.to_string().contains("s3.allow-http"), "{err}");
        settings(&[
            (&S3_ENDPOINT, "http://s3.example.com"),
            (&S3_ALLOW_HTTP, "true"),
        ])
        .resolve()
        .expect("explicitly allowed");
        let err = settings(&[(&S3_ACCESS_KEY, "id")]).resolve().unwrap_err();
        assert!(err.to_string().contains("secret key is not"), "{err}");
    }

    #[test]
    fn secrets_are_collected_and_never_debug_printed() {
        let s = settings(&[
            (&S3_ACCESS_KEY, "id"),
            (&S3_SECRET_KEY, "sekrit-1"),
            (&S3_SESSION_TOKEN, "sekrit-2"),
        ])
        .with_env(env(&[("AWS_SECRET_ACCESS_KEY", "sekrit-3")]));
        let shown = format!("{s:?} {:?}", s.resolve().expect("resolves"));
        assert!(!shown.contains("sekrit"), "{shown}");
        let secrets: Vec<String> = s.secrets().iter().map(|x| x.expose().to_string()).collect();
        assert_eq!(secrets, ["sekrit-1", "sekrit-2", "sekrit-3"]);
    }
}
