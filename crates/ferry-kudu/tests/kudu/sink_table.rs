//! `prepare_sink_table` against two real Kudu clusters (source and sink):
//! copies of every column type, of hash + range + custom-hash + non-covered
//! partitioning, of range-with-split-rows, hash-only and unpartitioned
//! tables; owner restored or not; existing sinks accepted or refused; the
//! refusals a user acts on.
//!
//! Each test states one behaviour; the tests share one pair of clusters
//! while they run (cluster start-up dominates the run time), so each uses
//! its own table names.

use ferry_fixtures::{key, nullable, small_schema_with, Shared};
use ferry_kudu::sink_table::{
    prepare_sink_table, range_partitions, Side, SinkTableAction, SinkTableError, SinkTableOptions,
};
use ferry_testkit::MiniCluster;
use kudu_client::schema::{ColumnSchemaBuilder, Compression, Encoding};
use kudu_client::write::OpType;
use kudu_client::{
    AlterTableBuilder, ColumnSchema, DataType, KuduClient, KuduTable, Row, Schema, TableBuilder,
    Value,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn opts(name: &str, create_table: bool, restore_owner: bool) -> SinkTableOptions {
    SinkTableOptions {
        sink_table_name: name.to_owned(),
        create_table,
        restore_owner,
        follow_schema: false,
    }
}

/// The source and sink clusters the tests share. The sink master lets one
/// CreateTable make at most 15 × 3 = 45 tablet replicas, so bigger copies
/// must add their ranges after creation.
pub(crate) struct Clusters {
    src: MiniCluster,
    dst: MiniCluster,
}

static CLUSTERS: Shared<Clusters> = Shared::new();

/// The shared clusters (started by the first test that needs them) and a
/// client for each.
pub(crate) fn clusters() -> (Arc<Clusters>, KuduClient, KuduClient) {
    let c = CLUSTERS.get(|| {
        let src = std::thread::spawn(|| {
            MiniCluster::builder()
                .tservers(3)
                .start()
                .expect("source cluster starts")
        });
        let dst = MiniCluster::builder()
            .tservers(3)
            .master_flag("--max_create_tablets_per_ts=15")
            .start()
            .expect("sink cluster starts");
        Clusters {
            src: src.join().expect("source cluster"),
            dst,
        }
    });
    let src = KuduClient::new(&c.src.master_addrs()).expect("source client");
    let dst = KuduClient::new(&c.dst.master_addrs()).expect("sink client");
    (c, src, dst)
}

/// Creates the small source table `name` (`id`, `v`, and a NOT NULL `n`)
/// with 3 replicas.
async fn create_small(src: &KuduClient, name: &str) {
    let small = small_schema_with(vec![ColumnSchema::builder("n", DataType::Int32)
        .build()
        .expect("n")]);
    src.create_table(&TableBuilder::new(name, small).num_replicas(3))
        .await
        .expect("create small");
}

/// Every type, with defaults, comments and storage hints (unlike the shared
/// every-type fixture, which has none of them).
fn decorated_all_types_schema() -> Schema {
    Schema::new(vec![
        key("id", DataType::Int64),
        ColumnSchema::builder("b", DataType::Bool)
            .nullable(true)
            .encoding(Encoding::Rle)
            .build()
            .expect("b"),
        nullable("i8", DataType::Int8),
        ColumnSchema::builder("i16", DataType::Int16)
            .default_value(Value::Int16(-3))
            .build()
            .expect("i16"),
        ColumnSchema::builder("i32", DataType::Int32)
            .nullable(true)
            .encoding(Encoding::BitShuffle)
            .compression(Compression::Lz4)
            .block_size(8192)
            .build()
            .expect("i32"),
        nullable("i64", DataType::Int64),
        ColumnSchema::builder("f", DataType::Float)
            .nullable(true)
            .compression(Compression::Zlib)
            .build()
            .expect("f"),
        nullable("d", DataType::Double),
        ColumnSchemaBuilder::decimal("dec9", 9, 2)
            .nullable(true)
            .build()
            .expect("dec9"),
        ColumnSchemaBuilder::decimal("dec18", 18, 4)
            .default_value(Value::Decimal(12_345))
            .build()
            .expect("dec18"),
        ColumnSchemaBuilder::decimal("dec38", 38, 10)
            .nullable(true)
            .build()
            .expect("dec38"),
        ColumnSchema::builder("s", DataType::String)
            .nullable(true)
            .encoding(Encoding::Dict)
            .compression(Compression::Snappy)
            .comment("a string")
            .build()
            .expect("s"),
        ColumnSchema::builder("bin", DataType::Binary)
            .default_value(Value::Binary(vec![0, 1, 2]))
            .build()
            .expect("bin"),
        ColumnSchemaBuilder::varchar("vc", 10)
            .nullable(true)
            .encoding(Encoding::Prefix)
            .build()
            .expect("vc"),
        nullable("ts", DataType::UnixtimeMicros),
        ColumnSchema::builder("dt", DataType::Date)
            .default_value(Value::Date(19_000))
            .build()
            .expect("dt"),
        ColumnSchema::builder("with_default", DataType::String)
            .default_value(Value::String("x".into()))
            .comment("has a default")
            .build()
            .expect("with_default"),
    ])
    .expect("schema")
}

fn assert_same_columns(src: &KuduTable, dst: &KuduTable) {
    let (a, b) = (src.schema(), dst.schema());
    assert_eq!(a.len(), b.len(), "column count of {}", dst.name());
    assert_eq!(a.num_key_columns(), b.num_key_columns());
    for (x, y) in a.columns().iter().zip(b.columns()) {
        let n = x.name();
        assert_eq!(x.name(), y.name());
        assert_eq!(x.data_type(), y.data_type(), "{n}");
        assert_eq!(x.type_attributes(), y.type_attributes(), "{n}");
        assert_eq!(x.is_nullable(), y.is_nullable(), "{n}");
        assert_eq!(x.is_key(), y.is_key(), "{n}");
        assert_eq!(x.default_value(), y.default_value(), "{n}");
        assert_eq!(x.encoding(), y.encoding(), "{n}");
        assert_eq!(x.compression(), y.compression(), "{n}");
        assert_eq!(x.block_size(), y.block_size(), "{n}");
        assert_eq!(x.comment(), y.comment(), "{n}");
    }
}

async fn tablet_count(client: &KuduClient, t: &KuduTable) -> usize {
    client
        .tablets_in_range(t, &[], &[], Instant::now() + Duration::from_secs(30))
        .await
        .expect("tablets")
        .len()
}

/// Hash schemas, range columns, custom-hash ranges, the derived range list
/// and the tablet count are equal on both sides.
async fn assert_same_partitioning(
    src_client: &KuduClient,
    src: &KuduTable,
    dst_client: &KuduClient,
    dst: &KuduTable,
) {
    let (a, b) = (src.partition_schema(), dst.partition_schema());
    assert_eq!(
        a.hash_schema(),
        b.hash_schema(),
        "table-wide hash schema of {}",
        dst.name()
    );
    assert_eq!(
        a.range_columns(),
        b.range_columns(),
        "range columns of {}",
        dst.name()
    );
    let custom = |t: &KuduTable| {
        t.partition_schema()
            .custom_hash_schema_ranges()
            .iter()
            .map(|r| {
                (
                    r.lower_key().to_vec(),
                    r.upper_key().to_vec(),
                    r.hash_schema().to_vec(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        custom(src),
        custom(dst),
        "custom-hash ranges of {}",
        dst.name()
    );
    let ra = range_partitions(src_client, src, Side::Source)
        .await
        .expect("source ranges");
    let rb = range_partitions(dst_client, dst, Side::Sink)
        .await
        .expect("sink ranges");
    assert_eq!(ra, rb, "range partitions of {}", dst.name());
    let (ta, tb) = (
        tablet_count(src_client, src).await,
        tablet_count(dst_client, dst).await,
    );
    assert_eq!(ta, tb, "tablet count of {}", dst.name());
    assert_eq!(ta, ra.iter().map(|r| r.tablets).sum::<usize>());
}

/// `kudu table describe` of both tables, as the real CLI prints them, with
/// the table name and owner lines left out.
fn assert_cli_describes_the_same(
    src: &MiniCluster,
    src_table: &str,
    dst: &MiniCluster,
    dst_table: &str,
) {
    let describe = |c: &MiniCluster, t: &str| {
        let out = c
            .kudu_ok(&["table", "describe", &c.master_addrs_joined(), t])
            .expect("kudu table describe");
        out.lines()
            .filter(|l| !l.starts_with("TABLE ") && !l.starts_with("OWNER "))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let (a, b) = (describe(src, src_table), describe(dst, dst_table));
    assert_eq!(a, b, "kudu table describe of {src_table} vs {dst_table}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_column_type_is_copied_with_its_attributes_but_not_the_owner() {
    let (c, src, dst) = clusters();
    src.create_table(
        &TableBuilder::new("all_types", decorated_all_types_schema())
            .add_hash_partitions(&["id"], 3, 0)
            .set_range_partition_columns::<&str>(&[])
            .num_replicas(3)
            .owner("alice")
            .comment("every type")
            .extra_config("kudu.table.history_max_age_sec", "3600"),
    )
    .await
    .expect("create all_types");
    let plan = prepare_sink_table(&src, &dst, "all_types", &opts("all_types", true, false))
        .await
        .expect("copy all_types");
    assert_eq!(plan.action, SinkTableAction::Created);
    let s = src.open_table("all_types").await.expect("open source");
    let d = plan.table;
    assert_eq!(d.name(), "all_types");
    assert_same_columns(&s, &d);
    assert_same_partitioning(&src, &s, &dst, &d).await;
    assert_eq!(d.num_replicas(), 3);
    assert_eq!(d.comment(), Some("every type"));
    assert_eq!(d.extra_configs(), s.extra_configs());
    assert_eq!(
        d.extra_configs()
            .get("kudu.table.history_max_age_sec")
            .map(String::as_str),
        Some("3600")
    );
    assert_ne!(
        d.owner(),
        Some("alice"),
        "owner is not restored without restoreOwner"
    );
    assert_cli_describes_the_same(&c.src, "all_types", &c.dst, "all_types");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_created_copy_is_found_and_accepted_on_the_next_run() {
    let (_c, src, dst) = clusters();
    src.create_table(
        &TableBuilder::new("rerun", decorated_all_types_schema())
            .add_hash_partitions(&["id"], 3, 0)
            .set_range_partition_columns::<&str>(&[])
            .num_replicas(3),
    )
    .await
    .expect("create rerun");
    let first = prepare_sink_table(&src, &dst, "rerun", &opts("rerun", true, false))
        .await
        .expect("first run");
    assert_eq!(first.action, SinkTableAction::Created);
    let again = prepare_sink_table(&src, &dst, "rerun", &opts("rerun", true, false))
        .await
        .expect("second run");
    assert_eq!(again.action, SinkTableAction::Existing);
    assert_eq!(again.table.id(), first.table.id());
}

/// Two hash dimensions, ranges with mixed bound types, a custom-hash range
/// and gaps, copied under another name with the owner restored.
#[tokio::test(flavor = "multi_thread")]
async fn hash_range_custom_hash_and_gaps_are_copied_past_the_creation_cap() {
    let (c, src, dst) = clusters();
    let schema = Schema::new(vec![
        key("id", DataType::Int64),
        key("code", DataType::String),
        key("part", DataType::Int32),
        nullable("v", DataType::String),
    ])
    .expect("schema");
    let bound = |v: Option<i32>| {
        let mut r = Row::new(&schema);
        if let Some(v) = v {
            r.set_i32("part", v).expect("bound");
        }
        r
    };
    let lo = |v: Option<i32>| (OpType::RangeLowerBound, bound(v));
    let hi = |v: Option<i32>| (OpType::RangeUpperBound, bound(v));
    src.create_table(
        &TableBuilder::new("parted", schema.clone())
            .add_hash_partitions(&["id"], 2, 0)
            .add_hash_partitions(&["code"], 2, 42)
            .set_range_partition_columns(&["part"])
            .add_range_partition_with_bounds(lo(None), hi(Some(0)))
            .add_range_partition_with_bounds(lo(Some(0)), hi(Some(50)))
            // gap [50, 100)
            .add_range_partition_with_bounds(lo(Some(100)), hi(Some(200)))
            // Kudu 1.17 wants as many hash dimensions as the table-wide schema.
            .add_range_with_hash_schema(
                lo(Some(200)),
                hi(Some(300)),
                &[(&["id"][..], 5, 123), (&["code"][..], 2, 42)],
            )
            .add_range_partition_with_bounds(lo(Some(500)), hi(None))
            .num_replicas(3)
            .owner("alice")
            .comment("partitioned"),
    )
    .await
    .expect("create parted");
    // (300, 400] with exclusive / inclusive bound types, added by ALTER.
    let s = src.open_table("parted").await.expect("open parted");
    let tb = |v: i32| {
        let mut r = s.new_row();
        r.set_i32("part", v).expect("bound");
        r
    };
    src.alter_table(
        &s,
        &AlterTableBuilder::new().add_range_partition_with_bounds(
            (OpType::ExclusiveRangeLowerBound, tb(300)),
            (OpType::InclusiveRangeUpperBound, tb(400)),
        ),
    )
    .await
    .expect("add (300, 400]");
    let s = src.open_table("parted").await.expect("reopen parted");
    assert!(
        !s.partition_schema().custom_hash_schema_ranges().is_empty(),
        "the master reports the custom-hash range"
    );
    // 30 tablets × 3 replicas: over the sink's creation cap, so this goes
    // through CreateTable with the first and the custom-hash range (14
    // tablets), then ALTER TABLE for the other four ranges.
    let plan = prepare_sink_table(&src, &dst, "parted", &opts("parted_copy", true, true))
        .await
        .expect("copy parted");
    assert_eq!(plan.action, SinkTableAction::Created);
    let d = plan.table;
    assert_eq!(d.name(), "parted_copy");
    assert_eq!(d.owner(), Some("alice"), "owner restored");
    assert_same_columns(&s, &d);
    assert_same_partitioning(&src, &s, &dst, &d).await;
    let ranges = range_partitions(&dst, &d, Side::Sink)
        .await
        .expect("ranges");
    assert_eq!(ranges.len(), 6, "{ranges:#?}");
    assert_eq!(tablet_count(&dst, &d).await, 4 + 4 + 4 + 10 + 4 + 4);
    let gaps: Vec<_> = ranges
        .windows(2)
        .filter(|w| w[0].upper_key != w[1].lower_key)
        .map(|w| (w[0].upper_key.clone(), w[1].lower_key.clone()))
        .collect();
    let k = |v: i32| ((v as u32) ^ (1 << 31)).to_be_bytes().to_vec();
    // (300, 400] is stored as [301, 401): 300 itself stays uncovered.
    assert_eq!(
        gaps,
        vec![(k(50), k(100)), (k(300), k(301)), (k(401), k(500))],
        "non-covered ranges stay non-covered"
    );
    assert_cli_describes_the_same(&c.src, "parted", &c.dst, "parted_copy");
}

#[tokio::test(flavor = "multi_thread")]
async fn composite_string_and_date_range_keys_with_partial_bounds_are_copied() {
    let (c, src, dst) = clusters();
    let schema = Schema::new(vec![
        key("region", DataType::String),
        key("day", DataType::Date),
        key("id", DataType::Int64),
        nullable("v", DataType::Double),
    ])
    .expect("schema");
    let rb = |region: &str, day: Option<i32>| {
        let mut r = Row::new(&schema);
        r.set_str("region", region).expect("region");
        if let Some(d) = day {
            r.set_date("day", d).expect("day");
        }
        r
    };
    src.create_table(
        &TableBuilder::new("strings", schema.clone())
            .add_hash_partitions(&["id"], 2, 0)
            .set_range_partition_columns(&["region", "day"])
            // Only `region` set: `day` is the DATE minimum, not a valid value.
            .add_range_partition(rb("a", None), rb("m", None))
            .add_range_partition(rb("m", Some(100)), rb("m", Some(200)))
            .add_range_with_hash_schema(
                (OpType::RangeLowerBound, rb("n\0x", None)),
                (OpType::RangeUpperBound, rb("z", None)),
                &[(&["id"][..], 3, 7)],
            )
            .add_range_partition_with_bounds(
                (OpType::RangeLowerBound, rb("zz", None)),
                (OpType::RangeUpperBound, Row::new(&schema)),
            )
            .num_replicas(1),
    )
    .await
    .expect("create strings");
    let d = prepare_sink_table(&src, &dst, "strings", &opts("strings", true, false))
        .await
        .expect("copy strings")
        .table;
    let s = src.open_table("strings").await.expect("open strings");
    assert_same_columns(&s, &d);
    assert_same_partitioning(&src, &s, &dst, &d).await;
    assert_eq!(tablet_count(&dst, &d).await, 2 + 2 + 3 + 2);
    assert_cli_describes_the_same(&c.src, "strings", &c.dst, "strings");
}

#[tokio::test(flavor = "multi_thread")]
async fn ranges_made_by_split_rows_are_copied() {
    let (_c, src, dst) = clusters();
    let schema = Schema::new(vec![
        key("k", DataType::Int32),
        nullable("v", DataType::Int64),
    ])
    .expect("schema");
    let split = |v: i32| {
        let mut r = Row::new(&schema);
        r.set_i32("k", v).expect("split");
        r
    };
    src.create_table(
        &TableBuilder::new("splits", schema.clone())
            .set_range_partition_columns(&["k"])
            .add_split_row(split(10))
            .add_split_row(split(20))
            .num_replicas(3),
    )
    .await
    .expect("create splits");
    let d = prepare_sink_table(&src, &dst, "splits", &opts("splits", true, false))
        .await
        .expect("copy splits")
        .table;
    let s = src.open_table("splits").await.expect("open splits");
    assert_same_partitioning(&src, &s, &dst, &d).await;
    assert_eq!(tablet_count(&dst, &d).await, 3);
}

/// Two hash dimensions, range over no columns.
#[tokio::test(flavor = "multi_thread")]
async fn hash_only_tables_are_copied() {
    let (c, src, dst) = clusters();
    let schema =
        Schema::new(vec![key("a", DataType::Int32), key("b", DataType::String)]).expect("schema");
    src.create_table(
        &TableBuilder::new("hash_only", schema)
            .add_hash_partitions(&["a"], 2, 0)
            .add_hash_partitions(&["b"], 3, 42)
            .set_range_partition_columns::<&str>(&[])
            .num_replicas(3),
    )
    .await
    .expect("create hash_only");
    let d = prepare_sink_table(&src, &dst, "hash_only", &opts("hash_only", true, false))
        .await
        .expect("copy hash_only")
        .table;
    let s = src.open_table("hash_only").await.expect("open hash_only");
    assert_same_partitioning(&src, &s, &dst, &d).await;
    assert_eq!(tablet_count(&dst, &d).await, 6);
    assert_cli_describes_the_same(&c.src, "hash_only", &c.dst, "hash_only");
}

#[tokio::test(flavor = "multi_thread")]
async fn unpartitioned_single_replica_tables_are_copied() {
    let (_c, src, dst) = clusters();
    let schema = Schema::new(vec![
        key("k", DataType::Int32),
        nullable("v", DataType::String),
    ])
    .expect("schema");
    src.create_table(
        &TableBuilder::new("unpartitioned", schema)
            .set_range_partition_columns::<&str>(&[])
            .num_replicas(1),
    )
    .await
    .expect("create unpartitioned");
    let d = prepare_sink_table(
        &src,
        &dst,
        "unpartitioned",
        &opts("unpartitioned", true, true),
    )
    .await
    .expect("copy unpartitioned")
    .table;
    let s = src
        .open_table("unpartitioned")
        .await
        .expect("open unpartitioned");
    assert_same_partitioning(&src, &s, &dst, &d).await;
    assert_eq!(tablet_count(&dst, &d).await, 1);
    assert_eq!(d.num_replicas(), 1);
    assert!(d.partition_schema().range_columns().is_empty());
}

/// Other column order and partitioning, a NOT NULL source column nullable
/// in the sink, sink-only columns nullable or defaulted.
#[tokio::test(flavor = "multi_thread")]
async fn a_compatible_existing_sink_is_used_as_it_is() {
    let (_c, src, dst) = clusters();
    create_small(&src, "small_for_ok").await;
    let compatible = Schema::new(vec![
        key("id", DataType::Int64),
        nullable("n", DataType::Int32),
        nullable("v", DataType::String),
        nullable("extra", DataType::Bool),
        ColumnSchema::builder("flag", DataType::Int8)
            .default_value(Value::Int8(1))
            .build()
            .expect("flag"),
    ])
    .expect("schema");
    dst.create_table(
        &TableBuilder::new("small_ok", compatible)
            .add_hash_partitions(&["id"], 2, 0)
            .num_replicas(1),
    )
    .await
    .expect("create small_ok");
    let plan = prepare_sink_table(&src, &dst, "small_for_ok", &opts("small_ok", false, false))
        .await
        .expect("compatible sink accepted");
    assert_eq!(plan.action, SinkTableAction::Existing);
    assert_eq!(plan.table.name(), "small_ok");
    assert_eq!(
        plan.table.num_replicas(),
        1,
        "an existing sink is left as it is"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_incompatible_existing_sink_is_refused_naming_every_problem() {
    let (_c, src, dst) = clusters();
    create_small(&src, "small_for_bad").await;
    let bad = Schema::new(vec![
        key("id", DataType::Int32),
        ColumnSchema::builder("v", DataType::String)
            .build()
            .expect("v"),
        ColumnSchema::builder("required", DataType::Int64)
            .build()
            .expect("required"),
    ])
    .expect("schema");
    dst.create_table(&TableBuilder::new("small_bad", bad).num_replicas(1))
        .await
        .expect("create small_bad");
    let err = prepare_sink_table(&src, &dst, "small_for_bad", &opts("small_bad", true, false))
        .await
        .expect_err("incompatible sink refused");
    let msg = err.to_string();
    eprintln!("{msg}");
    match &err {
        SinkTableError::Incompatible { problems, .. } => {
            let cols: Vec<Option<&str>> = problems.iter().map(|p| p.column()).collect();
            assert_eq!(
                cols,
                vec![None, Some("v"), Some("n"), Some("required")],
                "{msg}"
            );
        }
        other => panic!("expected Incompatible, got {other:?}"),
    }
    for needle in [
        "'small_bad'",
        "primary key",
        "(id INT64)",
        "(id INT32)",
        "column 'v' is nullable in the source but NOT NULL in the sink",
        "column 'n' (INT32) is missing in the sink",
        "column 'required' (INT64 NOT NULL) exists only in the sink",
    ] {
        assert!(msg.contains(needle), "{needle:?} in {msg}");
    }
    assert!(!err.is_retryable());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_sink_is_refused_and_not_created_without_create_table() {
    let (_c, src, dst) = clusters();
    create_small(&src, "small_for_missing").await;
    let err = prepare_sink_table(
        &src,
        &dst,
        "small_for_missing",
        &opts("small_copy", false, false),
    )
    .await
    .expect_err("missing sink refused");
    assert!(
        matches!(err, SinkTableError::SinkNotFound { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("'small_copy'") && msg.contains("--job.createTable true"),
        "{msg}"
    );
    assert!(!dst.table_exists("small_copy").await.expect("exists"));
}

/// A suffix makes a separate table; no suffix would write into the source
/// itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_sink_on_the_source_cluster_needs_another_name() {
    let (_c, src, _dst) = clusters();
    create_small(&src, "small").await;
    let plan = prepare_sink_table(&src, &src, "small", &opts("small_copy", true, false))
        .await
        .expect("copy on the same cluster");
    assert_eq!(plan.action, SinkTableAction::Created);
    let err = prepare_sink_table(&src, &src, "small", &opts("small", true, false))
        .await
        .expect_err("sink = source refused");
    assert!(matches!(err, SinkTableError::SameTable { .. }), "{err:?}");
    assert!(err.to_string().contains("--job.tableSuffix"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_source_is_refused() {
    let (_c, src, dst) = clusters();
    let err = prepare_sink_table(&src, &dst, "nope", &opts("nope", true, false))
        .await
        .expect_err("missing source");
    assert!(
        matches!(err, SinkTableError::SourceNotFound { .. }),
        "{err:?}"
    );
}

/// CreateTable would give such a copy one unbounded range instead.
#[tokio::test(flavor = "multi_thread")]
async fn a_source_whose_every_range_was_dropped_is_refused() {
    let (_c, src, dst) = clusters();
    let schema = Schema::new(vec![key("k", DataType::Int32)]).expect("schema");
    let mut lo = Row::new(&schema);
    lo.set_i32("k", 0).expect("lo");
    let mut up = Row::new(&schema);
    up.set_i32("k", 10).expect("hi");
    src.create_table(
        &TableBuilder::new("emptied", schema)
            .set_range_partition_columns(&["k"])
            .add_range_partition(lo, up)
            .num_replicas(1),
    )
    .await
    .expect("create emptied");
    let t = src.open_table("emptied").await.expect("open emptied");
    let (mut lo, mut up) = (t.new_row(), t.new_row());
    lo.set_i32("k", 0).expect("lo");
    up.set_i32("k", 10).expect("hi");
    src.alter_table(&t, &AlterTableBuilder::new().drop_range_partition(lo, up))
        .await
        .expect("drop the only range");
    let err = prepare_sink_table(&src, &dst, "emptied", &opts("emptied", true, false))
        .await
        .expect_err("no ranges to copy");
    assert!(
        matches!(err, SinkTableError::Partitioning { .. }),
        "{err:?}"
    );
    assert!(!dst.table_exists("emptied").await.expect("exists"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_range_with_more_tablets_than_one_create_may_make_is_refused() {
    let (_c, src, dst) = clusters();
    let schema = Schema::new(vec![key("k", DataType::Int32)]).expect("schema");
    src.create_table(
        &TableBuilder::new("wide", schema)
            .add_hash_partitions(&["k"], 16, 0)
            .set_range_partition_columns::<&str>(&[])
            .num_replicas(3),
    )
    .await
    .expect("create wide");
    let err = prepare_sink_table(&src, &dst, "wide", &opts("wide", true, false))
        .await
        .expect_err("48 replicas at once refused");
    eprintln!("{err}");
    assert!(
        matches!(err, SinkTableError::TooManyTablets { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("--max_create_tablets_per_ts"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_cluster_smaller_than_the_replication_factor_is_refused() {
    let (_c, src, _dst) = clusters();
    create_small(&src, "small_for_tiny").await;
    let tiny = MiniCluster::builder()
        .tservers(1)
        .start()
        .expect("tiny cluster starts");
    let tiny_client = KuduClient::new(&tiny.master_addrs()).expect("tiny client");
    let err = prepare_sink_table(
        &src,
        &tiny_client,
        "small_for_tiny",
        &opts("small", true, false),
    )
    .await
    .expect_err("replication factor 3 on one tablet server");
    eprintln!("{err}");
    assert!(
        matches!(err, SinkTableError::ReplicationFactor { replicas: 3, .. }),
        "{err:?}"
    );
}
