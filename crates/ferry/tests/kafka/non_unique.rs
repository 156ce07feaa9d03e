//! A table with a non-unique primary key through Kafka and back, against a
//! real broker and real Kudu: `ferry run --job.sinkType kafka` writes
//! upsert-json records whose key is the full primary key, the hidden
//! `auto_incrementing_id` included, so rows that share `k` have records of
//! their own, and an update or a delete (a tombstone) lands on its row's
//! record; a Kafka → Kudu job applies the topic to a copy with the same
//! non-unique key, which then equals the source including the hidden ids.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferry_testkit::MiniCluster;
use kudu_client::write::{FlushMode, OpType, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, KuduClient, KuduTable, Schema, TableBuilder, Value};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;

const ID: &str = "auto_incrementing_id";
const TOPIC: &str = "nu.nu_events";
const PARTITIONS: i32 = 3;
const BOUND: Duration = Duration::from_secs(90);

/// `k INT32` as a non-unique primary key (the hidden id after it), `v`.
fn schema() -> Schema {
    Schema::new(vec![
        ferry_fixtures::key("k", DataType::Int32),
        ColumnSchema::builder(ID, DataType::Int64)
            .key(true)
            .auto_incrementing(true)
            .build()
            .unwrap(),
        ferry_fixtures::nullable("v", DataType::Int64),
    ])
    .unwrap()
}

/// Every row as (k, id) → v, read by a scan that projects the hidden id.
async fn rows(client: &KuduClient, name: &str) -> BTreeMap<(i32, i64), Option<i64>> {
    let table = client.open_table(name).await.unwrap();
    let mut scanner = client
        .scan_builder(&table)
        .projection(&["k", ID, "v"])
        .build()
        .unwrap();
    let mut out = BTreeMap::new();
    while let Some(batch) = scanner.next_batch().await.unwrap() {
        for view in batch.rows() {
            match view.to_values().unwrap().as_slice() {
                [Value::Int32(k), Value::Int64(id), v] => {
                    let v = match v {
                        Value::Int64(v) => Some(*v),
                        _ => None,
                    };
                    out.insert((*k, *id), v);
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }
    out
}

async fn apply(client: &KuduClient, t: &KuduTable, ops: Vec<(OpType, i32, Option<i64>, i64)>) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .unwrap();
    for (op, k, id, v) in ops {
        let mut r = t.new_row();
        r.set_i32("k", k).unwrap();
        if let Some(id) = id {
            r.set_i64(ID, id).unwrap();
        }
        if !op.is_delete() {
            r.set_i64("v", v).unwrap();
        }
        s.apply(Operation::new(t, op, r)).await.unwrap();
    }
    s.flush().await.unwrap();
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + BOUND;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_non_unique_key_table_round_trips_with_its_hidden_ids() {
    let kudu_start = std::thread::spawn(|| MiniCluster::builder().tservers(1).start().unwrap());
    let broker = crate::broker();
    let cluster = kudu_start.join().unwrap();
    let bootstrap = broker.bootstrap();
    let master = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).unwrap();
    for name in ["nu_events", "nu_events_copy"] {
        let b = TableBuilder::new(name, schema())
            .add_hash_partitions(&["k"], 2, 0)
            .num_replicas(1);
        client.create_table(&b).await.unwrap();
    }
    let t = client.open_table("nu_events").await.unwrap();
    let first = (0..60).map(|n| (OpType::Insert, n % 6, None, i64::from(n)));
    apply(&client, &t, first.collect()).await;

    let dir = tempfile::tempdir().unwrap();
    let common = |chk: &str| -> Vec<String> {
        [
            "--job.checkpointsDirectory",
            &dir.path().join(chk).to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "300",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let mut to_kafka: Vec<String> = [
        "--job.sourceMasterAddresses",
        &master,
        "--job.tableName",
        "nu_events",
        "--job.sinkType",
        "kafka",
        "--job.sinkBootstrapServers",
        &bootstrap,
        "--job.sinkTopic",
        "nu.{table}",
        "--job.sinkTopicPartitions",
        "3",
        "--job.sinkFormat",
        "upsert-json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    to_kafka.extend(common("chk-out"));
    let mut out = crate::run(&to_kafka, &[]);
    let mut from_kafka: Vec<String> = [
        "--job.sourceType",
        "kafka",
        "--job.sourceBootstrapServers",
        &bootstrap,
        "--job.sourceTopic",
        TOPIC,
        "--job.sourceFormat",
        "upsert-json",
        "--job.sinkMasterAddresses",
        &master,
        "--job.tableName",
        "nu_events_copy",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    from_kafka.extend(common("chk-in"));
    // The topic exists once the snapshot's records are in it.
    wait_until("the snapshot reached the topic", || {
        let bootstrap = bootstrap.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let c: BaseConsumer = ClientConfig::new()
                    .set("bootstrap.servers", &bootstrap)
                    .create()
                    .unwrap();
                c.fetch_metadata(Some(TOPIC), Duration::from_secs(5))
                    .is_ok_and(|m| m.topics().iter().any(|t| t.partitions().len() == 3))
            })
            .await
            .unwrap_or(false)
        }
    })
    .await;
    let mut back = crate::run(&from_kafka, &[]);

    // The changes below must come after the snapshot's time: a slow start
    // would otherwise snapshot rows already deleted, and their keys would
    // never reach the topic.
    let before = rows(&client, "nu_events").await;
    wait_until("the copy holds the snapshot", || {
        let client = client.clone();
        let before = before.clone();
        async move { rows(&client, "nu_events_copy").await == before }
    })
    .await;

    // Updates and deletes by the full key, and more inserts, while both
    // jobs run.
    let ops = before
        .keys()
        .enumerate()
        .filter_map(|(i, &(k, id))| match i % 5 {
            0 => Some((OpType::Delete, k, Some(id), 0)),
            1 => Some((OpType::Update, k, Some(id), -(i as i64))),
            _ => None,
        });
    let mut ops: Vec<_> = ops.collect();
    ops.extend((0..12).map(|n| (OpType::Insert, n % 6, None, 100 + i64::from(n))));
    apply(&client, &t, ops).await;
    let expected = rows(&client, "nu_events").await;
    wait_until("the copy equals the source, hidden ids included", || {
        let client = client.clone();
        let expected = expected.clone();
        async move { rows(&client, "nu_events_copy").await == expected }
    })
    .await;

    // Every record is keyed by the full key; a deleted row's tombstone is
    // keyed by its own id, and the last record of each key is its row.
    let records = tokio::task::spawn_blocking(move || {
        crate::read_topic(&bootstrap, TOPIC, PARTITIONS).records
    })
    .await
    .unwrap();
    let mut last: BTreeMap<(i32, i64), Option<i64>> = BTreeMap::new();
    for (key, value) in &records {
        let fields: BTreeSet<&str> = key
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(fields, BTreeSet::from(["k", ID]), "{key}");
        let full = (key["k"].as_i64().unwrap() as i32, key[ID].as_i64().unwrap());
        last.insert(full, value.as_ref().and_then(|v| v["v"].as_i64()));
    }
    let deleted: Vec<_> = before
        .keys()
        .filter(|k| !expected.contains_key(k))
        .collect();
    assert!(!deleted.is_empty());
    for key in deleted {
        assert_eq!(
            last.get(key),
            Some(&None),
            "{key:?}: its last record is a tombstone"
        );
    }
    for (key, v) in &expected {
        assert_eq!(last.get(key), Some(v), "{key:?}");
    }
    out.kill9();
    back.kill9();
}
