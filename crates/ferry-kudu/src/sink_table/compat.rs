//! Whether an existing sink table can receive the source's rows: every
//! problem ([`ColumnProblem`]) listed at once, key first.

use std::fmt;

use kudu_client::{ColumnSchema, Schema};

/// One reason an existing sink table cannot receive the source's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ColumnProblem {
    /// The primary keys differ (names, types or order); both listed as
    /// `name TYPE`.
    KeyMismatch {
        /// The source key, `name TYPE` each.
        source: Vec<String>,
        /// The sink key, `name TYPE` each.
        sink: Vec<String>,
    },
    /// One side's primary key is non-unique (it ends in the hidden
    /// auto-incrementing column `auto_incrementing_id`) and the other's is
    /// unique. Rows could not be written either way: a unique sink merges
    /// rows the source tells apart only by their id, and a non-unique sink
    /// needs an id no unique source has.
    KeyUniqueness {
        /// The source key, `name TYPE` each (the hidden column marked).
        source: Vec<String>,
        /// The sink key, `name TYPE` each (the hidden column marked).
        sink: Vec<String>,
        /// Whether the source's key is the non-unique one.
        source_non_unique: bool,
    },
    /// A source column the sink does not have.
    Missing {
        /// The column.
        column: String,
        /// The source column's type.
        source_type: String,
    },
    /// A source column whose sink column has another type or attributes.
    TypeMismatch {
        /// The column.
        column: String,
        /// The source column's type.
        source_type: String,
        /// The sink column's type.
        sink_type: String,
    },
    /// A nullable source column whose sink column is NOT NULL.
    NotNullable {
        /// The column.
        column: String,
    },
    /// A sink-only column that is NOT NULL without a default.
    SinkOnlyRequired {
        /// The column.
        column: String,
        /// The sink column's type.
        sink_type: String,
    },
    /// A mutable source column whose sink column is immutable (Kudu
    /// 1.17+): the sink would keep each row's first value. (The other way
    /// round is fine: a mutable sink column takes every value.)
    ImmutableInSink {
        /// The column.
        column: String,
    },
}

impl ColumnProblem {
    /// The column concerned (`None` for a key mismatch).
    pub fn column(&self) -> Option<&str> {
        match self {
            ColumnProblem::KeyMismatch { .. } | ColumnProblem::KeyUniqueness { .. } => None,
            ColumnProblem::Missing { column, .. }
            | ColumnProblem::TypeMismatch { column, .. }
            | ColumnProblem::NotNullable { column }
            | ColumnProblem::ImmutableInSink { column }
            | ColumnProblem::SinkOnlyRequired { column, .. } => Some(column),
        }
    }
}

impl fmt::Display for ColumnProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnProblem::KeyMismatch { source, sink } => write!(
                f,
                "primary key: the source's is ({}) but the sink's is ({}); names, types and order must match",
                source.join(", "),
                sink.join(", ")
            ),
            ColumnProblem::KeyUniqueness {
                source,
                sink,
                source_non_unique: true,
            } => write!(
                f,
                "primary key: the source's is non-unique ({}) but the sink's is unique ({}); the source tells rows with the same key apart by their hidden id, which a unique key would merge: the sink table needs a non-unique primary key on the same columns",
                source.join(", "),
                sink.join(", ")
            ),
            ColumnProblem::KeyUniqueness {
                source,
                sink,
                source_non_unique: false,
            } => write!(
                f,
                "primary key: the source's is unique ({}) but the sink's is non-unique ({}); the source's rows carry no auto_incrementing_id to write and update them by: the sink table needs a unique primary key on the same columns",
                source.join(", "),
                sink.join(", ")
            ),
            ColumnProblem::Missing { column, source_type } => {
                write!(f, "column '{column}' ({source_type}) is missing in the sink")
            }
            ColumnProblem::TypeMismatch {
                column,
                source_type,
                sink_type,
            } => write!(
                f,
                "column '{column}' is {source_type} in the source but {sink_type} in the sink"
            ),
            ColumnProblem::NotNullable { column } => write!(
                f,
                "column '{column}' is nullable in the source but NOT NULL in the sink"
            ),
            ColumnProblem::ImmutableInSink { column } => write!(
                f,
                "column '{column}' is immutable in the sink but not in the source: updates of it would not reach the sink; make the sink column mutable"
            ),
            ColumnProblem::SinkOnlyRequired { column, sink_type } => write!(
                f,
                "column '{column}' ({sink_type} NOT NULL) exists only in the sink and has no default, so no source row can fill it"
            ),
        }
    }
}

fn typed(c: &ColumnSchema) -> String {
    if c.is_auto_incrementing() {
        format!("{} {} hidden auto-incrementing", c.name(), c.type_display())
    } else {
        format!("{} {}", c.name(), c.type_display())
    }
}

fn same_type(a: &ColumnSchema, b: &ColumnSchema) -> bool {
    a.data_type() == b.data_type() && a.type_attributes() == b.type_attributes()
}

/// Every reason rows of `source` cannot be written to `sink`, key first,
/// then source columns in order, then sink-only columns. Empty = compatible.
pub fn check_compatible(source: &Schema, sink: &Schema) -> Vec<ColumnProblem> {
    let mut problems = Vec::new();
    let (src_keys, sink_keys) = (source.key_columns(), sink.key_columns());
    let source_non_unique = source.auto_incrementing_index().is_some();
    let uniqueness_differs = source_non_unique != sink.auto_incrementing_index().is_some();
    let keys_match = !uniqueness_differs
        && src_keys.len() == sink_keys.len()
        && src_keys.iter().zip(sink_keys).all(|(a, b)| {
            a.name() == b.name()
                && same_type(a, b)
                && a.is_auto_incrementing() == b.is_auto_incrementing()
        });
    if uniqueness_differs {
        problems.push(ColumnProblem::KeyUniqueness {
            source: src_keys.iter().map(typed).collect(),
            sink: sink_keys.iter().map(typed).collect(),
            source_non_unique,
        });
    } else if !keys_match {
        problems.push(ColumnProblem::KeyMismatch {
            source: src_keys.iter().map(typed).collect(),
            sink: sink_keys.iter().map(typed).collect(),
        });
    }
    for col in source.columns() {
        // The hidden id is part of the key problem already.
        if col.is_auto_incrementing() && uniqueness_differs {
            continue;
        }
        let Some(dst) = sink.column_by_name(col.name()) else {
            problems.push(ColumnProblem::Missing {
                column: col.name().to_owned(),
                source_type: col.type_display(),
            });
            continue;
        };
        // A key column's type is already part of a reported key mismatch.
        let in_key_problem = col.is_key() && dst.is_key() && !keys_match;
        let differs = !same_type(col, dst);
        if differs && !in_key_problem {
            problems.push(ColumnProblem::TypeMismatch {
                column: col.name().to_owned(),
                source_type: col.type_display(),
                sink_type: dst.type_display(),
            });
        }
        if col.is_nullable() && !dst.is_nullable() {
            problems.push(ColumnProblem::NotNullable {
                column: col.name().to_owned(),
            });
        }
        if dst.is_immutable() && !col.is_immutable() {
            problems.push(ColumnProblem::ImmutableInSink {
                column: col.name().to_owned(),
            });
        }
    }
    for dst in sink.columns() {
        let required = !dst.is_nullable()
            && dst.default_value().is_none_or(|v| v.is_null())
            && !dst.is_auto_incrementing();
        if source.column_by_name(dst.name()).is_none() && required && !dst.is_key() {
            problems.push(ColumnProblem::SinkOnlyRequired {
                column: dst.name().to_owned(),
                sink_type: dst.type_display(),
            });
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink_table::SinkTableError;
    use kudu_client::schema::ColumnSchemaBuilder;
    use kudu_client::{DataType, Value};

    fn col(name: &str, t: DataType) -> ColumnSchemaBuilder {
        ColumnSchema::builder(name, t)
    }

    fn schema(cols: Vec<ColumnSchemaBuilder>) -> Schema {
        Schema::new(cols.into_iter().map(|c| c.build().unwrap()).collect()).unwrap()
    }

    fn source_schema() -> Schema {
        schema(vec![
            col("id", DataType::Int64).key(true),
            col("name", DataType::String).nullable(true),
            ColumnSchemaBuilder::decimal("price", 10, 2),
            col("n", DataType::Int32),
        ])
    }

    #[test]
    fn compatible_schemas_pass() {
        let sink = schema(vec![
            col("id", DataType::Int64).key(true),
            // Columns in another order, a NOT NULL source column nullable in
            // the sink, sink-only columns that are nullable or defaulted.
            col("n", DataType::Int32).nullable(true),
            ColumnSchemaBuilder::decimal("price", 10, 2),
            col("name", DataType::String).nullable(true),
            col("extra", DataType::Bool).nullable(true),
            col("flag", DataType::Int8).default_value(Value::Int8(1)),
        ]);
        assert_eq!(check_compatible(&source_schema(), &sink), vec![]);
        assert_eq!(check_compatible(&source_schema(), &source_schema()), vec![]);
    }

    /// `k INT32` as a non-unique key (the hidden id after it), then `v`.
    fn non_unique() -> Schema {
        schema(vec![
            col("k", DataType::Int32).key(true),
            col("auto_incrementing_id", DataType::Int64)
                .key(true)
                .auto_incrementing(true),
            col("v", DataType::Int64).nullable(true),
        ])
    }

    #[test]
    fn a_non_unique_key_needs_a_non_unique_key_on_the_sink_and_back() {
        let same = non_unique();
        assert_eq!(check_compatible(&non_unique(), &same), vec![]);
        // A schema change on the source is followed: the hidden column is
        // no obstacle to an added value column.
        let wider = schema(vec![
            col("k", DataType::Int32).key(true),
            col("auto_incrementing_id", DataType::Int64)
                .key(true)
                .auto_incrementing(true),
            col("v", DataType::Int64).nullable(true),
            col("extra", DataType::String).nullable(true),
        ]);
        assert_eq!(check_compatible(&non_unique(), &wider), vec![]);

        let unique = schema(vec![
            col("k", DataType::Int32).key(true),
            col("v", DataType::Int64).nullable(true),
        ]);
        let problems = check_compatible(&non_unique(), &unique);
        assert_eq!(
            problems,
            vec![ColumnProblem::KeyUniqueness {
                source: vec![
                    "k INT32".into(),
                    "auto_incrementing_id INT64 hidden auto-incrementing".into()
                ],
                sink: vec!["k INT32".into()],
                source_non_unique: true,
            }],
            "the hidden column is not listed again as missing"
        );
        let text = problems[0].to_string();
        assert!(text.contains("source's is non-unique"), "{text}");
        assert!(text.contains("sink's is unique (k INT32)"), "{text}");

        let problems = check_compatible(&unique, &non_unique());
        assert_eq!(problems.len(), 1, "{problems:?}");
        let text = problems[0].to_string();
        assert!(text.contains("source's is unique (k INT32)"), "{text}");
        assert!(text.contains("sink's is non-unique"), "{text}");
        assert!(text.contains("auto_incrementing_id"), "{text}");

        // A plain key column that merely has the hidden column's name is a
        // unique key.
        let look_alike = schema(vec![
            col("k", DataType::Int32).key(true),
            col("auto_incrementing_id", DataType::Int64).key(true),
            col("v", DataType::Int64).nullable(true),
        ]);
        let problems = check_compatible(&non_unique(), &look_alike);
        assert!(
            matches!(
                problems.as_slice(),
                [ColumnProblem::KeyUniqueness {
                    source_non_unique: true,
                    ..
                }]
            ),
            "{problems:?}"
        );
        let err = SinkTableError::Incompatible {
            sink: "events_copy".into(),
            source_table: "events".into(),
            problems,
        };
        let msg = err.to_string();
        for part in [
            "'events_copy'",
            "'events'",
            "k INT32",
            "auto_incrementing_id",
        ] {
            assert!(msg.contains(part), "{part} in {msg}");
        }
    }

    #[test]
    fn a_sink_column_immutable_where_the_source_is_mutable_is_refused() {
        let source = schema(vec![
            col("id", DataType::Int64).key(true),
            col("a", DataType::String).nullable(true).immutable(true),
            col("b", DataType::Int64).nullable(true),
        ]);
        // Mutable in the sink where the source is immutable: fine.
        let relaxed = schema(vec![
            col("id", DataType::Int64).key(true),
            col("a", DataType::String).nullable(true),
            col("b", DataType::Int64).nullable(true),
        ]);
        assert_eq!(check_compatible(&source, &relaxed), vec![]);
        assert_eq!(check_compatible(&source, &source), vec![]);
        let stricter = schema(vec![
            col("id", DataType::Int64).key(true),
            col("a", DataType::String).nullable(true).immutable(true),
            col("b", DataType::Int64).nullable(true).immutable(true),
        ]);
        let problems = check_compatible(&source, &stricter);
        assert_eq!(
            problems,
            vec![ColumnProblem::ImmutableInSink { column: "b".into() }]
        );
        let text = problems[0].to_string();
        assert!(
            text.contains("'b'") && text.contains("immutable in the sink"),
            "{text}"
        );
    }

    #[test]
    fn every_problem_is_listed() {
        let sink = schema(vec![
            col("id", DataType::Int32).key(true),
            col("name", DataType::String),
            ColumnSchemaBuilder::decimal("price", 12, 2),
            col("required", DataType::Int64),
        ]);
        let problems = check_compatible(&source_schema(), &sink);
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 5, "{text:#?}");
        assert!(
            matches!(problems[0], ColumnProblem::KeyMismatch { .. }),
            "{text:#?}"
        );
        assert!(
            text[0].contains("(id INT64)") && text[0].contains("(id INT32)"),
            "{}",
            text[0]
        );
        assert_eq!(
            problems[1],
            ColumnProblem::NotNullable {
                column: "name".into()
            }
        );
        assert_eq!(
            text[2],
            "column 'price' is DECIMAL(10, 2) in the source but DECIMAL(12, 2) in the sink"
        );
        assert_eq!(problems[3].column(), Some("n"));
        assert!(text[3].contains("missing"), "{}", text[3]);
        assert_eq!(problems[4].column(), Some("required"));
        let err = SinkTableError::Incompatible {
            sink: "t_copy".into(),
            source_table: "t".into(),
            problems,
        };
        let msg = err.to_string();
        for c in ["'name'", "'price'", "'n'", "'required'", "primary key"] {
            assert!(msg.contains(c), "{c} in {msg}");
        }
        assert!(!err.is_retryable());
    }
}
