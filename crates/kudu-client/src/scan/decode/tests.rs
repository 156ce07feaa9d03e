use super::*;
use crate::pb::columnar_row_block_pb::Column;
use crate::schema::{ColumnSchema, ColumnSchemaBuilder};

fn projection() -> Schema {
    Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int32)
            .build()
            .unwrap(),
        ColumnSchema::builder("name", DataType::String)
            .nullable(true)
            .build()
            .unwrap(),
        ColumnSchema::is_deleted("is_deleted"),
    ])
    .unwrap()
}

fn block(num_rows: i32, rows: Option<i32>, indirect: Option<i32>) -> pb::RowwiseRowBlockPb {
    pb::RowwiseRowBlockPb {
        num_rows: Some(num_rows),
        rows_sidecar: rows,
        indirect_data_sidecar: indirect,
    }
}

fn spec_row() -> Vec<u8> {
    let mut row = vec![7, 0, 0, 0];
    row.extend_from_slice(&0u64.to_le_bytes());
    row.extend_from_slice(&2u64.to_le_bytes());
    row.extend_from_slice(&[0x00, 0x00]); // IS_DELETED=false, null bitmap
    row
}

#[test]
fn spec_8_6_rowwise_example() {
    let s = projection();
    let side = [Bytes::from(spec_row()), Bytes::from_static(b"ab")];
    let b = RowBatch::from_rowwise(&s, &block(1, Some(0), Some(1)), &side).unwrap();
    assert_eq!(b.num_rows(), 1);
    let r = b.row(0);
    assert_eq!(r.get_i32("id").unwrap(), 7);
    assert_eq!(r.get_i32(0).unwrap(), 7);
    assert_eq!(r.get_str("name").unwrap(), "ab");
    assert_eq!(r.get_binary("name").unwrap(), b"ab");
    assert!(!r.get_bool("is_deleted").unwrap());
    assert!(!r.is_deleted());
    assert_eq!(
        b.to_values().unwrap(),
        vec![vec![Value::Int32(7), Value::from("ab"), Value::Bool(false)]]
    );
    // Borrowed strings live as long as the batch, not the view.
    let names: Vec<&str> = b.rows().map(|r| r.get_str("name").unwrap()).collect();
    assert_eq!(names, ["ab"]);
    let e = r.get_i64("id").unwrap_err().to_string();
    assert!(e.contains("'id'") && e.contains("INT32"), "{e}");
}

#[test]
fn rowwise_nulls_and_deleted_rows() {
    let s = projection();
    let mut rows = spec_row();
    let mut second = vec![8, 0, 0, 0];
    second.extend_from_slice(&[0xee; 16]); // garbage: NULL cell
    second.extend_from_slice(&[0x01, 0b010]); // deleted, name NULL
    rows.extend_from_slice(&second);
    let side = [Bytes::from(rows), Bytes::from_static(b"ab")];
    let b = RowBatch::from_rowwise(&s, &block(2, Some(0), Some(1)), &side).unwrap();
    let r = b.row(1);
    assert!(r.is_null("name").unwrap());
    assert_eq!(r.get("name").unwrap(), ValueRef::Null);
    assert!(r.get_str("name").unwrap_err().to_string().contains("NULL"));
    assert!(r.is_deleted());
    assert_eq!(b.rows().filter(|r| r.is_deleted()).count(), 1);
    assert!(b.get_row(2).is_none());
}

#[test]
fn rowwise_without_var_len_or_rows() {
    let s = Schema::new(vec![
        ColumnSchema::builder("t", DataType::UnixtimeMicros)
            .build()
            .unwrap(),
        ColumnSchemaBuilder::decimal("d", 20, 4).build().unwrap(),
    ])
    .unwrap();
    let mut row = (-5i64).to_le_bytes().to_vec();
    row.extend_from_slice(&(-123_456i128).to_le_bytes());
    let b = RowBatch::from_rowwise(&s, &block(1, Some(0), None), &[Bytes::from(row)]).unwrap();
    assert_eq!(b.row(0).get_timestamp_micros("t").unwrap(), -5);
    assert_eq!(b.row(0).get_decimal("d").unwrap(), -123_456);
    // Padded timestamps: 16-byte cells, value first.
    let mut padded = (-5i64).to_le_bytes().to_vec();
    padded.extend_from_slice(&[0; 8]);
    padded.extend_from_slice(&(9i128).to_le_bytes());
    let b = RowBatch::from_rowwise_with_padding(
        &s,
        &block(1, Some(0), None),
        &[Bytes::from(padded)],
        true,
    )
    .unwrap();
    assert_eq!(b.row(0).get_i64("t").unwrap(), -5);
    assert_eq!(b.row(0).get_decimal("d").unwrap(), 9);
    // Empty block: no sidecars at all.
    let b = RowBatch::from_rowwise(&s, &block(0, None, None), &[]).unwrap();
    assert!(b.is_empty());
    // Empty projection: count only.
    let empty = Schema::new(vec![]).unwrap();
    let b = RowBatch::from_rowwise(&empty, &block(3, None, None), &[]).unwrap();
    assert_eq!(b.num_rows(), 3);
    assert_eq!(b.row(2).to_values().unwrap(), vec![]);
}

#[test]
fn rowwise_rejects_malformed() {
    let s = projection();
    let ok_rows = Bytes::from(spec_row());
    let ab = Bytes::from_static(b"ab");
    let err = |blk: pb::RowwiseRowBlockPb, side: &[Bytes]| {
        RowBatch::from_rowwise(&s, &blk, side).unwrap_err()
    };
    // Wrong length.
    err(block(2, Some(0), Some(1)), &[ok_rows.clone(), ab.clone()]);
    // Missing sidecar, negative index, negative rows.
    err(block(1, Some(5), Some(1)), &[ok_rows.clone(), ab.clone()]);
    err(block(1, Some(-1), Some(1)), &[ok_rows.clone(), ab.clone()]);
    err(block(-1, Some(0), Some(1)), &[ok_rows.clone(), ab.clone()]);
    // Pointer past the indirect data, and overflowing pointers.
    err(
        block(1, Some(0), Some(1)),
        &[ok_rows.clone(), Bytes::from_static(b"a")],
    );
    let mut huge = spec_row();
    huge[4..12].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = err(block(1, Some(0), Some(1)), &[Bytes::from(huge), ab.clone()]);
    assert!(matches!(e, Error::Protocol { .. }), "{e}");
    // Invalid UTF-8 is reported on access, not at construction.
    let b = RowBatch::from_rowwise(
        &s,
        &block(1, Some(0), Some(1)),
        &[ok_rows, Bytes::from_static(&[0xff, 0xfe])],
    )
    .unwrap();
    assert!(matches!(
        b.row(0).get_str("name"),
        Err(Error::Protocol { .. })
    ));
    assert_eq!(b.row(0).get_binary("name").unwrap(), &[0xff, 0xfe]);
}

fn col(data: Option<i32>, varlen: Option<i32>, nn: Option<i32>) -> Column {
    Column {
        data_sidecar: data,
        varlen_data_sidecar: varlen,
        non_null_bitmap_sidecar: nn,
    }
}

#[test]
fn columnar_decoding() {
    let s = projection();
    // 3 rows: (1,"ab",false), (2,NULL,true), (3,"",false)
    let ids: Vec<u8> = [1i32, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    let offs: Vec<u8> = [0u32, 2, 2, 2]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let side = vec![
        Bytes::from(ids),
        Bytes::from(offs),
        Bytes::from_static(b"ab"),
        Bytes::from_static(&[0b101]),
        Bytes::from_static(&[0, 1, 0]),
    ];
    let blk = pb::ColumnarRowBlockPb {
        columns: vec![
            col(Some(0), None, None),
            col(Some(1), Some(2), Some(3)),
            col(Some(4), None, None),
        ],
        num_rows: Some(3),
    };
    let b = RowBatch::from_columnar(&s, &blk, &side).unwrap();
    assert_eq!(
        b.to_values().unwrap(),
        vec![
            vec![Value::Int32(1), Value::from("ab"), Value::Bool(false)],
            vec![Value::Int32(2), Value::Null, Value::Bool(true)],
            vec![Value::Int32(3), Value::from(""), Value::Bool(false)],
        ]
    );
    assert!(b.row(1).is_deleted());
    assert_eq!(b.row(0).get_binary("name").unwrap(), b"ab");

    // Malformed variants.
    let bad = |blk: &pb::ColumnarRowBlockPb, side: &[Bytes]| {
        assert!(matches!(
            RowBatch::from_columnar(&s, blk, side),
            Err(Error::Protocol { .. })
        ))
    };
    let mut b2 = blk.clone();
    b2.num_rows = Some(4);
    bad(&b2, &side);
    let mut b2 = blk.clone();
    b2.num_rows = Some(-1);
    bad(&b2, &side);
    let mut b2 = blk.clone();
    b2.columns.pop();
    bad(&b2, &side);
    let mut s2 = side.clone();
    s2[1] = Bytes::from(
        [0u32, 3, 2, 2]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    bad(&blk, &s2);
    let mut s2 = side.clone();
    s2[1] = Bytes::from(
        [0u32, 2, 2, 9]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    bad(&blk, &s2);
    let mut s2 = side.clone();
    s2[3] = Bytes::new();
    bad(&blk, &s2);
    let mut b2 = blk.clone();
    b2.columns[0].data_sidecar = Some(9);
    bad(&b2, &side);

    // Empty columnar block without sidecars.
    let empty = pb::ColumnarRowBlockPb {
        columns: vec![col(None, None, None); 3],
        num_rows: Some(0),
    };
    assert!(RowBatch::from_columnar(&s, &empty, &[]).unwrap().is_empty());
}

#[test]
fn property_rowwise_and_columnar_agree() {
    // Random rows encoded both ways must decode to the same values.
    let s = Schema::new(vec![
        ColumnSchema::builder("k", DataType::Int64).build().unwrap(),
        ColumnSchema::builder("s", DataType::Binary)
            .nullable(true)
            .build()
            .unwrap(),
        ColumnSchema::builder("f", DataType::Double)
            .nullable(true)
            .build()
            .unwrap(),
        ColumnSchema::builder("d", DataType::Date).build().unwrap(),
    ])
    .unwrap();
    let mut rng = crate::partition::testutil::Rng(11);
    for _ in 0..50 {
        let n = (rng.next() % 20) as usize;
        let mut expect = Vec::new();
        let (mut rows, mut indirect) = (Vec::new(), Vec::new());
        let (mut c_k, mut c_s_off, mut c_s, mut c_s_nn, mut c_f, mut c_f_nn, mut c_d) = (
            Vec::new(),
            vec![0u8; 4],
            Vec::new(),
            vec![0u8; n.div_ceil(8)],
            Vec::new(),
            vec![0u8; n.div_ceil(8)],
            Vec::new(),
        );
        for r in 0..n {
            let k = rng.next() as i64;
            let sv = (!rng.next().is_multiple_of(3)).then(|| rng.bytes(5));
            let fv = rng
                .next()
                .is_multiple_of(2)
                .then(|| rng.next() as f64 / 7.0);
            let d = (rng.next() % 1000) as i32;
            expect.push(vec![
                Value::Int64(k),
                sv.clone().map_or(Value::Null, Value::Binary),
                fv.map_or(Value::Null, Value::Double),
                Value::Date(d),
            ]);
            // Row-wise.
            rows.extend_from_slice(&k.to_le_bytes());
            let mut nulls = 0u8;
            match &sv {
                Some(v) => {
                    rows.extend_from_slice(&(indirect.len() as u64).to_le_bytes());
                    rows.extend_from_slice(&(v.len() as u64).to_le_bytes());
                    indirect.extend_from_slice(v);
                }
                None => {
                    rows.extend_from_slice(&[0xab; 16]);
                    nulls |= 0b10;
                }
            }
            rows.extend_from_slice(&fv.unwrap_or(0.0).to_le_bytes());
            if fv.is_none() {
                nulls |= 0b100;
            }
            rows.extend_from_slice(&d.to_le_bytes());
            rows.push(nulls);
            // Columnar.
            c_k.extend_from_slice(&k.to_le_bytes());
            if let Some(v) = &sv {
                c_s.extend_from_slice(v);
                c_s_nn[r / 8] |= 1 << (r % 8);
            }
            c_s_off.extend_from_slice(&(c_s.len() as u32).to_le_bytes());
            c_f.extend_from_slice(&fv.unwrap_or(0.0).to_le_bytes());
            if fv.is_some() {
                c_f_nn[r / 8] |= 1 << (r % 8);
            }
            c_d.extend_from_slice(&d.to_le_bytes());
        }
        let rw = RowBatch::from_rowwise(
            &s,
            &block(n as i32, Some(1), Some(0)),
            &[Bytes::from(indirect), Bytes::from(rows)],
        )
        .unwrap();
        let side: Vec<Bytes> = [c_k, c_s_off, c_s, c_s_nn, c_f, c_f_nn, c_d]
            .into_iter()
            .map(Bytes::from)
            .collect();
        let cb = pb::ColumnarRowBlockPb {
            columns: vec![
                col(Some(0), None, None),
                col(Some(1), Some(2), Some(3)),
                col(Some(4), None, Some(5)),
                col(Some(6), None, None),
            ],
            num_rows: Some(n as i64),
        };
        let cw = RowBatch::from_columnar(&s, &cb, &side).unwrap();
        assert_eq!(rw.to_values().unwrap(), expect);
        assert_eq!(cw.to_values().unwrap(), expect);
    }
}

#[test]
fn property_random_bytes_never_panic() {
    // Fuzz-style: arbitrary sidecars and counts must give Ok or Err,
    // never a panic, and every accessor on an Ok batch must be safe.
    let s = projection();
    let mut rng = crate::partition::testutil::Rng(5);
    for _ in 0..3000 {
        let side: Vec<Bytes> = (0..3)
            .map(|_| {
                let n = (rng.next() % 48) as usize;
                Bytes::from((0..n).map(|_| rng.next() as u8).collect::<Vec<u8>>())
            })
            .collect();
        let pick = |rng: &mut crate::partition::testutil::Rng| {
            (!rng.next().is_multiple_of(4)).then(|| (rng.next() % 4) as i32 - 1)
        };
        let rw = block((rng.next() % 4) as i32, pick(&mut rng), pick(&mut rng));
        if let Ok(b) = RowBatch::from_rowwise(&s, &rw, &side) {
            for r in b.rows() {
                let _ = r.to_values();
                let _ = r.get_binary("name");
                let _ = r.is_deleted();
            }
        }
        let cb = pb::ColumnarRowBlockPb {
            columns: (0..3)
                .map(|_| col(pick(&mut rng), pick(&mut rng), pick(&mut rng)))
                .collect(),
            num_rows: Some((rng.next() % 4) as i64),
        };
        if let Ok(b) = RowBatch::from_columnar(&s, &cb, &side) {
            for r in b.rows() {
                let _ = r.to_values();
                let _ = r.get_binary("name");
                let _ = r.is_deleted();
            }
        }
    }
}
