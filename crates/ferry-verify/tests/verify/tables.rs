//! Tables that differ in shape: columns matched by name or skipped, keys
//! that must be identical, composite string keys merged in the servers'
//! key order, and refused input.

use std::time::Duration;

use ferry_fixtures::{key, nullable};
use ferry_verify::{verify, At, Method, VerifyError};
use kudu_client::write::Operation;
use kudu_client::{DataType, Schema, TableBuilder};

use crate::common::{clusters, create_sink, create_source, options, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_in_one_table_only_or_of_another_type_are_skipped() {
    let (_c, src, dst) = clusters();
    let source = Schema::new(vec![
        key("id", DataType::Int64),
        nullable("a", DataType::String),
        nullable("only_source", DataType::Int32),
        nullable("typed", DataType::Int32),
    ])
    .unwrap();
    let sink = Schema::new(vec![
        key("id", DataType::Int64),
        nullable("typed", DataType::Int64),
        nullable("a", DataType::String),
        nullable("only_sink", DataType::Bool),
    ])
    .unwrap();
    create_source(&src, "cols", source, 10).await;
    create_sink(&dst, "cols_copy", sink).await;
    let (s, k) = (
        src.open_table("cols").await.unwrap(),
        dst.open_table("cols_copy").await.unwrap(),
    );
    let (mut ss, mut ks) = (src.new_session(), dst.new_session());
    for id in 0..20i64 {
        let mut r = s.new_row();
        r.set_i64("id", id).unwrap().set_str("a", "x").unwrap();
        r.set_i32("only_source", 1)
            .unwrap()
            .set_i32("typed", 2)
            .unwrap();
        ss.apply(Operation::insert(&s, r)).await.unwrap();
        let mut r = k.new_row();
        r.set_i64("id", id).unwrap().set_str("a", "x").unwrap();
        r.set_i64("typed", 99)
            .unwrap()
            .set_bool("only_sink", true)
            .unwrap();
        ks.apply(Operation::insert(&k, r)).await.unwrap();
    }
    ss.flush().await.unwrap();
    ks.flush().await.unwrap();

    let report = run(
        options(&src, "cols", At::Now, &dst, "cols_copy"),
        Method::Server,
    )
    .await;
    assert!(report.equal, "{report}");
    assert_eq!(report.columns, ["id", "a"]);
    let skipped: Vec<(&str, &str)> = report
        .skipped_columns
        .iter()
        .map(|s| (s.name.as_str(), s.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        [
            ("only_source", "only in the source"),
            ("typed", "INT32 in the source, INT64 in the sink"),
            ("only_sink", "only in the sink"),
        ]
    );
    assert!(report
        .to_string()
        .contains("not compared: typed (INT32 in the source, INT64 in the sink)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_keys_a_missing_table_and_a_too_old_time_are_refused() {
    let (_c, src, dst) = clusters();
    let int32_key = Schema::new(vec![
        key("id", DataType::Int32),
        nullable("v", DataType::String),
    ])
    .unwrap();
    create_source(&src, "keys", ferry_fixtures::small_schema(), 10).await;
    create_sink(&dst, "keys_copy", int32_key).await;
    let err = verify(options(&src, "keys", At::Now, &dst, "keys_copy"))
        .await
        .expect_err("different keys");
    assert!(matches!(err, VerifyError::Incomparable(_)), "{err}");
    assert!(err.is_usage());
    assert!(
        err.to_string()
            .contains("source (id INT64), sink (id INT32)"),
        "{err}"
    );

    let err = verify(options(&src, "keys", At::Now, &dst, "no_such_table"))
        .await
        .expect_err("missing table");
    assert!(
        matches!(&err, VerifyError::TableNotFound { side: "sink", table } if table == "no_such_table"),
        "{err}"
    );

    // A table that keeps one second of history, read 3 s in the past.
    let b = TableBuilder::new("short_history", ferry_fixtures::small_schema())
        .add_hash_partitions(&["id"], 2, 0)
        .extra_config("kudu.table.history_max_age_sec", "1")
        .num_replicas(1);
    src.create_table(&b).await.expect("create");
    create_sink(&dst, "short_history", ferry_fixtures::small_schema()).await;
    let old = src.server_clock().await.expect("clock");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let err = verify(options(
        &src,
        "short_history",
        At::Time(old),
        &dst,
        "short_history",
    ))
    .await
    .expect_err("too old");
    match &err {
        VerifyError::HistoryTooOld {
            side: "source",
            table,
            timestamp,
        } => {
            assert_eq!(table, "short_history");
            assert_eq!(*timestamp, old.raw());
        }
        other => panic!("expected HistoryTooOld, got {other:?}"),
    }
    assert!(err.is_usage());
}

/// Composite keys with strings (empty, with a zero byte, prefixes of each
/// other): the row diff merges both sides in the servers' key order, so a
/// key encoded out of order would show up as a missing and an extra row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_string_keys_merge_in_key_order() {
    let (_c, src, dst) = clusters();
    let schema = Schema::new(vec![
        key("region", DataType::String),
        key("id", DataType::Int32),
        nullable("v", DataType::String),
        nullable("d", DataType::Double),
    ])
    .unwrap();
    let mut at = schema.new_row();
    at.set_str("region", "b").unwrap();
    let b = TableBuilder::new("regions", schema.clone())
        .add_hash_partitions(&["region", "id"], 3, 0)
        .set_range_partition_columns(&["region"])
        .add_range_partition(schema.new_row(), at.clone())
        .add_range_partition(at, schema.new_row())
        .num_replicas(1);
    src.create_table(&b).await.expect("create");
    let b = TableBuilder::new("regions_copy", schema)
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    dst.create_table(&b).await.expect("create");
    let regions = ["", "a", "a\0b", "a\0", "ab", "b", "b\0\0", "zz"];
    for (client, name) in [(&src, "regions"), (&dst, "regions_copy")] {
        let table = client.open_table(name).await.unwrap();
        let mut session = client.new_session();
        for region in regions {
            for id in [-300i32, -5, 0, 3, 7, 1 << 20] {
                let mut r = table.new_row();
                r.set_str("region", region)
                    .unwrap()
                    .set_i32("id", id)
                    .unwrap();
                r.set_str("v", &format!("{region:?}/{id}")).unwrap();
                // NaN on both sides is equal (compared by bits).
                r.set_f64("d", if id == 0 { f64::NAN } else { f64::from(id) })
                    .unwrap();
                session.apply(Operation::insert(&table, r)).await.unwrap();
            }
        }
        session.flush().await.unwrap();
    }
    let report = run(
        options(&src, "regions", At::Now, &dst, "regions_copy"),
        Method::Client,
    )
    .await;
    assert!(report.equal, "{report}");
    assert_eq!(report.rows_compared, 48);

    let table = dst.open_table("regions_copy").await.unwrap();
    let mut session = dst.new_session();
    let row = |region: &str, id: i32| {
        let mut r = table.new_row();
        r.set_str("region", region)
            .unwrap()
            .set_i32("id", id)
            .unwrap();
        r
    };
    let mut update = row("a\0b", -5);
    update.set_f64("d", -0.0).unwrap();
    session
        .apply(Operation::update(&table, update))
        .await
        .unwrap();
    session
        .apply(Operation::delete(&table, row("", 3)))
        .await
        .unwrap();
    session
        .apply(Operation::insert(&table, row("a\0", 8)))
        .await
        .unwrap();
    session.flush().await.unwrap();

    for method in [Method::Server, Method::Client] {
        let report = run(
            options(&src, "regions", At::Now, &dst, "regions_copy"),
            method,
        )
        .await;
        let listed: Vec<String> = report.listed.iter().map(ToString::to_string).collect();
        assert_eq!(
            listed,
            [
                r#"missing  {id: 3, region: ""}"#,
                r#"extra  {id: 8, region: "a\u0000"}"#,
                r#"differs  {id: -5, region: "a\u0000b"}: d (source -5.0, sink -0.0)"#,
            ],
            "{report}"
        );
    }
}
