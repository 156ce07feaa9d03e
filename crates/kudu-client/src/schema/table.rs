//! [`Schema`]: an ordered list of columns with the derived layout every row
//! codec needs (cell offsets, row size, bitmaps), shared behind an `Arc`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::column::ColumnSchema;
use super::types::DataType;
use crate::{Error, Result};

/// A table or projection schema. Cloning is an `Arc` bump, so rows and
/// batches each hold their schema.
///
/// Invariants (checked by [`Schema::new`]): column names are unique, key
/// columns come first, key columns are non-nullable and of a keyable type.
#[derive(Clone)]
pub struct Schema {
    inner: Arc<Inner>,
}

struct Inner {
    columns: Vec<ColumnSchema>,
    num_key_columns: usize,
    by_name: HashMap<String, usize>,
    /// Byte offset of each column's cell inside the fixed part of a row.
    offsets: Vec<usize>,
    /// Sum of all cell widths (no bitmaps).
    row_size: usize,
    has_nullable: bool,
    var_len: Vec<usize>,
    is_deleted: Option<usize>,
    auto_incrementing: Option<usize>,
}

impl Schema {
    /// Builds a schema; the key columns are those with `is_key`, and they
    /// must form a prefix. A schema may have no key columns (projections)
    /// and no columns at all (count-only scans).
    pub fn new(columns: Vec<ColumnSchema>) -> Result<Schema> {
        let num_key_columns = columns.iter().take_while(|c| c.is_key()).count();
        if let Some(c) = columns[num_key_columns..].iter().find(|c| c.is_key()) {
            return Err(Error::InvalidArgument(format!(
                "key column '{}' must come before all non-key columns",
                c.name()
            )));
        }
        let mut by_name = HashMap::with_capacity(columns.len());
        let mut offsets = Vec::with_capacity(columns.len());
        let mut row_size = 0;
        let mut var_len = Vec::new();
        let mut is_deleted = None;
        let mut auto_incrementing = None;
        for (i, c) in columns.iter().enumerate() {
            if by_name.insert(c.name().to_owned(), i).is_some() {
                return Err(Error::InvalidArgument(format!(
                    "duplicate column name '{}'",
                    c.name()
                )));
            }
            // Columns built without the builder (e.g. from protobuf) are
            // re-checked here for the key rules.
            if c.is_key() && (c.is_nullable() || !c.data_type().is_keyable()) {
                return Err(Error::InvalidArgument(format!(
                    "key column '{}' must be non-nullable and of a key type (is {})",
                    c.name(),
                    c.data_type()
                )));
            }
            offsets.push(row_size);
            row_size += c.data_type().size();
            if c.data_type().is_var_len() {
                var_len.push(i);
            }
            if c.data_type() == DataType::IsDeleted {
                if is_deleted.is_some() {
                    return Err(Error::InvalidArgument(
                        "a schema may contain only one IS_DELETED column".into(),
                    ));
                }
                is_deleted = Some(i);
            }
            if c.is_auto_incrementing() {
                auto_incrementing = Some(i);
            }
        }
        let has_nullable = columns.iter().any(|c| c.is_nullable());
        Ok(Schema {
            inner: Arc::new(Inner {
                columns,
                num_key_columns,
                by_name,
                offsets,
                row_size,
                has_nullable,
                var_len,
                is_deleted,
                auto_incrementing,
            }),
        })
    }

    /// All columns in order.
    pub fn columns(&self) -> &[ColumnSchema] {
        &self.inner.columns
    }
    /// Column `idx`, if it exists.
    pub fn column(&self, idx: usize) -> Option<&ColumnSchema> {
        self.inner.columns.get(idx)
    }
    /// The column called `name`, if any.
    pub fn column_by_name(&self, name: &str) -> Option<&ColumnSchema> {
        self.index_of(name).map(|i| &self.inner.columns[i])
    }
    /// Number of columns.
    pub fn len(&self) -> usize {
        self.inner.columns.len()
    }
    /// Whether the schema has no columns (a count-only projection).
    pub fn is_empty(&self) -> bool {
        self.inner.columns.is_empty()
    }
    /// Number of primary-key columns (a prefix of the columns).
    pub fn num_key_columns(&self) -> usize {
        self.inner.num_key_columns
    }
    /// The primary-key columns.
    pub fn key_columns(&self) -> &[ColumnSchema] {
        &self.inner.columns[..self.inner.num_key_columns]
    }
    /// Index of the column called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.inner.by_name.get(name).copied()
    }
    /// Index of the column with master-assigned id `id`.
    pub fn index_of_id(&self, id: u32) -> Option<usize> {
        self.inner.columns.iter().position(|c| c.id() == Some(id))
    }
    /// Byte offset of column `idx`'s cell in the fixed part of a row.
    ///
    /// # Panics
    /// If `idx` is out of range.
    pub fn cell_offset(&self, idx: usize) -> usize {
        self.inner.offsets[idx]
    }
    /// Sum of all cell widths: the fixed part of a row, without bitmaps.
    pub fn row_size(&self) -> usize {
        self.inner.row_size
    }
    /// Whether any column is nullable (rows then carry a null bitmap).
    pub fn has_nullable_columns(&self) -> bool {
        self.inner.has_nullable
    }
    /// Length of a per-column bitmap: `ceil(len / 8)`.
    pub fn bitmap_len(&self) -> usize {
        self.len().div_ceil(8)
    }
    /// Indexes of STRING / BINARY / VARCHAR columns.
    pub fn var_len_columns(&self) -> &[usize] {
        &self.inner.var_len
    }
    /// Index of the IS_DELETED virtual column, if the projection has one.
    pub fn is_deleted_index(&self) -> Option<usize> {
        self.inner.is_deleted
    }
    /// Index of the auto-incrementing key column, if any (1.17+).
    pub fn auto_incrementing_index(&self) -> Option<usize> {
        self.inner.auto_incrementing
    }
    /// Whether both handles point at the same schema allocation.
    pub fn ptr_eq(&self, other: &Schema) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A projection of the named columns in the given order, all marked
    /// non-key (what a scan request sends).
    pub fn project<S: AsRef<str>>(&self, names: &[S]) -> Result<Schema> {
        let cols = names
            .iter()
            .map(|n| {
                self.column_by_name(n.as_ref())
                    .map(ColumnSchema::to_non_key)
                    .ok_or_else(|| unknown_column(n.as_ref()))
            })
            .collect::<Result<Vec<_>>>()?;
        Schema::new(cols)
    }

    /// This schema plus an IS_DELETED virtual column whose name does not
    /// collide with an existing column (`is_deleted`, then `is_deleted_`,
    /// ...), for diff scans (docs/kudu-protocol.md#diff-scans). Returns the
    /// schema unchanged if it already has one.
    pub fn with_is_deleted(&self) -> Result<Schema> {
        if self.is_deleted_index().is_some() {
            return Ok(self.clone());
        }
        let mut name = String::from("is_deleted");
        while self.index_of(&name).is_some() {
            name.push('_');
        }
        let mut cols = self.columns().to_vec();
        cols.push(ColumnSchema::is_deleted(name));
        Schema::new(cols)
    }
}

pub(crate) fn unknown_column(name: &str) -> Error {
    Error::InvalidArgument(format!("unknown column '{name}'"))
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.inner.columns == other.inner.columns
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema")
            .field("columns", &self.inner.columns)
            .field("num_key_columns", &self.inner.num_key_columns)
            .finish()
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, c) in self.columns().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", c.name(), c.type_display())?;
            if !c.is_nullable() {
                f.write_str(" NOT NULL")?;
            }
        }
        f.write_str(")")?;
        if self.num_key_columns() > 0 {
            f.write_str(" PRIMARY KEY (")?;
            for (i, c) in self.key_columns().iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                f.write_str(c.name())?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// Selects a column by index (`usize`) or by name (`&str`, `String`), so
/// row accessors accept both: `row.set_i64("id", 5)` or `row.set_i64(0, 5)`.
/// Sealed: only this crate implements it (so it may gain methods).
pub trait ColumnIndex: sealed::Sealed {
    /// Resolves to a column index of `schema`, or an `InvalidArgument` error.
    fn column_index(&self, schema: &Schema) -> Result<usize>;
}

mod sealed {
    /// Keeps [`ColumnIndex`](super::ColumnIndex) implemented here only.
    pub trait Sealed {}
    impl Sealed for usize {}
    impl Sealed for &str {}
    impl Sealed for String {}
    impl Sealed for &String {}
}

impl ColumnIndex for usize {
    fn column_index(&self, schema: &Schema) -> Result<usize> {
        if *self < schema.len() {
            Ok(*self)
        } else {
            Err(Error::InvalidArgument(format!(
                "column index {self} out of range (schema has {} columns)",
                schema.len()
            )))
        }
    }
}

impl ColumnIndex for &str {
    fn column_index(&self, schema: &Schema) -> Result<usize> {
        schema.index_of(self).ok_or_else(|| unknown_column(self))
    }
}

impl ColumnIndex for String {
    fn column_index(&self, schema: &Schema) -> Result<usize> {
        self.as_str().column_index(schema)
    }
}

impl ColumnIndex for &String {
    fn column_index(&self, schema: &Schema) -> Result<usize> {
        self.as_str().column_index(schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, t: DataType) -> ColumnSchema {
        ColumnSchema::builder(name, t).build().unwrap()
    }

    #[test]
    fn layout_is_derived() {
        let s = Schema::new(vec![
            ColumnSchema::builder("k", DataType::Int32)
                .key(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("v", DataType::Int64)
                .nullable(true)
                .build()
                .unwrap(),
            col("s", DataType::String),
            col("b", DataType::Bool),
        ])
        .unwrap();
        assert_eq!(s.num_key_columns(), 1);
        assert_eq!(
            (0..4).map(|i| s.cell_offset(i)).collect::<Vec<_>>(),
            [0, 4, 12, 28]
        );
        assert_eq!(s.row_size(), 29);
        assert!(s.has_nullable_columns());
        assert_eq!(s.var_len_columns(), &[2]);
        assert_eq!(s.bitmap_len(), 1);
        assert_eq!(s.index_of("s"), Some(2));
        assert_eq!("b".column_index(&s).unwrap(), 3);
        assert!("nope".column_index(&s).is_err());
        assert!(4usize.column_index(&s).is_err());
        assert_eq!(
            s.to_string(),
            "(k INT32 NOT NULL, v INT64, s STRING NOT NULL, b BOOL NOT NULL) PRIMARY KEY (k)"
        );
    }

    #[test]
    fn rejects_bad_schemas() {
        let k = ColumnSchema::builder("k", DataType::Int32)
            .key(true)
            .build()
            .unwrap();
        assert!(Schema::new(vec![col("v", DataType::Int32), k.clone()]).is_err());
        assert!(Schema::new(vec![k.clone(), k.clone()]).is_err());
        assert!(Schema::new(vec![]).unwrap().is_empty());
    }

    #[test]
    fn projections_and_is_deleted() {
        let s = Schema::new(vec![
            ColumnSchema::builder("k", DataType::Int32)
                .key(true)
                .build()
                .unwrap(),
            col("is_deleted", DataType::Int8),
        ])
        .unwrap();
        let p = s.project(&["is_deleted", "k"]).unwrap();
        assert_eq!(p.num_key_columns(), 0);
        assert_eq!(p.columns()[1].name(), "k");
        let d = s.with_is_deleted().unwrap();
        assert_eq!(d.is_deleted_index(), Some(2));
        assert_eq!(d.columns()[2].name(), "is_deleted_");
        assert!(s.project(&["zzz"]).is_err());
        assert_eq!(s.clone(), s);
    }
}
