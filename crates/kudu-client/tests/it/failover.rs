//! A write session survives a leader-master change followed by a tablet
//! server crash (so locations must be fetched from the new leader), with
//! every row applied exactly once.

use ferry_testkit::{DaemonKind, MiniCluster};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, TableBuilder};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_survive_master_failover_and_tserver_crash() {
    let mut c = MiniCluster::builder()
        .masters(3)
        .tservers(3)
        .start()
        .expect("cluster");
    let client = KuduClient::builder(&c.master_addrs())
        .operation_timeout(Duration::from_secs(60))
        .build()
        .expect("client");
    let schema = ferry_fixtures::small_schema();
    client
        .create_table(
            &TableBuilder::new("failover", schema)
                .add_hash_partitions(&["id"], 6, 0)
                .num_replicas(3),
        )
        .await
        .expect("create");
    let table = client.open_table("failover").await.expect("open");
    let mut session = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    const N: i64 = 30_000;
    for id in 0..N {
        if id == N / 3 {
            let leader = tokio::task::block_in_place(|| c.leader_master()).expect("leader");
            tokio::task::block_in_place(|| c.kill(DaemonKind::Master, leader))
                .expect("kill leader master");
        }
        if id == 2 * N / 3 {
            tokio::task::block_in_place(|| c.kill(DaemonKind::TabletServer, 0))
                .expect("kill tserver");
        }
        let mut row = table.new_row();
        row.set_i64("id", id).expect("id");
        row.set_str("v", "x").expect("v");
        // INSERT (not upsert): a write applied twice would fail ALREADY_PRESENT.
        session
            .apply(Operation::insert(&table, row))
            .await
            .expect("apply");
    }
    session
        .flush()
        .await
        .expect("every row applied exactly once");
    let m = session.metrics();
    assert_eq!(m.inserts, N as u64, "{m:?}");
    assert_eq!(m.row_errors, 0, "{m:?}");

    let mut scanner = client.scan_builder(&table).build().expect("scanner");
    let mut n = 0;
    while let Some(batch) = scanner.next_batch().await.expect("scan after failover") {
        n += batch.len();
    }
    assert_eq!(n as i64, N);
}
