//! The high-availability keys (`high-availability.*`): whether the job
//! holds a lease (so a `ferry standby` can take it over and a stale active
//! fences itself), where the lease lives, and its timing. Validated into
//! [`HaConfig`]; the lease protocol itself is in [`crate::lease`].

use std::time::Duration;

use super::error::ConfigError;
use super::ha_kubernetes::KubernetesHa;
use super::job::JobConfig;
use super::map::Config;
use super::option::{ConfigOption, ValueError};
use super::parse::{self, format_duration};
use super::section::Section;
use super::spec::{KeyOrigin::Flink, ValueKind};
use super::zookeeper::ZooKeeperConfig;
use crate::checkpoint::{JobId, StorageLocation};

/// The valid names for `high-availability.type`.
const HA_TYPE_NAMES: &[&str] = &["none", "lease", "zookeeper", "kubernetes"];

crate::config_section! {
    /// The high-availability keys.
    pub static HA_KEYS = Section::job("high-availability");
    /// `high-availability.type`.
    pub const HA_TYPE: ConfigOption<HaKind> = ConfigOption::new("high-availability.type", ValueKind::Enum(HA_TYPE_NAMES), ha_kind, print_ha_kind)
        .origin(Flink)
        .default_value("none")
        .aliases(&["high-availability"])
        .doc("none: one instance, no fencing. lease: the active instance renews a lease object in high-availability.storageDir; `ferry standby` takes over when it lapses, and an instance that lost it stops before its next checkpoint or row (docs/dr.md). zookeeper: the same lease, kept in znodes under high-availability.zookeeper.path.root on the quorum high-availability.zookeeper.quorum (docs/dr.md, \"ZooKeeper HA\"). kubernetes: the same lease in a coordination.k8s.io/v1 Lease object (kubernetes.* and high-availability.kubernetes.* keys; docs/dr.md, \"Kubernetes HA\").");
    /// `high-availability.storageDir`.
    pub const HA_STORAGE_DIR: ConfigOption<LeasePlace> = ConfigOption::new("high-availability.storageDir", ValueKind::Location, lease_place, print_lease_place)
        .origin(Flink)
        .derived("kudu:ferry_ha (Kudu sink), else job.checkpointsDirectory")
        .blank_means_default()
        .doc("Where the lease lives: kudu:<table> is that table on the sink cluster (created on first use; it shares the failure domain of the writes it fences, so a standby in the sink's region reaches it when the primary region is lost), a path or s3://… a directory (<dir>/<job-id>/_lease/). Every instance of the job must use the same place (docs/dr.md).");
    /// `high-availability.cluster-id`.
    pub const HA_CLUSTER_ID: ConfigOption<String> = ConfigOption::any_text("high-availability.cluster-id")
        .origin(Flink)
        .derived("job.name")
        .blank_means_default()
        .doc("With a high-availability.type: the job id (and a Kubernetes Lease object's name) is derived from it (as Flink's application mode does), so the active and its standbys agree on it. One per job: an instance finding the lease held by another job stops with exit code 2 (docs/dr.md).");
    /// `high-availability.lease-duration`.
    pub const HA_LEASE_DURATION: ConfigOption<Duration> = ConfigOption::duration("high-availability.lease-duration")
        .default_value("5 s")
        .doc("A standby takes over after the lease went this long without a renewal; the active stops writing a fifth of it earlier.");
    /// `high-availability.renew-interval`.
    pub const HA_RENEW_INTERVAL: ConfigOption<Duration> = ConfigOption::duration("high-availability.renew-interval")
        .default_value("1 s")
        .doc("How often the active renews its lease (at most a third of the lease duration).");
}

/// The table `high-availability.storageDir` names when not given and the
/// sink is Kudu.
pub const DEFAULT_LEASE_TABLE: &str = "ferry_ha";

/// The prefix of a lease table in `high-availability.storageDir`.
const TABLE_PREFIX: &str = "kudu:";

fn lease_place(value: &str) -> Result<LeasePlace, ValueError> {
    let trimmed = value.trim();
    let table = trimmed
        .get(..TABLE_PREFIX.len())
        .filter(|p| p.eq_ignore_ascii_case(TABLE_PREFIX))
        .map(|_| &trimmed[TABLE_PREFIX.len()..]);
    match table {
        Some(name)
            if name.is_empty() || name.starts_with('/') || name.contains(char::is_whitespace) =>
        {
            Err(ValueError::Invalid(format!(
                "'{name}' is not a table name (kudu:<table>, e.g. kudu:{DEFAULT_LEASE_TABLE})"
            )))
        }
        Some(name) => Ok(LeasePlace::SinkTable(name.to_string())),
        None => parse::location(value).map(LeasePlace::Store),
    }
}

fn print_lease_place(place: &LeasePlace) -> String {
    place.to_string()
}

/// Where the HA lease lives (`high-availability.storageDir`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeasePlace {
    /// A directory of a state store (local path, `s3://…`): the lease is
    /// `<dir>/<job-id>/_lease/`.
    Store(StorageLocation),
    /// A table on the sink cluster (`kudu:<table>`), opened by the sink's
    /// connector; the lease is its rows `<job-id>/_lease/…`.
    SinkTable(String),
}

impl std::fmt::Display for LeasePlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeasePlace::Store(location) => write!(f, "{location}"),
            LeasePlace::SinkTable(table) => write!(f, "{TABLE_PREFIX}{table}"),
        }
    }
}

fn ha_kind(value: &str) -> Result<HaKind, ValueError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "none" | "null" => Ok(HaKind::None),
        "lease" => Ok(HaKind::Lease),
        "zookeeper" => Ok(HaKind::Zookeeper),
        "kubernetes" => Ok(HaKind::Kubernetes),
        _ => Err(ValueError::NotOneOf(HA_TYPE_NAMES)),
    }
}

fn print_ha_kind(kind: &HaKind) -> String {
    match kind {
        HaKind::None => "none",
        HaKind::Lease => "lease",
        HaKind::Zookeeper => "zookeeper",
        HaKind::Kubernetes => "kubernetes",
    }
    .to_string()
}

/// `high-availability.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HaKind {
    /// One instance, no lease, no fencing.
    #[default]
    None,
    /// A lease object in the HA storage directory (see [`crate::lease`]).
    Lease,
    /// The same lease protocol on a ZooKeeper quorum (the `ferry-zk`
    /// crate), with [`HaConfig::zookeeper`].
    Zookeeper,
    /// The lease in a Kubernetes Lease object (the `ferry-kube` crate;
    /// [`KubernetesHa`]).
    Kubernetes,
}

impl HaKind {
    /// Whether the job holds a lease (any type but `none`): `ferry run`
    /// claims it, `ferry standby` waits for it.
    pub fn holds_lease(self) -> bool {
        !matches!(self, HaKind::None)
    }
}

/// The validated `high-availability.*` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HaConfig {
    /// `high-availability.type`.
    pub kind: HaKind,
    /// `high-availability.storageDir`, if given (else see
    /// [`super::JobConfig::ha_lease_place`]).
    pub storage_dir: Option<LeasePlace>,
    /// `high-availability.cluster-id`, if given (else `job.name`).
    pub cluster_id: Option<String>,
    /// `high-availability.lease-duration`.
    pub lease_duration: Duration,
    /// `high-availability.renew-interval`.
    pub renew_interval: Duration,
    /// The `high-availability.zookeeper.*` settings, with
    /// `high-availability.type zookeeper`.
    pub zookeeper: Option<ZooKeeperConfig>,
    /// How long after its last renewal the active may still write, when
    /// shorter than four fifths of the lease (Kubernetes' renew-deadline).
    pub renew_deadline: Option<Duration>,
    /// The Kubernetes settings (used with [`HaKind::Kubernetes`]).
    pub kubernetes: KubernetesHa,
}

impl HaConfig {
    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        let kind = keys.get(&HA_TYPE)?;
        let storage_dir = keys.get_optional(&HA_STORAGE_DIR)?;
        let cluster_id = keys.get_optional(&HA_CLUSTER_ID)?;
        let kubernetes = KubernetesHa::from_config(keys)?;
        if kind == HaKind::Kubernetes {
            // Flink's Kubernetes timing replaces the lease keys.
            return Ok(HaConfig {
                kind,
                storage_dir,
                cluster_id,
                lease_duration: kubernetes.lease_duration,
                renew_interval: kubernetes.retry_period,
                zookeeper: None,
                renew_deadline: Some(kubernetes.renew_deadline),
                kubernetes,
            });
        }
        let lease_duration = keys.get(&HA_LEASE_DURATION)?;
        let renew_interval = keys.get(&HA_RENEW_INTERVAL)?;
        let text = |key| keys.text(key).unwrap_or_default().to_string();
        if lease_duration < Duration::from_millis(500) {
            return Err(ConfigError::OutOfRange {
                key: HA_LEASE_DURATION.name(),
                value: text(&HA_LEASE_DURATION),
                expected: "must be at least 500 ms".to_string(),
            });
        }
        // Three renewals per lease: one slow store call does not fence.
        if renew_interval.is_zero() || renew_interval * 3 > lease_duration {
            return Err(ConfigError::OutOfRange {
                key: HA_RENEW_INTERVAL.name(),
                value: text(&HA_RENEW_INTERVAL),
                expected: format!(
                    "must be greater than 0 and at most a third of high-availability.lease-duration ({})",
                    format_duration(lease_duration)
                ),
            });
        }
        let zookeeper = match kind {
            HaKind::Zookeeper => Some(ZooKeeperConfig::from_config(keys)?),
            // Given without the type: checked with every section, unused.
            _ => None,
        };
        Ok(HaConfig {
            kind,
            storage_dir,
            cluster_id,
            lease_duration,
            renew_interval,
            zookeeper,
            renew_deadline: None,
            kubernetes,
        })
    }

    /// How long before the lease would lapse the active stops writing: a
    /// fifth of the lease duration, or more when a renew deadline says so.
    /// It absorbs clock-rate differences between the instances and the
    /// time from a fence check to the end of the write it let through
    /// (docs/dr.md, "Timing assumptions").
    pub fn safety_margin(&self) -> Duration {
        let fifth = self.lease_duration / 5;
        match self.renew_deadline {
            Some(deadline) => fifth.max(self.lease_duration.saturating_sub(deadline)),
            None => fifth,
        }
    }
}

/// The job id an HA job runs under, derived from its cluster id (as Flink's
/// application mode derives a fixed job id from `high-availability.cluster-id`),
/// so the active and its standbys agree on it without talking. 128-bit
/// FNV-1a: stable across builds and platforms.
pub fn ha_job_id(cluster_id: &str) -> JobId {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut hash = OFFSET;
    for byte in "ferry-ha:".bytes().chain(cluster_id.bytes()) {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    JobId::from_bytes(hash.to_be_bytes())
}

impl JobConfig {
    /// What the job replicates, in one line: source and sink (kind and
    /// clusters), tables, and where they go. Two configurations with one
    /// identity are one job (a restart may change any other key). Its lease
    /// records carry it, so two jobs given one cluster id are told apart.
    /// Long selections are cut, with a hash of the whole.
    pub fn identity(&self) -> String {
        const MAX: usize = 200;
        let side = |kind: &str, masters: &[String]| {
            let mut masters = masters.to_vec();
            masters.sort();
            match masters.is_empty() {
                true => kind.to_string(),
                false => format!("{kind} {}", masters.join(",")),
            }
        };
        let mut tables = self.tables.names.join(",");
        if let Some(pattern) = &self.tables.pattern {
            tables = format!("{tables} /{pattern}/").trim_start().to_string();
        }
        let mut text = format!(
            "{} -> {}, tables {tables}",
            side(self.source.as_str(), &self.source_master_addresses),
            side(self.sink.as_str(), &self.sink_master_addresses)
        );
        match (&self.sink_table, self.table_suffix.as_str()) {
            (Some(table), _) => text.push_str(&format!(" into {table}")),
            (None, "") => {}
            (None, suffix) => text.push_str(&format!(" into *{suffix}")),
        }
        if text.len() > MAX {
            let hash = crate::shard::stable_hash(text.as_bytes());
            let mut cut = MAX - 24;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text = format!("{}... #{hash:016x}", &text[..cut]);
        }
        text
    }
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

    #[test]
    fn defaults_are_off_with_five_second_leases() {
        let c = config(&[]).expect("valid");
        assert_eq!(c.ha.kind, HaKind::None);
        assert_eq!(c.ha.lease_duration, Duration::from_secs(5));
        assert_eq!(c.ha.renew_interval, Duration::from_secs(1));
        // A Kudu sink keeps the lease next to the writes it fences.
        assert_eq!(
            c.ha_lease_place(),
            LeasePlace::SinkTable(DEFAULT_LEASE_TABLE.to_string())
        );
        assert_eq!(c.ha_job_id(), ha_job_id("ferry-replication-t"));
    }

    #[test]
    fn lease_settings_and_refusals() {
        let c = config(&[
            ("high-availability.type", "lease"),
            ("high-availability.storageDir", "/tmp/ha"),
            ("high-availability.cluster-id", "orders-dr"),
            ("high-availability.lease-duration", "3 s"),
            ("high-availability.renew-interval", "500 ms"),
        ])
        .expect("valid");
        assert_eq!(c.ha.kind, HaKind::Lease);
        assert_eq!(c.ha_lease_place().to_string(), "/tmp/ha");
        assert!(matches!(c.ha_lease_place(), LeasePlace::Store(_)));
        assert_eq!(c.ha_job_id(), ha_job_id("orders-dr"));
        assert_ne!(ha_job_id("orders-dr"), ha_job_id("orders-dr2"));
        assert_eq!(c.ha.safety_margin(), Duration::from_millis(600));
        let again =
            JobConfig::from_named_pairs(c.effective_values().iter().map(|(k, v)| (*k, v.as_str())))
                .expect("round trip");
        assert_eq!(again, c);

        let err = config(&[("high-availability.type", "etcd")]).expect_err("enum");
        assert!(err.to_string().contains("high-availability.type"), "{err}");
        let err = config(&[("high-availability.renew-interval", "2 s")]).expect_err("too slow");
        assert!(err.to_string().contains("at most a third"), "{err}");
    }

    #[test]
    fn kubernetes_timing_maps_onto_the_lease_protocol() {
        let c = config(&[("high-availability.type", "kubernetes")]).expect("valid");
        assert_eq!(c.ha.kind, HaKind::Kubernetes);
        assert!(c.ha.kind.holds_lease() && !HaKind::None.holds_lease());
        // Flink's defaults: 15 s lease, renewed every 5 s; the 15 s renew
        // deadline leaves the usual fifth as the margin.
        assert_eq!(c.ha.lease_duration, Duration::from_secs(15));
        assert_eq!(c.ha.renew_interval, Duration::from_secs(5));
        assert_eq!(c.ha.safety_margin(), Duration::from_secs(3));
        assert_eq!(c.ha.kubernetes.namespace, "default");
        assert_eq!(c.ha.kubernetes.config_file, None);
        // A shorter renew deadline stops the holder earlier.
        let c = config(&[
            ("high-availability.type", "kubernetes"),
            ("kubernetes.namespace", "ferry"),
            ("kubernetes.config.file", "/etc/kube/config"),
            (
                "high-availability.kubernetes.leader-election.lease-duration",
                "6 s",
            ),
            (
                "high-availability.kubernetes.leader-election.renew-deadline",
                "3 s",
            ),
            (
                "high-availability.kubernetes.leader-election.retry-period",
                "1 s",
            ),
        ])
        .expect("valid");
        assert_eq!(c.ha.lease_duration, Duration::from_secs(6));
        assert_eq!(c.ha.renew_interval, Duration::from_secs(1));
        assert_eq!(c.ha.safety_margin(), Duration::from_secs(3));
        assert_eq!(
            c.ha.kubernetes.config_file.as_deref(),
            Some(std::path::Path::new("/etc/kube/config"))
        );
        let again =
            JobConfig::from_named_pairs(c.effective_values().iter().map(|(k, v)| (*k, v.as_str())))
                .expect("round trip");
        assert_eq!(again, c);
        for (key, bad, says) in [
            ("kubernetes.namespace", "Ferry_NS", "namespace name"),
            (
                "high-availability.kubernetes.leader-election.retry-period",
                "6 s",
                "at most a third",
            ),
            (
                "high-availability.kubernetes.leader-election.renew-deadline",
                "20 s",
                "at most the lease duration",
            ),
            (
                "high-availability.kubernetes.leader-election.renew-deadline",
                "5 s",
                "longer than the retry period",
            ),
            (
                "high-availability.kubernetes.leader-election.lease-duration",
                "500 ms",
                "at least 1 s",
            ),
        ] {
            let err =
                config(&[("high-availability.type", "kubernetes"), (key, bad)]).expect_err(bad);
            assert!(err.to_string().contains(key), "{err}");
            assert!(err.to_string().contains(says), "{err}");
        }
    }

    #[test]
    fn the_lease_place_is_a_sink_table_or_a_directory() {
        let table = |v: &str| {
            config(&[("high-availability.storageDir", v)])
                .expect("valid")
                .ha_lease_place()
        };
        assert_eq!(table("kudu:ha_x"), LeasePlace::SinkTable("ha_x".into()));
        assert_eq!(table("KUDU:ha_x"), LeasePlace::SinkTable("ha_x".into()));
        assert_eq!(table("kudu:ha_x").to_string(), "kudu:ha_x");
        assert_eq!(
            table("s3://b/ha").to_string(),
            "s3://b/ha",
            "an object store keeps today's lease"
        );
        for bad in ["kudu:", "kudu:/x", "kudu:a b"] {
            let err = config(&[("high-availability.storageDir", bad)]).expect_err(bad);
            assert!(
                err.to_string().contains("high-availability.storageDir"),
                "{err}"
            );
        }
        // A Kafka sink has no sink cluster: the checkpoints directory.
        let kafka = JobConfig::from_named_pairs([
            ("job.sourceMasterAddresses", "a:7051"),
            ("job.sinkType", "kafka"),
            ("job.tableName", "t"),
            ("job.checkpointsDirectory", "/tmp/chk"),
        ])
        .expect("a Kafka sink job");
        assert_eq!(
            kafka.ha_lease_place(),
            LeasePlace::Store(kafka.checkpoints_directory.clone())
        );
    }

    #[test]
    fn a_job_is_known_by_what_it_replicates() {
        let c = config(&[("job.tableSuffix", "_copy")]).expect("valid");
        assert_eq!(
            c.identity(),
            "kudu a:7051 -> kudu b:7051, tables t into *_copy"
        );
        // Settings other than what goes where leave it alone; the master
        // order does not count.
        let restarted = config(&[
            ("job.tableSuffix", "_copy"),
            ("job.discoveryIntervalSeconds", "700"),
            ("high-availability.cluster-id", "x"),
        ])
        .expect("valid");
        assert_eq!(restarted.identity(), c.identity());
        let of = |masters: &str, tables: &str| {
            JobConfig::from_named_pairs([
                ("job.sourceMasterAddresses", masters),
                ("job.sinkMasterAddresses", "b:7051"),
                ("job.tableName", tables),
                ("job.checkpointsDirectory", "/tmp/chk"),
            ])
            .expect("valid")
            .identity()
        };
        assert_eq!(of("m1:7051,m2:7051", "t"), of("m2:7051,m1:7051", "t"));
        // Another table, another job.
        assert_ne!(of("a:7051", "u"), of("a:7051", "t"));
        // A long selection is cut, with a hash of the whole that still
        // tells two selections apart.
        let names = |last: &str| {
            let list: Vec<String> = (0..100).map(|i| format!("table_{i}")).collect();
            of("a:7051", &format!("{},{last}", list.join(",")))
        };
        let (x, y) = (names("x"), names("y"));
        assert!(x.len() <= 200 && x.contains("... #"), "{x}");
        assert_ne!(x, y);
    }
}
