//! The position table against a real Kudu cluster: created when missing,
//! written with UPSERT and read back, one row per sink table, a record of
//! a dropped and recreated sink table ignored, a foreign table of the same
//! name refused.

use ferry_engine::checkpoint::WindowState;
use ferry_engine::sink_position::{PositionError, PositionTable, SinkPosition};
use ferry_fixtures::small_schema;
use ferry_testkit::MiniCluster;
use kudu_client::{KuduClient, KuduTable, TableBuilder};

async fn sink_table(client: &KuduClient, name: &str) -> KuduTable {
    let b = TableBuilder::new(name, small_schema())
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
    client.open_table(name).await.expect("open")
}

fn position(last_end: Option<u64>, end: u64) -> SinkPosition {
    SinkPosition {
        source_table: "orders".into(),
        job_id: "0123456789abcdef0123456789abcdef".into(),
        generation: 2,
        last_end,
        window: WindowState {
            start_timestamp: last_end,
            end_timestamp: end,
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positions_are_created_written_read_and_tied_to_their_table() {
    let cluster = MiniCluster::builder().tservers(1).start().expect("cluster");
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let a = sink_table(&client, "a_copy").await;
    let b = sink_table(&client, "b_copy").await;

    let mut positions = PositionTable::new(client.clone(), "ferry_positions");
    positions.prepare(1).await.expect("created");
    assert!(client
        .table_exists("ferry_positions")
        .await
        .expect("exists"));
    // Opening an existing one works too (a second job on the cluster).
    let mut again = PositionTable::new(client.clone(), "ferry_positions");
    again.prepare(1).await.expect("opened");

    assert_eq!(positions.read(&a).await.expect("read"), None);
    let snapshot = position(None, 7_000);
    positions.write(&a, &snapshot).await.expect("write");
    assert_eq!(again.read(&a).await.expect("read"), Some(snapshot));
    // UPSERT: the newer window replaces it; table b has its own row.
    let later = position(Some(7_000), 9_000);
    positions.write(&a, &later).await.expect("write");
    positions
        .write(&b, &position(Some(1), 2))
        .await
        .expect("write");
    assert_eq!(again.read(&a).await.expect("read"), Some(later));
    assert_eq!(
        again.read(&b).await.expect("read").map(|p| p.end()),
        Some(2)
    );

    // A recreated sink table of the same name is another table: the old
    // record describes rows that are gone.
    client.delete_table("a_copy").await.expect("drop");
    let a2 = sink_table(&client, "a_copy").await;
    assert_ne!(a.id(), a2.id());
    assert_eq!(again.read(&a2).await.expect("read"), None);

    // A table of that name that is not a position table is refused.
    let mut foreign = PositionTable::new(client.clone(), "b_copy");
    let err = foreign.prepare(1).await.expect_err("not a position table");
    assert!(matches!(err, PositionError::Schema { .. }), "{err}");
    assert!(!err.is_transient());
    assert!(err.to_string().contains("job.positionTable"), "{err}");
}
