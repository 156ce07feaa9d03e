//! What the version-pair tests of `ferry run`, `ferry verify`, schema
//! following and cutover share: each pair's test runs in a thread of its
//! own ([`for_each_pair`]), against a [`PairEnv`] — the pair's clusters,
//! a client of each, a folder for checkpoints — and replicates table `t`
//! of the source into `t_copy` of the sink (on the same cluster when both
//! sides run the same release).

use std::future::Future;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::process::FerryProcess;
use ferry_testkit::MiniCluster;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, TableBuilder};

use crate::Pair;

/// Bound on waiting for a job to catch up (a hang, not a timing check).
pub(crate) const CATCH_UP: Duration = Duration::from_secs(90);

/// The suffix of every sink table.
pub(crate) const SINK_SUFFIX: &str = "_copy";

/// One pair's clusters, clients and scratch folder.
pub(crate) struct PairEnv {
    pub(crate) pair: Pair,
    source_cluster: Arc<MiniCluster>,
    sink_cluster: Arc<MiniCluster>,
    pub(crate) source: KuduClient,
    pub(crate) sink: KuduClient,
    pub(crate) dir: tempfile::TempDir,
}

impl PairEnv {
    /// The pair's clusters (started if no test holds them) and clients.
    fn new(pair: Pair) -> PairEnv {
        let (source_cluster, sink_cluster) = pair.clusters();
        let source = KuduClient::new(&source_cluster.master_addrs()).expect("source client");
        let sink = KuduClient::new(&sink_cluster.master_addrs()).expect("sink client");
        PairEnv {
            pair,
            source_cluster,
            sink_cluster,
            source,
            sink,
            dir: tempfile::tempdir().expect("tmp"),
        }
    }

    /// The source masters, comma-separated.
    pub(crate) fn source_masters(&self) -> String {
        self.source_cluster.master_addrs_joined()
    }

    /// The sink masters, comma-separated.
    pub(crate) fn sink_masters(&self) -> String {
        self.sink_cluster.master_addrs_joined()
    }

    /// The checkpoints directory of this pair's jobs.
    pub(crate) fn chk(&self) -> PathBuf {
        self.dir.path().join("chk")
    }

    /// The options naming `table` → `table_copy` between the pair's
    /// clusters and the checkpoints directory (what `run`, `verify` and
    /// `cutover` share).
    pub(crate) fn job_options(&self, table: &str) -> Vec<String> {
        [
            "--job.sourceMasterAddresses",
            &self.source_masters(),
            "--job.sinkMasterAddresses",
            &self.sink_masters(),
            "--job.tableName",
            table,
            "--job.tableSuffix",
            SINK_SUFFIX,
            "--job.checkpointsDirectory",
            &self.chk().to_string_lossy(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// [`Self::job_options`] and what a job of these tests runs with: the
    /// sink table created, short intervals (`ferry cutover` takes them too,
    /// for the reverse job it prints).
    pub(crate) fn run_options(&self, table: &str) -> Vec<String> {
        let mut options = self.job_options(table);
        options.extend(
            [
                "--job.createTable",
                "true",
                "--job.discoveryIntervalSeconds",
                "1",
                "--job.checkpointingIntervalMillis",
                "300",
                "--job.tableDiscoveryIntervalSeconds",
                "1",
            ]
            .map(String::from),
        );
        options
    }

    /// `ferry run -p 2` replicating `table` with [`Self::run_options`] and
    /// `more`; started (its job id printed).
    pub(crate) fn start(&self, table: &str, more: &[&str]) -> FerryProcess {
        crate::ferry()
            .arg("run")
            .args(self.run_options(table))
            .args(["-p", "2"])
            .args(more)
            .free_ports()
            .start()
    }

    /// The newest complete checkpoint of job `id`, if any: its `-s`
    /// argument and whether the snapshot was complete in it.
    pub(crate) async fn newest_checkpoint(&self, id: &str) -> Option<(String, bool)> {
        let store = CheckpointStore::open_local(
            &StorageLocation::local(&self.chk()).expect("location"),
            NonZeroUsize::MIN,
        );
        let job: JobId = id.parse().expect("job id");
        let latest = store.latest_complete(&job).await.expect("list checkpoints");
        latest
            .checkpoint
            .map(|c| (c.location.to_uri(), c.state.last_end_timestamp.is_some()))
    }

    /// Waits until `ferry` has every change acknowledged so far.
    pub(crate) async fn wait_caught_up(&self, ferry: &mut FerryProcess, table: &str) {
        ferry_fixtures::live::wait_caught_up(
            &self.source,
            ferry.metrics(),
            &[table.to_string()],
            CATCH_UP,
        )
        .await;
        ferry.assert_running(&format!("{}: catching up", self.pair.label()));
    }

    /// Asserts that `table_copy` on the sink equals `table` on the source,
    /// cell by cell (an independent reader, not ferry's).
    pub(crate) async fn assert_equal(&self, table: &str, after: &str) {
        let sink_table = format!("{table}{SINK_SUFFIX}");
        let diff = compare_tables(&self.source, &self.sink, table, &sink_table).await;
        assert!(
            diff.is_equal(),
            "{}: {sink_table} != {table} after {after}: {diff}",
            self.pair.label()
        );
        assert!(
            diff.source_rows > 0,
            "{}: no rows compared",
            self.pair.label()
        );
    }
}

/// Runs `test` for every pair of [`crate::pairs`] at once, each in a
/// thread of its own (named after the pair) with a two-worker runtime;
/// panics naming the pairs whose test failed. Concurrent because each
/// pair's test mostly waits (windows, catch-up), so three pairs cost
/// about as long as one.
pub(crate) fn for_each_pair<F, Fut>(test: F)
where
    F: Fn(PairEnv) -> Fut + Sync,
    Fut: Future<Output = ()>,
{
    let test = &test;
    let failed: Vec<String> = std::thread::scope(|scope| {
        let running: Vec<_> = crate::pairs()
            .into_iter()
            .map(|pair| {
                let handle = std::thread::Builder::new()
                    .name(pair.label())
                    .spawn_scoped(scope, move || {
                        let env = PairEnv::new(pair);
                        // The test's future captures only the fields it
                        // uses: without these, a test that never names a
                        // cluster would drop the last handle and stop it
                        // under the other pairs.
                        let _held = (env.source_cluster.clone(), env.sink_cluster.clone());
                        ferry_fixtures::runtime().block_on(test(env));
                    })
                    .expect("thread");
                (pair, handle)
            })
            .collect();
        running
            .into_iter()
            .filter_map(|(pair, h)| h.join().is_err().then(|| pair.label()))
            .collect()
    });
    assert!(
        failed.is_empty(),
        "failed on the pairs {failed:?} (see above)"
    );
}

/// Creates `name` on `client` with the every-type schema, HASH(id)
/// `buckets` buckets, one replica.
pub(crate) async fn create_every_type_table(client: &KuduClient, name: &str, buckets: u32) {
    let b = TableBuilder::new(name, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], buckets, 0)
        .num_replicas(1);
    client
        .create_table(&b)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
}

/// Writes every row of `from` on `source` into `to` on `sink` (same
/// columns), value by value.
pub(crate) async fn copy_rows(
    source: &KuduClient,
    from: &str,
    sink: &KuduClient,
    to: &str,
) -> usize {
    let rows = ferry_fixtures::read_all(source, from).await;
    let table = sink.open_table(to).await.expect("open");
    let mut s = sink
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for values in rows.values() {
        let mut r = table.new_row();
        for (i, v) in values.iter().enumerate() {
            r.set(i, v).expect("value");
        }
        s.apply(Operation::insert(&table, r)).await.expect("apply");
    }
    s.flush().await.expect("flush");
    rows.len()
}
