//! ferry across the Kudu releases users run: the version pairs
//! 1.17.1 → 1.17.1, 1.17.1 → 1.18.1 (the DR side upgraded first) and
//! 1.18.1 → 1.18.1, each against real servers of both releases.
//!
//! Two clusters serve every test of the binary: one on 1.17.1 and one on
//! 1.18.1 (one tablet server each). A pair with the same release on both
//! sides replicates into another table of the same cluster. Which pairs
//! run is [`pairs`]' answer: every pair by default, or those named in
//! `FERRY_VERSION_PAIRS` (`1.17.1-1.18.1,1.18.1-1.18.1`).

// Test code: a failed unwrap is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod dr;
mod immutable;
mod non_unique;
mod pair_job;
mod replication;
mod schema;
mod sink_features;
mod tablet_metrics;
mod verify;

use std::sync::Arc;

use ferry_fixtures::process::FerryCommand;
use ferry_fixtures::Shared;
use ferry_testkit::{KuduVersion, MiniCluster};

/// The binary under test.
const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// `ferry` with `FERRY_LOG=warn`.
fn ferry() -> FerryCommand {
    FerryCommand::new(FERRY)
}

static KUDU_1_17: Shared<MiniCluster> = Shared::new();
static KUDU_1_18: Shared<MiniCluster> = Shared::new();

/// The shared cluster of `version` (tests use tables of their own).
fn kudu(version: KuduVersion) -> Arc<MiniCluster> {
    let slot = match version {
        KuduVersion::V1_17_1 => &KUDU_1_17,
        KuduVersion::V1_18_1 => &KUDU_1_18,
    };
    slot.get(|| {
        MiniCluster::builder()
            .version(version)
            .tservers(1)
            .start()
            .unwrap_or_else(|e| panic!("Kudu {version} cluster: {e}"))
    })
}

/// A source release and a sink release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pair {
    source: KuduVersion,
    sink: KuduVersion,
}

impl Pair {
    const ALL: [Pair; 3] = [
        Pair::new(KuduVersion::V1_17_1, KuduVersion::V1_17_1),
        Pair::new(KuduVersion::V1_17_1, KuduVersion::V1_18_1),
        Pair::new(KuduVersion::V1_18_1, KuduVersion::V1_18_1),
    ];

    const fn new(source: KuduVersion, sink: KuduVersion) -> Self {
        Pair { source, sink }
    }

    /// The source and sink clusters (the same one when the releases match).
    fn clusters(self) -> (Arc<MiniCluster>, Arc<MiniCluster>) {
        (kudu(self.source), kudu(self.sink))
    }

    /// `1.17.1-1.18.1`, for table names and messages.
    fn label(self) -> String {
        format!("{}-{}", self.source, self.sink)
    }

    /// A table name unique to this pair: `<base>_1171_1181`.
    fn table(self, base: &str) -> String {
        format!("{base}_{}", self.label().replace('.', "").replace('-', "_"))
    }
}

/// The pairs to run: `FERRY_VERSION_PAIRS` (comma-separated
/// `source-sink`), else all of them.
fn pairs() -> Vec<Pair> {
    let Ok(wanted) = std::env::var("FERRY_VERSION_PAIRS") else {
        return Pair::ALL.to_vec();
    };
    wanted
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (a, b) = s
                .trim()
                .split_once('-')
                .unwrap_or_else(|| panic!("FERRY_VERSION_PAIRS: '{s}' is not source-sink"));
            Pair::new(a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

#[test]
fn every_pair_names_two_releases_the_kit_runs() {
    let labels: Vec<String> = Pair::ALL.iter().map(|p| p.label()).collect();
    assert_eq!(labels, ["1.17.1-1.17.1", "1.17.1-1.18.1", "1.18.1-1.18.1"]);
    assert_eq!(Pair::ALL[1].table("t"), "t_1171_1181");
    assert!(!pairs().is_empty());
}

/// Each side reports the release it runs, and the client reads it: what
/// ferry asks before it relies on a feature.
#[test]
fn each_side_reports_its_release() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for pair in pairs() {
        let (source, sink) = pair.clusters();
        for (cluster, version) in [(&source, pair.source), (&sink, pair.sink)] {
            let releases = rt.block_on(async {
                let client = kudu_client::KuduClient::new(&cluster.master_addrs()).unwrap();
                client.cluster_releases().await.unwrap()
            });
            let oldest = releases.oldest().expect("a release");
            assert_eq!(oldest.to_string(), version.as_str(), "{}", pair.label());
            let tablet_metrics = kudu_client::Feature::TabletPrometheusMetrics;
            assert_eq!(
                releases.supports(tablet_metrics),
                version >= KuduVersion::V1_18_1,
                "{}",
                pair.label()
            );
        }
    }
}
