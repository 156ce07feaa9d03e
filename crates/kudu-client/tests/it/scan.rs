//! Scans against real Kudu clusters from `ferry-testkit`:
//!
//! - rows written by `kudu perf loadgen` read back (row-wise, columnar,
//!   count-only, closest replica) and checked against `kudu table scan`;
//! - snapshot vs. latest reads, projections, every predicate kind, limits,
//!   primary-key bounds, tables with non-covered ranges;
//! - diff-scan semantics, and chained diff windows replayed onto a snapshot
//!   that must equal an in-memory model after ≥ 10 000 random operations;
//! - fault tolerance: a tablet server killed mid-scan (RF 3), a leader
//!   master change, scanner expiry and keep-alives;
//! - a diff scan older than the history window fails with SnapshotTooOld;
//! - splits: serialize → deserialize → execute equals one full scan, and a
//!   resumed split continues without repeats.
//!
//! The loadgen tests share one cluster while they run
//! (`ferry_fixtures::Shared`); the read-mode tests use the binary's shared
//! three-tablet-server cluster (`crate::shared`); every test uses its own
//! tables.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::Shared;
use ferry_testkit::{DaemonKind, MiniCluster};
use futures::TryStreamExt;
use kudu_client::scan::{ComparisonOp, Predicate, ReplicaSelection, RowBatch, Scanner, Split};
use kudu_client::write::{FlushMode, Operation, Session, SessionOptions};
use kudu_client::{
    ColumnSchema, DataType, Error, HybridTime, KuduClient, KuduTable, Schema, TableBuilder, Value,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------------------
// Helpers.

/// Values of the non-key columns of table `kv`.
#[derive(Debug, Clone, PartialEq)]
struct Vals {
    val: Option<i32>,
    s: Option<String>,
}

type Model = BTreeMap<i64, Vals>;

fn kv_schema() -> Schema {
    Schema::new(vec![
        ColumnSchema::builder("key", DataType::Int64)
            .key(true)
            .build()
            .expect("key"),
        ColumnSchema::builder("val", DataType::Int32)
            .nullable(true)
            .build()
            .expect("val"),
        ColumnSchema::builder("s", DataType::String)
            .nullable(true)
            .build()
            .expect("s"),
        ColumnSchema::builder("d", DataType::Double)
            .nullable(true)
            .build()
            .expect("d"),
    ])
    .expect("schema")
}

fn key_row(schema: &Schema, k: i64) -> kudu_client::Row {
    let mut r = kudu_client::Row::new(schema);
    r.set_i64("key", k).expect("key");
    r
}

/// HASH(key) 3 buckets × RANGE(key) [0, 100 000) and [200 000, 300 000):
/// six tablets and a non-covered range in between.
async fn create_kv(client: &KuduClient, name: &str, replicas: i32) -> KuduTable {
    let schema = kv_schema();
    let b = TableBuilder::new(name, schema.clone())
        .add_hash_partitions(&["key"], 3, 0)
        .set_range_partition_columns(&["key"])
        .add_range_partition(key_row(&schema, 0), key_row(&schema, 100_000))
        .add_range_partition(key_row(&schema, 200_000), key_row(&schema, 300_000))
        .num_replicas(replicas);
    client.create_table(&b).await.expect("create table");
    client.open_table(name).await.expect("open table")
}

/// One tablet (default range partitioning), `replicas` replicas.
async fn create_single_tablet(client: &KuduClient, name: &str, replicas: i32) -> KuduTable {
    let b = TableBuilder::new(name, kv_schema()).num_replicas(replicas);
    client.create_table(&b).await.expect("create table");
    client.open_table(name).await.expect("open table")
}

fn session(client: &KuduClient) -> Session {
    client
        .new_session_with(
            SessionOptions::default()
                .flush_mode(FlushMode::ManualFlush)
                .mutation_buffer_max_ops(100_000)
                .mutation_buffer_max_bytes(64 << 20),
        )
        .expect("session")
}

fn full_row(table: &KuduTable, k: i64, v: &Vals) -> kudu_client::Row {
    let mut r = table.new_row();
    r.set_i64("key", k).expect("key");
    match v.val {
        Some(x) => {
            r.set_i32("val", x).expect("val");
            r.set_f64("d", f64::from(x) / 100.0).expect("d");
        }
        None => {
            r.set_null("val").expect("val");
            r.set_null("d").expect("d");
        }
    }
    match &v.s {
        Some(s) => r.set_str("s", s).expect("s"),
        None => r.set_null("s").expect("s"),
    };
    r
}

#[derive(Debug, Clone)]
enum Op {
    Insert(i64, Vals),
    Update(i64, Vals),
    Delete(i64),
}

/// Applies `ops` in order (one flush) and mirrors them into `model`.
async fn apply(client: &KuduClient, table: &KuduTable, model: &mut Model, ops: &[Op]) {
    let mut s = session(client);
    for op in ops {
        let o = match op {
            Op::Insert(k, v) => {
                model.insert(*k, v.clone());
                Operation::insert(table, full_row(table, *k, v))
            }
            Op::Update(k, v) => {
                model.insert(*k, v.clone());
                Operation::update(table, full_row(table, *k, v))
            }
            Op::Delete(k) => {
                model.remove(k);
                Operation::delete(table, key_row(table.schema(), *k))
            }
        };
        s.apply(o).await.expect("apply");
    }
    s.flush().await.expect("flush");
    s.close().await.expect("close session");
}

fn vals(rng: &mut StdRng) -> Vals {
    Vals {
        val: rng.gen_bool(0.9).then(|| rng.gen_range(-1000..1000)),
        s: rng
            .gen_bool(0.9)
            .then(|| format!("s{:04}", rng.gen_range(0..10_000))),
    }
}

/// `n` inserts of keys `from..from + n`.
fn inserts(rng: &mut StdRng, from: i64, n: i64) -> Vec<Op> {
    (from..from + n).map(|k| Op::Insert(k, vals(rng))).collect()
}

/// A hybrid time after everything this client has seen, from the cluster's
/// clock: writes acknowledged before it are in a snapshot at it.
async fn now(client: &KuduClient) -> HybridTime {
    let clock = client.server_clock().await.expect("server clock");
    let seen = client
        .last_propagated_timestamp()
        .map_or(0, HybridTime::raw);
    clock.max(HybridTime::from_raw(seen + 1))
}

/// Reads a kv-table row (any projection containing key/val/s).
fn row_vals(row: &kudu_client::scan::RowView<'_>) -> (i64, Vals) {
    let key = row.get_i64("key").expect("key");
    let val = if row.is_null("val").expect("val") {
        None
    } else {
        Some(row.get_i32("val").expect("val"))
    };
    let s = if row.is_null("s").expect("s") {
        None
    } else {
        Some(row.get_str("s").expect("s").to_owned())
    };
    (key, Vals { val, s })
}

async fn collect(scanner: Scanner) -> Vec<RowBatch> {
    scanner.try_collect().await.expect("scan")
}

/// Scans into a model, asserting that no key comes back twice.
async fn scan_model(scanner: Scanner) -> Model {
    let mut m = Model::new();
    for b in collect(scanner).await {
        for r in b.rows() {
            let (k, v) = row_vals(&r);
            assert!(m.insert(k, v).is_none(), "key {k} returned twice");
        }
    }
    m
}

/// Keys of a scan, in the order returned.
async fn scan_keys(scanner: Scanner) -> Vec<i64> {
    let mut keys = Vec::new();
    for b in collect(scanner).await {
        for r in b.rows() {
            keys.push(r.get_i64("key").expect("key"));
        }
    }
    keys
}

fn total_rows(batches: &[RowBatch]) -> usize {
    batches.iter().map(RowBatch::num_rows).sum()
}

/// Blocking cluster operations from async tests.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn assert_unique_and_complete(keys: &[i64], expected: &BTreeSet<i64>) {
    let set: BTreeSet<i64> = keys.iter().copied().collect();
    assert_eq!(
        set.len(),
        keys.len(),
        "{} duplicate key(s)",
        keys.len() - set.len()
    );
    let missing: Vec<_> = expected.difference(&set).take(5).collect();
    let extra: Vec<_> = set.difference(expected).take(5).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, unexpected {extra:?}"
    );
}

// ---------------------------------------------------------------------------
// Rows from the Kudu CLI.

/// The cluster with the table `kudu perf loadgen` wrote (2 000 rows), which
/// the loadgen tests share while they run.
static LOADGEN: Shared<MiniCluster> = Shared::new();

/// The loadgen cluster, a client, the loadgen table, and its keys as the
/// CLI's own scan returns them.
async fn loadgen_table() -> (Arc<MiniCluster>, KuduClient, KuduTable, BTreeSet<i64>) {
    let c = blocking(|| {
        LOADGEN.get(|| {
            let c = MiniCluster::builder().tservers(3).start().expect("cluster");
            c.kudu_ok(&[
                "perf",
                "loadgen",
                &c.master_addrs_joined(),
                "--num_rows_per_thread=1000",
                "--num_threads=2",
                "--keep_auto_table",
            ])
            .expect("loadgen");
            c
        })
    });
    let masters = c.master_addrs_joined();
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let tables = client.list_tables("loadgen_auto").await.expect("list");
    assert_eq!(tables.len(), 1, "{tables:?}");
    let name = tables[0].name.clone();
    let table = client.open_table(&name).await.expect("open");

    // The CLI's own scan: keys and total.
    let out = c
        .kudu_ok(&["table", "scan", &masters, &name, "-columns=key"])
        .expect("kudu table scan");
    let cli_keys: BTreeSet<i64> = out
        .lines()
        .filter_map(|l| {
            l.strip_prefix("(int64 key=")?
                .strip_suffix(')')?
                .parse()
                .ok()
        })
        .collect();
    assert!(out.contains("Total count 2000"), "{out}");
    assert_eq!(cli_keys.len(), 2000);
    (c, client, table, cli_keys)
}

/// Every column of every row, row-wise, by key.
async fn rowwise_values(client: &KuduClient, table: &KuduTable) -> BTreeMap<i64, Vec<Value>> {
    let batches = collect(client.scan_builder(table).build().expect("build")).await;
    let mut rowwise = BTreeMap::new();
    for b in &batches {
        for r in b.rows() {
            rowwise.insert(
                r.get_i64("key").expect("key"),
                r.to_values().expect("values"),
            );
        }
    }
    rowwise
}

#[tokio::test(flavor = "multi_thread")]
async fn a_row_wise_scan_reads_what_loadgen_wrote_and_the_cli_sees() {
    let (_c, client, table, cli_keys) = loadgen_table().await;
    // Row-wise, every column.
    let batches = collect(client.scan_builder(&table).build().expect("build")).await;
    assert_eq!(total_rows(&batches), 2000);
    let mut keys = Vec::new();
    let mut rowwise = BTreeMap::new();
    for b in &batches {
        assert_eq!(b.schema().len(), 3);
        for r in b.rows() {
            keys.push(r.get_i64("key").expect("key"));
            rowwise.insert(
                r.get_i64("key").expect("key"),
                r.to_values().expect("values"),
            );
        }
    }
    assert_unique_and_complete(&keys, &cli_keys);
    // loadgen writes key k, int_val and string_val derived from a sequence.
    assert!(rowwise
        .values()
        .all(|v| matches!(v[2], Value::String(ref s) if s.contains('.'))));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_columnar_scan_gives_the_row_wise_values() {
    let (_c, client, table, _) = loadgen_table().await;
    let rowwise = rowwise_values(&client, &table).await;
    assert_eq!(rowwise.len(), 2000);
    // Columnar layout gives the same values.
    let columnar = collect(
        client
            .scan_builder(&table)
            .columnar(true)
            .build()
            .expect("build"),
    )
    .await;
    let mut col_values = BTreeMap::new();
    for b in &columnar {
        for r in b.rows() {
            col_values.insert(
                r.get_i64("key").expect("key"),
                r.to_values().expect("values"),
            );
        }
    }
    assert_eq!(col_values, rowwise);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_projection_counts_every_row_in_every_tablet() {
    let (_c, client, table, _) = loadgen_table().await;
    // Count only (empty projection).
    let count = collect(
        client
            .scan_builder(&table)
            .projection::<&str>(&[])
            .build()
            .expect("build"),
    )
    .await;
    assert_eq!(total_rows(&count), 2000);
    assert!(count.iter().all(|b| b.schema().is_empty()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fault_tolerant_closest_replica_scan_is_complete_and_ordered_per_tablet() {
    let (_c, client, table, cli_keys) = loadgen_table().await;
    let ft = scan_keys(
        client
            .scan_builder(&table)
            .projection(&["key"])
            .fault_tolerant(true)
            .replica_selection(ReplicaSelection::ClosestReplica)
            .batch_size_bytes(512)
            .build()
            .expect("build"),
    )
    .await;
    assert_unique_and_complete(&ft, &cli_keys);
    // Ordered per tablet: within each run of keys from one tablet the keys
    // ascend, so the number of descents is below the number of tablets.
    let descents = ft.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(
        descents < 8,
        "{descents} descents in an ordered scan of 8 tablets"
    );
}

// ---------------------------------------------------------------------------
// Read modes, projections, predicates, limits, bounds.

/// A kv table on the shared cluster, loaded the same way for every reading
/// test: 1000 rows in the first range and 200 in the second (across the
/// gap); then, after `t`, 500 more rows, 100 updates and 50 deletes.
struct Loaded {
    _cluster: Arc<MiniCluster>,
    client: KuduClient,
    table: KuduTable,
    t: HybridTime,
    /// The rows as of `t`.
    at_t: Model,
    /// The rows now.
    model: Model,
}

async fn loaded_kv(name: &str) -> Loaded {
    // The cluster the reading tests share while they run.
    let cluster = blocking(crate::shared::three_tservers);
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let table = create_kv(&client, name, 3).await;
    let mut rng = StdRng::seed_from_u64(7);
    let mut model = Model::new();

    let mut ops = inserts(&mut rng, 0, 1000);
    ops.extend(inserts(&mut rng, 200_000, 200));
    apply(&client, &table, &mut model, &ops).await;
    let t = now(&client).await;
    let at_t = model.clone();

    let mut later = inserts(&mut rng, 1000, 500);
    later.extend((0..100).map(|k| Op::Update(k, vals(&mut rng))));
    later.extend((100..150).map(Op::Delete));
    apply(&client, &table, &mut model, &later).await;
    Loaded {
        _cluster: cluster,
        client,
        table,
        t,
        at_t,
        model,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_sees_exactly_the_rows_committed_before_it() {
    let Loaded {
        _cluster,
        client,
        table,
        t,
        at_t,
        ..
    } = loaded_kv("a_snapshot_sees_exactly_the_rows_committed_before_it").await;
    // A snapshot at t sees exactly the rows committed before it.
    let snap = scan_model(
        client
            .scan_builder(&table)
            .snapshot(t)
            .batch_size_bytes(4096)
            .build()
            .expect("b"),
    )
    .await;
    assert_eq!(snap, at_t);
    // So does a fault-tolerant one, and the scanner reports the time.
    let mut s = client
        .scan_builder(&table)
        .snapshot(t)
        .fault_tolerant(true)
        .build()
        .expect("b");
    assert_eq!(s.snapshot_timestamp(), Some(t));
    let mut m = Model::new();
    while let Some(b) = s.next_batch().await.expect("batch") {
        m.extend(b.rows().map(|r| row_vals(&r)));
    }
    assert_eq!(m, at_t);
}

#[tokio::test(flavor = "multi_thread")]
async fn latest_reads_and_a_snapshot_at_now_see_every_row() {
    let Loaded {
        _cluster,
        client,
        table,
        t,
        model,
        ..
    } = loaded_kv("latest_reads_and_a_snapshot_at_now_see_every_row").await;
    // READ_LATEST and a snapshot at "now" see everything.
    assert_eq!(
        scan_model(client.scan_builder(&table).build().expect("b")).await,
        model
    );
    let mut s = client
        .scan_builder(&table)
        .snapshot_now()
        .build()
        .expect("b");
    assert_eq!(s.snapshot_timestamp(), None);
    let mut m = Model::new();
    while let Some(b) = s.next_batch().await.expect("batch") {
        m.extend(b.rows().map(|r| row_vals(&r)));
    }
    assert_eq!(m, model);
    let chosen = s
        .snapshot_timestamp()
        .expect("snapshot picked by the server");
    assert!(chosen > t, "{chosen} vs {t}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_projection_returns_the_chosen_columns_in_its_order() {
    let Loaded {
        _cluster,
        client,
        table,
        model,
        ..
    } = loaded_kv("a_projection_returns_the_chosen_columns_in_its_order").await;
    // Projection: chosen columns, in the given order.
    let batches = collect(
        client
            .scan_builder(&table)
            .projection(&["s", "key"])
            .build()
            .expect("b"),
    )
    .await;
    let names: Vec<&str> = batches[0]
        .schema()
        .columns()
        .iter()
        .map(|c| c.name())
        .collect();
    assert_eq!(names, ["s", "key"]);
    for b in &batches {
        for r in b.rows() {
            let k = r.get_i64(1).expect("key");
            let s = (!r.is_null(0).expect("s")).then(|| r.get_str(0).expect("s").to_owned());
            assert_eq!(s, model[&k].s);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_projection_counts_rows() {
    let Loaded {
        _cluster,
        client,
        table,
        model,
        ..
    } = loaded_kv("an_empty_projection_counts_rows").await;
    // Empty projection counts rows.
    let count = collect(
        client
            .scan_builder(&table)
            .projection::<&str>(&[])
            .build()
            .expect("b"),
    )
    .await;
    assert_eq!(total_rows(&count), model.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn every_predicate_kind_selects_what_the_model_selects() {
    let Loaded {
        _cluster,
        client,
        table,
        model,
        ..
    } = loaded_kv("every_predicate_kind_selects_what_the_model_selects").await;
    // Every predicate kind, checked against the model.
    use ComparisonOp::*;
    type Check = Box<dyn Fn(i64, &Vals) -> bool>;
    let cases: Vec<(Vec<Predicate>, Check)> = vec![
        (
            vec![Predicate::comparison("key", Less, 100i64)],
            Box::new(|k, _| k < 100),
        ),
        (
            vec![Predicate::comparison("key", LessEqual, 100i64)],
            Box::new(|k, _| k <= 100),
        ),
        (
            vec![Predicate::comparison("key", Equal, 777i64)],
            Box::new(|k, _| k == 777),
        ),
        (
            vec![Predicate::comparison("key", GreaterEqual, 1400i64)],
            Box::new(|k, _| k >= 1400),
        ),
        (
            vec![Predicate::comparison("key", Greater, 1400i64)],
            Box::new(|k, _| k > 1400),
        ),
        (
            vec![Predicate::comparison("key", Greater, i64::MAX)],
            Box::new(|_, _| false),
        ),
        (
            vec![Predicate::comparison("key", LessEqual, i64::MAX)],
            Box::new(|_, _| true),
        ),
        (
            vec![Predicate::comparison("val", Greater, 500)],
            Box::new(|_, v| v.val.is_some_and(|x| x > 500)),
        ),
        (
            vec![Predicate::comparison("val", LessEqual, -500)],
            Box::new(|_, v| v.val.is_some_and(|x| x <= -500)),
        ),
        (
            vec![Predicate::comparison("d", Less, 0.5f64)],
            Box::new(|_, v| v.val.is_some_and(|x| f64::from(x) / 100.0 < 0.5)),
        ),
        (
            vec![Predicate::comparison("s", GreaterEqual, "s5000")],
            Box::new(|_, v| v.s.as_deref().is_some_and(|s| s >= "s5000")),
        ),
        (
            vec![Predicate::comparison("s", Greater, "s5000")],
            Box::new(|_, v| v.s.as_deref().is_some_and(|s| s > "s5000")),
        ),
        (
            vec![Predicate::in_list(
                "key",
                [5i64, 6, 7, 1100, 200_010, 99_999],
            )],
            Box::new(|k, _| [5, 6, 7, 1100, 200_010].contains(&k)),
        ),
        (
            vec![Predicate::in_list("key", Vec::<i64>::new())],
            Box::new(|_, _| false),
        ),
        (
            vec![Predicate::is_null("val")],
            Box::new(|_, v| v.val.is_none()),
        ),
        (
            vec![Predicate::is_not_null("s")],
            Box::new(|_, v| v.s.is_some()),
        ),
        (
            vec![
                Predicate::comparison("key", GreaterEqual, 200_000i64),
                Predicate::is_not_null("val"),
                Predicate::comparison("val", Less, 0),
            ],
            Box::new(|k, v| k >= 200_000 && v.val.is_some_and(|x| x < 0)),
        ),
    ];
    for (preds, check) in &cases {
        let mut b = client.scan_builder(&table).batch_size_bytes(2048);
        for p in preds {
            b = b.predicate(p.clone());
        }
        let got: BTreeSet<i64> = scan_keys(b.build().expect("build"))
            .await
            .into_iter()
            .collect();
        let want: BTreeSet<i64> = model
            .iter()
            .filter(|(k, v)| check(**k, v))
            .map(|(k, _)| *k)
            .collect();
        let desc: Vec<String> = preds.iter().map(ToString::to_string).collect();
        assert_eq!(got, want, "predicates {desc:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn limits_hold_across_batches_and_tablets() {
    let Loaded {
        _cluster,
        client,
        table,
        model,
        ..
    } = loaded_kv("limits_hold_across_batches_and_tablets").await;
    // Limits, across batches and tablets.
    for limit in [1u64, 17, 250, 5000] {
        let batches = collect(
            client
                .scan_builder(&table)
                .limit(limit)
                .batch_size_bytes(1024)
                .build()
                .expect("b"),
        )
        .await;
        assert_eq!(
            total_rows(&batches) as u64,
            limit.min(model.len() as u64),
            "limit {limit}"
        );
    }
    let none = collect(client.scan_builder(&table).limit(0).build().expect("b")).await;
    assert_eq!(total_rows(&none), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn primary_key_bounds_work_as_rows_and_as_encoded_keys() {
    let Loaded {
        _cluster,
        client,
        table,
        model,
        ..
    } = loaded_kv("primary_key_bounds_work_as_rows_and_as_encoded_keys").await;
    // Primary-key bounds, as rows and as encoded keys.
    let lo = key_row(table.schema(), 300);
    let hi = key_row(table.schema(), 1200);
    let got: BTreeSet<i64> = scan_keys(
        client
            .scan_builder(&table)
            .lower_bound(&lo)
            .exclusive_upper_bound(&hi)
            .build()
            .expect("b"),
    )
    .await
    .into_iter()
    .collect();
    let want: BTreeSet<i64> = model.range(300..1200).map(|(k, _)| *k).collect();
    assert_eq!(got, want);
    let encoded = kudu_client::internals::encode_primary_key(&lo).expect("encode");
    let got = scan_keys(
        client
            .scan_builder(&table)
            .lower_bound_key(encoded)
            .fault_tolerant(true)
            .batch_size_bytes(512)
            .build()
            .expect("b"),
    )
    .await;
    assert_unique_and_complete(&got, &model.range(300..).map(|(k, _)| *k).collect());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_scans_are_refused_before_anything_is_sent() {
    let Loaded {
        _cluster,
        client,
        table,
        ..
    } = loaded_kv("bad_scans_are_refused_before_anything_is_sent").await;
    use ComparisonOp::*;
    // Clear errors for bad scans, before anything is sent.
    let err = client
        .scan_builder(&table)
        .predicate(Predicate::comparison("key", Equal, 5i32))
        .build()
        .expect_err("type mismatch");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(
        err.to_string().contains("INT64") && err.to_string().contains("i32"),
        "{err}"
    );
    let err = client
        .scan_builder(&table)
        .projection(&["nope"])
        .build()
        .expect_err("unknown column");
    assert!(err.to_string().contains("nope"), "{err}");
    let err = client
        .scan_builder(&table)
        .predicate(Predicate::comparison("val", Less, Value::Null))
        .build()
        .expect_err("null comparison");
    assert!(err.to_string().contains("is_null"), "{err}");
}

// ---------------------------------------------------------------------------
// Diff scans.

#[tokio::test(flavor = "multi_thread")]
async fn diff_scan_semantics() {
    let c = MiniCluster::builder().tservers(1).start().expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    // A real column named like the virtual one: the scanner must pick
    // another name for IS_DELETED.
    let schema = Schema::new(vec![
        ColumnSchema::builder("key", DataType::Int64)
            .key(true)
            .build()
            .expect("key"),
        ColumnSchema::builder("val", DataType::Int32)
            .nullable(true)
            .build()
            .expect("val"),
        ColumnSchema::builder("is_deleted", DataType::Bool)
            .nullable(true)
            .build()
            .expect("col"),
    ])
    .expect("schema");
    client
        .create_table(
            &TableBuilder::new("d", schema.clone())
                .add_hash_partitions(&["key"], 2, 0)
                .num_replicas(1),
        )
        .await
        .expect("create");
    let table = client.open_table("d").await.expect("open");
    let row = |k: i64, v: i32| {
        let mut r = table.new_row();
        r.set_i64("key", k)
            .expect("k")
            .set_i32("val", v)
            .expect("v")
            .set_bool("is_deleted", true)
            .expect("b");
        r
    };
    let key = |k: i64| key_row(table.schema(), k);
    let mut s = session(&client);
    s.apply(Operation::insert(&table, row(1, 10)))
        .await
        .expect("A");
    s.apply(Operation::insert(&table, row(2, 20)))
        .await
        .expect("B");
    s.apply(Operation::insert(&table, row(5, 50)))
        .await
        .expect("E");
    s.flush().await.expect("flush");
    let t0 = now(&client).await;
    // Inside the window: delete A; insert and delete C; update B; insert D.
    s.apply(Operation::delete(&table, key(1)))
        .await
        .expect("del A");
    s.apply(Operation::insert(&table, row(3, 30)))
        .await
        .expect("C");
    s.flush().await.expect("flush");
    s.apply(Operation::delete(&table, key(3)))
        .await
        .expect("del C");
    s.apply(Operation::update(&table, row(2, 21)))
        .await
        .expect("upd B");
    s.apply(Operation::insert(&table, row(4, 40)))
        .await
        .expect("D");
    s.flush().await.expect("flush");
    let t1 = now(&client).await;
    // After the window: not seen.
    s.apply(Operation::update(&table, row(5, 51)))
        .await
        .expect("upd E");
    s.apply(Operation::delete(&table, key(4)))
        .await
        .expect("del D");
    s.flush().await.expect("flush");

    let scanner = client
        .scan_builder(&table)
        .diff(t0, t1)
        .build()
        .expect("diff");
    let cols: Vec<String> = scanner
        .projection_schema()
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    assert_eq!(cols, ["key", "val", "is_deleted", "is_deleted_"]);
    let mut got = BTreeMap::new();
    for b in collect(scanner).await {
        for r in b.rows() {
            let k = r.get_i64("key").expect("key");
            let v = (!r.is_deleted()).then(|| r.get_i32("val").expect("val"));
            if !r.is_deleted() {
                // The real column keeps its own value.
                assert!(r.get_bool("is_deleted").expect("real column"));
            }
            assert!(
                got.insert(k, (r.is_deleted(), v)).is_none(),
                "key {k} twice"
            );
        }
    }
    let want = BTreeMap::from([
        (1, (true, None)),
        (2, (false, Some(21))),
        (4, (false, Some(40))),
    ]);
    assert_eq!(got, want, "diff [t0, t1)");

    // A projection without `val`, and an empty window.
    let keys = scan_keys(
        client
            .scan_builder(&table)
            .projection(&["key"])
            .diff(t0, t1)
            .build()
            .expect("b"),
    )
    .await;
    assert_eq!(keys.len(), 3);
    let empty = collect(client.scan_builder(&table).diff(t1, t1).build().expect("b")).await;
    assert_eq!(total_rows(&empty), 0);
    let err = client
        .scan_builder(&table)
        .diff(t1, t0)
        .build()
        .expect_err("start after end");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

/// Replays diff rows onto `model`; returns how many rows came back.
async fn replay_diff(scanner: Scanner, model: &mut Model) -> usize {
    let mut seen = BTreeSet::new();
    for b in collect(scanner).await {
        for r in b.rows() {
            let k = r.get_i64("key").expect("key");
            assert!(seen.insert(k), "key {k} twice in one diff scan");
            if r.is_deleted() {
                model.remove(&k);
            } else {
                model.insert(k, row_vals(&r).1);
            }
        }
    }
    seen.len()
}

/// Random inserts, updates and deletes over a key space of `keys` keys.
fn random_ops(rng: &mut StdRng, model: &Model, keys: i64, n: usize) -> Vec<Op> {
    let mut live: BTreeSet<i64> = model.keys().copied().collect();
    let mut ops = Vec::with_capacity(n);
    while ops.len() < n {
        let k = if rng.gen_bool(0.5) {
            rng.gen_range(0..keys)
        } else {
            rng.gen_range(200_000..200_000 + keys / 4)
        };
        if live.contains(&k) {
            if rng.gen_bool(0.5) {
                ops.push(Op::Update(k, vals(rng)));
            } else {
                ops.push(Op::Delete(k));
                live.remove(&k);
            }
        } else {
            ops.push(Op::Insert(k, vals(rng)));
            live.insert(k);
        }
    }
    ops
}

#[tokio::test(flavor = "multi_thread")]
async fn chained_diff_windows_lose_and_repeat_nothing() {
    let c = MiniCluster::builder().tservers(3).start().expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let table = create_kv(&client, "chain", 1).await;
    let mut rng = StdRng::seed_from_u64(2024);
    let mut model = Model::new();
    let started = Instant::now();

    apply(&client, &table, &mut model, &inserts(&mut rng, 0, 2000)).await;
    let t0 = now(&client).await;
    let mut times = vec![t0];
    let mut models = vec![model.clone()];
    let mut total_ops = 0;
    // Four windows of 3 000 random operations each, in flushes of 500.
    for _ in 0..4 {
        for _ in 0..6 {
            let ops = random_ops(&mut rng, &model, 3000, 500);
            total_ops += ops.len();
            apply(&client, &table, &mut model, &ops).await;
        }
        times.push(now(&client).await);
        models.push(model.clone());
    }
    assert!(total_ops >= 10_000, "{total_ops} operations");

    // Snapshot at t0, then replay each window [t_i, t_i+1) in order.
    let mut replayed = scan_model(
        client
            .scan_builder(&table)
            .snapshot(t0)
            .fault_tolerant(true)
            .build()
            .expect("snapshot"),
    )
    .await;
    assert_eq!(replayed, models[0], "snapshot at t0");
    for i in 0..times.len() - 1 {
        let n = replay_diff(
            client
                .scan_builder(&table)
                .diff(times[i], times[i + 1])
                .batch_size_bytes(8192)
                .build()
                .expect("diff"),
            &mut replayed,
        )
        .await;
        assert!(n > 0, "window {i} is empty");
        assert_eq!(replayed, models[i + 1], "after replaying window {i}");
        // A plain snapshot at the window's end agrees as well.
        let snap = scan_model(
            client
                .scan_builder(&table)
                .snapshot(times[i + 1])
                .build()
                .expect("snapshot"),
        )
        .await;
        assert_eq!(snap, models[i + 1], "snapshot at t{}", i + 1);
    }
    // One diff over the whole span gives the same result as the chain.
    let mut whole = models[0].clone();
    replay_diff(
        client
            .scan_builder(&table)
            .diff(times[0], *times.last().expect("times"))
            .build()
            .expect("diff"),
        &mut whole,
    )
    .await;
    assert_eq!(&whole, models.last().expect("models"));
    assert!(
        started.elapsed() < Duration::from_secs(100),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_scan_older_than_history_fails() {
    let c = MiniCluster::builder()
        .tservers(1)
        .tserver_flag("--tablet_history_max_age_sec=1")
        .start()
        .expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let table = create_single_tablet(&client, "old", 1).await;
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(1);
    apply(&client, &table, &mut model, &inserts(&mut rng, 0, 100)).await;
    let old = now(&client).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let end = now(&client).await;

    let mut scanner = client
        .scan_builder(&table)
        .diff(old, end)
        .build()
        .expect("build");
    let err = scanner.next_batch().await.expect_err("too old");
    assert!(matches!(err, Error::SnapshotTooOld { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("snapshot too old") && text.contains("ancient history mark"),
        "{text}"
    );
    assert!(
        scanner.next_batch().await.expect("ended").is_none(),
        "the stream ends after an error"
    );

    let err = client
        .scan_builder(&table)
        .snapshot(old)
        .build()
        .expect("b")
        .next_batch()
        .await
        .expect_err("old");
    assert!(matches!(err, Error::SnapshotTooOld { .. }), "{err:?}");
    // A recent window still works.
    let t = now(&client).await;
    let rows = collect(
        client
            .scan_builder(&table)
            .diff(t, now(&client).await)
            .build()
            .expect("b"),
    )
    .await;
    assert_eq!(total_rows(&rows), 0);
}

// ---------------------------------------------------------------------------
// Fault tolerance.

#[tokio::test(flavor = "multi_thread")]
async fn fault_tolerant_scan_survives_a_tablet_server_kill() {
    let mut c = MiniCluster::builder().tservers(3).start().expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let table = create_single_tablet(&client, "ft", 3).await;
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(3);
    let n = 20_000;
    apply(&client, &table, &mut model, &inserts(&mut rng, 0, n)).await;
    let expected: BTreeSet<i64> = model.keys().copied().collect();

    let mut ft = client
        .scan_builder(&table)
        .fault_tolerant(true)
        .batch_size_bytes(16 * 1024)
        .build()
        .expect("b");
    let mut plain = client
        .scan_builder(&table)
        .batch_size_bytes(16 * 1024)
        .build()
        .expect("b");
    let mut keys = Vec::new();
    let first = ft.next_batch().await.expect("first").expect("rows");
    keys.extend(first.rows().map(|r| r.get_i64("key").expect("key")));
    assert!(
        keys.len() < n as usize / 10,
        "the first batch should be small"
    );
    let plain_first = plain.next_batch().await.expect("first").expect("rows");
    assert!(!plain_first.is_empty());
    let server = ft.current_server().expect("server").to_owned();
    assert_eq!(
        plain.current_server(),
        Some(server.as_str()),
        "both scans read the leader"
    );
    let idx = c
        .tserver_addrs()
        .iter()
        .position(|a| *a == server)
        .expect("a tablet server of ours");

    blocking(|| c.kill(DaemonKind::TabletServer, idx)).expect("kill");
    while let Some(b) = ft.next_batch().await.expect("fault-tolerant scan goes on") {
        keys.extend(b.rows().map(|r| r.get_i64("key").expect("key")));
    }
    assert_unique_and_complete(&keys, &expected);
    assert_ne!(
        ft.current_server(),
        Some(server.as_str()),
        "moved to another replica"
    );
    // Rows of one tablet come back in key order.
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "ordered");

    // The plain scan cannot resume and says so.
    let err = loop {
        match plain.next_batch().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("a non-fault-tolerant scan finished after its server was killed"),
            Err(e) => break e,
        }
    };
    let text = err.to_string();
    assert!(
        text.contains("not fault tolerant") && text.contains(&server),
        "{text}"
    );

    // Back up again: a new scan (the dead server may still be in the
    // location cache as leader) reads everything once more.
    blocking(|| c.start(DaemonKind::TabletServer, idx)).expect("restart");
    let again = scan_keys(
        client
            .scan_builder(&table)
            .fault_tolerant(true)
            .projection(&["key"])
            .build()
            .expect("b"),
    )
    .await;
    assert_unique_and_complete(&again, &expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn fault_tolerant_scan_survives_a_leader_master_change() {
    let mut c = MiniCluster::builder()
        .masters(3)
        .tservers(3)
        .start()
        .expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let table = create_kv(&client, "mc", 3).await;
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(4);
    let mut ops = inserts(&mut rng, 0, 6000);
    ops.extend(inserts(&mut rng, 200_000, 2000));
    apply(&client, &table, &mut model, &ops).await;
    let expected: BTreeSet<i64> = model.keys().copied().collect();
    let tablets = client
        .tablets_in_range(&table, &[], &[], Instant::now() + Duration::from_secs(30))
        .await
        .expect("tablets");
    assert_eq!(tablets.len(), 6);

    let mut scanner = client
        .scan_builder(&table)
        .projection(&["key"])
        .fault_tolerant(true)
        .batch_size_bytes(4096)
        .build()
        .expect("b");
    let mut keys = Vec::new();
    let first = scanner.next_batch().await.expect("first").expect("rows");
    keys.extend(first.rows().map(|r| r.get_i64("key").expect("key")));
    let old_leader = blocking(|| c.leader_master()).expect("leader");
    blocking(|| c.kill(DaemonKind::Master, old_leader)).expect("kill leader master");
    // Forget every location: the next tablets must be looked up at the
    // new leader master.
    for t in &tablets {
        kudu_client::internals::invalidate_tablet(&client, table.id(), &t.tablet_id);
    }
    while let Some(b) = scanner.next_batch().await.expect("scan goes on") {
        keys.extend(b.rows().map(|r| r.get_i64("key").expect("key")));
    }
    assert_unique_and_complete(&keys, &expected);
    let new_leader = blocking(|| {
        c.wait_for(Duration::from_secs(30), "a new leader master", |c| {
            Ok(c.leader_master()? != old_leader)
        })
        .and_then(|_| c.leader_master())
    })
    .expect("new leader");
    assert_ne!(new_leader, old_leader);
    // Splits are made through the new leader as well.
    let splits = client
        .scan_splits(
            &table,
            &kudu_client::scan::ScanSpec::new().projection(&["key"]),
        )
        .await
        .expect("splits");
    assert_eq!(splits.len(), 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_scanners_keep_alive_and_reopen() {
    let c = MiniCluster::builder()
        .tservers(1)
        .tserver_flag("--scanner_ttl_ms=1500")
        .tserver_flag("--scanner_gc_check_interval_us=200000")
        .start()
        .expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let table = create_single_tablet(&client, "ttl", 1).await;
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(5);
    apply(&client, &table, &mut model, &inserts(&mut rng, 0, 5000)).await;
    let expected: BTreeSet<i64> = model.keys().copied().collect();
    let idle = Duration::from_millis(4000);
    let small =
        |b: kudu_client::scan::ScanBuilder| b.batch_size_bytes(2048).build().expect("build");

    async fn drain(s: &mut Scanner, keys: &mut Vec<i64>) -> kudu_client::Result<()> {
        while let Some(b) = s.next_batch().await? {
            keys.extend(b.rows().map(|r| r.get_i64("key").expect("key")));
        }
        Ok(())
    }

    // Not fault tolerant, idle past the TTL: fails, naming the expiry.
    let mut s = small(client.scan_builder(&table));
    let mut keys = Vec::new();
    drain_one(&mut s, &mut keys).await;
    tokio::time::sleep(idle).await;
    let err = drain(&mut s, &mut keys).await.expect_err("expired");
    let text = err.to_string();
    assert!(
        text.contains("not fault tolerant") && text.contains("scanner expired"),
        "{text}"
    );

    // Fault tolerant: reopens after the last key and finishes.
    let mut s = small(client.scan_builder(&table).fault_tolerant(true));
    let mut keys = Vec::new();
    drain_one(&mut s, &mut keys).await;
    tokio::time::sleep(idle).await;
    drain(&mut s, &mut keys).await.expect("reopened");
    assert_unique_and_complete(&keys, &expected);

    // Manual keep-alives keep a plain scanner alive.
    let mut s = small(client.scan_builder(&table));
    let mut keys = Vec::new();
    drain_one(&mut s, &mut keys).await;
    let until = Instant::now() + idle;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(400)).await;
        s.keep_alive().await.expect("keep-alive");
    }
    drain(&mut s, &mut keys).await.expect("kept alive");
    assert_unique_and_complete(&keys, &expected);

    // So do automatic ones while the consumer is slow.
    let mut s = small(
        client
            .scan_builder(&table)
            .keep_alive_interval(Duration::from_millis(400)),
    );
    let mut keys = Vec::new();
    drain_one(&mut s, &mut keys).await;
    tokio::time::sleep(idle).await;
    drain(&mut s, &mut keys)
        .await
        .expect("kept alive automatically");
    assert_unique_and_complete(&keys, &expected);
}

async fn drain_one(s: &mut Scanner, keys: &mut Vec<i64>) {
    let b = s.next_batch().await.expect("batch").expect("rows");
    keys.extend(b.rows().map(|r| r.get_i64("key").expect("key")));
}

// ---------------------------------------------------------------------------
// Splits.

#[tokio::test(flavor = "multi_thread")]
async fn splits_round_trip_execute_and_resume() {
    // SplitKeyRange only sees flushed data and cuts at rowset bounds: flush
    // memory stores within a second and keep rowsets apart (no compaction),
    // so that two generations of rows give the tablets several rowsets.
    let c = MiniCluster::builder()
        .tservers(3)
        .tserver_flag("--flush_threshold_secs=1")
        .tserver_flag("--enable_rowset_compaction=false")
        .start()
        .expect("cluster");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let table = create_kv(&client, "sp", 1).await;
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(6);
    for generation in 0..2 {
        let mut ops = inserts(&mut rng, generation * 1500, 1500);
        ops.extend(inserts(&mut rng, 200_000 + generation * 500, 500));
        apply(&client, &table, &mut model, &ops).await;
        if generation == 0 {
            tokio::time::sleep(Duration::from_millis(2500)).await;
        }
    }
    let at_split_time = model.clone();

    let spec = kudu_client::scan::ScanSpec::new()
        .projection(&["key", "val", "s"])
        .fault_tolerant(true)
        .batch_size_bytes(4096);
    let splits = client.scan_splits(&table, &spec).await.expect("splits");
    assert_eq!(splits.len(), 6, "one per tablet");
    let snapshot = splits[0].snapshot().expect("a fixed snapshot");
    assert!(splits.iter().all(|s| s.snapshot() == Some(snapshot)));
    let bytes: Vec<Vec<u8>> = splits.iter().map(Split::to_bytes).collect();

    // Writes after the splits were made are not seen by them.
    apply(&client, &table, &mut model, &inserts(&mut rng, 5000, 100)).await;

    // "Another process": a fresh client executes the deserialized splits
    // concurrently.
    let other = KuduClient::new(&c.master_addrs()).expect("client");
    let mut tasks = tokio::task::JoinSet::new();
    for b in bytes.clone() {
        let other = other.clone();
        tasks.spawn(async move {
            let split = Split::from_bytes(&b).expect("decode");
            scan_model(other.scanner_for_split(&split).await.expect("scanner")).await
        });
    }
    let mut union = Model::new();
    while let Some(part) = tasks.join_next().await {
        for (k, v) in part.expect("task") {
            assert!(union.insert(k, v).is_none(), "key {k} in two splits");
        }
    }
    let full = scan_model(
        client
            .scan_builder(&table)
            .snapshot(snapshot)
            .build()
            .expect("b"),
    )
    .await;
    assert_eq!(full, at_split_time);
    assert_eq!(union, full);

    // Resume a split after its first batch: nothing repeated, nothing lost.
    let split = splits
        .iter()
        .max_by_key(|s| s.partition_key_start().to_vec())
        .expect("split")
        .clone();
    let whole: Vec<i64> = scan_keys(client.scanner_for_split(&split).await.expect("s")).await;
    let mut s = client.scanner_for_split(&split).await.expect("s");
    let mut keys: Vec<i64> = Vec::new();
    drain_one(&mut s, &mut keys).await;
    let resume = s.last_primary_key().expect("last key").to_vec();
    drop(s);
    let resumed =
        Split::from_bytes(&split.clone().with_resume_key(resume).to_bytes()).expect("decode");
    keys.extend(scan_keys(client.scanner_for_split(&resumed).await.expect("s")).await);
    assert_eq!(keys, whole);

    // Resuming needs an ORDERED split; sub-splitting by size still covers
    // everything once.
    let latest = client
        .scan_splits(&table, &kudu_client::scan::ScanSpec::new())
        .await
        .expect("splits");
    let err = client
        .scanner_for_split(&latest[0].clone().with_resume_key(vec![1, 2, 3]))
        .await
        .expect_err("not ordered");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let sized_spec = spec.clone().snapshot(snapshot).split_size_bytes(256);
    let deadline = Instant::now() + Duration::from_secs(30);
    let sized = loop {
        let sized = client
            .scan_splits(&table, &sized_spec)
            .await
            .expect("sized splits");
        if sized.len() > splits.len() || Instant::now() > deadline {
            break sized;
        }
        // Wait for the servers to flush their memory stores.
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(sized.len() > splits.len(), "{} sized splits", sized.len());
    let mut union = Model::new();
    for sp in &sized {
        let sp = Split::from_bytes(&sp.to_bytes()).expect("decode");
        for (k, v) in scan_model(client.scanner_for_split(&sp).await.expect("s")).await {
            assert!(union.insert(k, v).is_none(), "key {k} in two sized splits");
        }
    }
    assert_eq!(union, at_split_time);

    // A split of a re-created table is stale.
    client.delete_table("sp").await.expect("drop");
    create_kv(&client, "sp", 1).await;
    let err = client
        .scanner_for_split(&splits[0])
        .await
        .expect_err("stale");
    assert!(matches!(err, Error::TableNotFound(_)), "{err}");
}

// ---------------------------------------------------------------------------
// Server-side scanners are closed when abandoned.

/// Sum of `tablet_active_scanners` over the tablets of a tablet server,
/// read from its web server's JSON metrics.
fn active_scanners(http_addr: &str) -> u64 {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(http_addr).expect("connect to the web server");
    write!(
        conn,
        "GET /metrics?metrics=tablet_active_scanners HTTP/1.0\r\nHost: {http_addr}\r\n\r\n"
    )
    .expect("send");
    let mut body = String::new();
    conn.read_to_string(&mut body).expect("read");
    body.split("\"tablet_active_scanners\"")
        .skip(1)
        .map(|part| {
            let after = part
                .split_once("\"value\":")
                .map_or("", |(_, v)| v)
                .trim_start();
            after
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<u64>()
                .unwrap_or(0)
        })
        .sum()
}

fn wait_active_scanners(http_addr: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = active_scanners(http_addr);
        if n == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{n} active scanners, expected {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn abandoned_scanners_are_closed_on_the_server() {
    let c = MiniCluster::builder().tservers(1).start().expect("cluster");
    let http = c
        .daemon(DaemonKind::TabletServer, 0)
        .expect("ts-0")
        .http_addr
        .clone();
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let table = create_single_tablet(&client, "drop", 1).await;
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(8);
    apply(&client, &table, &mut model, &inserts(&mut rng, 0, 5000)).await;
    blocking(|| wait_active_scanners(&http, 0));

    // Dropped mid-tablet: the close is sent in the background.
    let mut s = client
        .scan_builder(&table)
        .batch_size_bytes(2048)
        .build()
        .expect("b");
    let mut keys = Vec::new();
    drain_one(&mut s, &mut keys).await;
    blocking(|| wait_active_scanners(&http, 1));
    drop(s);
    blocking(|| wait_active_scanners(&http, 0));

    // Closed explicitly.
    let mut s = client
        .scan_builder(&table)
        .batch_size_bytes(2048)
        .fault_tolerant(true)
        .build()
        .expect("b");
    drain_one(&mut s, &mut keys).await;
    blocking(|| wait_active_scanners(&http, 1));
    s.close().await;
    blocking(|| wait_active_scanners(&http, 0));
    assert!(s.next_batch().await.expect("closed").is_none());

    // Stopped by a limit in the middle of a tablet.
    let batches = collect(
        client
            .scan_builder(&table)
            .batch_size_bytes(2048)
            .limit(300)
            .build()
            .expect("b"),
    )
    .await;
    assert_eq!(total_rows(&batches), 300);
    blocking(|| wait_active_scanners(&http, 0));

    // Finished normally: nothing left open either.
    let all = collect(
        client
            .scan_builder(&table)
            .batch_size_bytes(2048)
            .build()
            .expect("b"),
    )
    .await;
    assert_eq!(total_rows(&all), 5000);
    blocking(|| wait_active_scanners(&http, 0));
}
