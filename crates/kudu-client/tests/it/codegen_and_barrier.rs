//! The tablet server's code cache under diff scans and safe-time barriers,
//! and what a barrier at a future snapshot does, against a real Kudu 1.17
//! tablet server (ferry-testkit), read from its `/metrics` web endpoint:
//!
//! - a diff scan queries the code cache once per tablet it scans (a
//!   MemRowSet iterator asks for a compiled row projector) and never hits:
//!   the key holds the address of the IS_DELETED column's default value,
//!   which is new in every scan, so every diff scan queues one LLVM compile
//!   per tablet — with or without rows in the window. An ordinary snapshot
//!   scan of the same tablets hits once its projector is compiled (the
//!   control);
//! - [`KuduClient::wait_applied`] (empty projection, no virtual column)
//!   queries it once per call and, after the first compile of that key,
//!   always hits;
//! - a barrier at a snapshot 1.5 s ahead of the server's clock waits until
//!   that time has passed. (The server waits at most
//!   `--scanner_max_wait_ms`, 1 s by default; a snapshot further ahead is
//!   answered at once with SERVICE_UNAVAILABLE "could not wait for desired
//!   snapshot timestamp to be consistent: specified time is …us in the
//!   future, but deadline expires in 999995us", which `wait_applied`
//!   retries until the snapshot is close enough for the server to wait.)
//!
//! The code cache counters are server-wide, so the tests share one
//! one-tablet-server cluster and run one at a time (`SERIAL`); each uses
//! its own table.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::Shared;
use ferry_testkit::MiniCluster;
use futures::TryStreamExt;
use kudu_client::scan::RowBatch;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{
    ColumnSchema, DataType, HybridTime, KuduClient, KuduTable, RemoteTablet, Schema, TableBuilder,
};

/// Tablets of every test table (hash buckets).
const TABLETS: u64 = 4;

static CLUSTER: Shared<MiniCluster> = Shared::new();

/// Held by each test for its whole run: the counters are the server's.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn cluster() -> Arc<MiniCluster> {
    CLUSTER.get(|| MiniCluster::builder().tservers(1).start().expect("cluster"))
}

/// The tablet server's code cache counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CodeCache {
    hits: u64,
    queries: u64,
}

impl CodeCache {
    fn since(self, before: CodeCache) -> CodeCache {
        CodeCache {
            hits: self.hits - before.hits,
            queries: self.queries - before.queries,
        }
    }
}

/// The body of `GET path` from the web server at `addr` (`host:port`).
fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    body.to_owned()
}

/// The integer value of metric `name` in a compact `/metrics` answer
/// (`..."name":"code_cache_hits","value":12}...`).
fn metric(body: &str, name: &str) -> u64 {
    let tag = format!("\"name\":\"{name}\",\"value\":");
    let at = body
        .find(&tag)
        .unwrap_or_else(|| panic!("no metric {name} in {body}"))
        + tag.len();
    let digits: String = body[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("{name} in {body}"))
}

/// The server entity's `code_cache_hits` and `code_cache_queries`.
fn code_cache(web: &str) -> CodeCache {
    let body = http_get(web, "/metrics?types=server&metrics=code_cache&compact=true");
    CodeCache {
        hits: metric(&body, "code_cache_hits"),
        queries: metric(&body, "code_cache_queries"),
    }
}

/// A client and the web address (`host:port`) of the only tablet server.
async fn connect(c: &MiniCluster) -> (KuduClient, String) {
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let servers = client.list_tablet_servers().await.expect("tablet servers");
    assert_eq!(servers.len(), 1, "{servers:?}");
    assert!(!servers[0].https_enabled, "{servers:?}");
    let web = servers[0].http_addresses[0].clone();
    (client, web)
}

/// A hybrid time after everything this client has seen, from the cluster's
/// clock.
async fn now(client: &KuduClient) -> HybridTime {
    let clock = client.server_clock().await.expect("server clock");
    let seen = client
        .last_propagated_timestamp()
        .map_or(0, HybridTime::raw);
    clock.max(HybridTime::from_raw(seen + 1))
}

/// Table `name`: `key` INT64 and `more` nullable columns, HASH(key) into
/// [`TABLETS`] tablets, one replica. (Different column lists give
/// different code cache keys.)
async fn create(client: &KuduClient, name: &str, more: &[(&str, DataType)]) -> KuduTable {
    let mut cols = vec![ColumnSchema::builder("key", DataType::Int64)
        .key(true)
        .build()
        .expect("key")];
    for (n, t) in more {
        cols.push(
            ColumnSchema::builder(*n, *t)
                .nullable(true)
                .build()
                .expect("column"),
        );
    }
    let b = TableBuilder::new(name, Schema::new(cols).expect("schema"))
        .add_hash_partitions(&["key"], TABLETS as u32, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create table");
    client.open_table(name).await.expect("open table")
}

/// Upserts keys `0..n` (other columns NULL): every tablet's MemRowSet
/// gets rows.
async fn write(client: &KuduClient, table: &KuduTable, n: i64) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
        .expect("session");
    for k in 0..n {
        let mut r = table.new_row();
        r.set_i64("key", k).expect("key");
        s.apply(Operation::upsert(table, r)).await.expect("apply");
    }
    s.flush().await.expect("flush");
}

async fn tablets(client: &KuduClient, table: &KuduTable) -> Vec<Arc<RemoteTablet>> {
    let t = client
        .tablets_in_range(table, &[], &[], Instant::now() + Duration::from_secs(10))
        .await
        .expect("tablets");
    assert_eq!(t.len() as u64, TABLETS);
    t
}

/// Rows of a scan of `table`: a diff scan over `[start, end)`, or a
/// snapshot scan at `end` when `start` is `None`.
async fn scan(
    client: &KuduClient,
    table: &KuduTable,
    start: Option<HybridTime>,
    end: HybridTime,
) -> usize {
    let b = client.scan_builder(table);
    let b = match start {
        Some(start) => b.diff(start, end),
        None => b.snapshot(end),
    };
    let batches: Vec<RowBatch> = b
        .build()
        .expect("scanner")
        .try_collect()
        .await
        .expect("scan");
    batches.iter().map(RowBatch::num_rows).sum()
}

/// One barrier on the leader of `tablet`.
async fn barrier(
    client: &KuduClient,
    table: &KuduTable,
    tablet: &RemoteTablet,
    ts: HybridTime,
) -> HybridTime {
    client
        .wait_applied(
            table,
            &tablet.tablet_id,
            tablet.leader().expect("leader"),
            ts,
            Duration::from_secs(10),
        )
        .await
        .expect("wait_applied")
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_scans_miss_the_code_cache() {
    let _serial = SERIAL.lock().await;
    let c = cluster();
    let (client, web) = connect(&c).await;
    let table = create(&client, "codegen_diff", &[("val", DataType::Int32)]).await;
    let t0 = now(&client).await;
    write(&client, &table, 100).await;
    let t1 = now(&client).await;

    // The control: a snapshot scan (no virtual column) misses until its
    // projector is compiled (one compile for all four tablets: same key),
    // then hits on every tablet.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let before = code_cache(&web);
        assert_eq!(scan(&client, &table, None, t1).await, 100);
        let d = code_cache(&web).since(before);
        assert_eq!(d.queries, TABLETS, "{d:?}");
        if d.hits == TABLETS {
            break;
        }
        assert!(Instant::now() < deadline, "snapshot scans never hit");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Diff scans: one query per tablet, never a hit, whether the window
    // holds rows ([t0, t1): 100) or none ([t1, t2)). Each miss queues a
    // compile (~60 ms each on one compiler thread, in the logs with
    // --codegen_time_compilation); the pause lets them land, so a key that
    // repeated would hit on the next scan.
    let t2 = now(&client).await;
    let mut total = CodeCache {
        hits: 0,
        queries: 0,
    };
    for (start, end, rows) in [(t0, t1, 100), (t1, t2, 0), (t0, t1, 100), (t1, t2, 0)] {
        let before = code_cache(&web);
        assert_eq!(scan(&client, &table, Some(start), end).await, rows);
        let d = code_cache(&web).since(before);
        assert_eq!(
            d,
            CodeCache {
                hits: 0,
                queries: TABLETS
            },
            "one diff scan"
        );
        total.queries += d.queries;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert_eq!(total.queries, 4 * TABLETS);

    // The snapshot scan still hits: the cache works, diff scans miss it.
    let before = code_cache(&web);
    assert_eq!(scan(&client, &table, None, t1).await, 100);
    assert_eq!(
        code_cache(&web).since(before),
        CodeCache {
            hits: TABLETS,
            queries: TABLETS
        }
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn barriers_hit_the_code_cache() {
    let _serial = SERIAL.lock().await;
    let c = cluster();
    let (client, web) = connect(&c).await;
    // Columns no other test uses: the empty projection over this base
    // schema has not been compiled yet.
    let table = create(
        &client,
        "codegen_barrier",
        &[("s", DataType::String), ("d", DataType::Double)],
    )
    .await;
    write(&client, &table, 100).await;
    let ts = now(&client).await;
    let tablets = tablets(&client, &table).await;

    // The first barrier misses and queues the compile.
    let before = code_cache(&web);
    assert_eq!(barrier(&client, &table, &tablets[0], ts).await, ts);
    assert_eq!(
        code_cache(&web).since(before),
        CodeCache {
            hits: 0,
            queries: 1
        },
        "first barrier"
    );
    // Once it is compiled, a barrier hits.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let before = code_cache(&web);
        barrier(&client, &table, &tablets[0], ts).await;
        let d = code_cache(&web).since(before);
        assert_eq!(d.queries, 1, "{d:?}");
        if d.hits == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "barriers never hit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // From then on every barrier, on every tablet (one key: the empty
    // projection over the same base schema), is one query and one hit.
    let before = code_cache(&web);
    for _ in 0..5 {
        for t in &tablets {
            assert_eq!(barrier(&client, &table, t, ts).await, ts);
        }
    }
    assert_eq!(
        code_cache(&web).since(before),
        CodeCache {
            hits: 5 * TABLETS,
            queries: 5 * TABLETS
        },
        "warm barriers"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_barrier_waits_for_its_snapshot() {
    let _serial = SERIAL.lock().await;
    let c = cluster();
    let (client, _web) = connect(&c).await;
    let table = create(&client, "codegen_future", &[("val", DataType::Int32)]).await;
    write(&client, &table, 10).await;
    let tablets = tablets(&client, &table).await;

    let clock = client.server_clock().await.expect("clock");
    let future = HybridTime::from_micros(clock.physical_micros() + 1_500_000);
    let started = Instant::now();
    let got = barrier(&client, &table, &tablets[0], future).await;
    let waited = started.elapsed();
    let after = client.server_clock().await.expect("clock");
    assert_eq!(got, future, "the snapshot the server used");
    assert!(
        after >= future,
        "returned at {after}, before its snapshot {future}"
    );
    assert!(waited >= Duration::from_millis(1200), "waited {waited:?}");
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
}
