//! What the ZooKeeper lease tests share: a job's settings for a quorum,
//! its id, a lease record.

use ferry_engine::checkpoint::JobId;
use ferry_engine::config::{JobConfig, ZooKeeperConfig};
use ferry_engine::lease::LeaseRecord;

/// Timeouts of a test's sessions: the connection timeout and the session
/// timeout (a Kerberized session needs longer than a plain one).
pub(crate) struct Timeouts {
    pub(crate) connect: &'static str,
    pub(crate) session: &'static str,
}

/// The ZooKeeper settings of a job on `quorum`, with `extra` keys.
pub(crate) fn settings(
    quorum: &str,
    timeouts: Timeouts,
    extra: &[(&str, &str)],
) -> ZooKeeperConfig {
    let mut pairs = vec![
        ("job.sourceMasterAddresses", "a:7051"),
        ("job.sinkMasterAddresses", "b:7051"),
        ("job.tableName", "t"),
        ("job.checkpointsDirectory", "/unused"),
        ("high-availability.type", "zookeeper"),
        ("high-availability.zookeeper.quorum", quorum),
        (
            "high-availability.zookeeper.client.connection-timeout",
            timeouts.connect,
        ),
        ("high-availability.zookeeper.client.retry-wait", "100 ms"),
        ("high-availability.zookeeper.client.max-retry-attempts", "1"),
        (
            "high-availability.zookeeper.client.session-timeout",
            timeouts.session,
        ),
    ];
    pairs.extend_from_slice(extra);
    let config = JobConfig::from_named_pairs(pairs).expect("config");
    config.ha.zookeeper.expect("zookeeper settings")
}

pub(crate) fn job() -> JobId {
    "00112233445566778899aabbccddeeff".parse().expect("id")
}

pub(crate) fn record(seq: u64, generation: u64) -> LeaseRecord {
    LeaseRecord {
        seq,
        generation,
        owner: "test".to_string(),
        at_ms: 1,
        ..LeaseRecord::default()
    }
}
