//! Column predicates pushed down to the tablet servers (`ColumnPredicatePB`,
//! docs/kudu-protocol.md#scan-messages).
//!
//! A [`Predicate`] names a column and holds owned [`Value`]s; it is checked
//! against the table schema only when a scan is built, so one predicate can
//! be reused across tables and the error names the column and both types.
//!
//! The wire format only knows inclusive-lower / exclusive-upper ranges,
//! equality, IN lists and (not-)null tests, so comparisons are normalised:
//!
//! | predicate | sent as |
//! | --- | --- |
//! | `c = v` | `equality{v}` |
//! | `c >= v` | `range{lower: v}` |
//! | `c < v` | `range{upper: v}` |
//! | `c > v` | `range{lower: succ(v)}`, or *matches nothing* if `v` is the largest value |
//! | `c <= v` | `range{upper: succ(v)}`, or `is_not_null` if `v` is the largest value |
//!
//! `succ(v)` is the next value of the column's type: `v + 1` for integers,
//! DATE, UNIXTIME_MICROS and (unscaled) DECIMAL, the next representable
//! float, and `v` followed by a zero byte for STRING / BINARY / VARCHAR.
//! An empty IN list also matches nothing. A scan with a predicate that
//! matches nothing returns no rows without contacting any tablet server.

use crate::pb;
use crate::pb::column_predicate_pb::{self as cp};
use crate::schema::types::{MAX_DATE, MAX_DECIMAL_PRECISION};
use crate::schema::{ColumnSchema, DataType, Schema, Value};
use crate::{Error, Result};

/// A comparison operator of [`Predicate::comparison`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComparisonOp {
    /// `column < value`.
    Less,
    /// `column <= value`.
    LessEqual,
    /// `column = value`.
    Equal,
    /// `column >= value`.
    GreaterEqual,
    /// `column > value`.
    Greater,
}

impl ComparisonOp {
    fn symbol(self) -> &'static str {
        match self {
            ComparisonOp::Less => "<",
            ComparisonOp::LessEqual => "<=",
            ComparisonOp::Equal => "=",
            ComparisonOp::GreaterEqual => ">=",
            ComparisonOp::Greater => ">",
        }
    }
}

/// What a [`Predicate`] tests.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PredicateKind {
    /// `column <op> value`.
    Comparison(ComparisonOp, Value),
    /// `column IN (values…)`.
    InList(Vec<Value>),
    /// `column IS NULL`.
    IsNull,
    /// `column IS NOT NULL`.
    IsNotNull,
}

/// A filter on one column, evaluated by the tablet servers.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    column: String,
    kind: PredicateKind,
}

/// A predicate checked against a schema and turned into its wire form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Encoded {
    /// Send this to the server.
    Pb(pb::ColumnPredicatePb),
    /// No row can match: the scan returns nothing.
    MatchesNothing,
}

impl Predicate {
    /// `column <op> value`. The value's kind must match the column's type
    /// exactly (checked when the scan is built): `Value::Int64` for INT64,
    /// `Value::String` for STRING / VARCHAR, unscaled `Value::Decimal` for
    /// DECIMAL, and so on.
    pub fn comparison(
        column: impl Into<String>,
        op: ComparisonOp,
        value: impl Into<Value>,
    ) -> Self {
        Predicate {
            column: column.into(),
            kind: PredicateKind::Comparison(op, value.into()),
        }
    }

    /// `column IN (values…)`; an empty list matches nothing.
    pub fn in_list<V: Into<Value>>(
        column: impl Into<String>,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        Predicate {
            column: column.into(),
            kind: PredicateKind::InList(values.into_iter().map(Into::into).collect()),
        }
    }

    /// `column IS NULL`.
    pub fn is_null(column: impl Into<String>) -> Self {
        Predicate {
            column: column.into(),
            kind: PredicateKind::IsNull,
        }
    }

    /// `column IS NOT NULL`.
    pub fn is_not_null(column: impl Into<String>) -> Self {
        Predicate {
            column: column.into(),
            kind: PredicateKind::IsNotNull,
        }
    }

    /// The column this predicate filters.
    pub fn column(&self) -> &str {
        &self.column
    }

    /// What the predicate tests.
    pub fn kind(&self) -> &PredicateKind {
        &self.kind
    }

    /// Checks the predicate against `schema` and builds its wire form.
    pub(crate) fn encode(&self, schema: &Schema) -> Result<Encoded> {
        let col = schema.column_by_name(&self.column).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "predicate on unknown column '{}' (table columns: {})",
                self.column,
                schema
                    .columns()
                    .iter()
                    .map(ColumnSchema::name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if col.data_type() == DataType::IsDeleted {
            return Err(Error::InvalidArgument(format!(
                "column '{}' is virtual and cannot be filtered",
                self.column
            )));
        }
        let pb_with = |p: cp::Predicate| {
            Encoded::Pb(pb::ColumnPredicatePb {
                column: Some(self.column.clone()),
                predicate: Some(p),
            })
        };
        Ok(match &self.kind {
            PredicateKind::IsNull => pb_with(cp::Predicate::IsNull(cp::IsNull {})),
            PredicateKind::IsNotNull => pb_with(cp::Predicate::IsNotNull(cp::IsNotNull {})),
            PredicateKind::InList(values) => {
                if values.is_empty() {
                    return Ok(Encoded::MatchesNothing);
                }
                let mut encoded = Vec::with_capacity(values.len());
                for v in values {
                    encoded.push(encode_value(col, "IN", v)?);
                }
                // The server needs no particular order, but sorted,
                // deduplicated lists keep requests small and stable.
                encoded.sort();
                encoded.dedup();
                pb_with(cp::Predicate::InList(cp::InList { values: encoded }))
            }
            PredicateKind::Comparison(op, v) => {
                let bytes = encode_value(col, op.symbol(), v)?;
                match op {
                    ComparisonOp::Equal => {
                        pb_with(cp::Predicate::Equality(cp::Equality { value: Some(bytes) }))
                    }
                    ComparisonOp::GreaterEqual => pb_with(range(Some(bytes), None)),
                    ComparisonOp::Less => pb_with(range(None, Some(bytes))),
                    ComparisonOp::Greater => match successor(col, v)? {
                        Some(next) => pb_with(range(Some(next), None)),
                        None => Encoded::MatchesNothing,
                    },
                    ComparisonOp::LessEqual => match successor(col, v)? {
                        Some(next) => pb_with(range(None, Some(next))),
                        None => pb_with(cp::Predicate::IsNotNull(cp::IsNotNull {})),
                    },
                }
            }
        })
    }
}

impl std::fmt::Display for Predicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            PredicateKind::Comparison(op, v) => write!(f, "{} {} {v}", self.column, op.symbol()),
            PredicateKind::InList(vs) => {
                write!(f, "{} IN (", self.column)?;
                for (i, v) in vs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str(")")
            }
            PredicateKind::IsNull => write!(f, "{} IS NULL", self.column),
            PredicateKind::IsNotNull => write!(f, "{} IS NOT NULL", self.column),
        }
    }
}

fn range(lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> cp::Predicate {
    cp::Predicate::Range(cp::Range { lower, upper })
}

/// The value encoding of `v` for `col`, with a clear error on NULL or a
/// value of the wrong kind.
fn encode_value(col: &ColumnSchema, op: &str, v: &Value) -> Result<Vec<u8>> {
    let bad =
        |why: String| Error::InvalidArgument(format!("predicate `{} {op} {v}`: {why}", col.name()));
    if v.is_null() {
        return Err(bad(
            "NULL is not a comparable value; use Predicate::is_null / is_not_null".into(),
        ));
    }
    if !v.as_ref().fits_type(col.data_type()) {
        return Err(bad(format!(
            "column '{}' has type {}, but the value is a {}",
            col.name(),
            col.type_display(),
            v.as_ref().kind()
        )));
    }
    if let Value::Float(x) = v {
        if x.is_nan() {
            return Err(bad("NaN cannot be compared".into()));
        }
    }
    if let Value::Double(x) = v {
        if x.is_nan() {
            return Err(bad("NaN cannot be compared".into()));
        }
    }
    if let Value::Decimal(d) = v {
        let limit = 10i128.pow(u32::from(col.precision().min(MAX_DECIMAL_PRECISION)));
        if d.unsigned_abs() >= limit.unsigned_abs() {
            return Err(bad(format!(
                "unscaled value {d} does not fit {}",
                col.type_display()
            )));
        }
    }
    let mut out = Vec::new();
    v.as_ref()
        .encode(col.data_type(), &mut out)
        .map_err(|e| bad(e.to_string()))?;
    Ok(out)
}

/// The encoding of the smallest value of `col`'s type greater than `v`, or
/// `None` if `v` is the largest value.
fn successor(col: &ColumnSchema, v: &Value) -> Result<Option<Vec<u8>>> {
    let next: Option<Value> = match v {
        Value::Bool(b) => (!*b).then_some(Value::Bool(true)),
        Value::Int8(x) => x.checked_add(1).map(Value::Int8),
        Value::Int16(x) => x.checked_add(1).map(Value::Int16),
        Value::Int32(x) => x.checked_add(1).map(Value::Int32),
        Value::Int64(x) => x.checked_add(1).map(Value::Int64),
        Value::UnixtimeMicros(x) => x.checked_add(1).map(Value::UnixtimeMicros),
        Value::Date(x) => (*x < MAX_DATE).then(|| Value::Date(x + 1)),
        Value::Decimal(x) => {
            let limit = 10i128.pow(u32::from(col.precision().min(MAX_DECIMAL_PRECISION)));
            (x + 1 < limit).then(|| Value::Decimal(x + 1))
        }
        Value::Float(x) => (*x != f32::INFINITY).then(|| Value::Float(x.next_up())),
        Value::Double(x) => (*x != f64::INFINITY).then(|| Value::Double(x.next_up())),
        Value::String(s) => {
            let mut b = s.as_bytes().to_vec();
            b.push(0);
            return Ok(Some(b));
        }
        Value::Binary(b) => {
            let mut b = b.clone();
            b.push(0);
            return Ok(Some(b));
        }
        Value::Null => None,
    };
    match next {
        Some(n) => {
            let mut out = Vec::new();
            n.as_ref().encode(col.data_type(), &mut out)?;
            Ok(Some(out))
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnSchemaBuilder;

    fn schema() -> Schema {
        Schema::new(vec![
            ColumnSchema::builder("k", DataType::Int32)
                .key(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("s", DataType::String)
                .nullable(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("f", DataType::Double)
                .nullable(true)
                .build()
                .unwrap(),
            ColumnSchemaBuilder::decimal("d", 4, 2)
                .nullable(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("b", DataType::Bool)
                .nullable(true)
                .build()
                .unwrap(),
        ])
        .unwrap()
    }

    fn pb_of(p: &Predicate) -> cp::Predicate {
        match p.encode(&schema()).unwrap() {
            Encoded::Pb(pb) => {
                assert_eq!(pb.column.as_deref(), Some(p.column()));
                pb.predicate.unwrap()
            }
            Encoded::MatchesNothing => panic!("{p} matches nothing"),
        }
    }

    #[test]
    fn comparisons_normalise_to_ranges() {
        use ComparisonOp::*;
        let le = |v: i32| v.to_le_bytes().to_vec();
        assert_eq!(
            pb_of(&Predicate::comparison("k", Equal, 5)),
            cp::Predicate::Equality(cp::Equality { value: Some(le(5)) })
        );
        assert_eq!(
            pb_of(&Predicate::comparison("k", GreaterEqual, 5)),
            range(Some(le(5)), None)
        );
        assert_eq!(
            pb_of(&Predicate::comparison("k", Greater, 5)),
            range(Some(le(6)), None)
        );
        assert_eq!(
            pb_of(&Predicate::comparison("k", Less, 5)),
            range(None, Some(le(5)))
        );
        assert_eq!(
            pb_of(&Predicate::comparison("k", LessEqual, 5)),
            range(None, Some(le(6)))
        );
        // Edges of the type.
        assert_eq!(
            Predicate::comparison("k", Greater, i32::MAX)
                .encode(&schema())
                .unwrap(),
            Encoded::MatchesNothing
        );
        assert_eq!(
            pb_of(&Predicate::comparison("k", LessEqual, i32::MAX)),
            cp::Predicate::IsNotNull(cp::IsNotNull {})
        );
        // Strings: successor appends a zero byte.
        assert_eq!(
            pb_of(&Predicate::comparison("s", Greater, "ab")),
            range(Some(b"ab\0".to_vec()), None)
        );
        // Doubles: next representable value.
        assert_eq!(
            pb_of(&Predicate::comparison("f", LessEqual, 1.0f64)),
            range(None, Some(1.0f64.next_up().to_le_bytes().to_vec()))
        );
        assert_eq!(
            Predicate::comparison("f", Greater, f64::INFINITY)
                .encode(&schema())
                .unwrap(),
            Encoded::MatchesNothing
        );
        // Decimal(4, 2): 99.99 is the largest value.
        assert_eq!(
            Predicate::comparison("d", Greater, Value::Decimal(9999))
                .encode(&schema())
                .unwrap(),
            Encoded::MatchesNothing
        );
        assert_eq!(
            pb_of(&Predicate::comparison("d", Greater, Value::Decimal(-5))),
            range(Some((-4i32).to_le_bytes().to_vec()), None)
        );
        assert_eq!(
            Predicate::comparison("b", Greater, true)
                .encode(&schema())
                .unwrap(),
            Encoded::MatchesNothing
        );
    }

    #[test]
    fn lists_and_null_tests() {
        let p = Predicate::in_list("k", [3, 1, 3]);
        assert_eq!(
            pb_of(&p),
            cp::Predicate::InList(cp::InList {
                values: vec![1i32.to_le_bytes().to_vec(), 3i32.to_le_bytes().to_vec()]
            })
        );
        assert_eq!(
            Predicate::in_list("k", Vec::<i32>::new())
                .encode(&schema())
                .unwrap(),
            Encoded::MatchesNothing
        );
        assert_eq!(
            pb_of(&Predicate::is_null("s")),
            cp::Predicate::IsNull(cp::IsNull {})
        );
        assert_eq!(
            pb_of(&Predicate::is_not_null("s")),
            cp::Predicate::IsNotNull(cp::IsNotNull {})
        );
        assert_eq!(
            Predicate::in_list("s", ["a", "b"]).to_string(),
            "s IN (\"a\", \"b\")"
        );
    }

    #[test]
    fn type_mismatches_are_clear() {
        let err = Predicate::comparison("k", ComparisonOp::Equal, 5i64)
            .encode(&schema())
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::InvalidArgument(_)), "{text}");
        assert!(
            text.contains("'k'") && text.contains("INT32") && text.contains("i64"),
            "{text}"
        );
        let err = Predicate::comparison("nope", ComparisonOp::Equal, 5)
            .encode(&schema())
            .unwrap_err();
        assert!(err.to_string().contains("unknown column 'nope'"), "{err}");
        assert!(Predicate::comparison("s", ComparisonOp::Equal, Value::Null)
            .encode(&schema())
            .is_err());
        assert!(Predicate::comparison("f", ComparisonOp::Less, f64::NAN)
            .encode(&schema())
            .is_err());
        assert!(Predicate::in_list("k", [1i64]).encode(&schema()).is_err());
        assert!(
            Predicate::comparison("d", ComparisonOp::Equal, Value::Decimal(10_000))
                .encode(&schema())
                .is_err()
        );
    }
}
