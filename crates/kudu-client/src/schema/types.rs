//! Column data types, their type attributes and storage hints.
//!
//! Kudu stores every cell in a fixed-size slot whose width depends only on
//! the type (docs/kudu-protocol.md#types-and-cells); var-length types use a
//! 16-byte (offset, length) slot. Keeping the width on the type lets rows, row
//! operations and scan decoding compute offsets without looking at values.

use std::fmt;

use crate::{Error, Result};

/// A column's logical type, numbered as `kudu.DataType` on the wire.
///
/// Kudu's internal-only types (unsigned integers, INT128) and the
/// not-yet-released NESTED type are not represented: a schema using them is
/// rejected with [`Error::Unsupported`] when converted from protobuf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// `BOOL` (9): one byte, 0 or 1.
    Bool,
    /// `INT8` (1).
    Int8,
    /// `INT16` (3).
    Int16,
    /// `INT32` (5).
    Int32,
    /// `INT64` (7).
    Int64,
    /// `FLOAT` (10): IEEE-754 binary32.
    Float,
    /// `DOUBLE` (11): IEEE-754 binary64.
    Double,
    /// `DECIMAL32` (15): unscaled i32, precision 1–9.
    Decimal32,
    /// `DECIMAL64` (16): unscaled i64, precision 10–18.
    Decimal64,
    /// `DECIMAL128` (17): unscaled i128, precision 19–38.
    Decimal128,
    /// `STRING` (8): UTF-8 bytes.
    String,
    /// `BINARY` (12): raw bytes.
    Binary,
    /// `VARCHAR` (19): UTF-8 with a maximum length in characters.
    Varchar,
    /// `UNIXTIME_MICROS` (13): i64 microseconds since the Unix epoch, UTC.
    UnixtimeMicros,
    /// `DATE` (20): i32 days since 1970-01-01.
    Date,
    /// `IS_DELETED` (18): virtual bool column, only valid in diff-scan
    /// projections.
    IsDeleted,
}

/// Smallest valid DATE value (0001-01-01) in days since the epoch.
pub(crate) const MIN_DATE: i32 = -719_162;
/// Largest valid DATE value (9999-12-31) in days since the epoch.
pub(crate) const MAX_DATE: i32 = 2_932_896;

/// Largest DECIMAL precision Kudu supports.
pub(crate) const MAX_DECIMAL_PRECISION: u8 = 38;

impl DataType {
    /// Every supported type, in wire-number order (handy for tests and
    /// exhaustive checks).
    pub const ALL: [DataType; 16] = [
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::String,
        DataType::Bool,
        DataType::Float,
        DataType::Double,
        DataType::Binary,
        DataType::UnixtimeMicros,
        DataType::Decimal32,
        DataType::Decimal64,
        DataType::Decimal128,
        DataType::IsDeleted,
        DataType::Varchar,
        DataType::Date,
    ];

    /// The `kudu.DataType` wire number.
    pub(crate) fn to_wire(self) -> i32 {
        match self {
            DataType::Int8 => 1,
            DataType::Int16 => 3,
            DataType::Int32 => 5,
            DataType::Int64 => 7,
            DataType::String => 8,
            DataType::Bool => 9,
            DataType::Float => 10,
            DataType::Double => 11,
            DataType::Binary => 12,
            DataType::UnixtimeMicros => 13,
            DataType::Decimal32 => 15,
            DataType::Decimal64 => 16,
            DataType::Decimal128 => 17,
            DataType::IsDeleted => 18,
            DataType::Varchar => 19,
            DataType::Date => 20,
        }
    }

    /// Maps a `kudu.DataType` wire number; internal, unknown and newer types
    /// give [`Error::Unsupported`].
    pub(crate) fn from_wire(v: i32) -> Result<DataType> {
        Ok(match v {
            1 => DataType::Int8,
            3 => DataType::Int16,
            5 => DataType::Int32,
            7 => DataType::Int64,
            8 => DataType::String,
            9 => DataType::Bool,
            10 => DataType::Float,
            11 => DataType::Double,
            12 => DataType::Binary,
            13 => DataType::UnixtimeMicros,
            15 => DataType::Decimal32,
            16 => DataType::Decimal64,
            17 => DataType::Decimal128,
            18 => DataType::IsDeleted,
            19 => DataType::Varchar,
            20 => DataType::Date,
            0 | 2 | 4 | 6 | 14 => {
                return Err(Error::Unsupported(format!(
                    "Kudu-internal data type {v} is not exposed to clients"
                )))
            }
            21 => {
                return Err(Error::Unsupported(
                    "NESTED (array) columns are not supported".into(),
                ))
            }
            other => return Err(Error::Unsupported(format!("unknown data type {other}"))),
        })
    }

    /// Width of the type's fixed cell in rows and row operations
    /// (docs/kudu-protocol.md#types-and-cells). Var-length types use 16 bytes:
    /// u64 offset + u64 length.
    pub fn size(self) -> usize {
        match self {
            DataType::Bool | DataType::Int8 | DataType::IsDeleted => 1,
            DataType::Int16 => 2,
            DataType::Int32 | DataType::Float | DataType::Decimal32 | DataType::Date => 4,
            DataType::Int64 | DataType::Double | DataType::Decimal64 | DataType::UnixtimeMicros => {
                8
            }
            DataType::Decimal128 | DataType::String | DataType::Binary | DataType::Varchar => 16,
        }
    }

    /// Whether values live out of line (STRING, BINARY, VARCHAR).
    pub fn is_var_len(self) -> bool {
        matches!(
            self,
            DataType::String | DataType::Binary | DataType::Varchar
        )
    }

    /// Whether the type may be a primary-key (and so range / hash) column.
    pub fn is_keyable(self) -> bool {
        !matches!(
            self,
            DataType::Bool | DataType::Float | DataType::Double | DataType::IsDeleted
        )
    }

    /// Whether the type is one of the DECIMAL widths.
    pub fn is_decimal(self) -> bool {
        matches!(
            self,
            DataType::Decimal32 | DataType::Decimal64 | DataType::Decimal128
        )
    }

    /// The DECIMAL wire type Kudu uses for `precision` (1–38).
    pub fn decimal_for_precision(precision: u8) -> Result<DataType> {
        match precision {
            1..=9 => Ok(DataType::Decimal32),
            10..=18 => Ok(DataType::Decimal64),
            19..=MAX_DECIMAL_PRECISION => Ok(DataType::Decimal128),
            p => Err(Error::InvalidArgument(format!(
                "decimal precision {p} is outside 1..={MAX_DECIMAL_PRECISION}"
            ))),
        }
    }

    /// The upper-case name Kudu uses (`INT32`, `UNIXTIME_MICROS`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DataType::Bool => "BOOL",
            DataType::Int8 => "INT8",
            DataType::Int16 => "INT16",
            DataType::Int32 => "INT32",
            DataType::Int64 => "INT64",
            DataType::Float => "FLOAT",
            DataType::Double => "DOUBLE",
            DataType::Decimal32 => "DECIMAL32",
            DataType::Decimal64 => "DECIMAL64",
            DataType::Decimal128 => "DECIMAL128",
            DataType::String => "STRING",
            DataType::Binary => "BINARY",
            DataType::Varchar => "VARCHAR",
            DataType::UnixtimeMicros => "UNIXTIME_MICROS",
            DataType::Date => "DATE",
            DataType::IsDeleted => "IS_DELETED",
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `ColumnTypeAttributesPB`: DECIMAL precision/scale or VARCHAR length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct TypeAttributes {
    /// DECIMAL precision (total digits).
    pub precision: Option<u8>,
    /// DECIMAL scale (digits after the point).
    pub scale: Option<u8>,
    /// VARCHAR maximum length in characters.
    pub length: Option<u32>,
}

impl TypeAttributes {
    /// Attributes of a DECIMAL(precision, scale) column.
    pub fn decimal(precision: u8, scale: u8) -> Self {
        TypeAttributes {
            precision: Some(precision),
            scale: Some(scale),
            length: None,
        }
    }

    /// Attributes of a VARCHAR(length) column.
    pub fn varchar(length: u32) -> Self {
        TypeAttributes {
            precision: None,
            scale: None,
            length: Some(length),
        }
    }
}

/// Largest VARCHAR length Kudu accepts, in characters.
pub(crate) const MAX_VARCHAR_LENGTH: u32 = 65_535;

/// Column storage encoding (`EncodingType`). Unknown numbers are kept so a
/// schema read from a newer server round-trips unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Encoding {
    /// Let the server choose (0).
    #[default]
    Auto,
    /// 1
    Plain,
    /// 2
    Prefix,
    /// 3 (no longer used by Kudu)
    GroupVarint,
    /// 4
    Rle,
    /// 5
    Dict,
    /// 6
    BitShuffle,
    /// Any other wire value.
    Other(i32),
}

impl Encoding {
    /// The wire number.
    pub(crate) fn to_wire(self) -> i32 {
        match self {
            Encoding::Auto => 0,
            Encoding::Plain => 1,
            Encoding::Prefix => 2,
            Encoding::GroupVarint => 3,
            Encoding::Rle => 4,
            Encoding::Dict => 5,
            Encoding::BitShuffle => 6,
            Encoding::Other(v) => v,
        }
    }

    /// Maps a wire number.
    pub(crate) fn from_wire(v: i32) -> Self {
        match v {
            0 => Encoding::Auto,
            1 => Encoding::Plain,
            2 => Encoding::Prefix,
            3 => Encoding::GroupVarint,
            4 => Encoding::Rle,
            5 => Encoding::Dict,
            6 => Encoding::BitShuffle,
            other => Encoding::Other(other),
        }
    }
}

/// Column block compression (`CompressionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Server default (0).
    #[default]
    Default,
    /// No compression (1).
    None,
    /// 2
    Snappy,
    /// 3
    Lz4,
    /// 4
    Zlib,
    /// Any other wire value.
    Other(i32),
}

impl Compression {
    /// The wire number.
    pub(crate) fn to_wire(self) -> i32 {
        match self {
            Compression::Default => 0,
            Compression::None => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zlib => 4,
            Compression::Other(v) => v,
        }
    }

    /// Maps a wire number.
    pub(crate) fn from_wire(v: i32) -> Self {
        match v {
            0 => Compression::Default,
            1 => Compression::None,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zlib,
            other => Compression::Other(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_numbers_round_trip() {
        for t in DataType::ALL {
            assert_eq!(DataType::from_wire(t.to_wire()).unwrap(), t);
        }
        assert!(DataType::from_wire(14).is_err());
        assert!(DataType::from_wire(21).is_err());
        assert!(DataType::from_wire(999).is_err());
    }

    #[test]
    fn sizes_follow_the_spec_table() {
        assert_eq!(DataType::Bool.size(), 1);
        assert_eq!(DataType::Int16.size(), 2);
        assert_eq!(DataType::Date.size(), 4);
        assert_eq!(DataType::UnixtimeMicros.size(), 8);
        assert_eq!(DataType::Decimal128.size(), 16);
        assert_eq!(DataType::Varchar.size(), 16);
        assert_eq!(DataType::IsDeleted.size(), 1);
    }

    #[test]
    fn decimal_width_from_precision() {
        assert_eq!(
            DataType::decimal_for_precision(9).unwrap(),
            DataType::Decimal32
        );
        assert_eq!(
            DataType::decimal_for_precision(10).unwrap(),
            DataType::Decimal64
        );
        assert_eq!(
            DataType::decimal_for_precision(38).unwrap(),
            DataType::Decimal128
        );
        assert!(DataType::decimal_for_precision(0).is_err());
        assert!(DataType::decimal_for_precision(39).is_err());
    }

    #[test]
    fn unknown_encodings_are_kept() {
        assert_eq!(Encoding::from_wire(42).to_wire(), 42);
        assert_eq!(Compression::from_wire(3), Compression::Lz4);
    }
}
