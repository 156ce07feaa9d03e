//! How ferry authenticates to each Kudu cluster: SASL PLAIN (the default)
//! or Kerberos with a principal and a keytab or ticket cache, validated
//! from the `security.kerberos.login.*` and per-cluster keys into
//! [`KerberosConfig`]. The login itself is the Kudu client's business
//! (`kudu_client::Kerberos`); this only says who and with what.

use std::path::PathBuf;

use super::error::ConfigError;
use super::job::Values;
use super::key::ConfigKey;

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
    pub(super) fn from_values(v: &Values<'_>) -> Result<Self, ConfigError> {
        let use_ticket_cache = v.flag(ConfigKey::KerberosUseTicketCache)?;
        let cluster = |principal_key, keytab_key, service_key| {
            cluster(v, use_ticket_cache, principal_key, keytab_key, service_key)
        };
        Ok(KerberosConfig {
            source: cluster(
                ConfigKey::SourceKerberosPrincipal,
                ConfigKey::SourceKerberosKeytab,
                ConfigKey::SourceSaslProtocolName,
            )?,
            sink: cluster(
                ConfigKey::SinkKerberosPrincipal,
                ConfigKey::SinkKerberosKeytab,
                ConfigKey::SinkSaslProtocolName,
            )?,
            use_ticket_cache,
        })
    }

    pub(super) fn value_of(&self, key: ConfigKey) -> Option<String> {
        let path = |k: &Option<ClusterKerberos>| {
            k.as_ref()?.keytab.as_ref().map(|p| p.display().to_string())
        };
        Some(match key {
            // The login keys' effective values live in the per-cluster ones.
            ConfigKey::KerberosPrincipal | ConfigKey::KerberosKeytab => return None,
            ConfigKey::KerberosUseTicketCache => self.use_ticket_cache.to_string(),
            ConfigKey::SourceKerberosPrincipal => self.source.as_ref()?.principal.clone(),
            ConfigKey::SourceKerberosKeytab => path(&self.source)?,
            ConfigKey::SourceSaslProtocolName => self
                .source
                .as_ref()
                .map_or_else(|| "kudu".to_owned(), |k| k.service_name.clone()),
            ConfigKey::SinkKerberosPrincipal => self.sink.as_ref()?.principal.clone(),
            ConfigKey::SinkKerberosKeytab => path(&self.sink)?,
            ConfigKey::SinkSaslProtocolName => self
                .sink
                .as_ref()
                .map_or_else(|| "kudu".to_owned(), |k| k.service_name.clone()),
            _ => return None,
        })
    }
}

/// One cluster's login: its own keys, else the `security.kerberos.login.*`
/// ones. A keytab must be readable now, not at 3 a.m. when a ticket ends.
fn cluster(
    v: &Values<'_>,
    use_ticket_cache: bool,
    principal_key: ConfigKey,
    keytab_key: ConfigKey,
    service_key: ConfigKey,
) -> Result<Option<ClusterKerberos>, ConfigError> {
    let principal = v
        .optional(principal_key)
        .map(|p| (principal_key, p))
        .or_else(|| {
            v.optional(ConfigKey::KerberosPrincipal)
                .map(|p| (ConfigKey::KerberosPrincipal, p))
        });
    let keytab = v.optional(keytab_key).map(|k| (keytab_key, k)).or_else(|| {
        v.optional(ConfigKey::KerberosKeytab)
            .map(|k| (ConfigKey::KerberosKeytab, k))
    });
    let Some((_, principal)) = principal else {
        if let Some((key, value)) = keytab {
            return Err(ConfigError::InvalidValue {
                key,
                value: value.to_owned(),
                reason: format!(
                    "a keytab needs a principal: set {} (or {})",
                    principal_key.name(),
                    ConfigKey::KerberosPrincipal.name()
                ),
            });
        }
        return Ok(None);
    };
    let keytab = match keytab {
        Some((key, path)) => {
            let path = PathBuf::from(path.trim());
            if let Err(e) = std::fs::File::open(&path) {
                return Err(ConfigError::InvalidValue {
                    key,
                    value: path.display().to_string(),
                    reason: format!("cannot read the keytab: {e}"),
                });
            }
            Some(path)
        }
        None if use_ticket_cache => None,
        None => {
            return Err(ConfigError::InvalidValue {
                key: ConfigKey::KerberosUseTicketCache,
                value: "false".to_owned(),
                reason: format!(
                    "principal {} has no keytab: set {} (or {}), or allow the ticket cache",
                    principal.trim(),
                    keytab_key.name(),
                    ConfigKey::KerberosKeytab.name()
                ),
            })
        }
    };
    let service_name = v.required_value(service_key)?.trim().to_owned();
    Ok(Some(ClusterKerberos {
        principal: principal.trim().to_owned(),
        keytab,
        service_name,
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
