//! Column definitions ([`ColumnSchema`]) and their builder.
//!
//! A column carries everything `ColumnSchemaPB` can say about it, so a
//! schema read from one cluster can be re-created on another unchanged.

use super::types::{
    Compression, DataType, Encoding, TypeAttributes, MAX_DECIMAL_PRECISION, MAX_VARCHAR_LENGTH,
};
use super::value::{check_date, pow10, Value, ValueRef};
use crate::{Error, Result};

/// One column of a table or projection schema.
///
/// Built with [`ColumnSchema::builder`]; the builder validates type
/// attributes, key rules and the default value, so a `ColumnSchema` is
/// always self-consistent.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSchema {
    pub(crate) name: String,
    pub(crate) data_type: DataType,
    pub(crate) type_attributes: Option<TypeAttributes>,
    pub(crate) nullable: bool,
    pub(crate) is_key: bool,
    pub(crate) default_value: Option<Value>,
    pub(crate) encoding: Encoding,
    pub(crate) compression: Compression,
    pub(crate) block_size: Option<i32>,
    pub(crate) comment: Option<String>,
    pub(crate) immutable: bool,
    pub(crate) auto_incrementing: bool,
    pub(crate) id: Option<u32>,
}

impl ColumnSchema {
    /// Starts a column definition.
    pub fn builder(name: impl Into<String>, data_type: DataType) -> ColumnSchemaBuilder {
        ColumnSchemaBuilder::new(name, data_type)
    }

    /// The virtual IS_DELETED column a diff-scan projection must contain
    /// (docs/kudu-protocol.md#diff-scans): non-nullable with read default
    /// `false`.
    pub fn is_deleted(name: impl Into<String>) -> ColumnSchema {
        ColumnSchema {
            name: name.into(),
            data_type: DataType::IsDeleted,
            type_attributes: None,
            nullable: false,
            is_key: false,
            default_value: Some(Value::Bool(false)),
            encoding: Encoding::Auto,
            compression: Compression::Default,
            block_size: None,
            comment: None,
            immutable: false,
            auto_incrementing: false,
            id: None,
        }
    }

    /// Column name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Column type.
    pub fn data_type(&self) -> DataType {
        self.data_type
    }
    /// DECIMAL precision/scale or VARCHAR length, if any.
    pub fn type_attributes(&self) -> Option<TypeAttributes> {
        self.type_attributes
    }
    /// Whether the column accepts NULL.
    pub fn is_nullable(&self) -> bool {
        self.nullable
    }
    /// Whether the column is part of the primary key.
    pub fn is_key(&self) -> bool {
        self.is_key
    }
    /// The column's default value. Read from `write_default_value` (what the
    /// server fills in for new writes) and sent as `read_default_value`
    /// (what CreateTable / AlterTable expect); see `schema::convert`.
    pub fn default_value(&self) -> Option<&Value> {
        self.default_value.as_ref()
    }
    /// Storage encoding hint.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
    /// Block compression hint.
    pub fn compression(&self) -> Compression {
        self.compression
    }
    /// cfile block size hint.
    pub fn block_size(&self) -> Option<i32> {
        self.block_size
    }
    /// Column comment.
    pub fn comment(&self) -> Option<&str> {
        self.comment.as_deref()
    }
    /// Whether the column is immutable (1.17+).
    pub fn is_immutable(&self) -> bool {
        self.immutable
    }
    /// Whether this is the auto-incrementing key column of a table with a
    /// non-unique primary key (1.17+).
    pub fn is_auto_incrementing(&self) -> bool {
        self.auto_incrementing
    }
    /// The id the master assigned, if this schema came from the master.
    pub fn id(&self) -> Option<u32> {
        self.id
    }
    /// DECIMAL precision (0 for other types).
    pub fn precision(&self) -> u8 {
        self.type_attributes.and_then(|a| a.precision).unwrap_or(0)
    }
    /// DECIMAL scale (0 for other types).
    pub fn scale(&self) -> u8 {
        self.type_attributes.and_then(|a| a.scale).unwrap_or(0)
    }
    /// VARCHAR maximum length in characters.
    pub fn varchar_length(&self) -> Option<u32> {
        self.type_attributes.and_then(|a| a.length)
    }

    /// A copy of this column as a non-key column (projections sent to a
    /// scan do not need key flags).
    pub fn to_non_key(&self) -> ColumnSchema {
        ColumnSchema {
            is_key: false,
            ..self.clone()
        }
    }

    /// Checks that `value` may be stored in this column: kind, nullability,
    /// DECIMAL precision, VARCHAR length and DATE range.
    pub fn check_value(&self, value: ValueRef<'_>) -> Result<()> {
        if value.is_null() {
            return if self.nullable {
                Ok(())
            } else {
                Err(Error::InvalidArgument(format!(
                    "column '{}' is not nullable",
                    self.name
                )))
            };
        }
        if !value.fits_type(self.data_type) {
            return Err(self.type_mismatch(value.kind()));
        }
        match value {
            ValueRef::Decimal(v) => self.check_decimal(v),
            ValueRef::String(s) => self.check_varchar(s),
            ValueRef::Date(d) => check_date(d),
            _ => Ok(()),
        }
    }

    /// Error for a setter or getter of the wrong type.
    pub(crate) fn type_mismatch(&self, actual: &str) -> Error {
        Error::InvalidArgument(format!(
            "column '{}' has type {}, not {actual}",
            self.name,
            self.type_display()
        ))
    }

    /// Rejects unscaled values with more digits than the precision allows.
    pub(crate) fn check_decimal(&self, unscaled: i128) -> Result<()> {
        let precision = self.precision();
        let limit = pow10(precision.min(MAX_DECIMAL_PRECISION));
        if unscaled.unsigned_abs() >= limit.unsigned_abs() {
            return Err(Error::InvalidArgument(format!(
                "value {unscaled} (scale {}) does not fit column '{}' {}",
                self.scale(),
                self.name,
                self.type_display()
            )));
        }
        Ok(())
    }

    /// Rejects strings longer than a VARCHAR column's length in characters.
    pub(crate) fn check_varchar(&self, s: &str) -> Result<()> {
        if let (DataType::Varchar, Some(max)) = (self.data_type, self.varchar_length()) {
            // Byte length bounds char count, so skip counting short strings.
            if s.len() > max as usize && s.chars().count() > max as usize {
                return Err(Error::InvalidArgument(format!(
                    "value of {} characters is too long for column '{}' VARCHAR({max})",
                    s.chars().count(),
                    self.name
                )));
            }
        }
        Ok(())
    }

    /// The type with its attributes, e.g. `DECIMAL(10, 2)` or `VARCHAR(20)`.
    pub fn type_display(&self) -> String {
        match self.data_type {
            t if t.is_decimal() => format!("DECIMAL({}, {})", self.precision(), self.scale()),
            DataType::Varchar => match self.varchar_length() {
                Some(n) => format!("VARCHAR({n})"),
                None => "VARCHAR".to_owned(),
            },
            t => t.name().to_owned(),
        }
    }
}

/// Builder for [`ColumnSchema`]; errors are reported by [`build`](Self::build).
#[derive(Debug, Clone)]
pub struct ColumnSchemaBuilder {
    col: ColumnSchema,
    /// A problem found before `build` (reported there).
    error: Option<String>,
}

impl ColumnSchemaBuilder {
    /// A nullable=false, non-key column of `data_type`.
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        ColumnSchemaBuilder {
            col: ColumnSchema {
                name: name.into(),
                data_type,
                type_attributes: None,
                nullable: false,
                is_key: false,
                default_value: None,
                encoding: Encoding::Auto,
                compression: Compression::Default,
                block_size: None,
                comment: None,
                immutable: false,
                auto_incrementing: false,
                id: None,
            },
            error: None,
        }
    }

    /// A DECIMAL(precision, scale) column; the wire width is chosen from the
    /// precision.
    pub fn decimal(name: impl Into<String>, precision: u8, scale: u8) -> Self {
        let (dt, error) = match DataType::decimal_for_precision(precision) {
            Ok(dt) => (dt, None),
            Err(_) => (
                DataType::Decimal128,
                Some(format!(
                    "decimal precision {precision} is outside 1..={MAX_DECIMAL_PRECISION}"
                )),
            ),
        };
        let mut b = Self::new(name, dt).type_attributes(TypeAttributes::decimal(precision, scale));
        b.error = b.error.or(error);
        b
    }

    /// A VARCHAR(length) column.
    pub fn varchar(name: impl Into<String>, length: u32) -> Self {
        Self::new(name, DataType::Varchar).type_attributes(TypeAttributes::varchar(length))
    }

    /// Marks the column as a primary-key column.
    pub fn key(mut self, is_key: bool) -> Self {
        self.col.is_key = is_key;
        self
    }
    /// Allows NULL values.
    pub fn nullable(mut self, nullable: bool) -> Self {
        self.col.nullable = nullable;
        self
    }
    /// Sets the type attributes directly.
    pub fn type_attributes(mut self, attrs: TypeAttributes) -> Self {
        self.col.type_attributes = Some(attrs);
        self
    }
    /// Sets the default value (checked in `build`).
    pub fn default_value(mut self, value: impl Into<Value>) -> Self {
        self.col.default_value = Some(value.into());
        self
    }
    /// Sets the storage encoding.
    pub fn encoding(mut self, encoding: Encoding) -> Self {
        self.col.encoding = encoding;
        self
    }
    /// Sets the block compression.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.col.compression = compression;
        self
    }
    /// Sets the cfile block size.
    pub fn block_size(mut self, block_size: i32) -> Self {
        self.col.block_size = Some(block_size);
        self
    }
    /// Sets the comment.
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.col.comment = Some(comment.into());
        self
    }
    /// Marks the column immutable (1.17+).
    pub fn immutable(mut self, immutable: bool) -> Self {
        self.col.immutable = immutable;
        self
    }
    /// Marks the column as the auto-incrementing key column (1.17+).
    pub fn auto_incrementing(mut self, auto_incrementing: bool) -> Self {
        self.col.auto_incrementing = auto_incrementing;
        self
    }
    /// Sets the master-assigned column id.
    pub fn id(mut self, id: u32) -> Self {
        self.col.id = Some(id);
        self
    }

    /// Validates and returns the column.
    pub fn build(self) -> Result<ColumnSchema> {
        if let Some(msg) = self.error {
            return Err(Error::InvalidArgument(format!(
                "column '{}': {msg}",
                self.col.name
            )));
        }
        let c = self.col;
        let bad = |msg: String| {
            Err(Error::InvalidArgument(format!(
                "column '{}': {msg}",
                c.name
            )))
        };
        if c.name.is_empty() {
            return Err(Error::InvalidArgument("column name is empty".into()));
        }
        if c.data_type.is_decimal() {
            let (p, s) = match c.type_attributes {
                Some(TypeAttributes {
                    precision: Some(p),
                    scale: Some(s),
                    ..
                }) => (p, s),
                _ => return bad("DECIMAL needs precision and scale".into()),
            };
            match DataType::decimal_for_precision(p) {
                Ok(dt) if dt == c.data_type => {}
                Ok(dt) => {
                    return bad(format!(
                        "precision {p} needs type {dt}, not {}",
                        c.data_type
                    ))
                }
                Err(e) => return Err(e),
            }
            if s > p {
                return bad(format!("scale {s} exceeds precision {p}"));
            }
        }
        if c.data_type == DataType::Varchar {
            match c.varchar_length() {
                Some(n) if (1..=MAX_VARCHAR_LENGTH).contains(&n) => {}
                _ => {
                    return bad(format!(
                        "VARCHAR needs a length in 1..={MAX_VARCHAR_LENGTH}"
                    ))
                }
            }
        }
        if c.is_key {
            if c.nullable {
                return bad("key columns cannot be nullable".into());
            }
            if !c.data_type.is_keyable() {
                return bad(format!("type {} cannot be a key column", c.data_type));
            }
        }
        if c.data_type == DataType::IsDeleted && c.nullable {
            return bad("IS_DELETED columns cannot be nullable".into());
        }
        if c.auto_incrementing && (c.data_type != DataType::Int64 || !c.is_key) {
            return bad("the auto-incrementing column must be an INT64 key column".into());
        }
        if let Some(v) = &c.default_value {
            c.check_value(v.as_ref())?;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_validates_decimals() {
        let c = ColumnSchemaBuilder::decimal("d", 10, 2).build().unwrap();
        assert_eq!(c.data_type(), DataType::Decimal64);
        assert_eq!((c.precision(), c.scale()), (10, 2));
        assert_eq!(c.type_display(), "DECIMAL(10, 2)");
        assert!(ColumnSchemaBuilder::decimal("d", 5, 6).build().is_err());
        assert!(ColumnSchemaBuilder::decimal("d", 40, 0).build().is_err());
        assert!(ColumnSchema::builder("d", DataType::Decimal32)
            .type_attributes(TypeAttributes::decimal(12, 0))
            .build()
            .is_err());
        assert!(ColumnSchema::builder("d", DataType::Decimal32)
            .build()
            .is_err());
    }

    #[test]
    fn builder_validates_keys_and_defaults() {
        assert!(ColumnSchema::builder("k", DataType::Int32)
            .key(true)
            .nullable(true)
            .build()
            .is_err());
        assert!(ColumnSchema::builder("k", DataType::Double)
            .key(true)
            .build()
            .is_err());
        assert!(ColumnSchema::builder("v", DataType::Int32)
            .default_value(5i64)
            .build()
            .is_err());
        assert!(ColumnSchema::builder("v", DataType::Int32)
            .default_value(Value::Null)
            .build()
            .is_err());
        let c = ColumnSchema::builder("v", DataType::Int32)
            .nullable(true)
            .default_value(Value::Null)
            .build()
            .unwrap();
        assert_eq!(c.default_value(), Some(&Value::Null));
    }

    #[test]
    fn check_value_limits() {
        let d = ColumnSchemaBuilder::decimal("d", 3, 1).build().unwrap();
        assert!(d.check_value(ValueRef::Decimal(999)).is_ok());
        assert!(d.check_value(ValueRef::Decimal(-999)).is_ok());
        let err = d.check_value(ValueRef::Decimal(1000)).unwrap_err();
        assert!(err.to_string().contains("'d'"), "{err}");
        let v = ColumnSchemaBuilder::varchar("v", 3).build().unwrap();
        assert!(v.check_value(ValueRef::String("ééé")).is_ok());
        assert!(v.check_value(ValueRef::String("abcd")).is_err());
        let t = ColumnSchema::builder("t", DataType::Date).build().unwrap();
        assert!(t.check_value(ValueRef::Date(2_932_897)).is_err());
        let err = t.check_value(ValueRef::Int32(1)).unwrap_err();
        assert!(err.to_string().contains("DATE"), "{err}");
    }
}
