//! Disaster recovery with the real binary: warm standby with fencing,
//! planned and unplanned cutover drills, the reverse job from a cutover
//! report, `ferry verify`, state replication to a DR store and state on
//! an S3 server.

mod cutover_drills;
mod from_cutover;
mod s3_state;
mod standby;
mod state_replication;
mod verify;

use std::sync::Arc;

use ferry_fixtures::process::FerryCommand;
use ferry_fixtures::Shared;
use ferry_testkit::MiniCluster;

/// `ferry` (the binary of this crate) with `FERRY_LOG=warn`.
fn ferry() -> FerryCommand {
    FerryCommand::new(env!("CARGO_BIN_EXE_ferry"))
}

static CLUSTERS: Shared<(MiniCluster, MiniCluster)> = Shared::new();

/// The source and sink clusters (3 tablet servers each) that the standby,
/// verify and state-replication tests share while they run (tables of
/// their own). Tests that kill a cluster or reuse table names start
/// their own.
fn two_clusters() -> Arc<(MiniCluster, MiniCluster)> {
    CLUSTERS.get(ferry_fixtures::two_clusters)
}
