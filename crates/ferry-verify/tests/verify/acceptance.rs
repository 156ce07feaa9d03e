//! The acceptance: equal copies (every type, hash + range
//! partitions on one side, hash on the other) say equal with both methods;
//! an update, a delete and an insert made directly on the sink are named
//! exactly; repair fixes them and the next run says equal.

use std::time::{Duration, Instant};

use ferry_fixtures::all_types_schema;
use ferry_verify::{At, DiffKind, Method, Progress, VerifyOptions};
use kudu_client::scan::ScanSpec;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, KuduTable};

use crate::common::{clusters, create_sink, create_source, options, run};

fn rows_wanted() -> i64 {
    std::env::var("FERRY_VERIFY_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60_000)
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
    if std::env::var_os("FERRY_VERIFY_SCAN_TOO").is_some() {
        // For a manual run's log: the `kudu table scan` of both tables
        // that verify should beat (no assertion on times).
        let started = Instant::now();
        let (a, b) = (
            _c.source.master_addrs_joined(),
            _c.sink.master_addrs_joined(),
        );
        let scans = [
            std::thread::spawn(move || kudu_scan(&a, "big")),
            std::thread::spawn(move || kudu_scan(&b, "big_copy")),
        ];
        for s in scans {
            s.join().expect("scan");
        }
        eprintln!(
            "kudu table scan of both tables took {:?}",
            started.elapsed()
        );
    }
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
        assert!(text.lines().any(|l| l == "missing  {id: 7}"), "{text}");
        let extra = format!("extra  {{id: {}}}", n + 10);
        assert!(text.lines().any(|l| l == extra), "{text}");
        assert!(!report.truncated);
    }

    // One first range for the whole table: the differing range is cut
    // again (finer and finer) before its rows are compared.
    let whole = run(
        VerifyOptions {
            chunk_bytes: 1 << 30,
            ..base()
        },
        Method::Server,
    )
    .await;
    assert_eq!(whole.differences, 3, "{whole}");
    assert!(whole.ranges > 1, "{whole}");

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

/// `kudu table scan` of a table, output discarded.
fn kudu_scan(masters: &str, table: &str) {
    let bins = ferry_testkit::KuduBinaries::get().expect("kudu binaries");
    let status = bins
        .command()
        .args(["table", "scan", masters, table])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("kudu table scan");
    assert!(status.success());
}
