//! Catalog operations against a real Kudu cluster: create (every type,
//! hash + range + custom-hash ranges), open, list, alter, rename, delete,
//! server clock, and the typed errors a caller acts on.

use ferry_testkit::MiniCluster;
use kudu_client::write::OpType;
use kudu_client::{
    AlterTableBuilder, ColumnSchema, DataType, Error, KuduClient, Schema, TableBuilder, Value,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shared every-type schema with a second key column `part` (the range
/// column) and a defaulted, commented column.
fn all_types_schema() -> Schema {
    ferry_fixtures::all_types_schema_with(
        vec![ferry_fixtures::key("part", DataType::Int32)],
        vec![ColumnSchema::builder("with_default", DataType::Int32)
            .default_value(Value::Int32(7))
            .comment("has a default")
            .build()
            .expect("default col")],
    )
}

/// The cluster the catalog tests share while they run.
fn cluster() -> Arc<MiniCluster> {
    crate::shared::three_tservers()
}

/// The every-type table `name`: HASH(id) 3 buckets seed 42 × RANGE(part)
/// [0, 100) and [200, 300) (a gap between), plus [300, 400) with its own
/// hash schema (5 buckets, seed 123); 3 replicas, owner, comment and an
/// extra config.
fn all_types_builder(name: &str) -> TableBuilder {
    let schema = all_types_schema();
    let bound = |v: Option<i32>| {
        let mut r = kudu_client::Row::new(&schema);
        if let Some(v) = v {
            r.set_i32("part", v).expect("bound");
        }
        r
    };
    TableBuilder::new(name, schema.clone())
        .add_hash_partitions(&["id"], 3, 42)
        .set_range_partition_columns(&["part"])
        .add_range_partition(bound(Some(0)), bound(Some(100)))
        // A gap [100, 200): a non-covered range.
        .add_range_partition(bound(Some(200)), bound(Some(300)))
        .add_range_with_hash_schema(
            (OpType::RangeLowerBound, bound(Some(300))),
            (OpType::RangeUpperBound, bound(Some(400))),
            &[(&["id"][..], 5, 123)],
        )
        .num_replicas(3)
        .owner("alice")
        .comment("every type")
        .extra_config("kudu.table.history_max_age_sec", "3600")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_created_table_opens_with_its_schema_partitioning_and_options() {
    let c = cluster();
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let schema = all_types_schema();
    let builder = all_types_builder("all_types");
    let id = client.create_table(&builder).await.expect("create");
    assert_eq!(id.len(), 32, "table id {id}");

    let t = client.open_table("all_types").await.expect("open");
    assert_eq!(t.id(), id);
    assert_eq!(t.num_replicas(), 3);
    assert_eq!(t.owner(), Some("alice"));
    assert_eq!(t.comment(), Some("every type"));
    assert_eq!(
        t.extra_configs()
            .get("kudu.table.history_max_age_sec")
            .map(String::as_str),
        Some("3600")
    );
    assert_eq!(t.schema().len(), schema.len());
    for (got, want) in t.schema().columns().iter().zip(schema.columns()) {
        assert_eq!(got.name(), want.name());
        assert_eq!(got.data_type(), want.data_type(), "{}", want.name());
        assert_eq!(got.is_nullable(), want.is_nullable(), "{}", want.name());
        assert_eq!(
            got.type_attributes(),
            want.type_attributes(),
            "{}",
            want.name()
        );
    }
    assert_eq!(
        t.schema()
            .column_by_name("with_default")
            .and_then(|c| c.default_value()),
        Some(&Value::Int32(7))
    );
    let ps = t.partition_schema();
    assert_eq!(ps.hash_schema().len(), 1);
    assert_eq!(ps.hash_schema()[0].num_buckets(), 3);
    assert_eq!(ps.hash_schema()[0].seed(), 42);
    let custom: Vec<(u32, u32)> = ps
        .custom_hash_schema_ranges()
        .iter()
        .map(|r| (r.hash_schema()[0].num_buckets(), r.hash_schema()[0].seed()))
        .collect();
    eprintln!("custom ranges as the master reports them: {custom:?}");
    assert!(custom.contains(&(5, 123)), "{custom:?}");

    // 3 + 3 + 5 tablets, as the real CLI sees them.
    let tablets = client
        .tablets_in_range(&t, &[], &[], Instant::now() + Duration::from_secs(30))
        .await
        .expect("tablets");
    assert_eq!(tablets.len(), 11);

    let listed = client.list_tables("all_").await.expect("list");
    assert_eq!(
        listed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        vec!["all_types"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn alter_adds_a_column_renames_one_and_adds_ranges() {
    let c = cluster();
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    client
        .create_table(&all_types_builder("altered"))
        .await
        .expect("create");
    let t = client.open_table("altered").await.expect("open");
    // Bounds of an alteration use the opened table's schema.
    let tbound = |v: i32| {
        let mut r = t.new_row();
        r.set_i32("part", v).expect("bound");
        r
    };
    client
        .alter_table(
            &t,
            &AlterTableBuilder::new()
                .add_column(
                    ColumnSchema::builder("added", DataType::String)
                        .default_value(Value::String("x".into()))
                        .build()
                        .expect("col"),
                )
                .rename_column("s", "s_renamed")
                .add_range_partition(tbound(100), tbound(200))
                .add_range_with_hash_schema(
                    (OpType::RangeLowerBound, tbound(400)),
                    (OpType::RangeUpperBound, tbound(500)),
                    &[(&["id"][..], 4, 7)],
                ),
        )
        .await
        .expect("alter");
    let t = client.open_table("altered").await.expect("reopen");
    assert!(t.schema().column_by_name("added").is_some());
    assert!(t.schema().column_by_name("s_renamed").is_some());
    let tablets = client
        .tablets_in_range(&t, &[], &[], Instant::now() + Duration::from_secs(30))
        .await
        .expect("tablets");
    assert_eq!(
        tablets.len(),
        18,
        "the gap got its 3 tablets, the new custom range 4"
    );
    let custom: Vec<(u32, u32)> = t
        .partition_schema()
        .custom_hash_schema_ranges()
        .iter()
        .map(|r| (r.hash_schema()[0].num_buckets(), r.hash_schema()[0].seed()))
        .collect();
    assert!(custom.contains(&(4, 7)), "{custom:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_renamed_table_is_listed_under_its_new_name_until_deleted() {
    // Its own cluster: at the end the master must list no table at all.
    let c = MiniCluster::builder()
        .tservers(1)
        .start()
        .expect("cluster starts");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    client
        .create_table(&TableBuilder::new("all_types", all_types_schema()).num_replicas(1))
        .await
        .expect("create");
    let t = client.open_table("all_types").await.expect("open");
    client.rename_table(&t, "renamed").await.expect("rename");
    assert!(client.table_exists("renamed").await.expect("exists"));
    assert!(!client.table_exists("all_types").await.expect("exists"));
    let cli = c
        .kudu_ok(&["table", "list", &c.master_addrs_joined()])
        .expect("cli list");
    assert!(cli.lines().any(|l| l.trim() == "renamed"), "{cli}");

    client.delete_table("renamed").await.expect("delete");
    assert!(client.list_tables("").await.expect("list").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn server_clock_is_the_cluster_time() {
    let c = cluster();
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let a = client.server_clock().await.expect("clock");
    let b = client.server_clock().await.expect("clock");
    assert!(b > a, "clock moves forward: {a} then {b}");
    let now_micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_micros() as u64;
    let skew = now_micros.abs_diff(b.physical_micros());
    assert!(
        skew < 5_000_000,
        "server clock within 5 s of the local one, off by {skew} µs"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn typed_errors() {
    let c = cluster();
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let err = client
        .open_table("no_such_table")
        .await
        .expect_err("missing");
    assert!(
        matches!(err, Error::TableNotFound(ref n) if n == "no_such_table"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("'no_such_table' not found"),
        "{err}"
    );

    // Key column that is nullable / missing key: rejected with the reason.
    let bad = Schema::new(vec![ColumnSchema::builder("v", DataType::Int32)
        .build()
        .expect("col")]);
    match bad {
        Err(e) => assert!(e.to_string().contains("key"), "{e}"),
        Ok(s) => {
            let err = client
                .create_table(&TableBuilder::new("nokey", s).num_replicas(1))
                .await
                .expect_err("no key column");
            assert!(err.to_string().to_lowercase().contains("key"), "{err}");
        }
    }

    let err = client
        .delete_table("no_such_table")
        .await
        .expect_err("missing");
    assert!(matches!(err, Error::TableNotFound(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn unreachable_master_fails_in_bounded_time() {
    // Nothing listens on this loopback address.
    let client = KuduClient::builder(&["127.0.0.1:1"])
        .admin_timeout(Duration::from_secs(3))
        .build()
        .expect("client");
    let start = Instant::now();
    let err = client.list_tables("").await.expect_err("unreachable");
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
    let text = err.to_string();
    assert!(matches!(err, Error::TimedOut { .. }), "{err:?}");
    assert!(text.contains("127.0.0.1:1"), "names the master: {text}");
}

/// A table described as a builder (`range_partitions` + `to_builder`)
/// creates a copy with the same columns, hash dimensions, ranges (gaps,
/// exclusive / inclusive bounds, a range with its own hash schema),
/// replication factor, comment and extra configs; ranges left out can be
/// added later with `add_range_like`.
#[tokio::test(flavor = "multi_thread")]
async fn a_table_described_as_a_builder_creates_a_copy() {
    let c = MiniCluster::builder()
        .tservers(1)
        .start()
        .expect("cluster starts");
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    let schema = all_types_schema();
    let bound = |v: i32| {
        let mut r = kudu_client::Row::new(&schema);
        r.set_i32("part", v).expect("bound");
        r
    };
    let unbounded = || kudu_client::Row::new(&schema);
    let builder = TableBuilder::new("original", schema.clone())
        .add_hash_partitions(&["id"], 2, 9)
        .set_range_partition_columns(&["part"])
        .add_range_partition(unbounded(), bound(0))
        // (0, 100] is added below; then a gap [101, 200).
        .add_range_with_hash_schema(
            (OpType::RangeLowerBound, bound(200)),
            (OpType::RangeUpperBound, bound(300)),
            &[(&["id"][..], 3, 5)],
        )
        .add_range_partition(bound(300), bound(400))
        .num_replicas(1)
        .owner("alice")
        .comment("the original")
        .extra_config("kudu.table.history_max_age_sec", "7200");
    client.create_table(&builder).await.expect("create");
    let original = client.open_table("original").await.expect("open");
    // Stored as [1, 101): exclusive lower, inclusive upper.
    let tbound = |v: i32| {
        let mut r = original.new_row();
        r.set_i32("part", v).expect("bound");
        r
    };
    client
        .alter_table(
            &original,
            &AlterTableBuilder::new().add_range_partition_with_bounds(
                (OpType::ExclusiveRangeLowerBound, tbound(0)),
                (OpType::InclusiveRangeUpperBound, tbound(100)),
            ),
        )
        .await
        .expect("add (0, 100]");
    let original = client.open_table("original").await.expect("reopen");
    let ranges = client.range_partitions(&original).await.expect("ranges");
    assert_eq!(
        ranges.iter().map(|r| r.tablets).collect::<Vec<_>>(),
        vec![2, 2, 3, 2],
        "{ranges:#?}"
    );
    let key = |v: i32| ((v as u32) ^ (1 << 31)).to_be_bytes().to_vec();
    assert_eq!(ranges[1].lower_key, key(1), "bounds come out normalized");
    assert_eq!(ranges[1].upper_key, key(101));

    let same = |copy: &kudu_client::KuduTable| {
        assert_eq!(copy.schema().len(), original.schema().len());
        for (got, want) in copy
            .schema()
            .columns()
            .iter()
            .zip(original.schema().columns())
        {
            assert_eq!(got.name(), want.name());
            assert_eq!(got.data_type(), want.data_type(), "{}", want.name());
            assert_eq!(got.is_key(), want.is_key(), "{}", want.name());
            assert_eq!(got.is_nullable(), want.is_nullable(), "{}", want.name());
            assert_eq!(
                got.type_attributes(),
                want.type_attributes(),
                "{}",
                want.name()
            );
            assert_eq!(got.default_value(), want.default_value(), "{}", want.name());
        }
        let (a, b) = (original.partition_schema(), copy.partition_schema());
        assert_eq!(a.hash_schema(), b.hash_schema());
        assert_eq!(a.range_columns(), b.range_columns());
        assert_eq!(copy.num_replicas(), 1);
        assert_eq!(copy.comment(), Some("the original"));
        assert_eq!(copy.extra_configs(), original.extra_configs());
        assert_ne!(
            copy.owner(),
            Some("alice"),
            "the owner is the caller's to set"
        );
    };

    // All at once.
    let whole = client
        .table_builder_like(&original, "copy")
        .await
        .expect("describe");
    client.create_table(&whole).await.expect("create the copy");
    let copy = client.open_table("copy").await.expect("open the copy");
    same(&copy);
    assert_eq!(
        client.range_partitions(&copy).await.expect("copy ranges"),
        ranges
    );

    // The first range and the one with its own hash schema first, the
    // others added afterwards.
    let (first, later): (Vec<_>, Vec<_>) =
        ranges.iter().cloned().enumerate().partition(|(i, r)| {
            *i == 0 || r.hash_schema != original.partition_schema().hash_schema()
        });
    let first: Vec<_> = first.into_iter().map(|(_, r)| r).collect();
    let later: Vec<_> = later.into_iter().map(|(_, r)| r).collect();
    assert_eq!((first.len(), later.len()), (2, 2));
    let part = original.to_builder("stepwise", &first).expect("describe");
    client.create_table(&part).await.expect("create stepwise");
    let stepwise = client.open_table("stepwise").await.expect("open stepwise");
    let mut alter = AlterTableBuilder::new();
    for r in &later {
        alter = alter.add_range_like(&stepwise, r).expect("range");
    }
    client
        .alter_table(&stepwise, &alter)
        .await
        .expect("add ranges");
    let stepwise = client
        .open_table("stepwise")
        .await
        .expect("reopen stepwise");
    same(&stepwise);
    assert_eq!(
        client
            .range_partitions(&stepwise)
            .await
            .expect("stepwise ranges"),
        ranges
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_range_added_after_a_lookup_is_seen_by_ranges_and_splits() {
    let c = cluster();
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    client
        .create_table(&all_types_builder("fresh_ranges"))
        .await
        .expect("create");
    let t = client.open_table("fresh_ranges").await.expect("open");
    // Both listings walk the gap [100, 200) and cache it as non-covered.
    let before = client.range_partitions(&t).await.expect("ranges");
    assert_eq!(before.len(), 3, "{before:?}");
    let spec = kudu_client::scan::ScanSpec::new();
    let splits = client.scan_splits(&t, &spec).await.expect("splits");
    assert_eq!(splits.len(), 11, "3 + 3 + 5 tablets");

    let bound = |v: i32| {
        let mut r = t.new_row();
        r.set_i32("part", v).expect("bound");
        r
    };
    client
        .alter_table(
            &t,
            &AlterTableBuilder::new().add_range_partition(bound(100), bound(200)),
        )
        .await
        .expect("add the gap's range");
    let after = client.range_partitions(&t).await.expect("ranges");
    assert_eq!(after.len(), 4, "the new range is listed: {after:?}");
    let splits = client.scan_splits(&t, &spec).await.expect("splits");
    assert_eq!(
        splits.len(),
        14,
        "a plan made right after the ALTER covers the new range's 3 tablets"
    );
}
