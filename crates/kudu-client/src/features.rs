//! What a cluster's servers can do: their Kudu release (each tablet server
//! reports `software_version` when it registers with the master) and the
//! table and write features that came with each release.
//!
//! Requests still carry Kudu's per-RPC `required_feature_flags`, so a
//! server that lacks one refuses the call; this module lets a caller ask
//! first — before a copy starts — and name the release a feature needs.

use std::fmt;
use std::str::FromStr;

/// A Kudu release number, e.g. `1.18.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KuduRelease {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch version.
    pub patch: u32,
}

impl KuduRelease {
    /// A release from its three numbers.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        KuduRelease {
            major,
            minor,
            patch,
        }
    }

    /// The release in a server's `software_version`
    /// (`kudu 1.18.1 (rev 3a9f…)`, `1.19.0-SNAPSHOT`), if it has one.
    /// Vendor builds append their own numbers (`1.17.0.7.2.18.0-123`):
    /// the first three count.
    pub fn from_software_version(text: &str) -> Option<Self> {
        text.split_whitespace().find_map(|word| {
            let numbers = word.split('-').next()?;
            let mut parts = numbers.split('.').map(|p| p.parse::<u32>().ok());
            let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
            Some(KuduRelease::new(major, minor, patch))
        })
    }
}

impl FromStr for KuduRelease {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("'{s}' is not a Kudu release (major.minor.patch)");
        let mut parts = s.split('.');
        let mut next =
            || -> Result<u32, String> { parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad) };
        let release = KuduRelease::new(next()?, next()?, next()?);
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(release)
    }
}

impl fmt::Display for KuduRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A table or write feature that arrived with a Kudu release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Feature {
    /// Immutable columns (KUDU-3353) and UPSERT_IGNORE.
    ImmutableColumns,
    /// Non-unique primary keys: the hidden `auto_incrementing_id` key
    /// column (KUDU-1945).
    NonUniquePrimaryKeys,
    /// UPSERT / UPSERT_IGNORE that name an explicit `auto_incrementing_id`
    /// and advance the tablet's counter past it. Shipped with 1.17.0 (the
    /// server change was taken into the 1.17 branch before its release;
    /// Kudu's own docs still say UPSERT is unsupported on such tables, and
    /// 1.18.0's notes announce the backup and restore built on it). Real
    /// 1.17.1 and 1.18.1 tablet servers store the id as given and count on
    /// past it, across restarts and leader changes.
    UpsertAutoIncrementingId,
    /// Tablet-level metrics in `/metrics_prometheus` (KUDU-3563).
    TabletPrometheusMetrics,
}

impl Feature {
    /// Every feature this client knows.
    pub const ALL: [Feature; 4] = [
        Feature::ImmutableColumns,
        Feature::NonUniquePrimaryKeys,
        Feature::UpsertAutoIncrementingId,
        Feature::TabletPrometheusMetrics,
    ];

    /// The first release that has it.
    pub fn since(self) -> KuduRelease {
        match self {
            Feature::ImmutableColumns
            | Feature::NonUniquePrimaryKeys
            | Feature::UpsertAutoIncrementingId => KuduRelease::new(1, 17, 0),
            Feature::TabletPrometheusMetrics => KuduRelease::new(1, 18, 0),
        }
    }

    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Feature::ImmutableColumns => "immutable columns",
            Feature::NonUniquePrimaryKeys => "non-unique primary keys",
            Feature::UpsertAutoIncrementingId => "UPSERT with an explicit auto_incrementing_id",
            Feature::TabletPrometheusMetrics => "tablet metrics in /metrics_prometheus",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (Kudu {}+)", self.name(), self.since())
    }
}

/// One server's release as it reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerRelease {
    /// The server's permanent uuid.
    pub uuid: String,
    /// Its first RPC address (`host:port`), for messages.
    pub address: String,
    /// What it reported (`kudu 1.18.1 (rev …)`); empty if nothing.
    pub software_version: String,
    /// The release in it, if it could be read.
    pub release: Option<KuduRelease>,
}

impl ServerRelease {
    /// A server as it reported itself; `release` is read from
    /// `software_version` ([`KuduRelease::from_software_version`]).
    pub fn new(
        uuid: impl Into<String>,
        address: impl Into<String>,
        software_version: impl Into<String>,
    ) -> Self {
        let software_version = software_version.into();
        ServerRelease {
            uuid: uuid.into(),
            address: address.into(),
            release: KuduRelease::from_software_version(&software_version),
            software_version,
        }
    }

    /// Whether this server has `feature`. A server that did not say its
    /// release is assumed not to.
    pub fn supports(&self, feature: Feature) -> bool {
        self.release.is_some_and(|r| r >= feature.since())
    }
}

/// The releases of a cluster's tablet servers, from the leader master's
/// view ([`KuduClient::cluster_releases`](crate::KuduClient::cluster_releases)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ClusterReleases {
    /// One entry per registered tablet server, sorted by uuid.
    pub tablet_servers: Vec<ServerRelease>,
}

impl ClusterReleases {
    /// The releases of these servers.
    pub fn new(tablet_servers: Vec<ServerRelease>) -> Self {
        ClusterReleases { tablet_servers }
    }

    /// The oldest release among the servers (what every write can rely
    /// on), if any server said its release.
    pub fn oldest(&self) -> Option<KuduRelease> {
        self.tablet_servers.iter().filter_map(|s| s.release).min()
    }

    /// The servers that lack `feature`.
    pub fn lacking(&self, feature: Feature) -> Vec<&ServerRelease> {
        self.tablet_servers
            .iter()
            .filter(|s| !s.supports(feature))
            .collect()
    }

    /// Whether every tablet server has `feature` (and there is at least one).
    pub fn supports(&self, feature: Feature) -> bool {
        !self.tablet_servers.is_empty() && self.lacking(feature).is_empty()
    }

    /// `None` if every server has `feature`, else a sentence naming the
    /// feature, the release it needs and the servers that lack it.
    pub fn explain_missing(&self, feature: Feature) -> Option<String> {
        if self.supports(feature) {
            return None;
        }
        let lacking = self.lacking(feature);
        if lacking.is_empty() {
            return Some(format!(
                "{} needs Kudu {} or newer, and no tablet server is registered",
                feature.name(),
                feature.since()
            ));
        }
        let servers: Vec<String> = lacking
            .iter()
            .map(|s| match s.release {
                Some(r) => format!("{} runs {r}", s.address),
                None => format!("{} did not report its release", s.address),
            })
            .collect();
        Some(format!(
            "{} needs Kudu {} or newer on every tablet server; {}",
            feature.name(),
            feature.since(),
            servers.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(addr: &str, version: &str) -> ServerRelease {
        ServerRelease::new(addr, addr, version)
    }

    #[test]
    fn reads_the_release_in_a_software_version() {
        assert_eq!(
            KuduRelease::from_software_version("kudu 1.18.1 (rev 3a9f8c319ddb)"),
            Some(KuduRelease::new(1, 18, 1))
        );
        assert_eq!(
            KuduRelease::from_software_version("kudu 1.19.0-SNAPSHOT (rev x)"),
            Some(KuduRelease::new(1, 19, 0))
        );
        assert_eq!(
            KuduRelease::from_software_version("kudu 1.17.0.7.2.18.0-123 (rev z)"),
            Some(KuduRelease::new(1, 17, 0))
        );
        assert_eq!(KuduRelease::from_software_version(""), None);
        assert_eq!(KuduRelease::from_software_version("kudu dev"), None);
        assert!("1.18".parse::<KuduRelease>().is_err());
        assert!("1.18.1.2".parse::<KuduRelease>().is_err());
    }

    #[test]
    fn a_cluster_has_a_feature_only_when_every_server_has_it() {
        let mixed = ClusterReleases::new(vec![
            server("a:7050", "kudu 1.18.1 (rev x)"),
            server("b:7050", "kudu 1.17.1 (rev y)"),
        ]);
        assert_eq!(mixed.oldest(), Some(KuduRelease::new(1, 17, 1)));
        assert!(mixed.supports(Feature::ImmutableColumns));
        assert!(mixed.supports(Feature::UpsertAutoIncrementingId));
        assert!(!mixed.supports(Feature::TabletPrometheusMetrics));
        let why = mixed
            .explain_missing(Feature::TabletPrometheusMetrics)
            .unwrap();
        assert!(why.contains("1.18.0"), "{why}");
        assert!(why.contains("b:7050 runs 1.17.1"), "{why}");
        assert!(!why.contains("a:7050"), "{why}");
        assert_eq!(mixed.explain_missing(Feature::NonUniquePrimaryKeys), None);
        let unknown = ClusterReleases::new(vec![server("c:7050", "")]);
        assert!(!unknown.supports(Feature::ImmutableColumns));
        assert!(!ClusterReleases::default().supports(Feature::ImmutableColumns));
    }
}
