//! `ferry run` replicating between real Kudu clusters: the operations
//! surface (REST, Prometheus, web page, savepoints, drain check, session
//! mode), live tables and schema changes, quiet tablets, restarts the
//! operator sees, stop with drain, the write guard, kill -9 crash loops,
//! restores of an older state and throttling changed live.

// Test code: a failed unwrap is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod crash_loop;
mod history;
mod live_tables;
mod older_state;
mod operations;
mod quiet_tablets;
mod restarts;
mod scan_budget;
mod schema_changes;
mod shards;
mod stop_drain;
mod throttle;
mod write_guard;

use std::sync::Arc;

use ferry_fixtures::process::FerryCommand;
use ferry_fixtures::Shared;
use ferry_testkit::MiniCluster;

/// The binary under test.
const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// `ferry` with `FERRY_LOG=warn`.
fn ferry() -> FerryCommand {
    FerryCommand::new(FERRY)
}

static CLUSTER: Shared<MiniCluster> = Shared::new();
static CLUSTERS: Shared<(MiniCluster, MiniCluster)> = Shared::new();

/// The 1-tablet-server cluster that tests replicating a table into a copy
/// on the same cluster share while they run (tables of their own).
fn cluster() -> Arc<MiniCluster> {
    CLUSTER.get(|| MiniCluster::builder().tservers(1).start().expect("cluster"))
}

/// The source and sink clusters (3 tablet servers each) that tests of
/// live tables and schema changes share while they run (tables of their
/// own). Tests that stop, freeze or kill daemons start their own.
fn two_clusters() -> Arc<(MiniCluster, MiniCluster)> {
    CLUSTERS.get(ferry_fixtures::two_clusters)
}

/// The newest complete checkpoint of job `job_id` under `chk`, as a `-s`
/// argument.
async fn newest_checkpoint(chk: &std::path::Path, job_id: &str) -> String {
    use ferry_engine::checkpoint::{CheckpointStore, StorageLocation};
    let store = CheckpointStore::open_local(
        &StorageLocation::local(chk).expect("location"),
        std::num::NonZeroUsize::MIN,
    );
    let job = job_id.parse().expect("job id");
    let latest = store.latest_complete(&job).await.expect("list checkpoints");
    latest
        .checkpoint
        .expect("a complete checkpoint")
        .location
        .to_uri()
}
