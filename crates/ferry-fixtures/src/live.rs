//! Fixtures for live-table tests (issue 13): many tables with varied
//! schemas and partitioning, a comparison of every table of a job, a
//! schema comparison attribute by attribute, the newest checkpoint's
//! per-table progress, and Prometheus samples read by label.
//!
//! Every table made here has an INT64 key `id` first and only nullable
//! value columns, so [`crate::workload::Workload`], [`crate::read_all`]
//! and [`load_rows`] work on all of them.

use std::time::{Duration, Instant};

use kudu_client::schema::ColumnSchemaBuilder;
use kudu_client::write::{FlushMode, OpType, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, KuduClient, Row, Schema, TableBuilder};

use crate::compare::{compare_tables, TableDiff};
use crate::{all_types_schema, nullable, small_schema};

/// How many shapes [`create_varied_table`] knows; table `i` gets shape
/// `i % SHAPES`.
pub const SHAPES: usize = 5;

/// The range bounds of the range-partitioned shapes: (-inf, 0), [0, 1e6),
/// [1e6, +inf); the middle range has its own hash schema in shape 3.
const RANGE_SPLITS: [i64; 2] = [0, 1_000_000];

/// Creates table `name` on `client` in shape `i % SHAPES`:
/// 0. small schema, hash(id) 3 buckets;
/// 1. every-type schema, hash(id) 2 buckets;
/// 2. small schema + INT32/DOUBLE/BOOL, range(id) with three ranges;
/// 3. small schema + DECIMAL/VARCHAR/TIMESTAMP, hash(id) 2 × range(id),
///    the middle range with its own hash schema (4 buckets);
/// 4. small schema + a column with encoding, compression, block size and
///    comment set, hash(id) 2 buckets, 1 replica.
pub async fn create_varied_table(client: &KuduClient, name: &str, i: usize) {
    let b = match i % SHAPES {
        0 => TableBuilder::new(name, small_schema()).add_hash_partitions(&["id"], 3, 0),
        1 => TableBuilder::new(name, all_types_schema()).add_hash_partitions(&["id"], 2, 0),
        2 => {
            let schema = crate::small_schema_with(vec![
                nullable("n", DataType::Int32),
                nullable("x", DataType::Double),
                nullable("flag", DataType::Bool),
            ]);
            ranged(TableBuilder::new(name, schema.clone()), &schema, false)
        }
        3 => {
            let schema = crate::small_schema_with(vec![
                ColumnSchemaBuilder::decimal("amount", 18, 2)
                    .nullable(true)
                    .build()
                    .expect("amount"),
                ColumnSchemaBuilder::varchar("code", 8)
                    .nullable(true)
                    .build()
                    .expect("code"),
                nullable("at", DataType::UnixtimeMicros),
            ]);
            ranged(
                TableBuilder::new(name, schema.clone()).add_hash_partitions(&["id"], 2, 0),
                &schema,
                true,
            )
        }
        _ => {
            use kudu_client::schema::{Compression, Encoding};
            let schema =
                crate::small_schema_with(vec![ColumnSchema::builder("note", DataType::String)
                    .nullable(true)
                    .encoding(Encoding::Prefix)
                    .compression(Compression::Lz4)
                    .block_size(16 * 1024)
                    .comment("a column with storage attributes")
                    .build()
                    .expect("note")]);
            TableBuilder::new(name, schema)
                .add_hash_partitions(&["id"], 2, 0)
                .num_replicas(1)
        }
    };
    client
        .create_table(&b)
        .await
        .unwrap_or_else(|e| panic!("create table {name}: {e}"));
}

fn ranged(b: TableBuilder, schema: &Schema, custom_hash: bool) -> TableBuilder {
    let bound = |v: Option<i64>| {
        let mut r = Row::new(schema);
        if let Some(v) = v {
            r.set_i64("id", v).expect("bound");
        }
        r
    };
    let lo = |v| (OpType::RangeLowerBound, bound(v));
    let hi = |v| (OpType::RangeUpperBound, bound(v));
    let [a, z] = RANGE_SPLITS;
    let b = b
        .set_range_partition_columns(&["id"])
        .add_range_partition_with_bounds(lo(None), hi(Some(a)));
    let b = if custom_hash {
        b.add_range_with_hash_schema(lo(Some(a)), hi(Some(z)), &[(&["id"][..], 4, 7)])
    } else {
        b.add_range_partition_with_bounds(lo(Some(a)), hi(Some(z)))
    };
    b.add_range_partition_with_bounds(lo(Some(z)), hi(None))
}

/// Creates `n` tables `{prefix}{i:02}` in the shapes of
/// [`create_varied_table`] and returns their names.
pub async fn create_varied_tables(client: &KuduClient, prefix: &str, n: usize) -> Vec<String> {
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("{prefix}{i:02}");
        create_varied_table(client, &name, i).await;
        names.push(name);
    }
    names
}

/// Upserts rows with keys `ids` into `name`, `v` set when the table has it.
pub async fn load_rows(client: &KuduClient, name: &str, ids: std::ops::Range<i64>) {
    let table = client.open_table(name).await.expect("open for load");
    let has_v = table.schema().columns().iter().any(|c| c.name() == "v");
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for id in ids {
        let mut r = table.new_row();
        r.set_i64("id", id).expect("id");
        if has_v {
            r.set_str("v", &format!("row {id}")).expect("v");
        }
        s.apply(Operation::upsert(&table, r)).await.expect("load");
    }
    s.flush().await.expect("flush load");
}

/// Compares every (source, sink) pair; returns the pairs that differ with
/// their report (empty: all equal).
pub async fn compare_all(
    source: &KuduClient,
    sink: &KuduClient,
    pairs: &[(String, String)],
) -> Vec<(String, TableDiff)> {
    let mut bad = Vec::new();
    for (a, b) in pairs {
        let diff = compare_tables(source, sink, a, b).await;
        if !diff.is_equal() {
            bad.push((a.clone(), diff));
        }
    }
    bad
}

fn column_attrs(c: &ColumnSchema) -> String {
    format!(
        "type {} nullable {} key {} default {:?} encoding {:?} compression {:?} block size {:?} comment {:?}",
        c.type_display(),
        c.is_nullable(),
        c.is_key(),
        c.default_value(),
        c.encoding(),
        c.compression(),
        c.block_size(),
        c.comment(),
    )
}

/// The differences between the schemas and range partitions of
/// `source_table` and `sink_table`: columns in order by name and every
/// attribute (type, nullability, key, default, encoding, compression,
/// block size, comment), then the range partitions with their hash
/// schemas. Empty when they are the same. Column ids are not compared:
/// each cluster assigns its own.
pub async fn schema_differences(
    source: &KuduClient,
    sink: &KuduClient,
    source_table: &str,
    sink_table: &str,
) -> Vec<String> {
    let a = source.open_table(source_table).await.expect("open source");
    let b = sink.open_table(sink_table).await.expect("open sink");
    let mut out = Vec::new();
    let (ca, cb) = (a.schema().columns(), b.schema().columns());
    let names = |cs: &[ColumnSchema]| cs.iter().map(|c| c.name().to_string()).collect::<Vec<_>>();
    if names(ca) != names(cb) {
        out.push(format!(
            "columns: source {:?}, sink {:?}",
            names(ca),
            names(cb)
        ));
    }
    for c in ca {
        if let Some(d) = cb.iter().find(|d| d.name() == c.name()) {
            let (x, y) = (column_attrs(c), column_attrs(d));
            if x != y {
                out.push(format!("column `{}`: source {x}; sink {y}", c.name()));
            }
        }
    }
    let ra = source.range_partitions(&a).await.expect("source ranges");
    let rb = sink.range_partitions(&b).await.expect("sink ranges");
    let render = |rs: &[kudu_client::partition::RangePartition]| {
        rs.iter()
            .map(|r| format!("{:?}..{:?} {:?}", r.lower_key, r.upper_key, r.hash_schema))
            .collect::<Vec<_>>()
    };
    if render(&ra) != render(&rb) {
        out.push(format!(
            "range partitions: source {:?}; sink {:?}",
            render(&ra),
            render(&rb)
        ));
    }
    out
}

/// The value of Prometheus sample `metric` whose label `label` is
/// `value`, in exposition text `text` (`None`: no such sample).
pub fn prom_sample(text: &str, metric: &str, label: &str, value: &str) -> Option<f64> {
    let want = format!("{label}=\"{value}\"");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (head, v) = l.rsplit_once(' ')?;
            let (name, labels) = head.split_once('{').unwrap_or((head, ""));
            (name == metric && labels.contains(&want)).then(|| v.parse().ok())?
        })
        .next()
}

/// Every value label `label` takes on samples of `metric` in `text`.
pub fn prom_label_values(text: &str, metric: &str, label: &str) -> Vec<String> {
    let key = format!("{label}=\"");
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .filter_map(|l| {
            let rest = &l[l.find(&key)? + key.len()..];
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Polls `check` every 300 ms until it returns `Some`, panicking with
/// `what` after `limit` (a bound on a hang, not a timing assertion).
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The per-table window-end series the tests wait on.
pub const TABLE_END_METRIC: &str = "ferry_table_last_end_timestamp_seconds";

/// Waits until `/metrics` of the ferry process on `metrics_port` shows,
/// for every table in `names`, a last window end after the source's clock
/// now: every change acknowledged before this call is then on the sink.
pub async fn wait_caught_up(
    source: &KuduClient,
    metrics_port: u16,
    names: &[String],
    limit: Duration,
) {
    let now = source.server_clock().await.expect("source clock");
    let stamp = now.physical_micros() as f64 / 1e6;
    wait_for(
        &format!("every table of {names:?} to pass {stamp}"),
        limit,
        || async {
            // A process that is gone or not listening yet reads as no
            // samples (the wait's bound reports a hang).
            let text = tokio::task::spawn_blocking(move || {
                crate::http::try_http("GET", metrics_port, "/metrics", None)
                    .map(|(_, body)| body)
                    .unwrap_or_default()
            })
            .await
            .unwrap_or_default();
            names
                .iter()
                .all(|n| {
                    prom_sample(&text, TABLE_END_METRIC, "table_name", n).is_some_and(|t| t > stamp)
                })
                .then_some(())
        },
    )
    .await;
}
