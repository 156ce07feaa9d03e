//! Flink's ZooKeeper HA keys (`high-availability.zookeeper.*`), used with
//! `high-availability.type zookeeper`: where the quorum is, where under it
//! the lease lives, the client's timing, and Kerberos (SASL GSSAPI with
//! the `security.kerberos.login.*` login, Flink's `zookeeper.sasl.*` keys
//! and rule). Validated into
//! [`ZooKeeperConfig`]; the lease on ZooKeeper itself is the `ferry-zk`
//! crate (a [`crate::lease::LeaseBackend`]).

use std::path::PathBuf;
use std::time::Duration;

use super::error::ConfigError;
use super::map::Config;
use super::option::{ConfigOption, ValueError};
use super::section::Section;
use super::security::{LOGIN_CONTEXTS, LOGIN_KEYTAB, LOGIN_PRINCIPAL};
use super::spec::{KeyOrigin::Flink, ValueKind};

crate::choice! {
    /// `high-availability.zookeeper.client.acl`: the ACL of the znodes
    /// ferry creates.
    pub enum ZooKeeperAcl {
        /// Anyone may read and write them (ZooKeeper's OPEN_ACL_UNSAFE).
        Open = "open",
        /// Only the authenticated creator may (CREATOR_ALL_ACL; needs an
        /// authenticated session, e.g. SASL).
        Creator = "creator",
    }
}

crate::config_section! {
    /// The ZooKeeper HA keys.
    pub static HA_ZOOKEEPER_KEYS = Section::job("high-availability.zookeeper");
    /// `high-availability.zookeeper.quorum`.
    pub const ZK_QUORUM: ConfigOption<String> = ConfigOption::new("high-availability.zookeeper.quorum", ValueKind::Text, quorum, String::clone)
        .origin(Flink)
        .derived("none; required with high-availability.type zookeeper")
        .doc("The ZooKeeper servers, comma-separated host:port (a ZooKeeper connect string without a chroot).");
    /// `high-availability.zookeeper.path.root`.
    pub const ZK_PATH_ROOT: ConfigOption<String> = ConfigOption::new("high-availability.zookeeper.path.root", ValueKind::Text, root_path, String::clone)
        .origin(Flink)
        .default_value("/flink")
        .doc("The znode under which HA jobs live: the lease of a job is <root>/<cluster-id>/<job-id>/lease/seq-<k> (docs/dr.md, \"ZooKeeper HA\").");
    /// `high-availability.zookeeper.client.session-timeout`.
    pub const ZK_SESSION_TIMEOUT: ConfigOption<Duration> = ConfigOption::duration("high-availability.zookeeper.client.session-timeout")
        .origin(Flink)
        .default_value("1 min")
        .doc("The ZooKeeper session timeout asked for (the server may clamp it); an expired session is replaced by a new one. The lease does not depend on it: it lives in persistent znodes, fenced by generation.");
    /// `high-availability.zookeeper.client.connection-timeout`.
    pub const ZK_CONNECTION_TIMEOUT: ConfigOption<Duration> = ConfigOption::duration("high-availability.zookeeper.client.connection-timeout")
        .origin(Flink)
        .default_value("15 s")
        .doc("How long connecting to the quorum, or one lease read or write, may take before it counts as failed.");
    /// `high-availability.zookeeper.client.retry-wait`.
    pub const ZK_RETRY_WAIT: ConfigOption<Duration> = ConfigOption::duration("high-availability.zookeeper.client.retry-wait")
        .origin(Flink)
        .default_value("5 s")
        .doc("Pause between attempts to connect to the quorum.");
    /// `high-availability.zookeeper.client.max-retry-attempts`.
    pub const ZK_MAX_RETRY_ATTEMPTS: ConfigOption<u32> = ConfigOption::count_or_zero("high-availability.zookeeper.client.max-retry-attempts")
        .origin(Flink)
        .default_value("3")
        .doc("Further attempts to connect after a failed one before a lease read or write fails (the HA loop tries again later).");
    /// `high-availability.zookeeper.client.acl`.
    pub const ZK_ACL: ConfigOption<ZooKeeperAcl> = ConfigOption::choice("high-availability.zookeeper.client.acl")
        .origin(Flink)
        .default_value("open")
        .doc("ACL of the znodes ferry creates: open (anyone) or creator (only the authenticated creator; needs an authenticated session such as SASL).");
    /// `zookeeper.sasl.disable`.
    pub const ZK_SASL_DISABLE: ConfigOption<bool> = ConfigOption::flag("zookeeper.sasl.disable")
        .origin(Flink)
        .default_value("false")
        .doc("true: never authenticate to ZooKeeper, even when security.kerberos.login.contexts names the ZooKeeper login context. false (Flink's default): SASL GSSAPI when it does (docs/security.md, \"ZooKeeper\").");
    /// `zookeeper.sasl.service-name`.
    pub const ZK_SASL_SERVICE_NAME: ConfigOption<String> = ConfigOption::text("zookeeper.sasl.service-name")
        .origin(Flink)
        .default_value("zookeeper")
        .doc("Service name of the ZooKeeper servers' Kerberos principals: <name>/<host>@REALM, <host> as written in high-availability.zookeeper.quorum.");
    /// `zookeeper.sasl.login-context-name`.
    pub const ZK_SASL_LOGIN_CONTEXT_NAME: ConfigOption<String> = ConfigOption::text("zookeeper.sasl.login-context-name")
        .origin(Flink)
        .default_value("Client")
        .doc("The login context of the ZooKeeper client: when security.kerberos.login.contexts names it, the ZooKeeper session authenticates with the security.kerberos.login.* login.");
}

/// Why a login context other than ZooKeeper's is refused.
const OTHER_CONTEXT: &str = "ferry gives the Kerberos login to its Kudu clusters always and to \
     ZooKeeper through the context named by zookeeper.sasl.login-context-name (Client); other \
     contexts (e.g. KafkaClient: a Kafka connector takes its own SASL properties) have no meaning here";

fn quorum(value: &str) -> Result<String, ValueError> {
    let servers: Vec<&str> = value.split(',').map(str::trim).collect();
    for server in &servers {
        let port = server
            .rsplit_once(':')
            .map(|(host, port)| (host, port.parse::<u16>()));
        match port {
            Some((host, Ok(p))) if !host.is_empty() && p > 0 && !host.contains('/') => {}
            _ => {
                return Err(ValueError::Invalid(format!(
                    "'{server}' is not host:port (comma-separated ZooKeeper servers, e.g. zk1:2181,zk2:2181)"
                )))
            }
        }
    }
    Ok(servers.join(","))
}

fn root_path(value: &str) -> Result<String, ValueError> {
    let path = value.trim().trim_end_matches('/');
    let bad = !value.trim().starts_with('/')
        || path
            .split('/')
            .skip(1)
            .any(|part| part.is_empty() || part == "." || part == "..")
        || path.contains(char::is_whitespace);
    if bad {
        return Err(ValueError::Invalid(
            "expected an absolute znode path such as /flink".to_string(),
        ));
    }
    Ok(if path.is_empty() { "/" } else { path }.to_string())
}

/// The validated `high-availability.zookeeper.*` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZooKeeperConfig {
    /// `high-availability.zookeeper.quorum` (`host:port,host:port`).
    pub quorum: String,
    /// `high-availability.zookeeper.path.root` (absolute, no trailing `/`).
    pub root: String,
    /// `high-availability.zookeeper.client.session-timeout`.
    pub session_timeout: Duration,
    /// `high-availability.zookeeper.client.connection-timeout`.
    pub connection_timeout: Duration,
    /// `high-availability.zookeeper.client.retry-wait`.
    pub retry_wait: Duration,
    /// `high-availability.zookeeper.client.max-retry-attempts`.
    pub max_retry_attempts: u32,
    /// `high-availability.zookeeper.client.acl`.
    pub acl: ZooKeeperAcl,
    /// Kerberos (SASL GSSAPI) to the quorum; `None`: the session is not
    /// authenticated.
    pub sasl: Option<ZooKeeperSasl>,
}

/// How the ZooKeeper session authenticates: SASL GSSAPI with the
/// `security.kerberos.login.*` login.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZooKeeperSasl {
    /// `zookeeper.sasl.service-name`: the servers are
    /// `<service_name>/<host>@REALM`.
    pub service_name: String,
    /// `security.kerberos.login.principal`.
    pub principal: String,
    /// `security.kerberos.login.keytab`; `None`: the ticket cache.
    pub keytab: Option<PathBuf>,
}

impl ZooKeeperConfig {
    /// Reads the keys; the quorum is required (called with
    /// `high-availability.type zookeeper`).
    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        Ok(ZooKeeperConfig {
            quorum: keys.get(&ZK_QUORUM)?,
            root: keys.get(&ZK_PATH_ROOT)?,
            session_timeout: keys.get(&ZK_SESSION_TIMEOUT)?,
            connection_timeout: keys.get(&ZK_CONNECTION_TIMEOUT)?,
            retry_wait: keys.get(&ZK_RETRY_WAIT)?,
            max_retry_attempts: keys.get(&ZK_MAX_RETRY_ATTEMPTS)?,
            acl: keys.get(&ZK_ACL)?,
            sasl: sasl(keys)?,
        })
    }

    /// The znode of one job's lease: `<root>/<cluster-id>/<job-id>/lease`.
    pub fn lease_path(&self, cluster_id: &str, job: &crate::checkpoint::JobId) -> String {
        let root = self.root.trim_end_matches('/');
        format!("{root}/{cluster_id}/{job}/lease")
    }
}

/// Flink's rule: SASL when not disabled and the login is given to the
/// ZooKeeper client's login context.
fn sasl(keys: &Config) -> Result<Option<ZooKeeperSasl>, ConfigError> {
    let context = keys.get(&ZK_SASL_LOGIN_CONTEXT_NAME)?;
    let contexts = keys.get_optional(&LOGIN_CONTEXTS)?.unwrap_or_default();
    let mut given = false;
    for name in contexts.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name != context {
            return Err(ConfigError::Unsupported {
                key: LOGIN_CONTEXTS.name(),
                value: contexts.clone(),
                reason: OTHER_CONTEXT,
            });
        }
        given = true;
    }
    if !given || keys.get(&ZK_SASL_DISABLE)? {
        return Ok(None);
    }
    let Some(principal) = keys.get_optional(&LOGIN_PRINCIPAL)? else {
        return Err(ConfigError::InvalidValue {
            key: LOGIN_CONTEXTS.name(),
            value: contexts,
            reason: format!(
                "it gives the Kerberos login to ZooKeeper, but there is none: set {} and {}",
                LOGIN_PRINCIPAL.name(),
                LOGIN_KEYTAB.name()
            ),
        });
    };
    Ok(Some(ZooKeeperSasl {
        service_name: keys.get(&ZK_SASL_SERVICE_NAME)?,
        principal,
        keytab: keys.get_optional(&LOGIN_KEYTAB)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HaKind, JobConfig};

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

    #[test]
    fn zookeeper_needs_a_quorum_and_takes_flinks_defaults() {
        let err = config(&[("high-availability.type", "zookeeper")]).expect_err("no quorum");
        assert!(
            err.to_string()
                .contains("high-availability.zookeeper.quorum"),
            "{err}"
        );
        let c = config(&[
            ("high-availability.type", "zookeeper"),
            ("high-availability.zookeeper.quorum", "zk1:2181, zk2:2181"),
            ("high-availability.cluster-id", "orders"),
        ])
        .expect("valid");
        assert_eq!(c.ha.kind, HaKind::Zookeeper);
        let zk = c.ha.zookeeper.clone().expect("zookeeper settings");
        assert_eq!(zk.quorum, "zk1:2181,zk2:2181");
        assert_eq!(zk.root, "/flink");
        assert_eq!(zk.session_timeout, Duration::from_secs(60));
        assert_eq!(zk.connection_timeout, Duration::from_secs(15));
        assert_eq!(zk.retry_wait, Duration::from_secs(5));
        assert_eq!(zk.max_retry_attempts, 3);
        assert_eq!(zk.acl, ZooKeeperAcl::Open);
        assert_eq!(zk.sasl, None);
        let job = c.ha_job_id();
        assert_eq!(
            zk.lease_path("orders", &job),
            format!("/flink/orders/{job}/lease")
        );
        // Without the type, the keys are checked but not used.
        let none = config(&[("high-availability.zookeeper.quorum", "zk1:2181")]).expect("valid");
        assert_eq!(none.ha.zookeeper, None);
    }

    #[test]
    fn bad_quorums_roots_and_acls_name_their_key() {
        for (key, bad) in [
            ("high-availability.zookeeper.quorum", "zk1"),
            ("high-availability.zookeeper.quorum", "zk1:2181,"),
            ("high-availability.zookeeper.quorum", "zk1:2181/chroot"),
            ("high-availability.zookeeper.quorum", "zk1:http"),
            ("high-availability.zookeeper.path.root", "flink"),
            ("high-availability.zookeeper.path.root", "/a//b"),
            ("high-availability.zookeeper.path.root", "/a/../b"),
            ("high-availability.zookeeper.client.acl", "world"),
            ("high-availability.zookeeper.client.session-timeout", "soon"),
        ] {
            let err = config(&[
                ("high-availability.type", "zookeeper"),
                ("high-availability.zookeeper.quorum", "zk1:2181"),
                (key, bad),
            ])
            .expect_err(bad);
            assert!(err.to_string().contains(key), "{bad}: {err}");
        }
        let c = config(&[
            ("high-availability.type", "zookeeper"),
            ("high-availability.zookeeper.quorum", "zk1:2181"),
            ("high-availability.zookeeper.path.root", "/ha/ferry/"),
            ("high-availability.zookeeper.client.acl", "CREATOR"),
        ])
        .expect("valid");
        let zk = c.ha.zookeeper.expect("settings");
        assert_eq!(zk.root, "/ha/ferry");
        assert_eq!(zk.acl, ZooKeeperAcl::Creator);
    }

    fn keytab() -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("ferry-cfg-zk-{}.keytab", std::process::id()));
        std::fs::write(&path, b"not read here").expect("write keytab");
        path
    }

    #[test]
    fn sasl_follows_flinks_login_contexts() {
        let keytab = keytab();
        let keytab_text = keytab.to_str().expect("utf-8 path");
        let base = [
            ("high-availability.type", "zookeeper"),
            ("high-availability.zookeeper.quorum", "zk1:2181"),
            ("security.kerberos.login.principal", "ferry@A.TEST"),
            ("security.kerberos.login.keytab", keytab_text),
        ];
        let with = |extra: &[(&str, &str)]| {
            let mut pairs = base.to_vec();
            pairs.extend_from_slice(extra);
            config(&pairs).map(|c| c.ha.zookeeper.expect("zookeeper settings").sasl)
        };
        // A login alone is the Kudu clusters'; ZooKeeper gets it through
        // its login context, as in Flink.
        assert_eq!(with(&[]).expect("valid"), None);
        let sasl = with(&[("security.kerberos.login.contexts", "Client")])
            .expect("valid")
            .expect("SASL");
        assert_eq!(sasl.principal, "ferry@A.TEST");
        assert_eq!(sasl.keytab.as_deref(), Some(keytab.as_path()));
        assert_eq!(sasl.service_name, "zookeeper");
        let sasl = with(&[
            ("security.kerberos.login.contexts", "ZkClient"),
            ("zookeeper.sasl.login-context-name", "ZkClient"),
            ("zookeeper.sasl.service-name", "zk"),
        ])
        .expect("valid")
        .expect("SASL");
        assert_eq!(sasl.service_name, "zk");
        let off = with(&[
            ("security.kerberos.login.contexts", "Client"),
            ("zookeeper.sasl.disable", "true"),
        ]);
        assert_eq!(off.expect("valid"), None);
        let _ = std::fs::remove_file(&keytab);
    }

    #[test]
    fn sasl_without_a_login_or_for_other_contexts_is_refused_by_name() {
        let err = config(&[
            ("high-availability.type", "zookeeper"),
            ("high-availability.zookeeper.quorum", "zk1:2181"),
            ("security.kerberos.login.contexts", "Client"),
        ])
        .expect_err("no login");
        let text = err.to_string();
        assert!(text.contains("security.kerberos.login.contexts"), "{text}");
        assert!(text.contains("security.kerberos.login.principal"), "{text}");
        let err = config(&[
            ("high-availability.type", "zookeeper"),
            ("high-availability.zookeeper.quorum", "zk1:2181"),
            ("security.kerberos.login.contexts", "Client,KafkaClient"),
        ])
        .expect_err("KafkaClient");
        let text = err.to_string();
        assert!(
            text.contains("'security.kerberos.login.contexts=Client,KafkaClient' is not supported"),
            "{text}"
        );
        for (key, value) in [
            ("zookeeper.sasl.disable", "maybe"),
            ("zookeeper.sasl.service-name", " "),
        ] {
            let err = config(&[
                ("high-availability.type", "zookeeper"),
                ("high-availability.zookeeper.quorum", "zk1:2181"),
                (key, value),
            ])
            .expect_err(key);
            assert!(err.to_string().contains(key), "{err}");
        }
    }
}
