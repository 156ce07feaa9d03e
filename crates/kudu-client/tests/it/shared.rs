//! Clusters the modules share while their tests run (each test uses its
//! own tables): started by the first test that asks, stopped with the last
//! one holding them ([`Shared`]).

use std::sync::Arc;

use ferry_fixtures::Shared;
use ferry_testkit::MiniCluster;

static THREE_TSERVERS: Shared<MiniCluster> = Shared::new();
static ONE_TSERVER: Shared<MiniCluster> = Shared::new();

/// One master, three tablet servers, default flags: the catalog tests,
/// the reading scan tests and the every-op-type write test.
pub(crate) fn three_tservers() -> Arc<MiniCluster> {
    THREE_TSERVERS.get(|| {
        MiniCluster::builder()
            .tservers(3)
            .start()
            .expect("3-tablet-server cluster starts")
    })
}

/// One master, one tablet server, default flags: the typed-error write
/// tests, `apply_rows` and the RPC calls on a default cluster.
pub(crate) fn one_tserver() -> Arc<MiniCluster> {
    ONE_TSERVER.get(|| {
        MiniCluster::builder()
            .tservers(1)
            .start()
            .expect("1-tablet-server cluster starts")
    })
}
