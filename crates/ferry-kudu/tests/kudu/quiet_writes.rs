//! Quiet tablets against writes that land just before a window's end
//! (issue 32): a table of two range tablets ("A" and "B", three replicas
//! each) is made quiet until both are proven unchanged from the tablet
//! servers' sweeps alone; then, round after round, a write to A races the
//! choice of a window's end and its selection. Whenever the write's
//! timestamp is below the end, A must be scanned in that window; whenever
//! it is not, in the next one. B stays skipped throughout.

use ferry_engine::checkpoint::WindowState;
use ferry_engine::time::SourceTime;
use ferry_kudu::quiet_tablets::{QuietTablets, Selection};
use ferry_testkit::MiniCluster;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, KuduClient, KuduTable, Schema, TableBuilder};
use std::collections::HashSet;
use std::time::{Duration, Instant};

const TABLE: &str = "quiet_writes";
/// The first id of tablet B.
const B: i64 = 1_000;

async fn create(client: &KuduClient) -> KuduTable {
    let schema = Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()
            .expect("id"),
        ColumnSchema::builder("v", DataType::Int64)
            .nullable(true)
            .build()
            .expect("v"),
    ])
    .expect("schema");
    let mut split = kudu_client::Row::new(&schema);
    split.set_i64("id", B).expect("split");
    let b = TableBuilder::new(TABLE, schema)
        .set_range_partition_columns(&["id"])
        .add_split_row(split)
        .num_replicas(3);
    client.create_table(&b).await.expect("create");
    client.open_table(TABLE).await.expect("open")
}

/// Upserts `v` into row `id`, acknowledged when this returns.
async fn write(client: &KuduClient, table: &KuduTable, id: i64, v: i64) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushSync))
        .expect("session");
    let mut r = table.new_row();
    r.set_i64("id", id).expect("id");
    r.set_i64("v", v).expect("v");
    s.apply(Operation::upsert(table, r)).await.expect("upsert");
    s.flush().await.expect("flush");
}

async fn now(client: &KuduClient) -> SourceTime {
    SourceTime::from_raw(client.server_clock().await.expect("clock").raw())
}

/// The selection of the window from `start` to now.
async fn window(
    quiet: &QuietTablets,
    client: &KuduClient,
    table: &KuduTable,
    start: SourceTime,
) -> (Selection, SourceTime) {
    tokio::time::sleep(Duration::from_millis(20)).await;
    let end = now(client).await;
    let w = WindowState {
        start_timestamp: Some(start),
        end_timestamp: end,
    };
    (quiet.select(client, table, w, &|_: &[u8]| true).await, end)
}

/// Windows until both tablets are skipped (at most `max`); the end of the
/// last one.
async fn until_quiet(
    quiet: &QuietTablets,
    client: &KuduClient,
    table: &KuduTable,
    mut end: SourceTime,
    both: &HashSet<String>,
    max: usize,
) -> SourceTime {
    for _ in 0..max {
        let (s, e) = window(quiet, client, table, end).await;
        end = e;
        if &s.skip == both {
            return end;
        }
    }
    panic!("both tablets were not proven quiet within {max} windows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_just_before_a_window_end_is_never_skipped() {
    let cluster = MiniCluster::builder().tservers(3).start().expect("cluster");
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    // Writes through their own client: its last propagated timestamp is
    // the newest write's.
    let writer = KuduClient::new(&cluster.master_addrs()).expect("client");
    let table = create(&client).await;
    let wtable = writer.open_table(TABLE).await.expect("open");
    write(&writer, &wtable, 1, 0).await;
    write(&writer, &wtable, B + 1, 0).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let tablets = client
        .tablets_in_range(&table, &[], &[], deadline)
        .await
        .expect("tablets");
    let (a, b) = (tablets[0].tablet_id.clone(), tablets[1].tablet_id.clone());
    let both = HashSet::from([a.clone(), b.clone()]);
    let quiet = QuietTablets::new(1_000_000);

    let mut end = until_quiet(&quiet, &client, &table, now(&client).await, &both, 20).await;
    // Proven again and again (after the first barrier, by the sweeps).
    for _ in 0..3 {
        let (s, e) = window(&quiet, &client, &table, end).await;
        assert_eq!(s.skip, both, "nothing was written");
        assert!(s.every_tablet);
        end = e;
    }

    let (mut before_end, mut at_or_after_end) = (0, 0);
    for round in 0..24_i64 {
        // The write and the window's end race: the end is read after a
        // delay that moves across the write's round trip.
        let delay = Duration::from_millis((round % 8) as u64 * 2);
        let w = {
            let (writer, wtable) = (writer.clone(), wtable.clone());
            tokio::spawn(async move { write(&writer, &wtable, 2 + round % 50, round).await })
        };
        tokio::time::sleep(delay).await;
        let e = now(&client).await;
        let w_state = WindowState {
            start_timestamp: Some(end),
            end_timestamp: e,
        };
        let s = quiet
            .select(&client, &table, w_state, &|_: &[u8]| true)
            .await;
        w.await.expect("writer");
        let written = writer
            .last_propagated_timestamp()
            .expect("a write timestamp");
        assert!(s.skip.contains(&b), "round {round}: B is quiet");
        if written.raw() < e.raw() {
            before_end += 1;
            assert!(
                !s.skip.contains(&a),
                "round {round}: a write at {} is below the window's end {} but A was skipped",
                written.raw(),
                e.raw()
            );
        } else {
            at_or_after_end += 1;
            let (next, e2) = window(&quiet, &client, &table, e).await;
            assert!(
                !next.skip.contains(&a),
                "round {round}: the write at {} is in the window after {}, but A was skipped",
                written.raw(),
                e.raw()
            );
            end = until_quiet(&quiet, &client, &table, e2, &both, 20).await;
            continue;
        }
        end = until_quiet(&quiet, &client, &table, e, &both, 20).await;
    }
    eprintln!("{before_end} writes below the window's end, {at_or_after_end} at or after it");
    assert!(
        before_end > 0,
        "no round put the write below the window's end: the race was not tried"
    );
}
