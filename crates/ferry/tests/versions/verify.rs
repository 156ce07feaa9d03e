//! `ferry verify` on every version pair: an every-type table and its copy
//! (written value by value, partitioned differently) verify equal with the
//! tablet servers' checksums — a 1.17.1 server's and a 1.18.1 server's
//! row checksums agree, no range needs a row-by-row look — and by the
//! client; three differences planted on the sink (a changed cell, a
//! deleted row, a stray row) are named by both methods, then repaired.

use std::process::Output;
use std::time::Duration;

use ferry_fixtures::process::output_text;
use ferry_fixtures::workload::Workload;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use serde_json::{json, Value};

use crate::pair_job::{copy_rows, create_every_type_table, for_each_pair, PairEnv, SINK_SUFFIX};

/// A key no writer uses.
const STRAY: i64 = 50_000_000;

/// `ferry verify` of the pair's table, both sides read now, with `extra`.
async fn verify(env: &PairEnv, table: &str, extra: &[&str]) -> Output {
    let mut args: Vec<String> = [
        "verify",
        "--json",
        "--source-time",
        "now",
        "--sink-time",
        "now",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    args.extend(env.job_options(table));
    tokio::task::spawn_blocking(move || crate::ferry().args(&args).output())
        .await
        .expect("join")
}

fn report(env: &PairEnv, o: &Output, code: i32) -> Value {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}: {}",
        env.pair.label(),
        output_text(o)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{}: {e}: {}", env.pair.label(), output_text(o)))
}

/// Changes one cell of `changed`, deletes `deleted` and adds [`STRAY`] on
/// the sink table.
async fn plant(env: &PairEnv, sink_table: &str, changed: i64, deleted: i64) {
    let t = env.sink.open_table(sink_table).await.expect("open sink");
    let mut s = env
        .sink
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
        .expect("session");
    let mut r = t.new_row();
    r.set_i64("id", changed).unwrap();
    r.set_decimal("dec38", 1_234_567_890_123_456_789_i128, 10)
        .unwrap();
    s.apply(Operation::update(&t, r)).await.unwrap();
    let mut r = t.new_row();
    r.set_i64("id", deleted).unwrap();
    s.apply(Operation::delete(&t, r)).await.unwrap();
    let mut r = t.new_row();
    r.set_i64("id", STRAY).unwrap();
    r.set_str("s", "only on the sink").unwrap();
    s.apply(Operation::insert(&t, r)).await.unwrap();
    s.flush().await.expect("plant");
}

#[test]
fn verify_finds_and_repairs_differences_on_every_pair() {
    for_each_pair(|env| async move {
        let label = env.pair.label();
        let t = env.pair.table("ver");
        let sink_table = format!("{t}{SINK_SUFFIX}");
        // Different partitioning on the two sides: ranges need not line up.
        create_every_type_table(&env.source, &t, 3).await;
        create_every_type_table(&env.sink, &sink_table, 2).await;
        let writer = Workload::start(env.source.clone(), &t, 400, 32);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let stats = writer.stop().await;
        assert_eq!(stats.failed, 0, "{label}: {stats:?}");
        let rows = copy_rows(&env.source, &t, &env.sink, &sink_table).await;
        assert!(rows > 100, "{label}: {rows} rows");

        for method in ["server", "client"] {
            let r = report(&env, &verify(&env, &t, &["--method", method]).await, 0);
            assert_eq!(r["equal"], true, "{label} {method}: {r}");
            assert_eq!(r["rowsCompared"], rows, "{label} {method}: {r}");
            // Equal checksums on both releases: nothing settled row by row.
            assert_eq!(r["rangesDiffering"], 0, "{label} {method}: {r}");
        }

        let keys: Vec<i64> = ferry_fixtures::read_all(&env.source, &t)
            .await
            .into_keys()
            .collect();
        let (changed, deleted) = (keys[10], keys[20]);
        plant(&env, &sink_table, changed, deleted).await;
        for method in ["server", "client"] {
            let r = report(&env, &verify(&env, &t, &["--method", method]).await, 1);
            assert_eq!(r["differences"], 3, "{label} {method}: {r}");
            let listed: Vec<Value> = r["listed"]
                .as_array()
                .expect("listed")
                .iter()
                .map(|d| json!([d["kind"], d["key"]["id"], d["columns"]]))
                .collect();
            assert_eq!(
                listed,
                [
                    json!(["differs", changed, ["dec38"]]),
                    json!(["missing", deleted, null]),
                    json!(["extra", STRAY, null]),
                ],
                "{label} {method}: {r}"
            );
        }

        let r = report(&env, &verify(&env, &t, &["--repair"]).await, 0);
        assert_eq!(r["repair"]["upserted"], 2, "{label}: {r}");
        assert_eq!(r["repair"]["deleted"], 1, "{label}: {r}");
        assert_eq!(r["repair"]["equalAfter"], true, "{label}: {r}");
        let r = report(&env, &verify(&env, &t, &[]).await, 0);
        assert_eq!(r["equal"], true, "{label}: after the repair: {r}");
        env.assert_equal(&t, "the repair").await;
    });
}
