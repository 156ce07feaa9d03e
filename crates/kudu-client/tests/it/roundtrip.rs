//! Every column type round-trips through a real tablet server: written by
//! the write session, read back by a snapshot scan, compared value by value
//! (NULLs and extremes included: INT64 min/max, DECIMAL at precision 38,
//! empty and 1 MiB strings).

use ferry_testkit::MiniCluster;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, Schema, TableBuilder, Value};
use std::collections::BTreeMap;

fn schema() -> Schema {
    ferry_fixtures::all_types_schema()
}

fn rows() -> Vec<Vec<Value>> {
    let max38 = 10i128.pow(38) - 1;
    let mib: String = "x".repeat(1 << 20);
    vec![
        // Minimums.
        vec![
            Value::Int64(0),
            Value::Bool(false),
            Value::Int8(i8::MIN),
            Value::Int16(i16::MIN),
            Value::Int32(i32::MIN),
            Value::Int64(i64::MIN),
            Value::Float(f32::MIN),
            Value::Double(f64::MIN),
            Value::Decimal(-999_999_999),
            Value::Decimal(-999_999_999_999_999_999),
            Value::Decimal(-max38),
            Value::String(String::new()),
            Value::Binary(Vec::new()),
            Value::String(String::new()),
            Value::UnixtimeMicros(i64::MIN),
            Value::Date(-719_162), // 0001-01-01
        ],
        // Maximums, a 1 MiB string and multi-byte VARCHAR.
        vec![
            Value::Int64(1),
            Value::Bool(true),
            Value::Int8(i8::MAX),
            Value::Int16(i16::MAX),
            Value::Int32(i32::MAX),
            Value::Int64(i64::MAX),
            Value::Float(f32::INFINITY),
            Value::Double(f64::MAX),
            Value::Decimal(999_999_999),
            Value::Decimal(999_999_999_999_999_999),
            Value::Decimal(max38),
            Value::String(mib),
            Value::Binary((0..=255).collect()),
            Value::String("héllo".into()),
            Value::UnixtimeMicros(i64::MAX),
            Value::Date(2_932_896), // 9999-12-31
        ],
        // Every nullable column NULL.
        std::iter::once(Value::Int64(2))
            .chain(std::iter::repeat_n(Value::Null, 15))
            .collect(),
        // Ordinary values.
        vec![
            Value::Int64(3),
            Value::Bool(true),
            Value::Int8(-7),
            Value::Int16(1234),
            Value::Int32(-123_456),
            Value::Int64(1 << 40),
            Value::Float(1.5),
            Value::Double(-2.25e-300),
            Value::Decimal(42),
            Value::Decimal(1),
            Value::Decimal(-12_345_678_901_234_567_890_123_456_789),
            Value::String("ordinary".into()),
            Value::Binary(vec![0, 1, 2, 0]),
            Value::String("abc".into()),
            Value::UnixtimeMicros(1_700_000_000_123_456),
            Value::Date(19_000),
        ],
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_type_round_trips() {
    let c = MiniCluster::builder()
        .tservers(1)
        .tserver_flag("--max_cell_size_bytes=2097152")
        .start()
        .expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    client
        .create_table(
            &TableBuilder::new("types", schema())
                .add_hash_partitions(&["id"], 2, 0)
                .num_replicas(1),
        )
        .await
        .expect("create");
    let table = client.open_table("types").await.expect("open");
    let mut session = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
        .expect("session");
    let expected = rows();
    for values in &expected {
        let mut row = table.new_row();
        for (i, v) in values.iter().enumerate() {
            row.set(i, v).expect("set");
        }
        session
            .apply(Operation::insert(&table, row))
            .await
            .expect("apply");
    }
    session.flush().await.expect("flush");

    let mut scanner = client
        .scan_builder(&table)
        .snapshot_now()
        .build()
        .expect("scanner");
    let mut got = BTreeMap::new();
    while let Some(batch) = scanner.next_batch().await.expect("scan") {
        for view in batch.rows() {
            let values = view.to_values().expect("values");
            let Value::Int64(id) = values[0] else {
                panic!("key")
            };
            got.insert(id, values);
        }
    }
    assert_eq!(got.len(), expected.len());
    for want in &expected {
        let Value::Int64(id) = want[0] else {
            panic!("key")
        };
        let have = &got[&id];
        for (i, (w, h)) in want.iter().zip(have).enumerate() {
            let name = table.schema().columns()[i].name();
            match (w, h) {
                (Value::String(a), Value::String(b)) if a.len() > 100 => {
                    assert_eq!(a.len(), b.len(), "row {id} column {name}");
                    assert!(a == b, "row {id} column {name} differs");
                }
                _ => assert_eq!(w, h, "row {id} column {name}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_and_scans_work_when_the_cluster_requires_tls() {
    // The servers refuse any unencrypted connection, so success means TLS.
    let c = MiniCluster::builder()
        .tservers(1)
        .flag("--rpc_encryption=required")
        .start()
        .expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    client
        .create_table(
            &TableBuilder::new("tls", schema())
                .add_hash_partitions(&["id"], 2, 0)
                .num_replicas(1),
        )
        .await
        .expect("create over TLS");
    let table = client.open_table("tls").await.expect("open");
    let mut session = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for id in 0..500 {
        let mut row = table.new_row();
        row.set_i64("id", id).expect("id");
        row.set_str("s", "over tls").expect("s");
        session
            .apply(Operation::insert(&table, row))
            .await
            .expect("apply");
    }
    session.flush().await.expect("flush over TLS");
    let mut scanner = client.scan_builder(&table).build().expect("scanner");
    let mut n = 0;
    while let Some(batch) = scanner.next_batch().await.expect("scan over TLS") {
        n += batch.len();
    }
    assert_eq!(n, 500);
    let cli = c
        .kudu_ok(&["table", "scan", &c.master_addrs_joined(), "tls"])
        .expect("cli scan");
    assert!(cli.contains("Total count 500"), "{cli}");
}
