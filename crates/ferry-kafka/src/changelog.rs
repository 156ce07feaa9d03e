//! Changelog records: how one record of a Kafka changelog topic becomes a
//! write to the sink Kudu table (the Kafka → Kudu direction; [`format`]
//! is the other way, and this module reads everything it writes).
//!
//! Formats (`job.sourceFormat`):
//!
//! - `debezium-json`: the value is an envelope
//!   `{"op":…,"before":…,"after":…,…}`, bare or wrapped as
//!   `{"schema":…,"payload":{envelope}}` (Kafka Connect's JsonConverter
//!   with `schemas.enable=true`). `op` `c`, `r` and `u` upsert `after`; `d`
//!   deletes the key in `before` (the record's key where `before` lacks
//!   it); the tombstone that follows a delete is skipped; `t` (truncate)
//!   is refused, a table is not emptied on a record's word.
//! - `upsert-json`: the key is an object of the key columns, the value the
//!   row; a tombstone (null value) deletes the key. Key columns come from
//!   the record's key, else from the value; when both carry one they must
//!   agree.
//! - `json`: each value is a row to upsert; the record's key is read only
//!   when the value lacks a key column, or for a tombstone, which deletes.
//!
//! Keys, and the values of the other formats, that are exactly
//! `{"schema":…,"payload":…}` are unwrapped the same way, unless the
//! table has a column `payload` (then it may be a row).
//! Fields that are not columns of the table are ignored; columns the
//! record does not carry are left unset (so an upsert keeps their current
//! value), but every key column must be there.
//!
//! Cells, the inverse of [`format`]'s mapping (docs/kafka.md, "Types"):
//! BOOL from `true`/`false`; INT8..INT64 from integers (also strings
//! holding one, and integral numbers such as `3.0` below 2^53, which a
//! double holds exactly), range-checked; FLOAT/DOUBLE from numbers (a
//! FLOAT beyond its range is refused, not made infinite) and the strings
//! `"NaN"`, `"Infinity"`, `"-Infinity"`; DECIMAL(p, s) from a string such as
//! `"-12.50"` or a number, converted exactly from its digits by
//! `kudu_client::Decimal::parse` (fewer decimals than `s` are padded, more
//! must be zeros, at most `p` digits);
//! STRING/VARCHAR from strings (VARCHAR's length checked); BINARY from
//! standard base64, padded or not; UNIXTIME_MICROS from integer
//! microseconds (read as INT64 is); DATE from integer days since
//! 1970-01-01 or a `"YYYY-MM-DD"` string; `null` into a nullable column as
//! NULL, into a NOT NULL one refused.
//!
//! JSON numbers with a fraction or exponent are parsed as `f64`
//! (serde_json without `arbitrary_precision`), so a DECIMAL read from one
//! uses the double's shortest digits. Those are the digits written when
//! there were at most 15; a double that needs more than 15 cannot say
//! which decimal was written and is refused. Decimals are exact as
//! strings, which is how ferry writes them.
//!
//! [`format`]: crate::format

use kudu_client::schema::{ColumnSchema, DataType, Decimal, DecimalError, Row, Schema, Value};
use serde_json::{Map, Number, Value as Json};

/// How a changelog topic's records are read (`job.sourceFormat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangelogFormat {
    /// `debezium-json`: Debezium envelopes (`op`, `before`, `after`).
    DebeziumJson,
    /// `upsert-json`: key and row; a tombstone deletes the key.
    UpsertJson,
    /// `json`: each value a row to upsert.
    Json,
}

impl ChangelogFormat {
    /// The valid names, as [`ChangelogFormat::name`] gives them.
    pub const NAMES: &'static [&'static str] = &["debezium-json", "upsert-json", "json"];

    /// The key value naming it.
    pub fn name(self) -> &'static str {
        match self {
            ChangelogFormat::DebeziumJson => "debezium-json",
            ChangelogFormat::UpsertJson => "upsert-json",
            ChangelogFormat::Json => "json",
        }
    }

    /// The format named `s` (exactly one of [`ChangelogFormat::NAMES`]).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "debezium-json" => Some(ChangelogFormat::DebeziumJson),
            "upsert-json" => Some(ChangelogFormat::UpsertJson),
            "json" => Some(ChangelogFormat::Json),
            _ => None,
        }
    }
}

/// One decoded change for the sink table.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Upsert this row (every column the record carries is set; key
    /// columns always).
    Upsert(Row),
    /// Delete the row with this key (only key columns set).
    Delete(Row),
}

/// Why a record could not be decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The record's key or value is not JSON.
    #[error("the record's {part} is not JSON: {reason}")]
    NotJson { part: &'static str, reason: String },
    /// A part that must be a JSON object is something else.
    #[error("the record's {part} should be a JSON object, found {found}")]
    NotAnObject { part: &'static str, found: String },
    /// Neither the record's value nor its key carries a key column.
    #[error("the record carries no value for key column '{column}'")]
    MissingKey { column: String },
    /// The record's key and value disagree on a key column.
    #[error("the record's key and value disagree on key column '{column}'")]
    KeyMismatch { column: String },
    /// A JSON value that cannot be read as the column's type.
    #[error("column '{column}' ({column_type}): expected {expected}, found {found}")]
    WrongType {
        column: String,
        column_type: String,
        expected: &'static str,
        found: String,
    },
    /// A value of the right kind that the column cannot hold (integer
    /// range, DECIMAL precision or scale, VARCHAR length, DATE range).
    #[error("column '{column}' ({column_type}): {value} does not fit")]
    OutOfRange {
        column: String,
        column_type: String,
        value: String,
    },
    /// A JSON number for a DECIMAL with more digits than a double holds,
    /// so its exact value is lost.
    #[error(
        "column '{column}' ({column_type}): the JSON number {value} has more than 15 \
         significant digits, which a double does not hold exactly (send decimals as strings)"
    )]
    InexactNumber {
        column: String,
        column_type: String,
        value: String,
    },
    /// `null` for a NOT NULL column.
    #[error("column '{column}' is NOT NULL and the record has null")]
    NullInNotNull { column: String },
    /// A Debezium envelope whose `op` is missing or not one of c, r, u, d, t.
    #[error("{}", unknown_op(.op.as_deref()))]
    UnknownOp {
        /// The op as the record has it (JSON text if not a string); `None`
        /// if there is none.
        op: Option<String>,
    },
    /// A change this decoder does not apply (a truncate).
    #[error("{what} is not supported")]
    Unsupported { what: String },
    /// The decoded value was refused by the row (not expected: values are
    /// checked first).
    #[error("setting column '{column}'")]
    Refused {
        column: String,
        #[source]
        source: kudu_client::Error,
    },
}

fn unknown_op(op: Option<&str>) -> String {
    match op {
        None => "the Debezium envelope has no op".to_string(),
        Some(op) => format!("unknown Debezium op {op:?} (expected c, r, u, d or t)"),
    }
}

/// Decodes one record (its Kafka key and value bytes) for a sink table of
/// `schema`. `Ok(None)`: a record that carries no change and is skipped on
/// purpose (a Debezium tombstone that follows a delete).
pub fn decode(
    format: ChangelogFormat,
    schema: &Schema,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<Option<Change>, DecodeError> {
    // An envelope is never just `schema` and `payload`; a row may be.
    let unwrap = format == ChangelogFormat::DebeziumJson || !has_payload_column(schema);
    let value = match value {
        Some(bytes) => object(parse(bytes, "value")?, "value", unwrap)?,
        None => None,
    };
    match format {
        ChangelogFormat::DebeziumJson => debezium(schema, key, value),
        ChangelogFormat::UpsertJson | ChangelogFormat::Json => {
            let Some(row) = value else {
                let key = parse_key(key, schema)?;
                return Ok(Some(Change::Delete(build(
                    schema,
                    &Map::new(),
                    key.as_ref(),
                    true,
                )?)));
            };
            // upsert-json's key is part of the record, so it is read (and
            // checked against the value); a plain JSON topic's key may be
            // anything and is read only when the value falls short.
            let key = if format == ChangelogFormat::UpsertJson || !has_keys(schema, &row) {
                parse_key(key, schema)?
            } else {
                None
            };
            Ok(Some(Change::Upsert(build(
                schema,
                &row,
                key.as_ref(),
                false,
            )?)))
        }
    }
}

fn debezium(
    schema: &Schema,
    key: Option<&[u8]>,
    envelope: Option<Map<String, Json>>,
) -> Result<Option<Change>, DecodeError> {
    // A tombstone only lets a compacted topic drop the deleted key.
    let Some(envelope) = envelope else {
        return Ok(None);
    };
    let op = match envelope.get("op") {
        Some(Json::String(op)) => op.as_str(),
        None | Some(Json::Null) => return Err(DecodeError::UnknownOp { op: None }),
        Some(other) => {
            return Err(DecodeError::UnknownOp {
                op: Some(other.to_string()),
            })
        }
    };
    match op {
        "c" | "r" | "u" => {
            let after = match envelope.get("after") {
                Some(Json::Object(after)) => after,
                other => {
                    return Err(DecodeError::NotAnObject {
                        part: "after",
                        found: describe(other),
                    })
                }
            };
            let key = if has_keys(schema, after) {
                None
            } else {
                parse_key(key, schema)?
            };
            Ok(Some(Change::Upsert(build(
                schema,
                after,
                key.as_ref(),
                false,
            )?)))
        }
        "d" => {
            let empty = Map::new();
            // Debezium's `before` holds at least the key (with the
            // source's default replica identity); a missing one leaves the
            // record's key to say which row.
            let before = match envelope.get("before") {
                Some(Json::Object(before)) => before,
                None | Some(Json::Null) => &empty,
                other => {
                    return Err(DecodeError::NotAnObject {
                        part: "before",
                        found: describe(other),
                    })
                }
            };
            let key = if has_keys(schema, before) {
                None
            } else {
                parse_key(key, schema)?
            };
            Ok(Some(Change::Delete(build(
                schema,
                before,
                key.as_ref(),
                true,
            )?)))
        }
        "t" => Err(DecodeError::Unsupported {
            what: "a truncate (Debezium op \"t\")".to_string(),
        }),
        other => Err(DecodeError::UnknownOp {
            op: Some(other.to_string()),
        }),
    }
}

fn parse(bytes: &[u8], part: &'static str) -> Result<Json, DecodeError> {
    serde_json::from_slice(bytes).map_err(|e| DecodeError::NotJson {
        part,
        reason: e.to_string(),
    })
}

/// The object `json` is (`None` for `null`), with a Kafka Connect
/// `{"schema":…,"payload":…}` wrapping removed if `unwrap`.
fn object(
    json: Json,
    part: &'static str,
    unwrap: bool,
) -> Result<Option<Map<String, Json>>, DecodeError> {
    let json = match json {
        Json::Object(mut map) if unwrap && map.len() == 2 && map.contains_key("schema") => {
            match map.remove("payload") {
                Some(payload) => payload,
                None => Json::Object(map),
            }
        }
        json => json,
    };
    match json {
        Json::Null => Ok(None),
        Json::Object(map) => Ok(Some(map)),
        other => Err(DecodeError::NotAnObject {
            part,
            found: describe(Some(&other)),
        }),
    }
}

/// The record's key as an object (`None`: no key, or a null one).
fn parse_key(
    key: Option<&[u8]>,
    schema: &Schema,
) -> Result<Option<Map<String, Json>>, DecodeError> {
    match key {
        None => Ok(None),
        Some(bytes) => object(parse(bytes, "key")?, "key", !has_payload_column(schema)),
    }
}

/// Whether a row of `schema` could itself look like a Kafka Connect
/// wrapping (`{"schema":…,"payload":…}`), which is then not unwrapped.
fn has_payload_column(schema: &Schema) -> bool {
    schema.index_of("payload").is_some()
}

/// Whether `obj` carries every key column of `schema`.
fn has_keys(schema: &Schema, obj: &Map<String, Json>) -> bool {
    schema
        .key_columns()
        .iter()
        .all(|c| obj.contains_key(c.name()))
}

/// A row of `schema` from `obj`: its key columns, from `obj` or else from
/// `key` (both: they must agree), and, unless `keys_only`, every other
/// column `obj` carries.
fn build(
    schema: &Schema,
    obj: &Map<String, Json>,
    key: Option<&Map<String, Json>>,
    keys_only: bool,
) -> Result<Row, DecodeError> {
    let mut row = schema.new_row();
    for (i, column) in schema.columns().iter().enumerate() {
        if Some(i) == schema.is_deleted_index() || (keys_only && !column.is_key()) {
            continue;
        }
        let in_obj = obj.get(column.name());
        let value = if column.is_key() {
            let in_key = key.and_then(|k| k.get(column.name()));
            match (in_obj, in_key) {
                (Some(a), Some(b)) => {
                    let value = cell(column, a)?;
                    if cell(column, b)? != value {
                        return Err(DecodeError::KeyMismatch {
                            column: column.name().to_string(),
                        });
                    }
                    value
                }
                (Some(json), None) | (None, Some(json)) => cell(column, json)?,
                (None, None) => {
                    return Err(DecodeError::MissingKey {
                        column: column.name().to_string(),
                    })
                }
            }
        } else {
            match in_obj {
                Some(json) => cell(column, json)?,
                None => continue,
            }
        };
        row.set(i, &value).map_err(|source| DecodeError::Refused {
            column: column.name().to_string(),
            source,
        })?;
    }
    Ok(row)
}

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
    }
}

/// The value of `column` that `json` holds.
fn cell(column: &ColumnSchema, json: &Json) -> Result<Value, DecodeError> {
    let wrong = || DecodeError::WrongType {
        column: column.name().to_string(),
        column_type: column.type_display(),
        expected: expected(column.data_type()),
        found: describe(Some(json)),
    };
    let out_of_range = |value: String| DecodeError::OutOfRange {
        column: column.name().to_string(),
        column_type: column.type_display(),
        value,
    };
    if json.is_null() {
        return if column.is_nullable() {
            Ok(Value::Null)
        } else {
            Err(DecodeError::NullInNotNull {
                column: column.name().to_string(),
            })
        };
    }
    let int = || -> Result<i128, DecodeError> {
        match integer(json) {
            Int::Value(n) => Ok(n),
            Int::TooLarge => Err(out_of_range(short(json))),
            Int::Not => Err(wrong()),
        }
    };
    let fits = |n: i128| out_of_range(n.to_string());
    Ok(match column.data_type() {
        DataType::Bool => Value::Bool(json.as_bool().ok_or_else(wrong)?),
        DataType::Int8 => Value::Int8(int().and_then(|n| i8::try_from(n).map_err(|_| fits(n)))?),
        DataType::Int16 => Value::Int16(int().and_then(|n| i16::try_from(n).map_err(|_| fits(n)))?),
        DataType::Int32 => Value::Int32(int().and_then(|n| i32::try_from(n).map_err(|_| fits(n)))?),
        DataType::Int64 => Value::Int64(int().and_then(|n| i64::try_from(n).map_err(|_| fits(n)))?),
        DataType::UnixtimeMicros => {
            Value::UnixtimeMicros(int().and_then(|n| i64::try_from(n).map_err(|_| fits(n)))?)
        }
        // The shortest digits of the parsed double read back as a float:
        // narrowing the double instead would round twice, which gets some
        // floats wrong (7.038531e-26).
        DataType::Float => {
            let f: f32 = float(json).ok_or_else(wrong)?;
            // A finite double beyond FLOAT's range would read as infinity.
            if f.is_infinite() && json.is_number() {
                return Err(out_of_range(short(json)));
            }
            Value::Float(f)
        }
        DataType::Double => Value::Double(float(json).ok_or_else(wrong)?),
        DataType::Decimal32 | DataType::Decimal64 | DataType::Decimal128 => {
            let text = match json {
                Json::String(s) => s.clone(),
                Json::Number(n) => {
                    let text = n.to_string();
                    if !n.is_i64() && !n.is_u64() && significant_digits(&text) > 15 {
                        return Err(DecodeError::InexactNumber {
                            column: column.name().to_string(),
                            column_type: column.type_display(),
                            value: text,
                        });
                    }
                    text
                }
                _ => return Err(wrong()),
            };
            match Decimal::parse(&text, column.precision(), column.scale()) {
                Ok(d) => Value::from(d),
                Err(DecimalError::Syntax { .. }) => return Err(wrong()),
                Err(_) => return Err(out_of_range(short(json))),
            }
        }
        DataType::String | DataType::Varchar => {
            let s = json.as_str().ok_or_else(wrong)?;
            if let Some(max) = column.varchar_length() {
                let chars = s.chars().count();
                if column.data_type() == DataType::Varchar && chars > max as usize {
                    return Err(out_of_range(format!("a string of {chars} characters")));
                }
            }
            Value::String(s.to_string())
        }
        DataType::Binary => Value::Binary(json.as_str().and_then(base64_decode).ok_or_else(wrong)?),
        DataType::Date => {
            let days = match json.as_str().and_then(civil_date) {
                Some(Ok(days)) => i128::from(days),
                Some(Err(())) => return Err(out_of_range(short(json))),
                None => int()?,
            };
            match i32::try_from(days) {
                Ok(days) if (MIN_DATE..=MAX_DATE).contains(&days) => Value::Date(days),
                _ => return Err(out_of_range(short(json))),
            }
        }
        DataType::IsDeleted => return Err(wrong()),
    })
}

/// Kudu's DATE range, 0001-01-01 ..= 9999-12-31, in days since the epoch.
const MIN_DATE: i32 = -719_162;
const MAX_DATE: i32 = 2_932_896;

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
fn base64_decode(s: &str) -> Option<Vec<u8>> {
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
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A JSON value for an error message: its kind, and its text if short.
fn describe(json: Option<&Json>) -> String {
    match json {
        None => "nothing".to_string(),
        Some(Json::Null) => "null".to_string(),
        Some(Json::Bool(b)) => b.to_string(),
        Some(Json::Number(n)) => format!("the number {n}"),
        Some(s @ Json::String(_)) => format!("the string {}", short(s)),
        Some(Json::Array(_)) => "an array".to_string(),
        Some(Json::Object(_)) => "an object".to_string(),
    }
}

/// A scalar's JSON text, cut to a length an error message can carry.
fn short(json: &Json) -> String {
    const MAX: usize = 64;
    let text = match json {
        Json::Number(n) => return Number::to_string(n),
        other => other.to_string(),
    };
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests;
