//! Decoding scan results (docs/kudu-protocol.md#decoding-scan-results) into
//! [`RowBatch`]: a projection schema plus the response's sidecar buffers, read
//! in place.
//!
//! Two wire formats:
//!
//! - **Row-wise** (`RowwiseRowBlockPB`): `num_rows` fixed-size rows of the
//!   projected cells, each followed by a null bitmap (set bit = NULL) when
//!   any projected column is nullable. Var-length cells are (u64 offset,
//!   u64 length) into the indirect-data sidecar.
//! - **Columnar** (`ColumnarRowBlockPB`): per column a data sidecar
//!   (packed values, or `num_rows + 1` u32 offsets for var-length columns),
//!   a var-length data sidecar and a non-null bitmap (set bit = non-NULL).
//!
//! Everything that could index out of bounds is validated once when the
//! batch is built, so accessors are cheap and never panic on hostile input;
//! malformed data gives `Error::Protocol`. The `addr` of those errors is
//! unknown here — the scanner may replace it with the server's address.

use bytes::Bytes;

use crate::pb;
use crate::schema::cell::{bit, le, read_fixed, typed_getters};
use crate::schema::{ColumnIndex, DataType, Schema, Value, ValueRef};
use crate::{Error, Result};

fn malformed(msg: impl std::fmt::Display) -> Error {
    Error::Protocol {
        addr: "unknown peer".into(),
        message: format!("malformed scan result: {msg}"),
    }
}

/// Rows returned by one scan response, in projection order.
///
/// Holds the sidecars as [`Bytes`] (reference-counted, no copy), so a batch
/// is `Send + 'static` and can cross channels.
#[derive(Debug, Clone)]
pub struct RowBatch {
    schema: Schema,
    num_rows: usize,
    data: Data,
    /// Where the table's key columns are in the projection, for
    /// [`RowView::encoded_primary_key`] (set by the scanner).
    key_columns: KeyColumns,
}

/// Indexes of the table's primary-key columns (in key order) within a
/// projection, or why there are none: the name of a key column the
/// projection lacks, or that the batch was built without a table.
pub(crate) type KeyColumns = std::sync::Arc<std::result::Result<Vec<usize>, String>>;

fn no_key_columns() -> KeyColumns {
    std::sync::Arc::new(Err(
        "the batch was not read by a scanner of a table, so its key is unknown".into(),
    ))
}

#[derive(Debug, Clone)]
enum Data {
    RowWise {
        rows: Bytes,
        indirect: Bytes,
        row_size: usize,
        /// Cell offset of each column within a row.
        offsets: Vec<usize>,
        /// Offset of the null bitmap within a row, if present.
        null_bitmap: Option<usize>,
    },
    Columnar {
        columns: Vec<ColumnData>,
    },
}

#[derive(Debug, Clone)]
struct ColumnData {
    data: Bytes,
    varlen: Bytes,
    non_null: Option<Bytes>,
}

fn sidecar(sidecars: &[Bytes], idx: Option<i32>, what: &str) -> Result<Option<Bytes>> {
    match idx {
        None => Ok(None),
        Some(i) => usize::try_from(i)
            .ok()
            .and_then(|i| sidecars.get(i))
            .cloned()
            .map(Some)
            .ok_or_else(|| {
                malformed(format!(
                    "{what} sidecar {i} does not exist ({} sidecars)",
                    sidecars.len()
                ))
            }),
    }
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(le(buf.get(at..).unwrap_or_default()))
}

fn u32_at(buf: &[u8], at: usize) -> usize {
    u32::from_le_bytes(le(buf.get(at..).unwrap_or_default())) as usize
}

/// Resolves the row-wise (u64 offset, u64 length) cell at `at` in `rows`
/// against the indirect data.
fn indirect_slice<'a>(indirect: &'a [u8], rows: &[u8], at: usize) -> Result<&'a [u8]> {
    let (off, len) = (u64_at(rows, at), u64_at(rows, at + 8));
    usize::try_from(off)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(o, l)| indirect.get(o..o.checked_add(l)?))
        .ok_or_else(|| malformed(format!("indirect pointer ({off}, {len}) out of range")))
}

impl RowBatch {
    /// A batch with no rows (e.g. a response without data).
    pub fn empty(schema: &Schema) -> RowBatch {
        RowBatch {
            schema: schema.clone(),
            num_rows: 0,
            data: Data::Columnar {
                columns: Vec::new(),
            },
            key_columns: no_key_columns(),
        }
    }

    /// Decodes a row-wise block; `sidecars` are the response's sidecars in
    /// order.
    pub(crate) fn from_rowwise(
        schema: &Schema,
        block: &pb::RowwiseRowBlockPb,
        sidecars: &[Bytes],
    ) -> Result<RowBatch> {
        Self::from_rowwise_with_padding(schema, block, sidecars, false)
    }

    /// Like [`from_rowwise`](Self::from_rowwise), for scans that requested
    /// `PAD_UNIX_TIME_MICROS_TO_16_BYTES`: UNIXTIME_MICROS cells are then 16
    /// bytes, the value in the first 8. (An Impala feature; this client does not
    /// request it.)
    pub(crate) fn from_rowwise_with_padding(
        schema: &Schema,
        block: &pb::RowwiseRowBlockPb,
        sidecars: &[Bytes],
        pad_unixtime_micros: bool,
    ) -> Result<RowBatch> {
        let num_rows = usize::try_from(block.num_rows.unwrap_or(0))
            .map_err(|_| malformed(format!("negative num_rows {:?}", block.num_rows)))?;
        let mut offsets = Vec::with_capacity(schema.len());
        let mut row_size = 0usize;
        for c in schema.columns() {
            offsets.push(row_size);
            row_size += match c.data_type() {
                DataType::UnixtimeMicros if pad_unixtime_micros => 16,
                t => t.size(),
            };
        }
        let null_bitmap = schema.has_nullable_columns().then_some(row_size);
        if null_bitmap.is_some() {
            row_size += schema.bitmap_len();
        }
        let rows = sidecar(sidecars, block.rows_sidecar, "rows")?.unwrap_or_default();
        let indirect =
            sidecar(sidecars, block.indirect_data_sidecar, "indirect data")?.unwrap_or_default();
        let expected = num_rows
            .checked_mul(row_size)
            .ok_or_else(|| malformed(format!("{num_rows} rows of {row_size} bytes overflow")))?;
        if rows.len() != expected {
            return Err(malformed(format!(
                "rows sidecar has {} bytes, expected {num_rows} rows × {row_size} bytes",
                rows.len()
            )));
        }
        // Validate every var-length pointer once so accessors can slice.
        let var_cols = schema.var_len_columns();
        if !var_cols.is_empty() {
            for r in 0..num_rows {
                let row = &rows[r * row_size..(r + 1) * row_size];
                for &c in var_cols {
                    if null_bitmap.is_some_and(|nb| bit(&row[nb..], c)) {
                        continue;
                    }
                    let (off, len) = (u64_at(row, offsets[c]), u64_at(row, offsets[c] + 8));
                    let in_bounds = off
                        .checked_add(len)
                        .is_some_and(|end| end <= indirect.len() as u64);
                    if !in_bounds {
                        return Err(malformed(format!(
                            "row {r} column '{}' points at ({off}, {len}) outside {} bytes of indirect data",
                            schema.columns()[c].name(),
                            indirect.len()
                        )));
                    }
                }
            }
        }
        Ok(RowBatch {
            schema: schema.clone(),
            num_rows,
            data: Data::RowWise {
                rows,
                indirect,
                row_size,
                offsets,
                null_bitmap,
            },
            key_columns: no_key_columns(),
        })
    }

    /// Decodes a columnar block (scans with `COLUMNAR_LAYOUT`).
    pub(crate) fn from_columnar(
        schema: &Schema,
        block: &pb::ColumnarRowBlockPb,
        sidecars: &[Bytes],
    ) -> Result<RowBatch> {
        let num_rows = block
            .num_rows
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= u32::MAX as usize)
            .ok_or_else(|| malformed(format!("bad num_rows {:?}", block.num_rows)))?;
        if block.columns.len() != schema.len() {
            return Err(malformed(format!(
                "{} columns for a projection of {}",
                block.columns.len(),
                schema.len()
            )));
        }
        let mut columns = Vec::with_capacity(schema.len());
        for (c, col) in schema.columns().iter().zip(&block.columns) {
            let name = c.name();
            let data = sidecar(sidecars, col.data_sidecar, "data")?.unwrap_or_default();
            let varlen = sidecar(sidecars, col.varlen_data_sidecar, "varlen")?.unwrap_or_default();
            let non_null = sidecar(sidecars, col.non_null_bitmap_sidecar, "non-null bitmap")?;
            if let Some(bm) = &non_null {
                if bm.len() < num_rows.div_ceil(8) {
                    return Err(malformed(format!(
                        "column '{name}' non-null bitmap has {} bytes for {num_rows} rows",
                        bm.len()
                    )));
                }
            }
            if c.data_type().is_var_len() {
                // num_rows + 1 offsets; an empty block may omit them.
                if !(num_rows == 0 && data.is_empty()) {
                    if data.len() != (num_rows + 1) * 4 {
                        return Err(malformed(format!(
                            "column '{name}' has {} offset bytes for {num_rows} rows",
                            data.len()
                        )));
                    }
                    let mut prev = u32_at(&data, 0);
                    for r in 1..=num_rows {
                        let next = u32_at(&data, r * 4);
                        if next < prev {
                            return Err(malformed(format!(
                                "column '{name}' offsets decrease at row {r}"
                            )));
                        }
                        prev = next;
                    }
                    if prev > varlen.len() {
                        return Err(malformed(format!(
                            "column '{name}' offsets run past {} bytes of var-length data",
                            varlen.len()
                        )));
                    }
                }
            } else if data.len() != num_rows * c.data_type().size() {
                return Err(malformed(format!(
                    "column '{name}' has {} data bytes, expected {num_rows} × {}",
                    data.len(),
                    c.data_type().size()
                )));
            }
            columns.push(ColumnData {
                data,
                varlen,
                non_null,
            });
        }
        Ok(RowBatch {
            schema: schema.clone(),
            num_rows,
            data: Data::Columnar { columns },
            key_columns: no_key_columns(),
        })
    }

    /// The batch with the positions of the table's key columns in its
    /// projection.
    pub(crate) fn with_key_columns(mut self, key_columns: KeyColumns) -> RowBatch {
        self.key_columns = key_columns;
        self
    }

    /// The projection schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.num_rows
    }
    /// Number of rows (alias of [`num_rows`](Self::num_rows)).
    pub fn len(&self) -> usize {
        self.num_rows
    }
    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.num_rows == 0
    }

    /// Bytes of row data the batch holds (cells plus var-length data), as
    /// received: what throughput metrics count.
    pub fn byte_size(&self) -> usize {
        match &self.data {
            Data::RowWise { rows, indirect, .. } => rows.len() + indirect.len(),
            Data::Columnar { columns } => columns
                .iter()
                .map(|c| c.data.len() + c.varlen.len() + c.non_null.as_ref().map_or(0, |n| n.len()))
                .sum(),
        }
    }

    /// Row `i`.
    ///
    /// # Panics
    /// If `i >= num_rows()`, like slice indexing; use [`get_row`](Self::get_row)
    /// or [`rows`](Self::rows) to avoid that.
    pub fn row(&self, i: usize) -> RowView<'_> {
        assert!(i < self.num_rows, "row {i} of {}", self.num_rows);
        RowView {
            batch: self,
            row: i,
        }
    }

    /// Row `i`, if it exists.
    pub fn get_row(&self, i: usize) -> Option<RowView<'_>> {
        (i < self.num_rows).then_some(RowView {
            batch: self,
            row: i,
        })
    }

    /// Iterates over the rows.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = RowView<'_>> + '_ {
        (0..self.num_rows).map(move |row| RowView { batch: self, row })
    }

    /// Copies every row into owned values (tests, debugging).
    pub fn to_values(&self) -> Result<Vec<Vec<Value>>> {
        self.rows().map(|r| r.to_values()).collect()
    }

    fn is_null_at(&self, row: usize, col: usize) -> bool {
        if !self.schema.columns()[col].is_nullable() {
            return false;
        }
        match &self.data {
            Data::RowWise {
                rows,
                row_size,
                null_bitmap: Some(nb),
                ..
            } => bit(&rows[row * row_size + nb..], col),
            Data::RowWise { .. } => false,
            Data::Columnar { columns } => columns[col]
                .non_null
                .as_ref()
                .is_some_and(|bm| !bit(bm, row)),
        }
    }

    /// The cell's bytes as the server holds them in memory (fixed-width:
    /// the little-endian value; var-length: the data without a length), or
    /// `None` for NULL. Indexes are valid (checked by callers); bytes the
    /// constructor validated are sliced defensively anyway.
    fn raw_cell_at(&self, row: usize, col: usize) -> Option<&[u8]> {
        if self.is_null_at(row, col) {
            return None;
        }
        let dt = self.schema.columns()[col].data_type();
        let width = dt.size();
        Some(match &self.data {
            Data::RowWise {
                rows,
                indirect,
                row_size,
                offsets,
                ..
            } => {
                let at = row * row_size + offsets[col];
                if dt.is_var_len() {
                    indirect_slice(indirect, rows, at).unwrap_or_default()
                } else {
                    rows.get(at..at + width).unwrap_or_default()
                }
            }
            Data::Columnar { columns } => {
                let cd = &columns[col];
                if dt.is_var_len() {
                    let (start, end) = (u32_at(&cd.data, row * 4), u32_at(&cd.data, row * 4 + 4));
                    cd.varlen.get(start..end).unwrap_or_default()
                } else {
                    let at = row * width;
                    cd.data.get(at..at + width).unwrap_or_default()
                }
            }
        })
    }

    /// The value at (`row`, `col`); indexes are valid (checked by callers).
    fn value_at(&self, row: usize, col: usize) -> Result<ValueRef<'_>> {
        if self.is_null_at(row, col) {
            return Ok(ValueRef::Null);
        }
        let c = &self.schema.columns()[col];
        let dt = c.data_type();
        let width = dt.size();
        let bytes: &[u8] = match &self.data {
            Data::RowWise {
                rows,
                indirect,
                row_size,
                offsets,
                ..
            } => {
                let at = row * row_size + offsets[col];
                if !dt.is_var_len() {
                    return Ok(read_fixed(dt, &rows[at..at + width]).unwrap_or(ValueRef::Null));
                }
                // Validated in the constructor; checked again, cheaply, so
                // this stays panic-free whatever the input.
                indirect_slice(indirect, rows, at)?
            }
            Data::Columnar { columns } => {
                let cd = &columns[col];
                if !dt.is_var_len() {
                    let at = row * width;
                    return Ok(read_fixed(dt, &cd.data[at..at + width]).unwrap_or(ValueRef::Null));
                }
                let (start, end) = (u32_at(&cd.data, row * 4), u32_at(&cd.data, row * 4 + 4));
                cd.varlen
                    .get(start..end)
                    .ok_or_else(|| malformed("var-length offsets out of range"))?
            }
        };
        Ok(match dt {
            DataType::Binary => ValueRef::Binary(bytes),
            _ => ValueRef::String(std::str::from_utf8(bytes).map_err(|e| {
                malformed(format!("column '{}' row {row} is not UTF-8: {e}", c.name()))
            })?),
        })
    }
}

/// A borrowed view of one row of a [`RowBatch`]; accessors read the
/// sidecar bytes in place.
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    batch: &'a RowBatch,
    row: usize,
}

impl<'a> RowView<'a> {
    /// The projection schema.
    pub fn schema(&self) -> &'a Schema {
        &self.batch.schema
    }

    /// This row's index in the batch.
    pub fn index(&self) -> usize {
        self.row
    }

    /// Whether the column is NULL.
    pub fn is_null(&self, col: impl ColumnIndex) -> Result<bool> {
        let i = col.column_index(&self.batch.schema)?;
        Ok(self.batch.is_null_at(self.row, i))
    }

    /// The column's value ([`ValueRef::Null`] for NULL). STRING/VARCHAR
    /// bytes are UTF-8-checked here; invalid data is `Error::Protocol`.
    pub fn get(&self, col: impl ColumnIndex) -> Result<ValueRef<'a>> {
        let i = col.column_index(&self.batch.schema)?;
        self.batch.value_at(self.row, i)
    }

    typed_getters!('a);

    /// Reads a BINARY cell (or the raw bytes of a STRING / VARCHAR cell,
    /// without UTF-8 checking).
    pub fn get_binary(&self, col: impl ColumnIndex) -> Result<&'a [u8]> {
        let i = col.column_index(&self.batch.schema)?;
        let c = &self.batch.schema.columns()[i];
        if !c.data_type().is_var_len() {
            return Err(c.type_mismatch("binary"));
        }
        if self.batch.is_null_at(self.row, i) {
            return Err(Error::InvalidArgument(format!(
                "column '{}' is NULL",
                c.name()
            )));
        }
        // Read bytes directly so BINARY access to STRING skips UTF-8 checks.
        let b = self.batch;
        match &b.data {
            Data::RowWise {
                rows,
                indirect,
                row_size,
                offsets,
                ..
            } => indirect_slice(indirect, rows, self.row * row_size + offsets[i]),
            Data::Columnar { columns } => {
                let cd = &columns[i];
                let (s, e) = (
                    u32_at(&cd.data, self.row * 4),
                    u32_at(&cd.data, self.row * 4 + 4),
                );
                cd.varlen
                    .get(s..e)
                    .ok_or_else(|| malformed("var-length offsets out of range"))
            }
        }
    }

    /// For diff scans: whether the IS_DELETED virtual column is true. Rows
    /// of projections without that column are never deleted.
    pub fn is_deleted(&self) -> bool {
        match self.batch.schema.is_deleted_index() {
            Some(i) => matches!(self.batch.value_at(self.row, i), Ok(ValueRef::Bool(true))),
            None => false,
        }
    }

    /// The cell's in-memory bytes, `None` for NULL (see
    /// `RowBatch::raw_cell_at`); `col` must be a valid index.
    pub(crate) fn raw_cell(&self, col: usize) -> Option<&'a [u8]> {
        self.batch.raw_cell_at(self.row, col)
    }

    /// The value of column `col` (a valid index).
    pub(crate) fn value_at(&self, col: usize) -> Result<ValueRef<'a>> {
        self.batch.value_at(self.row, col)
    }

    /// Positions of the table's key columns in the projection, or why
    /// they are unknown.
    pub(crate) fn key_columns(&self) -> &'a std::result::Result<Vec<usize>, String> {
        &self.batch.key_columns
    }

    /// Copies the row into owned values, in projection order.
    pub fn to_values(&self) -> Result<Vec<Value>> {
        (0..self.batch.schema.len())
            .map(|i| self.batch.value_at(self.row, i).map(ValueRef::into_owned))
            .collect()
    }
}

mod deletions;
#[cfg(test)]
mod tests;
