//! Record formats: how one changed row of a window becomes a Kafka record
//! (docs/kafka.md has examples).
//!
//! The record key is always the row's primary key as a JSON object
//! (`{"id":7}`), so key-hash partitioning keeps every change of a row in
//! one partition, in order. The value:
//!
//! - `debezium-json`: `{"before":…,"after":…,"source":{…},"op":…,"ts_ms":…}`.
//!   A diff scan knows a row's state at the window's end, not what it was
//!   before, nor whether it was inserted or updated: so `before` is `null`
//!   for live rows, `op` is `r` in the snapshot and `c` (create-or-replace)
//!   after it, and a delete is `op` `d` with the key columns in `before` and
//!   `after` `null`.
//! - `upsert-json`: the whole row as a JSON object; a delete is a tombstone
//!   (null value), so a compacted topic keeps each key's latest row.
//!
//! Cell values: BOOL as `true`/`false`; INT8..INT64 as JSON integers;
//! FLOAT/DOUBLE as numbers (`"NaN"`, `"Infinity"`, `"-Infinity"` as strings,
//! which JSON cannot hold otherwise); DECIMAL as a string with its scale
//! (`"-12.50"`, `kudu_client::Decimal`'s text, no precision lost); STRING/VARCHAR as strings; BINARY as
//! standard base64; UNIXTIME_MICROS as integer microseconds since the
//! epoch (Debezium's MicroTimestamp); DATE as integer days since
//! 1970-01-01 (Debezium's Date); NULL as `null`.

use crate::config::RecordFormat;
use ferry_engine::checkpoint::WindowState;
use ferry_engine::connector::Source;
use ferry_engine::SourceTime;
use ferry_kudu::KuduSource;
use kudu_client::scan::RowView;
use kudu_client::schema::ValueRef;
use kudu_client::{ColumnSchema, Decimal, Schema};
use std::io::Write;

/// What the records say of the window their changes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowInfo {
    /// The Kudu source's (hybrid) time the window starts after (`None`:
    /// the snapshot).
    pub start: Option<SourceTime>,
    /// The Kudu source's (hybrid) time the window ends at (the snapshot's
    /// time).
    pub end: SourceTime,
}

impl From<WindowState> for WindowInfo {
    fn from(w: WindowState) -> Self {
        WindowInfo {
            start: w.start_timestamp,
            end: w.end_timestamp,
        }
    }
}

impl WindowInfo {
    /// The window end as milliseconds since the epoch, as the Kudu
    /// source's clock reads it.
    pub fn end_ms(&self) -> u64 {
        KuduSource::CLOCK.epoch_millis(self.end)
    }
}

/// Why a row could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// A cell could not be read from the scan batch.
    #[error("reading column '{column}' of a row")]
    Cell {
        /// The column.
        column: String,
        /// The batch's error.
        #[source]
        source: kudu_client::Error,
    },
}

/// A row's cells, as the encoder reads them: a scan batch's [`RowView`],
/// or plain values in tests.
pub trait Cells {
    /// The cell of projected column `i`.
    fn cell(&self, i: usize) -> kudu_client::Result<ValueRef<'_>>;
    /// Whether a diff scan reported the row deleted.
    fn deleted(&self) -> bool;
}

impl Cells for RowView<'_> {
    fn cell(&self, i: usize) -> kudu_client::Result<ValueRef<'_>> {
        self.get(i)
    }

    fn deleted(&self) -> bool {
        self.is_deleted()
    }
}

/// One encoded record: key and value (`None`: a tombstone).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's key.
    pub key: Vec<u8>,
    /// The record's value; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// Turns rows of one source table into records.
#[derive(Debug, Clone)]
pub struct Encoder {
    format: RecordFormat,
    table: String,
    job: String,
    /// The source table's primary key columns (a scan's projection marks
    /// no column as key).
    keys: Vec<String>,
}

impl Encoder {
    /// An encoder for rows of source table `table`, replicated by job
    /// `job` (its `job.name`, Debezium's `source.name`). The key columns
    /// are set with [`Encoder::set_keys`] once known.
    pub fn new(format: RecordFormat, table: impl Into<String>, job: impl Into<String>) -> Self {
        Encoder {
            format,
            table: table.into(),
            job: job.into(),
            keys: Vec::new(),
        }
    }

    /// The source table's primary key columns, by name.
    pub fn set_keys(&mut self, keys: Vec<String>) {
        self.keys = keys;
    }

    /// The source table's name the records carry.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Follows a renamed source table.
    pub fn set_table(&mut self, table: impl Into<String>) {
        self.table = table.into();
    }

    /// Encodes `row` (of a batch whose projection is `schema`) into `out`,
    /// reusing its buffers.
    pub fn encode(
        &self,
        schema: &Schema,
        row: &impl Cells,
        window: WindowInfo,
        out: &mut Record,
    ) -> Result<(), FormatError> {
        let deleted = row.deleted();
        out.key.clear();
        write_object(&mut out.key, schema, row, Some(&self.keys))?;
        let mut value = out.value.take().unwrap_or_default();
        value.clear();
        match self.format {
            RecordFormat::UpsertJson => {
                if !deleted {
                    write_object(&mut value, schema, row, None)?;
                    out.value = Some(value);
                }
            }
            RecordFormat::DebeziumJson => {
                let op = match (deleted, window.start) {
                    (true, _) => "d",
                    (false, None) => "r",
                    (false, Some(_)) => "c",
                };
                value.extend_from_slice(b"{\"before\":");
                if deleted {
                    write_object(&mut value, schema, row, Some(&self.keys))?;
                    value.extend_from_slice(b",\"after\":null");
                } else {
                    value.extend_from_slice(b"null,\"after\":");
                    write_object(&mut value, schema, row, None)?;
                }
                value.extend_from_slice(b",\"source\":{\"version\":\"");
                value.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
                value.extend_from_slice(b"\",\"connector\":\"ferry-kudu\",\"name\":");
                write_str(&mut value, &self.job);
                let _ = write!(
                    value,
                    ",\"ts_ms\":{},\"snapshot\":\"{}\",\"db\":\"kudu\",\"table\":",
                    window.end_ms(),
                    window.start.is_none()
                );
                write_str(&mut value, &self.table);
                value.extend_from_slice(b",\"window_start\":");
                match window.start {
                    Some(start) => {
                        let _ = write!(value, "{start}");
                    }
                    None => value.extend_from_slice(b"null"),
                }
                let _ = write!(
                    value,
                    ",\"window_end\":{}}},\"op\":\"{op}\",\"ts_ms\":{}}}",
                    window.end,
                    window.end_ms()
                );
                out.value = Some(value);
            }
        }
        Ok(())
    }
}

/// `{"col":value,…}` of the columns named in `only`, or of every column;
/// IS_DELETED is never written.
fn write_object(
    out: &mut Vec<u8>,
    schema: &Schema,
    row: &impl Cells,
    only: Option<&[String]>,
) -> Result<(), FormatError> {
    out.push(b'{');
    let mut first = true;
    for (i, column) in schema.columns().iter().enumerate() {
        let left_out = only.is_some_and(|names| !names.iter().any(|n| n == column.name()));
        if Some(i) == schema.is_deleted_index() || left_out {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_str(out, column.name());
        out.push(b':');
        row.cell(i)
            .and_then(|value| write_value(out, value, column))
            .map_err(|source| FormatError::Cell {
                column: column.name().to_string(),
                source,
            })?;
    }
    out.push(b'}');
    Ok(())
}

/// One cell of `column`; refused only for a DECIMAL with more digits than
/// its column's precision (and a cell type newer than this format).
fn write_value(
    out: &mut Vec<u8>,
    value: ValueRef<'_>,
    column: &ColumnSchema,
) -> kudu_client::Result<()> {
    // Writing to a Vec cannot fail.
    let _ = match value {
        ValueRef::Null => write!(out, "null"),
        ValueRef::Bool(b) => write!(out, "{b}"),
        ValueRef::Int8(n) => write!(out, "{n}"),
        ValueRef::Int16(n) => write!(out, "{n}"),
        ValueRef::Int32(n) => write!(out, "{n}"),
        ValueRef::Int64(n) => write!(out, "{n}"),
        ValueRef::Float(f) => write_float(out, f64::from(f), |out| serde_json::to_writer(out, &f)),
        ValueRef::Double(f) => write_float(out, f, |out| serde_json::to_writer(out, &f)),
        ValueRef::Decimal(unscaled) => {
            let d = Decimal::new(unscaled, column.precision(), column.scale())?;
            write!(out, "\"{d}\"")
        }
        ValueRef::String(s) => {
            write_str(out, s);
            Ok(())
        }
        ValueRef::Binary(bytes) => {
            out.push(b'"');
            base64(out, bytes);
            out.push(b'"');
            Ok(())
        }
        ValueRef::UnixtimeMicros(us) => write!(out, "{us}"),
        ValueRef::Date(days) => write!(out, "{days}"),
        _ => {
            return Err(kudu_client::Error::InvalidArgument(format!(
                "cells of type {} have no JSON form",
                column.data_type()
            )))
        }
    };
    Ok(())
}

/// A finite float as a JSON number, in the shortest form that reads back
/// to the same value (a FLOAT's own digits, not widened to a DOUBLE's;
/// exponent form for very large and small values); NaN and infinities as
/// strings.
fn write_float(
    out: &mut Vec<u8>,
    f: f64,
    number: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
) -> std::io::Result<()> {
    if f.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if f.is_infinite() {
        out.extend_from_slice(if f > 0.0 {
            b"\"Infinity\""
        } else {
            b"\"-Infinity\""
        });
    } else {
        number(out).map_err(std::io::Error::other)?;
    }
    Ok(())
}

/// A JSON string literal (escaped as serde_json does).
fn write_str(out: &mut Vec<u8>, s: &str) {
    // Serialising a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(out: &mut Vec<u8>, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

#[cfg(test)]
mod tests;
