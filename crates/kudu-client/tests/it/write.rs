//! Write sessions against real Kudu 1.17 clusters from `ferry-testkit`,
//! checked with the real `kudu` CLI:
//!
//! - every operation type in every flush mode: exact rows afterwards, row
//!   errors (ALREADY_PRESENT / NOT_FOUND with the key) from flush, order of
//!   operations on one key kept, metrics;
//! - every column type (and NULLs, extremes, empty and 1 MiB strings)
//!   written by ferry reads back through `kudu table scan` with the same
//!   values;
//! - ferry's routing agrees with `kudu table locate_row` on a table with two
//!   hash dimensions, range partitions and a range with its own hash schema;
//! - writes survive a tablet server crash and restart on an RF=3 table with
//!   every row present exactly once;
//! - caller mistakes and server-side schema mismatches are typed errors;
//!   rows in non-covered ranges fail alone; background mode bounds its
//!   buffers and flushes on its interval; authz tokens are attached.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::runtime;
use ferry_testkit::{DaemonKind, MiniCluster};
use kudu_client::error::{RowError, StatusCode};
use kudu_client::internals;
use kudu_client::meta::Lookup;
use kudu_client::schema::ColumnSchemaBuilder;
use kudu_client::write::{
    ExternalConsistencyMode, FlushMode, OpType, Operation, Session, SessionOptions,
};
use kudu_client::{ColumnSchema, DataType, Error, KuduClient, KuduTable, Schema, TableBuilder};
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------------------
// Helpers.

fn cluster(tservers: usize, tserver_flags: &[&str]) -> MiniCluster {
    cluster_with(tservers, &[], tserver_flags)
}

fn cluster_with(tservers: usize, master_flags: &[&str], tserver_flags: &[&str]) -> MiniCluster {
    let mut b = MiniCluster::builder().masters(1).tservers(tservers);
    for f in master_flags {
        b = b.master_flag(*f);
    }
    for f in tserver_flags {
        b = b.tserver_flag(*f);
    }
    b.start().expect("start Kudu cluster")
}

fn client(c: &MiniCluster) -> KuduClient {
    KuduClient::new(&c.master_addrs()).expect("client")
}

/// The rows `kudu table scan` prints, sorted.
fn cli_rows(c: &MiniCluster, table: &str) -> Vec<String> {
    let out = c
        .kudu_ok(&[
            "table",
            "scan",
            &c.master_addrs_joined(),
            table,
            "-replica_selection=LEADER",
        ])
        .expect("kudu table scan");
    let mut rows: Vec<String> = out
        .lines()
        .filter(|l| l.starts_with('('))
        .map(str::to_owned)
        .collect();
    rows.sort();
    rows
}

/// `kudu table scan -row_count_only` (1.17 has no `kudu table count`).
fn cli_count(c: &MiniCluster, table: &str) -> u64 {
    let out = c
        .kudu_ok(&[
            "table",
            "scan",
            &c.master_addrs_joined(),
            table,
            "-row_count_only",
            "-replica_selection=LEADER",
        ])
        .expect("kudu table scan -row_count_only");
    out.lines()
        .find_map(|l| l.strip_prefix("Total count "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {out:?}"))
}

fn col(name: &str, t: DataType) -> ColumnSchemaBuilder {
    ColumnSchema::builder(name, t)
}

fn row_errors(result: kudu_client::Result<()>) -> Vec<RowError> {
    match result {
        Err(Error::RowErrors(v)) => v,
        other => panic!("expected row errors, got {other:?}"),
    }
}

fn has_error(errors: &[RowError], op: &str, key: &str, code: StatusCode) -> bool {
    errors
        .iter()
        .any(|e| e.operation == op && e.key == key && e.status.code == code)
}

// ---------------------------------------------------------------------------
// Every op type in every flush mode.

fn ops_schema() -> Schema {
    Schema::new(vec![
        col("id", DataType::Int32).key(true).build().unwrap(),
        col("v", DataType::String).nullable(true).build().unwrap(),
        col("n", DataType::Int64).nullable(true).build().unwrap(),
    ])
    .unwrap()
}

fn op(table: &KuduTable, t: OpType, id: i32, v: Option<&str>, n: Option<i64>) -> Operation {
    let mut row = table.new_row();
    row.set_i32("id", id).unwrap();
    if let Some(v) = v {
        row.set_str("v", v).unwrap();
    }
    if let Some(n) = n {
        row.set_i64("n", n).unwrap();
    }
    Operation::new(table, t, row)
}

/// The script: (operation, expected to fail with this status code).
fn ops_script(t: &KuduTable) -> Vec<(Operation, Option<StatusCode>)> {
    use OpType::*;
    let mut s = Vec::new();
    for i in 1..=5 {
        s.push((
            op(t, Insert, i, Some(&format!("a{i}")), Some(i64::from(i))),
            None,
        ));
    }
    s.extend([
        (
            op(t, Insert, 1, Some("dup"), None),
            Some(StatusCode::AlreadyPresent),
        ),
        (op(t, InsertIgnore, 2, Some("dup"), None), None),
        (op(t, InsertIgnore, 6, Some("new6"), None), None),
        (op(t, Upsert, 3, Some("up3"), None), None),
        (op(t, Upsert, 7, Some("up7"), Some(70)), None),
        (op(t, UpsertIgnore, 4, Some("ui4"), None), None),
        (op(t, UpsertIgnore, 8, Some("ui8"), None), None),
        (op(t, Update, 5, None, Some(500)), None),
        (
            op(t, Update, 99, Some("x"), None),
            Some(StatusCode::NotFound),
        ),
        (op(t, UpdateIgnore, 6, Some("uig6"), None), None),
        (op(t, UpdateIgnore, 98, Some("x"), None), None),
        (op(t, Delete, 1, None, None), None),
        (op(t, Delete, 97, None, None), Some(StatusCode::NotFound)),
        (op(t, DeleteIgnore, 2, None, None), None),
        (op(t, DeleteIgnore, 96, None, None), None),
        // One key, four operations: only their order gives this result.
        (op(t, Insert, 10, Some("first"), Some(1)), None),
        (op(t, Update, 10, Some("second"), None), None),
        (op(t, Delete, 10, None, None), None),
        (op(t, Insert, 10, Some("final"), None), None),
    ]);
    s
}

const OPS_EXPECTED: &[&str] = &[
    "(int32 id=10, string v=\"final\", int64 n=NULL)",
    "(int32 id=3, string v=\"up3\", int64 n=3)",
    "(int32 id=4, string v=\"ui4\", int64 n=4)",
    "(int32 id=5, string v=\"a5\", int64 n=500)",
    "(int32 id=6, string v=\"uig6\", int64 n=NULL)",
    "(int32 id=7, string v=\"up7\", int64 n=70)",
    "(int32 id=8, string v=\"ui8\", int64 n=NULL)",
];

#[test]
fn every_op_type_in_every_flush_mode() {
    let c = crate::shared::three_tservers();
    let rt = runtime();
    let client = client(&c);
    for (name, mode) in [
        ("ops_sync", FlushMode::AutoFlushSync),
        ("ops_background", FlushMode::AutoFlushBackground),
        ("ops_manual", FlushMode::ManualFlush),
    ] {
        rt.block_on(async {
            client
                .create_table(
                    &TableBuilder::new(name, ops_schema())
                        .add_hash_partitions(&["id"], 3, 0)
                        .num_replicas(1),
                )
                .await
                .expect("create table");
            let table = client.open_table(name).await.expect("open");
            // Tiny background buffers: the script spans several
            // overlapping flushes, which must still keep per-key order.
            let mut session = client
                .new_session_with(
                    SessionOptions::default()
                        .flush_mode(mode)
                        .mutation_buffer_max_ops(3),
                )
                .expect("session");
            let script = ops_script(&table);
            let mut errors = Vec::new();
            for (operation, expect) in script {
                let what = format!("{} {}", operation.op_type(), operation.row().key_string());
                let res = session.apply(operation).await;
                if mode == FlushMode::AutoFlushSync {
                    match (expect, res) {
                        (None, Ok(())) => {}
                        (Some(code), Err(Error::RowErrors(v))) => {
                            assert_eq!(v.len(), 1, "{what}: {v:?}");
                            assert_eq!(v[0].status.code, code, "{what}: {v:?}");
                            errors.extend(v);
                        }
                        (e, r) => panic!("{name}: {what}: expected {e:?}, got {r:?}"),
                    }
                } else {
                    res.expect("apply");
                }
                // Manual mode: flush whenever the 3-operation buffer is
                // full (a fourth apply would be refused).
                if mode == FlushMode::ManualFlush && session.buffered_ops() == 3 {
                    if let Err(e) = session.flush().await {
                        errors.extend(row_errors(Err(e)));
                    }
                }
            }
            match session.close().await {
                Ok(()) => {}
                Err(e) => errors.extend(row_errors(Err(e))),
            }
            assert_eq!(errors.len(), 3, "{name}: {errors:#?}");
            assert!(
                has_error(&errors, "INSERT", "(id=1)", StatusCode::AlreadyPresent),
                "{name}: {errors:#?}"
            );
            assert!(
                has_error(&errors, "UPDATE", "(id=99)", StatusCode::NotFound),
                "{name}: {errors:#?}"
            );
            assert!(
                has_error(&errors, "DELETE", "(id=97)", StatusCode::NotFound),
                "{name}: {errors:#?}"
            );

            let m = session.metrics();
            assert_eq!(m.ops_applied, 24, "{name}: {m:?}");
            assert_eq!(m.row_errors, 3, "{name}: {m:?}");
            assert_eq!(m.ops_pending(), 0, "{name}: {m:?}");
            assert_eq!((m.inserts, m.insert_ignores), (7, 2), "{name}: {m:?}");
            assert_eq!((m.upserts, m.upsert_ignores), (2, 2), "{name}: {m:?}");
            assert_eq!((m.updates, m.update_ignores), (2, 2), "{name}: {m:?}");
            assert_eq!((m.deletes, m.delete_ignores), (2, 2), "{name}: {m:?}");
            assert!(
                m.bytes_written > 0 && m.batches_written > 0,
                "{name}: {m:?}"
            );
            // What the servers counted (resource_metrics, 1.17+).
            let s = &m.server;
            assert_eq!(s.successful_inserts, 8, "{name}: {s:?}");
            assert_eq!(s.insert_ignore_errors, 1, "{name}: {s:?}");
            assert_eq!(s.update_ignore_errors, 1, "{name}: {s:?}");
            assert_eq!(s.delete_ignore_errors, 1, "{name}: {s:?}");
            assert_eq!(s.successful_deletes, 3, "{name}: {s:?}");
        });
        assert_eq!(cli_rows(&c, name), OPS_EXPECTED, "{name}");
    }
}

/// The same script as one `apply_batch` per flush mode: the same rows, the
/// same three row errors, the same counts; a batch the manual buffer cannot
/// hold is refused whole.
#[test]
fn the_script_as_one_batch_in_every_flush_mode() {
    let c = crate::shared::three_tservers();
    let rt = runtime();
    let client = client(&c);
    for (name, mode) in [
        ("batch_sync", FlushMode::AutoFlushSync),
        ("batch_background", FlushMode::AutoFlushBackground),
        ("batch_manual", FlushMode::ManualFlush),
    ] {
        rt.block_on(async {
            client
                .create_table(
                    &TableBuilder::new(name, ops_schema())
                        .add_hash_partitions(&["id"], 3, 0)
                        .num_replicas(1),
                )
                .await
                .expect("create table");
            let table = client.open_table(name).await.expect("open");
            let mut session = client
                .new_session_with(
                    SessionOptions::default()
                        .flush_mode(mode)
                        .mutation_buffer_max_ops(24),
                )
                .expect("session");
            let script: Vec<Operation> = ops_script(&table).into_iter().map(|(o, _)| o).collect();
            if mode == FlushMode::ManualFlush {
                let mut more = script.clone();
                more.push(op(&table, OpType::Upsert, 11, None, None));
                let err = session.apply_batch(more).await.unwrap_err();
                assert!(
                    matches!(&err, Error::Status { status, .. } if status.code == StatusCode::IllegalState),
                    "{err:?}"
                );
                assert_eq!(session.buffered_ops(), 0, "nothing of a refused batch is kept");
            }
            // An invalid operation refuses the whole batch before anything
            // is applied.
            let mut bad = script.clone();
            bad.insert(3, Operation::insert(&table, table.new_row()));
            let err = session.apply_batch(bad).await.unwrap_err();
            assert!(
                err.to_string().contains("primary key column 'id' is not set"),
                "{err}"
            );
            assert_eq!(session.metrics().ops_applied, 0);

            let mut errors = match session.apply_batch(script).await {
                Ok(()) => Vec::new(),
                Err(e) => row_errors(Err(e)),
            };
            if mode != FlushMode::AutoFlushSync {
                assert!(errors.is_empty(), "{name}: {errors:?}");
                errors.extend(row_errors(session.flush().await));
            }
            session.close().await.expect("close");
            assert_eq!(errors.len(), 3, "{name}: {errors:#?}");
            assert!(has_error(&errors, "INSERT", "(id=1)", StatusCode::AlreadyPresent));
            assert!(has_error(&errors, "UPDATE", "(id=99)", StatusCode::NotFound));
            assert!(has_error(&errors, "DELETE", "(id=97)", StatusCode::NotFound));
            let m = session.metrics();
            assert_eq!((m.ops_applied, m.row_errors, m.ops_pending()), (24, 3, 0), "{name}: {m:?}");
            assert_eq!((m.inserts, m.insert_ignores), (7, 2), "{name}: {m:?}");
            assert_eq!((m.deletes, m.delete_ignores), (2, 2), "{name}: {m:?}");
        });
        assert_eq!(cli_rows(&c, name), OPS_EXPECTED, "{name}");
    }
}

// ---------------------------------------------------------------------------
// Every column type, read back by the CLI.

const MAX_38: i128 = 99_999_999_999_999_999_999_999_999_999_999_999_999;

#[test]
fn every_column_type_reads_back_through_the_cli() {
    // A 1 MiB cell needs a larger cell limit than the 64 KiB default.
    let c = cluster(1, &["--max_cell_size_bytes=2097152"]);
    let rt = runtime();
    let client = client(&c);
    let big = "x".repeat(1 << 20);
    rt.block_on(async {
        client
            .create_table(
                &TableBuilder::new("types", ferry_fixtures::all_types_schema())
                    .add_hash_partitions(&["id"], 2, 0)
                    .num_replicas(1),
            )
            .await
            .expect("create");
        let t = client.open_table("types").await.expect("open");
        let mut session = client
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
            .unwrap();

        // Maxima (key = INT64 min).
        let mut r = t.new_row();
        r.set_i64("id", i64::MIN)
            .unwrap()
            .set_bool("b", true)
            .unwrap()
            .set_i8("i8", i8::MAX)
            .unwrap()
            .set_i16("i16", i16::MAX)
            .unwrap()
            .set_i32("i32", i32::MAX)
            .unwrap()
            .set_i64("i64", i64::MAX)
            .unwrap()
            .set_f32("f", 3.5)
            .unwrap()
            .set_f64("d", 1234.5625)
            .unwrap()
            .set_decimal("dec9", 999_999_999, 2)
            .unwrap()
            .set_decimal("dec18", 999_999_999_999_999_999, 4)
            .unwrap()
            .set_decimal("dec38", MAX_38, 10)
            .unwrap()
            .set_str("s", "héllo \u{1F980}")
            .unwrap()
            .set_binary("bin", &[0x00, 0xff, 0x41, 0x7f])
            .unwrap()
            .set_str("vc", "ab€dé")
            .unwrap()
            .set_timestamp_micros("ts", 253_402_300_799_999_999)
            .unwrap()
            .set_date("dt", 2_932_896)
            .unwrap();
        session.apply(Operation::insert(&t, r)).await.unwrap();

        // Minima (key = INT64 max), empty string and binary.
        let mut r = t.new_row();
        r.set_i64("id", i64::MAX)
            .unwrap()
            .set_bool("b", false)
            .unwrap()
            .set_i8("i8", i8::MIN)
            .unwrap()
            .set_i16("i16", i16::MIN)
            .unwrap()
            .set_i32("i32", i32::MIN)
            .unwrap()
            .set_i64("i64", i64::MIN)
            .unwrap()
            .set_f32("f", -0.125)
            .unwrap()
            .set_f64("d", -2.5e-3)
            .unwrap()
            .set_decimal("dec9", -999_999_999, 2)
            .unwrap()
            .set_decimal("dec18", -999_999_999_999_999_999, 4)
            .unwrap()
            .set_decimal("dec38", -MAX_38, 10)
            .unwrap()
            .set_str("s", "")
            .unwrap()
            .set_binary("bin", &[])
            .unwrap()
            .set_str("vc", "")
            .unwrap()
            .set_timestamp_micros("ts", -1)
            .unwrap()
            .set_date("dt", -719_162)
            .unwrap();
        session.apply(Operation::insert(&t, r)).await.unwrap();

        // All NULL.
        let mut r = t.new_row();
        r.set_i64("id", 0).unwrap();
        for name in [
            "b", "i8", "i16", "i32", "i64", "f", "d", "dec9", "dec18", "dec38", "s", "bin", "vc",
            "ts", "dt",
        ] {
            r.set_null(name).unwrap();
        }
        session.apply(Operation::insert(&t, r)).await.unwrap();

        // A 1 MiB string, and ordinary values.
        let mut r = t.new_row();
        r.set_i64("id", 1)
            .unwrap()
            .set_str("s", &big)
            .unwrap()
            .set_decimal("dec9", 12_345, 2)
            .unwrap()
            .set_decimal("dec18", -5, 4)
            .unwrap()
            .set_decimal("dec38", 1, 10)
            .unwrap()
            .set_timestamp_micros("ts", 1_700_000_000_123_456)
            .unwrap()
            .set_date("dt", 0)
            .unwrap();
        session.apply(Operation::upsert(&t, r)).await.unwrap();
        session.close().await.expect("flush");
    });

    // How the CLI prints each type: DECIMAL as the unscaled value with a
    // _D32/_D64/_D128 width suffix, BINARY with every byte as \xNN,
    // STRING/VARCHAR quoted as UTF-8, UNIXTIME_MICROS as RFC 3339 UTC with
    // microseconds, DATE as year-month-day with the year unpadded (year 1
    // is "1-01-01"), FLOAT/DOUBLE shortest round-trip, NULL as NULL.
    let rows = cli_rows(&c, "types");
    let expected_big = format!(
        "(int64 id=1, bool b=NULL, int8 i8=NULL, int16 i16=NULL, int32 i32=NULL, int64 i64=NULL, float f=NULL, double d=NULL, decimal dec9=12345_D32, decimal dec18=-5_D64, decimal dec38=1_D128, string s=\"{big}\", binary bin=NULL, varchar vc=NULL, unixtime_micros ts=2023-11-14T22:13:20.123456Z, date dt=1970-01-01)"
    );
    let mut expected = vec![
        "(int64 id=-9223372036854775808, bool b=true, int8 i8=127, int16 i16=32767, int32 i32=2147483647, int64 i64=9223372036854775807, float f=3.5, double d=1234.5625, decimal dec9=999999999_D32, decimal dec18=999999999999999999_D64, decimal dec38=99999999999999999999999999999999999999_D128, string s=\"héllo \u{1F980}\", binary bin=\"\\x00\\xff\\x41\\x7f\", varchar vc=\"ab€dé\", unixtime_micros ts=9999-12-31T23:59:59.999999Z, date dt=9999-12-31)".to_owned(),
        "(int64 id=9223372036854775807, bool b=false, int8 i8=-128, int16 i16=-32768, int32 i32=-2147483648, int64 i64=-9223372036854775808, float f=-0.125, double d=-0.0025, decimal dec9=-999999999_D32, decimal dec18=-999999999999999999_D64, decimal dec38=-99999999999999999999999999999999999999_D128, string s=\"\", binary bin=\"\", varchar vc=\"\", unixtime_micros ts=1969-12-31T23:59:59.999999Z, date dt=1-01-01)".to_owned(),
        "(int64 id=0, bool b=NULL, int8 i8=NULL, int16 i16=NULL, int32 i32=NULL, int64 i64=NULL, float f=NULL, double d=NULL, decimal dec9=NULL, decimal dec18=NULL, decimal dec38=NULL, string s=NULL, binary bin=NULL, varchar vc=NULL, unixtime_micros ts=NULL, date dt=NULL)".to_owned(),
        expected_big,
    ];
    expected.sort();
    assert_eq!(
        rows.len(),
        expected.len(),
        "{:#?}",
        rows.iter()
            .map(|r| &r[..r.len().min(400)])
            .collect::<Vec<_>>()
    );
    for (got, want) in rows.iter().zip(&expected) {
        assert!(
            got == want,
            "row differs:\n got: {}\nwant: {}",
            &got[..got.len().min(600)],
            &want[..want.len().min(600)]
        );
    }
}

// ---------------------------------------------------------------------------
// Routing agrees with the server.

#[test]
fn routing_agrees_with_kudu_locate_row() {
    let c = cluster(2, &[]);
    let rt = runtime();
    let client = client(&c);
    let schema = Schema::new(vec![
        col("a", DataType::Int32).key(true).build().unwrap(),
        col("b", DataType::String).key(true).build().unwrap(),
        col("c", DataType::Int64).key(true).build().unwrap(),
        col("v", DataType::Int32).nullable(true).build().unwrap(),
    ])
    .unwrap();
    let bound = |v: i64| {
        let mut r = kudu_client::Row::new(&schema);
        r.set_i64("c", v).unwrap();
        r
    };
    let builder = TableBuilder::new("routing", schema.clone())
        .add_hash_partitions(&["a"], 3, 11)
        .add_hash_partitions(&["b", "c"], 2, 22)
        .set_range_partition_columns(&["c"])
        .add_range_partition(bound(0), bound(1000))
        .add_range_partition(bound(1000), bound(2000))
        .add_range_with_hash_schema(
            (OpType::RangeLowerBound, bound(2000)),
            (OpType::RangeUpperBound, bound(3000)),
            // Kudu 1.17 wants the same number of dimensions in every range.
            &[(&["b"][..], 4, 33), (&["a", "c"][..], 2, 44)],
        )
        .num_replicas(1);

    // Keys: random a, short alphanumeric b (empty included), c over the
    // three ranges plus the gaps below 0 and from 3000 up.
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let keys: Vec<(i32, String, i64)> = (0..1000)
        .map(|_| {
            let len = rng.gen_range(0..6);
            let b: String = (0..len)
                .map(|_| char::from(b"abcxyz0189"[rng.gen_range(0..10)]))
                .collect();
            (rng.gen(), b, rng.gen_range(-300..3300))
        })
        .collect();

    // ferry: partition key -> location cache / master.
    let ours: Vec<Option<String>> = rt.block_on(async {
        client.create_table(&builder).await.expect("create");
        let t = client.open_table("routing").await.expect("open");
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut out = Vec::new();
        for (a, b, cc) in &keys {
            let mut r = t.new_row();
            r.set_i32("a", *a)
                .unwrap()
                .set_str("b", b)
                .unwrap()
                .set_i64("c", *cc)
                .unwrap();
            let pk = t.partition_schema().partition_key(&r).unwrap();
            out.push(
                match internals::locate_with_retry(&client, &t, &pk, deadline)
                    .await
                    .unwrap()
                {
                    Lookup::Tablet(tablet) => Some(tablet.tablet_id.clone()),
                    Lookup::NonCovered { .. } | Lookup::Miss => None,
                },
            );
        }
        out
    });

    // The server's answer for every key, from `kudu table locate_row` (one
    // process per key, ~100 ms of CPU each; about a minute on 2 cores). The
    // per-tablet scans below check the same keys a second way.
    const SAMPLE: usize = 1000;
    let started = Instant::now();
    let masters = c.master_addrs_joined();
    let theirs: Vec<Option<String>> = std::thread::scope(|s| {
        let chunks: Vec<_> = keys[..SAMPLE]
            .chunks(SAMPLE.div_ceil(4))
            .map(|chunk| {
                let (c, masters) = (&c, &masters);
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|(a, b, cc)| {
                            let key = format!("[{a}, \"{b}\", {cc}]");
                            let out = c
                                .kudu(&["table", "locate_row", masters, "routing", &key])
                                .expect("run kudu");
                            if out.status.success() {
                                Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
                            } else {
                                let err = String::from_utf8_lossy(&out.stderr);
                                assert!(
                                    err.contains(
                                        "row does not belong to any currently existing tablet"
                                    ),
                                    "unexpected locate_row failure for {key}: {err}"
                                );
                                None
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        chunks
            .into_iter()
            .flat_map(|h| h.join().expect("cli thread"))
            .collect()
    });
    eprintln!(
        "{SAMPLE} x kudu table locate_row took {:?}",
        started.elapsed()
    );
    let mismatches: Vec<String> = keys
        .iter()
        .zip(&ours)
        .zip(&theirs)
        .filter(|((_, o), t)| o != t)
        .map(|((key, o), t)| format!("{key:?}: ferry {o:?}, kudu {t:?}"))
        .collect();
    assert!(
        mismatches.is_empty(),
        "{} of {SAMPLE} keys routed differently:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(theirs.iter().any(Option::is_none) && theirs.iter().any(Option::is_some));
    let covered = ours.iter().filter(|t| t.is_some()).count();
    let distinct: BTreeSet<&String> = ours.iter().flatten().collect();
    assert!(
        covered > 700 && covered < 1000,
        "covered and non-covered keys: {covered}"
    );
    assert_eq!(distinct.len(), 3 * 2 * 2 + 4 * 2, "every tablet hit");

    // Write all 1000 keys: the covered ones must land in the tablet ferry
    // chose (and a tablet refuses rows outside its partition anyway); the
    // others fail alone as non-covered.
    rt.block_on(async {
        let t = client.open_table("routing").await.unwrap();
        let mut session = client
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
            .unwrap();
        for (a, b, cc) in &keys {
            let mut r = t.new_row();
            r.set_i32("a", *a)
                .unwrap()
                .set_str("b", b)
                .unwrap()
                .set_i64("c", *cc)
                .unwrap();
            session.apply(Operation::upsert(&t, r)).await.unwrap();
        }
        let errors = row_errors(session.close().await);
        assert_eq!(
            errors.len(),
            1000 - covered,
            "{:#?}",
            &errors[..3.min(errors.len())]
        );
        assert!(
            errors.iter().all(|e| e.status.code == StatusCode::NotFound
                && e.status.message.contains("no tablet covers")),
            "{:#?}",
            errors.first()
        );
    });
    // Where the server stored each row: one scan per tablet.
    let mut stored: std::collections::HashMap<(i32, String, i64), String> = Default::default();
    for tablet in &distinct {
        let out = c
            .kudu_ok(&[
                "table",
                "scan",
                &masters,
                "routing",
                "-columns=a,b,c",
                &format!("-tablets={tablet}"),
            ])
            .expect("scan one tablet");
        for line in out.lines().filter(|l| l.starts_with('(')) {
            // (int32 a=1, string b="xy", int64 c=5)
            let field = |name: &str| {
                line.split([',', ')'])
                    .find_map(|f| {
                        f.trim()
                            .split_once(&format!(" {name}="))
                            .map(|(_, v)| v.to_owned())
                    })
                    .unwrap_or_else(|| panic!("no {name} in {line}"))
            };
            let key = (
                field("a").parse().unwrap(),
                field("b").trim_matches('"').to_owned(),
                field("c").parse().unwrap(),
            );
            assert!(
                stored.insert(key, (*tablet).clone()).is_none(),
                "row stored twice: {line}"
            );
        }
    }
    let mut checked = 0;
    for ((a, b, cc), o) in keys.iter().zip(&ours) {
        let got = stored.get(&(*a, b.clone(), *cc));
        assert_eq!(
            got,
            o.as_ref(),
            "key ({a}, {b:?}, {cc}): ferry routed to {o:?}, server stored it in {got:?}"
        );
        checked += usize::from(o.is_some());
    }
    assert_eq!(checked, covered);
    let unique: BTreeSet<_> = keys
        .iter()
        .zip(&ours)
        .filter(|(_, t)| t.is_some())
        .map(|(k, _)| k)
        .collect();
    assert_eq!(stored.len(), unique.len());
}

// ---------------------------------------------------------------------------
// Tablet server crash and restart.

#[test]
fn writes_survive_a_tserver_restart_exactly_once() {
    let mut c = cluster(3, &[]);
    let rt = runtime();
    let client = client(&c);
    let schema = Schema::new(vec![
        col("id", DataType::Int64).key(true).build().unwrap(),
        col("payload", DataType::String).build().unwrap(),
    ])
    .unwrap();
    rt.block_on(async {
        client
            .create_table(
                &TableBuilder::new("restart", schema)
                    .add_hash_partitions(&["id"], 4, 0)
                    .num_replicas(3),
            )
            .await
            .expect("create");
    });

    let applied = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (client, applied, stop) = (client.clone(), applied.clone(), stop.clone());
        rt.spawn(async move {
            let t = client.open_table("restart").await?;
            let mut session: Session = client.new_session_with(
                SessionOptions::default()
                    .flush_mode(FlushMode::AutoFlushBackground)
                    .mutation_buffer_max_ops(200)
                    .flush_interval(Duration::from_millis(50))
                    .operation_timeout(Duration::from_secs(60)),
            )?;
            let mut id = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let mut r = t.new_row();
                r.set_i64("id", id)?
                    .set_str("payload", &format!("row-{id}"))?;
                // INSERT: a retry applied twice would come back as
                // ALREADY_PRESENT, so exactly-once is visible.
                session.apply(Operation::insert(&t, r)).await?;
                id += 1;
                applied.store(id as u64, Ordering::Relaxed);
                if id % 100 == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            let result = session.close().await;
            Ok::<_, Error>((id, result, session.metrics()))
        })
    };
    let wait_for = |n: u64, limit: Duration| {
        let start = Instant::now();
        while applied.load(Ordering::Relaxed) < n && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for(3000, Duration::from_secs(30));
    // Crash a tablet server that leads at least one tablet, so some writes
    // in flight or queued for it must fail over to a new leader.
    let victim = rt.block_on(async {
        let t = client.open_table("restart").await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let tablets = client
            .tablets_in_range(&t, &[], &[], deadline)
            .await
            .unwrap();
        let leader = tablets
            .iter()
            .find_map(|t| t.leader().map(|r| r.addr.clone()))
            .expect("a tablet with a leader");
        c.tserver_addrs()
            .iter()
            .position(|a| *a == leader)
            .unwrap_or_else(|| panic!("leader {leader} is not one of {:?}", c.tserver_addrs()))
    });
    let before_kill = applied.load(Ordering::Relaxed);
    c.kill(DaemonKind::TabletServer, victim)
        .expect("kill a leader's tserver");
    wait_for(before_kill + 3000, Duration::from_secs(8));
    let during = applied.load(Ordering::Relaxed) - before_kill;
    c.start(DaemonKind::TabletServer, victim)
        .expect("restart the tserver");
    let after_start = applied.load(Ordering::Relaxed);
    wait_for(after_start + 3000, Duration::from_secs(30));
    stop.store(true, Ordering::Relaxed);
    let (written, result, metrics) = rt.block_on(writer).expect("writer task").expect("writer");
    eprintln!("rows {written}, {during} applied while tserver {victim} was down; {metrics:?}");
    result.expect("no row errors: every row written exactly once");
    assert_eq!(metrics.inserts, written as u64, "{metrics:?}");
    assert!(
        metrics.write_attempts > metrics.batches_written,
        "some writes were retried: {metrics:?}"
    );
    assert_eq!(cli_count(&c, "restart"), written as u64);
}

// ---------------------------------------------------------------------------
// Errors.

fn errs_schema() -> Schema {
    Schema::new(vec![
        col("k", DataType::Int32).key(true).build().unwrap(),
        col("x", DataType::Int32).nullable(true).build().unwrap(),
        col("y", DataType::String).nullable(true).build().unwrap(),
    ])
    .unwrap()
}

/// Creates table `name` (key `k`, INT32 `x`, STRING `y`; ranges [0, 100)
/// and [200, 300), so [100, 200) is not covered) and opens it.
async fn create_errs(client: &KuduClient, name: &str) -> KuduTable {
    let schema = errs_schema();
    let lo_hi = |lo: i32, hi: i32| {
        let mut l = kudu_client::Row::new(&schema);
        l.set_i32("k", lo).unwrap();
        let mut h = kudu_client::Row::new(&schema);
        h.set_i32("k", hi).unwrap();
        (l, h)
    };
    let (l, h) = lo_hi(0, 100);
    let (l2, h2) = lo_hi(200, 300);
    client
        .create_table(
            &TableBuilder::new(name, schema.clone())
                .set_range_partition_columns(&["k"])
                .add_range_partition(l, h)
                .add_range_partition(l2, h2)
                .num_replicas(1),
        )
        .await
        .expect("create");
    client.open_table(name).await.unwrap()
}

#[test]
fn rows_with_mistakes_are_refused_with_typed_errors() {
    let c = crate::shared::one_tserver();
    let rt = runtime();
    let client = client(&c);
    rt.block_on(async {
        let t = create_errs(&client, "errs").await;
        client
            .create_table(
                &TableBuilder::new("other", ops_schema())
                    .add_hash_partitions(&["id"], 2, 0)
                    .num_replicas(1),
            )
            .await
            .expect("create other");
        let other = client.open_table("other").await.unwrap();
        let mut session = client.new_session();

        // Wrong value type for a column: the row setter refuses it.
        let mut r = t.new_row();
        let err = r.set_str("x", "not a number").unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("'x'"),
            "{err}"
        );
        let err = r.set_i64("k", 1).unwrap_err();
        assert!(err.to_string().contains("'k'"), "{err}");

        // Key column not set.
        let mut r = t.new_row();
        r.set_i32("x", 1).unwrap();
        let err = session.apply(Operation::insert(&t, r)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        assert!(
            err.to_string()
                .contains("primary key column 'k' is not set"),
            "{err}"
        );

        // A row of another table.
        let mut r = other.new_row();
        r.set_i32("id", 1).unwrap();
        let err = session.apply(Operation::insert(&t, r)).await.unwrap_err();
        assert!(err.to_string().contains("applied to table 'errs'"), "{err}");
    });
}

#[test]
fn a_row_in_a_non_covered_range_fails_alone() {
    let c = crate::shared::one_tserver();
    let rt = runtime();
    let client = client(&c);
    rt.block_on(async {
        let t = create_errs(&client, "errs_gap").await;
        let mut session = client.new_session();

        // Non-covered range: sync mode answers with the typed error ...
        let mut r = t.new_row();
        r.set_i32("k", 150).unwrap();
        let err = session.apply(Operation::insert(&t, r)).await.unwrap_err();
        assert!(
            matches!(err, Error::NonCoveredRange { ref table, .. } if table == "errs_gap"),
            "{err:?}"
        );

        // ... and a buffered flush fails that row alone.
        let mut manual = client
            .new_session_with(
                SessionOptions::default()
                    .flush_mode(FlushMode::ManualFlush)
                    .mutation_buffer_max_ops(4),
            )
            .unwrap();
        for k in [5, 150, 250, 99] {
            let mut r = t.new_row();
            r.set_i32("k", k).unwrap().set_i32("x", k).unwrap();
            manual.apply(Operation::insert(&t, r)).await.unwrap();
        }
        // The buffer holds 4 operations: a fifth is refused.
        let mut r = t.new_row();
        r.set_i32("k", 6).unwrap();
        let err = manual.apply(Operation::insert(&t, r)).await.unwrap_err();
        assert!(
            matches!(&err, Error::Status { status, .. } if status.code == StatusCode::IllegalState),
            "{err:?}"
        );
        assert!(err.to_string().contains("flush"), "{err}");
        let errors = row_errors(manual.flush().await);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            (errors[0].operation.as_str(), errors[0].key.as_str()),
            ("INSERT", "(k=150)")
        );
        assert_eq!(errors[0].status.code, StatusCode::NotFound);
        assert!(
            errors[0].status.message.contains("no tablet covers"),
            "{}",
            errors[0]
        );
        manual.close().await.unwrap();
        let err = manual
            .apply(Operation::insert(&t, t.new_row()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("closed"), "{err}");
    });
    assert_eq!(cli_count(&c, "errs_gap"), 3);
}

#[test]
fn a_write_through_a_stale_schema_is_refused_and_a_fresh_handle_works() {
    let c = crate::shared::one_tserver();
    let rt = runtime();
    let client = client(&c);
    let stale = rt.block_on(create_errs(&client, "errs_stale"));

    // The server's schema changes under an open table: swap the names of
    // x (INT32) and y (STRING), so the stale handle sends a STRING where
    // the server has x as ... an INT32 named y. The server refuses; the
    // caller gets a typed error naming the problem, no panic.
    let m = c.master_addrs_joined();
    c.kudu_ok(&["table", "rename_column", &m, "errs_stale", "x", "tmp"])
        .unwrap();
    c.kudu_ok(&["table", "rename_column", &m, "errs_stale", "y", "x"])
        .unwrap();
    c.kudu_ok(&["table", "rename_column", &m, "errs_stale", "tmp", "y"])
        .unwrap();
    rt.block_on(async {
        let mut session = client.new_session();
        let mut r = stale.new_row();
        r.set_i32("k", 7).unwrap().set_i32("x", 7).unwrap();
        let err = session.apply(Operation::insert(&stale, r)).await.unwrap_err();
        eprintln!("stale schema write: {err}");
        assert!(
            matches!(&err, Error::Status { status, .. } if status.code == StatusCode::InvalidArgument
                && status.message.contains("The column 'x' must have type STRING")),
            "{err:?}"
        );
        // With a fresh handle the same write works.
        let fresh = client.open_table("errs_stale").await.unwrap();
        let mut r = fresh.new_row();
        r.set_i32("k", 7).unwrap().set_str("x", "seven").unwrap();
        session.apply(Operation::insert(&fresh, r)).await.unwrap();
    });
    assert_eq!(cli_count(&c, "errs_stale"), 1);
}

#[test]
fn writes_to_a_dead_tablet_server_time_out_naming_the_cause() {
    let mut c = cluster(1, &[]);
    let rt = runtime();
    let client = client(&c);
    rt.block_on(create_errs(&client, "errs"));

    // The only tablet server is gone: retries end at the deadline with a
    // TimedOut naming the attempts and the last cause; in a buffered mode
    // every row of the request carries that status.
    c.kill(DaemonKind::TabletServer, 0).expect("kill tserver");
    rt.block_on(async {
        let t = client.open_table("errs").await.unwrap();
        let options = SessionOptions::default().operation_timeout(Duration::from_secs(2));
        let mut sync = client.new_session_with(options.clone()).unwrap();
        let started = Instant::now();
        let mut r = t.new_row();
        r.set_i32("k", 8).unwrap();
        let err = sync.apply(Operation::insert(&t, r)).await.unwrap_err();
        eprintln!("write to a dead tablet server: {err}");
        match &err {
            Error::TimedOut {
                attempts,
                last,
                operation,
                ..
            } => {
                assert!(*attempts > 1, "{err}");
                assert!(
                    operation.contains("tablet") && operation.contains("'errs'"),
                    "{err}"
                );
                assert!(!last.is_empty(), "{err}");
            }
            other => panic!("expected TimedOut, got {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(sync.metrics().batches_failed, 1);

        let mut manual = client
            .new_session_with(options.flush_mode(FlushMode::ManualFlush))
            .unwrap();
        for k in [8, 9] {
            let mut r = t.new_row();
            r.set_i32("k", k).unwrap();
            manual.apply(Operation::upsert(&t, r)).await.unwrap();
        }
        let errors = row_errors(manual.flush().await);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors
                .iter()
                .all(|e| e.status.code == StatusCode::TimedOut && e.operation == "UPSERT"),
            "{errors:?}"
        );
    });
}

// ---------------------------------------------------------------------------
// Background mode: bounded buffers, interval flushes; commit-wait; authz.

#[test]
fn background_mode_bounds_its_buffers_and_flushes_on_interval() {
    // Tablet servers enforce authz tokens, which expire after 3 s.
    let mut c = cluster_with(
        1,
        &["--authz_token_validity_seconds=3"],
        &["--tserver_enforce_access_control=true"],
    );
    let rt = runtime();
    let client = client(&c);
    let early = rt.block_on(async {
        client
            .create_table(
                &TableBuilder::new("bg", ops_schema())
                    .add_hash_partitions(&["id"], 4, 0)
                    .num_replicas(1),
            )
            .await
            .unwrap();
        client.open_table("bg").await.unwrap()
    });
    let opened = Instant::now();

    // One row, no flush(): the interval sends it.
    let mut session = rt.block_on(async {
        let t = client.open_table("bg").await.unwrap();
        let mut s = client
            .new_session_with(
                SessionOptions::default()
                    .flush_mode(FlushMode::AutoFlushBackground)
                    .flush_interval(Duration::from_millis(200)),
            )
            .unwrap();
        s.apply(op(&t, OpType::Insert, -1, Some("timer"), None))
            .await
            .unwrap();
        s
    });
    let start = Instant::now();
    while cli_count(&c, "bg") == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "interval flush never happened"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    rt.block_on(session.close()).unwrap();

    // Tiny buffers: operations applied but not answered stay bounded by
    // channel + buffer + buffers in flight.
    rt.block_on(async {
        let t = client.open_table("bg").await.unwrap();
        let max_ops = 5;
        let mut s = client
            .new_session_with(
                SessionOptions::default()
                    .flush_mode(FlushMode::AutoFlushBackground)
                    .mutation_buffer_max_ops(max_ops)
                    .external_consistency_mode(ExternalConsistencyMode::CommitWait),
            )
            .unwrap();
        let bound = (max_ops * (2 + kudu_client::write::BUFFERS_IN_FLIGHT) + 1) as u64;
        let mut peak = 0;
        for i in 0..300 {
            s.apply(op(&t, OpType::Upsert, i, Some("bp"), Some(i64::from(i))))
                .await
                .unwrap();
            peak = peak.max(s.metrics().ops_pending());
        }
        s.close().await.unwrap();
        let m = s.metrics();
        assert!(peak <= bound, "pending ops peaked at {peak}, bound {bound}");
        assert_eq!(m.upserts, 300, "{m:?}");
        assert!(m.batches_written >= 300 / max_ops as u64, "{m:?}");
        assert!(
            m.server.commit_wait_micros > 0 || m.server.successful_upserts == 300,
            "{m:?}"
        );
    });
    assert_eq!(cli_count(&c, "bg"), 301);

    // Adaptive batching only extends a buffer that is already due: one
    // that passes the growth limit before its op count keeps taking
    // operations (no stall until the 30 s interval).
    rt.block_on(async {
        client
            .create_table(
                &TableBuilder::new("grow", ops_schema())
                    .add_hash_partitions(&["id"], 4, 0)
                    .num_replicas(1),
            )
            .await
            .unwrap();
        let t = client.open_table("grow").await.unwrap();
        let mut s = client
            .new_session_with(
                SessionOptions::default()
                    .flush_mode(FlushMode::AutoFlushBackground)
                    .mutation_buffer_max_ops(100_000)
                    .adaptive_batching(Some(1024))
                    .flush_interval(Duration::from_secs(30)),
            )
            .unwrap();
        let applied = async {
            for i in 0..2000 {
                s.apply(op(&t, OpType::Upsert, i, Some("grow"), None))
                    .await
                    .unwrap();
            }
            s.flush().await.unwrap();
        };
        tokio::time::timeout(Duration::from_secs(10), applied)
            .await
            .expect("applies and flush finish without waiting for the interval");
        s.close().await.unwrap();
        assert_eq!(s.metrics().upserts, 2000, "{:?}", s.metrics());
    });
    assert_eq!(cli_count(&c, "grow"), 2000);

    // Many small buffers in flight, 50 versions of each of 20 keys
    // interleaved: the last version applied must win everywhere. Adaptive
    // batching keeps that order while it merges the buffers that wait for
    // a send into far fewer requests. The tablet server is paused while
    // the adaptive session applies, so its first sends are surely still
    // in flight (otherwise whether apply outruns a round trip is up to
    // the scheduler).
    for (table, adaptive) in [("order", false), ("order_adaptive", true)] {
        let t = rt.block_on(async {
            client
                .create_table(
                    &TableBuilder::new(table, ops_schema())
                        .add_hash_partitions(&["id"], 4, 0)
                        .num_replicas(1),
                )
                .await
                .unwrap();
            client.open_table(table).await.unwrap()
        });
        if adaptive {
            c.pause(DaemonKind::TabletServer, 0).unwrap();
        }
        let mut s = rt.block_on(async {
            let mut s = client
                .new_session_with(
                    SessionOptions::default()
                        .flush_mode(FlushMode::AutoFlushBackground)
                        .mutation_buffer_max_ops(7)
                        .adaptive_batching(adaptive.then_some(1 << 20)),
                )
                .unwrap();
            for version in 0..50i64 {
                for id in 0..20 {
                    s.apply(op(&t, OpType::Upsert, id, Some("v"), Some(version)))
                        .await
                        .unwrap();
                }
            }
            s
        });
        if adaptive {
            c.resume(DaemonKind::TabletServer, 0).unwrap();
        }
        let batches = rt.block_on(async {
            s.close().await.unwrap();
            assert_eq!(s.metrics().upserts, 1000, "{:?}", s.metrics());
            s.metrics().batches_written
        });
        if adaptive {
            // Mostly the two 7-op buffers sent into the pause, then one
            // with the rest (each over up to 4 tablets); a send that gets
            // through before SIGSTOP lands adds a buffer or two. Without
            // merging it is one buffer per 7 ops.
            assert!(batches < 1000 / 7 / 4, "{table}: {batches} write requests");
        } else {
            assert!(batches >= 1000 / 7, "{table}: {batches} write requests");
        }
        let rows = cli_rows(&c, table);
        assert_eq!(rows.len(), 20);
        assert!(
            rows.iter()
                .all(|r| r.ends_with("string v=\"v\", int64 n=49)")),
            "{table}: {rows:#?}"
        );
    }

    // The tablet server enforces authz tokens: a write without one is
    // refused, so the successes above prove the session attaches it.
    rt.block_on(async {
        use kudu_client::pb::tserver::{tablet_server_service::Write, WriteRequestPb};
        use kudu_client::rpc::{CallOptions, ConnectOptions, ConnectionPool};
        let t = client.open_table("bg").await.unwrap();
        let mut r = t.new_row();
        r.set_i32("id", 1000).unwrap();
        let pk = t.partition_schema().partition_key(&r).unwrap();
        let Lookup::Tablet(tablet) = internals::locate_with_retry(
            &client,
            &t,
            &pk,
            Instant::now() + Duration::from_secs(30),
        )
        .await
        .unwrap() else {
            panic!("not covered")
        };
        let leader = tablet.leader().expect("leader").addr.clone();
        let req = WriteRequestPb {
            tablet_id: tablet.tablet_id.as_bytes().to_vec(),
            schema: Some(internals::write_schema_pb(t.schema()).unwrap()),
            row_operations: Some(
                internals::encode_row_operations(t.schema(), &[(OpType::Insert, &r)]).unwrap(),
            ),
            ..Default::default()
        };
        let pool = ConnectionPool::new(ConnectOptions::default());
        let resp = pool
            .call::<Write>(
                &leader,
                &req,
                &CallOptions::with_timeout(Duration::from_secs(10)),
            )
            .await;
        eprintln!("write without authz token: {resp:?}");
        let refused = match &resp {
            Err(Error::Rpc { message, .. }) => {
                message.to_lowercase().contains("authz") || message.to_lowercase().contains("token")
            }
            Ok(r) => r
                .body
                .error
                .as_ref()
                .is_some_and(|e| format!("{e:?}").to_lowercase().contains("token")),
            Err(_) => false,
        };
        assert!(
            refused,
            "a write without an authz token should be refused: {resp:?}"
        );
    });

    // A table handle whose token has expired: the session fetches a new
    // one and the write goes through.
    std::thread::sleep(Duration::from_secs(4).saturating_sub(opened.elapsed()));
    rt.block_on(async {
        let mut s = client.new_session();
        s.apply(op(&early, OpType::Insert, 5000, Some("late"), None))
            .await
            .expect("write with a refreshed token");
        s.apply(op(&early, OpType::Insert, 5001, Some("late"), None))
            .await
            .expect("reuses the refreshed token");
        let m = s.metrics();
        assert_eq!(
            (m.batches_written, m.write_attempts),
            (2, 3),
            "one refusal, one refresh: {m:?}"
        );
    });
    assert_eq!(cli_count(&c, "bg"), 303);
}
