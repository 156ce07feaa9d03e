//! Which columns are compared: the primary keys must be identical (names,
//! types, order, and a non-unique key's hidden `auto_incrementing_id` on
//! both sides or neither, so rows match by their full key, id included);
//! value columns are matched by name and compared when type
//! and nullability agree, else left out with the reason.

use kudu_client::{ColumnSchema, Schema};

use crate::{SkippedColumn, VerifyError};

/// The columns both sides are read with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Columns {
    /// The projection: the key columns, then the compared value columns in
    /// the source's order (the same on both sides, so the per-row checksums
    /// hash the same cells in the same order).
    pub projection: Vec<String>,
    /// How many of `projection` are key columns (they come first).
    pub keys: usize,
    /// Columns left out, source columns first.
    pub skipped: Vec<SkippedColumn>,
}

/// Matches the columns of the source and the sink schema.
pub(crate) fn match_columns(source: &Schema, sink: &Schema) -> Result<Columns, VerifyError> {
    let (sk, kk) = (source.key_columns(), sink.key_columns());
    let same_key = sk.len() == kk.len()
        && sk.iter().zip(kk).all(|(a, b)| {
            a.name() == b.name()
                && same_type(a, b)
                && a.is_auto_incrementing() == b.is_auto_incrementing()
        });
    if !same_key {
        return Err(VerifyError::Incomparable(format!(
            "the primary keys differ: source ({}), sink ({})",
            describe_key(sk),
            describe_key(kk)
        )));
    }
    let mut projection: Vec<String> = sk.iter().map(|c| c.name().to_owned()).collect();
    let keys = projection.len();
    let mut skipped = Vec::new();
    for column in &source.columns()[keys..] {
        let reason = match sink.column_by_name(column.name()) {
            None => Some("only in the source".to_owned()),
            Some(other) if !same_type(column, other) => Some(format!(
                "{} in the source, {} in the sink",
                column.type_display(),
                other.type_display()
            )),
            Some(other) if column.is_nullable() != other.is_nullable() => Some(format!(
                "{} in the source, {} in the sink",
                nullability(column),
                nullability(other)
            )),
            Some(_) => None,
        };
        match reason {
            Some(reason) => skipped.push(SkippedColumn {
                name: column.name().to_owned(),
                reason,
            }),
            None => projection.push(column.name().to_owned()),
        }
    }
    for column in &sink.columns()[keys..] {
        if source.column_by_name(column.name()).is_none() {
            skipped.push(SkippedColumn {
                name: column.name().to_owned(),
                reason: "only in the sink".to_owned(),
            });
        }
    }
    Ok(Columns {
        projection,
        keys,
        skipped,
    })
}

/// Same physical type and type attributes (DECIMAL precision and scale,
/// VARCHAR length).
fn same_type(a: &ColumnSchema, b: &ColumnSchema) -> bool {
    a.data_type() == b.data_type() && a.type_attributes() == b.type_attributes()
}

fn nullability(c: &ColumnSchema) -> &'static str {
    if c.is_nullable() {
        "nullable"
    } else {
        "not nullable"
    }
}

fn describe_key(columns: &[ColumnSchema]) -> String {
    columns
        .iter()
        .map(|c| {
            let hidden = if c.is_auto_incrementing() {
                " hidden auto-incrementing"
            } else {
                ""
            };
            format!("{} {}{hidden}", c.name(), c.type_display())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudu_client::DataType;

    fn col(name: &str, t: DataType, key: bool, nullable: bool) -> ColumnSchema {
        ColumnSchema::builder(name, t)
            .key(key)
            .nullable(nullable)
            .build()
            .unwrap()
    }

    #[test]
    fn value_columns_match_by_name_in_source_order() {
        let source = Schema::new(vec![
            col("id", DataType::Int64, true, false),
            col("a", DataType::String, false, true),
            col("b", DataType::Int32, false, true),
            col("c", DataType::Int32, false, true),
            col("d", DataType::Int32, false, true),
        ])
        .unwrap();
        let sink = Schema::new(vec![
            col("id", DataType::Int64, true, false),
            col("d", DataType::Int32, false, true),
            col("c", DataType::Int64, false, true),
            col("b", DataType::Int32, false, false),
            col("a", DataType::String, false, true),
            col("e", DataType::Bool, false, true),
        ])
        .unwrap();
        let m = match_columns(&source, &sink).unwrap();
        assert_eq!(m.projection, ["id", "a", "d"]);
        assert_eq!(m.keys, 1);
        let skipped: Vec<_> = m
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.name, s.reason))
            .collect();
        assert_eq!(
            skipped,
            [
                "b: nullable in the source, not nullable in the sink",
                "c: INT32 in the source, INT64 in the sink",
                "e: only in the sink"
            ]
        );
    }

    #[test]
    fn different_keys_are_incomparable() {
        let source = Schema::new(vec![col("id", DataType::Int64, true, false)]).unwrap();
        let sink = Schema::new(vec![col("id", DataType::Int32, true, false)]).unwrap();
        let err = match_columns(&source, &sink).unwrap_err();
        assert!(matches!(err, VerifyError::Incomparable(_)), "{err}");
        assert!(
            err.to_string()
                .contains("source (id INT64), sink (id INT32)"),
            "{err}"
        );
    }

    #[test]
    fn a_non_unique_key_is_compared_with_its_hidden_id() {
        let id = |auto: bool| {
            ColumnSchema::builder("auto_incrementing_id", DataType::Int64)
                .key(true)
                .auto_incrementing(auto)
                .build()
                .unwrap()
        };
        let non_unique = |auto: bool| {
            Schema::new(vec![
                col("k", DataType::Int32, true, false),
                id(auto),
                col("v", DataType::Int64, false, true),
            ])
            .unwrap()
        };
        let m = match_columns(&non_unique(true), &non_unique(true)).unwrap();
        assert_eq!(m.projection, ["k", "auto_incrementing_id", "v"]);
        assert_eq!(m.keys, 2);
        // A unique key that only borrows the hidden column's name.
        let err = match_columns(&non_unique(true), &non_unique(false)).unwrap_err();
        assert!(
            err.to_string().contains(
                "source (k INT32, auto_incrementing_id INT64 hidden auto-incrementing), sink (k INT32, auto_incrementing_id INT64)"
            ),
            "{err}"
        );
    }
}
