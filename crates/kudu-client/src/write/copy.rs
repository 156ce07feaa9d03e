//! Writing scan rows: a [`RowCopy`] maps the columns of a scan projection
//! onto a table, and [`Session::apply_rows`](crate::write::Session::apply_rows)
//! writes a whole [`RowBatch`] through it in one call.
//!
//! In background mode the rows never become [`Operation`]s: each row is
//! copied cell by cell into one reused scratch row and fed to the session's
//! request builder ([`feed_rows`]), which routes it and appends it to the
//! encoded request of its tablet — the same builder a buffer of operations
//! goes through. No allocation per row; a row that fails before any
//! request is named by its key, rebuilt from the batch.

use std::sync::Arc;

use crate::error::{Error, KuduStatus, Result, RowError};
use crate::row_ops::OpType;
use crate::scan::{RowBatch, RowView};
use crate::schema::{Row, Schema};
use crate::table::KuduTable;
use crate::write::operation::Operation;
use crate::write::outcome::{status_of, FlushOutcome};
use crate::write::request::{Outlet, RequestBuilder, Route};

/// How the rows of one scan projection become operations on a table: which
/// projection column feeds which table column, and the operation for live
/// and for deleted rows (a diff scan's `IS_DELETED` column).
#[derive(Debug, Clone)]
pub struct RowCopy {
    table: KuduTable,
    projection: Schema,
    columns: Arc<[CopyColumn]>,
    op: OpType,
    deleted_op: OpType,
}

#[derive(Debug, Clone, Copy)]
struct CopyColumn {
    from: usize,
    to: usize,
    /// Same type and attributes on both sides: the cell is copied as is;
    /// otherwise the value is converted and checked like `Row::set`.
    raw: bool,
    /// Looked up once, not per cell.
    var_len: bool,
    nullable: bool,
}

impl RowCopy {
    /// Rows of `projection` written to `table`: `columns` pairs a
    /// projection column index with a table column index. Every key column
    /// of the table must be fed. Live rows become `op`; rows whose
    /// `IS_DELETED` column is true become `deleted_op`, with only their key
    /// columns when it is a delete.
    pub fn new(
        table: &KuduTable,
        projection: &Schema,
        columns: &[(usize, usize)],
        op: OpType,
        deleted_op: OpType,
    ) -> Result<RowCopy> {
        for o in [op, deleted_op] {
            if !o.is_data_op() {
                return Err(Error::InvalidArgument(format!(
                    "{o} is not a write operation"
                )));
            }
        }
        let schema = table.schema();
        let mut fed = vec![false; schema.len()];
        let mut out = Vec::with_capacity(columns.len());
        for &(from, to) in columns {
            let (Some(src), Some(dst)) = (projection.columns().get(from), schema.columns().get(to))
            else {
                return Err(Error::InvalidArgument(format!(
                    "column pair ({from}, {to}) is outside the projection ({} columns) or table '{}' ({} columns)",
                    projection.len(),
                    table.name(),
                    schema.len()
                )));
            };
            if std::mem::replace(&mut fed[to], true) {
                return Err(Error::InvalidArgument(format!(
                    "column '{}' of table '{}' is fed twice",
                    dst.name(),
                    table.name()
                )));
            }
            let raw = src.data_type() == dst.data_type()
                && src.type_attributes() == dst.type_attributes();
            out.push(CopyColumn {
                from,
                to,
                raw,
                var_len: src.data_type().is_var_len(),
                nullable: dst.is_nullable(),
            });
        }
        if let Some(missing) = (0..schema.num_key_columns()).find(|&i| !fed[i]) {
            return Err(Error::InvalidArgument(format!(
                "primary key column '{}' of table '{}' is fed by no projection column",
                schema.columns()[missing].name(),
                table.name()
            )));
        }
        Ok(RowCopy {
            table: table.clone(),
            projection: projection.clone(),
            columns: out.into(),
            op,
            deleted_op,
        })
    }

    /// The table written to.
    pub fn table(&self) -> &KuduTable {
        &self.table
    }

    /// The projection the rows must have.
    pub fn projection(&self) -> &Schema {
        &self.projection
    }

    /// The operation for `row`.
    pub fn op_for(&self, row: &RowView<'_>) -> OpType {
        if row.is_deleted() {
            self.deleted_op
        } else {
            self.op
        }
    }

    /// Fills `out` (a row of the table, cleared first) from `row` and
    /// returns its operation. A NULL into a non-nullable column, or a value
    /// the table column cannot hold, is an error naming the column.
    pub(crate) fn fill(&self, row: &RowView<'_>, out: &mut Row) -> Result<OpType> {
        self.fill_as(row, row.is_deleted(), out)
    }

    fn fill_as(&self, row: &RowView<'_>, deleted: bool, out: &mut Row) -> Result<OpType> {
        out.clear();
        let op = if deleted { self.deleted_op } else { self.op };
        let keys_only = op.is_delete();
        let num_keys = self.table.schema().num_key_columns();
        for c in self.columns.iter() {
            if keys_only && c.to >= num_keys {
                continue;
            }
            if !c.raw {
                out.set(c.to, row.value_at(c.from)?)?;
                continue;
            }
            match row.raw_cell(c.from) {
                Some(cell) if c.var_len => out.set_raw(c.to, &[], Some(cell)),
                Some(cell) => out.set_raw(c.to, cell, None),
                None if c.nullable => out.set_null_raw(c.to),
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "column '{}' of table '{}' is not nullable",
                        self.table.schema().columns()[c.to].name(),
                        self.table.name()
                    )))
                }
            }
        }
        Ok(op)
    }

    /// `row` as one operation on the table (for sessions that apply rows
    /// one at a time).
    pub fn operation(&self, row: &RowView<'_>) -> Result<Operation> {
        let (op, out) = self.to_row(row)?;
        Ok(Operation::new(&self.table, op, out))
    }

    /// `row` as an owned row of the table, with its operation.
    pub(crate) fn to_row(&self, row: &RowView<'_>) -> Result<(OpType, Row)> {
        let mut out = self.table.new_row();
        let op = self.fill(row, &mut out)?;
        Ok((op, out))
    }

    /// A row error for row `i` of `batch` (its key rebuilt from the batch).
    fn row_error(&self, batch: &RowBatch, i: usize, op: OpType, status: KuduStatus) -> RowError {
        let key = match batch.get_row(i).map(|v| self.to_row(&v)) {
            Some(Ok((_, row))) => row.key_string(),
            _ => format!("(row {i} of the batch)"),
        };
        RowError {
            operation: op.name().to_owned(),
            key,
            status,
        }
    }
}

/// Counts of the rows `apply_rows` applied (rows that fail are reported
/// by the next flush, as with `apply`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AppliedRows {
    /// Rows applied with the copy's live operation.
    pub live: usize,
    /// Rows applied with its operation for deleted rows.
    pub deleted: usize,
}

/// Feeds every row of `batch` through `copy` to `builder`, handing each
/// sealed request to `outlet` (the rest too, at the end). Returns how many
/// rows got each operation, and the rows that failed before any request
/// (a value the table refuses, no tablet for the key). `Err` only when the
/// table's tablets cannot be located: requests handed on before stay
/// handed on.
// Long on purpose: the per-row hot path of a snapshot, kept in one loop
// (fill, key, route, append) with its failure branches.
pub(crate) async fn feed_rows(
    mut builder: RequestBuilder,
    copy: &RowCopy,
    batch: &RowBatch,
    outlet: &mut Outlet,
) -> Result<(AppliedRows, FlushOutcome)> {
    let table = &copy.table;
    let partitions = table.partition_schema();
    let mut scratch = table.new_row();
    let mut key = Vec::with_capacity(32);
    let mut hash_scratch = Vec::new();
    let mut failed = FlushOutcome::default();
    let mut applied = AppliedRows::default();
    for i in 0..batch.len() {
        let view = batch.row(i);
        let deleted = view.is_deleted();
        // Counted as applied even if it fails below: like `apply`, the
        // failure is reported by the next flush.
        if deleted {
            applied.deleted += 1;
        } else {
            applied.live += 1;
        }
        let op = match copy.fill_as(&view, deleted, &mut scratch) {
            Ok(op) => op,
            Err(e) => {
                let op = if deleted { copy.deleted_op } else { copy.op };
                failed.fail_one(copy.row_error(batch, i, op, status_of(&e)), e);
                continue;
            }
        };
        if let Err(e) = partitions.partition_key_into(&scratch, &mut key, &mut hash_scratch) {
            failed.fail_one(copy.row_error(batch, i, op, status_of(&e)), e);
            continue;
        }
        let tablet = match builder.route(table, &key).await? {
            Route::Tablet(t) => t,
            Route::NotCovered(e) => {
                failed.fail_one(copy.row_error(batch, i, op, status_of(&e)), e);
                continue;
            }
        };
        match builder.append(table, &tablet, op, &scratch) {
            Ok(Some(sealed)) => outlet.put(sealed).await,
            Ok(None) => {}
            Err(e) => failed.fail_one(copy.row_error(batch, i, op, status_of(&e)), e),
        }
    }
    for rest in builder.finish() {
        outlet.put(rest).await;
    }
    Ok((applied, failed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::PartitionSchema;
    use crate::pb;
    use crate::schema::{ColumnSchema, DataType};
    use bytes::Bytes;
    use std::collections::BTreeMap as Map;

    fn col(name: &str, t: DataType, nullable: bool) -> ColumnSchema {
        ColumnSchema::builder(name, t)
            .nullable(nullable)
            .build()
            .unwrap()
    }

    /// id INT32, name STRING NULL, n INT32 NULL, IS_DELETED.
    fn projection() -> Schema {
        Schema::new(vec![
            col("id", DataType::Int32, false),
            col("name", DataType::String, true),
            col("n", DataType::Int32, true),
            ColumnSchema::is_deleted("is_deleted"),
        ])
        .unwrap()
    }

    /// k INT32 key, s STRING NULL, v INT32 (not nullable).
    fn table() -> KuduTable {
        let schema = Schema::new(vec![
            ColumnSchema::builder("k", DataType::Int32)
                .key(true)
                .build()
                .unwrap(),
            col("s", DataType::String, true),
            col("v", DataType::Int32, false),
        ])
        .unwrap();
        let ps = PartitionSchema::builder(&schema)
            .add_hash_partitions(&["k"], 2, 0)
            .build()
            .unwrap();
        KuduTable::new(
            "t".into(),
            "id".into(),
            schema,
            ps,
            1,
            None,
            None,
            Map::new(),
            None,
        )
    }

    /// Row-wise cells: id, name (offset/len into indirect), n, deleted,
    /// then the null bitmap.
    fn row(id: i32, name: Option<(u64, u64)>, n: Option<i32>, deleted: bool) -> Vec<u8> {
        let mut r = id.to_le_bytes().to_vec();
        let (off, len) = name.unwrap_or((0, 0));
        r.extend_from_slice(&off.to_le_bytes());
        r.extend_from_slice(&len.to_le_bytes());
        r.extend_from_slice(&n.unwrap_or(0).to_le_bytes());
        r.push(u8::from(deleted));
        r.push(u8::from(name.is_none()) << 1 | u8::from(n.is_none()) << 2);
        r
    }

    fn batch(rows: &[Vec<u8>], indirect: &'static [u8]) -> RowBatch {
        let block = pb::RowwiseRowBlockPb {
            num_rows: Some(rows.len() as i32),
            rows_sidecar: Some(0),
            indirect_data_sidecar: Some(1),
        };
        let side = [Bytes::from(rows.concat()), Bytes::from_static(indirect)];
        RowBatch::from_rowwise(&projection(), &block, &side).unwrap()
    }

    fn copy() -> RowCopy {
        RowCopy::new(
            &table(),
            &projection(),
            &[(0, 0), (1, 1), (2, 2)],
            OpType::UpsertIgnore,
            OpType::DeleteIgnore,
        )
        .unwrap()
    }

    #[test]
    fn a_copy_must_feed_every_key_column_once() {
        let (t, p) = (table(), projection());
        let err = |cols: &[(usize, usize)]| {
            RowCopy::new(&t, &p, cols, OpType::Upsert, OpType::Delete)
                .unwrap_err()
                .to_string()
        };
        assert!(
            err(&[(1, 1)]).contains("primary key column 'k'"),
            "{}",
            err(&[(1, 1)])
        );
        assert!(err(&[(0, 0), (2, 0)]).contains("'k' of table 't' is fed twice"));
        assert!(err(&[(0, 0), (9, 1)]).contains("(9, 1) is outside"));
        let e = RowCopy::new(&t, &p, &[(0, 0)], OpType::SplitRow, OpType::Delete).unwrap_err();
        assert!(e.to_string().contains("not a write operation"), "{e}");
    }

    #[test]
    fn live_rows_copy_every_cell_and_deleted_rows_only_the_key() {
        let b = batch(
            &[
                row(7, Some((0, 2)), Some(5), false),
                row(8, Some((2, 1)), Some(6), true),
            ],
            b"abc",
        );
        let c = copy();
        let (op, live) = c.to_row(&b.row(0)).unwrap();
        assert_eq!(op, OpType::UpsertIgnore);
        assert_eq!(live.get_i32("k").unwrap(), 7);
        assert_eq!(live.get_str("s").unwrap(), "ab");
        assert_eq!(live.get_i32("v").unwrap(), 5);
        let (op, deleted) = c.to_row(&b.row(1)).unwrap();
        assert_eq!(op, OpType::DeleteIgnore);
        assert_eq!(deleted.get_i32("k").unwrap(), 8);
        assert!(!deleted.is_set("s").unwrap() && !deleted.is_set("v").unwrap());
        // The same scratch row serves row after row.
        let mut scratch = c.table().new_row();
        c.fill(&b.row(0), &mut scratch).unwrap();
        c.fill(&b.row(1), &mut scratch).unwrap();
        assert_eq!(scratch, deleted);
        let err = c.row_error(
            &b,
            0,
            op,
            KuduStatus {
                code: crate::error::StatusCode::NotFound,
                message: "gone".into(),
                posix_code: None,
            },
        );
        assert_eq!(err.key, "(k=7)");
    }

    #[test]
    fn a_null_into_a_non_nullable_column_names_it() {
        let b = batch(&[row(1, None, None, false), row(2, None, None, true)], b"");
        let c = copy();
        let e = c.to_row(&b.row(0)).unwrap_err().to_string();
        assert!(e.contains("column 'v' of table 't' is not nullable"), "{e}");
        // A delete sends only the key, so the NULL does not matter.
        let (op, r) = c.to_row(&b.row(1)).unwrap();
        assert_eq!((op, r.get_i32("k").unwrap()), (OpType::DeleteIgnore, 2));
    }

    #[test]
    fn columns_of_other_types_are_converted_and_checked() {
        // VARCHAR(2) in the table, STRING in the projection: the value
        // path, which checks the length.
        let schema = Schema::new(vec![
            ColumnSchema::builder("k", DataType::Int32)
                .key(true)
                .build()
                .unwrap(),
            crate::schema::ColumnSchemaBuilder::varchar("s", 2)
                .nullable(true)
                .build()
                .unwrap(),
        ])
        .unwrap();
        let ps = PartitionSchema::builder(&schema).build().unwrap();
        let t = KuduTable::new(
            "v".into(),
            "id".into(),
            schema,
            ps,
            1,
            None,
            None,
            Map::new(),
            None,
        );
        let c = RowCopy::new(
            &t,
            &projection(),
            &[(0, 0), (1, 1)],
            OpType::Upsert,
            OpType::Delete,
        )
        .unwrap();
        let b = batch(
            &[
                row(1, Some((0, 2)), Some(0), false),
                row(2, Some((0, 3)), Some(0), false),
            ],
            b"abc",
        );
        assert_eq!(c.to_row(&b.row(0)).unwrap().1.get_str("s").unwrap(), "ab");
        let e = c.to_row(&b.row(1)).unwrap_err().to_string();
        assert!(e.contains("'s'"), "{e}");
    }
}
