//! What the tests share: the two clusters, the two table layouts, the
//! options and a logged run.

use std::sync::Arc;
use std::time::Instant;

use ferry_fixtures::Shared;
use ferry_testkit::MiniCluster;
use ferry_verify::{verify, At, Method, Side, VerifyOptions, VerifyReport};
use kudu_client::{KuduClient, Schema, TableBuilder};

pub(crate) struct Clusters {
    pub(crate) source: MiniCluster,
    pub(crate) sink: MiniCluster,
}

static CLUSTERS: Shared<Clusters> = Shared::new();

pub(crate) fn clusters() -> (Arc<Clusters>, KuduClient, KuduClient) {
    let c = CLUSTERS.get(|| {
        // Memory flushed to disk within a second and rowsets left apart,
        // so the tablet servers can cut key ranges (SplitKeyRange cuts
        // at the bounds of flushed rowsets).
        let start = || {
            MiniCluster::builder()
                .tservers(3)
                .tserver_flag("--flush_threshold_secs=1")
                .tserver_flag("--enable_rowset_compaction=false")
                .start()
                .expect("cluster")
        };
        let source = std::thread::spawn(start);
        let sink = start();
        Clusters {
            source: source.join().expect("source cluster"),
            sink,
        }
    });
    let source = KuduClient::new(&c.source.master_addrs()).expect("source client");
    let sink = KuduClient::new(&c.sink.master_addrs()).expect("sink client");
    (c, source, sink)
}

/// Source layout: 3 hash buckets × 2 ranges split at `split`.
pub(crate) async fn create_source(client: &KuduClient, name: &str, schema: Schema, split: i64) {
    let mut at = schema.new_row();
    at.set_i64("id", split).unwrap();
    let b = TableBuilder::new(name, schema.clone())
        .add_hash_partitions(&["id"], 3, 0)
        .set_range_partition_columns(&["id"])
        .add_range_partition(schema.new_row(), at.clone())
        .add_range_partition(at, schema.new_row())
        .num_replicas(1);
    client.create_table(&b).await.expect("create source");
}

/// Sink layout: 2 hash buckets, no ranges (lines up with nothing).
pub(crate) async fn create_sink(client: &KuduClient, name: &str, schema: Schema) {
    let b = TableBuilder::new(name, schema)
        .add_hash_partitions(&["id"], 2, 7)
        .num_replicas(1);
    client.create_table(&b).await.expect("create sink");
}

pub(crate) fn options(
    source: &KuduClient,
    source_table: &str,
    at: At,
    sink: &KuduClient,
    sink_table: &str,
) -> VerifyOptions {
    VerifyOptions::new(
        Side {
            client: source.clone(),
            table: source_table.into(),
            at,
        },
        Side {
            client: sink.clone(),
            table: sink_table.into(),
            at: At::Now,
        },
    )
}

pub(crate) async fn run(mut opts: VerifyOptions, method: Method) -> VerifyReport {
    opts.method = method;
    let started = Instant::now();
    let report = verify(opts).await.expect("verify");
    eprintln!("{method:?} verify took {:?}:\n{report}", started.elapsed());
    report
}
