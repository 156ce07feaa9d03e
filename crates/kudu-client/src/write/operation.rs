//! [`Operation`]: one write a caller hands to a session — an operation
//! type, the table and the row.

use crate::row_ops::OpType;
use crate::schema::Row;
use crate::table::KuduTable;

/// One write: an operation type, the table and the row.
#[derive(Debug, Clone)]
pub struct Operation {
    pub(crate) table: KuduTable,
    pub(crate) op: OpType,
    pub(crate) row: Row,
}

impl Operation {
    /// An operation of type `op` on `row` of `table` (validated when
    /// applied).
    pub fn new(table: &KuduTable, op: OpType, row: Row) -> Operation {
        Operation {
            table: table.clone(),
            op,
            row,
        }
    }

    /// INSERT: fails with ALREADY_PRESENT if the key exists.
    pub fn insert(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::Insert, row)
    }

    /// INSERT_IGNORE: an insert that skips existing keys.
    pub fn insert_ignore(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::InsertIgnore, row)
    }

    /// UPSERT: insert, or overwrite the supplied columns.
    pub fn upsert(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::Upsert, row)
    }

    /// UPSERT_IGNORE: an upsert that ignores writes to immutable columns.
    pub fn upsert_ignore(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::UpsertIgnore, row)
    }

    /// UPDATE: fails with NOT_FOUND if the key is missing.
    pub fn update(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::Update, row)
    }

    /// UPDATE_IGNORE: an update that skips missing keys.
    pub fn update_ignore(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::UpdateIgnore, row)
    }

    /// DELETE (only the key columns are sent): NOT_FOUND if missing.
    pub fn delete(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::Delete, row)
    }

    /// DELETE_IGNORE: a delete that skips missing keys.
    pub fn delete_ignore(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::DeleteIgnore, row)
    }

    /// The operation type.
    pub fn op_type(&self) -> OpType {
        self.op
    }

    /// The table written to.
    pub fn table(&self) -> &KuduTable {
        &self.table
    }

    /// The row.
    pub fn row(&self) -> &Row {
        &self.row
    }

    /// The row, to set columns.
    pub fn row_mut(&mut self) -> &mut Row {
        &mut self.row
    }
}
