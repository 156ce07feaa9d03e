//! Immutable columns (Kudu 1.17+, KUDU-3353) carried exactly, on every
//! version pair.
//!
//! First the Kudu facts the sink's write path relies on, asserted on real
//! servers of both releases (docs/semantics.md, "Immutable columns"):
//! an ORDERED diff scan reports a row deleted and re-inserted inside the
//! window once, live, with its new cells — whether the old row was still
//! in the MemRowSet or already flushed; a strict UPSERT onto an existing
//! row fails with an Immutable error even when the immutable cell keeps
//! its value (so "UPSERT, rewrite what fails" would rewrite every update);
//! UPSERT_IGNORE keeps the old immutable cell; DELETE_IGNORE then
//! UPSERT_IGNORE of one key in one write request are applied in order.
//!
//! Then the replication: a writer deletes and re-inserts rows with new
//! immutable values milliseconds apart (inside ferry's 1-second windows),
//! updates the mutable column, inserts and deletes, while `ferry run` is
//! killed with SIGKILL and restarted from its newest checkpoint; at the
//! end the sink (created by the job, with the same immutable columns)
//! equals the source cell by cell, read by an independent reader, and
//! `ferry verify` says equal.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_engine::connector::SchemaRecord;
use ferry_fixtures::live::prom_sample;
use ferry_fixtures::process::{output_text, FerryProcess};
use ferry_kudu::sink_table::schema_change::{follow, record_of, FollowTarget};
use ferry_kudu::sink_table::{
    prepare_sink_table, ColumnProblem, SinkTableAction, SinkTableError, SinkTableOptions,
};
use ferry_testkit::MiniCluster;
use kudu_client::error::StatusCode;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{
    AlterTableBuilder, ColumnDelta, ColumnSchema, DataType, Error, HybridTime, KuduClient,
    KuduTable, Schema, TableBuilder,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{pairs, Pair};

/// Rows the sink deleted before writing them (re-created on the source).
const RECREATED: &str = "ferry_table_rows_recreated_total";

/// `id INT64` key, `imm STRING IMMUTABLE`, `v INT64`, `n INT64 IMMUTABLE`.
fn schema() -> Schema {
    schema_with([true, false, true])
}

/// `id INT64` key, `imm STRING`, `v INT64`, `n INT64`, each value column
/// immutable as `immutable` says.
fn schema_with(immutable: [bool; 3]) -> Schema {
    let [imm, v, n] = immutable;
    let value = |name: &str, t: DataType, immutable: bool| {
        ColumnSchema::builder(name, t)
            .nullable(true)
            .immutable(immutable)
            .build()
            .unwrap()
    };
    Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()
            .unwrap(),
        value("imm", DataType::String, imm),
        value("v", DataType::Int64, v),
        value("n", DataType::Int64, n),
    ])
    .unwrap()
}

/// Each column's name and whether it is immutable.
fn immutability(schema: &Schema) -> Vec<(String, bool)> {
    schema
        .columns()
        .iter()
        .map(|c| (c.name().to_owned(), c.is_immutable()))
        .collect()
}

/// `(name, immutable)` pairs as [`immutability`] gives them.
fn expected(columns: &[(&str, bool)]) -> Vec<(String, bool)> {
    columns.iter().map(|(n, i)| (n.to_string(), *i)).collect()
}

async fn create(client: &KuduClient, name: &str, buckets: u32) -> KuduTable {
    create_with(client, name, buckets, schema()).await
}

async fn create_with(client: &KuduClient, name: &str, buckets: u32, schema: Schema) -> KuduTable {
    let _ = client.delete_table(name).await;
    let mut b = TableBuilder::new(name, schema).num_replicas(1);
    if buckets > 1 {
        b = b.add_hash_partitions(&["id"], buckets, 0);
    }
    client.create_table(&b).await.unwrap();
    client.open_table(name).await.unwrap()
}

/// A row with the given cells (`None`: not set).
fn row(
    t: &KuduTable,
    id: i64,
    imm: Option<&str>,
    v: Option<i64>,
    n: Option<i64>,
) -> kudu_client::Row {
    let mut r = t.new_row();
    r.set_i64("id", id).unwrap();
    if let Some(s) = imm {
        r.set_str("imm", s).unwrap();
    }
    if let Some(v) = v {
        r.set_i64("v", v).unwrap();
    }
    if let Some(n) = n {
        r.set_i64("n", n).unwrap();
    }
    r
}

/// A hybrid time after every write this client has seen.
async fn now(client: &KuduClient) -> HybridTime {
    let clock = client.server_clock().await.unwrap();
    let seen = client
        .last_propagated_timestamp()
        .map_or(0, HybridTime::raw);
    clock.max(HybridTime::from_raw(seen + 1))
}

/// `(id, imm, v, deleted)` of every row of a scan (a diff scan when
/// `diff` is given), in the order read.
async fn rows(
    client: &KuduClient,
    t: &KuduTable,
    diff: Option<(HybridTime, HybridTime)>,
) -> Vec<(i64, Option<String>, Option<i64>, bool)> {
    let mut b = client.scan_builder(t);
    if let Some((s, e)) = diff {
        b = b.diff(s, e);
    }
    let mut scanner = b.build().unwrap();
    let mut out = Vec::new();
    while let Some(batch) = scanner.next_batch().await.unwrap() {
        for r in batch.rows() {
            let imm = (!r.is_null("imm").unwrap()).then(|| r.get_str("imm").unwrap().to_owned());
            let v = (!r.is_null("v").unwrap()).then(|| r.get_i64("v").unwrap());
            out.push((r.get_i64("id").unwrap(), imm, v, r.is_deleted()));
        }
    }
    out.sort_by_key(|r| r.0);
    out
}

/// The flushes of the MemRowSets of every tablet of the cluster's only
/// tablet server so far (its `flush_mrs_duration` counts).
fn flushes(cluster: &MiniCluster) -> u64 {
    let (host, port) = cluster.info().tservers[0]
        .http_addr
        .rsplit_once(':')
        .map(|(h, p)| (h.to_owned(), p.parse::<u16>().unwrap()))
        .unwrap();
    let (status, body) = ferry_fixtures::http::try_http_at(
        &host,
        port,
        "GET",
        "/metrics?metrics=flush_mrs_duration",
        None,
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let metrics: serde_json::Value = serde_json::from_str(&body).unwrap();
    metrics
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["metrics"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["name"] == "flush_mrs_duration")
        .map(|m| m["total_count"].as_u64().unwrap_or(0))
        .sum()
}

/// Makes the tablet server flush its MemRowSets now: the flush threshold
/// is lowered to a second until a flush happened, then set back.
fn flush(cluster: &MiniCluster) {
    let addr = cluster.tserver_addrs()[0].clone();
    let before = flushes(cluster);
    let set = |secs: &str| {
        cluster
            .kudu_ok(&["tserver", "set_flag", &addr, "flush_threshold_secs", secs])
            .unwrap()
    };
    set("1");
    let deadline = Instant::now() + Duration::from_secs(60);
    while flushes(cluster) == before {
        assert!(Instant::now() < deadline, "no MemRowSet flush within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Kudu's default.
    set("120");
}

/// The facts above, on one release. `flushed`: the rows are flushed to
/// disk before the window, so the re-inserted row lives in the MemRowSet
/// and its deleted ancestor in a DiskRowSet.
async fn facts(cluster: &MiniCluster, name: &str, flushed: bool) {
    let client = KuduClient::new(&cluster.master_addrs()).unwrap();
    let t = create(&client, name, 1).await;
    let mut s = client.new_session();
    for id in 1..=6 {
        let imm = format!("a{id}");
        s.apply(Operation::insert(
            &t,
            row(&t, id, Some(&imm), Some(id), Some(id)),
        ))
        .await
        .unwrap();
    }
    if flushed {
        tokio::task::block_in_place(|| flush(cluster));
    }
    // (a) One window: 1 re-created with new cells, 2 deleted, 3 updated,
    // 4 re-created then deleted, 5 re-created then updated.
    let start = now(&client).await;
    let ops = [
        Operation::delete(&t, row(&t, 1, None, None, None)),
        Operation::insert(&t, row(&t, 1, Some("b1"), Some(10), Some(10))),
        Operation::delete(&t, row(&t, 2, None, None, None)),
        Operation::update(&t, row(&t, 3, None, Some(30), None)),
        Operation::delete(&t, row(&t, 4, None, None, None)),
        Operation::insert(&t, row(&t, 4, Some("b4"), Some(40), Some(40))),
        Operation::delete(&t, row(&t, 4, None, None, None)),
        Operation::delete(&t, row(&t, 5, None, None, None)),
        Operation::insert(&t, row(&t, 5, Some("b5"), Some(50), Some(50))),
        Operation::update(&t, row(&t, 5, None, Some(51), None)),
    ];
    for op in ops {
        s.apply(op).await.unwrap();
    }
    let end = now(&client).await;
    let window: Vec<(i64, Option<&str>, Option<i64>, bool)> = Vec::from([
        (1, Some("b1"), Some(10), false),
        (2, None, None, true),
        (3, Some("a3"), Some(30), false),
        (4, None, None, true),
        (5, Some("b5"), Some(51), false),
    ]);
    let got = rows(&client, &t, Some((start, end))).await;
    let got: Vec<(i64, Option<&str>, Option<i64>, bool)> = got
        .iter()
        .map(|(id, imm, v, deleted)| {
            // A deleted row's other cells are not part of the contract.
            if *deleted {
                (*id, None, None, true)
            } else {
                (*id, imm.as_deref(), *v, false)
            }
        })
        .collect();
    assert_eq!(got, window, "diff scan, flushed: {flushed}");

    // (b) Strict UPSERT onto an existing row fails even with the same
    // immutable value; UPSERT_IGNORE keeps the old value.
    for imm in ["a6", "changed"] {
        let err = s
            .apply(Operation::upsert(
                &t,
                row(&t, 6, Some(imm), Some(60), Some(6)),
            ))
            .await
            .unwrap_err();
        let Error::RowErrors(errors) = &err else {
            panic!("UPSERT with imm={imm}: {err}");
        };
        assert_eq!(errors[0].status.code, StatusCode::Immutable, "{err}");
    }
    s.apply(Operation::upsert_ignore(
        &t,
        row(&t, 6, Some("changed"), Some(61), Some(99)),
    ))
    .await
    .unwrap();
    // (c) DELETE_IGNORE then UPSERT_IGNORE of one key in one request.
    let mut m = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
        .unwrap();
    m.apply(Operation::delete_ignore(&t, row(&t, 3, None, None, None)))
        .await
        .unwrap();
    m.apply(Operation::upsert_ignore(
        &t,
        row(&t, 3, Some("c3"), Some(33), Some(3)),
    ))
    .await
    .unwrap();
    m.flush().await.unwrap();
    let after: Vec<(i64, Option<String>, Option<i64>)> = rows(&client, &t, None)
        .await
        .into_iter()
        .filter(|r| r.0 == 3 || r.0 == 6)
        .map(|(id, imm, v, _)| (id, imm, v))
        .collect();
    assert_eq!(
        after,
        [
            (3, Some("c3".to_owned()), Some(33)),
            (6, Some("a6".to_owned()), Some(61))
        ],
        "flushed: {flushed}"
    );
    client.delete_table(name).await.unwrap();
}

/// The Kudu behaviour the sink's write path is built on, on each release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kudu_facts_the_write_path_relies_on() {
    for version in [
        ferry_testkit::KuduVersion::V1_17_1,
        ferry_testkit::KuduVersion::V1_18_1,
    ] {
        let cluster = tokio::task::block_in_place(|| crate::kudu(version));
        let tag = version.as_str().replace('.', "");
        facts(&cluster, &format!("imm_facts_mrs_{tag}"), false).await;
        facts(&cluster, &format!("imm_facts_drs_{tag}"), true).await;
    }
}

/// What the writer did.
#[derive(Debug, Default)]
struct ChurnStats {
    /// Rows deleted and inserted again with new immutable values.
    recreated: u64,
    updated: u64,
    inserted: u64,
    deleted: u64,
}

/// Changes `name` until `stop`: rows deleted and re-inserted with new
/// immutable values milliseconds apart (some updated right after), updates
/// of the mutable column, new rows, deletes. One write per operation.
async fn churn(
    client: KuduClient,
    name: String,
    mut live: Vec<i64>,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> ChurnStats {
    let t = client.open_table(&name).await.unwrap();
    let mut s = client.new_session();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut next_id = live.iter().max().map_or(0, |m| m + 1);
    let mut stats = ChurnStats::default();
    let mut generation = 0i64;
    while !stop.load(Ordering::Relaxed) {
        generation += 1;
        let pick = rng.gen_range(0..100);
        let at = rng.gen_range(0..live.len().max(1));
        match live.get(at).copied() {
            Some(id) if pick < 45 => {
                s.apply(Operation::delete(&t, row(&t, id, None, None, None)))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(rng.gen_range(0..3))).await;
                let imm = format!("g{generation}");
                // Now and then the same immutable value comes back.
                let imm = (rng.gen_range(0..10) > 0).then_some(imm.as_str());
                s.apply(Operation::insert(
                    &t,
                    row(&t, id, imm, Some(generation), Some(generation)),
                ))
                .await
                .unwrap();
                if rng.gen_bool(0.3) {
                    s.apply(Operation::update(
                        &t,
                        row(&t, id, None, Some(-generation), None),
                    ))
                    .await
                    .unwrap();
                }
                stats.recreated += 1;
            }
            Some(id) if pick < 75 => {
                s.apply(Operation::update(
                    &t,
                    row(&t, id, None, Some(generation), None),
                ))
                .await
                .unwrap();
                stats.updated += 1;
            }
            Some(id) if pick < 88 => {
                s.apply(Operation::delete(&t, row(&t, id, None, None, None)))
                    .await
                    .unwrap();
                live.swap_remove(at);
                stats.deleted += 1;
            }
            _ => {
                let imm = format!("new{next_id}");
                s.apply(Operation::insert(
                    &t,
                    row(&t, next_id, Some(&imm), Some(0), Some(next_id)),
                ))
                .await
                .unwrap();
                live.push(next_id);
                next_id += 1;
                stats.inserted += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(1..4))).await;
    }
    stats
}

/// The job options of `table` on `pair` (its sink is `<table>_copy`).
fn job_options(pair: Pair, table: &str, chk: &std::path::Path) -> Vec<String> {
    let (src, dst) = pair.clusters();
    [
        "--job.sourceMasterAddresses",
        &src.master_addrs_joined(),
        "--job.sinkMasterAddresses",
        &dst.master_addrs_joined(),
        "--job.tableName",
        table,
        "--job.tableSuffix",
        "_copy",
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `ferry run` (from `resume` if given) with 1-second windows and the
/// write options `writer`, and its job id.
fn start_ferry(options: &[String], writer: &[&str], resume: Option<&str>) -> (FerryProcess, JobId) {
    let mut cmd = crate::ferry().arg("run").args(options).args(writer).args([
        "--job.createTable",
        "true",
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
        // Small batches: a window's rows come in many of them.
        "--reader.batchSizeBytes",
        "8192",
        "-p",
        "2",
    ]);
    if let Some(path) = resume {
        cmd = cmd.args(["-s", path]);
    }
    let ferry = cmd.free_ports().start();
    let id = ferry.job_id();
    let job_id: JobId = id.parse().unwrap_or_else(|_| panic!("no job id: {id:?}"));
    (ferry, job_id)
}

/// One pair: the workload through three SIGKILLs, then the copy checked.
async fn recreated_rows_arrive_with_their_new_immutable_cells(pair: Pair) {
    let started = Instant::now();
    let (src, dst) = tokio::task::block_in_place(|| pair.clusters());
    let source = KuduClient::new(&src.master_addrs()).unwrap();
    let sink = KuduClient::new(&dst.master_addrs()).unwrap();
    let name = pair.table("imm");
    let sink_name = format!("{name}_copy");
    let _ = sink.delete_table(&sink_name).await;
    let t = create(&source, &name, 3).await;
    let mut s = source
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .unwrap();
    let loaded: Vec<i64> = (0..3_000).collect();
    for &id in &loaded {
        let imm = format!("a{id}");
        s.apply(Operation::insert(
            &t,
            row(&t, id, Some(&imm), Some(id), Some(id)),
        ))
        .await
        .unwrap();
    }
    s.flush().await.unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(churn(source.clone(), name.clone(), loaded, stop.clone(), 7));
    let dir = tempfile::tempdir().unwrap();
    let chk = dir.path().join("chk");
    let options = job_options(pair, &name, &chk);
    let store =
        CheckpointStore::open_local(&StorageLocation::local(&chk).unwrap(), NonZeroUsize::MIN);
    let mut rng = StdRng::seed_from_u64(31);
    let mut resume: Option<String> = None;
    let mut recreated_by_ferry = 0.0;
    // Each run writes in another flush mode (deletes before upserts in all).
    let writers: [&[&str]; 3] = [
        &[],
        &[
            "--writer.flushMode",
            "MANUAL_FLUSH",
            "--writer.maxBufferSize",
            "7",
        ],
        &["--writer.flushMode", "AUTO_FLUSH_SYNC"],
    ];
    for (i, writer) in writers.into_iter().enumerate() {
        let (mut f, job_id) = start_ferry(&options, writer, resume.as_deref());
        let wait = if i == 0 {
            1_500
        } else {
            rng.gen_range(1_500..3_500)
        };
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let metrics = f.metrics_text();
        recreated_by_ferry += prom_sample(&metrics, RECREATED, "table_name", &name).unwrap_or(0.0);
        f.kill9();
        if let Some(c) = store.latest_complete(&job_id).await.unwrap().checkpoint {
            resume = Some(c.location.to_uri());
        }
    }
    stop.store(true, Ordering::Relaxed);
    let stats = writer.await.unwrap();
    assert!(stats.recreated > 100, "{}: {stats:?}", pair.label());
    assert!(
        recreated_by_ferry > 0.0,
        "{}: no row was deleted before its upsert",
        pair.label()
    );

    // A last run catches up with everything the writer did.
    let stopped_at = now(&source).await;
    let (mut f, job_id) = start_ferry(&options, &[], resume.as_deref());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "{}: the last run never caught up",
            pair.label()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let latest = store.latest_complete(&job_id).await.unwrap();
        let caught_up = latest.checkpoint.is_some_and(|c| {
            c.state
                .last_end_timestamp
                .is_some_and(|t| t.raw() > stopped_at.raw())
        });
        if caught_up {
            break;
        }
    }
    f.kill9();

    // The sink was created with the source's immutable columns.
    let copy = sink.open_table(&sink_name).await.unwrap();
    assert_eq!(
        immutability(copy.schema()),
        immutability(&schema()),
        "{}",
        pair.label()
    );
    let diff = ferry_fixtures::compare::compare_tables(&source, &sink, &name, &sink_name).await;
    assert!(diff.is_equal(), "{}: {diff}", pair.label());
    let o = crate::ferry()
        .arg("verify")
        .args(&options)
        .arg("--json")
        .output();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}: {}",
        pair.label(),
        output_text(&o)
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["equal"], true, "{}: {report}", pair.label());
    eprintln!(
        "{}: {stats:?}, {} rows, {:.1} s",
        pair.label(),
        diff.source_rows,
        started.elapsed().as_secs_f64()
    );
    source.delete_table(&name).await.unwrap();
    sink.delete_table(&sink_name).await.unwrap();
}

/// Deletes and re-inserts with new immutable values inside windows,
/// through SIGKILL restarts, on every version pair: the copy is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn immutable_cells_survive_recreation_and_restarts_on_every_pair() {
    for pair in pairs() {
        recreated_rows_arrive_with_their_new_immutable_cells(pair).await;
    }
}

/// Sink tables keep immutability: a created copy has the source's; a
/// hand-made sink whose column is immutable where the source's is not is
/// refused up front, naming the column, while the other way round is
/// accepted; schema following adds an immutable column immutable and
/// follows a source column that became mutable.
async fn sink_tables_keep_immutability(pair: Pair) {
    let (src, dst) = tokio::task::block_in_place(|| pair.clusters());
    let source = KuduClient::new(&src.master_addrs()).unwrap();
    let sink = KuduClient::new(&dst.master_addrs()).unwrap();
    let name = pair.table("imm_sink");
    let table = create(&source, &name, 2).await;
    let options = |sink_table_name: &str, create_table: bool| SinkTableOptions {
        sink_table_name: sink_table_name.to_owned(),
        create_table,
        restore_owner: false,
        follow_schema: true,
    };
    let copy = format!("{name}_copy");
    let _ = sink.delete_table(&copy).await;
    let plan = prepare_sink_table(&source, &sink, &name, &options(&copy, true))
        .await
        .unwrap();
    assert_eq!(plan.action, SinkTableAction::Created, "{}", pair.label());
    assert_eq!(
        immutability(plan.table.schema()),
        immutability(table.schema()),
        "{}",
        pair.label()
    );

    let strict = format!("{name}_strict");
    create_with(&sink, &strict, 2, schema_with([true, true, true])).await;
    let err = prepare_sink_table(&source, &sink, &name, &options(&strict, false))
        .await
        .unwrap_err();
    let SinkTableError::Incompatible { problems, .. } = &err else {
        panic!("{}: {err}", pair.label());
    };
    assert_eq!(
        problems,
        &[ColumnProblem::ImmutableInSink { column: "v".into() }],
        "{}",
        pair.label()
    );
    let message = err.to_string();
    assert!(
        message.contains("column 'v' is immutable in the sink but not in the source"),
        "{message}"
    );

    let relaxed = format!("{name}_relaxed");
    create_with(&sink, &relaxed, 2, schema_with([false, false, false])).await;
    let plan = prepare_sink_table(&source, &sink, &name, &options(&relaxed, false))
        .await
        .unwrap();
    assert_eq!(plan.action, SinkTableAction::Existing, "{}", pair.label());

    // Schema following, on the created copy.
    let follow_to = |applied: SchemaRecord, now: SchemaRecord| {
        let (source, sink, copy) = (&source, &sink, &copy);
        async move {
            let target = FollowTarget {
                sink,
                source,
                sink_name: copy,
                sink_id: None,
                rename_with_suffix: None,
            };
            follow(target, Some(&applied), &now).await.unwrap()
        }
    };
    let record = |t: KuduTable| {
        let source = &source;
        async move {
            let ranges = source.range_partitions(&t).await.unwrap();
            record_of(&t, &ranges).unwrap()
        }
    };
    let before = record(table.clone()).await;
    let m = ColumnSchema::builder("m", DataType::Int64)
        .nullable(true)
        .immutable(true)
        .build()
        .unwrap();
    source
        .alter_table(&table, &AlterTableBuilder::new().add_column(m))
        .await
        .unwrap();
    let added = record(source.open_table(&name).await.unwrap()).await;
    assert!(follow_to(before, added.clone()).await.changed);
    let copied = sink.open_table(&copy).await.unwrap();
    assert_eq!(
        immutability(copied.schema()),
        expected(&[
            ("id", false),
            ("imm", true),
            ("v", false),
            ("n", true),
            ("m", true)
        ]),
        "{}",
        pair.label()
    );
    let table = source.open_table(&name).await.unwrap();
    source
        .alter_table(
            &table,
            &AlterTableBuilder::new().alter_column(ColumnDelta::new("imm").immutable(false)),
        )
        .await
        .unwrap();
    let mutable = record(source.open_table(&name).await.unwrap()).await;
    assert_ne!(
        mutable, added,
        "the record tells a column that became mutable"
    );
    assert!(follow_to(added, mutable).await.changed);
    let copied = sink.open_table(&copy).await.unwrap();
    assert_eq!(
        immutability(copied.schema()),
        expected(&[
            ("id", false),
            ("imm", false),
            ("v", false),
            ("n", true),
            ("m", true)
        ]),
        "{}",
        pair.label()
    );
    for t in [&copy, &strict, &relaxed] {
        sink.delete_table(t).await.unwrap();
    }
    source.delete_table(&name).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_tables_keep_immutability_on_every_pair() {
    for pair in pairs() {
        sink_tables_keep_immutability(pair).await;
    }
}
