use super::*;
use crate::partition::bounds::split_partition_key;
use crate::schema::{ColumnSchema, DataType};

fn abc() -> Schema {
    Schema::new(vec![
        ColumnSchema::builder("a", DataType::Int32)
            .key(true)
            .id(10)
            .build()
            .unwrap(),
        ColumnSchema::builder("b", DataType::String)
            .key(true)
            .id(11)
            .build()
            .unwrap(),
        ColumnSchema::builder("c", DataType::String)
            .key(true)
            .id(12)
            .build()
            .unwrap(),
        ColumnSchema::builder("v", DataType::Double)
            .nullable(true)
            .id(13)
            .build()
            .unwrap(),
    ])
    .unwrap()
}

fn abc_partitioning(s: &Schema) -> PartitionSchema {
    PartitionSchema::builder(s)
        .add_hash_partitions(&["a", "b"], 32, 0)
        .add_hash_partitions(&["c"], 32, 42)
        .set_range_partition_columns(&["a", "b", "c"])
        .build()
        .unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn test_key_encoding_partition_key_vectors() {
    let s = abc();
    let ps = abc_partitioning(&s);
    let cases = [
        (0, "", "", "00000000 00000014 80000000 0000"),
        (1, "", "", "00000005 00000014 80000001 0000"),
        (0, "b", "c", "0000001a 0000001d 80000000 62 0000 63"),
        (1, "b", "c", "00000000 0000001d 80000001 62 0000 63"),
    ];
    for (a, b, c, want) in cases {
        let mut r = Row::new(&s);
        r.set_i32("a", a)
            .unwrap()
            .set_str("b", b)
            .unwrap()
            .set_str("c", c)
            .unwrap();
        assert_eq!(
            ps.partition_key(&r).unwrap(),
            hex(want),
            "a={a} b={b:?} c={c:?}"
        );
        let (h, rk) = ps.partition_key_parts(&r).unwrap();
        assert_eq!([h, rk].concat(), hex(want));
    }
    let mut r = Row::new(&s);
    r.set_i32("a", 1).unwrap();
    assert!(
        ps.partition_key(&r).is_err(),
        "unset key columns are rejected"
    );
}

#[test]
fn spec_6_6_single_int_key() {
    let s = Schema::new(vec![ColumnSchema::builder("k", DataType::Int32)
        .key(true)
        .build()
        .unwrap()])
    .unwrap();
    let ps = PartitionSchema::builder(&s)
        .add_hash_partitions(&["k"], 4, 0)
        .build()
        .unwrap();
    let mut r = Row::new(&s);
    r.set_i32("k", 42).unwrap();
    assert_eq!(ps.partition_key(&r).unwrap(), hex("00000000 8000002a"));
    assert_eq!(ps.hash_buckets(&r).unwrap(), [0]);
}

#[test]
fn custom_hash_schema_ranges_pick_their_dimensions() {
    let s = abc();
    let mut lo = Row::new(&s);
    lo.set_i32("a", 100).unwrap();
    let mut hi = Row::new(&s);
    hi.set_i32("a", 200).unwrap();
    let ps = PartitionSchema::builder(&s)
        .add_hash_partitions(&["a"], 2, 0)
        .set_range_partition_columns(&["a"])
        .add_range_with_hash_schema(
            (OpType::RangeLowerBound, lo.clone()),
            (OpType::RangeUpperBound, hi.clone()),
            &[(&["a"][..], 3, 0), (&["b"][..], 5, 7)],
        )
        .build()
        .unwrap();
    let key_of = |a: i32| {
        let mut r = Row::new(&s);
        r.set_i32("a", a)
            .unwrap()
            .set_str("b", "x")
            .unwrap()
            .set_str("c", "y")
            .unwrap();
        ps.partition_key(&r).unwrap()
    };
    assert_eq!(key_of(99).len(), 4 + 4);
    assert_eq!(key_of(100).len(), 8 + 4);
    assert_eq!(key_of(199).len(), 8 + 4);
    assert_eq!(key_of(200).len(), 4 + 4);

    // Round trip through protobuf, by id and by name.
    for refs in [ColumnRefs::Id, ColumnRefs::Name] {
        let pb = ps.to_pb(refs).unwrap();
        let back = PartitionSchema::from_pb(&pb, &s).unwrap();
        assert_eq!(back.hash_schema(), ps.hash_schema());
        assert_eq!(back.range_columns(), ps.range_columns());
        assert_eq!(back.custom_hash_schema_ranges().len(), 1);
        let r = &back.custom_hash_schema_ranges()[0];
        assert_eq!(
            r.hash_schema(),
            ps.custom_hash_schema_ranges()[0].hash_schema()
        );
        assert_eq!(r.lower_key(), hex("80000064"));
        assert_eq!(r.upper_key(), hex("800000c8"));
    }

    // Overlapping custom ranges are refused.
    let mut ps2 = ps.clone();
    let mut mid = Row::new(&s);
    mid.set_i32("a", 150).unwrap();
    assert!(ps2
        .add_range_with_hash_schema(
            (OpType::RangeLowerBound, mid),
            (OpType::RangeUpperBound, Row::new(&s)),
            vec![HashDimension::new(vec![0], 2, 0)],
        )
        .is_err());
}

#[test]
fn exclusive_and_inclusive_bounds_normalize() {
    let s = abc();
    let mut lo = Row::new(&s);
    lo.set_i32("a", 5).unwrap();
    let mut hi = Row::new(&s);
    hi.set_i32("a", 9).unwrap();
    let mut ps = PartitionSchema::builder(&s)
        .set_range_partition_columns(&["a"])
        .build()
        .unwrap();
    ps.add_range_with_hash_schema(
        (OpType::ExclusiveRangeLowerBound, lo),
        (OpType::InclusiveRangeUpperBound, hi),
        vec![HashDimension::new(vec![0], 2, 0)],
    )
    .unwrap();
    let r = &ps.custom_hash_schema_ranges()[0];
    let k = |a: i32| ((a as u32) ^ (1 << 31)).to_be_bytes();
    assert!(!r.contains(&k(5)));
    assert!(r.contains(&k(6)));
    assert!(r.contains(&k(9)));
    assert!(!r.contains(&k(10)));
}

#[test]
fn validation() {
    let s = abc();
    assert!(PartitionSchema::builder(&s)
        .add_hash_partitions(&["v"], 2, 0)
        .build()
        .is_err());
    assert!(PartitionSchema::builder(&s)
        .add_hash_partitions(&["a"], 1, 0)
        .build()
        .is_err());
    assert!(PartitionSchema::builder(&s)
        .add_hash_partitions(&["a"], 2, 0)
        .add_hash_partitions(&["a", "b"], 2, 0)
        .build()
        .is_err());
    assert!(PartitionSchema::builder(&s)
        .set_range_partition_columns(&["zz"])
        .build()
        .is_err());
    let ps = PartitionSchema::builder(&s).build().unwrap();
    assert_eq!(ps.range_columns(), &[0, 1, 2]);
    let other = Schema::new(vec![ColumnSchema::builder("a", DataType::Int32)
        .key(true)
        .build()
        .unwrap()])
    .unwrap();
    let mut r = Row::new(&other);
    r.set_i32("a", 1).unwrap();
    assert!(ps.partition_key(&r).is_err());
}

#[test]
fn from_pb_defaults_and_errors() {
    use pb::column_identifier_pb::Identifier;
    let s = Schema::new(vec![
        ColumnSchema::builder("k", DataType::Int32)
            .key(true)
            .id(1)
            .build()
            .unwrap(),
        ColumnSchema::builder("auto_incrementing_id", DataType::Int64)
            .key(true)
            .auto_incrementing(true)
            .id(2)
            .build()
            .unwrap(),
    ])
    .unwrap();
    let id = |i| pb::ColumnIdentifierPb {
        identifier: Some(Identifier::Id(i)),
    };
    let pb = pb::PartitionSchemaPb {
        hash_schema: vec![HashBucketSchemaPb {
            columns: vec![id(1)],
            num_buckets: 3,
            seed: None,
            hash_algorithm: Some(1),
        }],
        range_schema: None,
        custom_hash_schema_ranges: vec![],
    };
    let ps = PartitionSchema::from_pb(&pb, &s).unwrap();
    assert_eq!(ps.range_columns(), &[0]);
    assert_eq!(ps.hash_schema()[0], HashDimension::new(vec![0], 3, 0));
    let mut bad = pb.clone();
    bad.hash_schema[0].columns = vec![id(99)];
    assert!(PartitionSchema::from_pb(&bad, &s).is_err());
    let mut bad = pb.clone();
    bad.hash_schema[0].num_buckets = 0;
    assert!(PartitionSchema::from_pb(&bad, &s).is_err());
    let mut empty_range = pb;
    empty_range.range_schema = Some(RangeSchemaPb { columns: vec![] });
    assert!(PartitionSchema::from_pb(&empty_range, &s)
        .unwrap()
        .range_columns()
        .is_empty());
}

#[test]
fn boundary_conventions() {
    let dims = [
        HashDimension::new(vec![0], 2, 0),
        HashDimension::new(vec![1], 2, 0),
    ];
    let b = |s: &str| hex(s);
    let legacy = |buckets: &[u32], rs: &[u8], re: &[u8]| {
        Partition::with_boundaries(&dims, buckets, rs, re, BoundaryConvention::Legacy).unwrap()
    };
    let new = |buckets: &[u32], rs: &[u8], re: &[u8]| {
        Partition::with_boundaries(&dims, buckets, rs, re, BoundaryConvention::RangeSpecific)
            .unwrap()
    };
    // Unbounded range, 2×2 buckets: legacy is continuous.
    let p = legacy(&[0, 0], &[], &[]);
    assert_eq!(
        (p.partition_key_start(), p.partition_key_end()),
        (&[][..], &b("00000000 00000001")[..])
    );
    let p = legacy(&[0, 1], &[], &[]);
    assert_eq!(
        (p.partition_key_start(), p.partition_key_end()),
        (&b("00000000 00000001")[..], &b("00000001")[..])
    );
    let p = legacy(&[1, 0], &[], &[]);
    assert_eq!(
        (p.partition_key_start(), p.partition_key_end()),
        (&b("00000001")[..], &b("00000001 00000001")[..])
    );
    let p = legacy(&[1, 1], &[], &[]);
    assert_eq!(
        (p.partition_key_start(), p.partition_key_end()),
        (&b("00000001 00000001")[..], &[][..])
    );
    assert!(p.range_key_start().is_empty() && p.range_key_end().is_empty());
    // 1.17+: full prefixes, last dimension incremented without carry.
    let p = new(&[0, 1], &[], &[]);
    assert_eq!(
        (p.partition_key_start(), p.partition_key_end()),
        (&b("00000000 00000001")[..], &b("00000000 00000002")[..])
    );
    let p = new(&[0, 0], &[], &[]);
    assert_eq!(p.partition_key_start(), &b("00000000 00000000")[..]);
    // Bounded ranges are the same under both conventions.
    let rs = b("80000005");
    let re = b("8000000a");
    for p in [legacy(&[1, 0], &rs, &re), new(&[1, 0], &rs, &re)] {
        assert_eq!(
            p.partition_key_start(),
            &b("00000001 00000000 80000005")[..]
        );
        assert_eq!(p.partition_key_end(), &b("00000001 00000000 8000000a")[..]);
        assert_eq!(p.range_key_start(), &rs[..]);
        assert_eq!(p.range_key_end(), &re[..]);
        assert!(p.contains_partition_key(&b("00000001 00000000 80000007")));
        assert!(!p.contains_partition_key(&b("00000001 00000000 8000000a")));
        assert_eq!(Partition::from_pb(&p.to_pb()).unwrap(), p);
    }
    assert!(
        Partition::with_boundaries(&dims, &[2, 0], &[], &[], BoundaryConvention::Legacy).is_err()
    );
    // No hash dimensions: keys are the range keys.
    let p =
        Partition::with_boundaries(&[], &[], &rs, &[], BoundaryConvention::RangeSpecific).unwrap();
    assert_eq!(
        (p.partition_key_start(), p.partition_key_end()),
        (&rs[..], &[][..])
    );
    assert_eq!(
        split_partition_key(&b("00000001 00000000 80000005"), 2).1,
        &rs[..]
    );
    assert!(Partition::from_pb(&pb::PartitionPb {
        hash_buckets: vec![-1],
        ..Default::default()
    })
    .is_err());
}

#[test]
fn legacy_keyspace_is_continuous_and_covers_every_row() {
    // Property: under the legacy convention, tablets for all bucket
    // combinations × ranges tile the key space without gaps, and every
    // row's partition key lands in exactly one tablet.
    let s = abc();
    let ps = PartitionSchema::builder(&s)
        .add_hash_partitions(&["a"], 3, 0)
        .add_hash_partitions(&["b"], 2, 5)
        .set_range_partition_columns(&["a"])
        .build()
        .unwrap();
    let split = hex("80000000");
    let ranges = [(Vec::new(), split.clone()), (split, Vec::new())];
    let mut parts = Vec::new();
    for b0 in 0..3 {
        for b1 in 0..2 {
            for (rs, re) in &ranges {
                parts.push(
                    ps.partition(&[b0, b1], rs, re, BoundaryConvention::Legacy)
                        .unwrap(),
                );
            }
        }
    }
    parts.sort_by(|x, y| x.partition_key_start().cmp(y.partition_key_start()));
    assert!(parts[0].partition_key_start().is_empty());
    assert!(parts.last().unwrap().partition_key_end().is_empty());
    for w in parts.windows(2) {
        assert_eq!(w[0].partition_key_end(), w[1].partition_key_start());
    }
    let mut rng = crate::partition::testutil::Rng(3);
    for _ in 0..500 {
        let mut r = Row::new(&s);
        r.set_i32("a", rng.next() as i32).unwrap();
        let b: String = rng.bytes(3).iter().map(|b| char::from(b'a' + b)).collect();
        r.set_str("b", &b).unwrap().set_str("c", "z").unwrap();
        let k = ps.partition_key(&r).unwrap();
        let hits = parts
            .iter()
            .filter(|p| p.contains_partition_key(&k))
            .count();
        assert_eq!(hits, 1, "{r:?}");
        // The 1.17 layout of the same tablets must also contain the row.
        let buckets = ps.hash_buckets(&r).unwrap();
        let rk = ps.range_key(&r).unwrap();
        let (rs, re) = ranges
            .iter()
            .find(|(s, e)| rk >= *s && (e.is_empty() || rk < *e))
            .unwrap();
        let p = ps
            .partition(&buckets, rs, re, BoundaryConvention::RangeSpecific)
            .unwrap();
        assert!(p.contains_partition_key(&k));
    }
}

#[test]
fn partitioned_alike_whatever_the_value_columns() {
    let s = abc();
    let ps = abc_partitioning(&s);
    // A copy with another value column partitions its rows alike.
    let mut cols = s.columns()[..3].to_vec();
    cols.push(
        ColumnSchema::builder("other", DataType::Int64)
            .nullable(true)
            .id(20)
            .build()
            .unwrap(),
    );
    let copy = Schema::new(cols).unwrap();
    assert!(ps.partitions_like(&abc_partitioning(&copy)));
    let other_seed = PartitionSchema::builder(&s)
        .add_hash_partitions(&["a", "b"], 32, 0)
        .add_hash_partitions(&["c"], 32, 7)
        .set_range_partition_columns(&["a", "b", "c"])
        .build()
        .unwrap();
    assert!(!ps.partitions_like(&other_seed));
    let fewer_buckets = PartitionSchema::builder(&s)
        .add_hash_partitions(&["a", "b"], 16, 0)
        .add_hash_partitions(&["c"], 32, 42)
        .set_range_partition_columns(&["a", "b", "c"])
        .build()
        .unwrap();
    assert!(!ps.partitions_like(&fewer_buckets));
}
