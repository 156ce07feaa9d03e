//! The client side of a secured REST API, for the verbs that talk to one
//! (`ferry list / savepoint / stop / cancel / checkpoint`, `ferry run
//! --jobmanager`, `ferry cutover`). Flink's CLI reads the same
//! `security.ssl.rest.*` keys as its server, so ferry's do too:
//!
//! - `-m https://host:port` (or `security.ssl.rest.enabled=true`, or a
//!   truststore / keystore with a bare `host:port`) talks TLS;
//! - `security.ssl.rest.truststore`: the CA(s) that signed the server's
//!   certificate (default: the system's CA bundle);
//! - `security.ssl.rest.keystore` (+ `security.ssl.rest.private-key`): the
//!   client certificate for a server with `authentication-enabled`;
//! - `security.rest.token-file`: the bearer token.
//!
//! The verbs take them as `-D key=value` or from the environment
//! (`FERRY_SECURITY_SSL_REST_TRUSTSTORE`, …: the key in capitals, `.` and
//! `-` as `_`); `-D` wins. Errors are usage errors (exit code 2) naming
//! the key and file, never a file's contents.

use std::path::PathBuf;

use crate::http_client::ClientSecurity;
use crate::process_opts::{
    REST_SECURITY_KEYS, REST_TOKEN_FILE, SSL_REST_AUTHENTICATION, SSL_REST_ENABLED,
    SSL_REST_KEYSTORE, SSL_REST_PRIVATE_KEY, SSL_REST_TRUSTSTORE,
};
use crate::security::{self, RestSecurity, Token};
use ferry_engine::config::{AnyOption, Config, ConfigOption, ValueKind};

/// The keys a verb takes with `-D`.
const CLIENT_KEYS: &[&dyn AnyOption] = &[
    &SSL_REST_ENABLED,
    &SSL_REST_TRUSTSTORE,
    &SSL_REST_KEYSTORE,
    &SSL_REST_PRIVATE_KEY,
    &SSL_REST_AUTHENTICATION,
    &REST_TOKEN_FILE,
];

/// What a client verb was told about the REST API's security.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestClientOptions {
    /// `security.ssl.rest.enabled`, if given.
    pub ssl_enabled: Option<bool>,
    /// `security.ssl.rest.truststore`: the CAs the client trusts.
    pub truststore: Option<PathBuf>,
    /// `security.ssl.rest.keystore`: the client certificate.
    pub keystore: Option<PathBuf>,
    /// `security.ssl.rest.private-key`: its key, when not in the keystore.
    pub private_key: Option<PathBuf>,
    /// `security.ssl.rest.authentication-enabled`: a client certificate is
    /// required, so `keystore` must be given.
    pub authentication_enabled: bool,
    /// `security.rest.token-file`: the bearer token.
    pub token_file: Option<PathBuf>,
}

/// The environment variable that stands for `key` (`FERRY_` + the key in
/// capitals, `.` and `-` as `_`).
pub fn env_name(key: &dyn AnyOption) -> String {
    format!(
        "FERRY_{}",
        key.name().to_ascii_uppercase().replace(['.', '-'], "_")
    )
}

impl RestClientOptions {
    /// From a verb's `-D key=value` arguments over the `FERRY_SECURITY_*`
    /// environment.
    pub fn from_dynamic(pairs: &[String]) -> Result<Self, String> {
        Self::from_sources(pairs, |name| std::env::var(name).ok())
    }

    fn from_sources(
        pairs: &[String],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let mut given = Config::new();
        for pair in pairs {
            let Some((name, value)) = pair.split_once('=') else {
                return Err(format!("invalid -D{pair}: expected -Dkey=value"));
            };
            let key = REST_SECURITY_KEYS
                .keys
                .iter()
                .find(|k| k.spec().answers_to(name.trim()));
            match key {
                Some(k) if CLIENT_KEYS.iter().any(|c| c.name() == k.name()) => {
                    if given.contains(*k) {
                        return Err(format!("key '{}' is given more than once", k.name()));
                    }
                    given.set(*k, value);
                }
                // Flink's store passwords.
                Some(k) if k.spec().kind == ValueKind::Secret => {
                    return Err(format!(
                        "{}: ferry reads PEM files, which have no password (the private key \
                         must be unencrypted, protected by file permissions); remove this key",
                        k.name()
                    ))
                }
                _ => {
                    return Err(format!(
                        "invalid -D{name}=…: not an option of the client verbs; they take {}",
                        CLIENT_KEYS
                            .iter()
                            .map(|k| k.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                }
            }
        }
        for key in CLIENT_KEYS {
            if !given.contains(*key) {
                if let Some(v) = env(&env_name(*key)).filter(|v| !v.trim().is_empty()) {
                    given.set(*key, v);
                }
            }
        }
        Ok(RestClientOptions {
            ssl_enabled: flag(&given, &SSL_REST_ENABLED)?,
            truststore: path(&given, &SSL_REST_TRUSTSTORE)?,
            keystore: path(&given, &SSL_REST_KEYSTORE)?,
            private_key: path(&given, &SSL_REST_PRIVATE_KEY)?,
            authentication_enabled: flag(&given, &SSL_REST_AUTHENTICATION)?.unwrap_or(false),
            token_file: path(&given, &REST_TOKEN_FILE)?,
        })
    }
}

/// A file key's value, if given.
fn path(given: &Config, key: &ConfigOption<PathBuf>) -> Result<Option<PathBuf>, String> {
    given
        .raw(key)
        .map(|v| key.parse(v).map_err(|e| format!("{key}: {e}")))
        .transpose()
}

/// A boolean key's value, if given.
fn flag(given: &Config, key: &ConfigOption<bool>) -> Result<Option<bool>, String> {
    given
        .raw(key)
        .map(|v| {
            key.parse(v)
                .map_err(|e| format!("invalid value '{}' for {key}: {e}", v.trim()))
        })
        .transpose()
}

impl RestClientOptions {
    /// The client side of a process's own keys (`ferry run --jobmanager`,
    /// `ferry cutover`): Flink's model, one configuration for both sides.
    pub fn from_process(sec: &RestSecurity) -> Self {
        RestClientOptions {
            ssl_enabled: sec.ssl_enabled.then_some(true),
            truststore: sec.truststore.clone(),
            keystore: sec.keystore.clone(),
            private_key: sec.private_key.clone(),
            authentication_enabled: sec.authentication_enabled,
            token_file: sec.token_file.clone(),
        }
    }

    /// The REST API's base URL (`http://` or `https://host:port`) for
    /// `jobmanager`, and how to talk to it (files read now).
    pub fn prepare(&self, jobmanager: &str) -> Result<(String, ClientSecurity), String> {
        let addr = jobmanager.trim().trim_end_matches('/');
        let (scheme, rest) = match addr.split_once("://") {
            Some((s, r)) => (Some(s.to_ascii_lowercase()), r),
            None => (None, addr),
        };
        let files = self.truststore.is_some() || self.keystore.is_some();
        let tls = match scheme.as_deref() {
            Some("https") => true,
            Some("http") => {
                if self.ssl_enabled == Some(true) || files {
                    return Err(format!(
                        "--jobmanager {addr} is plain http, but TLS options are given \
                         (security.ssl.rest.*): use https://{rest}"
                    ));
                }
                false
            }
            Some(other) => {
                return Err(format!(
                    "--jobmanager {addr}: unknown scheme '{other}' (use host:port, http:// or https://)"
                ))
            }
            None => match self.ssl_enabled {
                Some(enabled) => enabled,
                None => files,
            },
        };
        if !tls && files {
            return Err(format!(
                "{} is given but security.ssl.rest.enabled is false: use https://{rest} or drop it",
                if self.truststore.is_some() {
                    security::KEY_TRUSTSTORE
                } else {
                    security::KEY_KEYSTORE
                }
            ));
        }
        if self.authentication_enabled && self.keystore.is_none() {
            return Err(format!(
                "{}: needs {} (the client certificate and its key, PEM)",
                security::KEY_AUTHENTICATION,
                security::KEY_KEYSTORE
            ));
        }
        let base = format!("{}://{rest}", if tls { "https" } else { "http" });
        let host = base
            .parse::<hyper::Uri>()
            .ok()
            .and_then(|u| u.host().map(str::to_string))
            .ok_or_else(|| format!("--jobmanager {addr}: not a host:port address"))?;
        let token = match &self.token_file {
            Some(path) => {
                if !tls && !security::is_loopback(&host) {
                    return Err(format!(
                        "{}: refusing to send the bearer token in clear text to {host}: use https://{rest}",
                        security::KEY_TOKEN_FILE
                    ));
                }
                Some(Token::read(path).map_err(|e| e.to_string())?)
            }
            None => None,
        };
        let tls = if tls {
            Some(
                security::client_tls(
                    self.truststore.as_deref(),
                    self.keystore.as_deref(),
                    self.private_key.as_deref(),
                )
                .map_err(|e| e.to_string())?,
            )
        } else {
            None
        };
        Ok((base, ClientSecurity { tls, token }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[&str], env: &[(&str, &str)]) -> Result<RestClientOptions, String> {
        let pairs: Vec<String> = pairs.iter().map(|s| s.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RestClientOptions::from_sources(&pairs, |name| {
            env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn dynamic_keys_and_environment() {
        assert_eq!(
            env_name(&SSL_REST_TRUSTSTORE),
            "FERRY_SECURITY_SSL_REST_TRUSTSTORE"
        );
        assert_eq!(env_name(&REST_TOKEN_FILE), "FERRY_SECURITY_REST_TOKEN_FILE");
        let o = parse(
            &["security.ssl.rest.truststore=/a/ca.pem"],
            &[
                ("FERRY_SECURITY_SSL_REST_TRUSTSTORE", "/env/ca.pem"),
                ("FERRY_SECURITY_REST_TOKEN_FILE", "/env/token"),
            ],
        )
        .unwrap();
        assert_eq!(o.truststore, Some(PathBuf::from("/a/ca.pem")));
        assert_eq!(o.token_file, Some(PathBuf::from("/env/token")));
        let e = parse(&["rest.port=1"], &[]).unwrap_err();
        assert!(e.contains("not an option of the client verbs"), "{e}");
        let e = parse(&["security.ssl.rest.key-password=hunter2"], &[]).unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
        let e = parse(
            &["security.rest.token-file=a", "security.rest.token-file=b"],
            &[],
        )
        .unwrap_err();
        assert!(e.contains("more than once"), "{e}");
        let e = parse(&["security.ssl.rest.enabled=yes"], &[]).unwrap_err();
        assert!(e.contains("expected true or false"), "{e}");
    }

    #[test]
    fn scheme_and_tls_options() {
        let none = RestClientOptions::default();
        let (base, sec) = none.prepare("127.0.0.1:8081").unwrap();
        assert_eq!(base, "http://127.0.0.1:8081");
        assert!(sec.tls.is_none() && sec.token.is_none());
        let with_ca = RestClientOptions {
            truststore: Some("/nonexistent/ca.pem".into()),
            ..Default::default()
        };
        let e = with_ca.prepare("http://h:1").unwrap_err();
        assert!(e.contains("use https://h:1"), "{e}");
        // A bare address with a truststore means TLS: the file is read.
        let e = with_ca.prepare("h:1").unwrap_err();
        assert!(
            e.contains("security.ssl.rest.truststore") && e.contains("/nonexistent/ca.pem"),
            "{e}"
        );
        let e = RestClientOptions {
            authentication_enabled: true,
            ..Default::default()
        }
        .prepare("https://h:1")
        .unwrap_err();
        assert!(e.contains("security.ssl.rest.keystore"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "abcdefghijklmnopqrstuvwxyz\n").unwrap();
        let with_token = RestClientOptions {
            token_file: Some(token),
            ..Default::default()
        };
        let e = with_token.prepare("10.1.2.3:8081").unwrap_err();
        assert!(e.contains("clear text") && !e.contains("abcdefgh"), "{e}");
        let (_, sec) = with_token.prepare("127.0.0.1:8081").unwrap();
        assert!(sec.token.is_some());
    }
}
