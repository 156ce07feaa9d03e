//! Column types, schemas, and rows that are cheap to build and to read.
//!
//! - `types`: [`DataType`] with its fixed cell width, type attributes,
//!   encodings and compressions.
//! - `value`: generic owned / borrowed cell values ([`Value`],
//!   [`ValueRef`]) and the value encoding used by defaults and predicates.
//! - `decimal`: [`Decimal`], an exact DECIMAL(precision, scale) value with
//!   its text form and parser.
//! - `column`: [`ColumnSchema`] and its builder.
//! - `table`: [`Schema`] (columns plus derived row layout) and
//!   [`ColumnIndex`] (select a column by index or name).
//! - `row`: [`Row`], a partial row in wire layout with typed accessors.
//! - `convert`: conversions to and from the protobuf messages
//!   (`SchemaPbOptions` picks what a request needs).

pub(crate) mod cell;
pub(crate) mod column;
pub(crate) mod convert;
pub(crate) mod decimal;
pub(crate) mod row;
pub(crate) mod table;
pub(crate) mod types;
pub(crate) mod value;

pub use column::{ColumnSchema, ColumnSchemaBuilder};
pub(crate) use convert::SchemaPbOptions;
pub use decimal::{Decimal, DecimalError};
pub use row::Row;
pub use table::{ColumnIndex, Schema};
pub use types::{Compression, DataType, Encoding, TypeAttributes};
pub use value::{Value, ValueRef};
