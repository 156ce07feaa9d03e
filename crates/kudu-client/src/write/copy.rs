//! Writing scan rows: a [`RowCopy`] maps the columns of a scan projection
//! onto a table, and [`Session::apply_rows`](crate::write::Session::apply_rows)
//! writes a whole [`RowBatch`] through it in one call.
//!
//! In background mode the rows never become [`Operation`]s: each row is
//! copied cell by cell into one reused scratch row, routed by its partition
//! key, and appended straight to the encoded request of its tablet
//! ([`encode_rows`]). A request is handed to the session's flusher as soon
//! as it holds the session's request size, so a batch's requests are being
//! sent while the rest of it is encoded, and at most a few requests' bytes
//! wait at a time (the session's byte budget). What is kept per row is its
//! index in the batch and its operation type: a row the server refuses is
//! rebuilt from the batch only to name its key.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, KuduStatus, Result, RowError};
use crate::meta::{Lookup, RemoteTablet};
use crate::row_ops::{OpType, OpsEncoder};
use crate::scan::{RowBatch, RowView};
use crate::schema::{Row, Schema};
use crate::table::KuduTable;
use crate::write::buffered::BufferedOp;
use crate::write::outcome::{status_of, FlushOutcome};
use crate::write::session::Operation;
use crate::KuduClient;

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

/// Rows of a batch carried by one request: their indexes in the batch and
/// their operations, in request order.
#[derive(Debug)]
pub(crate) struct CopiedRows {
    copy: RowCopy,
    batch: RowBatch,
    rows: Vec<u32>,
    ops: Vec<OpType>,
}

impl CopiedRows {
    fn new(copy: &RowCopy, batch: &RowBatch) -> CopiedRows {
        CopiedRows {
            copy: copy.clone(),
            batch: batch.clone(),
            rows: Vec::new(),
            ops: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    pub(crate) fn op(&self, i: usize) -> OpType {
        self.ops[i]
    }

    pub(crate) fn row_error(&self, i: usize, status: KuduStatus) -> RowError {
        self.copy
            .row_error(&self.batch, self.rows[i] as usize, self.ops[i], status)
    }

    /// The rows as buffered operations, to be routed again (their tablet
    /// moved); a row that cannot be rebuilt fails in the outcome.
    pub(crate) fn into_ops(self) -> (Vec<BufferedOp>, FlushOutcome) {
        let mut ops = Vec::with_capacity(self.rows.len());
        let mut outcome = FlushOutcome::default();
        for &i in &self.rows {
            let Some(view) = self.batch.get_row(i as usize) else {
                continue;
            };
            match self
                .copy
                .to_row(&view)
                .and_then(|(op, row)| BufferedOp::new(self.copy.table.clone(), op, row))
            {
                Ok(op) => ops.push(op),
                Err(e) => outcome.fail_one(
                    self.copy.row_error(
                        &self.batch,
                        i as usize,
                        self.copy.op_for(&view),
                        status_of(&e),
                    ),
                    e,
                ),
            }
        }
        (ops, outcome)
    }
}

/// One encoded request for one tablet, ready to send.
#[derive(Debug)]
pub(crate) struct EncodedChunk {
    pub(crate) table: KuduTable,
    pub(crate) tablet: Arc<RemoteTablet>,
    pub(crate) encoder: OpsEncoder,
    pub(crate) rows: CopiedRows,
    /// Its share of the session's byte budget, released once it is sent.
    pub(crate) _budget: Option<OwnedSemaphorePermit>,
}

/// What [`encode_rows`] hands on: requests, and the rows that failed before
/// any request (no tablet, a value the table refuses).
pub(crate) enum Encoded {
    Chunk(Box<EncodedChunk>),
    Failed(FlushOutcome),
}

/// Counts of the rows `apply_rows` applied (rows that fail are reported
/// by the next flush, as with `apply`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppliedRows {
    /// Rows applied with the copy's live operation.
    pub live: usize,
    /// Rows applied with its operation for deleted rows.
    pub deleted: usize,
}

/// A request being filled for one tablet.
struct Open {
    tablet: Arc<RemoteTablet>,
    encoder: OpsEncoder,
    rows: CopiedRows,
}

/// How `encode_rows` cuts requests and bounds what waits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestSize {
    /// A request is due once it holds this many encoded bytes ...
    pub(crate) bytes: usize,
    /// ... and this many rows,
    pub(crate) min_rows: usize,
    /// or, whatever its rows, this many bytes.
    pub(crate) max_bytes: usize,
    /// Encoded bytes that may wait to be sent (the budget's permits).
    pub(crate) budget: usize,
}

impl RequestSize {
    fn full(&self, bytes: usize, rows: usize) -> bool {
        bytes >= self.max_bytes || (bytes >= self.bytes && rows >= self.min_rows)
    }
}

/// Encodes every row of `batch` through `copy` into per-tablet requests
/// cut by `size`, handing each to `emit` when full (and the rest at the
/// end). Each request first takes its bytes from `budget`, so `emit` is not
/// called while too many encoded bytes are waiting to be sent.
pub(crate) async fn encode_rows<F, Fut>(
    client: &KuduClient,
    copy: &RowCopy,
    batch: &RowBatch,
    size: RequestSize,
    budget: &Arc<Semaphore>,
    timeout: std::time::Duration,
    mut emit: F,
) -> Result<AppliedRows>
where
    F: FnMut(Encoded) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let table = &copy.table;
    let partitions = table.partition_schema();
    let mut scratch = table.new_row();
    let mut key = Vec::with_capacity(32);
    let mut hash_scratch = Vec::new();
    // Tablets found for this batch, by partition key start.
    let mut known: BTreeMap<Vec<u8>, Arc<RemoteTablet>> = BTreeMap::new();
    // Requests being filled, one per tablet; few, so found by pointer.
    let mut open: Vec<Open> = Vec::new();
    let mut last: Option<Arc<RemoteTablet>> = None;
    let mut failed = FlushOutcome::default();
    let mut applied = AppliedRows::default();
    let deadline = Instant::now() + timeout;
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
                let status = status_of(&e);
                let op = if deleted { copy.deleted_op } else { copy.op };
                failed.fail_one(copy.row_error(batch, i, op, status), e);
                continue;
            }
        };
        if let Err(e) = partitions.partition_key_into(&scratch, &mut key, &mut hash_scratch) {
            failed.fail_one(copy.row_error(batch, i, op, status_of(&e)), e);
            continue;
        }
        // Most rows of a scan batch go to the tablet of the row before.
        let cached = last
            .as_ref()
            .filter(|t| t.contains(&key))
            .cloned()
            .or_else(|| {
                known
                    .range::<[u8], _>((
                        std::ops::Bound::Unbounded,
                        std::ops::Bound::Included(key.as_slice()),
                    ))
                    .next_back()
                    .map(|(_, t)| t)
                    .filter(|t| t.contains(&key))
                    .cloned()
            });
        let tablet = match cached {
            Some(t) => t,
            None => match client.locate_with_retry(table, &key, deadline).await {
                Ok(Lookup::Tablet(t)) => {
                    known.insert(t.partition_key_start.clone(), t.clone());
                    t
                }
                Ok(Lookup::NonCovered { .. } | Lookup::Miss) => {
                    let e = Error::NonCoveredRange {
                        table: table.name().to_owned(),
                        partition_key: key.clone(),
                    };
                    failed.fail_one(copy.row_error(batch, i, op, status_of(&e)), e);
                    continue;
                }
                // The table cannot be located: the whole call fails.
                Err(e) => return Err(e),
            },
        };
        let at = match open.iter().position(|o| Arc::ptr_eq(&o.tablet, &tablet)) {
            Some(at) => at,
            None => {
                open.push(Open {
                    tablet: tablet.clone(),
                    encoder: new_encoder(table, size.bytes.min(size.max_bytes)),
                    rows: CopiedRows::new(copy, batch),
                });
                open.len() - 1
            }
        };
        last = Some(tablet);
        let entry = &mut open[at];
        if let Err(e) = entry.encoder.push(op, &scratch) {
            failed.fail_one(copy.row_error(batch, i, op, status_of(&e)), e);
            continue;
        }
        entry.rows.rows.push(i as u32);
        entry.rows.ops.push(op);
        if size.full(entry.encoder.encoded_size(), entry.rows.len()) {
            let full = open.swap_remove(at);
            emit(Encoded::Chunk(seal(table, full, size.budget, budget).await)).await?;
        }
    }
    for rest in open {
        emit(Encoded::Chunk(seal(table, rest, size.budget, budget).await)).await?;
    }
    if !failed.row_errors.is_empty() || !failed.causes.is_empty() {
        emit(Encoded::Failed(failed)).await?;
    }
    Ok(applied)
}

fn new_encoder(table: &KuduTable, cap: usize) -> OpsEncoder {
    let mut encoder = OpsEncoder::new(table.schema());
    // One row past the cap at most; no regrowth copies.
    encoder.reserve(cap + cap / 8);
    encoder
}

async fn seal(
    table: &KuduTable,
    open: Open,
    total: usize,
    budget: &Arc<Semaphore>,
) -> Box<EncodedChunk> {
    // A request larger than the whole budget takes all of it.
    let want = open.encoder.encoded_size().clamp(1, total.max(1));
    let want = u32::try_from(want).unwrap_or(u32::MAX);
    // The budget is never closed; if it were, send without it.
    let permit = budget.clone().acquire_many_owned(want).await.ok();
    Box::new(EncodedChunk {
        table: table.clone(),
        tablet: open.tablet,
        encoder: open.encoder,
        rows: open.rows,
        _budget: permit,
    })
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
