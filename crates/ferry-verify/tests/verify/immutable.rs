//! Immutable columns (Kudu 1.17+): a sink row whose immutable cells
//! differ from the source's is reported like any other difference, and
//! repair fixes it — by deleting the row and writing it again, since an
//! UPSERT_IGNORE keeps immutable cells — while the sink's cells of columns
//! not compared (a sink-only column) are kept.

use std::collections::BTreeMap;

use ferry_verify::{At, DiffKind, Method, VerifyOptions};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, KuduClient, Schema, Value};

use crate::common::{clusters, create_sink, create_source, options, run};

/// `id` key, `imm STRING IMMUTABLE`, `v INT64`, `n INT64 IMMUTABLE`, and
/// on the sink only a nullable `extra STRING`.
fn schema(sink: bool) -> Schema {
    let value = |name: &str, t: DataType, immutable: bool| {
        ColumnSchema::builder(name, t)
            .nullable(true)
            .immutable(immutable)
            .build()
            .unwrap()
    };
    let mut columns = vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()
            .unwrap(),
        value("imm", DataType::String, true),
        value("v", DataType::Int64, false),
        value("n", DataType::Int64, true),
    ];
    if sink {
        columns.push(value("extra", DataType::String, false));
    }
    Schema::new(columns).unwrap()
}

/// `(op, id, imm, v, n, extra)`: an insert or a delete (by `id`).
type Change<'a> = (&'a str, i64, &'a str, i64, i64, Option<&'a str>);

/// Writes `rows` to `name`.
async fn write(client: &KuduClient, name: &str, rows: &[Change<'_>]) {
    let table = client.open_table(name).await.unwrap();
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .unwrap();
    for &(op, id, imm, v, n, extra) in rows {
        let mut r = table.new_row();
        r.set_i64("id", id).unwrap();
        if op == "delete" {
            s.apply(Operation::delete(&table, r)).await.unwrap();
            // Its own flush: the re-insert must come after it.
            s.flush().await.unwrap();
            continue;
        }
        r.set_str("imm", imm).unwrap();
        r.set_i64("v", v).unwrap();
        r.set_i64("n", n).unwrap();
        if let Some(e) = extra {
            r.set_str("extra", e).unwrap();
        }
        s.apply(Operation::insert(&table, r)).await.unwrap();
    }
    s.flush().await.unwrap();
}

/// Every row of the sink table: id → (imm, v, n, extra).
async fn sink_rows(client: &KuduClient, name: &str) -> BTreeMap<i64, Vec<Value>> {
    ferry_fixtures::read_all(client, name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_immutable_cell_difference_is_named_and_repaired() {
    let (_c, src, dst) = clusters();
    let (source, sink) = ("imm_verify", "imm_verify_copy");
    create_source(&src, source, schema(false), 50).await;
    create_sink(&dst, sink, schema(true)).await;
    let rows: Vec<(i64, String, String)> = (0..100)
        .map(|id| (id, format!("a{id}"), format!("x{id}")))
        .collect();
    let load = |sink_side: bool| {
        rows.iter()
            .map(|(id, imm, extra)| {
                let extra = sink_side.then_some(extra.as_str());
                ("insert", *id, imm.as_str(), *id, *id, extra)
            })
            .collect::<Vec<_>>()
    };
    write(&src, source, &load(false)).await;
    write(&dst, sink, &load(true)).await;
    // On the sink: row 5 re-created with another immutable value, row 6
    // with another mutable value, row 7 with another immutable INT64.
    write(
        &dst,
        sink,
        &[
            ("delete", 5, "", 0, 0, None),
            ("insert", 5, "wrong", 5, 5, Some("keep5")),
            ("delete", 6, "", 0, 0, None),
            ("insert", 6, "a6", 66, 6, Some("keep6")),
            ("delete", 7, "", 0, 0, None),
            ("insert", 7, "a7", 7, 77, Some("keep7")),
        ],
    )
    .await;
    let at = src.server_clock().await.unwrap();
    let base = || options(&src, source, At::Time(at), &dst, sink);

    let report = run(base(), Method::Server).await;
    assert!(!report.equal, "{report}");
    let named: Vec<(i64, DiffKind, Vec<String>)> = report
        .listed
        .iter()
        .map(|d| (d.key["id"].as_i64().unwrap(), d.kind, d.columns.clone()))
        .collect();
    assert_eq!(
        named,
        [
            (5, DiffKind::Differs, vec!["imm".to_owned()]),
            (6, DiffKind::Differs, vec!["v".to_owned()]),
            (7, DiffKind::Differs, vec!["n".to_owned()]),
        ]
    );

    let report = run(
        VerifyOptions {
            repair: true,
            ..base()
        },
        Method::Server,
    )
    .await;
    let repair = report.repair.expect("a repair ran");
    assert!(repair.equal_after, "{report}");
    assert_eq!((repair.upserted, repair.deleted), (3, 0), "{report}");
    let after = sink_rows(&dst, sink).await;
    let cells = |id: i64| after.get(&id).cloned().unwrap_or_default();
    let s = |v: &str| Value::String(v.to_owned());
    assert_eq!(
        cells(5),
        [
            Value::Int64(5),
            s("a5"),
            Value::Int64(5),
            Value::Int64(5),
            s("keep5")
        ]
    );
    assert_eq!(
        cells(6),
        [
            Value::Int64(6),
            s("a6"),
            Value::Int64(6),
            Value::Int64(6),
            s("keep6")
        ]
    );
    assert_eq!(
        cells(7),
        [
            Value::Int64(7),
            s("a7"),
            Value::Int64(7),
            Value::Int64(7),
            s("keep7")
        ]
    );
    assert_eq!(
        cells(8)[4],
        s("x8"),
        "rows that did not differ are untouched"
    );
    assert!(run(base(), Method::Client).await.equal);
}
