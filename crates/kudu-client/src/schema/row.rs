//! [`Row`]: a partial row that is cheap to build and to read.
//!
//! Layout (one allocation for the fixed part, one shared arena for
//! var-length data):
//!
//! ```text
//! buf:  | cell 0 | cell 1 | ... | cell n-1 | isset bitmap | null bitmap |
//!         each cell is DataType::size() bytes at Schema::cell_offset(i);
//!         STRING/BINARY/VARCHAR cells hold (u64 LE offset, u64 LE len)
//!         into `var`
//! var:  | bytes of var-length values, appended as they are set |
//! ```
//!
//! This mirrors the row-operations wire layout
//! (docs/kudu-protocol.md#row-operations), so encoding a row is mostly
//! `memcpy`. Setting a var-length column twice leaves the old bytes in the
//! arena until [`Row::clear`]; rows are short-lived, so that is cheaper than
//! compacting.

use std::fmt;

use super::cell::{bit, le, read_fixed, set_bit, typed_getters};
use super::column::ColumnSchema;
use super::table::{ColumnIndex, Schema};
use super::types::DataType;
use super::value::{check_date, encode_decimal, ValueRef};
use crate::{Error, Result};

/// A row of a [`Schema`] in which each column is unset, NULL or has a
/// value. Used for write operations, range bounds and routing.
///
/// Setters check the column's type (and DECIMAL precision, VARCHAR length,
/// DATE range) and return `Error::InvalidArgument` naming the column; they
/// return `&mut Self` so calls chain: `row.set_i32("k", 1)?.set_str("v", "x")?;`.
#[derive(Clone)]
pub struct Row {
    schema: Schema,
    buf: Vec<u8>,
    var: Vec<u8>,
}

impl Row {
    /// An empty row (every column unset).
    pub fn new(schema: &Schema) -> Row {
        Row {
            schema: schema.clone(),
            buf: vec![0; schema.row_size() + 2 * schema.bitmap_len()],
            var: Vec::new(),
        }
    }

    /// The row's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Unsets every column, keeping the allocations for reuse.
    pub fn clear(&mut self) {
        self.buf.fill(0);
        self.var.clear();
    }

    // ---- bitmaps -------------------------------------------------------

    pub(crate) fn isset_bitmap(&self) -> &[u8] {
        let start = self.schema.row_size();
        &self.buf[start..start + self.schema.bitmap_len()]
    }

    pub(crate) fn null_bitmap(&self) -> &[u8] {
        let start = self.schema.row_size() + self.schema.bitmap_len();
        &self.buf[start..start + self.schema.bitmap_len()]
    }

    fn mark(&mut self, i: usize, set: bool, null: bool) {
        let bm = self.schema.bitmap_len();
        let (isset, nulls) = self.buf[self.schema.row_size()..].split_at_mut(bm);
        set_bit(isset, i, set);
        set_bit(nulls, i, null);
    }

    fn is_set_at(&self, i: usize) -> bool {
        bit(self.isset_bitmap(), i)
    }

    fn is_null_at(&self, i: usize) -> bool {
        bit(self.null_bitmap(), i)
    }

    /// The raw fixed cell of column `i` (callers pass a valid index).
    pub(crate) fn cell(&self, i: usize) -> &[u8] {
        let off = self.schema.cell_offset(i);
        let len = self.schema.columns()[i].data_type().size();
        &self.buf[off..off + len]
    }

    /// The bytes of var-length column `i` (empty if unset or NULL).
    pub(crate) fn var_bytes(&self, i: usize) -> &[u8] {
        let cell = self.cell(i);
        let off = u64::from_le_bytes(le(cell)) as usize;
        let len = u64::from_le_bytes(le(&cell[8..])) as usize;
        self.var.get(off..off.saturating_add(len)).unwrap_or(&[])
    }

    // ---- setters -------------------------------------------------------

    fn resolve(
        &self,
        col: impl ColumnIndex,
        accepts: fn(DataType) -> bool,
        kind: &str,
    ) -> Result<usize> {
        let i = col.column_index(&self.schema)?;
        let c = &self.schema.columns()[i];
        if accepts(c.data_type()) {
            Ok(i)
        } else {
            Err(c.type_mismatch(kind))
        }
    }

    fn write_fixed(&mut self, i: usize, bytes: &[u8]) -> &mut Self {
        let off = self.schema.cell_offset(i);
        self.buf[off..off + bytes.len()].copy_from_slice(bytes);
        self.mark(i, true, false);
        self
    }

    fn write_var(&mut self, i: usize, bytes: &[u8]) -> &mut Self {
        let off = self.var.len() as u64;
        self.var.extend_from_slice(bytes);
        let mut cell = [0u8; 16];
        cell[..8].copy_from_slice(&off.to_le_bytes());
        cell[8..].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.write_fixed(i, &cell)
    }

    /// Sets a BOOL column.
    pub fn set_bool(&mut self, col: impl ColumnIndex, v: bool) -> Result<&mut Self> {
        let i = self.resolve(
            col,
            |t| t == DataType::Bool || t == DataType::IsDeleted,
            "bool",
        )?;
        Ok(self.write_fixed(i, &[u8::from(v)]))
    }
    /// Sets an INT8 column.
    pub fn set_i8(&mut self, col: impl ColumnIndex, v: i8) -> Result<&mut Self> {
        let i = self.resolve(col, |t| t == DataType::Int8, "i8")?;
        Ok(self.write_fixed(i, &v.to_le_bytes()))
    }
    /// Sets an INT16 column.
    pub fn set_i16(&mut self, col: impl ColumnIndex, v: i16) -> Result<&mut Self> {
        let i = self.resolve(col, |t| t == DataType::Int16, "i16")?;
        Ok(self.write_fixed(i, &v.to_le_bytes()))
    }
    /// Sets an INT32 column.
    pub fn set_i32(&mut self, col: impl ColumnIndex, v: i32) -> Result<&mut Self> {
        let i = self.resolve(col, |t| t == DataType::Int32, "i32")?;
        Ok(self.write_fixed(i, &v.to_le_bytes()))
    }
    /// Sets an INT64 column (or a UNIXTIME_MICROS column, which is an i64).
    pub fn set_i64(&mut self, col: impl ColumnIndex, v: i64) -> Result<&mut Self> {
        let i = self.resolve(
            col,
            |t| t == DataType::Int64 || t == DataType::UnixtimeMicros,
            "i64",
        )?;
        Ok(self.write_fixed(i, &v.to_le_bytes()))
    }
    /// Sets a FLOAT column.
    pub fn set_f32(&mut self, col: impl ColumnIndex, v: f32) -> Result<&mut Self> {
        let i = self.resolve(col, |t| t == DataType::Float, "f32")?;
        Ok(self.write_fixed(i, &v.to_le_bytes()))
    }
    /// Sets a DOUBLE column.
    pub fn set_f64(&mut self, col: impl ColumnIndex, v: f64) -> Result<&mut Self> {
        let i = self.resolve(col, |t| t == DataType::Double, "f64")?;
        Ok(self.write_fixed(i, &v.to_le_bytes()))
    }
    /// Sets a UNIXTIME_MICROS column (microseconds since the epoch, UTC).
    pub fn set_timestamp_micros(&mut self, col: impl ColumnIndex, v: i64) -> Result<&mut Self> {
        let i = self.resolve(col, |t| t == DataType::UnixtimeMicros, "timestamp")?;
        Ok(self.write_fixed(i, &v.to_le_bytes()))
    }
    /// Sets a DATE column (days since 1970-01-01, within 0001-01-01 ..=
    /// 9999-12-31).
    pub fn set_date(&mut self, col: impl ColumnIndex, days: i32) -> Result<&mut Self> {
        let i = self.resolve(col, |t| t == DataType::Date, "date")?;
        check_date(days)?;
        Ok(self.write_fixed(i, &days.to_le_bytes()))
    }
    /// Sets a DECIMAL column from an unscaled value and its scale. The
    /// scale must equal the column's (no silent rescaling) and the value
    /// must fit the column's precision.
    pub fn set_decimal(
        &mut self,
        col: impl ColumnIndex,
        unscaled: i128,
        scale: u8,
    ) -> Result<&mut Self> {
        let i = self.resolve(col, DataType::is_decimal, "decimal")?;
        let c = &self.schema.columns()[i];
        if c.scale() != scale {
            return Err(Error::InvalidArgument(format!(
                "column '{}' {} has scale {}, value has scale {scale}",
                c.name(),
                c.type_display(),
                c.scale()
            )));
        }
        self.write_decimal(i, unscaled)
    }

    fn write_decimal(&mut self, i: usize, unscaled: i128) -> Result<&mut Self> {
        let c = &self.schema.columns()[i];
        c.check_decimal(unscaled)?;
        let mut bytes = Vec::new();
        // Precision was checked, so the value fits the column's width.
        encode_decimal(unscaled, c.data_type(), &mut bytes)?;
        Ok(self.write_fixed(i, &bytes))
    }

    /// Sets a STRING or VARCHAR column (VARCHAR length is checked in
    /// characters).
    pub fn set_str(&mut self, col: impl ColumnIndex, v: &str) -> Result<&mut Self> {
        let i = self.resolve(
            col,
            |t| t == DataType::String || t == DataType::Varchar,
            "string",
        )?;
        self.schema.columns()[i].check_varchar(v)?;
        Ok(self.write_var(i, v.as_bytes()))
    }
    /// Sets a BINARY column.
    pub fn set_binary(&mut self, col: impl ColumnIndex, v: &[u8]) -> Result<&mut Self> {
        let i = self.resolve(col, |t| t == DataType::Binary, "binary")?;
        Ok(self.write_var(i, v))
    }
    /// Sets a nullable column to NULL.
    pub fn set_null(&mut self, col: impl ColumnIndex) -> Result<&mut Self> {
        let i = col.column_index(&self.schema)?;
        let c = &self.schema.columns()[i];
        if !c.is_nullable() {
            return Err(Error::InvalidArgument(format!(
                "column '{}' is not nullable",
                c.name()
            )));
        }
        self.mark(i, true, true);
        Ok(self)
    }
    /// Sets a column from a generic value (`Value`, `&Value`, `ValueRef`,
    /// `i32`, `&str`, ...), checked like the typed setters. DECIMAL values
    /// are unscaled with the column's scale.
    pub fn set<'v>(
        &mut self,
        col: impl ColumnIndex,
        value: impl Into<ValueRef<'v>>,
    ) -> Result<&mut Self> {
        let i = col.column_index(&self.schema)?;
        let value = value.into();
        let c: &ColumnSchema = &self.schema.columns()[i];
        c.check_value(value)?;
        Ok(match value {
            ValueRef::Null => {
                self.mark(i, true, true);
                self
            }
            ValueRef::Bool(v) => self.write_fixed(i, &[u8::from(v)]),
            ValueRef::Int8(v) => self.write_fixed(i, &v.to_le_bytes()),
            ValueRef::Int16(v) => self.write_fixed(i, &v.to_le_bytes()),
            ValueRef::Int32(v) | ValueRef::Date(v) => self.write_fixed(i, &v.to_le_bytes()),
            ValueRef::Int64(v) | ValueRef::UnixtimeMicros(v) => {
                self.write_fixed(i, &v.to_le_bytes())
            }
            ValueRef::Float(v) => self.write_fixed(i, &v.to_le_bytes()),
            ValueRef::Double(v) => self.write_fixed(i, &v.to_le_bytes()),
            ValueRef::Decimal(v) => return self.write_decimal(i, v),
            ValueRef::String(v) => self.write_var(i, v.as_bytes()),
            ValueRef::Binary(v) => self.write_var(i, v),
        })
    }
    /// Marks a column as not supplied.
    pub fn unset(&mut self, col: impl ColumnIndex) -> Result<&mut Self> {
        let i = col.column_index(&self.schema)?;
        self.mark(i, false, false);
        Ok(self)
    }

    /// Sets a raw cell from the wire (row-operations decoding). `cell` is
    /// the fixed cell; for var-length columns `var` is the value.
    pub(crate) fn set_raw(&mut self, i: usize, cell: &[u8], var: Option<&[u8]>) {
        match var {
            Some(v) => {
                self.write_var(i, v);
            }
            None => {
                self.write_fixed(i, cell);
            }
        }
    }

    /// Marks a column NULL without checks (row-operations decoding).
    pub(crate) fn set_null_raw(&mut self, i: usize) {
        self.mark(i, true, true);
    }

    // ---- getters -------------------------------------------------------

    /// Whether the column has been set (to a value or NULL).
    pub fn is_set(&self, col: impl ColumnIndex) -> Result<bool> {
        Ok(self.is_set_at(col.column_index(&self.schema)?))
    }

    /// Whether the column is set to NULL.
    pub fn is_null(&self, col: impl ColumnIndex) -> Result<bool> {
        Ok(self.is_null_at(col.column_index(&self.schema)?))
    }

    /// The column's value ([`ValueRef::Null`] for NULL); an error if unset.
    pub fn get(&self, col: impl ColumnIndex) -> Result<ValueRef<'_>> {
        let i = col.column_index(&self.schema)?;
        self.get_at(i)?.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "column '{}' is not set",
                self.schema.columns()[i].name()
            ))
        })
    }

    /// The column's value, or `None` if unset (valid index required).
    pub(crate) fn get_at(&self, i: usize) -> Result<Option<ValueRef<'_>>> {
        if !self.is_set_at(i) {
            return Ok(None);
        }
        if self.is_null_at(i) {
            return Ok(Some(ValueRef::Null));
        }
        let dt = self.schema.columns()[i].data_type();
        if let Some(v) = read_fixed(dt, self.cell(i)) {
            return Ok(Some(v));
        }
        let bytes = self.var_bytes(i);
        Ok(Some(match dt {
            DataType::Binary => ValueRef::Binary(bytes),
            _ => ValueRef::String(std::str::from_utf8(bytes).map_err(|e| {
                Error::InvalidArgument(format!(
                    "column '{}' holds invalid UTF-8: {e}",
                    self.schema.columns()[i].name()
                ))
            })?),
        }))
    }

    typed_getters!('_);

    /// Reads a BINARY cell (or the bytes of a STRING / VARCHAR cell).
    pub fn get_binary(&self, col: impl ColumnIndex) -> Result<&[u8]> {
        let i = col.column_index(&self.schema)?;
        let c = &self.schema.columns()[i];
        if !c.data_type().is_var_len() {
            return Err(c.type_mismatch("binary"));
        }
        match self.get_at(i)? {
            None => Err(Error::InvalidArgument(format!(
                "column '{}' is not set",
                c.name()
            ))),
            Some(ValueRef::Null) => Err(Error::InvalidArgument(format!(
                "column '{}' is NULL",
                c.name()
            ))),
            Some(_) => Ok(self.var_bytes(i)),
        }
    }

    /// The primary key for humans: `(k1=1, k2="a")`; unset columns show as
    /// `<unset>`. Used in row errors.
    pub fn key_string(&self) -> String {
        self.render(0..self.schema.num_key_columns())
    }

    fn render(&self, cols: std::ops::Range<usize>) -> String {
        let mut out = String::from("(");
        for i in cols {
            if out.len() > 1 {
                out.push_str(", ");
            }
            out.push_str(self.schema.columns()[i].name());
            out.push('=');
            match self.get_at(i) {
                Ok(Some(v)) => out.push_str(&v.to_string()),
                Ok(None) => out.push_str("<unset>"),
                Err(_) => out.push_str("<invalid>"),
            }
        }
        out.push(')');
        out
    }
}

impl Schema {
    /// An empty row of this schema (same as [`Row::new`]).
    pub fn new_row(&self) -> Row {
        Row::new(self)
    }
}

impl PartialEq for Row {
    /// Rows are equal when their schemas are equal and every column has the
    /// same set/NULL state and value (arena garbage is ignored).
    fn eq(&self, other: &Self) -> bool {
        self.schema == other.schema
            && (0..self.schema.len()).all(|i| match (self.get_at(i), other.get_at(i)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            })
    }
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Row{}", self.render(0..self.schema.len()))
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(0..self.schema.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ColumnSchema, ColumnSchemaBuilder, Value};

    fn schema() -> Schema {
        Schema::new(vec![
            ColumnSchema::builder("id", DataType::Int64)
                .key(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("name", DataType::String)
                .nullable(true)
                .build()
                .unwrap(),
            ColumnSchemaBuilder::decimal("price", 5, 2).build().unwrap(),
            ColumnSchema::builder("ts", DataType::UnixtimeMicros)
                .build()
                .unwrap(),
            ColumnSchema::builder("day", DataType::Date)
                .build()
                .unwrap(),
            ColumnSchemaBuilder::varchar("code", 2).build().unwrap(),
            ColumnSchema::builder("blob", DataType::Binary)
                .build()
                .unwrap(),
            ColumnSchema::builder("ok", DataType::Bool).build().unwrap(),
            ColumnSchema::builder("f", DataType::Float).build().unwrap(),
        ])
        .unwrap()
    }

    #[test]
    fn set_and_get_by_name_and_index() {
        let s = schema();
        let mut r = Row::new(&s);
        r.set_i64("id", 5)
            .unwrap()
            .set_str(1, "héllo")
            .unwrap()
            .set_decimal("price", 12345, 2)
            .unwrap()
            .set_timestamp_micros("ts", -7)
            .unwrap()
            .set_date("day", 19_000)
            .unwrap()
            .set_str("code", "ab")
            .unwrap()
            .set_binary("blob", &[0, 1, 2])
            .unwrap()
            .set_bool("ok", true)
            .unwrap()
            .set_f32("f", 1.5)
            .unwrap();
        assert_eq!(r.get_i64("id").unwrap(), 5);
        assert_eq!(r.get_i64(0).unwrap(), 5);
        assert_eq!(r.get_str("name").unwrap(), "héllo");
        assert_eq!(r.get_decimal("price").unwrap(), 12345);
        assert_eq!(r.get_timestamp_micros("ts").unwrap(), -7);
        assert_eq!(r.get_i64("ts").unwrap(), -7);
        assert_eq!(r.get_date("day").unwrap(), 19_000);
        assert_eq!(r.get_binary("blob").unwrap(), &[0, 1, 2]);
        assert!(r.get_bool("ok").unwrap());
        assert_eq!(r.get_f32("f").unwrap(), 1.5);
        assert_eq!(r.key_string(), "(id=5)");
        // Overwriting a var-length value.
        r.set_str("name", "x").unwrap();
        assert_eq!(r.get_str("name").unwrap(), "x");
        r.set_null("name").unwrap();
        assert!(r.is_null("name").unwrap());
        assert!(r.get("name").unwrap().is_null());
        assert!(r.get_str("name").is_err());
        r.unset("name").unwrap();
        assert!(!r.is_set("name").unwrap());
        assert!(r.get("name").is_err());
    }

    #[test]
    fn type_errors_name_column_and_types() {
        let s = schema();
        let mut r = Row::new(&s);
        let e = r.set_i32("id", 1).unwrap_err().to_string();
        assert!(
            e.contains("'id'") && e.contains("INT64") && e.contains("i32"),
            "{e}"
        );
        let e = r.set_null("id").unwrap_err().to_string();
        assert!(e.contains("not nullable"), "{e}");
        let e = r.set_decimal("price", 100_000, 2).unwrap_err().to_string();
        assert!(e.contains("DECIMAL(5, 2)"), "{e}");
        assert!(r.set_decimal("price", 1, 3).is_err());
        assert!(r.set_str("code", "abc").is_err());
        assert!(r.set_date("day", i32::MAX).is_err());
        assert!(r.set_i64("nope", 1).is_err());
        assert!(r.set_str("blob", "x").is_err());
        assert!(r.get_i64("id").unwrap_err().to_string().contains("not set"));
        r.set_i64("id", 1).unwrap();
        assert!(r.get_str("id").is_err());
    }

    #[test]
    fn generic_setter_and_equality() {
        let s = schema();
        let mut a = Row::new(&s);
        a.set("id", 7i64).unwrap();
        a.set("name", &Value::from("n")).unwrap();
        a.set("price", ValueRef::Decimal(-99_999)).unwrap();
        a.set("name", ValueRef::Null).unwrap();
        assert!(a.set("price", ValueRef::Decimal(100_000)).is_err());
        assert!(a.set("id", ValueRef::Null).is_err());
        let mut b = Row::new(&s);
        b.set_str("name", "garbage").unwrap();
        b.set_null("name").unwrap();
        b.set_i64("id", 7).unwrap();
        b.set_decimal("price", -99_999, 2).unwrap();
        assert_eq!(a, b);
        b.set_bool("ok", false).unwrap();
        assert_ne!(a, b);
        b.clear();
        assert!(!b.is_set("id").unwrap());
        assert_eq!(
            format!("{a:?}"),
            "Row(id=7, name=NULL, price=-99999, ts=<unset>, day=<unset>, code=<unset>, blob=<unset>, ok=<unset>, f=<unset>)"
        );
    }
}
