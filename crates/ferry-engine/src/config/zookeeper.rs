//! Flink's ZooKeeper HA keys (`high-availability.zookeeper.*`), used with
//! `high-availability.type zookeeper`: where the quorum is, where under it
//! the lease lives, and the client's timing. Validated into
//! [`ZooKeeperConfig`]; the lease on ZooKeeper itself is the `ferry-zk`
//! crate (a [`crate::lease::LeaseBackend`]).

use std::time::Duration;

use super::error::ConfigError;
use super::map::Config;
use super::option::{AnyOption, ConfigOption, ValueError};
use super::section::Section;
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
        .default_value("true")
        .doc("Kerberos (SASL) to ZooKeeper is not supported yet: only true is accepted (Flink's default is false; docs/dr.md, \"ZooKeeper HA\").");
    /// `zookeeper.sasl.service-name`.
    pub const ZK_SASL_SERVICE_NAME: ConfigOption<String> = ConfigOption::text("zookeeper.sasl.service-name")
        .origin(Flink)
        .derived("none (SASL to ZooKeeper is not supported yet)")
        .doc("Refused with high-availability.type zookeeper: SASL to ZooKeeper is not supported yet.");
    /// `zookeeper.sasl.login-context-name`.
    pub const ZK_SASL_LOGIN_CONTEXT_NAME: ConfigOption<String> = ConfigOption::text("zookeeper.sasl.login-context-name")
        .origin(Flink)
        .derived("none (SASL to ZooKeeper is not supported yet)")
        .doc("Refused with high-availability.type zookeeper: SASL to ZooKeeper is not supported yet.");
}

/// Why the `zookeeper.sasl.*` keys are refused.
const NO_SASL: &str = "ferry's ZooKeeper client does not authenticate with SASL (Kerberos) yet; \
     use a quorum that admits unauthenticated clients to the lease's path and leave \
     zookeeper.sasl.* unset (docs/dr.md, \"ZooKeeper HA\")";

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
}

impl ZooKeeperConfig {
    /// Reads the keys; the quorum is required (called with
    /// `high-availability.type zookeeper`).
    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        let refuse = |key: &dyn AnyOption| ConfigError::Unsupported {
            key: key.name(),
            value: keys.text(key).unwrap_or_default().to_string(),
            reason: NO_SASL,
        };
        if !keys.get(&ZK_SASL_DISABLE)? {
            return Err(refuse(&ZK_SASL_DISABLE));
        }
        for key in [&ZK_SASL_SERVICE_NAME, &ZK_SASL_LOGIN_CONTEXT_NAME] {
            if keys.get_optional(key)?.is_some() {
                return Err(refuse(key));
            }
        }
        Ok(ZooKeeperConfig {
            quorum: keys.get(&ZK_QUORUM)?,
            root: keys.get(&ZK_PATH_ROOT)?,
            session_timeout: keys.get(&ZK_SESSION_TIMEOUT)?,
            connection_timeout: keys.get(&ZK_CONNECTION_TIMEOUT)?,
            retry_wait: keys.get(&ZK_RETRY_WAIT)?,
            max_retry_attempts: keys.get(&ZK_MAX_RETRY_ATTEMPTS)?,
            acl: keys.get(&ZK_ACL)?,
        })
    }

    /// The znode of one job's lease: `<root>/<cluster-id>/<job-id>/lease`.
    pub fn lease_path(&self, cluster_id: &str, job: &crate::checkpoint::JobId) -> String {
        let root = self.root.trim_end_matches('/');
        format!("{root}/{cluster_id}/{job}/lease")
    }
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

    #[test]
    fn sasl_to_zookeeper_is_refused_by_name() {
        for (key, value) in [
            ("zookeeper.sasl.disable", "false"),
            ("zookeeper.sasl.service-name", "zookeeper"),
            ("zookeeper.sasl.login-context-name", "Client"),
        ] {
            let err = config(&[
                ("high-availability.type", "zookeeper"),
                ("high-availability.zookeeper.quorum", "zk1:2181"),
                (key, value),
            ])
            .expect_err(key);
            let text = err.to_string();
            assert!(
                text.contains(&format!("'{key}={value}' is not supported")),
                "{text}"
            );
            assert!(text.contains("SASL"), "{text}");
        }
        // Flink configurations often say it explicitly.
        config(&[
            ("high-availability.type", "zookeeper"),
            ("high-availability.zookeeper.quorum", "zk1:2181"),
            ("zookeeper.sasl.disable", "true"),
        ])
        .expect("valid");
    }
}
