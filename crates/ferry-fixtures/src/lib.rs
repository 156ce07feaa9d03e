//! Fixtures shared by the workspace's integration tests, so that every test
//! file builds the same tables the same way: one every-type schema, one
//! small `id`/`v` schema, a pair of clusters, full-table reads, a
//! fault-tolerant mixed writer ([`workload`]) and a cell-by-cell table
//! comparison ([`compare`]), a blocking HTTP client for ferry's REST
//! API ([`http`]), the tests' view of a test S3 server ([`s3`]), and the
//! one harness for the `ferry` processes of end-to-end tests
//! ([`process`]).
//!
//! For tests and benchmarks only: a dev-dependency of the crates whose
//! tests use it (kudu-client's own integration tests too, which Cargo
//! allows for dev-dependencies), and a dependency of `ferry-bench`, whose
//! soak runs the same workload and comparison. Tests may panic, so most
//! helpers `expect` rather than return errors.

pub mod compare;
pub mod http;
pub mod live;
pub mod process;
pub mod s3;
pub mod workload;

use std::collections::BTreeMap;

use ferry_testkit::MiniCluster;
use kudu_client::schema::ColumnSchemaBuilder;
use kudu_client::{ColumnSchema, DataType, HybridTime, KuduClient, Schema, Value};

/// Maximum length, in characters, of the every-type schema's VARCHAR `vc`.
pub const VARCHAR_LEN: u32 = 5;

/// The every-type schema: key `id` INT64, then one nullable column of every
/// type a client can write (see [`all_types_value_columns`]).
pub fn all_types_schema() -> Schema {
    all_types_schema_with(Vec::new(), Vec::new())
}

/// The every-type schema with `more_keys` after `id` and `more_values`
/// after the value columns, for tests that need extra key or default
/// columns around the same types.
pub fn all_types_schema_with(
    more_keys: Vec<ColumnSchema>,
    more_values: Vec<ColumnSchema>,
) -> Schema {
    let mut cols = vec![key("id", DataType::Int64)];
    cols.extend(more_keys);
    cols.extend(all_types_value_columns());
    cols.extend(more_values);
    Schema::new(cols).expect("every-type schema")
}

/// One nullable column per writable type, named `b`, `i8`, `i16`, `i32`,
/// `i64`, `f`, `d`, `dec9` (9, 2), `dec18` (18, 4), `dec38` (38, 10), `s`,
/// `bin`, `vc` (VARCHAR([`VARCHAR_LEN`])), `ts`, `dt`.
pub fn all_types_value_columns() -> Vec<ColumnSchema> {
    vec![
        nullable("b", DataType::Bool),
        nullable("i8", DataType::Int8),
        nullable("i16", DataType::Int16),
        nullable("i32", DataType::Int32),
        nullable("i64", DataType::Int64),
        nullable("f", DataType::Float),
        nullable("d", DataType::Double),
        built(ColumnSchemaBuilder::decimal("dec9", 9, 2).nullable(true)),
        built(ColumnSchemaBuilder::decimal("dec18", 18, 4).nullable(true)),
        built(ColumnSchemaBuilder::decimal("dec38", 38, 10).nullable(true)),
        nullable("s", DataType::String),
        nullable("bin", DataType::Binary),
        built(ColumnSchemaBuilder::varchar("vc", VARCHAR_LEN).nullable(true)),
        nullable("ts", DataType::UnixtimeMicros),
        nullable("dt", DataType::Date),
    ]
}

/// The small schema: key `id` INT64 and a nullable STRING `v`.
pub fn small_schema() -> Schema {
    small_schema_with(Vec::new())
}

/// The small schema followed by `more` columns.
pub fn small_schema_with(more: Vec<ColumnSchema>) -> Schema {
    let mut cols = vec![key("id", DataType::Int64), nullable("v", DataType::String)];
    cols.extend(more);
    Schema::new(cols).expect("small schema")
}

/// A key column.
pub fn key(name: &str, t: DataType) -> ColumnSchema {
    built(ColumnSchema::builder(name, t).key(true))
}

/// A nullable non-key column.
pub fn nullable(name: &str, t: DataType) -> ColumnSchema {
    built(ColumnSchema::builder(name, t).nullable(true))
}

fn built(b: ColumnSchemaBuilder) -> ColumnSchema {
    b.build().expect("fixture column")
}

/// Two independent clusters (1 master + 3 tablet servers each), started
/// side by side: a source and a sink.
pub fn two_clusters() -> (MiniCluster, MiniCluster) {
    two_clusters_with(1)
}

/// Like [`two_clusters`], with `source_masters` masters on the source (3
/// for leader changes).
pub fn two_clusters_with(source_masters: usize) -> (MiniCluster, MiniCluster) {
    let a = std::thread::spawn(move || {
        MiniCluster::builder()
            .masters(source_masters)
            .tservers(3)
            .start()
            .expect("source cluster")
    });
    let b = std::thread::spawn(|| {
        MiniCluster::builder()
            .tservers(3)
            .start()
            .expect("sink cluster")
    });
    (a.join().expect("source"), b.join().expect("sink"))
}

/// A two-worker runtime for tests that drive async code from a plain
/// `#[test]` (the machine has two cores).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Every row of table `name` (whose first column is an INT64 key), keyed by
/// that key, as values.
pub async fn read_all(client: &KuduClient, name: &str) -> BTreeMap<i64, Vec<Value>> {
    read_at(client, name, None).await
}

/// Like [`read_all`], as of hybrid time `ts` when given (a snapshot scan).
pub async fn read_at(
    client: &KuduClient,
    name: &str,
    ts: Option<HybridTime>,
) -> BTreeMap<i64, Vec<Value>> {
    let table = client.open_table(name).await.expect("open");
    let mut builder = client.scan_builder(&table);
    if let Some(ts) = ts {
        builder = builder.snapshot(ts);
    }
    let mut scanner = builder.build().expect("scanner");
    let mut rows = BTreeMap::new();
    while let Some(batch) = scanner.next_batch().await.expect("scan") {
        for view in batch.rows() {
            let values = view.to_values().expect("values");
            let Value::Int64(id) = values[0] else {
                panic!("key is not INT64")
            };
            rows.insert(id, values);
        }
    }
    rows
}

/// One value (typically a pair of clusters) shared by the tests of a test
/// binary that run at the same time, so that splitting a scenario into
/// named tests does not multiply cluster start-ups.
///
/// [`Shared::get`] hands out the live value or starts a new one; the value
/// is dropped (clusters torn down, logs kept if a test panicked) when the
/// last test holding it finishes. Tests that share a value must use their
/// own table names.
pub struct Shared<T> {
    slot: std::sync::Mutex<std::sync::Weak<T>>,
}

impl<T> Shared<T> {
    /// An empty slot, for a `static`.
    pub const fn new() -> Self {
        Shared {
            slot: std::sync::Mutex::new(std::sync::Weak::new()),
        }
    }

    /// The live shared value, or a new one from `start`. Holds the slot
    /// while starting, so concurrent tests wait for one start-up.
    pub fn get(&self, start: impl FnOnce() -> T) -> std::sync::Arc<T> {
        let mut slot = self
            .slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(live) = slot.upgrade() {
            return live;
        }
        let fresh = std::sync::Arc::new(start());
        *slot = std::sync::Arc::downgrade(&fresh);
        fresh
    }
}

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// A free TCP port on loopback, for a `ferry` process's REST or metrics
/// listener (see [`process::FerryCommand::free_ports`]).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}
