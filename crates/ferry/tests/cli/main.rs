//! The `ferry` binary's command line: usage errors, `failover --dry-run`
//! and `--report`, fatal start-up errors and SIGTERM of `ferry run`, the
//! keys that change how rows are read and written, the deploy kit's
//! manifests and configurations (`deploy_kit`), the liveness and readiness
//! probes of a lease holder and a waiting instance (`probes`). No server,
//! or one small Kudu cluster.

// Test code: a failed unwrap is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod config_keys;
mod deploy_kit;
mod failover_dry_run;
mod failover_report;
mod probes;
mod run_fatal_errors;
mod validation;

use std::sync::Arc;

use ferry_fixtures::process::FerryCommand;
use ferry_fixtures::Shared;
use ferry_testkit::MiniCluster;

/// `ferry` (the binary of this crate) with `FERRY_LOG=warn`.
fn ferry() -> FerryCommand {
    FerryCommand::new(env!("CARGO_BIN_EXE_ferry"))
}

static CLUSTER: Shared<MiniCluster> = Shared::new();

/// The 1-tablet-server cluster the tests that need one share while they
/// run; each uses its own tables and checkpoint directory.
fn cluster() -> Arc<MiniCluster> {
    CLUSTER.get(|| MiniCluster::builder().tservers(1).start().expect("cluster"))
}
