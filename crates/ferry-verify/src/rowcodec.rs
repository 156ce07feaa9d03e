//! Per-row bytes computed on the client: the CRC32C the tablet servers'
//! Checksum RPC computes for a row, and the row's memcmp-comparable encoded
//! primary key (Kudu's key encoding).
//!
//! Stand-in until `kudu-client` offers `RowView::checksum` and
//! `RowView::encoded_primary_key` (issue 12, contract A). Both work without
//! allocating: the CRC is chained over the cells, the key is written into a
//! caller's buffer.

use kudu_client::scan::RowView;
use kudu_client::schema::ValueRef;
use kudu_client::DataType;

/// The row's checksum over its projection, as the server computes it: per
/// column, in projection order, the column's position (u32), for a
/// nullable column one byte (1 value, 0 NULL), then the value's bytes.
pub(crate) fn row_crc(row: &RowView<'_>) -> Result<u32, kudu_client::Error> {
    let mut crc = 0u32;
    for (i, column) in row.schema().columns().iter().enumerate() {
        crc = crc32c::crc32c_append(crc, &(i as u32).to_le_bytes());
        let null = row.is_null(i)?;
        if column.is_nullable() {
            crc = crc32c::crc32c_append(crc, &[u8::from(!null)]);
        }
        if null {
            continue;
        }
        if column.data_type().is_var_len() {
            crc = crc32c::crc32c_append(crc, row.get_binary(i)?);
            continue;
        }
        crc = match (row.get(i)?, column.data_type()) {
            (ValueRef::Bool(v), _) => crc32c::crc32c_append(crc, &[u8::from(v)]),
            (ValueRef::Int8(v), _) => crc32c::crc32c_append(crc, &v.to_le_bytes()),
            (ValueRef::Int16(v), _) => crc32c::crc32c_append(crc, &v.to_le_bytes()),
            (ValueRef::Int32(v) | ValueRef::Date(v), _) => {
                crc32c::crc32c_append(crc, &v.to_le_bytes())
            }
            (ValueRef::Int64(v) | ValueRef::UnixtimeMicros(v), _) => {
                crc32c::crc32c_append(crc, &v.to_le_bytes())
            }
            (ValueRef::Float(v), _) => crc32c::crc32c_append(crc, &v.to_le_bytes()),
            (ValueRef::Double(v), _) => crc32c::crc32c_append(crc, &v.to_le_bytes()),
            // Decimals are stored at their type's width.
            (ValueRef::Decimal(v), DataType::Decimal32) => {
                crc32c::crc32c_append(crc, &(v as i32).to_le_bytes())
            }
            (ValueRef::Decimal(v), DataType::Decimal64) => {
                crc32c::crc32c_append(crc, &(v as i64).to_le_bytes())
            }
            (ValueRef::Decimal(v), _) => crc32c::crc32c_append(crc, &v.to_le_bytes()),
            (ValueRef::Null | ValueRef::String(_) | ValueRef::Binary(_), _) => crc,
        };
    }
    Ok(crc)
}

/// Writes the encoded primary key of `row` (whose first `keys` columns are
/// the key columns, in order) into `out`, replacing its contents.
pub(crate) fn encode_key(
    row: &RowView<'_>,
    keys: usize,
    out: &mut Vec<u8>,
) -> Result<(), kudu_client::Error> {
    out.clear();
    for i in 0..keys {
        let last = i + 1 == keys;
        let data_type = row.schema().columns()[i].data_type();
        if data_type.is_var_len() {
            let bytes = row.get_binary(i)?;
            if last {
                out.extend_from_slice(bytes);
            } else {
                // 0x00 → 00 01, then the 00 00 separator: keeps composite
                // keys ordered column by column.
                for &b in bytes {
                    out.push(b);
                    if b == 0 {
                        out.push(1);
                    }
                }
                out.extend_from_slice(&[0, 0]);
            }
            continue;
        }
        match (row.get(i)?, data_type) {
            (ValueRef::Int8(v), _) => out.push((v as u8) ^ 0x80),
            (ValueRef::Int16(v), _) => out.extend_from_slice(&((v as u16) ^ 0x8000).to_be_bytes()),
            (ValueRef::Int32(v) | ValueRef::Date(v), _) => {
                out.extend_from_slice(&((v as u32) ^ (1 << 31)).to_be_bytes())
            }
            (ValueRef::Int64(v) | ValueRef::UnixtimeMicros(v), _) => {
                out.extend_from_slice(&((v as u64) ^ (1 << 63)).to_be_bytes())
            }
            (ValueRef::Decimal(v), DataType::Decimal32) => {
                out.extend_from_slice(&((v as i32 as u32) ^ (1 << 31)).to_be_bytes())
            }
            (ValueRef::Decimal(v), DataType::Decimal64) => {
                out.extend_from_slice(&((v as i64 as u64) ^ (1 << 63)).to_be_bytes())
            }
            (ValueRef::Decimal(v), _) => {
                out.extend_from_slice(&((v as u128) ^ (1 << 127)).to_be_bytes())
            }
            (other, _) => {
                return Err(kudu_client::Error::InvalidArgument(format!(
                    "a {} value cannot be part of a primary key",
                    other.kind()
                )))
            }
        }
    }
    Ok(())
}
