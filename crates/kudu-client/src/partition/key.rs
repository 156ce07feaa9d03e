//! Order-preserving key encoding (docs/kudu-protocol.md#key-encoding) for
//! primary keys, range keys and hash-bucket inputs.
//!
//! Integer-like values are written big-endian with the sign bit flipped, so
//! byte order equals numeric order. STRING/BINARY/VARCHAR values are raw
//! when they are the last column of the encoded list; otherwise each 0x00
//! becomes `00 01` and the component ends with `00 00`, which keeps
//! composite keys ordered component by component.

use crate::schema::{DataType, Row, Schema, Value, ValueRef};
use crate::{Error, Result};

/// Appends the key encoding of one value of type `data_type`. `is_last`
/// says whether it is the last column of the list being encoded.
pub(crate) fn encode_value(
    out: &mut Vec<u8>,
    data_type: DataType,
    value: ValueRef<'_>,
    is_last: bool,
) -> Result<()> {
    let mismatch = || {
        Error::InvalidArgument(format!(
            "cannot key-encode a {} value as {data_type}",
            value.kind()
        ))
    };
    match (data_type, value) {
        (DataType::Int8, ValueRef::Int8(v)) => out.push((v as u8) ^ 0x80),
        (DataType::Int16, ValueRef::Int16(v)) => {
            out.extend_from_slice(&((v as u16) ^ (1 << 15)).to_be_bytes())
        }
        (DataType::Int32, ValueRef::Int32(v)) | (DataType::Date, ValueRef::Date(v)) => {
            out.extend_from_slice(&flip32(v))
        }
        (DataType::Int64, ValueRef::Int64(v))
        | (DataType::UnixtimeMicros, ValueRef::UnixtimeMicros(v)) => {
            out.extend_from_slice(&flip64(v))
        }
        (DataType::Decimal32, ValueRef::Decimal(v)) => {
            out.extend_from_slice(&flip32(i32::try_from(v).map_err(|_| mismatch())?))
        }
        (DataType::Decimal64, ValueRef::Decimal(v)) => {
            out.extend_from_slice(&flip64(i64::try_from(v).map_err(|_| mismatch())?))
        }
        (DataType::Decimal128, ValueRef::Decimal(v)) => {
            out.extend_from_slice(&((v as u128) ^ (1 << 127)).to_be_bytes())
        }
        (DataType::String | DataType::Varchar, ValueRef::String(s)) => {
            encode_bytes(out, s.as_bytes(), is_last)
        }
        (DataType::Binary, ValueRef::Binary(b)) => encode_bytes(out, b, is_last),
        (t, _) if !t.is_keyable() => {
            return Err(Error::InvalidArgument(format!(
                "type {t} cannot be part of a key"
            )))
        }
        _ => return Err(mismatch()),
    }
    Ok(())
}

/// Appends the encoding of the smallest value of `data_type` (what an unset
/// column of a range bound encodes as).
pub(crate) fn encode_min(out: &mut Vec<u8>, data_type: DataType, is_last: bool) {
    if data_type.is_var_len() {
        encode_bytes(out, &[], is_last);
    } else {
        // Minimum signed value with the sign bit flipped is all zeros.
        out.resize(out.len() + data_type.size(), 0);
    }
}

fn flip32(v: i32) -> [u8; 4] {
    ((v as u32) ^ (1 << 31)).to_be_bytes()
}

fn flip64(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

fn encode_bytes(out: &mut Vec<u8>, bytes: &[u8], is_last: bool) {
    if is_last {
        out.extend_from_slice(bytes);
        return;
    }
    out.reserve(bytes.len() + 2);
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(1);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Appends the encoding of `row`'s `columns` (indexes into its schema), in
/// order; every column must be set and non-NULL.
pub(crate) fn encode_columns(row: &Row, columns: &[usize], out: &mut Vec<u8>) -> Result<()> {
    let schema = row.schema();
    for (n, &i) in columns.iter().enumerate() {
        let col = schema
            .column(i)
            .ok_or_else(|| Error::InvalidArgument(format!("key column index {i} out of range")))?;
        let value = row.get(i).map_err(|_| {
            Error::InvalidArgument(format!("key column '{}' is not set", col.name()))
        })?;
        if value.is_null() {
            return Err(Error::InvalidArgument(format!(
                "key column '{}' is NULL",
                col.name()
            )));
        }
        encode_value(out, col.data_type(), value, n + 1 == columns.len())?;
    }
    Ok(())
}

/// The encoded primary key of `row` (all key columns must be set): what
/// scan `start_primary_key` / `stop_primary_key` take.
#[cfg(any(test, feature = "unstable-internals"))]
pub(crate) fn encode_primary_key(row: &Row) -> Result<Vec<u8>> {
    let keys: Vec<usize> = (0..row.schema().num_key_columns()).collect();
    let mut out = Vec::new();
    encode_columns(row, &keys, &mut out)?;
    Ok(out)
}

/// The encoded range key of a range-bound row: empty (unbounded) if none of
/// `columns` is set, otherwise unset columns encode as their type's
/// minimum value (docs/kudu-protocol.md#key-encoding).
pub(crate) fn encode_range_bound(row: &Row, columns: &[usize]) -> Result<Vec<u8>> {
    let mut any_set = false;
    for &i in columns {
        any_set |= row.is_set(i)?;
    }
    let mut out = Vec::new();
    if !any_set {
        return Ok(out);
    }
    let schema = row.schema();
    for (n, &i) in columns.iter().enumerate() {
        let is_last = n + 1 == columns.len();
        let dt = schema.columns()[i].data_type();
        if row.is_set(i)? {
            encode_value(&mut out, dt, row.get(i)?, is_last)?;
        } else {
            encode_min(&mut out, dt, is_last);
        }
    }
    Ok(out)
}

/// Decodes an encoded key made of `columns` of `schema` (the inverse of
/// [`encode_columns`]); trailing bytes are an error.
pub(crate) fn decode_columns(schema: &Schema, columns: &[usize], key: &[u8]) -> Result<Vec<Value>> {
    let mut rest = key;
    let mut out = Vec::with_capacity(columns.len());
    for (n, &i) in columns.iter().enumerate() {
        let col = schema
            .column(i)
            .ok_or_else(|| malformed(format!("column index {i} out of range")))?;
        let is_last = n + 1 == columns.len();
        let dt = col.data_type();
        let value = if dt.is_var_len() {
            let bytes = take_bytes(&mut rest, is_last)?;
            if dt == DataType::Binary {
                Value::Binary(bytes)
            } else {
                Value::String(
                    String::from_utf8(bytes)
                        .map_err(|_| malformed(format!("column '{}' is not UTF-8", col.name())))?,
                )
            }
        } else {
            let width = dt.size();
            if rest.len() < width {
                return Err(malformed(format!(
                    "key ends inside column '{}'",
                    col.name()
                )));
            }
            let (cell, tail) = rest.split_at(width);
            rest = tail;
            decode_fixed(dt, cell)?
        };
        out.push(value);
    }
    if !rest.is_empty() {
        return Err(malformed(format!("{} trailing bytes", rest.len())));
    }
    Ok(out)
}

/// Decodes an encoded primary key of `schema`.
#[cfg(test)]
pub(crate) fn decode_primary_key(schema: &Schema, key: &[u8]) -> Result<Vec<Value>> {
    let keys: Vec<usize> = (0..schema.num_key_columns()).collect();
    decode_columns(schema, &keys, key)
}

fn malformed(msg: String) -> Error {
    Error::InvalidArgument(format!("malformed encoded key: {msg}"))
}

fn decode_fixed(dt: DataType, cell: &[u8]) -> Result<Value> {
    let mut b16 = [0u8; 16];
    b16[16 - cell.len()..].copy_from_slice(cell);
    // Right-aligned big-endian, so the value is the low `width` bytes.
    let raw = u128::from_be_bytes(b16);
    let bits = 8 * cell.len() as u32;
    let unflipped = raw ^ (1u128 << (bits - 1));
    // Sign-extend from `bits` to 128.
    let v = ((unflipped << (128 - bits)) as i128) >> (128 - bits);
    Ok(match dt {
        DataType::Int8 => Value::Int8(v as i8),
        DataType::Int16 => Value::Int16(v as i16),
        DataType::Int32 => Value::Int32(v as i32),
        DataType::Date => Value::Date(v as i32),
        DataType::Int64 => Value::Int64(v as i64),
        DataType::UnixtimeMicros => Value::UnixtimeMicros(v as i64),
        DataType::Decimal32 | DataType::Decimal64 | DataType::Decimal128 => Value::Decimal(v),
        t => return Err(malformed(format!("type {t} cannot be part of a key"))),
    })
}

fn take_bytes(rest: &mut &[u8], is_last: bool) -> Result<Vec<u8>> {
    if is_last {
        let out = rest.to_vec();
        *rest = &[];
        return Ok(out);
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        if rest[i] != 0 {
            out.push(rest[i]);
            i += 1;
            continue;
        }
        match rest.get(i + 1) {
            Some(0) => {
                *rest = &rest[i + 2..];
                return Ok(out);
            }
            Some(1) => {
                out.push(0);
                i += 2;
            }
            _ => return Err(malformed("bad escape in string component".into())),
        }
    }
    Err(malformed("unterminated string component".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnSchema;

    fn key(t: DataType, v: ValueRef<'_>, last: bool) -> Vec<u8> {
        let mut out = Vec::new();
        encode_value(&mut out, t, v, last).unwrap();
        out
    }

    #[test]
    fn spec_examples() {
        assert_eq!(
            key(DataType::Int32, ValueRef::Int32(0), true),
            [0x80, 0, 0, 0]
        );
        assert_eq!(
            key(DataType::Int32, ValueRef::Int32(-1), true),
            [0x7f, 0xff, 0xff, 0xff]
        );
        assert_eq!(
            key(DataType::Int64, ValueRef::Int64(42), true),
            [0x80, 0, 0, 0, 0, 0, 0, 0x2a]
        );
        assert_eq!(key(DataType::Int8, ValueRef::Int8(-128), true), [0]);
        assert_eq!(
            key(DataType::String, ValueRef::String("a\0b"), false),
            [b'a', 0, 1, b'b', 0, 0]
        );
        assert_eq!(
            key(DataType::String, ValueRef::String("a\0b"), true),
            b"a\0b"
        );
        assert_eq!(
            key(DataType::Decimal128, ValueRef::Decimal(0), true)[0],
            0x80
        );
    }

    #[test]
    fn rejects_non_key_types_and_mismatches() {
        let mut out = Vec::new();
        assert!(encode_value(&mut out, DataType::Double, ValueRef::Double(1.0), true).is_err());
        assert!(encode_value(&mut out, DataType::Int32, ValueRef::Int64(1), true).is_err());
        assert!(encode_value(
            &mut out,
            DataType::Decimal32,
            ValueRef::Decimal(1 << 40),
            true
        )
        .is_err());
    }

    use crate::partition::testutil::Rng;

    fn schema3() -> Schema {
        Schema::new(vec![
            ColumnSchema::builder("a", DataType::Int64)
                .key(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("b", DataType::Binary)
                .key(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("c", DataType::Binary)
                .key(true)
                .build()
                .unwrap(),
        ])
        .unwrap()
    }

    #[test]
    fn property_integer_order_is_preserved() {
        let mut rng = Rng(1);
        for _ in 0..2000 {
            let (a, b) = (rng.next() as i64, rng.next() as i64 >> (rng.next() % 64));
            let ka = key(DataType::Int64, ValueRef::Int64(a), true);
            let kb = key(DataType::Int64, ValueRef::Int64(b), true);
            assert_eq!(a.cmp(&b), ka.cmp(&kb), "{a} vs {b}");
            let (a, b) = (a as i32, b as i32);
            let ka = key(DataType::Int32, ValueRef::Int32(a), true);
            let kb = key(DataType::Int32, ValueRef::Int32(b), true);
            assert_eq!(a.cmp(&b), ka.cmp(&kb));
            let (a, b) = (a as i16, b as i16);
            let ka = key(DataType::Int16, ValueRef::Int16(a), true);
            let kb = key(DataType::Int16, ValueRef::Int16(b), true);
            assert_eq!(a.cmp(&b), ka.cmp(&kb));
            let (a, b) = (i128::from(a) * (rng.next() as i128), i128::from(b) << 70);
            let ka = key(DataType::Decimal128, ValueRef::Decimal(a), true);
            let kb = key(DataType::Decimal128, ValueRef::Decimal(b), true);
            assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }
    }

    #[test]
    fn property_composite_order_and_round_trip() {
        let s = schema3();
        let cols = [0, 1, 2];
        let mut rng = Rng(7);
        let gen = |rng: &mut Rng| {
            let a = (rng.next() % 5) as i64 - 2;
            let b = rng.bytes(4);
            let c = rng.bytes(4);
            let mut row = Row::new(&s);
            row.set_i64("a", a).unwrap();
            row.set_binary("b", &b).unwrap();
            row.set_binary("c", &c).unwrap();
            ((a, b, c), row)
        };
        for _ in 0..3000 {
            let (ta, ra) = gen(&mut rng);
            let (tb, rb) = gen(&mut rng);
            let ka = encode_primary_key(&ra).unwrap();
            let kb = encode_primary_key(&rb).unwrap();
            assert_eq!(ta.cmp(&tb), ka.cmp(&kb), "{ta:?} vs {tb:?}");
            let decoded = decode_columns(&s, &cols, &ka).unwrap();
            assert_eq!(
                decoded,
                vec![
                    Value::Int64(ta.0),
                    Value::Binary(ta.1.clone()),
                    Value::Binary(ta.2.clone())
                ]
            );
        }
    }

    #[test]
    fn decode_rejects_garbage() {
        let s = schema3();
        assert!(decode_primary_key(&s, &[0x80]).is_err());
        assert!(decode_primary_key(&s, &[0x80, 0, 0, 0, 0, 0, 0, 0, b'x', 0, 2]).is_err());
        assert!(decode_primary_key(&s, &[0x80, 0, 0, 0, 0, 0, 0, 0, b'x']).is_err());
        let ok = decode_primary_key(&s, &[0x80, 0, 0, 0, 0, 0, 0, 1, b'x', 0, 0, b'y']).unwrap();
        assert_eq!(ok[2], Value::Binary(b"y".to_vec()));
    }

    #[test]
    fn range_bounds_use_minimums_and_empty_for_unbounded() {
        let s = Schema::new(vec![
            ColumnSchema::builder("a", DataType::Int32)
                .key(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("b", DataType::String)
                .key(true)
                .build()
                .unwrap(),
        ])
        .unwrap();
        let mut r = Row::new(&s);
        assert!(encode_range_bound(&r, &[0, 1]).unwrap().is_empty());
        r.set_str("b", "x").unwrap();
        assert_eq!(encode_range_bound(&r, &[0, 1]).unwrap(), [0, 0, 0, 0, b'x']);
        r.unset("b").unwrap();
        r.set_i32("a", 1).unwrap();
        assert_eq!(encode_range_bound(&r, &[0, 1]).unwrap(), [0x80, 0, 0, 1]);
        assert!(encode_primary_key(&r).is_err());
    }
}
