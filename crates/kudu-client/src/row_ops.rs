//! Row operations: the op-type enum and the `RowOperationsPB` codec
//! (docs/kudu-protocol.md#row-operations). A module of its own below `write`,
//! `partition` and `master`, which all encode rows (writes, range bounds, split
//! rows).
//!
//! Each encoded row is, end to end with no padding:
//!
//! ```text
//! u8            operation type (OpType wire number)
//! isset bitmap  ceil(ncols/8) bytes; bit i ⇔ column i supplied
//! null bitmap   ceil(ncols/8) bytes, only if the schema has a nullable
//!               column; bit i ⇔ column i is NULL
//! cells         for each set, non-NULL column in schema order: its LE cell;
//!               STRING/BINARY/VARCHAR as u64 LE offset + u64 LE length
//!               into `indirect_data`
//! ```
//!
//! [`Row`] already stores cells in this layout, so encoding is a copy of
//! the bitmaps and cells plus rebasing var-length offsets.

use crate::pb;
use crate::schema::cell::{bit, set_bit};
use crate::schema::{DataType, Row, Schema};
use crate::{Error, Result};

/// `RowOperationsPB.Type`: what to do with a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum OpType {
    /// Insert; fails with ALREADY_PRESENT if the key exists.
    Insert = 1,
    /// Update; fails with NOT_FOUND if the key is missing.
    Update = 2,
    /// Delete (key columns only); fails with NOT_FOUND if missing.
    Delete = 3,
    /// CreateTable split row (legacy range split).
    SplitRow = 4,
    /// Insert or overwrite the supplied columns.
    Upsert = 5,
    /// Inclusive lower bound of a range partition.
    RangeLowerBound = 6,
    /// Exclusive upper bound of a range partition.
    RangeUpperBound = 7,
    /// Exclusive lower bound of a range partition.
    ExclusiveRangeLowerBound = 8,
    /// Inclusive upper bound of a range partition.
    InclusiveRangeUpperBound = 9,
    /// Insert that skips existing keys (1.12+/1.14+, master feature 7).
    InsertIgnore = 10,
    /// Update that skips missing keys (1.14+, master feature 7).
    UpdateIgnore = 11,
    /// Delete that skips missing keys (1.14+, master feature 7).
    DeleteIgnore = 12,
    /// Upsert that ignores writes to immutable columns (1.17+, feature 9).
    UpsertIgnore = 13,
}

impl OpType {
    /// The wire number.
    pub fn to_wire(self) -> u8 {
        self as u8
    }

    /// Maps a wire number; 0 (UNKNOWN) and unknown numbers give `None`.
    pub fn from_wire(v: u8) -> Option<OpType> {
        Some(match v {
            1 => OpType::Insert,
            2 => OpType::Update,
            3 => OpType::Delete,
            4 => OpType::SplitRow,
            5 => OpType::Upsert,
            6 => OpType::RangeLowerBound,
            7 => OpType::RangeUpperBound,
            8 => OpType::ExclusiveRangeLowerBound,
            9 => OpType::InclusiveRangeUpperBound,
            10 => OpType::InsertIgnore,
            11 => OpType::UpdateIgnore,
            12 => OpType::DeleteIgnore,
            13 => OpType::UpsertIgnore,
            _ => return None,
        })
    }

    /// The upper-case wire name (`INSERT`, `DELETE_IGNORE`, ...), used in
    /// row errors.
    pub fn name(self) -> &'static str {
        self.to_pb().as_str_name()
    }

    /// The generated protobuf enum value.
    pub(crate) fn to_pb(self) -> pb::row_operations_pb::Type {
        use pb::row_operations_pb::Type as T;
        match self {
            OpType::Insert => T::Insert,
            OpType::Update => T::Update,
            OpType::Delete => T::Delete,
            OpType::SplitRow => T::SplitRow,
            OpType::Upsert => T::Upsert,
            OpType::RangeLowerBound => T::RangeLowerBound,
            OpType::RangeUpperBound => T::RangeUpperBound,
            OpType::ExclusiveRangeLowerBound => T::ExclusiveRangeLowerBound,
            OpType::InclusiveRangeUpperBound => T::InclusiveRangeUpperBound,
            OpType::InsertIgnore => T::InsertIgnore,
            OpType::UpdateIgnore => T::UpdateIgnore,
            OpType::DeleteIgnore => T::DeleteIgnore,
            OpType::UpsertIgnore => T::UpsertIgnore,
        }
    }

    /// Whether this is a data operation (as opposed to a range bound or
    /// split row of CreateTable / AlterTable).
    pub fn is_data_op(self) -> bool {
        !matches!(
            self,
            OpType::SplitRow
                | OpType::RangeLowerBound
                | OpType::RangeUpperBound
                | OpType::ExclusiveRangeLowerBound
                | OpType::InclusiveRangeUpperBound
        )
    }

    /// Whether only key columns are sent (DELETE, DELETE_IGNORE).
    pub fn is_delete(self) -> bool {
        matches!(self, OpType::Delete | OpType::DeleteIgnore)
    }

    /// The `MasterFeatures` flag a server must support for this op, if any
    /// (7 IGNORE_OPERATIONS, 9 UPSERT_IGNORE;
    /// docs/kudu-protocol.md#operation-kinds).
    pub fn required_master_feature(self) -> Option<u32> {
        match self {
            OpType::InsertIgnore | OpType::UpdateIgnore | OpType::DeleteIgnore => Some(7),
            OpType::UpsertIgnore => Some(9),
            _ => None,
        }
    }
}

impl std::fmt::Display for OpType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A position in an [`OpsEncoder`]'s output (see [`OpsEncoder::mark`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EncoderMark {
    rows: usize,
    indirect: usize,
    count: usize,
}

/// Incremental `RowOperationsPB` encoder, so a request builder can watch
/// the encoded size while it adds rows.
#[derive(Debug, Clone)]
pub(crate) struct OpsEncoder {
    schema: Schema,
    rows: Vec<u8>,
    indirect: Vec<u8>,
    count: usize,
    /// Scratch bitmaps reused across rows.
    isset: Vec<u8>,
    nulls: Vec<u8>,
}

impl OpsEncoder {
    /// An encoder for rows of `schema` (the schema sent in the request).
    pub(crate) fn new(schema: &Schema) -> Self {
        OpsEncoder {
            schema: schema.clone(),
            rows: Vec::new(),
            indirect: Vec::new(),
            count: 0,
            isset: vec![0; schema.bitmap_len()],
            nulls: vec![0; schema.bitmap_len()],
        }
    }

    /// Makes room for about `bytes` more encoded bytes (growing the row
    /// buffer step by step copied it several times per request).
    pub(crate) fn reserve(&mut self, bytes: usize) {
        self.rows.reserve(bytes);
    }

    /// Bytes of `rows` plus `indirect_data` so far.
    pub(crate) fn encoded_size(&self) -> usize {
        self.rows.len() + self.indirect.len()
    }

    /// Rows encoded so far.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Where the next row starts, for [`truncate`](Self::truncate).
    pub(crate) fn mark(&self) -> EncoderMark {
        EncoderMark {
            rows: self.rows.len(),
            indirect: self.indirect.len(),
            count: self.count,
        }
    }

    /// Drops every row pushed after `mark`.
    pub(crate) fn truncate(&mut self, mark: EncoderMark) {
        self.rows.truncate(mark.rows);
        self.indirect.truncate(mark.indirect);
        self.count = self.count.min(mark.count);
    }

    /// Appends one operation. Checks that the row uses this schema and,
    /// for data operations, that every key column is set (and that INSERT
    /// leaves an auto-incrementing column unset). Deletes keep only the key
    /// columns. On error nothing is appended.
    pub(crate) fn push(&mut self, op: OpType, row: &Row) -> Result<()> {
        let schema = &self.schema;
        if row.schema() != schema {
            return Err(Error::InvalidArgument(format!(
                "{op} row has schema {} but the batch uses {}",
                row.schema(),
                schema
            )));
        }
        self.isset.copy_from_slice(row.isset_bitmap());
        self.nulls.copy_from_slice(row.null_bitmap());
        if op.is_data_op() {
            check_key(schema, op, row, &self.isset)?;
        }
        if op.is_delete() {
            for i in schema.num_key_columns()..schema.len() {
                set_bit(&mut self.isset, i, false);
            }
        }
        // A NULL bit is only meaningful for a set column.
        for (n, s) in self.nulls.iter_mut().zip(&self.isset) {
            *n &= *s;
        }

        self.rows.push(op.to_wire());
        self.rows.extend_from_slice(&self.isset);
        if schema.has_nullable_columns() {
            self.rows.extend_from_slice(&self.nulls);
        }
        for (i, col) in schema.columns().iter().enumerate() {
            if !bit(&self.isset, i) || bit(&self.nulls, i) {
                continue;
            }
            if col.data_type().is_var_len() {
                let value = row.var_bytes(i);
                self.rows
                    .extend_from_slice(&(self.indirect.len() as u64).to_le_bytes());
                self.rows
                    .extend_from_slice(&(value.len() as u64).to_le_bytes());
                self.indirect.extend_from_slice(value);
            } else {
                self.rows.extend_from_slice(row.cell(i));
            }
        }
        self.count += 1;
        Ok(())
    }

    /// The finished message. `indirect_data` is present only when some
    /// var-length value was written.
    pub(crate) fn finish(self) -> pb::RowOperationsPb {
        pb::RowOperationsPb {
            rows: Some(self.rows),
            indirect_data: (!self.indirect.is_empty()).then_some(self.indirect),
        }
    }
}

fn check_key(schema: &Schema, op: OpType, row: &Row, isset: &[u8]) -> Result<()> {
    let inserting = matches!(op, OpType::Insert | OpType::InsertIgnore);
    for (i, col) in schema.key_columns().iter().enumerate() {
        let set = bit(isset, i);
        if col.is_auto_incrementing() && inserting {
            if set {
                return Err(Error::InvalidArgument(format!(
                    "{op} must not set auto-incrementing column '{}'; the server fills it",
                    col.name()
                )));
            }
        } else if !set {
            return Err(Error::InvalidArgument(format!(
                "{op} {}: primary key column '{}' is not set",
                row.key_string(),
                col.name()
            )));
        }
    }
    Ok(())
}

/// Encodes a batch of operations against `schema` into one
/// `RowOperationsPB` (the write request's `row_operations`, or CreateTable
/// range bounds).
pub(crate) fn encode(schema: &Schema, ops: &[(OpType, &Row)]) -> Result<pb::RowOperationsPb> {
    let mut enc = OpsEncoder::new(schema);
    for (op, row) in ops {
        enc.push(*op, row)?;
    }
    Ok(enc.finish())
}

fn malformed(msg: impl std::fmt::Display) -> Error {
    Error::Protocol {
        addr: "unknown peer".into(),
        message: format!("malformed row operations: {msg}"),
    }
}

/// Decodes a `RowOperationsPB` encoded against `schema` (the inverse of
/// [`encode`]; used for range bounds read from the master, and by test
/// servers). Malformed input gives `Error::Protocol`.
pub(crate) fn decode(schema: &Schema, ops: &pb::RowOperationsPb) -> Result<Vec<(OpType, Row)>> {
    let rows = ops.rows.as_deref().unwrap_or_default();
    let indirect = ops.indirect_data.as_deref().unwrap_or_default();
    let bm = schema.bitmap_len();
    let mut out = Vec::new();
    let mut cur = Cursor { buf: rows, pos: 0 };
    while !cur.at_end() {
        let op_byte = cur.take(1, "operation type")?[0];
        let op = OpType::from_wire(op_byte)
            .ok_or_else(|| malformed(format!("unknown operation type {op_byte}")))?;
        let isset = cur.take(bm, "isset bitmap")?;
        let nulls = if schema.has_nullable_columns() {
            cur.take(bm, "null bitmap")?
        } else {
            &[]
        };
        let mut row = Row::new(schema);
        for (i, col) in schema.columns().iter().enumerate() {
            if !bit(isset, i) {
                continue;
            }
            if bit(nulls, i) {
                if !col.is_nullable() {
                    return Err(malformed(format!(
                        "NULL in non-nullable column '{}'",
                        col.name()
                    )));
                }
                row.set_null_raw(i);
                continue;
            }
            let cell = cur.take(col.data_type().size(), "cell")?;
            if col.data_type().is_var_len() {
                let value = var_slice(cell, indirect)?;
                if col.data_type() != DataType::Binary && std::str::from_utf8(value).is_err() {
                    return Err(malformed(format!("column '{}' is not UTF-8", col.name())));
                }
                row.set_raw(i, cell, Some(value));
            } else {
                row.set_raw(i, cell, None);
            }
        }
        out.push((op, row));
    }
    Ok(out)
}

/// Reads consecutive pieces of the `rows` buffer with bounds checks.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let start = self.pos;
        let end = start
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| malformed(format!("truncated {what} at byte {start}")))?;
        self.pos = end;
        Ok(&self.buf[start..end])
    }
}

/// Resolves a 16-byte (offset, length) cell against `indirect`.
fn var_slice<'a>(cell: &[u8], indirect: &'a [u8]) -> Result<&'a [u8]> {
    let mut off = [0u8; 8];
    let mut len = [0u8; 8];
    off.copy_from_slice(&cell[..8]);
    len.copy_from_slice(&cell[8..16]);
    let (off, len) = (u64::from_le_bytes(off), u64::from_le_bytes(len));
    usize::try_from(off)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(o, l)| indirect.get(o..o.checked_add(l)?))
        .ok_or_else(|| {
            malformed(format!(
                "indirect pointer ({off}, {len}) outside {} bytes",
                indirect.len()
            ))
        })
}

#[cfg(test)]
mod tests;
