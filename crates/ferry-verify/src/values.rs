//! Cell values as the report shows them (JSON) and cell equality for the
//! row diff (floating-point values compare by their bits, so NaN equals
//! NaN and -0.0 differs from 0.0, as in the checksums).

use kudu_client::scan::RowView;
use kudu_client::schema::ValueRef;
use kudu_client::ColumnSchema;
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
/// epoch.
pub(crate) fn to_json(column: &ColumnSchema, v: ValueRef<'_>) -> Json {
    match v {
        ValueRef::Null => Json::Null,
        ValueRef::Bool(b) => Json::Bool(b),
        ValueRef::Int8(i) => i.into(),
        ValueRef::Int16(i) => i.into(),
        ValueRef::Int32(i) | ValueRef::Date(i) => i.into(),
        ValueRef::Int64(i) | ValueRef::UnixtimeMicros(i) => i.into(),
        ValueRef::Float(f) => float(f64::from(f), f.to_string()),
        ValueRef::Double(f) => float(f, f.to_string()),
        ValueRef::Decimal(d) => Json::String(decimal(d, column.scale())),
        ValueRef::String(s) => Json::String(s.to_owned()),
        ValueRef::Binary(b) => Json::String(b.iter().map(|x| format!("{x:02x}")).collect()),
    }
}

fn float(f: f64, text: String) -> Json {
    serde_json::Number::from_f64(f).map_or(Json::String(text), Json::Number)
}

/// An unscaled decimal written with `scale` digits after the point.
fn decimal(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    let scale = usize::from(scale);
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
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
        out.insert(column.name().to_owned(), to_json(column, row.get(i)?));
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
        assert_eq!(decimal(1234, 2), "12.34");
        assert_eq!(decimal(-5, 3), "-0.005");
        assert_eq!(decimal(7, 0), "7");
        assert_eq!(decimal(0, 2), "0.00");
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
