//! Tables with a non-unique primary key (a hidden INT64 key column
//! `auto_incrementing_id`, filled by a counter of each tablet) on every
//! version pair, against real servers:
//!
//! - what a tablet does with an explicit id, on each release: an
//!   UPSERT_IGNORE naming one stores it as given and moves the tablet's
//!   counter past it, so the next INSERT gets a higher id — the property
//!   that makes a promoted sink safe (both releases have it) — and keeps
//!   counting past it after a restart (from flushed data and from the
//!   write-ahead log) and a leader change;
//! - `ferry run` replicates such a table — inserts, deletes and updates
//!   by the full key (hidden id included), a column added and one dropped
//!   — to a sink it creates with the same non-unique key: sink == source
//!   including the hidden ids, read by a scan that projects them;
//! - `ferry verify` matches rows by the full key, names a planted
//!   difference by it, and its repair puts a missing row back with its id;
//! - the planned cutover (docs/dr.md) promotes the sink: new inserts there
//!   reuse no id that exists in their tablet, and the reverse job carries
//!   them, ids and all, back to the old source;
//! - a hand-made sink with the other kind of key (unique where the source
//!   is non-unique, or the reverse) is refused before any row is written,
//!   naming the tables and the key columns.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use ferry_fixtures::process::output_text;
use ferry_testkit::KuduVersion;
use kudu_client::write::{FlushMode, OpType, Operation, SessionOptions};
use kudu_client::{
    AlterTableBuilder, ColumnSchema, DataType, KuduClient, KuduTable, Row, Schema, TableBuilder,
    Value,
};
use serde_json::Value as Json;

use crate::{ferry, kudu, pairs, Pair};

/// The hidden key column of a table with a non-unique primary key.
const ID: &str = "auto_incrementing_id";
/// Values of the non-unique key `k`: 0..KEYS.
const KEYS: i32 = 40;
/// Rows with `k` below this live in the first of the two tablets.
const SPLIT: i32 = 20;
/// Rows per `k` value at the start.
const ROWS_PER_KEY: i64 = 5;
/// `v` of the rows inserted on the promoted sink, which marks them.
const PROMOTED: i64 = 1_000_000;
/// Bound on waiting for a copy (a hang, not a timing check).
const BOUND: Duration = Duration::from_secs(90);

/// A row by its full key: (`k`, hidden id).
type Key = (i32, i64);
/// Every row of a table: full key → (column name, value) in column order.
type Rows = BTreeMap<Key, Vec<(String, Value)>>;

/// `k INT32` as a non-unique primary key (the hidden id after it), then
/// `v INT64` and `s STRING`, both nullable.
fn schema() -> Schema {
    Schema::new(vec![
        ColumnSchema::builder("k", DataType::Int32)
            .key(true)
            .build()
            .unwrap(),
        ColumnSchema::builder(ID, DataType::Int64)
            .key(true)
            .auto_incrementing(true)
            .build()
            .unwrap(),
        ferry_fixtures::nullable("v", DataType::Int64),
        ferry_fixtures::nullable("s", DataType::String),
    ])
    .unwrap()
}

/// Creates table `name`: RANGE(k) split at [`SPLIT`] (two tablets, each
/// with its own counter), one replica.
async fn create(client: &KuduClient, name: &str) -> KuduTable {
    create_with(client, name, 1).await
}

/// [`create`] with `replicas` replicas.
async fn create_with(client: &KuduClient, name: &str, replicas: i32) -> KuduTable {
    let schema = schema();
    let mut split = Row::new(&schema);
    split.set_i32("k", SPLIT).unwrap();
    let b = TableBuilder::new(name, schema)
        .set_range_partition_columns(&["k"])
        .add_split_row(split)
        .num_replicas(replicas);
    client.create_table(&b).await.expect("create");
    client.open_table(name).await.expect("open")
}

/// Every row of `name`, read by a scan that projects every column by name,
/// the hidden id included. Retried a few times: a scan may meet a schema
/// change (the job follows the source's on the sink while tests read it).
async fn read_rows(client: &KuduClient, name: &str) -> Rows {
    let mut last = None;
    for _ in 0..10 {
        match try_read_rows(client, name).await {
            Ok(rows) => return rows,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!("reading {name}: {last:?}");
}

async fn try_read_rows(client: &KuduClient, name: &str) -> kudu_client::Result<Rows> {
    let table = client.open_table(name).await?;
    let names: Vec<String> = table
        .schema()
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    assert!(
        names.iter().any(|n| n == ID),
        "{name}: no {ID} in {names:?}"
    );
    let (ki, ii) = (index(&names, "k"), index(&names, ID));
    let mut scanner = client.scan_builder(&table).projection(&names).build()?;
    let mut rows = BTreeMap::new();
    while let Some(batch) = scanner.next_batch().await? {
        for view in batch.rows() {
            let values = view.to_values()?;
            let (Value::Int32(k), Value::Int64(id)) = (&values[ki], &values[ii]) else {
                panic!("{name}: key cells {:?} {:?}", values[ki], values[ii]);
            };
            rows.insert((*k, *id), names.iter().cloned().zip(values).collect());
        }
    }
    Ok(rows)
}

fn index(names: &[String], name: &str) -> usize {
    names.iter().position(|n| n == name).unwrap()
}

/// The value of column `name` in a row of [`read_rows`].
fn cell<'a>(row: &'a [(String, Value)], name: &str) -> &'a Value {
    &row.iter().find(|(n, _)| n == name).unwrap().1
}

/// Applies `ops` in one background-flushed session; row errors fail it.
async fn apply(client: &KuduClient, ops: Vec<Operation>) -> kudu_client::Result<()> {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for op in ops {
        s.apply(op).await?;
    }
    s.flush().await
}

/// An INSERT of `k` and `v`, leaving the id to the tablet.
fn insert(t: &KuduTable, k: i32, v: i64) -> Operation {
    let mut r = t.new_row();
    r.set_i32("k", k).unwrap().set_i64("v", v).unwrap();
    if t.schema().index_of("s").is_some() {
        r.set_str("s", &format!("k{k} v{v}")).unwrap();
    }
    Operation::insert(t, r)
}

/// `op` on the row with full key `key`, setting `cells` (none: key only).
fn by_key(t: &KuduTable, op: OpType, key: Key, cells: &[(&str, i64)]) -> Operation {
    let mut r = t.new_row();
    r.set_i32("k", key.0).unwrap().set_i64(ID, key.1).unwrap();
    for (name, v) in cells {
        r.set_i64(*name, *v).unwrap();
    }
    Operation::new(t, op, r)
}

/// Polls until `a` on `ca` and `b` on `cb` hold the same rows (hidden ids
/// included) and returns them.
async fn wait_same(ca: &KuduClient, a: &str, cb: &KuduClient, b: &str, what: &str) -> Rows {
    let deadline = Instant::now() + BOUND;
    loop {
        let (x, y) = (read_rows(ca, a).await, read_rows(cb, b).await);
        if x == y {
            return x;
        }
        if Instant::now() > deadline {
            let only_a: Vec<_> = x.keys().filter(|k| !y.contains_key(k)).take(5).collect();
            let only_b: Vec<_> = y.keys().filter(|k| !x.contains_key(k)).take(5).collect();
            let differ: Vec<_> = x
                .iter()
                .filter(|(k, r)| y.get(*k).is_some_and(|s| s != *r))
                .map(|(k, _)| k)
                .take(5)
                .collect();
            panic!(
                "{what}: {a} ({} rows) and {b} ({} rows) still differ after {BOUND:?}: only in {a} {only_a:?}, only in {b} {only_b:?}, differing {differ:?}",
                x.len(),
                y.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

/// The tablet of a row: its range of `k`.
fn tablet(k: i32) -> usize {
    usize::from(k >= SPLIT)
}

/// `ferry run` options of the job `name` → `name_copy` of `pair`.
fn job_options(pair: Pair, name: &str, dir: &Path) -> Vec<String> {
    let (source, sink) = pair.clusters();
    [
        "--job.sourceMasterAddresses",
        &source.master_addrs_joined(),
        "--job.sinkMasterAddresses",
        &sink.master_addrs_joined(),
        "--job.tableName",
        name,
        "--job.tableSuffix",
        "_copy",
        "--job.createTable",
        "true",
        "--job.schemaEvolution",
        "true",
        "--job.checkpointsDirectory",
        &dir.join("chk").to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The job id of a "Job has been submitted" line.
fn job_id(line: &str) -> Option<String> {
    line.strip_prefix("Job has been submitted with JobID ")
        .map(|id| id.trim().to_string())
}

/// The releases of the pairs that run.
fn releases() -> Vec<KuduVersion> {
    let mut versions: Vec<KuduVersion> = pairs().iter().flat_map(|p| [p.source, p.sink]).collect();
    versions.sort();
    versions.dedup();
    versions
}

/// What a tablet of each release does with explicit ids: stored as given
/// (also one below the counter), and its counter moves past the highest,
/// so later INSERTs get higher ids, on both releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_id_is_stored_as_given_and_the_counter_moves_past_it() {
    for version in releases() {
        let cluster = tokio::task::block_in_place(|| kudu(version));
        let client = KuduClient::new(&cluster.master_addrs()).unwrap();
        let name = format!("nu_counter_{}", version.as_str().replace('.', ""));
        let t = create(&client, &name).await;
        let ops = (0..3).map(|n| insert(&t, 1, n)).collect();
        apply(&client, ops).await.unwrap();
        let explicit = vec![
            by_key(&t, OpType::UpsertIgnore, (1, 100), &[("v", 10)]),
            by_key(&t, OpType::Upsert, (2, 200), &[("v", 20)]),
            by_key(&t, OpType::UpsertIgnore, (3, 50), &[("v", 30)]),
        ];
        apply(&client, explicit).await.unwrap_or_else(|e| {
            panic!("Kudu {version} refused an UPSERT naming the hidden id: {e}")
        });
        apply(&client, vec![insert(&t, 1, 40), insert(&t, 4, 50)])
            .await
            .unwrap();
        let keys: Vec<Key> = read_rows(&client, &name).await.into_keys().collect();
        assert_eq!(
            keys,
            [
                (1, 1),
                (1, 2),
                (1, 3),
                (1, 100),
                (1, 201),
                (2, 200),
                (3, 50),
                (4, 202)
            ],
            "Kudu {version}: ids as given, then past the highest"
        );
    }
}

/// A restarted sink (a DR cluster restarted before it is promoted) and a
/// new tablet leader keep counting past the explicit ids: one tablet's id
/// was flushed to disk before the restart (its counter is read back from
/// the data), the other's only in the write-ahead log (replayed). Three
/// tablet servers, three replicas, one dedicated cluster per release.
#[test]
fn a_restart_or_a_leader_change_keeps_counting_past_explicit_ids() {
    each_at_once(
        releases(),
        |v| format!("counter across restarts, {v}"),
        counter_survives,
    );
}

fn counter_survives(version: KuduVersion) {
    let mut cluster = ferry_testkit::MiniCluster::builder()
        .version(version)
        .tservers(3)
        .start()
        .unwrap();
    let rt = ferry_fixtures::runtime();
    let name = "nu_restart";
    let client = KuduClient::new(&cluster.master_addrs()).unwrap();
    let t = rt.block_on(create_with(&client, name, 3));
    let (low, high) = (1, SPLIT + 1);
    rt.block_on(async {
        let ops = (0..3).flat_map(|n| [insert(&t, low, n), insert(&t, high, n)]);
        apply(&client, ops.collect()).await.unwrap();
        let flushed = vec![by_key(&t, OpType::UpsertIgnore, (low, 1000), &[("v", 1)])];
        apply(&client, flushed).await.unwrap();
    });
    // Memory stores flushed now, and not again before the restart.
    set_flush_flags(&cluster, "1", "0");
    wait_flushed(&cluster, name);
    set_flush_flags(&cluster, "3600", "1024");
    rt.block_on(async {
        let logged = vec![by_key(&t, OpType::UpsertIgnore, (high, 2000), &[("v", 2)])];
        apply(&client, logged).await.unwrap();
    });
    cluster.stop_all().unwrap();
    cluster.start_all().unwrap();

    let client = KuduClient::new(&cluster.master_addrs()).unwrap();
    let after_restart = rt.block_on(insert_until_accepted(&client, name));
    assert!(
        after_restart.0 > 1000 && after_restart.1 > 2000,
        "Kudu {version}: after a restart the tablets issued ids {after_restart:?}"
    );
    let tablets = cluster
        .kudu_ok(&[
            "table",
            "list",
            &cluster.master_addrs_joined(),
            "-list_tablets",
            &format!("-tables={name}"),
        ])
        .unwrap();
    let tablets: Vec<&str> = tablets
        .lines()
        .filter_map(|l| l.trim().strip_prefix("T "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(tablets.len(), 2, "Kudu {version}: {tablets:?}");
    for tablet in tablets {
        cluster
            .kudu_ok(&[
                "tablet",
                "leader_step_down",
                &cluster.master_addrs_joined(),
                tablet,
            ])
            .unwrap();
    }
    let after_step_down = rt.block_on(insert_until_accepted(&client, name));
    assert!(
        after_step_down.0 > after_restart.0 && after_step_down.1 > after_restart.1,
        "Kudu {version}: new leaders issued ids {after_step_down:?} after {after_restart:?}"
    );
}

/// Sets the (runtime) flags after which a tablet server flushes a memory
/// store on every tablet server: seconds since the last flush and size.
fn set_flush_flags(cluster: &ferry_testkit::MiniCluster, secs: &str, mb: &str) {
    for addr in cluster.tserver_addrs() {
        for (flag, value) in [("flush_threshold_secs", secs), ("flush_threshold_mb", mb)] {
            cluster
                .kudu_ok(&["tserver", "set_flag", &addr, flag, value, "-force"])
                .unwrap();
        }
    }
}

/// Waits until every replica of every tablet of table `name` has flushed
/// its memory store at least once (the tablet servers' `/metrics`).
fn wait_flushed(cluster: &ferry_testkit::MiniCluster, name: &str) {
    let deadline = Instant::now() + BOUND;
    let servers: Vec<String> = (0..3)
        .map(|i| {
            let d = cluster
                .daemon(ferry_testkit::DaemonKind::TabletServer, i)
                .unwrap();
            d.http_addr.clone()
        })
        .collect();
    let flushes = |addr: &String| -> Vec<u64> {
        let (host, port) = addr.rsplit_once(':').unwrap();
        let path = "/metrics?metrics=flush_mrs_duration";
        let Ok((200, body)) = ferry_fixtures::http::try_http_at(
            host,
            port.parse().unwrap(),
            "GET",
            path,
            None,
            Duration::from_secs(5),
        ) else {
            return Vec::new();
        };
        let entities: Json = serde_json::from_str(&body).unwrap_or_default();
        let tablets = entities.as_array().cloned().unwrap_or_default();
        tablets
            .iter()
            .filter(|e| e["type"] == "tablet" && e["attributes"]["table_name"] == name)
            .map(|e| {
                let metrics = e["metrics"].as_array().cloned().unwrap_or_default();
                metrics
                    .iter()
                    .find(|m| m["name"] == "flush_mrs_duration")
                    .and_then(|m| m["total_count"].as_u64())
                    .unwrap_or(0)
            })
            .collect()
    };
    loop {
        let counts: Vec<Vec<u64>> = servers.iter().map(flushes).collect();
        if counts
            .iter()
            .all(|c| c.len() == 2 && c.iter().all(|n| *n > 0))
        {
            return;
        }
        assert!(Instant::now() < deadline, "no flush of {name}: {counts:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Inserts one row into each tablet (retrying while the tablets come up
/// after a restart or elect a leader) and returns the ids they got.
async fn insert_until_accepted(client: &KuduClient, name: &str) -> (i64, i64) {
    let deadline = Instant::now() + BOUND;
    let t = loop {
        match client.open_table(name).await {
            Ok(t) => break t,
            Err(e) => assert!(Instant::now() < deadline, "{name}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (low, high) = (1, SPLIT + 1);
    // A `v` no row has yet marks the new rows.
    let v = PROMOTED + read_rows(client, name).await.len() as i64;
    while let Err(e) = apply(client, vec![insert(&t, low, v), insert(&t, high, v)]).await {
        assert!(Instant::now() < deadline, "{name}: {e}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let rows = read_rows(client, name).await;
    let id_of = |k: i32| {
        rows.iter()
            .find(|((rk, _), row)| *rk == k && cell(row, "v") == &Value::Int64(v))
            .map(|((_, id), _)| *id)
            .unwrap()
    };
    (id_of(low), id_of(high))
}

/// Replication, verify, schema following and a promotion on each pair,
/// the pairs at once (they mostly wait for windows).
#[test]
fn replicated_with_hidden_ids_verified_and_promoted_without_reusing_one() {
    each_at_once(
        pairs(),
        |p| format!("non-unique key, {}", p.label()),
        |pair| ferry_fixtures::runtime().block_on(replicate_verify_promote(pair)),
    );
}

/// Runs `test` on every item, each on a thread of its own, and fails
/// naming the items whose run failed (their messages are printed above).
fn each_at_once<T: Copy + Send + 'static>(items: Vec<T>, name: fn(T) -> String, test: fn(T)) {
    let runs: Vec<(String, std::thread::JoinHandle<Duration>)> = items
        .into_iter()
        .map(|item| {
            let run = std::thread::spawn(move || {
                let started = Instant::now();
                test(item);
                started.elapsed()
            });
            (name(item), run)
        })
        .collect();
    let mut failed = Vec::new();
    for (label, run) in runs {
        match run.join() {
            Ok(took) => eprintln!("{label}: {took:?}"),
            Err(_) => failed.push(label),
        }
    }
    assert!(failed.is_empty(), "failed: {failed:?}");
}

async fn replicate_verify_promote(pair: Pair) {
    let (a, b) = tokio::task::block_in_place(|| pair.clusters());
    let source = KuduClient::new(&a.master_addrs()).unwrap();
    let sink = KuduClient::new(&b.master_addrs()).unwrap();
    let name = pair.table("nu");
    let copy = format!("{name}_copy");
    let label = pair.label();
    let t = create(&source, &name).await;
    let first = (0..KEYS).flat_map(|k| (0..ROWS_PER_KEY).map(move |n| (k, n)));
    apply(&source, first.map(|(k, n)| insert(&t, k, n)).collect())
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let options = job_options(pair, &name, dir.path());
    let job = ferry().arg("run").args(&options).free_ports().spawn();
    let rest = job.rest();
    let id = job.wait_line_async(BOUND, job_id).await;

    write_while_replicating(&source, &name).await;
    let rows = wait_same(&source, &name, &sink, &copy, &label).await;
    let copied = sink.open_table(&copy).await.unwrap();
    let hidden = copied.schema().auto_incrementing_index().map(|i| {
        let c = &copied.schema().columns()[i];
        (c.name().to_owned(), c.is_key())
    });
    assert_eq!(hidden, Some((ID.to_owned(), true)), "{label}: {copy}");
    assert!(copied.schema().index_of("extra").is_some(), "{label}");
    assert!(copied.schema().index_of("s").is_none(), "{label}");
    let per_k = rows.keys().filter(|(k, _)| *k == 0).count();
    assert!(per_k > 1, "{label}: {per_k} rows with k = 0");

    verify_and_repair(pair, &name, &sink, &copy, dir.path()).await;

    // The planned cutover: drain, stop with a savepoint, verify, report;
    // the reverse job (new primary → old source) starts in its process.
    let report_path = dir.path().join("cutover.json");
    let mut args: Vec<String> = [
        "cutover",
        "--jobmanager",
        &format!("127.0.0.1:{rest}"),
        "--job-id",
        &id,
        "--savepointPath",
        &dir.path().join("sp").to_string_lossy(),
        "--report",
        &report_path.to_string_lossy(),
        "--quiet-period",
        "1",
        "--start-reverse",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(options);
    // The reverse job listens on ports of its own: the forward job may
    // still hold its ports while it exits.
    let cutover = ferry().args(&args).free_ports().spawn();
    let report: Json = cutover
        .wait_line_async(Duration::from_secs(180), |l| {
            serde_json::from_str::<Json>(l)
                .ok()
                .filter(|v| v.get("cutoverTime").is_some())
        })
        .await;
    assert_eq!(report["equal"], true, "{label}: {report}");
    assert_eq!(report["drained"], true, "{label}: {report}");
    let mut job = job;
    let status = job.wait_exit(BOUND);
    assert!(status.success(), "{label}: the job ended with {status}");
    let reverse = cutover.wait_line_async(BOUND, job_id).await;
    assert_ne!(reverse, id);

    insert_on_the_promoted_sink(&sink, &copy, &label).await;
    // The reverse job carries the new rows, hidden ids and all, back to
    // the old source.
    wait_same(&sink, &copy, &source, &name, &format!("{label} reversed")).await;
}

/// Inserts, deletes and updates by full key (UPDATE, and UPSERT naming
/// the id), a column added and one dropped, over a few windows.
async fn write_while_replicating(source: &KuduClient, name: &str) {
    for round in 0..3_usize {
        let t = source.open_table(name).await.unwrap();
        let keys: Vec<Key> = read_rows(source, name).await.into_keys().collect();
        let mut ops = Vec::new();
        for (i, key) in keys.into_iter().enumerate() {
            let v = -(i as i64) - 1000 * round as i64;
            match (i + round) % 9 {
                0 => ops.push(by_key(&t, OpType::Delete, key, &[])),
                3 => ops.push(by_key(&t, OpType::Update, key, &[("v", v)])),
                6 => ops.push(by_key(&t, OpType::Upsert, key, &[("v", v)])),
                _ => {}
            }
        }
        ops.extend((0..KEYS).map(|k| insert(&t, k, 100 + round as i64)));
        apply(source, ops).await.unwrap();
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let t = source.open_table(name).await.unwrap();
    let add =
        AlterTableBuilder::new().add_column(ferry_fixtures::nullable("extra", DataType::Int64));
    source.alter_table(&t, &add).await.unwrap();
    let t = source.open_table(name).await.unwrap();
    let keys: Vec<Key> = read_rows(source, name).await.into_keys().collect();
    let ops = keys
        .into_iter()
        .step_by(7)
        .map(|key| by_key(&t, OpType::Update, key, &[("extra", i64::from(key.0))]))
        .collect();
    apply(source, ops).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    source
        .alter_table(&t, &AlterTableBuilder::new().drop_column("s"))
        .await
        .unwrap();
    let t = source.open_table(name).await.unwrap();
    let ops = (0..KEYS).map(|k| insert(&t, k, 200)).collect();
    apply(source, ops).await.unwrap();
}

/// `ferry verify` says equal; a row deleted and a row changed on the sink
/// are named by their full key; `--repair` puts the row back with its id.
async fn verify_and_repair(pair: Pair, name: &str, sink: &KuduClient, copy: &str, dir: &Path) {
    let (a, b) = pair.clusters();
    let label = pair.label();
    let opts: Vec<String> = [
        "--job.sourceMasterAddresses",
        &a.master_addrs_joined(),
        "--job.sinkMasterAddresses",
        &b.master_addrs_joined(),
        "--job.tableName",
        name,
        "--job.tableSuffix",
        "_copy",
        "--job.checkpointsDirectory",
        &dir.join("chk").to_string_lossy(),
        "--source-time",
        "now",
        "--sink-time",
        "now",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let verify = |extra: &[&str]| {
        let args = opts.clone();
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        async move {
            tokio::task::spawn_blocking(move || {
                ferry().arg("verify").args(extra).args(args).output()
            })
            .await
            .unwrap()
        }
    };
    let json = |o: &std::process::Output| -> Json {
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(o)))
    };
    let o = verify(&[]).await;
    assert_eq!(o.status.code(), Some(0), "{label}: {}", output_text(&o));
    let before = read_rows(sink, copy).await;
    assert_eq!(json(&o)["rowsCompared"], before.len(), "{label}");

    let mut keys = before.keys().copied();
    let (gone, changed) = (keys.next().unwrap(), keys.next().unwrap());
    let t = sink.open_table(copy).await.unwrap();
    let plant = vec![
        by_key(&t, OpType::Delete, gone, &[]),
        by_key(&t, OpType::Update, changed, &[("v", 424_242)]),
    ];
    apply(sink, plant).await.unwrap();
    let o = verify(&[]).await;
    assert_eq!(o.status.code(), Some(1), "{label}: {}", output_text(&o));
    let r = json(&o);
    assert_eq!(
        (&r["missing"], &r["differing"]),
        (&Json::from(1), &Json::from(1)),
        "{label}: {r}"
    );
    let listed: BTreeSet<(String, i64, i64)> = r["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let key = &d["key"];
            let kind = d["kind"].as_str().unwrap_or_default().to_owned();
            (kind, key["k"].as_i64().unwrap(), key[ID].as_i64().unwrap())
        })
        .collect();
    let named = |kind: &str, (k, id): Key| (kind.to_owned(), i64::from(k), id);
    let expected = BTreeSet::from([named("missing", gone), named("differs", changed)]);
    assert_eq!(listed, expected, "{label}: {r}");

    let o = verify(&["--repair"]).await;
    assert_eq!(o.status.code(), Some(0), "{label}: {}", output_text(&o));
    assert_eq!(json(&o)["repair"]["equalAfter"], true, "{label}");
    assert_eq!(
        read_rows(sink, copy).await,
        before,
        "{label}: repaired with its id"
    );
}

/// New INSERTs on the promoted sink, as the applications would make them:
/// all accepted, nothing overwritten, and no new row has an id that a row
/// of its tablet had before.
async fn insert_on_the_promoted_sink(sink: &KuduClient, copy: &str, label: &str) {
    let before = read_rows(sink, copy).await;
    let mut ids: [BTreeSet<i64>; 2] = Default::default();
    for (k, id) in before.keys() {
        ids[tablet(*k)].insert(*id);
    }
    let t = sink.open_table(copy).await.unwrap();
    let ops = (0..KEYS)
        .flat_map(|k| [(k, PROMOTED), (k, PROMOTED + 1)])
        .map(|(k, v)| insert(&t, k, v))
        .collect();
    apply(sink, ops)
        .await
        .unwrap_or_else(|e| panic!("{label}: inserts on the promoted sink failed: {e}"));
    let after = read_rows(sink, copy).await;
    for (key, row) in &before {
        assert_eq!(after.get(key), Some(row), "{label}: {key:?} changed");
    }
    let new: Vec<Key> = after
        .keys()
        .filter(|k| !before.contains_key(k))
        .copied()
        .collect();
    assert_eq!(new.len(), 2 * KEYS as usize, "{label}: {new:?}");
    for (k, id) in new {
        assert!(
            matches!(cell(&after[&(k, id)], "v"), Value::Int64(v) if *v >= PROMOTED),
            "{label}: ({k}, {id})"
        );
        assert!(
            !ids[tablet(k)].contains(&id),
            "{label}: the promoted sink reissued id {id} (k = {k}), which a row of its tablet had"
        );
    }
}

/// A hand-made sink whose key is of the other kind is refused before the
/// job writes a row, naming both tables and the key columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_sink_with_the_other_kind_of_key_is_refused_up_front() {
    let pair = pairs()[0];
    let (a, b) = tokio::task::block_in_place(|| pair.clusters());
    let source = KuduClient::new(&a.master_addrs()).unwrap();
    let sink = KuduClient::new(&b.master_addrs()).unwrap();
    let unique = Schema::new(vec![
        ferry_fixtures::key("k", DataType::Int32),
        ferry_fixtures::nullable("v", DataType::Int64),
    ])
    .unwrap();
    let plain = |name: &str| {
        TableBuilder::new(name, unique.clone())
            .add_hash_partitions(&["k"], 2, 0)
            .num_replicas(1)
    };
    // Non-unique source → unique sink, and unique source → non-unique sink.
    let nu = pair.table("nu_src");
    let t = create(&source, &nu).await;
    apply(
        &source,
        (0..10).map(|k| insert(&t, k % 3, k.into())).collect(),
    )
    .await
    .unwrap();
    sink.create_table(&plain(&format!("{nu}_copy")))
        .await
        .unwrap();
    let un = pair.table("un_src");
    source.create_table(&plain(&un)).await.unwrap();
    let t = source.open_table(&un).await.unwrap();
    let rows = (0..10).map(|k| {
        let mut r = t.new_row();
        r.set_i32("k", k).unwrap();
        Operation::insert(&t, r)
    });
    apply(&source, rows.collect()).await.unwrap();
    create(&sink, &format!("{un}_copy")).await;

    for (table, says) in [
        (&nu, "the source's is non-unique"),
        (&un, "the source's is unique"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let args = job_options(pair, table, dir.path());
        let o = tokio::task::spawn_blocking(move || {
            ferry().arg("run").args(args).free_ports().output()
        })
        .await
        .unwrap();
        let text = output_text(&o);
        assert!(!o.status.success(), "{table}: {text}");
        let sink_table = format!("{table}_copy");
        for part in [sink_table.as_str(), table.as_str(), says, ID, "k INT32"] {
            assert!(text.contains(part), "{table}: '{part}' not in {text}");
        }
        assert!(
            read_rows_any(&sink, &sink_table).await == 0,
            "{table}: rows were written"
        );
    }
}

/// How many rows table `name` holds.
async fn read_rows_any(client: &KuduClient, name: &str) -> usize {
    let table = client.open_table(name).await.unwrap();
    let mut scanner = client.scan_builder(&table).build().unwrap();
    let mut n = 0;
    while let Some(batch) = scanner.next_batch().await.unwrap() {
        n += batch.len();
    }
    n
}
