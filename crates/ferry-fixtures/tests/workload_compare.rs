//! The workload and the table comparison against a real cluster: the
//! writer covers every column and survives its servers going away; the
//! comparison finds exactly the rows and cells that differ.

use ferry_fixtures::compare::{compare_tables, Difference};
use ferry_fixtures::workload::Workload;
use ferry_testkit::{DaemonKind, MiniCluster};
use kudu_client::write::Operation;
use kudu_client::{KuduClient, TableBuilder, Value};
use std::time::Duration;

async fn create(client: &KuduClient, name: &str) {
    let b = TableBuilder::new(name, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
}

/// Copies every row of `from` into `to` (same schema, same cluster).
async fn copy(client: &KuduClient, from: &str, to: &str) {
    let rows = ferry_fixtures::read_all(client, from).await;
    let table = client.open_table(to).await.expect("open");
    let mut s = client.new_session();
    for values in rows.values() {
        let mut row = table.new_row();
        for (i, v) in values.iter().enumerate() {
            row.set(i, v).expect("cell");
        }
        s.apply(Operation::upsert(&table, row)).await.expect("copy");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_writes_every_type_and_comparison_finds_each_difference() {
    let c = MiniCluster::builder().tservers(1).start().expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    create(&client, "a").await;
    create(&client, "b").await;

    let w = Workload::start(client.clone(), "a", 400, 7);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = w.stop().await;
    assert_eq!(stats.failed, 0, "no fault, no failure: {stats:?}");
    assert!(stats.applied > 500, "{stats:?}");
    assert!(stats.inserts > 0 && stats.upserts > 0 && stats.updates > 0 && stats.deletes > 0);

    let rows = ferry_fixtures::read_all(&client, "a").await;
    assert!(!rows.is_empty());
    // Every column holds both NULLs and values somewhere.
    let width = rows.values().next().expect("a row").len();
    for col in 1..width {
        assert!(
            rows.values().any(|r| r[col] == Value::Null),
            "NULL in column {col}"
        );
        assert!(
            rows.values().any(|r| r[col] != Value::Null),
            "value in column {col}"
        );
    }

    copy(&client, "a", "b").await;
    let same = compare_tables(&client, &client, "a", "b").await;
    assert!(same.is_equal(), "{same}");
    assert_eq!(same.source_rows, rows.len());

    // One row gone, one row added, one cell changed in the copy.
    let keys: Vec<i64> = rows.keys().copied().collect();
    let (gone, changed) = (keys[0], keys[1]);
    let b = client.open_table("b").await.expect("open b");
    let mut s = client.new_session();
    let mut k = b.new_row();
    k.set_i64("id", gone).expect("id");
    s.apply(Operation::delete(&b, k)).await.expect("delete");
    let mut r = b.new_row();
    r.set_i64("id", changed).expect("id");
    r.set_str("s", "changed in the sink").expect("s");
    s.apply(Operation::update(&b, r)).await.expect("update");
    let mut r = b.new_row();
    r.set_i64("id", -5).expect("id");
    s.apply(Operation::insert(&b, r)).await.expect("insert");

    let diff = compare_tables(&client, &client, "a", "b").await;
    assert!(!diff.is_equal());
    assert_eq!(
        (
            diff.missing_in_sink,
            diff.extra_in_sink,
            diff.differing_rows
        ),
        (1, 1, 1),
        "{diff}"
    );
    assert!(diff.first.contains(&Difference::MissingInSink {
        key: format!("id={gone}")
    }));
    assert!(diff.first.contains(&Difference::ExtraInSink {
        key: "id=-5".into()
    }));
    let text = diff.to_string();
    assert!(
        text.contains(&format!("id={changed}: column `s`")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_counts_failures_while_the_servers_are_down_and_carries_on() {
    let mut c = MiniCluster::builder().tservers(1).start().expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    create(&client, "w").await;
    let w = Workload::start(client.clone(), "w", 200, 3);
    tokio::time::sleep(Duration::from_secs(2)).await;
    c.kill(DaemonKind::TabletServer, 0).expect("kill");
    // Longer than the workload's write timeout.
    tokio::time::sleep(Duration::from_secs(14)).await;
    let during = w.stats();
    c.start(DaemonKind::TabletServer, 0).expect("start");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let stats = w.stop().await;
    assert!(during.failed > 0, "writes failed while down: {during:?}");
    assert!(during.sessions_replaced > 0, "{during:?}");
    assert!(
        stats.applied > during.applied,
        "writes landed after the restart: {during:?} then {stats:?}"
    );
}
