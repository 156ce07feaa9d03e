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
//! settings and no credential travels in a job submission. The keys are a catalog
//! of [`KeySpec`] rows like the job's; `crate::settings` reads them from
//! `--key value`, `--key=value`, `-Dkey=value`, `-D key=value` and the
//! `--config` TOML file, and [`ProcessOptions::from_pairs`] validates them.

use std::time::Duration;

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
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            rest_address: DEFAULT_ADDRESS.to_string(),
            rest_port: PortChoice::default_port(DEFAULT_REST_PORT),
            metrics_address: None,
            metrics_port: PortChoice::default_port(DEFAULT_METRICS_PORT),
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

/// A bad process option value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value '{value}' for {key}: {reason}")]
pub struct OptionError {
    pub key: String,
    pub value: String,
    pub reason: String,
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
            assert!(["rest", "metrics", "s3"].contains(&key.spec().section()));
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
        assert!(err.to_string().contains("for s3.secret-key"), "{err}");
    }
}
