//! The tablet-server metrics reader on each release: the same write
//! counters from the JSON `/metrics` and, on 1.18.1, from
//! `/metrics_prometheus`; each server read from the endpoint its release
//! has (on the 1.17.1 → 1.18.1 pair: JSON on the source, Prometheus on the
//! sink); and quiet tablets proven from the Prometheus dump.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ferry_engine::checkpoint::WindowState;
use ferry_engine::time::SourceTime;
use ferry_fixtures::{key, nullable};
use ferry_kudu::quiet_tablets::{QuietTablets, Selection};
use ferry_kudu::tserver_metrics::{Endpoint, EndpointChoice, TableCounters, TserverMetrics};
use ferry_testkit::KuduVersion;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{DataType, KuduClient, KuduTable, Schema, TableBuilder};

use crate::{kudu, pairs};

/// The first id of the second range tablet.
const SPLIT: i64 = 1_000;

/// A table of two range tablets (`id < SPLIT`, the rest), one replica.
async fn create(client: &KuduClient, name: &str) -> KuduTable {
    let schema = Schema::new(vec![
        key("id", DataType::Int64),
        nullable("v", DataType::Int64),
    ])
    .expect("schema");
    let mut split = kudu_client::Row::new(&schema);
    split.set_i64("id", SPLIT).expect("split");
    let b = TableBuilder::new(name, schema)
        .set_range_partition_columns(&["id"])
        .add_split_row(split)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
    client.open_table(name).await.expect("open")
}

/// Applies `ops` (`kind`, first id, count) to `table`.
async fn write(client: &KuduClient, table: &KuduTable, ops: &[(&str, i64, i64)]) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for &(kind, first, n) in ops {
        for id in first..first + n {
            let mut r = table.new_row();
            r.set_i64("id", id).expect("id");
            let op = match kind {
                "insert" => Operation::insert(table, r),
                "upsert" => Operation::upsert(table, r),
                "update" => {
                    r.set_i64("v", 7).expect("v");
                    Operation::update(table, r)
                }
                "delete" => Operation::delete(table, r),
                other => panic!("no such write: {other}"),
            };
            s.apply(op).await.expect("apply");
        }
        // In order: an update or delete needs its row inserted first.
        s.flush().await.expect("flush");
    }
}

/// The writes of [`write`] in the counters' terms: 120 inserts over both
/// tablets, 30 upserts (10 of existing rows), 15 updates, 5 deletes.
const WRITES: [(&str, i64, i64); 5] = [
    ("insert", 0, 60),
    ("insert", SPLIT, 60),
    ("upsert", SPLIT + 50, 30),
    ("update", 0, 15),
    ("delete", 20, 5),
];
const WRITTEN: TableCounters = TableCounters {
    rows_inserted: 120,
    rows_upserted: 30,
    rows_updated: 15,
    rows_deleted: 5,
};

/// The endpoint a server of `version` is read from when Prometheus is
/// preferred.
fn expected_endpoint(version: KuduVersion) -> Endpoint {
    if version >= KuduVersion::V1_18_1 {
        Endpoint::Prometheus
    } else {
        Endpoint::Json
    }
}

/// Both sides of each pair, the same writes on each: every reader gives the
/// same counters, each server read from the endpoint its release has.
#[test]
fn each_server_gives_the_same_counters_from_the_endpoint_its_release_has() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for pair in pairs() {
        let (source, sink) = pair.clusters();
        for (side, cluster, version) in [("src", &source, pair.source), ("snk", &sink, pair.sink)] {
            let what = format!("{} {side} ({version})", pair.label());
            rt.block_on(async {
                let client = KuduClient::new(&cluster.master_addrs()).unwrap();
                let name = pair.table(&format!("tm_{side}"));
                let table = create(&client, &name).await;
                write(&client, &table, &WRITES).await;
                let timeout = Duration::from_secs(5);
                let mut json = TserverMetrics::new(client.clone(), timeout);
                let mut prom = TserverMetrics::new(client.clone(), timeout)
                    .with_endpoints(EndpointChoice::PrometheusWhereAvailable);
                let from_json = json.table_counters(&name).await.expect(&what);
                let from_prom = prom.table_counters(&name).await.expect(&what);
                assert_eq!(from_json.counters, WRITTEN, "{what}: JSON");
                assert_eq!(from_prom.counters, WRITTEN, "{what}: preferring Prometheus");
                let endpoints = |servers: &[(String, Endpoint)]| -> Vec<Endpoint> {
                    servers.iter().map(|(_, e)| *e).collect()
                };
                assert_eq!(endpoints(&from_json.servers), [Endpoint::Json], "{what}");
                assert_eq!(
                    endpoints(&from_prom.servers),
                    [expected_endpoint(version)],
                    "{what}"
                );
                client.delete_table(&name).await.expect("drop");
            });
        }
    }
}

/// The cluster's clock as a window bound.
async fn now(client: &KuduClient) -> SourceTime {
    SourceTime::from_raw(client.server_clock().await.expect("clock").raw())
}

async fn window(
    quiet: &QuietTablets,
    client: &KuduClient,
    table: &KuduTable,
    start: SourceTime,
) -> (Selection, SourceTime) {
    // The window ends after its start on the server's clock.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let end = now(client).await;
    let w = WindowState {
        start_timestamp: Some(start),
        end_timestamp: end,
    };
    (quiet.select(client, table, w, &|_: &[u8]| true).await, end)
}

/// On every release the pairs run, with Prometheus preferred: the first
/// two windows take readings (a baseline must be from before a window's
/// start, so from the window before the last), the third skips both quiet
/// tablets, and after a write to one tablet only the other is skipped;
/// each server is read from the endpoint its release has.
#[test]
fn quiet_tablets_are_proven_from_the_endpoint_each_release_has() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let versions: HashSet<KuduVersion> = pairs().iter().flat_map(|p| [p.source, p.sink]).collect();
    for version in versions {
        let cluster = kudu(version);
        rt.block_on(async {
            let client = KuduClient::new(&cluster.master_addrs()).unwrap();
            let name = format!("tm_quiet_{}", version.as_str().replace('.', ""));
            let table = create(&client, &name).await;
            write(&client, &table, &WRITES[..2]).await;
            let deadline = Instant::now() + Duration::from_secs(30);
            let tablets = client
                .tablets_in_range(&table, &[], &[], deadline)
                .await
                .expect("tablets");
            // Range tablets in key order: `low` holds the ids below SPLIT.
            let (low, high) = (tablets[0].tablet_id.clone(), tablets[1].tablet_id.clone());
            let quiet =
                QuietTablets::new(100).with_endpoints(EndpointChoice::PrometheusWhereAvailable);
            let expected = HashSet::from([expected_endpoint(version)]);
            let read_from =
                |s: &Selection| -> HashSet<Endpoint> { s.read_from.values().copied().collect() };

            let mut end = now(&client).await;
            for i in 0..2 {
                let (s, e) = window(&quiet, &client, &table, end).await;
                assert!(
                    s.skip.is_empty(),
                    "{version}: window {i} has no baseline yet"
                );
                assert_eq!(read_from(&s), expected, "{version}");
                end = e;
            }
            let (s, e) = window(&quiet, &client, &table, end).await;
            let both = HashSet::from([low.clone(), high.clone()]);
            assert_eq!(s.skip, both, "{version}: both tablets are quiet");
            assert_eq!(read_from(&s), expected, "{version}");

            write(&client, &table, &[("upsert", 5, 1)]).await;
            let (s, _) = window(&quiet, &client, &table, e).await;
            assert_eq!(
                s.skip,
                HashSet::from([high.clone()]),
                "{version}: the written tablet is scanned, the other skipped"
            );
            assert_eq!(read_from(&s), expected, "{version}");
            client.delete_table(&name).await.expect("drop");
        });
    }
}
