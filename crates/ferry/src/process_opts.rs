//! Options of the ferry *process* (as opposed to a job): where the REST API
//! and the Prometheus endpoint listen, and how the source and sink tablet
//! servers' metrics are polled.
//!
//! Keys use Flink's names where Flink has one (`rest.address`, `rest.port`,
//! `rest.bind-address`, `rest.bind-port`, `metrics.reporter.prom.port`) so
//! `-Drest.port=8082` habits carry over; ferry adds `metrics.port`,
//! `metrics.address` and the `metrics.kudu.*` keys. They are accepted as
//! `--key value`, `--key=value`, `-Dkey=value`, `-D key=value`, and in the
//! `--config` TOML file (`[rest]` / `[metrics]` tables or dotted keys).

use std::time::Duration;

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

/// Every process key, for `--help` and the docs: (name, default, doc).
pub const PROCESS_KEYS: &[(&str, &str, &str)] = &[
    (
        "rest.address",
        DEFAULT_ADDRESS,
        "address the REST API and web page listen on (alias rest.bind-address)",
    ),
    (
        "rest.port",
        "8081",
        "REST API and web page port (alias rest.bind-port); 0 picks a free port",
    ),
    (
        "metrics.address",
        "<rest.address>",
        "address of the Prometheus endpoint",
    ),
    (
        "metrics.port",
        "9250",
        "Prometheus endpoint port, path /metrics (alias metrics.reporter.prom.port)",
    ),
    (
        "metrics.kudu.sourceMasterHttpAddresses",
        "<master host>:8051",
        "source masters' web UIs, used to find the tablet servers whose /metrics are polled",
    ),
    (
        "metrics.kudu.sinkMasterHttpAddresses",
        "<master host>:8051",
        "sink masters' web UIs",
    ),
    (
        "metrics.kudu.pollIntervalMillis",
        "2000",
        "how often tablet server metrics are polled; 0 disables",
    ),
];

/// Whether `key` is a process key (with or without leading dashes).
pub fn is_process_key(key: &str) -> bool {
    canonical(key.trim_start_matches('-')).is_some()
}

fn canonical(key: &str) -> Option<&'static str> {
    Some(match key {
        "rest.address" | "rest.bind-address" => "rest.address",
        "rest.port" | "rest.bind-port" => "rest.port",
        "metrics.address" | "metrics.reporter.prom.host" => "metrics.address",
        "metrics.port" | "metrics.reporter.prom.port" => "metrics.port",
        "metrics.kudu.sourceMasterHttpAddresses" => "metrics.kudu.sourceMasterHttpAddresses",
        "metrics.kudu.sinkMasterHttpAddresses" => "metrics.kudu.sinkMasterHttpAddresses",
        "metrics.kudu.pollIntervalMillis" => "metrics.kudu.pollIntervalMillis",
        _ => return None,
    })
}

/// A bad process option value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value '{value}' for {key}: {reason}")]
pub struct OptionError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

/// Process options being collected from flags and files.
#[derive(Debug, Clone, Default)]
pub struct ProcessOptions {
    pub server: ServerOptions,
    pub kudu: KuduMetricsOptions,
}

impl ProcessOptions {
    /// Sets one key (`rest.port`, …). Returns `Ok(false)` if `key` is not a
    /// process key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, OptionError> {
        let Some(name) = canonical(key.trim_start_matches('-')) else {
            return Ok(false);
        };
        let fail = |reason: &str| OptionError {
            key: name.to_string(),
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
        match name {
            "rest.address" => {
                if value.trim().is_empty() {
                    return Err(fail("must not be empty"));
                }
                self.server.rest_address = value.trim().to_string();
            }
            "rest.port" => self.server.rest_port = port()?,
            "metrics.address" => {
                if value.trim().is_empty() {
                    return Err(fail("must not be empty"));
                }
                self.server.metrics_address = Some(value.trim().to_string());
            }
            "metrics.port" => self.server.metrics_port = port()?,
            "metrics.kudu.sourceMasterHttpAddresses" => {
                self.kudu.source_master_http = Some(addresses()?)
            }
            "metrics.kudu.sinkMasterHttpAddresses" => {
                self.kudu.sink_master_http = Some(addresses()?)
            }
            "metrics.kudu.pollIntervalMillis" => {
                let ms = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| fail("expected milliseconds (0 disables)"))?;
                self.kudu.poll_interval = Duration::from_millis(ms);
            }
            _ => unreachable!("canonical() returned an unknown key"),
        }
        Ok(true)
    }

    /// Applies `-D key=value` (the text after `-D`).
    pub fn set_dynamic(&mut self, pair: &str) -> Result<(), OptionError> {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(OptionError {
                key: "-D".into(),
                value: pair.into(),
                reason: "expected -Dkey=value".into(),
            });
        };
        if self.set(key.trim(), value)? {
            Ok(())
        } else {
            Err(OptionError {
                key: format!("-D{key}"),
                value: value.into(),
                reason: format!(
                    "not a process option; known: {}",
                    PROCESS_KEYS
                        .iter()
                        .map(|k| k.0)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
        }
    }
}

/// Splits a TOML config into the process keys (applied to `opts`) and the
/// rest (returned, for the job's own parser). Returns `None` when the text
/// has no process keys, so the caller can keep its file-based error
/// messages.
pub fn take_process_keys_from_toml(
    text: &str,
    opts: &mut ProcessOptions,
) -> Result<Option<String>, String> {
    let mut table: toml::Table = match text.parse() {
        Ok(t) => t,
        // Let the job's parser report the syntax error with the file name.
        Err(_) => return Ok(None),
    };
    let mut found = Vec::new();
    collect_process_keys(&mut table, "", &mut found);
    if found.is_empty() {
        return Ok(None);
    }
    for (key, value) in found {
        opts.set(&key, &value).map_err(|e| e.to_string())?;
    }
    toml::to_string(&table).map(Some).map_err(|e| e.to_string())
}

fn collect_process_keys(table: &mut toml::Table, prefix: &str, out: &mut Vec<(String, String)>) {
    let names: Vec<String> = table.keys().cloned().collect();
    for name in names {
        let full = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let is_table = matches!(table.get(&name), Some(toml::Value::Table(_)));
        if is_table {
            if let Some(toml::Value::Table(inner)) = table.get_mut(&name) {
                collect_process_keys(inner, &full, out);
                if inner.is_empty() {
                    table.remove(&name);
                }
            }
        } else if canonical(&full).is_some() {
            if let Some(v) = table.remove(&name) {
                let text = match v {
                    toml::Value::String(s) => s,
                    other => other.to_string(),
                };
                out.push((full, text));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_aliases_and_dynamic_properties() {
        let mut o = ProcessOptions::default();
        assert!(o.set("--rest.bind-port", "8082").unwrap());
        o.set_dynamic("metrics.reporter.prom.port=9999").unwrap();
        assert!(!o.set("--job.tableName", "x").unwrap());
        assert_eq!(
            o.server.rest_port,
            PortChoice {
                port: 8082,
                explicit: true
            }
        );
        assert_eq!(o.server.metrics_port.port, 9999);
        assert!(o.set("rest.port", "http").is_err());
        assert!(o.set_dynamic("job.tableName=x").is_err());
    }

    #[test]
    fn toml_process_keys_are_taken_out() {
        let mut o = ProcessOptions::default();
        let rest = take_process_keys_from_toml(
            "\"metrics.port\" = 9300\n[rest]\nport = 8090\n[job]\ntableName = \"t\"\n",
            &mut o,
        )
        .unwrap()
        .unwrap();
        assert_eq!(o.server.rest_port.port, 8090);
        assert_eq!(o.server.metrics_port.port, 9300);
        assert!(
            rest.contains("tableName") && !rest.contains("rest") && !rest.contains("9300"),
            "{rest}"
        );
        assert_eq!(
            take_process_keys_from_toml("[job]\ntableName = \"t\"\n", &mut o).unwrap(),
            None
        );
    }
}
