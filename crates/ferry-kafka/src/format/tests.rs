use super::*;
use kudu_client::schema::{ColumnSchemaBuilder, Value};
use kudu_client::{ColumnSchema, DataType};

/// A row of plain values; the last one, if `Bool`, stands for IS_DELETED.
struct Plain(Vec<Value>, bool);

impl Cells for Plain {
    fn cell(&self, i: usize) -> kudu_client::Result<ValueRef<'_>> {
        Ok(self.0[i].as_ref())
    }

    fn deleted(&self) -> bool {
        self.1
    }
}

fn col(name: &str, t: DataType) -> ColumnSchema {
    ColumnSchema::builder(name, t)
        .nullable(true)
        .build()
        .expect("column")
}

fn schema() -> Schema {
    Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()
            .expect("key"),
        col("b", DataType::Bool),
        col("i8", DataType::Int8),
        col("f", DataType::Float),
        col("d", DataType::Double),
        ColumnSchemaBuilder::decimal("dec", 10, 2)
            .nullable(true)
            .build()
            .expect("decimal"),
        col("s", DataType::String),
        col("bin", DataType::Binary),
        col("ts", DataType::UnixtimeMicros),
        col("day", DataType::Date),
        ColumnSchema::is_deleted("is_deleted"),
    ])
    .expect("schema")
}

fn row(deleted: bool) -> Plain {
    Plain(
        vec![
            Value::Int64(7),
            Value::Bool(true),
            Value::Int8(-3),
            Value::Float(f32::NAN),
            Value::Double(1.5),
            Value::Decimal(-1250),
            Value::String("a \"quoted\"\n line".into()),
            Value::Binary(vec![0, 1, 2, 250]),
            Value::UnixtimeMicros(1_700_000_000_000_001),
            Value::Date(-1),
            Value::Bool(deleted),
        ],
        deleted,
    )
}

const DIFF: WindowInfo = WindowInfo {
    start: Some(SourceTime::from_raw(4096 << 12)),
    end: SourceTime::from_raw(8_192_000 << 12),
};

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("valid JSON")
}

fn encode(format: RecordFormat, deleted: bool, window: WindowInfo) -> Record {
    let mut out = Record::default();
    let mut encoder = Encoder::new(format, "orders", "job-1");
    encoder.set_keys(vec!["id".to_string()]);
    encoder
        .encode(&schema(), &row(deleted), window, &mut out)
        .expect("encoded");
    out
}

#[test]
fn every_type_is_mapped_as_documented() {
    let r = encode(RecordFormat::UpsertJson, false, DIFF);
    assert_eq!(json(&r.key), serde_json::json!({"id": 7}));
    let v = json(r.value.as_deref().expect("value"));
    assert_eq!(
        v,
        serde_json::json!({
            "id": 7, "b": true, "i8": -3, "f": "NaN", "d": 1.5, "dec": "-12.50",
            "s": "a \"quoted\"\n line", "bin": "AAEC+g==",
            "ts": 1_700_000_000_000_001_i64, "day": -1
        })
    );
}

#[test]
fn an_upsert_delete_is_a_tombstone() {
    let r = encode(RecordFormat::UpsertJson, true, DIFF);
    assert_eq!(json(&r.key), serde_json::json!({"id": 7}));
    assert_eq!(r.value, None);
}

#[test]
fn debezium_envelopes_say_what_a_diff_scan_knows() {
    let live = json(
        encode(RecordFormat::DebeziumJson, false, DIFF)
            .value
            .as_deref()
            .expect("value"),
    );
    assert_eq!(live["op"], "c");
    assert_eq!(live["before"], serde_json::Value::Null);
    assert_eq!(live["after"]["dec"], "-12.50");
    assert_eq!(live["source"]["table"], "orders");
    assert_eq!(live["source"]["name"], "job-1");
    assert_eq!(live["source"]["snapshot"], "false");
    assert_eq!(live["source"]["window_start"], 4096_u64 << 12);
    assert_eq!(live["source"]["window_end"], 8_192_000_u64 << 12);
    assert_eq!(live["ts_ms"], 8_192);

    let deleted = json(
        encode(RecordFormat::DebeziumJson, true, DIFF)
            .value
            .as_deref()
            .expect("value"),
    );
    assert_eq!(deleted["op"], "d");
    assert_eq!(deleted["before"], serde_json::json!({"id": 7}));
    assert_eq!(deleted["after"], serde_json::Value::Null);

    let snapshot = WindowInfo {
        start: None,
        end: DIFF.end,
    };
    let read = json(
        encode(RecordFormat::DebeziumJson, false, snapshot)
            .value
            .as_deref()
            .expect("value"),
    );
    assert_eq!(read["op"], "r");
    assert_eq!(read["source"]["snapshot"], "true");
    assert_eq!(read["source"]["window_start"], serde_json::Value::Null);
}

#[test]
fn decimals_keep_their_scale() {
    // The text is kudu_client::Decimal's (exact-string tests there); a
    // cell with more digits than its column's precision is refused, naming
    // the column.
    let schema = Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()
            .expect("id"),
        ColumnSchemaBuilder::decimal("dec", 10, 2)
            .nullable(true)
            .build()
            .expect("dec"),
    ])
    .expect("schema");
    let text = |unscaled: i128| {
        let mut out = Vec::new();
        let row = Plain(vec![Value::Int64(1), Value::Decimal(unscaled)], false);
        write_object(&mut out, &schema, &row, None).map(|()| String::from_utf8(out).expect("utf-8"))
    };
    assert_eq!(text(0).expect("0"), r#"{"id":1,"dec":"0.00"}"#);
    assert_eq!(text(-5).expect("-5"), r#"{"id":1,"dec":"-0.05"}"#);
    assert_eq!(text(123456).expect("123456"), r#"{"id":1,"dec":"1234.56"}"#);
    assert_eq!(
        text(9_999_999_999).expect("max"),
        r#"{"id":1,"dec":"99999999.99"}"#
    );
    let err = text(10_000_000_000).expect_err("11 digits");
    assert!(
        matches!(&err, FormatError::Cell { column, .. } if column == "dec"),
        "{err:?}"
    );
}

#[test]
fn base64_pads_like_rfc_4648() {
    let enc = |b: &[u8]| {
        let mut out = Vec::new();
        base64(&mut out, b);
        String::from_utf8(out).expect("ascii")
    };
    assert_eq!(enc(b""), "");
    assert_eq!(enc(b"f"), "Zg==");
    assert_eq!(enc(b"fo"), "Zm8=");
    assert_eq!(enc(b"foo"), "Zm9v");
    assert_eq!(enc(b"foobar"), "Zm9vYmFy");
}
