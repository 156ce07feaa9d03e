//! How ferry authenticates to each Kudu cluster: SASL PLAIN (the default)
//! or Kerberos with a principal and a keytab or ticket cache: Flink's
//! `security.kerberos.login.*` keys (one login for both clusters, also
//! given as `-D`) and ferry's per-cluster overrides (`reader.*` for the
//! source cluster, `writer.*` for the sink cluster), validated into
//! [`KerberosConfig`]. The login itself is the Kudu client's business
//! (`kudu_client::Kerberos`); this only says who and with what.

use std::path::PathBuf;

use super::error::ConfigError;
use super::map::Config;
use super::option::{ConfigOption, ValueError};
use super::section::Section;
use super::spec::{KeyOrigin::Flink, ValueKind};

crate::config_section! {
    /// Flink's Kerberos login keys, for both clusters.
    pub static KERBEROS_LOGIN_KEYS = Section::job("security.kerberos.login").dynamic();
    /// `security.kerberos.login.principal`.
    pub const LOGIN_PRINCIPAL: ConfigOption<String> = optional_text("security.kerberos.login.principal")
        .origin(Flink)
        .derived("none: SASL PLAIN, no Kerberos")
        .doc("Kerberos principal ferry logs in as to both clusters (e.g. ferry@EXAMPLE.COM); reader.kerberosPrincipal / writer.kerberosPrincipal override it per cluster. Setting a principal turns Kerberos (SASL GSSAPI) on; docs/security.md.");
    /// `security.kerberos.login.keytab`.
    pub const LOGIN_KEYTAB: ConfigOption<PathBuf> = keytab("security.kerberos.login.keytab")
        .origin(Flink)
        .derived("none: the ticket cache")
        .doc("Keytab file of security.kerberos.login.principal; ferry logs in from it and again before tickets expire, for as long as the job runs. Without one, tickets come from the ticket cache (KRB5CCNAME), which something else must renew.");
    /// `security.kerberos.login.use-ticket-cache`.
    pub const LOGIN_USE_TICKET_CACHE: ConfigOption<bool> = ConfigOption::flag("security.kerberos.login.use-ticket-cache")
        .origin(Flink)
        .default_value("true")
        .doc("Whether a principal without a keytab may use the ticket cache (KRB5CCNAME or the default cache); false makes a keytab mandatory.");
    /// `security.kerberos.login.contexts`.
    pub const LOGIN_CONTEXTS: ConfigOption<String> = optional_text("security.kerberos.login.contexts")
        .origin(Flink)
        .derived("none: ZooKeeper sessions are not authenticated")
        .doc("Flink's login contexts that get the Kerberos login besides the Kudu clusters (which always do): Client (zookeeper.sasl.login-context-name) makes the ZooKeeper HA session authenticate with SASL GSSAPI as security.kerberos.login.principal (docs/security.md). Other names are refused.");
}

crate::config_section! {
    /// ferry's per-cluster Kerberos keys.
    pub static KERBEROS_CLUSTER_KEYS = Section::job("cluster Kerberos");
    /// `reader.kerberosPrincipal`.
    pub const SOURCE_PRINCIPAL: ConfigOption<String> = optional_text("reader.kerberosPrincipal")
        .derived("security.kerberos.login.principal")
        .doc("Kerberos principal for the source cluster, when it differs from the sink's (another realm, another service user).");
    /// `reader.kerberosKeytab`.
    pub const SOURCE_KEYTAB: ConfigOption<PathBuf> = keytab("reader.kerberosKeytab")
        .derived("security.kerberos.login.keytab")
        .doc("Keytab of reader.kerberosPrincipal.");
    /// `reader.saslProtocolName`.
    pub const SOURCE_SERVICE_NAME: ConfigOption<String> = ConfigOption::trimmed("reader.saslProtocolName")
        .default_value("kudu")
        .doc("Service name of the source cluster's Kerberos principals (<name>/<host>@REALM), as Kudu's clients call it.");
    /// `writer.kerberosPrincipal`.
    pub const SINK_PRINCIPAL: ConfigOption<String> = optional_text("writer.kerberosPrincipal")
        .derived("security.kerberos.login.principal")
        .doc("Kerberos principal for the sink cluster, when it differs from the source's.");
    /// `writer.kerberosKeytab`.
    pub const SINK_KEYTAB: ConfigOption<PathBuf> = keytab("writer.kerberosKeytab")
        .derived("security.kerberos.login.keytab")
        .doc("Keytab of writer.kerberosPrincipal.");
    /// `writer.saslProtocolName`.
    pub const SINK_SERVICE_NAME: ConfigOption<String> = ConfigOption::trimmed("writer.saslProtocolName")
        .default_value("kudu")
        .doc("Service name of the sink cluster's Kerberos principals.");
}

/// Trimmed text; blank: not given.
const fn optional_text(name: &'static str) -> ConfigOption<String> {
    ConfigOption::trimmed(name).blank_means_default()
}

/// A keytab path (its readability is checked with the login it serves).
const fn keytab(name: &'static str) -> ConfigOption<PathBuf> {
    ConfigOption::new(name, ValueKind::Text, path, print_path).blank_means_default()
}

fn path(value: &str) -> Result<PathBuf, ValueError> {
    Ok(PathBuf::from(value.trim()))
}

#[allow(clippy::ptr_arg)] // the printer of a `PathBuf` key
fn print_path(path: &PathBuf) -> String {
    path.display().to_string()
}

/// Kerberos settings of one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterKerberos {
    /// The client principal.
    pub principal: String,
    /// Its keytab; `None`: the ticket cache.
    pub keytab: Option<PathBuf>,
    /// The servers' service name (`kudu`).
    pub service_name: String,
}

/// The validated Kerberos settings: per cluster, `None` = SASL PLAIN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KerberosConfig {
    /// The source cluster's login.
    pub source: Option<ClusterKerberos>,
    /// The sink cluster's login.
    pub sink: Option<ClusterKerberos>,
    /// `security.kerberos.login.use-ticket-cache`.
    pub use_ticket_cache: bool,
}

impl KerberosConfig {
    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        let use_ticket_cache = keys.get(&LOGIN_USE_TICKET_CACHE)?;
        let cluster = |principal, keytab, service| {
            cluster(keys, use_ticket_cache, principal, keytab, service)
        };
        Ok(KerberosConfig {
            source: cluster(&SOURCE_PRINCIPAL, &SOURCE_KEYTAB, &SOURCE_SERVICE_NAME)?,
            sink: cluster(&SINK_PRINCIPAL, &SINK_KEYTAB, &SINK_SERVICE_NAME)?,
            use_ticket_cache,
        })
    }
}

/// One cluster's login: its own keys, else the `security.kerberos.login.*`
/// ones. A keytab must be readable now, not at 3 a.m. when a ticket ends.
fn cluster(
    keys: &Config,
    use_ticket_cache: bool,
    principal_key: &ConfigOption<String>,
    keytab_key: &ConfigOption<PathBuf>,
    service_key: &ConfigOption<String>,
) -> Result<Option<ClusterKerberos>, ConfigError> {
    let principal = match keys.get_optional(principal_key)? {
        Some(p) => Some(p),
        None => keys.get_optional(&LOGIN_PRINCIPAL)?,
    };
    let keytab = match keys.get_optional(keytab_key)? {
        Some(k) => Some((keytab_key, k)),
        None => keys
            .get_optional(&LOGIN_KEYTAB)?
            .map(|k| (&LOGIN_KEYTAB, k)),
    };
    let Some(principal) = principal else {
        if let Some((key, _)) = keytab {
            return Err(ConfigError::InvalidValue {
                key: key.name(),
                value: keys.raw(key).unwrap_or_default().to_owned(),
                reason: format!(
                    "a keytab needs a principal: set {principal_key} (or {LOGIN_PRINCIPAL})"
                ),
            });
        }
        return Ok(None);
    };
    let keytab = match keytab {
        Some((key, path)) => {
            if let Err(e) = std::fs::File::open(&path) {
                return Err(ConfigError::InvalidValue {
                    key: key.name(),
                    value: path.display().to_string(),
                    reason: format!("cannot read the keytab: {e}"),
                });
            }
            Some(path)
        }
        None if use_ticket_cache => None,
        None => {
            return Err(ConfigError::InvalidValue {
                key: LOGIN_USE_TICKET_CACHE.name(),
                value: "false".to_owned(),
                reason: format!(
                    "principal {principal} has no keytab: set {keytab_key} (or {LOGIN_KEYTAB}), or allow the ticket cache"
                ),
            })
        }
    };
    Ok(Some(ClusterKerberos {
        principal,
        keytab,
        service_name: keys.get(service_key)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::JobConfig;

    fn config(extra: &[(&str, &str)]) -> Result<JobConfig, ConfigError> {
        let mut pairs = vec![
            ("job.sourceMasterAddresses", "a:7051"),
            ("job.sinkMasterAddresses", "b:7051"),
            ("job.tableName", "t"),
            ("job.checkpointsDirectory", "/tmp/chk"),
        ];
        pairs.extend_from_slice(extra);
        JobConfig::from_named_pairs(pairs)
    }

    fn keytab(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferry-cfg-krb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(name);
        std::fs::write(&path, b"\x05\x02").expect("keytab");
        path
    }

    #[test]
    fn no_principal_means_plain() {
        let c = config(&[]).expect("valid");
        assert_eq!(c.kerberos.source, None);
        assert_eq!(c.kerberos.sink, None);
    }

    #[test]
    fn the_login_keys_apply_to_both_clusters_and_per_cluster_keys_override() {
        let both = keytab("both.keytab");
        let sink = keytab("sink.keytab");
        let c = config(&[
            ("security.kerberos.login.principal", "ferry@A.TEST"),
            (
                "security.kerberos.login.keytab",
                both.to_str().unwrap_or(""),
            ),
            ("writer.kerberosPrincipal", "ferry-dr@B.TEST"),
            ("writer.kerberosKeytab", sink.to_str().unwrap_or("")),
            ("writer.saslProtocolName", "kudu2"),
        ])
        .expect("valid");
        let source = c.kerberos.source.expect("source login");
        assert_eq!(source.principal, "ferry@A.TEST");
        assert_eq!(source.keytab.as_deref(), Some(both.as_path()));
        assert_eq!(source.service_name, "kudu");
        let sink_login = c.kerberos.sink.expect("sink login");
        assert_eq!(sink_login.principal, "ferry-dr@B.TEST");
        assert_eq!(sink_login.keytab.as_deref(), Some(sink.as_path()));
        assert_eq!(sink_login.service_name, "kudu2");
    }

    #[test]
    fn an_unreadable_keytab_is_named_with_its_key() {
        let err = config(&[
            ("reader.kerberosPrincipal", "ferry@A.TEST"),
            ("reader.kerberosKeytab", "/nonexistent/ferry.keytab"),
        ])
        .expect_err("missing keytab")
        .to_string();
        assert!(err.contains("reader.kerberosKeytab"), "{err}");
        assert!(err.contains("/nonexistent/ferry.keytab"), "{err}");
    }

    #[test]
    fn a_keytab_without_principal_and_a_principal_without_keytab_or_cache_are_refused() {
        let k = keytab("lonely.keytab");
        let err = config(&[("security.kerberos.login.keytab", k.to_str().unwrap_or(""))])
            .expect_err("no principal")
            .to_string();
        assert!(err.contains("needs a principal"), "{err}");
        let err = config(&[
            ("security.kerberos.login.principal", "ferry@A.TEST"),
            ("security.kerberos.login.use-ticket-cache", "false"),
        ])
        .expect_err("no keytab")
        .to_string();
        assert!(err.contains("has no keytab"), "{err}");
        let ok = config(&[("security.kerberos.login.principal", "ferry@A.TEST")]).expect("cache");
        assert_eq!(ok.kerberos.source.and_then(|s| s.keytab), None);
    }
}
