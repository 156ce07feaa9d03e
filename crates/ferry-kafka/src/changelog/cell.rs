//! One JSON value as the cell of a Kudu column (the cell mapping in the
//! parent module's docs): types and ranges checked, exact where the JSON
//! allows it.

use kudu_client::schema::{ColumnSchema, DataType, Decimal, DecimalError, Value};
use serde_json::Value as Json;

use super::{describe, short, DecodeError};

/// What a WrongType error says a column expects.
fn expected(t: DataType) -> &'static str {
    match t {
        DataType::Bool => "true or false",
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => "an integer",
        DataType::Float | DataType::Double => "a number, \"NaN\", \"Infinity\" or \"-Infinity\"",
        DataType::Decimal32 | DataType::Decimal64 | DataType::Decimal128 => {
            "a decimal string or number"
        }
        DataType::String | DataType::Varchar => "a string",
        DataType::Binary => "a base64 string",
        DataType::UnixtimeMicros => "an integer of microseconds since the epoch",
        DataType::Date => "an integer of days since 1970-01-01 or a \"YYYY-MM-DD\" string",
        DataType::IsDeleted => "no value (IS_DELETED is virtual)",
        _ => "no value (a column type this decoder does not know)",
    }
}

/// The value of `column` that `json` holds.
pub(super) fn cell(column: &ColumnSchema, json: &Json) -> Result<Value, DecodeError> {
    if json.is_null() {
        return if column.is_nullable() {
            Ok(Value::Null)
        } else {
            Err(DecodeError::NullInNotNull {
                column: column.name().to_string(),
            })
        };
    }
    let c = Cell { column, json };
    Ok(match column.data_type() {
        DataType::Bool => Value::Bool(json.as_bool().ok_or_else(|| c.wrong())?),
        DataType::Int8 => Value::Int8(c.int()?),
        DataType::Int16 => Value::Int16(c.int()?),
        DataType::Int32 => Value::Int32(c.int()?),
        DataType::Int64 => Value::Int64(c.int()?),
        DataType::UnixtimeMicros => Value::UnixtimeMicros(c.int()?),
        DataType::Float => c.float()?,
        DataType::Double => Value::Double(float(json).ok_or_else(|| c.wrong())?),
        DataType::Decimal32 | DataType::Decimal64 | DataType::Decimal128 => c.decimal()?,
        DataType::String | DataType::Varchar => c.string()?,
        DataType::Binary => Value::Binary(
            json.as_str()
                .and_then(base64_decode)
                .ok_or_else(|| c.wrong())?,
        ),
        DataType::Date => c.date()?,
        DataType::IsDeleted => return Err(c.wrong()),
        _ => return Err(c.wrong()),
    })
}

/// A non-null JSON value read as the cell of a column: the reading of the
/// types that take more than a line, and the errors that name both.
struct Cell<'a> {
    column: &'a ColumnSchema,
    json: &'a Json,
}

impl Cell<'_> {
    /// The value is not of a kind the column reads.
    fn wrong(&self) -> DecodeError {
        DecodeError::WrongType {
            column: self.column.name().to_string(),
            column_type: self.column.type_display(),
            expected: expected(self.column.data_type()),
            found: describe(Some(self.json)),
        }
    }

    /// The value, shown as `value`, does not fit the column.
    fn out_of_range(&self, value: String) -> DecodeError {
        DecodeError::OutOfRange {
            column: self.column.name().to_string(),
            column_type: self.column.type_display(),
            value,
        }
    }

    /// The value does not fit the column, shown as the record has it.
    fn too_large(&self) -> DecodeError {
        self.out_of_range(short(self.json))
    }

    /// An integer that `T` holds.
    fn int<T: TryFrom<i128>>(&self) -> Result<T, DecodeError> {
        let n = match integer(self.json) {
            Int::Value(n) => n,
            Int::TooLarge => return Err(self.too_large()),
            Int::Not => return Err(self.wrong()),
        };
        T::try_from(n).map_err(|_| self.out_of_range(n.to_string()))
    }

    // The shortest digits of the parsed double read back as a float:
    // narrowing the double instead would round twice, which gets some
    // floats wrong (7.038531e-26).
    fn float(&self) -> Result<Value, DecodeError> {
        let f: f32 = float(self.json).ok_or_else(|| self.wrong())?;
        // A finite double beyond FLOAT's range would read as infinity.
        if f.is_infinite() && self.json.is_number() {
            return Err(self.too_large());
        }
        Ok(Value::Float(f))
    }

    fn decimal(&self) -> Result<Value, DecodeError> {
        let text = match self.json {
            Json::String(s) => s.clone(),
            Json::Number(n) => {
                let text = n.to_string();
                if !n.is_i64() && !n.is_u64() && significant_digits(&text) > 15 {
                    return Err(DecodeError::InexactNumber {
                        column: self.column.name().to_string(),
                        column_type: self.column.type_display(),
                        value: text,
                    });
                }
                text
            }
            _ => return Err(self.wrong()),
        };
        match Decimal::parse(&text, self.column.precision(), self.column.scale()) {
            Ok(d) => Ok(Value::from(d)),
            Err(DecimalError::Syntax { .. }) => Err(self.wrong()),
            Err(_) => Err(self.too_large()),
        }
    }

    fn string(&self) -> Result<Value, DecodeError> {
        let s = self.json.as_str().ok_or_else(|| self.wrong())?;
        if let Some(max) = self.column.varchar_length() {
            let chars = s.chars().count();
            if self.column.data_type() == DataType::Varchar && chars > max as usize {
                return Err(self.out_of_range(format!("a string of {chars} characters")));
            }
        }
        Ok(Value::String(s.to_string()))
    }

    fn date(&self) -> Result<Value, DecodeError> {
        let days = match self.json.as_str().and_then(civil_date) {
            Some(Ok(days)) => i128::from(days),
            Some(Err(())) => return Err(self.too_large()),
            None => self.int::<i128>()?,
        };
        match i32::try_from(days) {
            Ok(days) if (MIN_DATE..=MAX_DATE).contains(&days) => Ok(Value::Date(days)),
            _ => Err(self.too_large()),
        }
    }
}

/// Kudu's DATE range, 0001-01-01 ..= 9999-12-31, in days since the epoch.
pub(super) const MIN_DATE: i32 = -719_162;
pub(super) const MAX_DATE: i32 = 2_932_896;

/// An integer read from JSON.
enum Int {
    Value(i128),
    /// An integer beyond what any column holds.
    TooLarge,
    Not,
}

/// 2^53: every integer below it is a double exactly.
const EXACT_DOUBLE: f64 = 9_007_199_254_740_992.0;
/// 2^63: no integer column holds a value this large.
const BEYOND_I64: f64 = 9_223_372_036_854_775_808.0;

/// A JSON integer, or a string holding one (as some producers send 64-bit
/// integers, which JavaScript cannot hold).
fn integer(json: &Json) -> Int {
    match json {
        Json::Number(n) => {
            if let Some(v) = n.as_i64() {
                Int::Value(i128::from(v))
            } else if let Some(v) = n.as_u64() {
                Int::Value(i128::from(v))
            } else {
                // A double: an integer literal beyond u64 (which no column
                // holds), or one written with a fraction or exponent
                // (`3.0`, `1e3`), taken while the double holds it exactly.
                match n.as_f64() {
                    Some(f) if f.fract() != 0.0 => Int::Not,
                    Some(f) if f.abs() < EXACT_DOUBLE => Int::Value(f as i128),
                    Some(f) if f.abs() >= BEYOND_I64 => Int::TooLarge,
                    _ => Int::Not,
                }
            }
        }
        Json::String(s) => match s.parse::<i128>() {
            Ok(v) => Int::Value(v),
            Err(e) => match e.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    Int::TooLarge
                }
                _ => Int::Not,
            },
        },
        _ => Int::Not,
    }
}

/// A FLOAT or DOUBLE from a number (its shortest digits, correctly rounded
/// to `F`) or one of the strings standing for NaN and the infinities.
fn float<F: std::str::FromStr + Special>(json: &Json) -> Option<F> {
    match json {
        Json::Number(n) => n.to_string().parse().ok(),
        Json::String(s) => match s.as_str() {
            "NaN" => Some(F::NAN),
            "Infinity" => Some(F::INFINITY),
            "-Infinity" => Some(F::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// The special values of a float type.
trait Special {
    const NAN: Self;
    const INFINITY: Self;
    const NEG_INFINITY: Self;
}

impl Special for f32 {
    const NAN: Self = f32::NAN;
    const INFINITY: Self = f32::INFINITY;
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
}

impl Special for f64 {
    const NAN: Self = f64::NAN;
    const INFINITY: Self = f64::INFINITY;
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
}

/// The significant digits of a number's text (mantissa digits without
/// leading and trailing zeros).
fn significant_digits(text: &str) -> usize {
    let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    digits.trim_start_matches('0').trim_end_matches('0').len()
}

/// Standard base64 (RFC 4648 §4), with or without its padding.
pub(super) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let data = s.trim_end_matches('=');
    let padding = s.len() - data.len();
    if padding > 2 || (padding > 0 && !s.len().is_multiple_of(4)) || data.len() % 4 == 1 {
        return None;
    }
    let sextet = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    for chunk in data.as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= sextet(c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        // 2, 3 or 4 characters carry 1, 2 or 3 bytes.
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` text: `None` if it is not of
/// that shape, `Err` if it is but names no day of years 1..=9999.
fn civil_date(s: &str) -> Option<Result<i64, ()>> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = b.get(r)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(part.iter().fold(0, |n, &d| n * 10 + u32::from(d - b'0')))
    };
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Some(Err(())),
    };
    if year == 0 || day == 0 || day > month_days {
        return Some(Err(()));
    }
    Some(Ok(days_from_civil(
        i64::from(year),
        i64::from(month),
        i64::from(day),
    )))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`, for years ≥ 1).
pub(super) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
