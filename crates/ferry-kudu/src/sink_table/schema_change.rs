//! Following the source's schema on the sink (`job.schemaEvolution`):
//! at a window boundary, bring the sink table in line with the source
//! table's schema now, matching columns by the source's column ids.
//!
//! The source schema travels as a [`SchemaRecord`] (JSON, [`record_of`]):
//! table name and id, every column with its id and attributes, and the
//! range partitions with their hash schemas. [`follow`] compares the
//! source schema now with the one applied last (by column id: adds, drops,
//! renames), then looks at the sink as it is to decide what is left to do,
//! so a crash between the sink ALTER and the checkpoint re-runs cleanly
//! (a rename already done is adopted, a column already added is kept).
//! Changes that would lose or mismatch data are refused with a
//! [`SchemaChangeError`] naming the table and column.

use ferry_engine::connector::SchemaRecord;
use kudu_client::partition::RangePartition;
use kudu_client::{ColumnSchema, KuduTable};
use serde::{Deserialize, Serialize};

/// A source schema change that ferry will not apply to the sink; the table
/// is paused and nothing of the next window is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaChangeError {
    /// A column kept its name but now has another type.
    #[error("column '{column}' of source table '{table}' changed type from {from} to {to}: ferry does not change a column's type on the sink (its data would be lost); change column '{column}' of sink table '{sink}' to {to} yourself (e.g. drop and re-add it), then restart the job")]
    TypeChange {
        /// The table concerned.
        table: String,
        /// The sink table.
        sink: String,
        /// The column.
        column: String,
        /// The type before.
        from: String,
        /// The type now.
        to: String,
    },
    /// The primary key columns changed.
    #[error("the primary key of source table '{table}' changed (now: {key}): ferry cannot follow a key change; re-create sink table '{sink}' from the source and start the job afresh")]
    KeyChange {
        /// The table concerned.
        table: String,
        /// The sink table.
        sink: String,
        /// The primary key columns.
        key: String,
    },
    /// A sink column no longer matches the source column it copies.
    #[error("column '{column}' of sink table '{sink}' was changed by someone else ({what}): make it match source column '{column}' of table '{table}' again, then restart the job")]
    SinkColumnChanged {
        /// The table concerned.
        table: String,
        /// The sink table.
        sink: String,
        /// The column.
        column: String,
        /// What is wrong or was recorded.
        what: String,
    },
    /// A schema record that ferry cannot read.
    #[error("the recorded schema of table '{table}' is not readable ({reason}): restore from a state written by this version of ferry, or set job.schemaEvolution=false")]
    BadRecord {
        /// The table concerned.
        table: String,
        /// Why.
        reason: String,
    },
    /// Placeholder kept for callers: one message.
    #[error("{0}")]
    Refused(String),
}

/// One column of a [`SchemaDoc`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDoc {
    /// The id.
    pub id: u32,
    /// The name.
    pub name: String,
    /// The type with its attributes, e.g. `DECIMAL(10, 2)`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Whether it is a primary key column.
    pub key: bool,
    /// Whether it is nullable.
    pub nullable: bool,
    /// The default value as text.
    pub default: Option<String>,
    /// Its encoding.
    pub encoding: String,
    /// Its compression.
    pub compression: String,
    /// Its block size, if set.
    pub block_size: Option<i32>,
    /// Its comment.
    pub comment: Option<String>,
    /// Whether it is immutable (Kudu 1.17+). Written only when true, so
    /// the records of tables without immutable columns are as before.
    #[serde(default, skip_serializing_if = "is_false")]
    pub immutable: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One range partition of a [`SchemaDoc`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeDoc {
    /// Encoded range keys, hex (empty: unbounded).
    pub lower: String,
    /// The upper bound (hex).
    pub upper: String,
    /// Hash dimensions: column names, buckets, seed.
    pub hash: Vec<(Vec<String>, u32, u32)>,
}

/// The decoded form of a Kudu [`SchemaRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaDoc {
    /// The table concerned.
    pub table: String,
    /// The id.
    pub id: String,
    /// The columns.
    pub columns: Vec<ColumnDoc>,
    /// The range partitions.
    pub ranges: Vec<RangeDoc>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn column_doc(c: &ColumnSchema) -> ColumnDoc {
    ColumnDoc {
        id: c.id().unwrap_or(0),
        name: c.name().to_owned(),
        type_name: c.type_display(),
        key: c.is_key(),
        nullable: c.is_nullable(),
        default: c.default_value().map(|v| v.to_string()),
        encoding: format!("{:?}", c.encoding()),
        compression: format!("{:?}", c.compression()),
        block_size: c.block_size(),
        comment: c.comment().map(str::to_owned),
        immutable: c.is_immutable(),
    }
}

/// The schema of `table` (with its range partitions `ranges`) as a record.
pub fn doc_of(table: &KuduTable, ranges: &[RangePartition]) -> SchemaDoc {
    let schema = table.schema();
    let name_of = |i: &usize| {
        schema
            .column(*i)
            .map(|c| c.name().to_owned())
            .unwrap_or_default()
    };
    SchemaDoc {
        table: table.name().to_owned(),
        id: table.id().to_owned(),
        columns: schema.columns().iter().map(column_doc).collect(),
        ranges: ranges
            .iter()
            .map(|r| RangeDoc {
                lower: hex(&r.lower_key),
                upper: hex(&r.upper_key),
                hash: r
                    .hash_schema
                    .iter()
                    .map(|d| {
                        (
                            d.columns().iter().map(name_of).collect(),
                            d.num_buckets(),
                            d.seed(),
                        )
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// [`doc_of`] as a [`SchemaRecord`].
pub fn record_of(
    table: &KuduTable,
    ranges: &[RangePartition],
) -> Result<SchemaRecord, SchemaChangeError> {
    serde_json::to_value(doc_of(table, ranges))
        .map(SchemaRecord)
        .map_err(|e| SchemaChangeError::BadRecord {
            table: table.name().to_owned(),
            reason: e.to_string(),
        })
}

/// Reads a record written by [`record_of`].
pub fn parse(record: &SchemaRecord, table: &str) -> Result<SchemaDoc, SchemaChangeError> {
    serde_json::from_value(record.0.clone()).map_err(|e| SchemaChangeError::BadRecord {
        table: table.to_owned(),
        reason: e.to_string(),
    })
}

mod follow;
pub use follow::{follow, FollowOutcome, FollowTarget};
