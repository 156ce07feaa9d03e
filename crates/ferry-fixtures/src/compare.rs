//! Cell-by-cell comparison of two tables (a source and its replica), with a
//! report a failing test can print: counts, then the first differences
//! with their key and column.
//!
//! Columns are matched by name; floating-point cells compare by their bits
//! (NaN equals the same NaN, 0.0 differs from -0.0), since replication
//! must copy them exactly.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use kudu_client::{KuduClient, Value};

/// Differences kept for the report (counts cover all of them).
const KEPT: usize = 20;

/// One difference between the two tables.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    /// The column sets differ.
    Schema(String),
    /// A source row the sink lacks.
    MissingInSink { key: String },
    /// A sink row the source lacks.
    ExtraInSink { key: String },
    /// A cell that differs.
    Cell {
        key: String,
        column: String,
        source: String,
        sink: String,
    },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Schema(s) => write!(f, "schema: {s}"),
            Difference::MissingInSink { key } => write!(f, "{key}: missing in the sink"),
            Difference::ExtraInSink { key } => write!(f, "{key}: in the sink only"),
            Difference::Cell {
                key,
                column,
                source,
                sink,
            } => write!(f, "{key}: column `{column}`: source {source}, sink {sink}"),
        }
    }
}

/// The outcome of [`compare_tables`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableDiff {
    pub source_rows: usize,
    pub sink_rows: usize,
    pub missing_in_sink: usize,
    pub extra_in_sink: usize,
    /// Rows present on both sides with at least one differing cell.
    pub differing_rows: usize,
    /// The first differences (at most 20), in key order.
    pub first: Vec<Difference>,
}

impl TableDiff {
    /// Same columns, same keys, same cells.
    pub fn is_equal(&self) -> bool {
        self.first.is_empty()
    }

    fn note(&mut self, d: Difference) {
        if self.first.len() < KEPT {
            self.first.push(d);
        }
    }
}

impl fmt::Display for TableDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_equal() {
            return write!(f, "tables equal ({} rows)", self.source_rows);
        }
        write!(
            f,
            "tables differ: source {} rows, sink {} rows; {} missing in the sink, {} only in the sink, {} rows with differing cells; first differences:",
            self.source_rows,
            self.sink_rows,
            self.missing_in_sink,
            self.extra_in_sink,
            self.differing_rows
        )?;
        for d in &self.first {
            write!(f, "\n  {d}")?;
        }
        Ok(())
    }
}

/// Key cells in an order Kudu keys can take (no floats in keys).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum KeyCell {
    Null,
    Int(i128),
    Bytes(Vec<u8>),
}

fn key_cell(v: &Value) -> KeyCell {
    match v {
        Value::Null => KeyCell::Null,
        Value::Bool(b) => KeyCell::Int(i128::from(*b)),
        Value::Int8(x) => KeyCell::Int(i128::from(*x)),
        Value::Int16(x) => KeyCell::Int(i128::from(*x)),
        Value::Int32(x) | Value::Date(x) => KeyCell::Int(i128::from(*x)),
        Value::Int64(x) | Value::UnixtimeMicros(x) => KeyCell::Int(i128::from(*x)),
        Value::Decimal(x) => KeyCell::Int(*x),
        Value::Float(x) => KeyCell::Int(i128::from(x.to_bits())),
        Value::Double(x) => KeyCell::Int(i128::from(x.to_bits())),
        Value::String(s) => KeyCell::Bytes(s.as_bytes().to_vec()),
        Value::Binary(b) => KeyCell::Bytes(b.clone()),
        // A type newer than this fixture: its text still orders equal keys
        // together.
        other => KeyCell::Bytes(other.to_string().into_bytes()),
    }
}

/// Exact equality: floats by their bits.
fn same_cell(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn render(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Float(x) => format!("{x:?}"),
        Value::Double(x) => format!("{x:?}"),
        other => other.to_string(),
    }
}

struct Table {
    columns: Vec<String>,
    keys: usize,
    rows: BTreeMap<Vec<KeyCell>, Vec<Value>>,
}

impl Table {
    fn key_string(&self, row: &[Value]) -> String {
        self.columns[..self.keys]
            .iter()
            .zip(row)
            .map(|(c, v)| format!("{c}={}", render(v)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Reads every row of `name`: latest data, or (`at`) a snapshot at that
/// raw hybrid time. Scans are retried a few times: a comparison often runs
/// right after a fault healed.
async fn read(client: &KuduClient, name: &str, at: Option<u64>) -> Table {
    let mut last = String::new();
    for _ in 0..5 {
        match try_read(client, name, at).await {
            Ok(t) => return t,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("reading table {name} for the comparison: {last}");
}

async fn try_read(
    client: &KuduClient,
    name: &str,
    at: Option<u64>,
) -> Result<Table, kudu_client::Error> {
    let table = client.open_table(name).await?;
    let schema = table.schema();
    let columns: Vec<String> = schema
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let keys = schema.num_key_columns();
    let mut builder = client.scan_builder(&table);
    if let Some(at) = at {
        builder = builder.snapshot(kudu_client::HybridTime::from_raw(at));
    }
    let mut scanner = builder.build()?;
    let mut rows = BTreeMap::new();
    while let Some(batch) = scanner.next_batch().await? {
        for view in batch.rows() {
            let values = view.to_values()?;
            let key = values[..keys].iter().map(key_cell).collect();
            rows.insert(key, values);
        }
    }
    Ok(Table {
        columns,
        keys,
        rows,
    })
}

/// Compares `source_table` on `source` with `sink_table` on `sink`, cell
/// by cell. Panics if a table cannot be read (it is a test fixture).
pub async fn compare_tables(
    source: &KuduClient,
    sink: &KuduClient,
    source_table: &str,
    sink_table: &str,
) -> TableDiff {
    compare_tables_at(source, sink, (source_table, None), (sink_table, None)).await
}

/// [`compare_tables`] with each side read at its own snapshot (a raw
/// hybrid time of its cluster; `None`: latest): e.g. the source at a cut's
/// source time and the sink at its sink time.
pub async fn compare_tables_at(
    source: &KuduClient,
    sink: &KuduClient,
    (source_table, source_at): (&str, Option<u64>),
    (sink_table, sink_at): (&str, Option<u64>),
) -> TableDiff {
    let (a, b) = tokio::join!(
        read(source, source_table, source_at),
        read(sink, sink_table, sink_at)
    );
    let mut diff = TableDiff {
        source_rows: a.rows.len(),
        sink_rows: b.rows.len(),
        ..TableDiff::default()
    };
    // Sink column index of each source column, by name.
    let mapping: Vec<Option<usize>> = a
        .columns
        .iter()
        .map(|c| b.columns.iter().position(|d| d == c))
        .collect();
    let missing: Vec<&String> = a
        .columns
        .iter()
        .zip(&mapping)
        .filter(|(_, m)| m.is_none())
        .map(|(c, _)| c)
        .collect();
    let extra: Vec<&String> = b
        .columns
        .iter()
        .filter(|c| !a.columns.contains(c))
        .collect();
    if !missing.is_empty() || !extra.is_empty() {
        diff.note(Difference::Schema(format!(
            "columns missing in the sink: {missing:?}; only in the sink: {extra:?}"
        )));
    }
    let mut sink_rows = b.rows.iter().peekable();
    for (key, row) in &a.rows {
        while let Some((k, extra_row)) = sink_rows.peek() {
            if *k >= key {
                break;
            }
            diff.extra_in_sink += 1;
            let key = b.key_string(extra_row);
            diff.note(Difference::ExtraInSink { key });
            sink_rows.next();
        }
        let Some(other) = sink_rows.next_if(|(k, _)| *k == key).map(|(_, r)| r) else {
            diff.missing_in_sink += 1;
            diff.note(Difference::MissingInSink {
                key: a.key_string(row),
            });
            continue;
        };
        let mut differs = false;
        for (i, (value, m)) in row.iter().zip(&mapping).enumerate() {
            let Some(j) = m else { continue };
            if !same_cell(value, &other[*j]) {
                differs = true;
                diff.note(Difference::Cell {
                    key: a.key_string(row),
                    column: a.columns[i].clone(),
                    source: render(value),
                    sink: render(&other[*j]),
                });
            }
        }
        if differs {
            diff.differing_rows += 1;
        }
    }
    for (_, extra_row) in sink_rows {
        diff.extra_in_sink += 1;
        diff.note(Difference::ExtraInSink {
            key: b.key_string(extra_row),
        });
    }
    diff
}
