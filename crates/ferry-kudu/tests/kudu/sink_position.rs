//! The position table against a real Kudu cluster: created when missing,
//! written with UPSERT and read back, one row per sink table, a record of
//! a dropped and recreated sink table ignored, a foreign table of the same
//! name refused, an older table without the sink time altered, readers
//! (`lookup`) that never create anything; and the sink time of a running
//! job: the sink at `last_end_sink_time` is the source at `last_end`
//! while a writer keeps changing the source.

use crate::common::*;
use ferry_engine::checkpoint::WindowState;
use ferry_engine::sink_position::SinkPosition;
use ferry_engine::{SinkTime, SourceTime};
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_fixtures::{read_at, small_schema};
use ferry_kudu::position::{PositionError, PositionTable};
use ferry_testkit::MiniCluster;
use kudu_client::TableBuilder;
use kudu_client::{ColumnSchema, DataType, HybridTime, KuduClient, KuduTable, Schema};
use std::time::Duration;

async fn sink_table(client: &KuduClient, name: &str) -> KuduTable {
    let b = TableBuilder::new(name, small_schema())
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
    client.open_table(name).await.expect("open")
}

fn position(last_end: Option<u64>, end: u64) -> SinkPosition {
    let last_end = last_end.map(SourceTime::from_raw);
    SinkPosition {
        source_table: "orders".into(),
        job_id: "0123456789abcdef0123456789abcdef".into(),
        generation: 2,
        last_end,
        window: WindowState {
            start_timestamp: last_end,
            end_timestamp: SourceTime::from_raw(end),
        },
        last_end_sink_time: None,
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
        Some(SourceTime::from_raw(2))
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

/// The position table's columns before the sink time was added.
fn old_position_schema() -> Schema {
    let cols = [
        ("sink_table", DataType::String, false),
        ("sink_table_id", DataType::String, true),
        ("source_table", DataType::String, false),
        ("job_id", DataType::String, false),
        ("generation", DataType::Int64, false),
        ("last_end", DataType::Int64, true),
        ("window_start", DataType::Int64, true),
        ("window_end", DataType::Int64, false),
        ("snapshot", DataType::Bool, false),
        ("updated_at", DataType::UnixtimeMicros, false),
    ];
    Schema::new(
        cols.iter()
            .enumerate()
            .map(|(i, &(n, t, null))| {
                ColumnSchema::builder(n, t)
                    .key(i == 0)
                    .nullable(null)
                    .build()
                    .expect("column")
            })
            .collect(),
    )
    .expect("schema")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_table_gets_the_sink_time_column_and_readers_never_create() {
    let cluster = MiniCluster::builder().tservers(1).start().expect("cluster");
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let a = sink_table(&client, "a_copy").await;

    // Readers: no position table, then no sink table, then no row.
    let found = PositionTable::lookup(&client, "old_positions", "a_copy").await;
    assert_eq!(found.expect("lookup"), None);
    assert!(!client.table_exists("old_positions").await.expect("list"));

    let b = TableBuilder::new("old_positions", old_position_schema())
        .set_range_partition_columns(&["sink_table"])
        .num_replicas(1);
    client.create_table(&b).await.expect("create old table");
    let found = PositionTable::lookup(&client, "old_positions", "a_copy").await;
    assert_eq!(found.expect("lookup"), None);
    let found = PositionTable::lookup(&client, "old_positions", "no_such_table").await;
    assert_eq!(found.expect("lookup"), None);

    // A reader of a record in the old table sees no sink time (and does
    // not alter the table).
    let mut legacy = position(Some(7_000), 9_000);
    {
        let table = client.open_table("old_positions").await.expect("open");
        let mut row = table.new_row();
        row.set_str("sink_table", "a_copy").expect("set");
        row.set_str("sink_table_id", a.id()).expect("set");
        row.set_str("source_table", "orders").expect("set");
        row.set_str("job_id", &legacy.job_id).expect("set");
        row.set_i64("generation", 2).expect("set");
        row.set_i64("last_end", 7_000).expect("set");
        row.set_i64("window_start", 7_000).expect("set");
        row.set_i64("window_end", 9_000).expect("set");
        row.set_bool("snapshot", false).expect("set");
        row.set_timestamp_micros("updated_at", 1).expect("set");
        let mut session = client.new_session();
        session
            .apply(kudu_client::write::Operation::insert(&table, row))
            .await
            .expect("apply");
        session.flush().await.expect("flush");
    }
    let found = PositionTable::lookup(&client, "old_positions", "a_copy").await;
    assert_eq!(found.expect("lookup").as_ref(), Some(&legacy));
    let table = client.open_table("old_positions").await.expect("open");
    assert!(table
        .schema()
        .column_by_name("last_end_sink_time")
        .is_none());

    // A job prepares it: the column is added, the old record still reads,
    // and the sink time is written and read back.
    let mut positions = PositionTable::new(client.clone(), "old_positions");
    positions.prepare(1).await.expect("altered");
    let table = client.open_table("old_positions").await.expect("open");
    let added = table
        .schema()
        .column_by_name("last_end_sink_time")
        .expect("column added");
    assert!(added.is_nullable());
    assert_eq!(
        positions.read(&a).await.expect("read"),
        Some(legacy.clone())
    );
    legacy.last_end_sink_time = Some(SinkTime::from_raw(123_456));
    positions.write(&a, &legacy).await.expect("write");
    let found = PositionTable::lookup(&client, "old_positions", "a_copy").await;
    assert_eq!(found.expect("lookup"), Some(legacy));
    // Preparing again changes nothing.
    let mut again = PositionTable::new(client.clone(), "old_positions");
    again.prepare(1).await.expect("opened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sink_at_its_sink_time_is_the_source_at_last_end_while_a_writer_runs() {
    let (src, dst) = two_clusters();
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let sink = KuduClient::new(&dst.master_addrs()).expect("client");
    let table = create_table(&source, TABLE).await;
    create_table(&sink, TABLE).await;
    load(&source, &table, 3_000, 11).await;

    let dir = tempfile::tempdir().expect("tmp");
    let mut cfg = job_config(&src, &dst, &dir.path().join("chk"), 1, &[]);
    // Windows back to back (not one a second): the sink is written right
    // before and right after each window opens, so a sink time a little
    // too early or too late shows.
    cfg.discovery_interval = Duration::from_millis(1);
    let job = start_job(&cfg, None, None, 3).await;
    wait_windows(&job, 1, Duration::from_secs(60)).await;
    let writer = Workload::start_with(
        source.clone(),
        TABLE,
        WorkloadOptions {
            ops_per_sec: 2_000,
            seed: 12,
            first_id: 3_000,
            key_floor: 0,
        },
    );

    // A reader's client of its own, as `ferry verify` would have.
    let reader = KuduClient::new(&dst.master_addrs()).expect("client");
    let mut checked = Vec::new();
    for _ in 0..60 {
        if checked.len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
        let p = PositionTable::lookup(&reader, "ferry_positions", TABLE)
            .await
            .expect("lookup")
            .expect("a position");
        let (Some(last_end), Some(sink_time)) = (p.last_end, p.last_end_sink_time) else {
            continue;
        };
        if checked.iter().any(|&(end, _)| end == last_end) {
            continue;
        }
        // Both reads happen while the job writes later windows.
        let at_source = read_at(&source, TABLE, Some(HybridTime::from_raw(last_end.raw()))).await;
        let at_sink = read_at(&reader, TABLE, Some(HybridTime::from_raw(sink_time.raw()))).await;
        let differing = at_source
            .iter()
            .filter(|(k, v)| at_sink.get(k) != Some(v))
            .count()
            + at_sink
                .keys()
                .filter(|k| !at_source.contains_key(k))
                .count();
        assert_eq!(
            differing,
            0,
            "window end {last_end}: sink at {sink_time} has {} rows, source {}",
            at_sink.len(),
            at_source.len()
        );
        // The sink has moved on since: the check could see a difference.
        checked.push((last_end, at_source.len()));
    }
    let stats = writer.stop().await;
    let m = job.metrics().snapshot();
    job.cancel().await;
    assert_eq!(checked.len(), 4, "{checked:?} {m:?}");
    assert!(stats.applied > 2_000, "{stats:?}");
    // The sink kept changing after each checked window (so a sink time
    // taken too late or too early would have shown).
    let now = read_all(&sink, TABLE).await;
    let last = checked.last().map(|c| c.0).expect("checked");
    let at_last = read_at(&source, TABLE, Some(HybridTime::from_raw(last.raw()))).await;
    assert_ne!(
        now, at_last,
        "the writer changed nothing after the last check"
    );
}
