//! Range partitions derived from tablets under both boundary conventions,
//! and bound rows that round-trip through their encoded keys.

use super::*;
use crate::partition::key::encode_range_bound;
use crate::schema::ColumnSchemaBuilder;
use crate::{ColumnSchema, DataType};

fn col(name: &str, t: DataType) -> ColumnSchemaBuilder {
    ColumnSchema::builder(name, t)
}

fn schema(cols: Vec<ColumnSchemaBuilder>) -> Schema {
    Schema::new(cols.into_iter().map(|c| c.build().unwrap()).collect()).unwrap()
}

fn ab() -> Schema {
    schema(vec![
        col("a", DataType::Int32).key(true),
        col("b", DataType::String).key(true),
        col("v", DataType::Int32),
    ])
}

fn key(a: i32) -> Vec<u8> {
    ((a as u32) ^ (1 << 31)).to_be_bytes().to_vec()
}

/// Tablets of `ranges` (lower, upper, dims) under `conv`.
fn tablets(
    ranges: &[(Vec<u8>, Vec<u8>, Vec<HashDimension>)],
    conv: BoundaryConvention,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for (lo, hi, dims) in ranges {
        let mut combos: Vec<Vec<u32>> = vec![vec![]];
        for d in dims {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    (0..d.num_buckets()).map(move |b| {
                        let mut c = c.clone();
                        c.push(b);
                        c
                    })
                })
                .collect();
        }
        for c in combos {
            let p = Partition::with_boundaries(dims, &c, lo, hi, conv).unwrap();
            out.push((
                p.partition_key_start().to_vec(),
                p.partition_key_end().to_vec(),
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn ranges_are_derived_from_tablets_under_both_conventions() {
    let s = ab();
    let bound = |a: Option<i32>| {
        let mut r = Row::new(&s);
        if let Some(a) = a {
            r.set_i32("a", a).unwrap();
        }
        r
    };
    let custom = vec![HashDimension::new(vec![0], 5, 123)];
    let table_wide = vec![
        HashDimension::new(vec![0], 2, 0),
        HashDimension::new(vec![1], 3, 42),
    ];
    let ps = PartitionSchema::builder(&s)
        .add_hash_partitions(&["a"], 2, 0)
        .add_hash_partitions(&["b"], 3, 42)
        .set_range_partition_columns(&["a"])
        .add_range_with_hash_schema(
            (OpType::RangeLowerBound, bound(Some(200))),
            (OpType::RangeUpperBound, bound(Some(300))),
            &[(&["a"][..], 5, 123)],
        )
        .build()
        .unwrap();
    let ranges = vec![
        (vec![], key(0), table_wide.clone()),
        (key(0), key(50), table_wide.clone()),
        // gap [50, 100)
        (key(100), key(200), table_wide.clone()),
        (key(200), key(300), custom.clone()),
        (key(500), vec![], table_wide.clone()),
    ];
    for conv in [
        BoundaryConvention::Legacy,
        BoundaryConvention::RangeSpecific,
    ] {
        let ts = tablets(&ranges, conv);
        let refs: Vec<(&[u8], &[u8])> = ts
            .iter()
            .map(|(a, b)| (a.as_slice(), b.as_slice()))
            .collect();
        let got = derive_range_partitions(&ps, &refs).unwrap();
        let want: Vec<RangePartition> = ranges
            .iter()
            .map(|(lo, hi, dims)| RangePartition {
                lower_key: lo.clone(),
                upper_key: hi.clone(),
                hash_schema: dims.clone(),
                tablets: dims.iter().map(|d| d.num_buckets() as usize).product(),
            })
            .collect();
        assert_eq!(got, want, "{conv:?}");
        // A missing tablet is noticed.
        assert!(derive_range_partitions(&ps, &refs[1..]).is_err());
    }
}

#[test]
fn unpartitioned_and_hash_only() {
    let s = ab();
    let ps = PartitionSchema::builder(&s)
        .set_range_partition_columns::<&str>(&[])
        .build()
        .unwrap();
    let got = derive_range_partitions(&ps, &[(&[], &[])]).unwrap();
    assert_eq!(got.len(), 1);
    assert!(got[0].lower_key.is_empty() && got[0].upper_key.is_empty());
    let ps = PartitionSchema::builder(&s)
        .add_hash_partitions(&["a", "b"], 3, 7)
        .set_range_partition_columns::<&str>(&[])
        .build()
        .unwrap();
    let dims = ps.hash_schema().to_vec();
    for conv in [
        BoundaryConvention::Legacy,
        BoundaryConvention::RangeSpecific,
    ] {
        let ts = tablets(&[(vec![], vec![], dims.clone())], conv);
        let refs: Vec<(&[u8], &[u8])> = ts
            .iter()
            .map(|(a, b)| (a.as_slice(), b.as_slice()))
            .collect();
        let got = derive_range_partitions(&ps, &refs).unwrap();
        assert_eq!(got.len(), 1, "{conv:?}");
        assert_eq!(got[0].tablets, 3);
    }
}

#[test]
fn bound_rows_round_trip() {
    let s = schema(vec![
        col("d", DataType::Date).key(true),
        col("s", DataType::String).key(true),
        ColumnSchemaBuilder::decimal("x", 5, 1).key(true),
    ]);
    let cols = [0, 1, 2];
    // A bound that set only `s`: `d` and `x` encode as their minimums,
    // which are not valid DATE / DECIMAL(5, 1) values.
    let mut r = Row::new(&s);
    r.set_str("s", "m\0n").unwrap();
    let k = encode_range_bound(&r, &cols).unwrap();
    let back = bound_row(&s, &cols, &k).unwrap();
    assert_eq!(encode_range_bound(&back, &cols).unwrap(), k);
    assert!(!back.is_set("d").unwrap());
    assert!(bound_row(&s, &cols, &[])
        .unwrap()
        .is_set("s")
        .is_ok_and(|set| !set));
    assert!(bound_row(&s, &cols, &[1, 2]).is_err());
}
