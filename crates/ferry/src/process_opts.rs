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
//! and web page (`crate::rest::security`); the CLI verbs read the same keys
//! for their side. The keys are a catalog
//! of [`KeySpec`] rows like the job's; `crate::settings` reads them from
//! `--key value`, `--key=value`, `-Dkey=value`, `-D key=value` and the
//! `--config` TOML file, and [`ProcessOptions::from_pairs`] validates them.

use std::path::PathBuf;
use std::time::Duration;

use crate::rest::security::RestSecurity;
use ferry_engine::config::{KeyDefault, KeyOrigin, KeySpec, ValueKind};
use ferry_objstore::{S3Key, S3Settings};

/// Default REST port (Flink's `rest.port`).
pub const DEFAULT_REST_PORT: u16 = 8081;
/// Default Prometheus port.
pub const DEFAULT_METRICS_PORT: u16 = 9250;
/// Default listen address: loopback only.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1";
/// Kudu's default master web UI port.
pub const KUDU_MASTER_WEB_PORT: u16 = 8051;

/// A port, and whether the user chose it (a chosen port that is busy is an
/// error; a busy default only disables that endpoint with a warning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortChoice {
    pub port: u16,
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
    /// `metrics.kudu.sourceMasterHttpAddresses`: the source masters' web UI
    /// (default: each master's host on port 8051).
    pub source_master_http: Option<Vec<String>>,
    /// `metrics.kudu.sinkMasterHttpAddresses`.
    pub sink_master_http: Option<Vec<String>>,
    /// `metrics.kudu.pollIntervalMillis`; zero disables polling.
    pub poll_interval: Duration,
}

impl Default for KuduMetricsOptions {
    fn default() -> Self {
        KuduMetricsOptions {
            source_master_http: None,
            sink_master_http: None,
            poll_interval: Duration::from_millis(2000),
        }
    }
}

/// One process option. Its name, aliases, default and doc are a
/// [`KeySpec`] row of [`ProcessKey::spec`], the same shape as the job's
/// keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProcessKey {
    RestAddress,
    RestPort,
    MetricsAddress,
    MetricsPort,
    SourceMasterHttp,
    SinkMasterHttp,
    KuduPollInterval,
    S3Endpoint,
    S3AccessKey,
    S3SecretKey,
    S3SessionToken,
    S3PathStyleAccess,
    S3Region,
    S3AllowHttp,
    SslRestEnabled,
    SslRestKeystore,
    SslRestPrivateKey,
    SslRestTruststore,
    SslRestAuthentication,
    RestTokenFile,
    SslRestKeystorePassword,
    SslRestKeyPassword,
    SslRestTruststorePassword,
}

// Row i describes ALL[i]; a unit test checks the two line up.
const CATALOG: &[(ProcessKey, KeySpec)] = &[
    (
        ProcessKey::RestAddress,
        KeySpec::new(
            "rest.address",
            KeyDefault::Value(DEFAULT_ADDRESS),
            ValueKind::Host,
            KeyOrigin::Flink,
            "Address the REST API and web page listen on.",
        )
        .with_aliases(&["rest.bind-address"]),
    ),
    (
        ProcessKey::RestPort,
        KeySpec::new(
            "rest.port",
            KeyDefault::Value("8081"),
            ValueKind::Port,
            KeyOrigin::Flink,
            "REST API and web page port; 0 picks a free port.",
        )
        .with_aliases(&["rest.bind-port"]),
    ),
    (
        ProcessKey::MetricsAddress,
        KeySpec::new(
            "metrics.address",
            KeyDefault::Derived("<rest.address>"),
            ValueKind::Host,
            KeyOrigin::Ferry,
            "Address of the Prometheus endpoint.",
        )
        .with_aliases(&["metrics.reporter.prom.host"]),
    ),
    (
        ProcessKey::MetricsPort,
        KeySpec::new(
            "metrics.port",
            KeyDefault::Value("9250"),
            ValueKind::Port,
            KeyOrigin::Ferry,
            "Prometheus endpoint port, path /metrics.",
        )
        .with_aliases(&["metrics.reporter.prom.port"]),
    ),
    (
        ProcessKey::SourceMasterHttp,
        KeySpec::new(
            "metrics.kudu.sourceMasterHttpAddresses",
            KeyDefault::Derived("<master host>:8051"),
            ValueKind::HttpAddresses,
            KeyOrigin::Ferry,
            "Source masters' web UIs, used to find the tablet servers whose /metrics are polled.",
        ),
    ),
    (
        ProcessKey::SinkMasterHttp,
        KeySpec::new(
            "metrics.kudu.sinkMasterHttpAddresses",
            KeyDefault::Derived("<master host>:8051"),
            ValueKind::HttpAddresses,
            KeyOrigin::Ferry,
            "Sink masters' web UIs.",
        ),
    ),
    (
        ProcessKey::KuduPollInterval,
        KeySpec::new(
            "metrics.kudu.pollIntervalMillis",
            KeyDefault::Value("2000"),
            ValueKind::MillisOrZero,
            KeyOrigin::Ferry,
            "How often tablet server metrics are polled; 0 disables.",
        ),
    ),
    (
        ProcessKey::S3Endpoint,
        KeySpec::new(
            "s3.endpoint",
            KeyDefault::Derived("AWS_ENDPOINT_URL, else AWS"),
            ValueKind::Text,
            KeyOrigin::Flink,
            "URL of an S3-compatible server for s3:// state (http only on loopback unless s3.allow-http).",
        ),
    ),
    (
        ProcessKey::S3AccessKey,
        KeySpec::new(
            "s3.access-key",
            KeyDefault::Derived("AWS_ACCESS_KEY_ID"),
            ValueKind::Text,
            KeyOrigin::Flink,
            "S3 access key; when set, the AWS_* credentials are ignored.",
        )
        .with_aliases(&["s3.access.key"]),
    ),
    (
        ProcessKey::S3SecretKey,
        KeySpec::new(
            "s3.secret-key",
            KeyDefault::Derived("AWS_SECRET_ACCESS_KEY"),
            ValueKind::Secret,
            KeyOrigin::Flink,
            "S3 secret key; never shown in logs, REST or errors.",
        )
        .with_aliases(&["s3.secret.key"]),
    ),
    (
        ProcessKey::S3SessionToken,
        KeySpec::new(
            "s3.session-token",
            KeyDefault::Derived("AWS_SESSION_TOKEN"),
            ValueKind::Secret,
            KeyOrigin::Ferry,
            "Session token of temporary S3 credentials; never shown.",
        )
        .with_aliases(&["s3.session.token"]),
    ),
    (
        ProcessKey::S3PathStyleAccess,
        KeySpec::new(
            "s3.path.style.access",
            KeyDefault::Derived("true with s3.endpoint, else false"),
            ValueKind::Bool,
            KeyOrigin::Flink,
            "Path-style S3 requests (endpoint/bucket/key) instead of virtual-hosted ones.",
        ),
    ),
    (
        ProcessKey::S3Region,
        KeySpec::new(
            "s3.region",
            KeyDefault::Derived("AWS_REGION, else us-east-1"),
            ValueKind::Text,
            KeyOrigin::Ferry,
            "S3 region.",
        )
        .with_aliases(&["s3.endpoint.region"]),
    ),
    (
        ProcessKey::S3AllowHttp,
        KeySpec::new(
            "s3.allow-http",
            KeyDefault::Derived("true for a loopback s3.endpoint"),
            ValueKind::Bool,
            KeyOrigin::Ferry,
            "Allow plain http to s3.endpoint.",
        ),
    ),
    (
        ProcessKey::SslRestEnabled,
        KeySpec::new(
            "security.ssl.rest.enabled",
            KeyDefault::Value("false"),
            ValueKind::Bool,
            KeyOrigin::Flink,
            "Serve the REST API and web page over TLS (https) with security.ssl.rest.keystore.",
        ),
    ),
    (
        ProcessKey::SslRestKeystore,
        KeySpec::new(
            "security.ssl.rest.keystore",
            KeyDefault::Derived("none"),
            ValueKind::Text,
            KeyOrigin::Flink,
            "PEM file with the certificate chain (leaf first) and, unless security.ssl.rest.private-key, the private key; the server's, or the CLI's client certificate. Not JKS/PKCS12.",
        ),
    ),
    (
        ProcessKey::SslRestPrivateKey,
        KeySpec::new(
            "security.ssl.rest.private-key",
            KeyDefault::Derived("in the keystore file"),
            ValueKind::Text,
            KeyOrigin::Ferry,
            "PEM file with the keystore certificate's unencrypted private key, when it is not in the keystore file.",
        ),
    ),
    (
        ProcessKey::SslRestTruststore,
        KeySpec::new(
            "security.ssl.rest.truststore",
            KeyDefault::Derived("none (CLI: the system CAs)"),
            ValueKind::Text,
            KeyOrigin::Flink,
            "PEM file with CA certificates: the server accepts client certificates they signed (authentication-enabled); the CLI trusts the server certificate they signed.",
        ),
    ),
    (
        ProcessKey::SslRestAuthentication,
        KeySpec::new(
            "security.ssl.rest.authentication-enabled",
            KeyDefault::Value("false"),
            ValueKind::Bool,
            KeyOrigin::Flink,
            "Mutual TLS: refuse REST clients without a certificate signed by a truststore CA.",
        ),
    ),
    (
        ProcessKey::RestTokenFile,
        KeySpec::new(
            "security.rest.token-file",
            KeyDefault::Derived("none"),
            ValueKind::Text,
            KeyOrigin::Ferry,
            "File holding a bearer token (one line, 16+ characters) every REST request must send as 'Authorization: Bearer'; needs TLS unless rest.address is loopback.",
        ),
    ),
    (
        ProcessKey::SslRestKeystorePassword,
        KeySpec::new(
            "security.ssl.rest.keystore-password",
            KeyDefault::Derived("none"),
            ValueKind::Secret,
            KeyOrigin::Flink,
            "Not used: ferry reads PEM files, which have no store password; giving it is an error.",
        ),
    ),
    (
        ProcessKey::SslRestKeyPassword,
        KeySpec::new(
            "security.ssl.rest.key-password",
            KeyDefault::Derived("none"),
            ValueKind::Secret,
            KeyOrigin::Flink,
            "Not used: ferry reads unencrypted PEM keys, protected by file permissions; giving it is an error.",
        ),
    ),
    (
        ProcessKey::SslRestTruststorePassword,
        KeySpec::new(
            "security.ssl.rest.truststore-password",
            KeyDefault::Derived("none"),
            ValueKind::Secret,
            KeyOrigin::Flink,
            "Not used: PEM CA files have no password; giving it is an error.",
        ),
    ),
];

const ALL: &[ProcessKey] = &[
    ProcessKey::RestAddress,
    ProcessKey::RestPort,
    ProcessKey::MetricsAddress,
    ProcessKey::MetricsPort,
    ProcessKey::SourceMasterHttp,
    ProcessKey::SinkMasterHttp,
    ProcessKey::KuduPollInterval,
    ProcessKey::S3Endpoint,
    ProcessKey::S3AccessKey,
    ProcessKey::S3SecretKey,
    ProcessKey::S3SessionToken,
    ProcessKey::S3PathStyleAccess,
    ProcessKey::S3Region,
    ProcessKey::S3AllowHttp,
    ProcessKey::SslRestEnabled,
    ProcessKey::SslRestKeystore,
    ProcessKey::SslRestPrivateKey,
    ProcessKey::SslRestTruststore,
    ProcessKey::SslRestAuthentication,
    ProcessKey::RestTokenFile,
    ProcessKey::SslRestKeystorePassword,
    ProcessKey::SslRestKeyPassword,
    ProcessKey::SslRestTruststorePassword,
];

impl ProcessKey {
    /// Every process key, in catalog order.
    pub fn all() -> &'static [ProcessKey] {
        ALL
    }

    /// The catalog row of this key.
    pub fn spec(self) -> &'static KeySpec {
        // No explicit discriminants: `self as usize` is the row (unit test).
        &CATALOG[self as usize].1
    }

    /// The key's name (not an alias).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The key named `name` or one of its aliases.
    pub fn lookup(name: &str) -> Option<ProcessKey> {
        ALL.iter().copied().find(|k| k.spec().answers_to(name))
    }

    /// The `s3.*` setting this key is, if it is one.
    pub fn s3_key(self) -> Option<S3Key> {
        Some(match self {
            ProcessKey::S3Endpoint => S3Key::Endpoint,
            ProcessKey::S3AccessKey => S3Key::AccessKey,
            ProcessKey::S3SecretKey => S3Key::SecretKey,
            ProcessKey::S3SessionToken => S3Key::SessionToken,
            ProcessKey::S3PathStyleAccess => S3Key::PathStyleAccess,
            ProcessKey::S3Region => S3Key::Region,
            ProcessKey::S3AllowHttp => S3Key::AllowHttp,
            _ => return None,
        })
    }

    /// Whether `ferry server` uses this key (the `metrics.kudu.*` keys are
    /// per job: `ferry run` and its `--jobmanager` submissions carry them).
    pub fn is_server_key(self) -> bool {
        !matches!(
            self,
            ProcessKey::SourceMasterHttp
                | ProcessKey::SinkMasterHttp
                | ProcessKey::KuduPollInterval
        )
    }
}

impl std::fmt::Display for ProcessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A bad process option value (an empty `value`: a key missing, or one
/// that conflicts with another).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct OptionError {
    pub key: String,
    pub value: String,
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

impl From<crate::rest::security::SecurityError> for OptionError {
    /// The file is named, never its contents.
    fn from(e: crate::rest::security::SecurityError) -> Self {
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
    pub server: ServerOptions,
    pub kudu: KuduMetricsOptions,
    /// `s3.*` as given (secrets print as `***`); merged with the `AWS_*`
    /// environment when the resolver is built.
    pub s3: S3Settings,
}

impl ProcessOptions {
    /// Validates the given process keys (each at most once; the caller
    /// merged the command line over the file) on top of the defaults.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (ProcessKey, &'a str)>,
    ) -> Result<Self, OptionError> {
        let mut opts = ProcessOptions::default();
        for (key, value) in pairs {
            opts.set(key, value)?;
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
                    "s3.endpoint" => opts.s3.endpoint.clone().unwrap_or_default(),
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

    fn set(&mut self, key: ProcessKey, value: &str) -> Result<(), OptionError> {
        if let Some(s3_key) = key.s3_key() {
            return self.s3.set(s3_key, value).map_err(|e| OptionError {
                key: key.name().to_string(),
                // A secret, or an endpoint with credentials in it, is not echoed.
                value: if s3_key.is_secret() || value.contains('@') {
                    "***".to_string()
                } else {
                    value.to_string()
                },
                reason: e.reason,
            });
        }
        let fail = |reason: &str| OptionError {
            key: key.name().to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let port = || -> Result<PortChoice, OptionError> {
            let port = value
                .trim()
                .parse::<u16>()
                .map_err(|_| fail("expected a port number from 0 to 65535"))?;
            Ok(PortChoice {
                port,
                explicit: true,
            })
        };
        let host = || -> Result<String, OptionError> {
            match value.trim() {
                "" => Err(fail("must not be empty")),
                h => Ok(h.to_string()),
            }
        };
        let file = || -> Result<Option<PathBuf>, OptionError> {
            match value.trim() {
                "" => Err(fail("expected the path of a file")),
                p => Ok(Some(PathBuf::from(p))),
            }
        };
        let boolean = || -> Result<bool, OptionError> {
            match value.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(fail("expected true or false")),
            }
        };
        let addresses = || -> Result<Vec<String>, OptionError> {
            let list: Vec<String> = value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            if list.is_empty() {
                return Err(fail("expected comma-separated host:port addresses"));
            }
            Ok(list)
        };
        match key {
            ProcessKey::RestAddress => self.server.rest_address = host()?,
            ProcessKey::RestPort => self.server.rest_port = port()?,
            ProcessKey::MetricsAddress => self.server.metrics_address = Some(host()?),
            ProcessKey::MetricsPort => self.server.metrics_port = port()?,
            ProcessKey::SourceMasterHttp => self.kudu.source_master_http = Some(addresses()?),
            ProcessKey::SinkMasterHttp => self.kudu.sink_master_http = Some(addresses()?),
            ProcessKey::S3Endpoint
            | ProcessKey::S3AccessKey
            | ProcessKey::S3SecretKey
            | ProcessKey::S3SessionToken
            | ProcessKey::S3PathStyleAccess
            | ProcessKey::S3Region
            | ProcessKey::S3AllowHttp => {} // handled above
            ProcessKey::SslRestEnabled => self.server.security.ssl_enabled = boolean()?,
            ProcessKey::SslRestKeystore => self.server.security.keystore = file()?,
            ProcessKey::SslRestPrivateKey => self.server.security.private_key = file()?,
            ProcessKey::SslRestTruststore => self.server.security.truststore = file()?,
            ProcessKey::SslRestAuthentication => {
                self.server.security.authentication_enabled = boolean()?
            }
            ProcessKey::RestTokenFile => self.server.security.token_file = file()?,
            ProcessKey::SslRestKeystorePassword
            | ProcessKey::SslRestKeyPassword
            | ProcessKey::SslRestTruststorePassword => {
                return Err(OptionError {
                    key: key.name().to_string(),
                    value: "***".to_string(),
                    reason: "ferry reads PEM files: certificates have no store password and the \
                             private key must be unencrypted (protect it with file permissions, \
                             e.g. 0600); remove this key"
                        .to_string(),
                })
            }
            ProcessKey::KuduPollInterval => {
                let ms = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| fail("expected milliseconds (0 disables)"))?;
                self.kudu.poll_interval = Duration::from_millis(ms);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_rows_line_up_with_the_enum() {
        assert_eq!(CATALOG.len(), ALL.len());
        for (i, key) in ALL.iter().enumerate() {
            assert_eq!(CATALOG[i].0, *key, "catalog row {i}");
            assert_eq!(*key as usize, i, "{key:?} position");
            assert!(["rest", "metrics", "s3", "security"].contains(&key.spec().section()));
            assert_eq!(ProcessKey::lookup(key.name()), Some(*key));
        }
    }

    #[test]
    fn flink_aliases() {
        assert_eq!(
            ProcessKey::lookup("rest.bind-port"),
            Some(ProcessKey::RestPort)
        );
        assert_eq!(
            ProcessKey::lookup("metrics.reporter.prom.port"),
            Some(ProcessKey::MetricsPort)
        );
        assert_eq!(ProcessKey::lookup("job.tableName"), None);
        let o = ProcessOptions::from_pairs([
            (ProcessKey::RestPort, "8082"),
            (ProcessKey::MetricsPort, "9999"),
        ])
        .unwrap();
        assert_eq!(
            o.server.rest_port,
            PortChoice {
                port: 8082,
                explicit: true
            }
        );
        assert_eq!(o.server.metrics_port.port, 9999);
        let defaults = ProcessOptions::from_pairs([]).unwrap();
        assert!(!defaults.server.rest_port.explicit);
        assert_eq!(defaults.server.rest_port.port, DEFAULT_REST_PORT);
        // The catalog's documented defaults are the ones applied.
        let documented = |k: ProcessKey| k.spec().default_value().map(str::to_string);
        assert_eq!(
            documented(ProcessKey::RestPort),
            Some(DEFAULT_REST_PORT.to_string())
        );
        assert_eq!(
            documented(ProcessKey::MetricsPort),
            Some(DEFAULT_METRICS_PORT.to_string())
        );
        assert_eq!(
            documented(ProcessKey::RestAddress).as_deref(),
            Some(DEFAULT_ADDRESS)
        );
        assert_eq!(
            documented(ProcessKey::KuduPollInterval),
            Some(defaults.kudu.poll_interval.as_millis().to_string())
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        let err = ProcessOptions::from_pairs([(ProcessKey::RestPort, "http")]).unwrap_err();
        assert!(err.to_string().contains("'http' for rest.port"), "{err}");
        let err = ProcessOptions::from_pairs([(ProcessKey::KuduPollInterval, "-1")]).unwrap_err();
        assert!(err.to_string().contains("metrics.kudu.pollIntervalMillis"));
        assert!(ProcessOptions::from_pairs([(ProcessKey::MetricsAddress, " ")]).is_err());
        let o = ProcessOptions::from_pairs([(ProcessKey::KuduPollInterval, "0")]).unwrap();
        assert_eq!(o.kudu.poll_interval, Duration::ZERO);
    }

    #[test]
    fn s3_keys_are_validated_and_secrets_never_echoed() {
        let o = ProcessOptions::from_pairs([
            (ProcessKey::S3Endpoint, "http://127.0.0.1:9000"),
            (ProcessKey::S3AccessKey, "ferry"),
            (ProcessKey::S3SecretKey, "very-secret-value"),
            (ProcessKey::S3PathStyleAccess, "true"),
        ])
        .unwrap();
        assert_eq!(o.s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(o.s3.path_style_access, Some(true));
        assert!(!format!("{o:?}").contains("very-secret-value"));
        assert_eq!(
            ProcessKey::lookup("s3.secret.key"),
            Some(ProcessKey::S3SecretKey)
        );
        let err = ProcessOptions::from_pairs([(ProcessKey::S3SecretKey, " ")]).unwrap_err();
        assert!(err.to_string().contains("s3.secret-key"), "{err}");
        let err =
            ProcessOptions::from_pairs([(ProcessKey::S3Endpoint, "http://k:pw@host")]).unwrap_err();
        assert!(!err.to_string().contains("pw@"), "{err}");
        let err =
            ProcessOptions::from_pairs([(ProcessKey::S3PathStyleAccess, "maybe")]).unwrap_err();
        assert!(
            err.to_string().contains("'maybe' for s3.path.style.access"),
            "{err}"
        );
        assert!(ProcessKey::S3SecretKey.is_server_key());
        let err = ProcessOptions::from_pairs([(ProcessKey::S3Endpoint, "http://s3.example.com")])
            .unwrap_err();
        assert!(err.to_string().contains("s3.allow-http"), "{err}");
        let err = ProcessOptions::from_pairs([(ProcessKey::S3AccessKey, "id")]).unwrap_err();
        assert!(err.to_string().starts_with("s3.secret-key: "), "{err}");
    }

    #[test]
    fn rest_security_keys() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("server.pem");
        let err = ProcessOptions::from_pairs([
            (ProcessKey::SslRestEnabled, "true"),
            (ProcessKey::SslRestKeystore, missing.to_str().unwrap()),
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
        let text =
            ProcessOptions::from_pairs([(ProcessKey::SslRestTruststore, jks.to_str().unwrap())])
                .unwrap_err()
                .to_string();
        assert!(
            text.contains("security.ssl.rest.truststore") && text.contains("PEM"),
            "{text}"
        );
        let text = ProcessOptions::from_pairs([(ProcessKey::SslRestEnabled, "true")])
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with("security.ssl.rest.keystore: must be set"),
            "{text}"
        );
        let err =
            ProcessOptions::from_pairs([(ProcessKey::SslRestKeyPassword, "hunter2")]).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(err.to_string().contains("PEM"), "{err}");
        assert!(ProcessOptions::from_pairs([(ProcessKey::SslRestEnabled, "maybe")]).is_err());
        let token = dir.path().join("token");
        std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").unwrap();
        let err = ProcessOptions::from_pairs([
            (ProcessKey::RestAddress, "0.0.0.0"),
            (ProcessKey::RestTokenFile, token.to_str().unwrap()),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("clear text"), "{err}");
        assert!(!err.to_string().contains("0123456789abcdef"), "{err}");
        let o = ProcessOptions::from_pairs([(ProcessKey::RestTokenFile, token.to_str().unwrap())])
            .unwrap();
        assert_eq!(
            o.server.security.token_file.as_deref(),
            Some(token.as_path())
        );
        assert!(ProcessKey::SslRestKeystore.is_server_key());
        assert_eq!(
            ProcessKey::lookup("security.ssl.rest.authentication-enabled"),
            Some(ProcessKey::SslRestAuthentication)
        );
    }
}
