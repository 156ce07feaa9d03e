//! `ferry_verify::verify` against two real Kudu clusters: equal copies with
//! different partitioning say equal (both methods), three changes made
//! directly on the sink are named exactly, repair fixes them, and bad
//! input (a time older than history, different keys, a missing table) is
//! refused with its own error.
//!
//! `FERRY_VERIFY_ROWS` sets the size of the big table (the issue's
//! acceptance is 1 000 000; the default keeps CI quick).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::{all_types_schema, key, nullable, Shared};
use ferry_testkit::MiniCluster;
use ferry_verify::{
    verify, At, DiffKind, Method, Progress, Side, VerifyError, VerifyOptions, VerifyReport,
};
use kudu_client::scan::ScanSpec;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{DataType, HybridTime, KuduClient, KuduTable, Schema, TableBuilder};

struct Clusters {
    source: MiniCluster,
    sink: MiniCluster,
}

static CLUSTERS: Shared<Clusters> = Shared::new();

fn clusters() -> (Arc<Clusters>, KuduClient, KuduClient) {
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

fn rows_wanted() -> i64 {
    std::env::var("FERRY_VERIFY_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60_000)
}

/// Source layout: 3 hash buckets × 2 ranges split at `split`.
async fn create_source(client: &KuduClient, name: &str, schema: Schema, split: i64) {
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
async fn create_sink(client: &KuduClient, name: &str, schema: Schema) {
    let b = TableBuilder::new(name, schema)
        .add_hash_partitions(&["id"], 2, 7)
        .num_replicas(1);
    client.create_table(&b).await.expect("create sink");
}

/// The every-type row of `id` (every 10th row all NULL, one value column
/// in four NULL elsewhere).
fn all_types_row(table: &KuduTable, id: i64) -> kudu_client::Row {
    let mut r = table.new_row();
    r.set_i64("id", id).unwrap();
    if id % 10 == 3 {
        return r;
    }
    r.set_bool("b", id % 2 == 0).unwrap();
    r.set_i8("i8", (id % 100) as i8).unwrap();
    r.set_i16("i16", (id % 30_000) as i16).unwrap();
    r.set_i32("i32", id as i32 * 7).unwrap();
    r.set_i64("i64", id * 1_000_003).unwrap();
    r.set_f32("f", id as f32 / 3.0).unwrap();
    if id % 4 != 1 {
        r.set_f64("d", id as f64 / 7.0).unwrap();
    }
    r.set_decimal("dec9", i128::from(id % 10_000_000), 2)
        .unwrap();
    r.set_decimal("dec18", i128::from(id) * 12_345, 4).unwrap();
    r.set_decimal("dec38", i128::from(id) * 10_i128.pow(20), 10)
        .unwrap();
    r.set_str("s", &format!("row {id} \u{e9}")).unwrap();
    if id % 4 != 2 {
        r.set_binary("bin", &id.to_le_bytes()).unwrap();
    }
    r.set_str("vc", &format!("{}", id % 100_000)).unwrap();
    r.set_timestamp_micros("ts", 1_600_000_000_000_000 + id)
        .unwrap();
    r.set_date("dt", (id % 20_000) as i32).unwrap();
    r
}

async fn load(client: &KuduClient, name: &str, ids: std::ops::Range<i64>) {
    let table = client.open_table(name).await.expect("open");
    let mut session = client
        .new_session_with(
            SessionOptions::default()
                .flush_mode(FlushMode::AutoFlushBackground)
                .mutation_buffer_max_ops(5_000),
        )
        .expect("session");
    for id in ids {
        session
            .apply(Operation::insert(&table, all_types_row(&table, id)))
            .await
            .expect("apply");
    }
    session.flush().await.expect("flush");
    session.close().await.expect("close");
}

fn options(
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

async fn run(mut opts: VerifyOptions, method: Method) -> VerifyReport {
    opts.method = method;
    let started = Instant::now();
    let report = verify(opts).await.expect("verify");
    eprintln!("{method:?} verify took {:?}:\n{report}", started.elapsed());
    report
}

/// Data per first-cut range in the big test (the servers estimate on-disk,
/// compressed sizes).
const CHUNK: u64 = 16 << 10;

/// Waits until the source's tablets have flushed enough to be cut in
/// ranges of [`CHUNK`] bytes.
async fn wait_until_cuttable(client: &KuduClient, name: &str) {
    let table = client.open_table(name).await.expect("open");
    let tablets = client
        .scan_splits(&table, &ScanSpec::new())
        .await
        .expect("tablets")
        .len();
    let all: Vec<&str> = table.schema().columns().iter().map(|c| c.name()).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let spec = ScanSpec::new().projection(&all).split_size_bytes(CHUNK);
        let splits = client
            .scan_splits(&table, &spec)
            .await
            .expect("splits")
            .len();
        if splits > tablets {
            eprintln!("{tablets} tablets cut into {splits} ranges");
            return;
        }
        assert!(Instant::now() < deadline, "the tablets were never flushed");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_compare_equal_then_three_sink_changes_are_named_and_repaired() {
    let (_c, src, dst) = clusters();
    let n = rows_wanted();
    create_source(&src, "big", all_types_schema(), n / 2).await;
    create_sink(&dst, "big_copy", all_types_schema()).await;
    let started = Instant::now();
    // In four parts a flush apart: rowsets with disjoint keys, which the
    // tablet servers can cut between.
    for part in 0..4 {
        let ids = part * n / 4..(part + 1) * n / 4;
        tokio::join!(load(&src, "big", ids.clone()), load(&dst, "big_copy", ids));
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    eprintln!("loaded {n} rows into each table in {:?}", started.elapsed());
    let at = src.server_clock().await.expect("clock");
    // A source write after `at` is not part of the comparison.
    load(&src, "big", n + 100..n + 101).await;

    wait_until_cuttable(&src, "big").await;
    // Small first ranges, so the key space is cut and differing ranges
    // are cut again before their rows are compared.
    let base = || VerifyOptions {
        chunk_bytes: CHUNK,
        ..options(&src, "big", At::Time(at), &dst, "big_copy")
    };
    let (tx, rx) = tokio::sync::watch::channel(Progress::default());
    let mut with_progress = base();
    with_progress.progress = Some(tx);
    let server = run(with_progress, Method::Server).await;
    assert!(server.equal, "{server}");
    assert_eq!(server.source.rows, n as u64);
    assert_eq!(server.sink.rows, n as u64);
    assert_eq!(server.rows_compared, n as u64);
    assert_eq!(server.source.timestamp, at.raw());
    assert_eq!(server.columns.len(), 16);
    assert!(server.skipped_columns.is_empty(), "{server}");
    assert_eq!(server.differences, 0);
    let progress = rx.borrow().clone();
    assert_eq!(progress.rows_compared, n as u64);
    assert_eq!(progress.ranges_done, progress.ranges_total);
    assert!(server.ranges > 1, "{server}");
    let client = run(base(), Method::Client).await;
    assert!(client.equal, "{client}");
    assert_eq!((client.source.rows, client.sink.rows), (n as u64, n as u64));

    // One update, one delete, one insert, directly on the sink.
    let table = dst.open_table("big_copy").await.expect("open");
    let mut session = dst.new_session();
    let mut update = table.new_row();
    update
        .set_i64("id", 5)
        .unwrap()
        .set_str("s", "changed")
        .unwrap();
    session
        .apply(Operation::update(&table, update))
        .await
        .expect("update");
    let mut delete = table.new_row();
    delete.set_i64("id", 7).unwrap();
    session
        .apply(Operation::delete(&table, delete))
        .await
        .expect("delete");
    session
        .apply(Operation::insert(&table, all_types_row(&table, n + 10)))
        .await
        .expect("insert");
    session.flush().await.expect("flush");

    for method in [Method::Server, Method::Client] {
        let report = run(base(), method).await;
        assert!(!report.equal);
        assert_eq!(
            (
                report.differences,
                report.missing,
                report.extra,
                report.differing
            ),
            (3, 1, 1, 1),
            "{report}"
        );
        assert_eq!(report.sink.rows, n as u64);
        assert!(
            (1..=3).contains(&report.ranges_differing) && report.ranges > 1,
            "{report}"
        );
        let listed: Vec<(DiffKind, serde_json::Value, Vec<String>)> = report
            .listed
            .iter()
            .map(|d| (d.kind, d.key["id"].clone(), d.columns.clone()))
            .collect();
        assert_eq!(
            listed,
            [
                (DiffKind::Differs, 5.into(), vec!["s".to_owned()]),
                (DiffKind::Missing, 7.into(), vec![]),
                (DiffKind::Extra, (n + 10).into(), vec![]),
            ]
        );
        let text = report.to_string();
        assert!(
            text.contains("differs  {id: 5}: s (source \"row 5 \u{e9}\", sink \"changed\")"),
            "{text}"
        );
        assert!(text.contains("missing  {id: 7}\n"), "{text}");
        assert!(
            text.contains(&format!("extra  {{id: {}}}\n", n + 10)),
            "{text}"
        );
        assert!(!report.truncated);
    }

    // Listing is capped, counting is not.
    let mut capped = base();
    capped.max_listed = 1;
    let report = run(capped, Method::Server).await;
    assert_eq!((report.differences, report.listed.len()), (3, 1));
    assert!(report.truncated);
    assert_eq!(report.listed[0].key["id"], 5);

    let mut repair = base();
    repair.repair = true;
    let repaired = run(repair, Method::Server).await;
    let summary = repaired.repair.expect("repair summary");
    assert_eq!((summary.upserted, summary.deleted), (2, 1), "{repaired}");
    assert!(summary.equal_after && repaired.equal, "{repaired}");
    assert_eq!(repaired.differences, 3, "counted before the repair");

    let after = run(base(), Method::Server).await;
    assert!(after.equal, "{after}");
    assert_eq!(after.sink.rows, n as u64);
    let row = ferry_fixtures::read_all(&dst, "big_copy").await;
    let source = ferry_fixtures::read_at(&src, "big", Some(at)).await;
    assert!(row == source, "the repaired sink holds the source's rows");
}

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
    let _: HybridTime = old;
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
