//! [`BufferedOp`]: an operation a session accepted, checked and measured
//! once at apply time (routing key, encoded size) so flushing does no
//! per-row work beyond copying.

use crate::error::{Error, KuduStatus, Result, RowError};
use crate::row_ops::OpType;
use crate::schema::cell::bit;
use crate::schema::Row;
use crate::table::KuduTable;

/// One operation accepted by a session, with its routing key and encoded
/// size computed once at apply time.
#[derive(Debug)]
pub(crate) struct BufferedOp {
    pub(crate) table: KuduTable,
    pub(crate) op: OpType,
    pub(crate) row: Row,
    pub(crate) partition_key: Vec<u8>,
    /// Bytes this row adds to `rows` + `indirect_data` of a request.
    pub(crate) size: usize,
}

impl BufferedOp {
    /// Validates an operation: a data operation, on a row of the table's
    /// schema, with every key column set (and an auto-incrementing key
    /// column left unset on INSERT).
    pub(crate) fn new(table: KuduTable, op: OpType, row: Row) -> Result<BufferedOp> {
        if !op.is_data_op() {
            return Err(Error::InvalidArgument(format!(
                "{op} is not a write operation (range bounds and split rows belong to create/alter table)"
            )));
        }
        if row.schema() != table.schema() {
            return Err(Error::InvalidArgument(format!(
                "{op} row with schema {} applied to table '{}' whose schema is {}",
                row.schema(),
                table.name(),
                table.schema()
            )));
        }
        check_key(&table, op, &row)?;
        let partition_key = table.partition_schema().partition_key(&row)?;
        let size = encoded_size(op, &row);
        Ok(BufferedOp {
            table,
            op,
            row,
            partition_key,
            size,
        })
    }

    pub(super) fn row_error(&self, status: KuduStatus) -> RowError {
        RowError {
            operation: self.op.name().to_owned(),
            key: self.row.key_string(),
            status,
        }
    }
}

pub(super) fn check_key(table: &KuduTable, op: OpType, row: &Row) -> Result<()> {
    let inserting = matches!(op, OpType::Insert | OpType::InsertIgnore);
    let isset = row.isset_bitmap();
    for (i, col) in table.schema().key_columns().iter().enumerate() {
        let set = bit(isset, i);
        if col.is_auto_incrementing() && inserting {
            if set {
                return Err(Error::InvalidArgument(format!(
                    "{op} into table '{}' must not set auto-incrementing column '{}'; the server fills it",
                    table.name(),
                    col.name()
                )));
            }
        } else if !set {
            return Err(Error::InvalidArgument(format!(
                "{op} {} into table '{}': primary key column '{}' is not set",
                row.key_string(),
                table.name(),
                col.name()
            )));
        }
    }
    Ok(())
}

/// The bytes `OpsEncoder::push` adds for this row (layout:
/// docs/kudu-protocol.md#row-operations).
pub(super) fn encoded_size(op: OpType, row: &Row) -> usize {
    let schema = row.schema();
    let bm = schema.bitmap_len();
    let mut n = 1 + bm;
    if schema.has_nullable_columns() {
        n += bm;
    }
    let ncols = if op.is_delete() {
        schema.num_key_columns()
    } else {
        schema.len()
    };
    let (isset, nulls) = (row.isset_bitmap(), row.null_bitmap());
    for (i, col) in schema.columns().iter().enumerate().take(ncols) {
        if !bit(isset, i) || bit(nulls, i) {
            continue;
        }
        n += col.data_type().size();
        if col.data_type().is_var_len() {
            n += row.var_bytes(i).len();
        }
    }
    n
}
