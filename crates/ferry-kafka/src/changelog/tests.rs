use super::*;
use crate::config::RecordFormat;
use crate::format::{Cells, Encoder, Record, WindowInfo};
use ferry_engine::SourceTime;
use kudu_client::schema::{ColumnSchema, ColumnSchemaBuilder, DataType, Value, ValueRef};
use serde_json::json;

/// A row of plain values for the encoder.
struct Plain(Vec<Value>, bool);

impl Cells for Plain {
    fn cell(&self, i: usize) -> kudu_client::Result<ValueRef<'_>> {
        Ok(self.0[i].as_ref())
    }

    fn deleted(&self) -> bool {
        self.1
    }
}

fn key(name: &str, t: DataType) -> ColumnSchema {
    ColumnSchema::builder(name, t)
        .key(true)
        .build()
        .expect("key")
}

fn nullable(name: &str, t: DataType) -> ColumnSchema {
    ColumnSchema::builder(name, t)
        .nullable(true)
        .build()
        .expect("column")
}

fn dec(name: &str, precision: u8, scale: u8) -> ColumnSchema {
    ColumnSchemaBuilder::decimal(name, precision, scale)
        .nullable(true)
        .build()
        .expect("decimal")
}

/// Every type, a two-column key, decimals of scale 0 to 38 and a NOT
/// NULL column.
fn schema() -> Schema {
    Schema::new(vec![
        key("id", DataType::Int64),
        key("k", DataType::String),
        nullable("b", DataType::Bool),
        nullable("i8", DataType::Int8),
        nullable("i16", DataType::Int16),
        nullable("i32", DataType::Int32),
        nullable("i64", DataType::Int64),
        nullable("f", DataType::Float),
        nullable("d", DataType::Double),
        dec("dec0", 9, 0),
        dec("dec9", 9, 2),
        dec("dec18", 18, 4),
        dec("dec38", 38, 10),
        dec("frac38", 38, 38),
        nullable("s", DataType::String),
        nullable("bin", DataType::Binary),
        ColumnSchemaBuilder::varchar("vc", 5)
            .nullable(true)
            .build()
            .expect("varchar"),
        nullable("ts", DataType::UnixtimeMicros),
        nullable("dt", DataType::Date),
        ColumnSchema::builder("nn", DataType::Int32)
            .build()
            .expect("not null"),
    ])
    .expect("schema")
}

const MAX38: i128 = 10_i128.pow(38) - 1;

/// Rows in `schema()`'s column order, covering nulls, extremes, NaN and
/// the infinities, every decimal scale, empty and non-UTF-8 binary and
/// negative times.
fn rows() -> Vec<Vec<Value>> {
    use Value::*;
    vec![
        vec![
            Int64(1),
            String("a".into()),
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Int32(0),
        ],
        vec![
            Int64(i64::MAX),
            String("ключ \"q\"\n\u{1F600}".into()),
            Bool(true),
            Int8(i8::MAX),
            Int16(i16::MAX),
            Int32(i32::MAX),
            Int64(i64::MAX),
            Float(f32::MAX),
            Double(f64::MAX),
            Decimal(999_999_999),
            Decimal(999_999_999),
            Decimal(999_999_999_999_999_999),
            Decimal(MAX38),
            Decimal(MAX38),
            String("tab\t\\ \u{0}".into()),
            Binary(vec![0xff, 0xfe, 0xfd, 0x80]),
            String("ééééé".into()),
            UnixtimeMicros(i64::MAX),
            Date(2_932_896),
            Int32(i32::MAX),
        ],
        vec![
            Int64(i64::MIN),
            String(std::string::String::new()),
            Bool(false),
            Int8(i8::MIN),
            Int16(i16::MIN),
            Int32(i32::MIN),
            Int64(i64::MIN),
            Float(f32::MIN),
            Double(f64::MIN),
            Decimal(-999_999_999),
            Decimal(-999_999_999),
            Decimal(-999_999_999_999_999_999),
            Decimal(-MAX38),
            Decimal(-MAX38),
            String(std::string::String::new()),
            Binary(Vec::new()),
            String(std::string::String::new()),
            UnixtimeMicros(i64::MIN),
            Date(-719_162),
            Int32(i32::MIN),
        ],
        vec![
            Int64(0),
            String("x".into()),
            Bool(true),
            Int8(0),
            Int16(-1),
            Int32(1),
            Int64(-1),
            Float(f32::NAN),
            Double(f64::INFINITY),
            Decimal(0),
            Decimal(5),
            Decimal(-5),
            Decimal(1),
            Decimal(-1),
            String("s".into()),
            Binary(vec![0]),
            String("a".into()),
            UnixtimeMicros(-1),
            Date(-1),
            Int32(-7),
        ],
        vec![
            Int64(-2),
            String("y".into()),
            Null,
            Int8(-1),
            Null,
            Int32(0),
            Null,
            Float(f32::NEG_INFINITY),
            Double(f64::NAN),
            Decimal(-3),
            Decimal(120),
            Decimal(-123_450),
            Decimal(10_000_000_000),
            Decimal(10_i128.pow(37)),
            Null,
            Binary(vec![1, 2]),
            Null,
            UnixtimeMicros(-1_700_000_000_000_001),
            Date(-365),
            Int32(3),
        ],
        vec![
            Int64(3),
            String("z".into()),
            Bool(false),
            Null,
            Int16(300),
            Null,
            Int64(9_007_199_254_740_993),
            Float(-0.0),
            Double(5e-324),
            Null,
            Null,
            Null,
            Null,
            Null,
            String("ü".into()),
            Binary(vec![1, 2, 3]),
            String("ab".into()),
            Null,
            Null,
            Int32(0),
        ],
        vec![
            Int64(4),
            String("w".into()),
            Null,
            Null,
            Null,
            Null,
            Null,
            // Narrowing its double would round it twice, wrongly.
            Float(7.038_531e-26),
            Double(0.1),
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Int32(0),
        ],
        vec![
            Int64(5),
            String("v".into()),
            Null,
            Null,
            Null,
            Null,
            Null,
            Float(f32::INFINITY),
            Double(f64::NEG_INFINITY),
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Int32(0),
        ],
        vec![
            Int64(6),
            String("u".into()),
            Null,
            Null,
            Null,
            Null,
            Null,
            Float(f32::MIN_POSITIVE),
            Double(-f64::MIN_POSITIVE),
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Null,
            Int32(0),
        ],
    ]
}

/// Whether two cells are the same (floats bit for bit, so NaN equals NaN
/// and -0.0 differs from 0.0).
fn same(a: ValueRef<'_>, b: ValueRef<'_>) -> bool {
    match (a, b) {
        (ValueRef::Float(x), ValueRef::Float(y)) => x.to_bits() == y.to_bits(),
        (ValueRef::Double(x), ValueRef::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Asserts that `row` holds exactly `values` (every column set).
fn assert_row(row: &Row, values: &[Value]) {
    for (i, want) in values.iter().enumerate() {
        let got = row.get(i).expect("every column set");
        assert!(
            same(got, want.as_ref()),
            "column {i}: {got:?} != {want:?} in {row:?}"
        );
    }
}

/// Asserts that `row` holds the key of `values` and nothing else.
fn assert_key(row: &Row, values: &[Value]) {
    let keys = row.schema().num_key_columns();
    for (i, want) in values.iter().enumerate() {
        if i < keys {
            assert_eq!(row.get(i).expect("key set"), want.as_ref());
        } else {
            assert!(!row.is_set(i).expect("column"), "column {i} set: {row:?}");
        }
    }
}

const SNAPSHOT: WindowInfo = WindowInfo {
    start: None,
    end: SourceTime::from_raw(8_192_000 << 12),
};
const DIFF: WindowInfo = WindowInfo {
    start: Some(SourceTime::from_raw(4096 << 12)),
    end: SourceTime::from_raw(8_192_000 << 12),
};

fn encode(format: RecordFormat, values: &[Value], deleted: bool, window: WindowInfo) -> Record {
    let mut encoder = Encoder::new(format, "orders", "job-1");
    encoder.set_keys(vec!["id".to_string(), "k".to_string()]);
    let mut out = Record::default();
    encoder
        .encode(
            &schema(),
            &Plain(values.to_vec(), deleted),
            window,
            &mut out,
        )
        .expect("encoded");
    out
}

fn decode_record(format: ChangelogFormat, r: &Record) -> Result<Option<Change>, DecodeError> {
    decode(format, &schema(), Some(&r.key), r.value.as_deref())
}

#[test]
fn upsert_json_records_of_every_type_read_back() {
    for values in rows() {
        let live = encode(RecordFormat::UpsertJson, &values, false, DIFF);
        for format in [ChangelogFormat::UpsertJson, ChangelogFormat::Json] {
            match decode_record(format, &live).expect("decoded") {
                Some(Change::Upsert(row)) => assert_row(&row, &values),
                other => panic!("{format:?}: not an upsert: {other:?}"),
            }
        }

        let deleted = encode(RecordFormat::UpsertJson, &values, true, DIFF);
        assert_eq!(deleted.value, None);
        for format in [ChangelogFormat::UpsertJson, ChangelogFormat::Json] {
            match decode_record(format, &deleted).expect("decoded") {
                Some(Change::Delete(row)) => assert_key(&row, &values),
                other => panic!("{format:?}: not a delete: {other:?}"),
            }
        }
    }
}

#[test]
fn debezium_records_of_every_type_read_back() {
    for values in rows() {
        for window in [SNAPSHOT, DIFF] {
            let live = encode(RecordFormat::DebeziumJson, &values, false, window);
            match decode_record(ChangelogFormat::DebeziumJson, &live).expect("decoded") {
                Some(Change::Upsert(row)) => assert_row(&row, &values),
                other => panic!("not an upsert: {other:?}"),
            }
        }

        let deleted = encode(RecordFormat::DebeziumJson, &values, true, DIFF);
        match decode_record(ChangelogFormat::DebeziumJson, &deleted).expect("decoded") {
            Some(Change::Delete(row)) => assert_key(&row, &values),
            other => panic!("not a delete: {other:?}"),
        }
        // The tombstone that follows a delete says nothing more.
        let tombstone = Record {
            key: deleted.key,
            value: None,
        };
        assert!(decode_record(ChangelogFormat::DebeziumJson, &tombstone)
            .expect("decoded")
            .is_none());
    }
}

#[test]
fn format_names_read_back() {
    for name in ChangelogFormat::NAMES {
        let format = ChangelogFormat::parse(name).expect("a format");
        assert_eq!(format.name(), *name);
    }
    assert_eq!(ChangelogFormat::parse("JSON"), None);
    assert_eq!(ChangelogFormat::parse("avro"), None);
}

fn bytes(json: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(json).expect("JSON")
}

/// Decodes a record of JSON key and value for `schema()`.
fn decode_json(
    format: ChangelogFormat,
    key: Option<serde_json::Value>,
    value: Option<serde_json::Value>,
) -> Result<Option<Change>, DecodeError> {
    let key = key.as_ref().map(bytes);
    let value = value.as_ref().map(bytes);
    decode(format, &schema(), key.as_deref(), value.as_deref())
}

/// A minimal `schema()` row with `extra` fields.
fn row_json(extra: serde_json::Value) -> serde_json::Value {
    let mut row = json!({"id": 1, "k": "a", "nn": 0});
    if let (Some(row), Some(extra)) = (row.as_object_mut(), extra.as_object()) {
        row.extend(extra.clone());
    }
    row
}

fn upsert(value: serde_json::Value) -> Result<Row, DecodeError> {
    match decode_json(ChangelogFormat::Json, None, Some(value))? {
        Some(Change::Upsert(row)) => Ok(row),
        other => panic!("not an upsert: {other:?}"),
    }
}

/// The error decoding `field` as `value` of a plain JSON row.
fn cell_error(field: &str, value: serde_json::Value) -> DecodeError {
    upsert(row_json(json!({ field: value }))).expect_err("refused")
}

fn cell_value(field: &str, value: serde_json::Value) -> Value {
    let row = upsert(row_json(json!({ field: value }))).expect("decoded");
    row.get(field).expect("set").into_owned()
}

#[test]
fn absent_columns_stay_unset_and_unknown_fields_are_ignored() {
    let row = upsert(row_json(
        json!({"s": "x", "not_a_column": [1, 2], "b": null}),
    ))
    .expect("decoded");
    assert_eq!(row.get("s").expect("set"), ValueRef::String("x"));
    assert_eq!(row.get("b").expect("set"), ValueRef::Null);
    assert!(!row.is_set("i8").expect("column"));
    assert!(!row.is_set("dt").expect("column"));
}

#[test]
fn upsert_json_takes_key_columns_from_the_key_then_the_value() {
    let key = json!({"id": 7, "k": "a"});
    let only_key = decode_json(
        ChangelogFormat::UpsertJson,
        Some(key.clone()),
        Some(json!({"nn": 1})),
    )
    .expect("decoded");
    let Some(Change::Upsert(row)) = only_key else {
        panic!("not an upsert: {only_key:?}");
    };
    assert_eq!(row.get("id").expect("set"), ValueRef::Int64(7));
    assert_eq!(row.get("nn").expect("set"), ValueRef::Int32(1));

    // No record key: the value's key columns.
    let no_key =
        decode_json(ChangelogFormat::UpsertJson, None, Some(row_json(json!({})))).expect("decoded");
    let Some(Change::Upsert(row)) = no_key else {
        panic!("not an upsert: {no_key:?}");
    };
    assert_eq!(row.get("id").expect("set"), ValueRef::Int64(1));

    let err = decode_json(
        ChangelogFormat::UpsertJson,
        Some(key),
        Some(row_json(json!({}))),
    )
    .expect_err("key and value disagree");
    assert!(matches!(&err, DecodeError::KeyMismatch { column } if column == "id"));
    assert_eq!(
        err.to_string(),
        "the record's key and value disagree on key column 'id'"
    );
}

#[test]
fn a_plain_json_key_is_read_only_when_needed() {
    // A key that is not JSON does not matter while the value has the key.
    let value = bytes(&row_json(json!({})));
    let change = decode(
        ChangelogFormat::Json,
        &schema(),
        Some(b"not json"),
        Some(&value),
    )
    .expect("decoded");
    assert!(matches!(change, Some(Change::Upsert(_))));

    // A tombstone deletes the key.
    let change = decode_json(
        ChangelogFormat::Json,
        Some(json!({"id": 2, "k": "b"})),
        None,
    )
    .expect("decoded");
    let Some(Change::Delete(row)) = change else {
        panic!("not a delete: {change:?}");
    };
    assert_eq!(row.key_string(), "(id=2, k=\"b\")");
    assert!(!row.is_set("nn").expect("column"));
}

#[test]
fn a_missing_key_column_is_refused() {
    let err = decode_json(ChangelogFormat::UpsertJson, None, None).expect_err("no key");
    assert!(matches!(&err, DecodeError::MissingKey { column } if column == "id"));
    assert_eq!(
        err.to_string(),
        "the record carries no value for key column 'id'"
    );

    let err = decode_json(ChangelogFormat::Json, None, Some(json!({"id": 1, "nn": 0})))
        .expect_err("no k");
    assert!(matches!(&err, DecodeError::MissingKey { column } if column == "k"));

    let err = decode_json(
        ChangelogFormat::DebeziumJson,
        Some(json!({"id": 1})),
        Some(json!({"op": "d", "before": null, "after": null})),
    )
    .expect_err("no k");
    assert!(matches!(&err, DecodeError::MissingKey { column } if column == "k"));
}

#[test]
fn debezium_updates_and_deletes_read_like_debezium_writes_them() {
    let update = decode_json(
        ChangelogFormat::DebeziumJson,
        None,
        Some(json!({"op": "u", "before": {"id": 1, "k": "a", "nn": 0},
            "after": row_json(json!({"nn": 9})), "source": {}, "ts_ms": 1})),
    )
    .expect("decoded");
    let Some(Change::Upsert(row)) = update else {
        panic!("not an upsert: {update:?}");
    };
    assert_eq!(row.get("nn").expect("set"), ValueRef::Int32(9));

    // A delete without `before` keys: the record's key says which row.
    let delete = decode_json(
        ChangelogFormat::DebeziumJson,
        Some(json!({"id": 4, "k": "d"})),
        Some(json!({"op": "d", "before": null, "after": null})),
    )
    .expect("decoded");
    let Some(Change::Delete(row)) = delete else {
        panic!("not a delete: {delete:?}");
    };
    assert_eq!(row.key_string(), "(id=4, k=\"d\")");

    let err = decode_json(
        ChangelogFormat::DebeziumJson,
        None,
        Some(json!({"op": "c", "after": null})),
    )
    .expect_err("no after");
    assert_eq!(
        err.to_string(),
        "the record's after should be a JSON object, found null"
    );
}

#[test]
fn a_debezium_tombstone_is_skipped() {
    for value in [None, Some(json!(null))] {
        let change = decode_json(
            ChangelogFormat::DebeziumJson,
            Some(json!({"id": 1, "k": "a"})),
            value,
        )
        .expect("decoded");
        assert_eq!(change, None);
    }
}

#[test]
fn a_ferry_watermark_is_skipped_in_every_format() {
    let end = ferry_engine::SourceTime::from_raw(9 << 12);
    let mark = crate::watermark::watermark_record("t", 1, end);
    let key: serde_json::Value = serde_json::from_slice(&mark.key).expect("key");
    let value: serde_json::Value =
        serde_json::from_slice(mark.value.as_deref().expect("value")).expect("value");
    for format in [
        ChangelogFormat::DebeziumJson,
        ChangelogFormat::UpsertJson,
        ChangelogFormat::Json,
    ] {
        let change = decode_json(format, Some(key.clone()), Some(value.clone()));
        assert_eq!(change.expect("decoded"), None, "{format:?}");
    }
}

#[test]
fn payload_wrapped_envelopes_and_keys_are_unwrapped() {
    let envelope = json!({"op": "c", "before": null, "after": row_json(json!({"nn": 5}))});
    let wrapped = json!({"schema": {"type": "struct", "optional": false}, "payload": envelope});
    let change = decode_json(ChangelogFormat::DebeziumJson, None, Some(wrapped)).expect("decoded");
    let Some(Change::Upsert(row)) = change else {
        panic!("not an upsert: {change:?}");
    };
    assert_eq!(row.get("nn").expect("set"), ValueRef::Int32(5));

    let key = json!({"schema": {"type": "struct"}, "payload": {"id": 8, "k": "h"}});
    let change = decode_json(
        ChangelogFormat::DebeziumJson,
        Some(key),
        Some(json!({"schema": null, "payload": {"op": "d", "before": null}})),
    )
    .expect("decoded");
    let Some(Change::Delete(row)) = change else {
        panic!("not a delete: {change:?}");
    };
    assert_eq!(row.key_string(), "(id=8, k=\"h\")");
}

#[test]
fn a_row_with_a_payload_column_is_not_unwrapped() {
    let schema = Schema::new(vec![
        key("schema", DataType::Int32),
        nullable("payload", DataType::String),
    ])
    .expect("schema");
    let value = bytes(&json!({"schema": 1, "payload": "p"}));
    let change = decode(ChangelogFormat::UpsertJson, &schema, None, Some(&value)).expect("decoded");
    let Some(Change::Upsert(row)) = change else {
        panic!("not an upsert: {change:?}");
    };
    assert_eq!(row.get("payload").expect("set"), ValueRef::String("p"));

    // An envelope is unwrapped all the same.
    let envelope = bytes(&json!({"schema": {}, "payload": {"op": "c",
        "after": {"schema": 2, "payload": null}}}));
    let change = decode(
        ChangelogFormat::DebeziumJson,
        &schema,
        None,
        Some(&envelope),
    )
    .expect("decoded");
    let Some(Change::Upsert(row)) = change else {
        panic!("not an upsert: {change:?}");
    };
    assert_eq!(row.key_string(), "(schema=2)");
}

#[test]
fn a_truncate_is_unsupported() {
    let err = decode_json(
        ChangelogFormat::DebeziumJson,
        None,
        Some(json!({"op": "t", "before": null, "after": null})),
    )
    .expect_err("truncate");
    assert!(matches!(err, DecodeError::Unsupported { .. }));
    assert_eq!(
        err.to_string(),
        "a truncate (Debezium op \"t\") is not supported"
    );
}

#[test]
fn unknown_and_missing_ops_are_refused() {
    let op = |envelope| {
        decode_json(ChangelogFormat::DebeziumJson, None, Some(envelope)).expect_err("bad op")
    };
    let err = op(json!({"op": "m", "after": {}}));
    assert!(matches!(&err, DecodeError::UnknownOp { op: Some(op) } if op == "m"));
    assert_eq!(
        err.to_string(),
        "unknown Debezium op \"m\" (expected c, r, u, d or t)"
    );
    let err = op(json!({"before": null, "after": {}}));
    assert!(matches!(err, DecodeError::UnknownOp { op: None }));
    assert_eq!(err.to_string(), "the Debezium envelope has no op");
    let err = op(json!({"op": 1}));
    assert!(matches!(&err, DecodeError::UnknownOp { op: Some(op) } if op == "1"));
}

#[test]
fn bad_json_names_the_part() {
    let err = decode(
        ChangelogFormat::UpsertJson,
        &schema(),
        Some(b"{\"id\":"),
        Some(b"{}"),
    )
    .expect_err("bad key");
    assert!(matches!(err, DecodeError::NotJson { part: "key", .. }));
    assert!(
        err.to_string()
            .starts_with("the record's key is not JSON: "),
        "{err}"
    );

    let err = decode(
        ChangelogFormat::DebeziumJson,
        &schema(),
        None,
        Some(b"nope"),
    )
    .expect_err("bad value");
    assert!(matches!(err, DecodeError::NotJson { part: "value", .. }));

    let err = decode_json(ChangelogFormat::Json, None, Some(json!([1, 2]))).expect_err("array");
    assert!(matches!(
        err,
        DecodeError::NotAnObject { part: "value", .. }
    ));
    assert_eq!(
        err.to_string(),
        "the record's value should be a JSON object, found an array"
    );
}

#[test]
fn wrong_types_name_column_and_value() {
    let err = cell_error("i32", json!("12a"));
    assert!(matches!(
        &err,
        DecodeError::WrongType { column, expected: "an integer", .. } if column == "i32"
    ));
    assert_eq!(
        err.to_string(),
        "column 'i32' (INT32): expected an integer, found the string \"12a\""
    );
    for (field, value) in [
        ("b", json!(1)),
        ("b", json!("true")),
        ("i8", json!(1.5)),
        ("i64", json!(true)),
        ("f", json!("nan")),
        ("d", json!([1.0])),
        ("dec9", json!("1,5")),
        ("dec9", json!("")),
        ("dec9", json!("1.5e")),
        ("s", json!(5)),
        ("bin", json!("AAE=A")),
        ("bin", json!("A")),
        ("bin", json!("AA-_")),
        ("bin", json!("AA===")),
        ("ts", json!("2024-01-01T00:00:00Z")),
        ("dt", json!("2024-1-1")),
        ("dt", json!({})),
    ] {
        let err = cell_error(field, value.clone());
        assert!(
            matches!(&err, DecodeError::WrongType { column, .. } if column == field),
            "{field} = {value}: {err}"
        );
    }
}

#[test]
fn integers_are_range_checked() {
    assert_eq!(cell_value("i8", json!(-128)), Value::Int8(-128));
    assert_eq!(cell_value("i16", json!("-300")), Value::Int16(-300));
    assert_eq!(
        cell_value("i64", json!("9223372036854775807")),
        Value::Int64(i64::MAX)
    );
    assert_eq!(cell_value("ts", json!(-5)), Value::UnixtimeMicros(-5));
    // An integral double is taken while it is exact.
    assert_eq!(cell_value("i32", json!(3.0)), Value::Int32(3));
    assert_eq!(
        cell_value("i64", json!(-1e15)),
        Value::Int64(-1_000_000_000_000_000)
    );
    let err = cell_error("i64", json!(1e18));
    assert!(matches!(err, DecodeError::WrongType { .. }), "{err}");

    let err = cell_error("i8", json!(128));
    assert!(matches!(&err, DecodeError::OutOfRange { column, .. } if column == "i8"));
    assert_eq!(err.to_string(), "column 'i8' (INT8): 128 does not fit");
    for (field, value) in [
        ("i16", json!(40_000)),
        ("i32", json!(-2_147_483_649_i64)),
        ("i64", json!(u64::MAX)),
        ("i64", json!("-9223372036854775809")),
        ("i64", json!("1000000000000000000000000000000000000000000")),
        ("ts", json!(1e30)),
        ("nn", json!(2_147_483_648_u64)),
    ] {
        let err = cell_error(field, value.clone());
        assert!(
            matches!(&err, DecodeError::OutOfRange { column, .. } if column == field),
            "{field} = {value}: {err}"
        );
    }
}

#[test]
fn decimals_convert_exactly_at_the_column_scale() {
    let ok = [
        ("dec9", json!("-12.5"), -1250),
        ("dec9", json!("7"), 700),
        ("dec9", json!("1.500"), 150),
        ("dec9", json!(".5"), 50),
        ("dec9", json!("+0.01"), 1),
        ("dec9", json!("-0.00"), 0),
        ("dec9", json!("1e3"), 100_000),
        ("dec9", json!("125E-2"), 125),
        ("dec9", json!(12.25), 1225),
        ("dec9", json!(-3), -300),
        ("dec0", json!(1e8), 100_000_000),
        ("dec18", json!(0.0001), 1),
        (
            "frac38",
            json!("0.00000000000000000000000000000000000001"),
            1,
        ),
        (
            "dec38",
            json!("9999999999999999999999999999.9999999999"),
            MAX38,
        ),
    ];
    for (field, value, unscaled) in ok {
        assert_eq!(
            cell_value(field, value.clone()),
            Value::Decimal(unscaled),
            "{field} = {value}"
        );
    }

    let err = cell_error("dec9", json!("1.505"));
    assert!(matches!(&err, DecodeError::OutOfRange { column, .. } if column == "dec9"));
    assert_eq!(
        err.to_string(),
        "column 'dec9' (DECIMAL(9, 2)): \"1.505\" does not fit"
    );
    for (field, value) in [
        ("dec9", json!("10000000")),
        ("dec9", json!(0.001)),
        ("dec0", json!("0.5")),
        ("dec0", json!("1e9")),
        ("dec18", json!("1e-99999999999999999999")),
        ("dec18", json!("1e99999999999999999999")),
        ("frac38", json!("1")),
    ] {
        let err = cell_error(field, value.clone());
        assert!(
            matches!(&err, DecodeError::OutOfRange { column, .. } if column == field),
            "{field} = {value}: {err}"
        );
    }

    // A double cannot say which 17-digit decimal was meant.
    let err = cell_error("dec38", json!(0.1 + 0.2));
    assert!(matches!(&err, DecodeError::InexactNumber { column, .. } if column == "dec38"));
    assert_eq!(
        err.to_string(),
        "column 'dec38' (DECIMAL(38, 10)): the JSON number 0.30000000000000004 has more than \
         15 significant digits, which a double does not hold exactly (send decimals as strings)"
    );
}

#[test]
fn floats_read_back_bit_for_bit() {
    let float = |field, value| match cell_value(field, value) {
        Value::Float(f) => f64::from(f),
        Value::Double(d) => d,
        other => panic!("not a float: {other:?}"),
    };
    assert!(float("f", json!("NaN")).is_nan());
    assert_eq!(float("d", json!("Infinity")), f64::INFINITY);
    assert_eq!(float("f", json!("-Infinity")), f64::NEG_INFINITY);
    assert_eq!(float("d", json!(3)), 3.0);
    assert_eq!(
        cell_value("f", json!(7.038_531e-26_f64)),
        Value::Float(7.038_531e-26)
    );
    assert_eq!(
        cell_value("f", json!(16_777_217)),
        Value::Float(16_777_216.0)
    );
    assert_eq!(float("f", json!(-0.0)).to_bits(), (-0.0_f64).to_bits());
    // A finite number beyond FLOAT's range is not infinity.
    let err = cell_error("f", json!(1e39));
    assert!(matches!(&err, DecodeError::OutOfRange { column, .. } if column == "f"));
    assert_eq!(cell_value("d", json!(1e39)), Value::Double(1e39));
}

#[test]
fn base64_is_read_padded_or_not() {
    assert_eq!(base64_decode(""), Some(Vec::new()));
    assert_eq!(base64_decode("Zg=="), Some(b"f".to_vec()));
    assert_eq!(base64_decode("Zg"), Some(b"f".to_vec()));
    assert_eq!(base64_decode("Zm8="), Some(b"fo".to_vec()));
    assert_eq!(base64_decode("Zm8"), Some(b"fo".to_vec()));
    assert_eq!(base64_decode("Zm9vYmFy"), Some(b"foobar".to_vec()));
    assert_eq!(base64_decode("AAEC+g=="), Some(vec![0, 1, 2, 250]));
    assert_eq!(base64_decode("Zg="), None);
    assert_eq!(base64_decode("Zm9vY"), None);
    assert_eq!(base64_decode("Zm 9v"), None);
    assert_eq!(cell_value("bin", json!("/w")), Value::Binary(vec![0xff]));
}

#[test]
fn dates_read_from_days_or_iso_dates() {
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(1969, 12, 31), -1);
    assert_eq!(days_from_civil(1, 1, 1), i64::from(MIN_DATE));
    assert_eq!(days_from_civil(9999, 12, 31), i64::from(MAX_DATE));
    assert_eq!(days_from_civil(2000, 3, 1), 11_017);

    assert_eq!(cell_value("dt", json!("2024-02-29")), Value::Date(19_782));
    assert_eq!(cell_value("dt", json!("0001-01-01")), Value::Date(MIN_DATE));
    assert_eq!(cell_value("dt", json!(-719_162)), Value::Date(MIN_DATE));
    for value in [
        json!(2_932_897),
        json!(-719_163),
        json!("2023-02-29"),
        json!("0000-12-31"),
        json!("2024-13-01"),
    ] {
        let err = cell_error("dt", value.clone());
        assert!(
            matches!(&err, DecodeError::OutOfRange { column, .. } if column == "dt"),
            "{value}: {err}"
        );
    }
}

#[test]
fn varchar_length_is_checked_in_characters() {
    assert_eq!(
        cell_value("vc", json!("ééééé")),
        Value::String("ééééé".into())
    );
    let err = cell_error("vc", json!("abcdef"));
    assert_eq!(
        err.to_string(),
        "column 'vc' (VARCHAR(5)): a string of 6 characters does not fit"
    );
}

#[test]
fn null_into_not_null_is_refused() {
    let err = cell_error("nn", json!(null));
    assert!(matches!(&err, DecodeError::NullInNotNull { column } if column == "nn"));
    assert_eq!(
        err.to_string(),
        "column 'nn' is NOT NULL and the record has null"
    );
    let err = upsert(json!({"id": null, "k": "a"})).expect_err("null key");
    assert!(matches!(&err, DecodeError::NullInNotNull { column } if column == "id"));
}

/// `k INT32` as a non-unique primary key (the hidden id after it), `v`,
/// and a diff scan's IS_DELETED.
fn non_unique_schema() -> Schema {
    Schema::new(vec![
        key("k", DataType::Int32),
        ColumnSchema::builder("auto_incrementing_id", DataType::Int64)
            .key(true)
            .auto_incrementing(true)
            .build()
            .expect("hidden id"),
        nullable("v", DataType::Int64),
        ColumnSchema::is_deleted("is_deleted"),
    ])
    .expect("schema")
}

fn id_of(values: &[Value]) -> i64 {
    match values[1] {
        Value::Int64(id) => id,
        ref other => panic!("not an id: {other:?}"),
    }
}

#[test]
fn a_non_unique_key_travels_with_its_hidden_id_both_ways() {
    let schema = non_unique_schema();
    let keys = crate::sink::record_key_columns(&schema);
    assert_eq!(keys, ["k", "auto_incrementing_id"]);
    // Two rows with the same key value, told apart by their ids.
    let rows = [(41, 10), (42, 20)]
        .map(|(id, v)| vec![Value::Int32(1), Value::Int64(id), Value::Int64(v)]);
    for format in [RecordFormat::UpsertJson, RecordFormat::DebeziumJson] {
        let changelog = match format {
            RecordFormat::UpsertJson => ChangelogFormat::UpsertJson,
            _ => ChangelogFormat::DebeziumJson,
        };
        let mut encoder = Encoder::new(format, "events", "job-1");
        encoder.set_keys(keys.clone());
        let mut record_keys = Vec::new();
        for values in &rows {
            for deleted in [false, true] {
                let mut cells = values.clone();
                cells.push(Value::Bool(deleted));
                let mut out = Record::default();
                encoder
                    .encode(&schema, &Plain(cells, deleted), DIFF, &mut out)
                    .expect("encoded");
                let key: serde_json::Value = serde_json::from_slice(&out.key).expect("key");
                assert_eq!(
                    key,
                    json!({"k": 1, "auto_incrementing_id": id_of(values)}),
                    "{format:?}"
                );
                record_keys.push(out.key.clone());
                let change = decode(changelog, &schema, Some(&out.key), out.value.as_deref())
                    .expect("decoded");
                match (change, deleted) {
                    (Some(Change::Upsert(row)), false) => assert_row(&row, values),
                    (Some(Change::Delete(row)), true) => assert_key(&row, values),
                    (other, _) => panic!("{format:?} deleted={deleted}: {other:?}"),
                }
            }
        }
        record_keys.dedup();
        assert_eq!(record_keys.len(), 2, "one record key per row: {format:?}");
    }

    // A record that does not name the row's id cannot be applied.
    let key = bytes(&json!({"k": 1}));
    let value = bytes(&json!({"k": 1, "v": 5}));
    for format in [ChangelogFormat::UpsertJson, ChangelogFormat::Json] {
        let err = decode(format, &schema, Some(&key), Some(&value)).expect_err("no id");
        assert!(
            matches!(&err, DecodeError::MissingAutoIncrementingId { column } if column == "auto_incrementing_id"),
            "{format:?}: {err}"
        );
        assert!(err.to_string().contains("non-unique primary key"), "{err}");
    }
}
