//! Cell values as the report shows them (JSON) and cell equality for the
//! row diff (floating-point values compare by their bits, so NaN equals
//! NaN and -0.0 differs from 0.0, as in the checksums).

use kudu_client::scan::RowView;
use kudu_client::schema::ValueRef;
use kudu_client::{ColumnSchema, Decimal};
use serde_json::{Map, Value as Json};

/// Whether two cells hold the same value (bitwise for floats).
pub(crate) fn same(a: ValueRef<'_>, b: ValueRef<'_>) -> bool {
    match (a, b) {
        (ValueRef::Float(x), ValueRef::Float(y)) => x.to_bits() == y.to_bits(),
        (ValueRef::Double(x), ValueRef::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// One cell as JSON: numbers as numbers (non-finite floats as strings),
/// DECIMAL as a string with the column's scale (exact), BINARY as
/// lowercase hex, UNIXTIME_MICROS as microseconds, DATE as days since the
/// epoch. A DECIMAL with more digits than its column's precision is an
/// error naming the column.
pub(crate) fn to_json(column: &ColumnSchema, v: ValueRef<'_>) -> Result<Json, kudu_client::Error> {
    Ok(match v {
        ValueRef::Null => Json::Null,
        ValueRef::Bool(b) => Json::Bool(b),
        ValueRef::Int8(i) => i.into(),
        ValueRef::Int16(i) => i.into(),
        ValueRef::Int32(i) | ValueRef::Date(i) => i.into(),
        ValueRef::Int64(i) | ValueRef::UnixtimeMicros(i) => i.into(),
        ValueRef::Float(f) => float(f64::from(f), f.to_string()),
        ValueRef::Double(f) => float(f, f.to_string()),
        ValueRef::Decimal(d) => {
            let d = Decimal::new(d, column.precision(), column.scale()).map_err(|e| {
                kudu_client::Error::InvalidArgument(format!("column '{}': {e}", column.name()))
            })?;
            Json::String(d.to_string())
        }
        ValueRef::String(s) => Json::String(s.to_owned()),
        ValueRef::Binary(b) => Json::String(b.iter().map(|x| format!("{x:02x}")).collect()),
        // A cell type newer than this report.
        _ => {
            return Err(kudu_client::Error::InvalidArgument(format!(
                "column '{}': cells of type {} cannot be shown",
                column.name(),
                column.data_type()
            )))
        }
    })
}

fn float(f: f64, text: String) -> Json {
    serde_json::Number::from_f64(f).map_or(Json::String(text), Json::Number)
}

/// Columns `[from, to)` of a row, by name, as JSON.
pub(crate) fn row_json(
    row: &RowView<'_>,
    from: usize,
    to: usize,
) -> Result<Map<String, Json>, kudu_client::Error> {
    let schema = row.schema();
    let mut out = Map::new();
    for (i, column) in schema.columns().iter().enumerate().take(to).skip(from) {
        out.insert(column.name().to_owned(), to_json(column, row.get(i)?)?);
    }
    Ok(out)
}

/// A key or row map as the report prints it: `{id: 5, name: "a"}`.
pub(crate) fn display_map(map: &Map<String, Json>) -> String {
    let cells: Vec<String> = map.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", cells.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_keep_their_scale() {
        let column = |precision, scale| {
            kudu_client::schema::ColumnSchemaBuilder::decimal("d", precision, scale)
                .build()
                .expect("column")
        };
        let text = |unscaled, precision, scale| {
            to_json(&column(precision, scale), ValueRef::Decimal(unscaled))
        };
        assert_eq!(text(1234, 9, 2).expect("1234"), Json::from("12.34"));
        assert_eq!(text(-5, 9, 3).expect("-5"), Json::from("-0.005"));
        assert_eq!(text(7, 9, 0).expect("7"), Json::from("7"));
        assert_eq!(text(0, 9, 2).expect("0"), Json::from("0.00"));
        let err = text(1_000_000_000, 9, 2).expect_err("10 digits");
        assert!(err.to_string().contains("column 'd'"), "{err}");
    }

    #[test]
    fn floats_compare_by_bits() {
        assert!(same(ValueRef::Double(f64::NAN), ValueRef::Double(f64::NAN)));
        assert!(!same(ValueRef::Float(0.0), ValueRef::Float(-0.0)));
        assert!(same(ValueRef::String("a"), ValueRef::String("a")));
        assert!(!same(ValueRef::Null, ValueRef::Int8(0)));
    }

    #[test]
    fn maps_print_like_the_report() {
        let mut m = Map::new();
        m.insert("id".into(), 5.into());
        m.insert("s".into(), "a".into());
        assert_eq!(display_map(&m), r#"{id: 5, s: "a"}"#);
    }
}
