//! Options of the ferry *process* (as opposed to a job): where the REST API
//! and the Prometheus endpoint listen, and how the source and sink tablet
//! servers' metrics are polled.
//!
//! Keys use Flink's names where Flink has one (`rest.address`, `rest.port`,
//! `rest.bind-address`, `rest.bind-port`, `metrics.reporter.prom.port`) so
//! `-Drest.port=8082` habits carry over; ferry adds `metrics.port`,
//! `metrics.address` and the `metrics.kudu.*` keys. The `s3.*` keys say how
//! to reach S3 for checkpoints and savepoints on `s3://` (Flink's names:
//! `s3.endpoint`, `s3.access-key`, `s3.secret-key`, `s3.path.style.access`);
//! they belong to the process, so a session server's jobs all use its
//! settings and no credential travels in a job submission. The
//! `security.ssl.rest.*` keys (Flink's names, PEM files instead of Java
//! keystores) and ferry's `security.rest.token-file` secure the REST API
//! and web page (`crate::security`); the CLI verbs read the same keys
//! for their side. Each key is one constant of a section declared here
//! (the `s3.*` section is `ferry_objstore`'s), like the job's keys;
//! `crate::settings` reads them from `--key value`, `--key=value`,
//! `-Dkey=value`, `-D key=value` and the `--config` TOML file, and
//! [`ProcessOptions::from_config`] validates them.

use std::path::PathBuf;
use std::time::Duration;

use crate::security::RestSecurity;
use ferry_engine::config::{
    AnyOption, Config, ConfigOption, KeyOrigin::Flink, Section, ValueError, ValueKind,
};
use ferry_objstore::{S3Settings, S3_ENDPOINT};

/// Default REST port (Flink's `rest.port`).
pub const DEFAULT_REST_PORT: u16 = 8081;
/// Default Prometheus port.
pub const DEFAULT_METRICS_PORT: u16 = 9250;
/// Default listen address: loopback only.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1";

/// A port, and whether the user chose it (a chosen port that is busy is an
/// error; a busy default only disables that endpoint with a warning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortChoice {
    /// The port.
    pub port: u16,
    /// Whether the user gave it.
    pub explicit: bool,
}

impl PortChoice {
    fn default_port(port: u16) -> Self {
        PortChoice {
            port,
            explicit: false,
        }
    }
}

/// Where the process listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// `rest.address` / `rest.bind-address`.
    pub rest_address: String,
    /// `rest.port` / `rest.bind-port`.
    pub rest_port: PortChoice,
    /// `metrics.address` (default: the REST address).
    pub metrics_address: Option<String>,
    /// `metrics.port` / `metrics.reporter.prom.port`.
    pub metrics_port: PortChoice,
    /// `security.ssl.rest.*`, `security.rest.token-file`: TLS, client
    /// certificates and the bearer token of the REST API.
    pub security: RestSecurity,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            rest_address: DEFAULT_ADDRESS.to_string(),
            rest_port: PortChoice::default_port(DEFAULT_REST_PORT),
            metrics_address: None,
            metrics_port: PortChoice::default_port(DEFAULT_METRICS_PORT),
            security: RestSecurity::default(),
        }
    }
}

impl ServerOptions {
    /// The address the metrics endpoint binds to.
    pub fn metrics_address(&self) -> &str {
        self.metrics_address
            .as_deref()
            .unwrap_or(&self.rest_address)
    }
}

/// How a job polls the tablet servers' `/metrics` JSON for per-table write
/// activity (`ferry_kudu_table_rows_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KuduMetricsOptions {
    /// `metrics.kudu.pollIntervalMillis`; zero disables polling.
    pub poll_interval: Duration,
}

impl Default for KuduMetricsOptions {
    fn default() -> Self {
        KuduMetricsOptions {
            poll_interval: Duration::from_millis(2000),
        }
    }
}

ferry_engine::config_section! {
    /// Where the process listens: the REST API, web page and Prometheus.
    pub static SERVER_KEYS = Section::process("rest and metrics");
    /// `rest.address`.
    pub const REST_ADDRESS: ConfigOption<String> = host("rest.address")
        .origin(Flink)
        .default_value(DEFAULT_ADDRESS)
        .aliases(&["rest.bind-address"])
        .doc("Address the REST API and web page listen on.");
    /// `rest.port`.
    pub const REST_PORT: ConfigOption<u16> = port("rest.port")
        .origin(Flink)
        .default_value("8081")
        .aliases(&["rest.bind-port"])
        .doc("REST API and web page port; 0 picks a free port.");
    /// `metrics.address`.
    pub const METRICS_ADDRESS: ConfigOption<String> = host("metrics.address")
        .derived("<rest.address>")
        .aliases(&["metrics.reporter.prom.host"])
        .doc("Address of the Prometheus endpoint.");
    /// `metrics.port`.
    pub const METRICS_PORT: ConfigOption<u16> = port("metrics.port")
        .default_value("9250")
        .aliases(&["metrics.reporter.prom.port"])
        .doc("Prometheus endpoint port, path /metrics.");
}

ferry_engine::config_section! {
    /// How a job polls its tablet servers' metrics: per job (`ferry run`
    /// and its `--jobmanager` submissions carry them), also given as `-D`.
    pub static KUDU_METRICS_KEYS = Section::job("metrics.kudu").dynamic();
    /// `metrics.kudu.pollIntervalMillis`; zero disables polling.
    pub const KUDU_POLL_INTERVAL: ConfigOption<Duration> = ConfigOption::new("metrics.kudu.pollIntervalMillis", ValueKind::MillisOrZero, poll_interval, print_millis)
        .default_value("2000")
        .doc("How often tablet server metrics are polled (the servers are the Kudu client's tablet-server list); 0 disables.");
}

ferry_engine::config_section! {
    /// TLS, client certificates and the bearer token of the REST API (the
    /// CLI verbs read them for their side too).
    pub static REST_SECURITY_KEYS = Section::process("REST security");
    /// `security.ssl.rest.enabled`.
    pub const SSL_REST_ENABLED: ConfigOption<bool> = flag("security.ssl.rest.enabled")
        .origin(Flink)
        .default_value("false")
        .doc("Serve the REST API and web page over TLS (https) with security.ssl.rest.keystore.");
    /// `security.ssl.rest.keystore`.
    pub const SSL_REST_KEYSTORE: ConfigOption<PathBuf> = file("security.ssl.rest.keystore")
        .origin(Flink)
        .derived("none")
        .doc("PEM file with the certificate chain (leaf first) and, unless security.ssl.rest.private-key, the private key; the server's, or the CLI's client certificate. Not JKS/PKCS12.");
    /// `security.ssl.rest.private-key`.
    pub const SSL_REST_PRIVATE_KEY: ConfigOption<PathBuf> = file("security.ssl.rest.private-key")
        .derived("in the keystore file")
        .doc("PEM file with the keystore certificate's unencrypted private key, when it is not in the keystore file.");
    /// `security.ssl.rest.truststore`.
    pub const SSL_REST_TRUSTSTORE: ConfigOption<PathBuf> = file("security.ssl.rest.truststore")
        .origin(Flink)
        .derived("none (CLI: the system CAs)")
        .doc("PEM file with CA certificates: the server accepts client certificates they signed (authentication-enabled); the CLI trusts the server certificate they signed.");
    /// `security.ssl.rest.authentication-enabled`.
    pub const SSL_REST_AUTHENTICATION: ConfigOption<bool> = flag("security.ssl.rest.authentication-enabled")
        .origin(Flink)
        .default_value("false")
        .doc("Mutual TLS: refuse REST clients without a certificate signed by a truststore CA.");
    /// `security.rest.token-file`.
    pub const REST_TOKEN_FILE: ConfigOption<PathBuf> = file("security.rest.token-file")
        .derived("none")
        .doc("File holding a bearer token (one line, 16+ characters) every REST request must send as 'Authorization: Bearer'; needs TLS unless rest.address is loopback.");
    /// `security.ssl.rest.keystore-password`: refused.
    pub const SSL_REST_KEYSTORE_PASSWORD: ConfigOption<()> = password("security.ssl.rest.keystore-password")
        .doc("Not used: ferry reads PEM files, which have no store password; giving it is an error.");
    /// `security.ssl.rest.key-password`: refused.
    pub const SSL_REST_KEY_PASSWORD: ConfigOption<()> = password("security.ssl.rest.key-password")
        .doc("Not used: ferry reads unencrypted PEM keys, protected by file permissions; giving it is an error.");
    /// `security.ssl.rest.truststore-password`: refused.
    pub const SSL_REST_TRUSTSTORE_PASSWORD: ConfigOption<()> = password("security.ssl.rest.truststore-password")
        .doc("Not used: PEM CA files have no password; giving it is an error.");
}

const fn host(name: &'static str) -> ConfigOption<String> {
    ConfigOption::new(name, ValueKind::Host, parse_host, String::clone)
}

fn parse_host(value: &str) -> Result<String, ValueError> {
    match value.trim() {
        "" => Err(ValueError::Invalid("must not be empty".to_string())),
        h => Ok(h.to_string()),
    }
}

const fn port(name: &'static str) -> ConfigOption<u16> {
    ConfigOption::new(name, ValueKind::Port, parse_port, print_port)
}

fn parse_port(value: &str) -> Result<u16, ValueError> {
    value
        .trim()
        .parse::<u16>()
        .map_err(|_| ValueError::Invalid("expected a port number from 0 to 65535".to_string()))
}

fn print_port(port: &u16) -> String {
    port.to_string()
}

fn poll_interval(value: &str) -> Result<Duration, ValueError> {
    value
        .trim()
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| ValueError::Invalid("expected milliseconds (0 disables)".to_string()))
}

fn print_millis(d: &Duration) -> String {
    d.as_millis().to_string()
}

const fn flag(name: &'static str) -> ConfigOption<bool> {
    ConfigOption::new(name, ValueKind::Bool, parse_flag, print_flag)
}

fn parse_flag(value: &str) -> Result<bool, ValueError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ValueError::Invalid("expected true or false".to_string())),
    }
}

fn print_flag(b: &bool) -> String {
    b.to_string()
}

const fn file(name: &'static str) -> ConfigOption<PathBuf> {
    ConfigOption::new(name, ValueKind::Text, parse_file, print_file)
}

fn parse_file(value: &str) -> Result<PathBuf, ValueError> {
    match value.trim() {
        "" => Err(ValueError::Invalid(
            "expected the path of a file".to_string(),
        )),
        p => Ok(PathBuf::from(p)),
    }
}

#[allow(clippy::ptr_arg)] // the printer of a `PathBuf` key
fn print_file(p: &PathBuf) -> String {
    p.display().to_string()
}

/// A Java store password key of Flink's: ferry reads PEM files, so any
/// value is refused (and never shown).
const fn password(name: &'static str) -> ConfigOption<()> {
    ConfigOption::new(name, ValueKind::Secret, no_password, print_nothing)
        .origin(Flink)
        .derived("none")
}

fn no_password(_: &str) -> Result<(), ValueError> {
    Err(ValueError::Invalid(
        "ferry reads PEM files: certificates have no store password and the private key must \
         be unencrypted (protect it with file permissions, e.g. 0600); remove this key"
            .to_string(),
    ))
}

fn print_nothing(_: &()) -> String {
    String::new()
}

/// A bad process option value (an empty `value`: a key missing, or one
/// that conflicts with another).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct OptionError {
    /// The key.
    pub key: String,
    /// Its value as given.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for OptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}: {}", self.key, self.reason)
        } else {
            write!(
                f,
                "invalid value '{}' for {}: {}",
                self.value, self.key, self.reason
            )
        }
    }
}

impl From<crate::security::SecurityError> for OptionError {
    /// The file is named, never its contents.
    fn from(e: crate::security::SecurityError) -> Self {
        OptionError {
            key: e.key.to_string(),
            value: e.path.map(|p| p.display().to_string()).unwrap_or_default(),
            reason: e.reason,
        }
    }
}

/// The typed process options.
#[derive(Debug, Clone, Default)]
pub struct ProcessOptions {
    /// The REST and Prometheus listeners and their security.
    pub server: ServerOptions,
    /// How the tablet servers' write counters are polled.
    pub kudu: KuduMetricsOptions,
    /// `s3.*` as given (secrets print as `***`); merged with the `AWS_*`
    /// environment when the resolver is built.
    pub s3: S3Settings,
}

/// The value of `key` in `keys` if given, parsed; an error names the key
/// and the value (`***` for a secret).
fn given<T>(keys: &Config, key: &ConfigOption<T>) -> Result<Option<T>, OptionError> {
    let Some(value) = keys.raw(key) else {
        return Ok(None);
    };
    key.parse(value).map(Some).map_err(|e| OptionError {
        key: key.name().to_string(),
        value: shown(key, value),
        reason: e.to_string(),
    })
}

/// A value as errors show it: a secret, or an endpoint with credentials in
/// it, is not echoed.
fn shown(key: &dyn AnyOption, value: &str) -> String {
    if key.spec().kind == ValueKind::Secret || value.contains('@') {
        "***".to_string()
    } else {
        value.to_string()
    }
}

impl ProcessOptions {
    /// Validates the process keys given in `keys` (each at most once; the
    /// caller merged the command line over the file) on top of the
    /// defaults; other keys are left alone.
    pub fn from_config(keys: &Config) -> Result<Self, OptionError> {
        let mut opts = ProcessOptions::default();
        let chosen = |port| PortChoice {
            port,
            explicit: true,
        };
        let server = &mut opts.server;
        if let Some(a) = given(keys, &REST_ADDRESS)? {
            server.rest_address = a;
        }
        if let Some(p) = given(keys, &REST_PORT)? {
            server.rest_port = chosen(p);
        }
        if let Some(a) = given(keys, &METRICS_ADDRESS)? {
            server.metrics_address = Some(a);
        }
        if let Some(p) = given(keys, &METRICS_PORT)? {
            server.metrics_port = chosen(p);
        }
        if let Some(d) = given(keys, &KUDU_POLL_INTERVAL)? {
            opts.kudu.poll_interval = d;
        }
        opts.s3 = S3Settings::from_config(keys).map_err(|e| OptionError {
            key: e.key.to_string(),
            value: crate::settings::KEYS
                .lookup(e.key)
                .and_then(|(_, k)| keys.raw(k).map(|v| shown(k, v)))
                .unwrap_or_default(),
            reason: e.reason,
        })?;
        let security = &mut opts.server.security;
        security.ssl_enabled = given(keys, &SSL_REST_ENABLED)?.unwrap_or(security.ssl_enabled);
        security.keystore = given(keys, &SSL_REST_KEYSTORE)?;
        security.private_key = given(keys, &SSL_REST_PRIVATE_KEY)?;
        security.truststore = given(keys, &SSL_REST_TRUSTSTORE)?;
        security.authentication_enabled =
            given(keys, &SSL_REST_AUTHENTICATION)?.unwrap_or(security.authentication_enabled);
        security.token_file = given(keys, &REST_TOKEN_FILE)?;
        for refused in [
            &SSL_REST_KEYSTORE_PASSWORD,
            &SSL_REST_KEY_PASSWORD,
            &SSL_REST_TRUSTSTORE_PASSWORD,
        ] {
            given(keys, refused)?;
        }
        // Keys that only fail together (http endpoint without
        // s3.allow-http, an access key without its secret) are usage errors
        // too. The environment is left out: it is checked when an s3://
        // location is opened, so unrelated AWS_* variables cannot stop a job
        // that keeps its state on disk.
        if opts.s3 != S3Settings::default() {
            opts.s3.resolve().map_err(|e| OptionError {
                key: e.key.to_string(),
                value: match e.key {
                    k if k == S3_ENDPOINT.name() => opts.s3.endpoint.clone().unwrap_or_default(),
                    _ => String::new(),
                },
                reason: e.reason,
            })?;
        }
        // The REST security files are read now, so a missing or malformed
        // one is a usage error naming the key and the file.
        opts.server
            .security
            .server(&opts.server.rest_address)
            .map_err(OptionError::from)?;
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::KEYS;
    use ferry_engine::config::Scope;
    use ferry_objstore::{S3_ACCESS_KEY, S3_PATH_STYLE_ACCESS, S3_SECRET_KEY};

    /// The process options from `pairs`.
    fn from_pairs(pairs: &[(&dyn AnyOption, &str)]) -> Result<ProcessOptions, OptionError> {
        let mut keys = Config::new();
        for (key, value) in pairs {
            keys.set(*key, *value);
        }
        ProcessOptions::from_config(&keys)
    }

    fn lookup(name: &str) -> Option<&'static str> {
        KEYS.lookup(name).map(|(_, k)| k.name())
    }

    fn is_server_key(key: &dyn AnyOption) -> bool {
        KEYS.lookup(key.name())
            .is_some_and(|(section, _)| section.scope == Scope::Process)
    }

    #[test]
    fn process_sections() {
        for section in [&SERVER_KEYS, &KUDU_METRICS_KEYS, &REST_SECURITY_KEYS] {
            for key in section.keys {
                assert!(["rest", "metrics", "s3", "security"].contains(&key.spec().section()));
                assert_eq!(lookup(key.name()), Some(key.name()));
                assert!(!key.spec().doc.is_empty());
            }
        }
        assert!(!is_server_key(&KUDU_POLL_INTERVAL));
        assert!(is_server_key(&REST_PORT));
    }

    #[test]
    fn flink_aliases() {
        assert_eq!(lookup("rest.bind-port"), Some(REST_PORT.name()));
        assert_eq!(
            lookup("metrics.reporter.prom.port"),
            Some(METRICS_PORT.name())
        );
        assert_eq!(
            KEYS.lookup("job.tableName").map(|(s, _)| s.scope),
            Some(Scope::Job),
            "not a process key"
        );
        let o = from_pairs(&[(&REST_PORT, "8082"), (&METRICS_PORT, "9999")]).unwrap();
        assert_eq!(
            o.server.rest_port,
            PortChoice {
                port: 8082,
                explicit: true
            }
        );
        assert_eq!(o.server.metrics_port.port, 9999);
        let defaults = from_pairs(&[]).unwrap();
        assert!(!defaults.server.rest_port.explicit);
        assert_eq!(defaults.server.rest_port.port, DEFAULT_REST_PORT);
        // The catalog's documented defaults are the ones applied.
        let documented = |k: &dyn AnyOption| k.spec().default_value().map(str::to_string);
        assert_eq!(documented(&REST_PORT), Some(DEFAULT_REST_PORT.to_string()));
        assert_eq!(
            documented(&METRICS_PORT),
            Some(DEFAULT_METRICS_PORT.to_string())
        );
        assert_eq!(documented(&REST_ADDRESS).as_deref(), Some(DEFAULT_ADDRESS));
        assert_eq!(
            documented(&KUDU_POLL_INTERVAL),
            Some(defaults.kudu.poll_interval.as_millis().to_string())
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        let err = from_pairs(&[(&REST_PORT, "http")]).unwrap_err();
        assert!(err.to_string().contains("'http' for rest.port"), "{err}");
        let err = from_pairs(&[(&KUDU_POLL_INTERVAL, "-1")]).unwrap_err();
        assert!(err.to_string().contains("metrics.kudu.pollIntervalMillis"));
        assert!(from_pairs(&[(&METRICS_ADDRESS, " ")]).is_err());
        let o = from_pairs(&[(&KUDU_POLL_INTERVAL, "0")]).unwrap();
        assert_eq!(o.kudu.poll_interval, Duration::ZERO);
    }

    #[test]
    fn s3_keys_are_validated_and_secrets_never_echoed() {
        let o = from_pairs(&[
            (&S3_ENDPOINT, "http://127.0.0.1:9000"),
            (&S3_ACCESS_KEY, "ferry"),
            (&S3_SECRET_KEY, "very-secret-value"),
            (&S3_PATH_STYLE_ACCESS, "true"),
        ])
        .unwrap();
        assert_eq!(o.s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(o.s3.path_style_access, Some(true));
        assert!(!format!("{o:?}").contains("very-secret-value"));
        assert_eq!(lookup("s3.secret.key"), Some(S3_SECRET_KEY.name()));
        let err = from_pairs(&[(&S3_SECRET_KEY, " ")]).unwrap_err();
        assert!(err.to_string().contains("s3.secret-key"), "{err}");
        let err = from_pairs(&[(&S3_ENDPOINT, "http://k:pw@host")]).unwrap_err();
        assert!(!err.to_string().contains("pw@"), "{err}");
        let err = from_pairs(&[(&S3_PATH_STYLE_ACCESS, "maybe")]).unwrap_err();
        assert!(
            err.to_string().contains("'maybe' for s3.path.style.access"),
            "{err}"
        );
        assert!(is_server_key(&S3_SECRET_KEY));
        let err = from_pairs(&[(&S3_ENDPOINT, "http://s3.example.com")]).unwrap_err();
        assert!(err.to_string().contains("s3.allow-http"), "{err}");
        let err = from_pairs(&[(&S3_ACCESS_KEY, "id")]).unwrap_err();
        assert!(err.to_string().starts_with("s3.secret-key: "), "{err}");
    }

    #[test]
    fn rest_security_keys() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("server.pem");
        let err = from_pairs(&[
            (&SSL_REST_ENABLED, "true"),
            (&SSL_REST_KEYSTORE, missing.to_str().unwrap()),
        ])
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("security.ssl.rest.keystore"), "{text}");
        assert!(
            text.contains("server.pem") && text.contains("does not exist"),
            "{text}"
        );
        let jks = dir.path().join("truststore.jks");
        std::fs::write(&jks, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let text = from_pairs(&[(&SSL_REST_TRUSTSTORE, jks.to_str().unwrap())])
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("security.ssl.rest.truststore") && text.contains("PEM"),
            "{text}"
        );
        let text = from_pairs(&[(&SSL_REST_ENABLED, "true")])
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with("security.ssl.rest.keystore: must be set"),
            "{text}"
        );
        let err = from_pairs(&[(&SSL_REST_KEY_PASSWORD, "hunter2")]).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(err.to_string().contains("PEM"), "{err}");
        assert!(from_pairs(&[(&SSL_REST_ENABLED, "maybe")]).is_err());
        let token = dir.path().join("token");
        std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").unwrap();
        let err = from_pairs(&[
            (&REST_ADDRESS, "0.0.0.0"),
            (&REST_TOKEN_FILE, token.to_str().unwrap()),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("clear text"), "{err}");
        assert!(!err.to_string().contains("0123456789abcdef"), "{err}");
        let o = from_pairs(&[(&REST_TOKEN_FILE, token.to_str().unwrap())]).unwrap();
        assert_eq!(
            o.server.security.token_file.as_deref(),
            Some(token.as_path())
        );
        assert!(is_server_key(&SSL_REST_KEYSTORE));
        assert_eq!(
            lookup("security.ssl.rest.authentication-enabled"),
            Some(SSL_REST_AUTHENTICATION.name())
        );
    }
}
