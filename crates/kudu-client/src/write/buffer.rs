//! What a session holds before it sends: [`BufferedOp`], an operation
//! checked and measured once at apply time (routing key, encoded size), and
//! [`OpBuffer`], the operations of the manual and background modes with
//! the rules that say when they must go.

use crate::error::{Error, KuduStatus, Result, RowError};
use crate::row_ops::OpType;
use crate::schema::cell::bit;
use crate::schema::Row;
use crate::table::KuduTable;
use crate::write::operation::Operation;
use crate::write::options::Settings;

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
    /// Checks `op` (see [`new`](Self::new)).
    pub(crate) fn check(op: Operation) -> Result<BufferedOp> {
        BufferedOp::new(op.table, op.op, op.row)
    }

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

    /// A row error for this operation.
    pub(crate) fn row_error(&self, status: KuduStatus) -> RowError {
        RowError {
            operation: self.op.name().to_owned(),
            key: self.row.key_string(),
            status,
        }
    }
}

fn check_key(table: &KuduTable, op: OpType, row: &Row) -> Result<()> {
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
pub(crate) fn encoded_size(op: OpType, row: &Row) -> usize {
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

/// Operations applied and not yet handed to a request builder, in apply
/// order (manual and background modes).
#[derive(Debug, Default)]
pub(crate) struct OpBuffer {
    ops: Vec<BufferedOp>,
    bytes: usize,
    /// Background mode: when the buffer is due by its age (set by its
    /// first operation), and whether that time has come.
    due_at: Option<tokio::time::Instant>,
    timer_fired: bool,
}

impl OpBuffer {
    /// Operations held.
    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    /// Encoded bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds `op`; the first operation of a buffer starts its age.
    pub(crate) fn push(&mut self, op: BufferedOp, s: &Settings) {
        if self.ops.is_empty() {
            self.due_at = Some(tokio::time::Instant::now() + s.flush_interval);
        }
        self.bytes += op.size;
        self.ops.push(op);
    }

    /// Manual mode: whether `ops` more operations of `bytes` bytes fit (a
    /// single operation always fits an empty buffer).
    pub(crate) fn has_room(&self, ops: usize, bytes: usize, s: &Settings) -> bool {
        let len = self.ops.len() + ops;
        len <= s.max_ops && (len <= 1 || self.bytes + bytes <= s.max_bytes)
    }

    /// Background mode: when the buffer's age makes it due.
    pub(crate) fn due_at(&self) -> Option<tokio::time::Instant> {
        self.due_at.filter(|_| !self.timer_fired)
    }

    /// Background mode: the buffer's age has come.
    pub(crate) fn fire_timer(&mut self) {
        if self.due_at.is_some() {
            self.timer_fired = true;
        }
    }

    /// Background mode: the buffer should be sent (operations, age or
    /// bytes).
    pub(crate) fn due(&self, s: &Settings) -> bool {
        !self.ops.is_empty() && (self.ops.len() >= s.max_ops || self.timer_fired || self.must_go(s))
    }

    /// Due, and may not take more operations even with adaptive batching.
    fn must_go(&self, s: &Settings) -> bool {
        self.bytes >= s.max_bytes
    }

    /// Background mode: whether `apply` may add an operation now. A due
    /// buffer takes no more (the caller waits for it to be sent), unless
    /// adaptive batching lets it grow to its limit.
    pub(crate) fn accepts(&self, s: &Settings) -> bool {
        !self.must_go(s) && (!self.due(s) || s.grow_to.is_some_and(|limit| self.bytes < limit))
    }

    /// Everything held, in apply order; the buffer starts afresh.
    pub(crate) fn take(&mut self) -> Vec<BufferedOp> {
        // The next buffer likely fills as far as this one did.
        let next = Vec::with_capacity(self.ops.len());
        self.bytes = 0;
        self.due_at = None;
        self.timer_fired = false;
        std::mem::replace(&mut self.ops, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row_ops::OpsEncoder;
    use crate::write::testutil::table;

    #[test]
    fn size_estimate_matches_the_encoder() {
        let t = table();
        let mut row = t.new_row();
        row.set_i32("k", 1)
            .unwrap()
            .set_null("v")
            .unwrap()
            .set_str("s", "hello")
            .unwrap();
        for op in [OpType::Insert, OpType::Delete, OpType::Update] {
            let mut enc = OpsEncoder::new(t.schema());
            enc.push(op, &row).unwrap();
            assert_eq!(encoded_size(op, &row), enc.encoded_size(), "{op}");
        }
    }

    #[test]
    fn validation_names_the_problem() {
        let t = table();
        let mut row = t.new_row();
        row.set_i32("v", 1).unwrap();
        let err = BufferedOp::new(t.clone(), OpType::Insert, row).unwrap_err();
        assert!(
            err.to_string()
                .contains("primary key column 'k' is not set"),
            "{err}"
        );
        let err = BufferedOp::new(t.clone(), OpType::SplitRow, t.new_row()).unwrap_err();
        assert!(err.to_string().contains("not a write operation"), "{err}");
    }

    fn op(t: &KuduTable, k: i32) -> BufferedOp {
        let mut r = t.new_row();
        r.set_i32("k", k).unwrap();
        BufferedOp::new(t.clone(), OpType::Upsert, r).unwrap()
    }

    #[test]
    fn a_background_buffer_is_due_by_count_bytes_or_age_and_grows_adaptively() {
        let t = table();
        let options = crate::write::SessionOptions::default()
            .mutation_buffer_max_ops(3)
            .mutation_buffer_max_bytes(1000);
        let s = Settings::new(&options, std::time::Duration::from_secs(1));
        let mut b = OpBuffer::default();
        assert!(!b.due(&s) && b.accepts(&s) && b.due_at().is_none());
        b.push(op(&t, 1), &s);
        assert!(b.due_at().is_some() && !b.due(&s));
        b.fire_timer();
        assert!(b.due(&s) && !b.accepts(&s) && b.due_at().is_none());
        assert_eq!(b.take().len(), 1);
        assert!(!b.due(&s) && b.due_at().is_none());
        for k in 0..3 {
            b.push(op(&t, k), &s);
        }
        assert!(b.due(&s) && !b.accepts(&s));
        // Adaptive: a due buffer keeps taking operations up to its limit.
        let grow = Settings::new(&options.clone().adaptive_batching(Some(24)), s.timeout);
        assert!(b.accepts(&grow));
        b.push(op(&t, 4), &grow);
        assert!(!b.accepts(&grow), "{} bytes", b.bytes());
        // Bytes alone make it due, and stop it at once.
        let small = Settings::new(&options.mutation_buffer_max_bytes(7), s.timeout);
        let mut b = OpBuffer::default();
        b.push(op(&t, 1), &small);
        assert!(b.due(&small) && !b.accepts(&small));
    }

    #[test]
    fn a_manual_buffer_refuses_what_does_not_fit() {
        let t = table();
        let options = crate::write::SessionOptions::default()
            .mutation_buffer_max_ops(2)
            .mutation_buffer_max_bytes(10);
        let s = Settings::new(&options, std::time::Duration::from_secs(1));
        let mut b = OpBuffer::default();
        // One operation always fits an empty buffer, whatever its size.
        assert!(b.has_room(1, 100, &s));
        assert!(!b.has_room(2, 14, &s));
        b.push(op(&t, 1), &s);
        assert!(!b.has_room(1, 7, &s), "7 + 7 bytes > 10");
        assert!(b.has_room(1, 3, &s));
        assert!(!b.has_room(2, 0, &s), "3 operations > 2");
    }
}
