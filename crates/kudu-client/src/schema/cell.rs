//! Low-level helpers shared by rows, row operations and scan decoding:
//! LSB-first bitmaps (docs/kudu-protocol.md#bitmaps) and reading fixed-width
//! little-endian cells (docs/kudu-protocol.md#types-and-cells).

use super::types::DataType;
use super::value::ValueRef;

/// Whether bit `i` is set in an LSB-first bitmap; out-of-range bits read
/// as unset.
#[inline]
pub(crate) fn bit(bitmap: &[u8], i: usize) -> bool {
    bitmap.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0)
}

/// Sets or clears bit `i` (ignored if out of range).
#[inline]
pub(crate) fn set_bit(bitmap: &mut [u8], i: usize, on: bool) {
    if let Some(b) = bitmap.get_mut(i / 8) {
        if on {
            *b |= 1 << (i % 8);
        } else {
            *b &= !(1 << (i % 8));
        }
    }
}

/// Reads `N` bytes at the start of `cell` (shorter input reads as zeros,
/// which callers prevent by validating lengths up front).
#[inline]
pub(crate) fn le<const N: usize>(cell: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = cell.len().min(N);
    out[..n].copy_from_slice(&cell[..n]);
    out
}

/// Decodes a fixed-width cell of `data_type`. Var-length types return
/// `None` (their cells hold pointers that only the caller can resolve).
#[inline]
pub(crate) fn read_fixed(data_type: DataType, cell: &[u8]) -> Option<ValueRef<'static>> {
    Some(match data_type {
        DataType::Bool | DataType::IsDeleted => ValueRef::Bool(le::<1>(cell)[0] != 0),
        DataType::Int8 => ValueRef::Int8(i8::from_le_bytes(le(cell))),
        DataType::Int16 => ValueRef::Int16(i16::from_le_bytes(le(cell))),
        DataType::Int32 => ValueRef::Int32(i32::from_le_bytes(le(cell))),
        DataType::Int64 => ValueRef::Int64(i64::from_le_bytes(le(cell))),
        DataType::Float => ValueRef::Float(f32::from_le_bytes(le(cell))),
        DataType::Double => ValueRef::Double(f64::from_le_bytes(le(cell))),
        DataType::Decimal32 => ValueRef::Decimal(i32::from_le_bytes(le(cell)).into()),
        DataType::Decimal64 => ValueRef::Decimal(i64::from_le_bytes(le(cell)).into()),
        DataType::Decimal128 => ValueRef::Decimal(i128::from_le_bytes(le(cell))),
        DataType::UnixtimeMicros => ValueRef::UnixtimeMicros(i64::from_le_bytes(le(cell))),
        DataType::Date => ValueRef::Date(i32::from_le_bytes(le(cell))),
        DataType::String | DataType::Binary | DataType::Varchar => return None,
    })
}

/// Generates the typed getters shared by [`Row`](super::Row) and scan
/// [`RowView`](crate::scan::RowView). The implementing type needs
/// `fn get(&self, col: impl ColumnIndex) -> Result<ValueRef<'_>>` and
/// `fn schema(&self) -> &Schema`; `$lt` is the lifetime borrowed strings
/// live for (`'_` for the row itself, `'a` for a view into a batch).
macro_rules! typed_getters {
    ($lt:lifetime) => {
        /// Reads a BOOL (or IS_DELETED) cell.
        pub fn get_bool(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<bool> {
            typed_getters!(@get self, col, "bool", ValueRef::Bool(v) => v)
        }
        /// Reads an INT8 cell.
        pub fn get_i8(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<i8> {
            typed_getters!(@get self, col, "i8", ValueRef::Int8(v) => v)
        }
        /// Reads an INT16 cell.
        pub fn get_i16(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<i16> {
            typed_getters!(@get self, col, "i16", ValueRef::Int16(v) => v)
        }
        /// Reads an INT32 cell.
        pub fn get_i32(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<i32> {
            typed_getters!(@get self, col, "i32", ValueRef::Int32(v) => v)
        }
        /// Reads an INT64 (or UNIXTIME_MICROS) cell.
        pub fn get_i64(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<i64> {
            typed_getters!(@get self, col, "i64",
                ValueRef::Int64(v) => v, ValueRef::UnixtimeMicros(v) => v)
        }
        /// Reads a FLOAT cell.
        pub fn get_f32(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<f32> {
            typed_getters!(@get self, col, "f32", ValueRef::Float(v) => v)
        }
        /// Reads a DOUBLE cell.
        pub fn get_f64(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<f64> {
            typed_getters!(@get self, col, "f64", ValueRef::Double(v) => v)
        }
        /// Reads a DECIMAL cell as its unscaled value; the column's
        /// `scale()` gives the scale.
        pub fn get_decimal(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<i128> {
            typed_getters!(@get self, col, "decimal", ValueRef::Decimal(v) => v)
        }
        /// Reads a UNIXTIME_MICROS cell (microseconds since the epoch).
        pub fn get_timestamp_micros(
            &self,
            col: impl $crate::schema::ColumnIndex,
        ) -> $crate::Result<i64> {
            typed_getters!(@get self, col, "timestamp", ValueRef::UnixtimeMicros(v) => v)
        }
        /// Reads a DATE cell (days since 1970-01-01).
        pub fn get_date(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<i32> {
            typed_getters!(@get self, col, "date", ValueRef::Date(v) => v)
        }
        /// Reads a STRING or VARCHAR cell.
        pub fn get_str(&self, col: impl $crate::schema::ColumnIndex) -> $crate::Result<&$lt str> {
            typed_getters!(@get self, col, "string", ValueRef::String(v) => v)
        }
    };
    (@get $self:ident, $col:ident, $kind:literal, $($pat:pat => $v:ident),+) => {{
        let idx = $col.column_index($self.schema())?;
        match $self.get(idx)? {
            $($pat => Ok($v),)+
            ValueRef::Null => Err($crate::Error::InvalidArgument(format!(
                "column '{}' is NULL",
                $self.schema().columns()[idx].name()
            ))),
            _ => Err($self.schema().columns()[idx].type_mismatch($kind)),
        }
    }};
}
pub(crate) use typed_getters;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_are_lsb_first() {
        let mut bm = [0u8; 2];
        set_bit(&mut bm, 0, true);
        set_bit(&mut bm, 9, true);
        assert_eq!(bm, [0x01, 0x02]);
        assert!(bit(&bm, 9));
        assert!(!bit(&bm, 8));
        assert!(!bit(&bm, 100));
        set_bit(&mut bm, 0, false);
        set_bit(&mut bm, 100, true);
        assert_eq!(bm, [0x00, 0x02]);
    }

    #[test]
    fn fixed_cells_are_little_endian() {
        assert_eq!(
            read_fixed(DataType::Int32, &[1, 0, 0, 0]),
            Some(ValueRef::Int32(1))
        );
        assert_eq!(
            read_fixed(DataType::Decimal32, &[0xff; 4]),
            Some(ValueRef::Decimal(-1))
        );
        assert_eq!(read_fixed(DataType::String, &[0; 16]), None);
    }
}
