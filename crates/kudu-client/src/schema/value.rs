//! Generic cell values: [`Value`] (owned) and [`ValueRef`] (borrowed).
//!
//! Rows and row batches store cells in their wire layout and have typed
//! accessors for hot paths; these enums are for generic code — defaults,
//! predicates, keys rendered for humans, tests, and copying cells between
//! rows of different schemas without allocating ([`ValueRef`]).
//!
//! The "value encoding" here is the one Kudu uses for default values and
//! predicate bounds (docs/kudu-protocol.md#types-and-cells): the little-endian
//! cell bytes for fixed-width types and the raw bytes (no 16-byte cell) for
//! STRING, BINARY and VARCHAR.

use std::fmt;

use super::types::{DataType, MAX_DATE, MIN_DATE};
use crate::{Error, Result};

/// An owned cell value. DECIMAL values are unscaled; the column supplies
/// precision and scale. VARCHAR uses [`Value::String`], IS_DELETED uses
/// [`Value::Bool`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// SQL NULL.
    Null,
    /// BOOL or IS_DELETED.
    Bool(bool),
    /// INT8.
    Int8(i8),
    /// INT16.
    Int16(i16),
    /// INT32.
    Int32(i32),
    /// INT64.
    Int64(i64),
    /// FLOAT.
    Float(f32),
    /// DOUBLE.
    Double(f64),
    /// DECIMAL32/64/128, unscaled.
    Decimal(i128),
    /// STRING or VARCHAR.
    String(String),
    /// BINARY.
    Binary(Vec<u8>),
    /// UNIXTIME_MICROS: microseconds since the epoch, UTC.
    UnixtimeMicros(i64),
    /// DATE: days since 1970-01-01.
    Date(i32),
}

/// A borrowed cell value; the zero-allocation twin of [`Value`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum ValueRef<'a> {
    /// SQL NULL.
    Null,
    /// BOOL or IS_DELETED.
    Bool(bool),
    /// INT8.
    Int8(i8),
    /// INT16.
    Int16(i16),
    /// INT32.
    Int32(i32),
    /// INT64.
    Int64(i64),
    /// FLOAT.
    Float(f32),
    /// DOUBLE.
    Double(f64),
    /// DECIMAL32/64/128, unscaled.
    Decimal(i128),
    /// STRING or VARCHAR.
    String(&'a str),
    /// BINARY.
    Binary(&'a [u8]),
    /// UNIXTIME_MICROS.
    UnixtimeMicros(i64),
    /// DATE.
    Date(i32),
}

impl Value {
    /// Borrows this value.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Bool(v) => ValueRef::Bool(*v),
            Value::Int8(v) => ValueRef::Int8(*v),
            Value::Int16(v) => ValueRef::Int16(*v),
            Value::Int32(v) => ValueRef::Int32(*v),
            Value::Int64(v) => ValueRef::Int64(*v),
            Value::Float(v) => ValueRef::Float(*v),
            Value::Double(v) => ValueRef::Double(*v),
            Value::Decimal(v) => ValueRef::Decimal(*v),
            Value::String(v) => ValueRef::String(v),
            Value::Binary(v) => ValueRef::Binary(v),
            Value::UnixtimeMicros(v) => ValueRef::UnixtimeMicros(*v),
            Value::Date(v) => ValueRef::Date(*v),
        }
    }

    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Decodes a value in value encoding (defaults, predicate bounds) for a
    /// column of type `data_type`.
    pub fn decode(data_type: DataType, bytes: &[u8]) -> Result<Value> {
        fn fixed<const N: usize>(dt: DataType, b: &[u8]) -> Result<[u8; N]> {
            b.try_into().map_err(|_| {
                Error::InvalidArgument(format!("{dt} value must be {N} bytes, got {}", b.len()))
            })
        }
        Ok(match data_type {
            DataType::Bool | DataType::IsDeleted => {
                Value::Bool(fixed::<1>(data_type, bytes)?[0] != 0)
            }
            DataType::Int8 => Value::Int8(i8::from_le_bytes(fixed(data_type, bytes)?)),
            DataType::Int16 => Value::Int16(i16::from_le_bytes(fixed(data_type, bytes)?)),
            DataType::Int32 => Value::Int32(i32::from_le_bytes(fixed(data_type, bytes)?)),
            DataType::Int64 => Value::Int64(i64::from_le_bytes(fixed(data_type, bytes)?)),
            DataType::Float => Value::Float(f32::from_le_bytes(fixed(data_type, bytes)?)),
            DataType::Double => Value::Double(f64::from_le_bytes(fixed(data_type, bytes)?)),
            DataType::Decimal32 => {
                Value::Decimal(i32::from_le_bytes(fixed(data_type, bytes)?).into())
            }
            DataType::Decimal64 => {
                Value::Decimal(i64::from_le_bytes(fixed(data_type, bytes)?).into())
            }
            DataType::Decimal128 => Value::Decimal(i128::from_le_bytes(fixed(data_type, bytes)?)),
            DataType::UnixtimeMicros => {
                Value::UnixtimeMicros(i64::from_le_bytes(fixed(data_type, bytes)?))
            }
            DataType::Date => Value::Date(i32::from_le_bytes(fixed(data_type, bytes)?)),
            DataType::String | DataType::Varchar => Value::String(
                std::str::from_utf8(bytes)
                    .map_err(|e| {
                        Error::InvalidArgument(format!("{data_type} value is not UTF-8: {e}"))
                    })?
                    .to_owned(),
            ),
            DataType::Binary => Value::Binary(bytes.to_vec()),
        })
    }
}

impl<'a> ValueRef<'a> {
    /// Copies into an owned [`Value`].
    pub fn into_owned(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Bool(v) => Value::Bool(v),
            ValueRef::Int8(v) => Value::Int8(v),
            ValueRef::Int16(v) => Value::Int16(v),
            ValueRef::Int32(v) => Value::Int32(v),
            ValueRef::Int64(v) => Value::Int64(v),
            ValueRef::Float(v) => Value::Float(v),
            ValueRef::Double(v) => Value::Double(v),
            ValueRef::Decimal(v) => Value::Decimal(v),
            ValueRef::String(v) => Value::String(v.to_owned()),
            ValueRef::Binary(v) => Value::Binary(v.to_vec()),
            ValueRef::UnixtimeMicros(v) => Value::UnixtimeMicros(v),
            ValueRef::Date(v) => Value::Date(v),
        }
    }

    /// Whether this is [`ValueRef::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, ValueRef::Null)
    }

    /// The name of the variant's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            ValueRef::Null => "NULL",
            ValueRef::Bool(_) => "bool",
            ValueRef::Int8(_) => "i8",
            ValueRef::Int16(_) => "i16",
            ValueRef::Int32(_) => "i32",
            ValueRef::Int64(_) => "i64",
            ValueRef::Float(_) => "f32",
            ValueRef::Double(_) => "f64",
            ValueRef::Decimal(_) => "decimal",
            ValueRef::String(_) => "string",
            ValueRef::Binary(_) => "binary",
            ValueRef::UnixtimeMicros(_) => "timestamp",
            ValueRef::Date(_) => "date",
        }
    }

    /// Whether a non-null value of this kind can be stored in a column of
    /// `data_type` (ignoring range checks such as precision).
    pub fn fits_type(&self, data_type: DataType) -> bool {
        matches!(
            (self, data_type),
            (ValueRef::Bool(_), DataType::Bool | DataType::IsDeleted)
                | (ValueRef::Int8(_), DataType::Int8)
                | (ValueRef::Int16(_), DataType::Int16)
                | (ValueRef::Int32(_), DataType::Int32)
                | (ValueRef::Int64(_), DataType::Int64)
                | (ValueRef::Float(_), DataType::Float)
                | (ValueRef::Double(_), DataType::Double)
                | (
                    ValueRef::Decimal(_),
                    DataType::Decimal32 | DataType::Decimal64 | DataType::Decimal128
                )
                | (ValueRef::String(_), DataType::String | DataType::Varchar)
                | (ValueRef::Binary(_), DataType::Binary)
                | (ValueRef::UnixtimeMicros(_), DataType::UnixtimeMicros)
                | (ValueRef::Date(_), DataType::Date)
        )
    }

    /// Appends the value encoding (defaults, predicate bounds) for a column
    /// of `data_type`. Fails on NULL or a value of the wrong kind; DECIMAL
    /// values that do not fit the width are rejected.
    pub fn encode(&self, data_type: DataType, out: &mut Vec<u8>) -> Result<()> {
        if !self.fits_type(data_type) {
            return Err(Error::InvalidArgument(format!(
                "cannot encode a {} value as {data_type}",
                self.kind()
            )));
        }
        match *self {
            // Already rejected by `fits_type`; kept explicit for the match.
            ValueRef::Null => {}
            ValueRef::Bool(v) => out.push(u8::from(v)),
            ValueRef::Int8(v) => out.extend_from_slice(&v.to_le_bytes()),
            ValueRef::Int16(v) => out.extend_from_slice(&v.to_le_bytes()),
            ValueRef::Int32(v) | ValueRef::Date(v) => out.extend_from_slice(&v.to_le_bytes()),
            ValueRef::Int64(v) | ValueRef::UnixtimeMicros(v) => {
                out.extend_from_slice(&v.to_le_bytes())
            }
            ValueRef::Float(v) => out.extend_from_slice(&v.to_le_bytes()),
            ValueRef::Double(v) => out.extend_from_slice(&v.to_le_bytes()),
            ValueRef::Decimal(v) => encode_decimal(v, data_type, out)?,
            ValueRef::String(v) => out.extend_from_slice(v.as_bytes()),
            ValueRef::Binary(v) => out.extend_from_slice(v),
        }
        Ok(())
    }
}

/// Writes an unscaled decimal at the width of `data_type`, little-endian.
pub(crate) fn encode_decimal(v: i128, data_type: DataType, out: &mut Vec<u8>) -> Result<()> {
    let overflow = || Error::InvalidArgument(format!("decimal value {v} does not fit {data_type}"));
    match data_type {
        DataType::Decimal32 => {
            out.extend_from_slice(&i32::try_from(v).map_err(|_| overflow())?.to_le_bytes())
        }
        DataType::Decimal64 => {
            out.extend_from_slice(&i64::try_from(v).map_err(|_| overflow())?.to_le_bytes())
        }
        _ => out.extend_from_slice(&v.to_le_bytes()),
    }
    Ok(())
}

/// Checks that a DATE is within Kudu's 0001-01-01 ..= 9999-12-31 range.
pub(crate) fn check_date(days: i32) -> Result<()> {
    if (MIN_DATE..=MAX_DATE).contains(&days) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "date {days} (days since epoch) is outside {MIN_DATE}..={MAX_DATE}"
        )))
    }
}

/// 10^p for p ≤ 38 (fits i128).
pub(crate) fn pow10(p: u8) -> i128 {
    10i128.pow(u32::from(p))
}

impl fmt::Display for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueRef::Null => f.write_str("NULL"),
            ValueRef::Bool(v) => write!(f, "{v}"),
            ValueRef::Int8(v) => write!(f, "{v}"),
            ValueRef::Int16(v) => write!(f, "{v}"),
            ValueRef::Int32(v) => write!(f, "{v}"),
            ValueRef::Int64(v) => write!(f, "{v}"),
            ValueRef::Float(v) => write!(f, "{v}"),
            ValueRef::Double(v) => write!(f, "{v}"),
            ValueRef::Decimal(v) => write!(f, "{v}"),
            ValueRef::String(v) => write!(f, "{v:?}"),
            ValueRef::Binary(v) => {
                f.write_str("0x")?;
                for b in *v {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
            ValueRef::UnixtimeMicros(v) => write!(f, "{v}us"),
            ValueRef::Date(v) => write!(f, "date({v})"),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

macro_rules! from_impl {
    ($t:ty, $variant:ident) => {
        impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::$variant(v)
            }
        }
        impl From<$t> for ValueRef<'_> {
            fn from(v: $t) -> Self {
                ValueRef::$variant(v)
            }
        }
    };
}
from_impl!(bool, Bool);
from_impl!(i8, Int8);
from_impl!(i16, Int16);
from_impl!(i32, Int32);
from_impl!(i64, Int64);
from_impl!(f32, Float);
from_impl!(f64, Double);

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::String(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::String(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Binary(v)
    }
}
impl<'a> From<&'a str> for ValueRef<'a> {
    fn from(v: &'a str) -> Self {
        ValueRef::String(v)
    }
}
impl<'a> From<&'a [u8]> for ValueRef<'a> {
    fn from(v: &'a [u8]) -> Self {
        ValueRef::Binary(v)
    }
}
impl<'a> From<&'a Value> for ValueRef<'a> {
    fn from(v: &'a Value) -> Self {
        v.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: ValueRef<'_>, t: DataType) -> Vec<u8> {
        let mut out = Vec::new();
        v.encode(t, &mut out).unwrap();
        out
    }

    #[test]
    fn value_encoding_is_little_endian_and_raw_for_strings() {
        assert_eq!(enc(ValueRef::Int32(100), DataType::Int32), [100, 0, 0, 0]);
        assert_eq!(enc(ValueRef::Int16(-2), DataType::Int16), [0xfe, 0xff]);
        assert_eq!(enc(ValueRef::Bool(true), DataType::Bool), [1]);
        assert_eq!(enc(ValueRef::Bool(false), DataType::IsDeleted), [0]);
        assert_eq!(enc(ValueRef::String("ab"), DataType::Varchar), b"ab");
        assert_eq!(enc(ValueRef::Decimal(-1), DataType::Decimal32), [0xff; 4]);
        assert_eq!(enc(ValueRef::Decimal(1), DataType::Decimal128).len(), 16);
    }

    #[test]
    fn value_encoding_rejects_mismatches() {
        let mut out = Vec::new();
        assert!(ValueRef::Int64(1)
            .encode(DataType::Int32, &mut out)
            .is_err());
        assert!(ValueRef::Null.encode(DataType::Int32, &mut out).is_err());
        assert!(ValueRef::Decimal(i128::from(i32::MAX) + 1)
            .encode(DataType::Decimal32, &mut out)
            .is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn decode_round_trips() {
        let cases = [
            (Value::Int8(-5), DataType::Int8),
            (Value::Int64(1 << 40), DataType::Int64),
            (Value::Double(2.5), DataType::Double),
            (Value::Float(-0.5), DataType::Float),
            (Value::Decimal(-12345), DataType::Decimal64),
            (Value::Decimal(i128::MIN), DataType::Decimal128),
            (Value::String("héllo".into()), DataType::String),
            (Value::Binary(vec![0, 1, 255]), DataType::Binary),
            (Value::UnixtimeMicros(-1), DataType::UnixtimeMicros),
            (Value::Date(-719_162), DataType::Date),
            (Value::Bool(true), DataType::IsDeleted),
        ];
        for (v, t) in cases {
            let bytes = enc(v.as_ref(), t);
            assert_eq!(Value::decode(t, &bytes).unwrap(), v, "{t}");
        }
        assert!(Value::decode(DataType::Int32, &[1, 2]).is_err());
        assert!(Value::decode(DataType::String, &[0xff]).is_err());
    }

    #[test]
    fn display_is_readable() {
        assert_eq!(Value::from("a").to_string(), "\"a\"");
        assert_eq!(Value::Binary(vec![0xab, 1]).to_string(), "0xab01");
        assert_eq!(Value::Null.to_string(), "NULL");
    }
}
