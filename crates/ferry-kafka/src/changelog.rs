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

use kudu_client::schema::{Row, Schema};
use serde_json::{Map, Number, Value as Json};

mod cell;
#[cfg(test)]
mod tests;

use cell::cell;
#[cfg(test)]
use cell::{base64_decode, days_from_civil, MAX_DATE, MIN_DATE};

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
    NotJson {
        /// `key` or `value`.
        part: &'static str,
        /// The JSON parser's message.
        reason: String,
    },
    /// A part that must be a JSON object is something else.
    #[error("the record's {part} should be a JSON object, found {found}")]
    NotAnObject {
        /// `key`, `value` or a part of the envelope.
        part: &'static str,
        /// What the part is instead (a JSON kind, e.g. `an array`).
        found: String,
    },
    /// Neither the record's value nor its key carries a key column.
    #[error("the record carries no value for key column '{column}'")]
    MissingKey {
        /// The key column without a value.
        column: String,
    },
    /// The table has a non-unique primary key and the record does not name
    /// the row's hidden id. Applying it anyway would need an INSERT, which
    /// adds another row on every redelivery, and a delete or update could
    /// not say which row it means.
    #[error("the record carries no value for '{column}', the hidden key column of a table with a non-unique primary key: only records that name the row's id (as ferry's Kafka sink writes them) can be applied")]
    MissingAutoIncrementingId {
        /// The hidden key column (`auto_incrementing_id`).
        column: String,
    },
    /// The record's key and value disagree on a key column.
    #[error("the record's key and value disagree on key column '{column}'")]
    KeyMismatch {
        /// The key column the two disagree on.
        column: String,
    },
    /// A JSON value that cannot be read as the column's type.
    #[error("column '{column}' ({column_type}): expected {expected}, found {found}")]
    WrongType {
        /// The column.
        column: String,
        /// Its Kudu type as the schema shows it (e.g. `DECIMAL(10, 2)`).
        column_type: String,
        /// What the column accepts, in words.
        expected: &'static str,
        /// What the record has instead, shortened.
        found: String,
    },
    /// A value of the right kind that the column cannot hold (integer
    /// range, DECIMAL precision or scale, VARCHAR length, DATE range).
    #[error("column '{column}' ({column_type}): {value} does not fit")]
    OutOfRange {
        /// The column.
        column: String,
        /// Its Kudu type as the schema shows it.
        column_type: String,
        /// The value (shortened) or a description of it.
        value: String,
    },
    /// A JSON number for a DECIMAL with more digits than a double holds,
    /// so its exact value is lost.
    #[error(
        "column '{column}' ({column_type}): the JSON number {value} has more than 15 \
         significant digits, which a double does not hold exactly (send decimals as strings)"
    )]
    InexactNumber {
        /// The DECIMAL column.
        column: String,
        /// Its Kudu type as the schema shows it.
        column_type: String,
        /// The number as JSON text.
        value: String,
    },
    /// `null` for a NOT NULL column.
    #[error("column '{column}' is NOT NULL and the record has null")]
    NullInNotNull {
        /// The NOT NULL column.
        column: String,
    },
    /// A Debezium envelope whose `op` is missing or not one of c, r, u, d, t.
    #[error("{}", unknown_op(.op.as_deref()))]
    UnknownOp {
        /// The op as the record has it (JSON text if not a string); `None`
        /// if there is none.
        op: Option<String>,
    },
    /// A change this decoder does not apply (a truncate).
    #[error("{what} is not supported")]
    Unsupported {
        /// The change, in words (e.g. a truncate).
        what: String,
    },
    /// The decoded value was refused by the row (not expected: values are
    /// checked first).
    #[error("setting column '{column}'")]
    Refused {
        /// The column.
        column: String,
        /// The row's refusal.
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
/// purpose (a Debezium tombstone that follows a delete, a ferry watermark
/// record).
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
    // A ferry Kudu → Kafka topic's watermarks carry no change.
    if value.as_ref().is_some_and(crate::watermark::is_watermark) {
        return Ok(None);
    }
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
                (None, None) if column.is_auto_incrementing() => {
                    return Err(DecodeError::MissingAutoIncrementingId {
                        column: column.name().to_string(),
                    })
                }
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
