//! Immutable columns on the sink (Kudu 1.17+, KUDU-3353): the one case
//! where a live row cannot simply be an UPSERT_IGNORE.
//!
//! On a row the sink already holds, UPSERT_IGNORE updates the mutable
//! cells and keeps the old immutable ones, and a strict UPSERT (or UPDATE)
//! that sets an immutable cell fails with an `Immutable` row error even
//! when the value is the same. A source row deleted and inserted again
//! with new immutable cells inside one window reaches the sink as one live
//! row: an ORDERED diff scan (the only kind Kudu allows: "scan start
//! timestamp is only supported in ORDERED order mode") reports it once,
//! with its state at the window's end, whether the old row was still in
//! the MemRowSet or already flushed, so nothing in the diff tells a
//! re-created row from an updated one. (Asserted against real 1.17.1 and
//! 1.18.1 servers by `crates/ferry/tests/versions/immutable.rs`.)
//!
//! So before a batch with live rows is written to a sink table with
//! immutable columns, the sink's immutable cells of those rows are read
//! ([`ImmutableCells::recreate`]): a key range per batch (a snapshot's
//! rows are dense), or, for a diff window's sparse rows, key ranges of at
//! most [`KEYS_PER_LOOKUP`] keys with an IN-list on the first key column.
//! Each live row whose key the sink holds with other immutable cells is
//! deleted first (key-only DELETE_IGNORE, flushed), then the batch is
//! written as usual, so its UPSERT_IGNORE inserts the row afresh.
//! Everything else — updates of mutable cells included — stays one
//! UPSERT_IGNORE, and a table without immutable sink columns pays nothing.
//!
//! Replays are harmless: a replayed batch finds the sink already holding
//! the new cells (nothing to delete), or the row deleted by a run that
//! died before its upsert (nothing to delete; the upsert inserts it). The
//! re-insert is the batch's own UPSERT_IGNORE, never an INSERT, so a table
//! with a non-unique primary key is re-inserted with the same explicit
//! `auto_incrementing_id` the normal path sends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kudu_client::scan::{Predicate, RowBatch, ScanSpec};
use kudu_client::schema::ValueRef;
use kudu_client::write::{OpType, Operation, RowCopy, Session};
use kudu_client::{ColumnSchema, DataType, KuduClient, KuduTable, Result, Schema, Value};

/// At most this many keys per lookup of a diff batch's rows (one IN-list).
pub(crate) const KEYS_PER_LOOKUP: usize = 1_000;

/// What a writer needs to find and re-create the rows whose immutable
/// cells differ on the sink, for one projection.
#[derive(Debug)]
pub(crate) struct ImmutableCells {
    /// Read from the sink: its key columns, then its immutable columns fed
    /// by the projection.
    lookup: Vec<String>,
    /// The sink's key columns.
    key_columns: Vec<ColumnSchema>,
    /// The projection column feeding each key column of the sink.
    key_from: Vec<usize>,
    /// The projection column feeding each immutable column of `lookup`.
    fed: Vec<usize>,
    /// Live rows as key-only DELETE_IGNOREs.
    deletes: RowCopy,
    /// How long a read of the sink may take.
    timeout: Duration,
    /// Deletes sent per flush.
    flush_every: usize,
}

/// A live row of a batch: its encoded key, its key cells, its index.
type LiveRow = (Vec<u8>, Vec<Value>, usize);

impl ImmutableCells {
    /// The plan for rows of `projection` written to `table` (`columns`:
    /// projection index → table index, as the batch's [`RowCopy`]);
    /// `None` when the projection feeds no immutable column of the table.
    pub(crate) fn new(
        table: &KuduTable,
        projection: &Schema,
        columns: &[(usize, usize)],
    ) -> Result<Option<Self>> {
        let sink = table.schema();
        let fed_by = |si: usize| columns.iter().find(|&&(_, s)| s == si).map(|&(p, _)| p);
        let immutable: Vec<(usize, usize)> = sink
            .columns()
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_immutable())
            .filter_map(|(si, _)| fed_by(si).map(|pi| (pi, si)))
            .collect();
        let key_from: Option<Vec<usize>> = (0..sink.num_key_columns()).map(fed_by).collect();
        let (Some(key_from), false) = (key_from, immutable.is_empty()) else {
            return Ok(None);
        };
        let key_columns = sink.key_columns().to_vec();
        Ok(Some(ImmutableCells {
            lookup: key_columns
                .iter()
                .chain(immutable.iter().map(|&(_, si)| &sink.columns()[si]))
                .map(|c| c.name().to_owned())
                .collect(),
            key_columns,
            key_from,
            fed: immutable.iter().map(|&(pi, _)| pi).collect(),
            deletes: RowCopy::new(
                table,
                projection,
                columns,
                OpType::DeleteIgnore,
                OpType::DeleteIgnore,
            )?,
            timeout: Duration::from_secs(30),
            flush_every: usize::MAX,
        }))
    }

    /// Reads of the sink take at most `timeout`; at most `flush_every`
    /// deletes are sent per flush (a MANUAL_FLUSH session's buffer).
    pub(crate) fn limits(mut self, timeout: Duration, flush_every: usize) -> Self {
        self.timeout = timeout;
        self.flush_every = flush_every.max(1);
        self
    }

    /// Deletes (and flushes) the rows of `batch` that `table` holds with
    /// other immutable cells, so the batch's upserts insert them afresh;
    /// returns how many. They are added to `sent` first, the count of
    /// ferry's own writes the write guard compares with the servers'.
    pub(crate) async fn delete_recreated(
        &self,
        client: &KuduClient,
        table: &KuduTable,
        session: &mut Session,
        batch: &RowBatch,
        sent: &AtomicU64,
    ) -> Result<u64> {
        let mut deletes = self.recreate(client, table, batch).await?;
        let n = deletes.len() as u64;
        if n > 0 {
            tracing::debug!(table = table.name(), rows = n, "rows re-created on the source with new immutable cells: deleted from the sink before they are written");
            sent.fetch_add(n, Ordering::Relaxed);
        }
        while !deletes.is_empty() {
            let rest = deletes.split_off(deletes.len().min(self.flush_every));
            session
                .apply_batch(std::mem::replace(&mut deletes, rest))
                .await?;
            session.flush().await?;
        }
        Ok(n)
    }

    /// The deletes that must reach the sink before `batch`: one per live
    /// row whose key `table` holds with other immutable cells.
    async fn recreate(
        &self,
        client: &KuduClient,
        table: &KuduTable,
        batch: &RowBatch,
    ) -> Result<Vec<Operation>> {
        let mut live: Vec<LiveRow> = Vec::new();
        for view in batch.rows().filter(|r| !r.is_deleted()) {
            let key = self
                .key_from
                .iter()
                .map(|&pi| view.get(pi).map(ValueRef::into_owned))
                .collect::<Result<Vec<_>>>()?;
            live.push((view.encoded_primary_key()?, key, view.index()));
        }
        if live.is_empty() {
            return Ok(Vec::new());
        }
        live.sort_by(|a, b| a.0.cmp(&b.0));
        // A snapshot batch (no IS_DELETED column) is a dense key range.
        let dense = batch.schema().is_deleted_index().is_none();
        let mut held = HashMap::new();
        for lookup in lookups(&self.key_columns, &live, dense) {
            self.read(client, table, &lookup, &mut held).await?;
        }
        let rows = live.iter().map(|(key, _, i)| {
            let view = batch.row(*i);
            let cells = self
                .fed
                .iter()
                .map(|&pi| view.get(pi))
                .collect::<Result<Vec<_>>>();
            cells.map(|c| (*i, key.as_slice(), c))
        });
        let rows = rows.collect::<Result<Vec<_>>>()?;
        recreated(&rows, &held)
            .into_iter()
            .map(|i| self.deletes.operation(&batch.row(i)))
            .collect()
    }

    /// Adds the sink's immutable cells of the rows in `lookup` to `held`,
    /// by encoded key.
    async fn read(
        &self,
        client: &KuduClient,
        table: &KuduTable,
        lookup: &Lookup,
        held: &mut HashMap<Vec<u8>, Vec<Value>>,
    ) -> Result<()> {
        let mut spec = ScanSpec::new()
            .projection(&self.lookup)
            .lower_bound_key(lookup.lower.clone())
            .timeout(self.timeout);
        if let Some(after) = &lookup.upper {
            let mut bound = table.new_row();
            for (i, v) in after.iter().enumerate() {
                bound.set(i, v)?;
            }
            spec = spec.exclusive_upper_bound(&bound);
        }
        if let Some(values) = &lookup.first_key_in {
            spec = spec.predicate(Predicate::in_list(&self.lookup[0], values.iter().cloned()));
        }
        let keys = self.key_columns.len();
        let mut scanner = client.scan_builder(table).with_spec(spec).build()?;
        while let Some(rows) = scanner.next_batch().await? {
            for row in rows.rows() {
                let cells = (keys..self.lookup.len())
                    .map(|i| row.get(i).map(ValueRef::into_owned))
                    .collect::<Result<Vec<_>>>()?;
                held.insert(row.encoded_primary_key()?, cells);
            }
        }
        Ok(())
    }
}

/// One read of the sink: the keys from `lower` (encoded) up to `upper`
/// (key cells, exclusive; `None`: to the end), and with a diff batch's
/// sparse keys only the rows whose first key column is one of
/// `first_key_in`.
#[derive(Debug, Clone, PartialEq)]
struct Lookup {
    lower: Vec<u8>,
    upper: Option<Vec<Value>>,
    first_key_in: Option<Vec<Value>>,
}

/// The reads that cover the `live` rows (in key order; `columns`: the key
/// columns): one range for a dense batch, else ranges of at most
/// [`KEYS_PER_LOOKUP`] keys, each narrowed by an IN-list on the first key
/// column. A range ends right after its last key.
fn lookups(columns: &[ColumnSchema], live: &[LiveRow], dense: bool) -> Vec<Lookup> {
    let per = if dense {
        live.len().max(1)
    } else {
        KEYS_PER_LOOKUP
    };
    live.chunks(per)
        .filter_map(|chunk| {
            let (first, last) = (chunk.first()?, chunk.last()?);
            let first_key_in = (!dense).then(|| {
                // Keys in key order: equal first columns are neighbours.
                let mut values: Vec<Value> = Vec::with_capacity(chunk.len());
                for v in chunk.iter().filter_map(|(_, key, _)| key.first()) {
                    if values.last() != Some(v) {
                        values.push(v.clone());
                    }
                }
                values
            });
            Some(Lookup {
                lower: first.0.clone(),
                upper: key_after(columns, &last.1),
                first_key_in,
            })
        })
        .collect()
}

/// The smallest key after `key` (cells of the key `columns`), to bound a
/// range exclusively; `None` when `key` is the largest there is. (An
/// encoded key with a byte appended is no bound: the tablet server decodes
/// a bound by the key's columns and drops what is left over.)
fn key_after(columns: &[ColumnSchema], key: &[Value]) -> Option<Vec<Value>> {
    let mut next = key.to_vec();
    for (column, cell) in columns.iter().zip(next.iter_mut()).rev() {
        if let Some(v) = value_after(column, cell) {
            *cell = v;
            return Some(next);
        }
        // The largest value: this column starts again from its smallest,
        // the one before it moves on.
        *cell = smallest(column)?;
    }
    None
}

/// The value of `column` right after `v`, if any.
fn value_after(column: &ColumnSchema, v: &Value) -> Option<Value> {
    let next = match v {
        Value::Int8(x) => Value::Int8(x.checked_add(1)?),
        Value::Int16(x) => Value::Int16(x.checked_add(1)?),
        Value::Int32(x) => Value::Int32(x.checked_add(1)?),
        Value::Int64(x) => Value::Int64(x.checked_add(1)?),
        Value::UnixtimeMicros(x) => Value::UnixtimeMicros(x.checked_add(1)?),
        Value::Date(x) => Value::Date(x.checked_add(1)?),
        Value::Decimal(x) => Value::Decimal(x.checked_add(1)?),
        Value::String(s) => Value::String(format!("{s}\0")),
        Value::Binary(b) => Value::Binary([b.as_slice(), &[0]].concat()),
        // Not key types (and kinds of value a later client may add).
        _ => return None,
    };
    // DATE and DECIMAL end before their representation does.
    column.check_value(next.as_ref()).is_ok().then_some(next)
}

/// The smallest value of `column`'s type.
fn smallest(column: &ColumnSchema) -> Option<Value> {
    /// 0001-01-01, Kudu's first DATE.
    const FIRST_DATE: i32 = -719_162;
    let v = match column.data_type() {
        DataType::Int8 => Value::Int8(i8::MIN),
        DataType::Int16 => Value::Int16(i16::MIN),
        DataType::Int32 => Value::Int32(i32::MIN),
        DataType::Int64 => Value::Int64(i64::MIN),
        DataType::UnixtimeMicros => Value::UnixtimeMicros(i64::MIN),
        DataType::Date => Value::Date(FIRST_DATE),
        DataType::Decimal32 | DataType::Decimal64 | DataType::Decimal128 => {
            let digits = u32::from(column.precision());
            Value::Decimal(1i128.checked_sub(10i128.checked_pow(digits)?)?)
        }
        DataType::String | DataType::Varchar => Value::String(String::new()),
        DataType::Binary => Value::Binary(Vec::new()),
        _ => return None,
    };
    column.check_value(v.as_ref()).is_ok().then_some(v)
}

/// The write decision: which of the batch's live `rows` (index, encoded
/// key, immutable cells as the source has them) must be deleted before
/// they are upserted, given the cells the sink `held` by key. A row the
/// sink does not hold, or holds with the same cells, is not.
fn recreated(
    rows: &[(usize, &[u8], Vec<ValueRef<'_>>)],
    held: &HashMap<Vec<u8>, Vec<Value>>,
) -> Vec<usize> {
    rows.iter()
        .filter(|(_, key, cells)| {
            held.get(*key).is_some_and(|sink| {
                sink.len() != cells.len()
                    || sink.iter().zip(cells).any(|(s, c)| !same(s.as_ref(), *c))
            })
        })
        .map(|(i, _, _)| *i)
        .collect()
}

/// Cell equality; floating-point cells by their bits (a NaN is the same
/// NaN, 0.0 is not -0.0), as the copy must be exact.
fn same(a: ValueRef<'_>, b: ValueRef<'_>) -> bool {
    match (a, b) {
        (ValueRef::Float(x), ValueRef::Float(y)) => x.to_bits() == y.to_bits(),
        (ValueRef::Double(x), ValueRef::Double(y)) => x.to_bits() == y.to_bits(),
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(entries: &[(&[u8], Vec<Value>)]) -> HashMap<Vec<u8>, Vec<Value>> {
        entries
            .iter()
            .map(|(k, v)| (k.to_vec(), v.clone()))
            .collect()
    }

    #[test]
    fn only_rows_the_sink_holds_with_other_immutable_cells_are_recreated() {
        let sink = held(&[
            (b"a", vec![Value::String("old".into()), Value::Int64(1)]),
            (b"b", vec![Value::String("same".into()), Value::Int64(2)]),
            (b"c", vec![Value::Null, Value::Int64(3)]),
            (
                b"d",
                vec![Value::String("x".into()), Value::Double(f64::NAN)],
            ),
            (b"e", vec![Value::String("x".into()), Value::Double(0.0)]),
        ]);
        let rows = vec![
            // Re-created with a new immutable value.
            (
                0,
                &b"a"[..],
                vec![ValueRef::String("new"), ValueRef::Int64(1)],
            ),
            // Updated (mutable cells only): same immutable cells.
            (
                1,
                &b"b"[..],
                vec![ValueRef::String("same"), ValueRef::Int64(2)],
            ),
            // NULL on the sink, a value now.
            (
                2,
                &b"c"[..],
                vec![ValueRef::String("v"), ValueRef::Int64(3)],
            ),
            // The same NaN is the same cell; -0.0 is not 0.0.
            (
                3,
                &b"d"[..],
                vec![ValueRef::String("x"), ValueRef::Double(f64::NAN)],
            ),
            (
                4,
                &b"e"[..],
                vec![ValueRef::String("x"), ValueRef::Double(-0.0)],
            ),
            // Not on the sink: inserted by the upsert.
            (
                5,
                &b"f"[..],
                vec![ValueRef::String("n"), ValueRef::Int64(6)],
            ),
        ];
        assert_eq!(recreated(&rows, &sink), [0, 2, 4]);
        assert!(recreated(&rows, &HashMap::new()).is_empty());
    }

    fn key(name: &str, t: DataType) -> ColumnSchema {
        ColumnSchema::builder(name, t).key(true).build().unwrap()
    }

    #[test]
    fn a_dense_batch_is_one_range_and_sparse_keys_are_cut_with_in_lists() {
        let columns = [key("a", DataType::Int64), key("b", DataType::Int32)];
        // 2 500 keys (i / 2, i % 2) in key order.
        let live: Vec<LiveRow> = (0..2_500u32)
            .map(|i| {
                let cells = vec![Value::Int64(i64::from(i / 2)), Value::Int32((i % 2) as i32)];
                (i.to_be_bytes().to_vec(), cells, i as usize)
            })
            .collect();

        let dense = lookups(&columns, &live, true);
        assert_eq!(dense.len(), 1);
        assert_eq!(dense[0].lower, 0u32.to_be_bytes());
        // Right after (1249, 1).
        assert_eq!(
            dense[0].upper,
            Some(vec![Value::Int64(1_249), Value::Int32(2)])
        );
        assert_eq!(dense[0].first_key_in, None);

        let sparse = lookups(&columns, &live, false);
        assert_eq!(sparse.len(), 3);
        assert_eq!(sparse[1].lower, 1_000u32.to_be_bytes());
        assert_eq!(
            sparse[1].upper,
            Some(vec![Value::Int64(999), Value::Int32(2)])
        );
        // Each first-key value once (two keys share each here).
        let in_list = sparse[1].first_key_in.as_ref().unwrap();
        assert_eq!(in_list.len(), 500);
        assert_eq!(in_list[0], Value::Int64(500));
        assert_eq!(sparse[2].first_key_in.as_ref().unwrap().len(), 250);
        assert!(lookups(&columns, &[], false).is_empty());
    }

    #[test]
    fn the_key_after_a_key_carries_over_a_column_at_its_largest_value() {
        let int_then_string = [key("a", DataType::Int32), key("s", DataType::String)];
        let after = |k: Vec<Value>| key_after(&int_then_string, &k);
        assert_eq!(
            after(vec![Value::Int32(7), Value::String("x".into())]),
            Some(vec![Value::Int32(7), Value::String("x\0".into())])
        );
        let two_ints = [key("a", DataType::Int8), key("b", DataType::Int64)];
        assert_eq!(
            key_after(&two_ints, &[Value::Int8(3), Value::Int64(i64::MAX)]),
            Some(vec![Value::Int8(4), Value::Int64(i64::MIN)])
        );
        assert_eq!(
            key_after(&two_ints, &[Value::Int8(i8::MAX), Value::Int64(i64::MAX)]),
            None,
            "the largest key: no bound"
        );
        let decimal = kudu_client::schema::ColumnSchemaBuilder::decimal("d", 3, 1)
            .key(true)
            .build()
            .unwrap();
        let with_decimal = [decimal, key("b", DataType::Int16)];
        assert_eq!(
            key_after(&with_decimal, &[Value::Decimal(41), Value::Int16(i16::MAX)]),
            Some(vec![Value::Decimal(42), Value::Int16(i16::MIN)])
        );
        assert_eq!(
            key_after(
                &with_decimal,
                &[Value::Decimal(999), Value::Int16(i16::MAX)]
            ),
            None,
            "99.9 is the largest DECIMAL(3, 1)"
        );
        let date = [key("d", DataType::Date)];
        assert_eq!(
            key_after(&date, &[Value::Date(19_000)]),
            Some(vec![Value::Date(19_001)])
        );
    }
}
