//! Disaster recovery with the real binary: warm standby with fencing,
//! planned and unplanned cutover drills, the reverse job from a cutover
//! report, `ferry verify`, state replication to a DR store and state on
//! an S3 server, and an outage of the lease's store that nobody gives up
//! on.

// Test code: a failed unwrap is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod continuous_verify;
mod cutover_drills;
mod drill;
mod failback;
mod failover_to;
mod from_cutover;
mod ha_kit;
mod kube_ha;
mod region_loss;
mod rewind;
mod s3_state;
mod shards;
mod standby;
mod standby_reads;
mod state_replication;
mod store_outage;
mod switchover_drill;
mod verify;
mod zookeeper_ha;

use std::sync::Arc;

use ferry_fixtures::process::FerryCommand;
use ferry_fixtures::Shared;
use ferry_testkit::MiniCluster;

/// `ferry` (the binary of this crate) with `FERRY_LOG=warn`.
fn ferry() -> FerryCommand {
    FerryCommand::new(env!("CARGO_BIN_EXE_ferry"))
}

static STANDBY: Shared<(MiniCluster, MiniCluster)> = Shared::new();
static VERIFY: Shared<(MiniCluster, MiniCluster)> = Shared::new();

/// The source and sink clusters (3 tablet servers each) the standby tests
/// share while they run (tables of their own).
fn standby_clusters() -> Arc<(MiniCluster, MiniCluster)> {
    STANDBY.get(ferry_fixtures::two_clusters)
}

/// The pair the `ferry verify` tests share while they run. Apart from the
/// standby tests' pair, as before: beside their busy 3-replica tables, on
/// a loaded machine, the planned cutover's reverse job once missed its
/// 60 s to copy one write.
fn verify_clusters() -> Arc<(MiniCluster, MiniCluster)> {
    VERIFY.get(ferry_fixtures::two_clusters)
}

/// How long the HA outage drills keep their coordination server away:
/// 20 s in the suite; `bench/ha-outage` runs them with
/// `FERRY_HA_OUTAGE_SECS=120` (the 2-minute drill of issue 32).
fn ha_outage() -> std::time::Duration {
    let secs = std::env::var("FERRY_HA_OUTAGE_SECS")
        .ok()
        .map(|v| {
            v.parse::<u64>()
                .unwrap_or_else(|_| panic!("FERRY_HA_OUTAGE_SECS={v}: not a number of seconds"))
        })
        .unwrap_or(20);
    std::time::Duration::from_secs(secs)
}
