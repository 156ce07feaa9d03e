use super::*;
use crate::schema::ColumnSchema;

fn kvs() -> Schema {
    Schema::new(vec![
        ColumnSchema::builder("k", DataType::Int32)
            .key(true)
            .build()
            .unwrap(),
        ColumnSchema::builder("v", DataType::Int32)
            .nullable(true)
            .build()
            .unwrap(),
        ColumnSchema::builder("s", DataType::String)
            .nullable(true)
            .build()
            .unwrap(),
    ])
    .unwrap()
}

#[test]
fn spec_7_2_insert_then_delete() {
    let s = kvs();
    let mut ins = Row::new(&s);
    ins.set_i32("k", 1)
        .unwrap()
        .set_null("v")
        .unwrap()
        .set_str("s", "hi")
        .unwrap();
    let mut del = ins.clone();
    // Delete sends key columns only, even when others are set.
    del.set_i32("v", 9).unwrap();
    let pb = encode(&s, &[(OpType::Insert, &ins), (OpType::Delete, &del)]).unwrap();
    let expected_rows: Vec<u8> = [
        &[0x01, 0x07, 0x02, 0x01, 0, 0, 0][..],
        &[0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0],
        &[0x03, 0x01, 0x00, 0x01, 0, 0, 0],
    ]
    .concat();
    assert_eq!(pb.rows.as_deref().unwrap(), &expected_rows[..]);
    assert_eq!(pb.indirect_data.as_deref().unwrap(), b"hi");

    let decoded = decode(&s, &pb).unwrap();
    assert_eq!(decoded.len(), 2);
    assert_eq!(decoded[0], (OpType::Insert, ins));
    let mut key_only = Row::new(&s);
    key_only.set_i32("k", 1).unwrap();
    assert_eq!(decoded[1], (OpType::Delete, key_only));
}

#[test]
fn spec_5_3_range_bounds() {
    let s = kvs();
    let mut lo = Row::new(&s);
    lo.set_i32("k", 0).unwrap();
    let mut hi = Row::new(&s);
    hi.set_i32("k", 100).unwrap();
    let pb = encode(
        &s,
        &[
            (OpType::RangeLowerBound, &lo),
            (OpType::RangeUpperBound, &hi),
        ],
    )
    .unwrap();
    assert_eq!(
        pb.rows.unwrap(),
        [6, 1, 0, 0, 0, 0, 0, 7, 1, 0, 0x64, 0, 0, 0]
    );
    assert_eq!(pb.indirect_data, None);
    // Unbounded bounds have no column set.
    let empty = Row::new(&s);
    let pb = encode(&s, &[(OpType::RangeLowerBound, &empty)]).unwrap();
    assert_eq!(pb.rows.unwrap(), [6, 0, 0]);
}

#[test]
fn test_operation_set_strings_golden() {
    // Five STRING columns, c4 nullable, set out of column order.
    let cols = (0..5)
        .map(|i| {
            ColumnSchema::builder(format!("c{i}"), DataType::String)
                .key(i == 0)
                .nullable(i == 4)
                .build()
                .unwrap()
        })
        .collect();
    let s = Schema::new(cols).unwrap();
    let mut r = Row::new(&s);
    for i in [4, 2, 0, 3, 1] {
        r.set_str(i, &format!("c{i}_val")).unwrap();
    }
    let pb = encode(&s, &[(OpType::Insert, &r)]).unwrap();
    let rows = pb.rows.unwrap();
    assert_eq!(&rows[..3], &[0x01, 0x1f, 0x00]);
    for i in 0..5u64 {
        let at = 3 + 16 * i as usize;
        assert_eq!(rows[at..at + 8], (6 * i).to_le_bytes());
        assert_eq!(rows[at + 8..at + 16], 6u64.to_le_bytes());
    }
    assert_eq!(rows.len(), 3 + 5 * 16);
    assert_eq!(pb.indirect_data.unwrap(), b"c0_valc1_valc2_valc3_valc4_val");
}

#[test]
fn no_null_bitmap_without_nullable_columns() {
    let s = Schema::new(vec![
        ColumnSchema::builder("k", DataType::Int64)
            .key(true)
            .build()
            .unwrap(),
        ColumnSchema::builder("b", DataType::Bool).build().unwrap(),
    ])
    .unwrap();
    let mut r = Row::new(&s);
    r.set_i64("k", -1).unwrap().set_bool("b", true).unwrap();
    let pb = encode(&s, &[(OpType::Upsert, &r)]).unwrap();
    assert_eq!(
        pb.rows.clone().unwrap(),
        [5, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1]
    );
    assert_eq!(decode(&s, &pb).unwrap()[0].1, r);
}

#[test]
fn validation() {
    let s = kvs();
    let mut r = Row::new(&s);
    r.set_i32("v", 1).unwrap();
    let e = encode(&s, &[(OpType::Insert, &r)]).unwrap_err().to_string();
    assert!(e.contains("'k'") && e.contains("INSERT"), "{e}");
    // Bounds may leave key columns unset.
    assert!(encode(&s, &[(OpType::SplitRow, &r)]).is_ok());
    let other = Schema::new(vec![ColumnSchema::builder("k", DataType::Int32)
        .key(true)
        .build()
        .unwrap()])
    .unwrap();
    let mut o = Row::new(&other);
    o.set_i32("k", 1).unwrap();
    assert!(encode(&s, &[(OpType::Insert, &o)]).is_err());

    let auto = Schema::new(vec![
        ColumnSchema::builder("k", DataType::Int32)
            .key(true)
            .build()
            .unwrap(),
        ColumnSchema::builder("auto_incrementing_id", DataType::Int64)
            .key(true)
            .auto_incrementing(true)
            .build()
            .unwrap(),
    ])
    .unwrap();
    let mut a = Row::new(&auto);
    a.set_i32("k", 1).unwrap();
    assert!(encode(&auto, &[(OpType::Insert, &a)]).is_ok());
    assert!(encode(&auto, &[(OpType::Upsert, &a)]).is_err());
    a.set_i64("auto_incrementing_id", 5).unwrap();
    assert!(encode(&auto, &[(OpType::Insert, &a)]).is_err());
    assert!(encode(&auto, &[(OpType::Delete, &a)]).is_ok());
}

#[test]
fn property_random_rows_round_trip() {
    use crate::schema::{ColumnSchemaBuilder, Value};
    let mut rng = crate::partition::testutil::Rng(21);
    let types = [
        DataType::Bool,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::Float,
        DataType::Double,
        DataType::String,
        DataType::Binary,
        DataType::UnixtimeMicros,
        DataType::Date,
    ];
    for _ in 0..200 {
        // 1..=20 columns so bitmaps span up to three bytes.
        let ncols = 1 + (rng.next() % 20) as usize;
        let cols = (0..ncols)
            .map(|i| {
                let key = i == 0;
                let builder = match rng.next() % 14 {
                    11 if !key => ColumnSchemaBuilder::varchar(format!("c{i}"), 10),
                    12 => ColumnSchemaBuilder::decimal(format!("c{i}"), 30, 2),
                    13 => ColumnSchemaBuilder::decimal(format!("c{i}"), 9, 0),
                    t => {
                        let t = types[t as usize % types.len()];
                        let t = if key && !t.is_keyable() {
                            DataType::Int64
                        } else {
                            t
                        };
                        ColumnSchema::builder(format!("c{i}"), t)
                    }
                };
                builder
                    .key(key)
                    .nullable(!key && rng.next().is_multiple_of(3))
                    .build()
                    .unwrap()
            })
            .collect();
        let s = Schema::new(cols).unwrap();
        let mut rows = Vec::new();
        for _ in 0..(rng.next() % 5) {
            let mut r = Row::new(&s);
            for (i, c) in s.columns().iter().enumerate() {
                if i > 0 && rng.next().is_multiple_of(4) {
                    continue; // unset
                }
                if c.is_nullable() && rng.next().is_multiple_of(4) {
                    r.set_null(i).unwrap();
                    continue;
                }
                let x = rng.next();
                let v = match c.data_type() {
                    DataType::Bool => Value::Bool(x.is_multiple_of(2)),
                    DataType::Int8 => Value::Int8(x as i8),
                    DataType::Int16 => Value::Int16(x as i16),
                    DataType::Int32 => Value::Int32(x as i32),
                    DataType::Int64 => Value::Int64(x as i64),
                    DataType::Float => Value::Float(x as f32),
                    DataType::Double => Value::Double(x as f64),
                    DataType::String | DataType::Varchar => {
                        Value::String("é".repeat((x % 10) as usize))
                    }
                    DataType::Binary => Value::Binary(rng.bytes(8)),
                    DataType::UnixtimeMicros => Value::UnixtimeMicros(x as i64),
                    DataType::Date => Value::Date((x % 1000) as i32),
                    _ => Value::Decimal((x % 1_000_000_000) as i128 - 500_000_000),
                };
                r.set(i, &v).unwrap();
            }
            let op = OpType::from_wire(1 + (rng.next() % 13) as u8).unwrap();
            rows.push((op, r));
        }
        let refs: Vec<(OpType, &Row)> = rows.iter().map(|(o, r)| (*o, r)).collect();
        let pb = encode(&s, &refs).unwrap();
        let back = decode(&s, &pb).unwrap();
        assert_eq!(back.len(), rows.len());
        for ((op, r), (bop, b)) in rows.iter().zip(&back) {
            assert_eq!(op, bop);
            if op.is_delete() {
                for i in 0..s.len() {
                    if i < s.num_key_columns() {
                        assert_eq!(r.get(i).unwrap(), b.get(i).unwrap());
                    } else {
                        assert!(!b.is_set(i).unwrap());
                    }
                }
            } else {
                assert_eq!(r, b);
            }
        }
    }
}

#[test]
fn decode_rejects_malformed() {
    let s = kvs();
    let bad = |rows: Vec<u8>, ind: Option<Vec<u8>>| {
        decode(
            &s,
            &pb::RowOperationsPb {
                rows: Some(rows),
                indirect_data: ind,
            },
        )
    };
    assert!(bad(vec![0x0e, 1, 0], None).is_err()); // unknown op
    assert!(bad(vec![1, 1], None).is_err()); // truncated bitmap
    assert!(bad(vec![1, 1, 0, 1, 0], None).is_err()); // truncated cell
    let mut ptr = vec![1, 4, 0];
    ptr.extend_from_slice(&5u64.to_le_bytes());
    ptr.extend_from_slice(&u64::MAX.to_le_bytes());
    assert!(bad(ptr, Some(b"abc".to_vec())).is_err()); // pointer overflow
    let mut non_utf8 = vec![1, 4, 0];
    non_utf8.extend_from_slice(&0u64.to_le_bytes());
    non_utf8.extend_from_slice(&1u64.to_le_bytes());
    assert!(bad(non_utf8, Some(vec![0xff])).is_err());
    assert!(bad(vec![1, 1, 1], None).is_err()); // NULL key
    assert!(bad(vec![], None).unwrap().is_empty());
    assert_eq!(OpType::from_wire(0), None);
    for v in 1..=13 {
        assert_eq!(OpType::from_wire(v).unwrap().to_pb() as u8, v);
    }
}

#[test]
fn truncate_drops_the_rows_after_a_mark() {
    let s = kvs();
    let mut r = Row::new(&s);
    r.set_i32("k", 1).unwrap().set_str("s", "abc").unwrap();
    let mut enc = OpsEncoder::new(&s);
    enc.push(OpType::Insert, &r).unwrap();
    let (mark, size) = (enc.mark(), enc.encoded_size());
    r.set_i32("k", 2).unwrap().set_str("s", "defgh").unwrap();
    enc.push(OpType::Upsert, &r).unwrap();
    assert_eq!(enc.len(), 2);
    enc.truncate(mark);
    assert_eq!((enc.len(), enc.encoded_size()), (1, size));
    let decoded = decode(&s, &enc.finish()).unwrap();
    assert_eq!(decoded.len(), 1);
    assert_eq!(decoded[0].1.get_str("s").unwrap(), "abc");
}
