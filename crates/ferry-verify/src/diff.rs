//! Row-by-row comparison of one key range: both sides read in key order
//! (an ORDERED scan per tablet, k-way merged by encoded primary key), so
//! memory stays at one batch per tablet whatever the range's size. Each
//! row only in the source is *missing*, only in the sink *extra*, on both
//! sides with a differing compared column *differs*. With repair, the
//! source's version of each such row is written to the sink as it is found
//! (deleted and written again when an immutable cell differs).

use std::cmp::Ordering;
use std::time::Duration;

use futures::future::try_join_all;
use kudu_client::scan::{ComparisonOp, Predicate, RowBatch, RowView, ScanSpec, Scanner};
use kudu_client::write::{FlushMode, Operation, Session, SessionOptions};

use crate::range::KeyRange;
use crate::reader::Reader;
use crate::run::Ctx;
use crate::{values, DiffKind, Difference, VerifyError};

/// Row data per batch of a diff scan: one is held per tablet and side.
const DIFF_BATCH_BYTES: u32 = 256 * 1024;
/// A tablet whose keys come later waits while the others stream (range
/// partitions); keep its server-side scanner alive meanwhile.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What the rows of one range showed.
#[derive(Debug, Default)]
pub(crate) struct RangeDiff {
    pub missing: u64,
    pub extra: u64,
    pub differing: u64,
    /// The first differences (at most `max_listed`), with their encoded
    /// keys for ordering the report.
    pub listed: Vec<(Vec<u8>, Difference)>,
    /// Rows written by the repair.
    pub upserted: u64,
    /// Rows deleted by the repair.
    pub deleted: u64,
}

impl RangeDiff {
    pub(crate) fn differences(&self) -> u64 {
        self.missing + self.extra + self.differing
    }
}

/// The next row of the merge: only in the source, only in the sink, or on
/// both sides.
enum Step<'s, 't> {
    Missing(Head<'s>),
    Extra(Head<'t>),
    Both(Head<'s>, Head<'t>),
}

/// The current row of one side's cursor with the smallest key.
struct Head<'a> {
    /// The cursor's index.
    cursor: usize,
    key: &'a [u8],
    row: RowView<'a>,
}

/// Compares `range` row by row (and repairs it when the verification does).
pub(crate) async fn diff_range(ctx: &Ctx, range: &KeyRange) -> Result<RangeDiff, VerifyError> {
    let _permit = ctx.permits.acquire().await.ok();
    let keys = ctx.columns.keys;
    let (mut source, mut sink) = futures::try_join!(
        Ordered::open(ctx, &ctx.source, range),
        Ordered::open(ctx, &ctx.sink, range)
    )?;
    let mut out = RangeDiff::default();
    let mut repair = match ctx.repair {
        true => Some(Repair::new(ctx)?),
        false => None,
    };
    loop {
        let step = match (source.head(), sink.head()) {
            (None, None) => break,
            (Some(a), None) => Step::Missing(a),
            (None, Some(b)) => Step::Extra(b),
            (Some(a), Some(b)) => match a.key.cmp(b.key) {
                Ordering::Less => Step::Missing(a),
                Ordering::Greater => Step::Extra(b),
                Ordering::Equal => Step::Both(a, b),
            },
        };
        match step {
            Step::Missing(a) => {
                let Head { cursor, key, row } = a;
                out.record(ctx, DiffKind::Missing, key, Some(&row), None, Vec::new())
                    .map_err(|e| ctx.source.error("reading a row", e))?;
                if let Some(r) = repair.as_mut() {
                    r.upsert(&row).await?;
                }
                source.next(cursor).await?;
            }
            Step::Extra(b) => {
                let Head { cursor, key, row } = b;
                out.record(ctx, DiffKind::Extra, key, None, Some(&row), Vec::new())
                    .map_err(|e| ctx.sink.error("reading a row", e))?;
                if let Some(r) = repair.as_mut() {
                    r.delete(&row, keys).await?;
                }
                sink.next(cursor).await?;
            }
            Step::Both(a, b) => {
                let columns = differing_columns(&a.row, &b.row, keys)
                    .map_err(|e| ctx.sink.error("reading a row", e))?;
                if !columns.is_empty() {
                    let immutable = repair.as_ref().is_some_and(|r| r.immutable(&columns));
                    out.record(
                        ctx,
                        DiffKind::Differs,
                        a.key,
                        Some(&a.row),
                        Some(&b.row),
                        columns,
                    )
                    .map_err(|e| ctx.sink.error("reading a row", e))?;
                    if let Some(r) = repair.as_mut() {
                        if immutable {
                            r.recreate(&a.row, keys).await?;
                        } else {
                            r.upsert(&a.row).await?;
                        }
                    }
                }
                let (i, j) = (a.cursor, b.cursor);
                source.next(i).await?;
                sink.next(j).await?;
            }
        }
    }
    if let Some(mut r) = repair {
        r.finish().await?;
        out.upserted = r.upserted;
        out.deleted = r.deleted;
    }
    Ok(out)
}

impl RangeDiff {
    fn record(
        &mut self,
        ctx: &Ctx,
        kind: DiffKind,
        key: &[u8],
        source: Option<&RowView<'_>>,
        sink: Option<&RowView<'_>>,
        columns: Vec<String>,
    ) -> Result<(), kudu_client::Error> {
        match kind {
            DiffKind::Missing => self.missing += 1,
            DiffKind::Extra => self.extra += 1,
            DiffKind::Differs => self.differing += 1,
        }
        if self.listed.len() >= ctx.max_listed {
            return Ok(());
        }
        let keys = ctx.columns.keys;
        let whole = |row: &RowView<'_>| values::row_json(row, 0, row.schema().len());
        let Some(any) = source.or(sink) else {
            return Ok(());
        };
        let difference = Difference {
            kind,
            key: values::row_json(any, 0, keys)?,
            columns,
            source: source.map(whole).transpose()?,
            sink: sink.map(whole).transpose()?,
        };
        self.listed.push((key.to_vec(), difference));
        Ok(())
    }
}

/// The compared value columns whose cells differ.
fn differing_columns(
    a: &RowView<'_>,
    b: &RowView<'_>,
    keys: usize,
) -> Result<Vec<String>, kudu_client::Error> {
    let mut out = Vec::new();
    for (i, column) in a.schema().columns().iter().enumerate().skip(keys) {
        if !values::same(a.get(i)?, b.get(i)?) {
            out.push(column.name().to_owned());
        }
    }
    Ok(out)
}

/// One tablet's rows of the range, in key order.
struct Cursor {
    scanner: Scanner,
    batch: Option<RowBatch>,
    /// The current row of `batch`.
    row: usize,
    /// Its encoded primary key.
    key: Vec<u8>,
}

/// One side's rows of the range, in key order: the tablets' cursors merged.
struct Ordered<'a> {
    reader: &'a Reader,
    cursors: Vec<Cursor>,
}

impl<'a> Ordered<'a> {
    async fn open(ctx: &Ctx, reader: &'a Reader, range: &KeyRange) -> Result<Self, VerifyError> {
        let spec = reader
            .spec(&ctx.columns.projection, range)
            .fault_tolerant(true);
        let splits = reader.tablets(&spec).await?;
        let mut ordered = Ordered {
            reader,
            cursors: Vec::with_capacity(splits.len()),
        };
        for split in &splits {
            let scanner = reader
                .client
                .scan_builder(&reader.table)
                .with_spec(
                    reader
                        .split_spec(split)
                        .batch_size_bytes(DIFF_BATCH_BYTES)
                        .keep_alive_interval(KEEP_ALIVE),
                )
                .build()
                .map_err(|e| reader.error("scanning a key range in key order", e))?;
            ordered.cursors.push(Cursor {
                scanner,
                batch: None,
                row: 0,
                key: Vec::new(),
            });
        }
        let reader = ordered.reader;
        try_join_all(ordered.cursors.iter_mut().map(|c| fill(reader, c, true))).await?;
        Ok(ordered)
    }

    /// The current row with the smallest key; `None` when every cursor is
    /// done.
    fn head(&self) -> Option<Head<'_>> {
        self.cursors
            .iter()
            .enumerate()
            .filter_map(|(cursor, c)| {
                let batch = c.batch.as_ref()?;
                Some(Head {
                    cursor,
                    key: &c.key,
                    row: batch.row(c.row),
                })
            })
            .min_by(|a, b| a.key.cmp(b.key))
    }

    async fn next(&mut self, i: usize) -> Result<(), VerifyError> {
        fill(self.reader, &mut self.cursors[i], false).await
    }
}

/// Moves `cursor` to its next row (its first with `first`), reading the
/// next non-empty batch when the current one is done; at the end its batch
/// is `None`.
async fn fill(reader: &Reader, cursor: &mut Cursor, first: bool) -> Result<(), VerifyError> {
    let what = "scanning a key range in key order";
    if !first {
        cursor.row += 1;
    }
    loop {
        if let Some(batch) = &cursor.batch {
            if cursor.row < batch.num_rows() {
                cursor.key = batch
                    .row(cursor.row)
                    .encoded_primary_key()
                    .map_err(|e| reader.error(what, e))?;
                return Ok(());
            }
        }
        cursor.row = 0;
        cursor.batch = cursor
            .scanner
            .next_batch()
            .await
            .map_err(|e| reader.error(what, e))?;
        if cursor.batch.is_none() {
            return Ok(());
        }
    }
}

/// The sink writes of a repair: the source's version of each differing
/// row (UPSERT_IGNORE with the compared columns; the sink's other columns
/// keep their values, or their defaults in a new row), and DELETE_IGNORE
/// of each extra row. A row whose differing cells include an immutable
/// sink column (Kudu 1.17+) is deleted and written again, since
/// UPSERT_IGNORE keeps immutable cells.
struct Repair<'a> {
    sink: &'a Reader,
    session: Session,
    upserted: u64,
    deleted: u64,
    /// Sink columns the verification does not compare (kept when a row is
    /// written again).
    uncompared: Vec<String>,
}

impl<'a> Repair<'a> {
    fn new(ctx: &'a Ctx) -> Result<Self, VerifyError> {
        let sink = &ctx.sink;
        let session = sink
            .client
            .new_session_with(
                SessionOptions::default()
                    .flush_mode(FlushMode::AutoFlushBackground)
                    .operation_timeout(sink.timeout),
            )
            .map_err(|e| sink.error("opening a write session", e))?;
        let compared = &ctx.columns.projection;
        let uncompared = sink
            .table
            .schema()
            .columns()
            .iter()
            .map(|c| c.name().to_owned())
            .filter(|name| !compared.contains(name))
            .collect();
        Ok(Repair {
            sink,
            session,
            upserted: 0,
            deleted: 0,
            uncompared,
        })
    }

    /// Whether one of `columns` is immutable on the sink.
    fn immutable(&self, columns: &[String]) -> bool {
        let schema = self.sink.table.schema();
        columns
            .iter()
            .any(|c| schema.column_by_name(c).is_some_and(|c| c.is_immutable()))
    }

    /// Writes `row` (a source row) over a sink row whose immutable cells
    /// differ: deletes it and writes it again, with the sink's cells of the
    /// columns not compared kept (read first).
    async fn recreate(&mut self, row: &RowView<'_>, keys: usize) -> Result<(), VerifyError> {
        let mut out = self.uncompared_cells(row, keys).await?;
        let what = "building a repair row";
        for (i, column) in row.schema().columns().iter().enumerate() {
            let value = row.get(i).map_err(|e| self.sink.error(what, e))?;
            out.set(column.name(), value)
                .map_err(|e| self.sink.error(what, e))?;
        }
        let key = self.copy(row, keys)?;
        self.apply(Operation::delete_ignore(&self.sink.table, key))
            .await?;
        // Applied after the delete: one tablet's writes keep their order.
        self.apply(Operation::upsert_ignore(&self.sink.table, out))
            .await?;
        self.upserted += 1;
        Ok(())
    }

    /// A row of the sink table holding the sink's current cells of the
    /// columns the verification does not compare, for the key of `row`
    /// (none set when there are no such columns or no such row).
    async fn uncompared_cells(
        &self,
        row: &RowView<'_>,
        keys: usize,
    ) -> Result<kudu_client::Row, VerifyError> {
        let mut out = self.sink.table.new_row();
        if self.uncompared.is_empty() {
            return Ok(out);
        }
        let what = "reading the sink row to repair";
        let mut spec = ScanSpec::new()
            .projection(&self.uncompared)
            .timeout(self.sink.timeout);
        for (i, column) in row.schema().columns().iter().enumerate().take(keys) {
            let value = row.get(i).map_err(|e| self.sink.error(what, e))?;
            spec = spec.predicate(Predicate::comparison(
                column.name(),
                ComparisonOp::Equal,
                value.into_owned(),
            ));
        }
        let mut scanner = self
            .sink
            .client
            .scan_builder(&self.sink.table)
            .with_spec(spec)
            .build()
            .map_err(|e| self.sink.error(what, e))?;
        while let Some(batch) = scanner
            .next_batch()
            .await
            .map_err(|e| self.sink.error(what, e))?
        {
            for found in batch.rows() {
                for (i, name) in self.uncompared.iter().enumerate() {
                    let value = found.get(i).map_err(|e| self.sink.error(what, e))?;
                    out.set(name.as_str(), value)
                        .map_err(|e| self.sink.error(what, e))?;
                }
            }
        }
        Ok(out)
    }

    /// Writes `row` (a source row) to the sink.
    async fn upsert(&mut self, row: &RowView<'_>) -> Result<(), VerifyError> {
        let out = self.copy(row, row.schema().len())?;
        self.apply(Operation::upsert_ignore(&self.sink.table, out))
            .await?;
        self.upserted += 1;
        Ok(())
    }

    /// Deletes `row` (a sink row) by its key.
    async fn delete(&mut self, row: &RowView<'_>, keys: usize) -> Result<(), VerifyError> {
        let out = self.copy(row, keys)?;
        self.apply(Operation::delete_ignore(&self.sink.table, out))
            .await?;
        self.deleted += 1;
        Ok(())
    }

    /// The first `columns` cells of `row` as a row of the sink table.
    fn copy(&self, row: &RowView<'_>, columns: usize) -> Result<kudu_client::Row, VerifyError> {
        let what = "building a repair row";
        let mut out = self.sink.table.new_row();
        for (i, column) in row.schema().columns().iter().enumerate().take(columns) {
            let value = row.get(i).map_err(|e| self.sink.error(what, e))?;
            out.set(column.name(), value)
                .map_err(|e| self.sink.error(what, e))?;
        }
        Ok(out)
    }

    async fn apply(&mut self, op: Operation) -> Result<(), VerifyError> {
        self.session
            .apply(op)
            .await
            .map_err(|e| self.sink.error("repairing", e))
    }

    async fn finish(&mut self) -> Result<(), VerifyError> {
        let flushed = self.session.flush().await;
        let closed = self.session.close().await;
        flushed
            .and(closed)
            .map_err(|e| self.sink.error("repairing", e))
    }
}
