//! `ferry run --fromCutover FILE` against real clusters: after a verified
//! cutover (here: two equal tables, proved equal with `ferry_verify`), the
//! reverse job copies the writes made on the new primary after the
//! cutover time to the old source with a diff window, with no snapshot and
//! no full scan; and it refuses, before starting, a report that is not
//! equal or drained, one for other clusters or tables, a combination with
//! `-s`, and a cutover time the new primary's history no longer reaches.

use ferry_fixtures::{read_all, two_clusters};
use ferry_verify::{At, Side, VerifyOptions};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, KuduTable, TableBuilder};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

const ROWS: i64 = 2_000;

async fn table(client: &KuduClient, name: &str, history_s: Option<u32>) -> KuduTable {
    let mut b = TableBuilder::new(name, ferry_fixtures::small_schema())
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(1);
    if let Some(s) = history_s {
        b = b.extra_config("kudu.table.history_max_age_sec", s.to_string());
    }
    client.create_table(&b).await.expect("create");
    client.open_table(name).await.expect("open")
}

async fn write(
    client: &KuduClient,
    table: &KuduTable,
    ops: impl IntoIterator<Item = (i64, Option<String>)>,
) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for (id, v) in ops {
        let mut r = table.new_row();
        r.set_i64("id", id).expect("id");
        let op = match v {
            Some(v) => {
                r.set_str("v", &v).expect("v");
                Operation::upsert(table, r)
            }
            None => Operation::delete(table, r),
        };
        s.apply(op).await.expect("apply");
    }
    s.flush().await.expect("flush");
}

fn reverse_args(new_primary: &str, old_source: &str, chk: &Path) -> Vec<String> {
    [
        "--job.sourceMasterAddresses",
        new_primary,
        "--job.sinkMasterAddresses",
        old_source,
        "--job.tableName",
        "orders_copy",
        "--job.sinkTableName",
        "orders",
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn ferry(args: &[String]) -> Output {
    crate::ferry().args(args).output()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reverse_job_diffs_from_the_cutover_time_and_refuses_what_does_not_fit() {
    let (a, b) = two_clusters();
    let (old_source, new_primary) = (a.master_addrs_joined(), b.master_addrs_joined());
    let ca = KuduClient::new(&a.master_addrs()).expect("client");
    let cb = KuduClient::new(&b.master_addrs()).expect("client");
    let orders = table(&ca, "orders", None).await;
    let copy = table(&cb, "orders_copy", None).await;
    let rows = || (0..ROWS).map(|id| (id, Some(format!("row {id}"))));
    write(&ca, &orders, rows()).await;
    write(&cb, &copy, rows()).await;

    // The cutover: both clocks read after the last write, and verified.
    let final_end = ca.server_clock().await.expect("clock").raw();
    let cutover_time = cb.server_clock().await.expect("clock").raw();
    let verified = ferry_verify::verify(VerifyOptions::new(
        Side {
            client: ca.clone(),
            table: "orders".into(),
            at: At::Time(kudu_client::HybridTime::from_raw(final_end)),
        },
        Side {
            client: cb.clone(),
            table: "orders_copy".into(),
            at: At::Time(kudu_client::HybridTime::from_raw(cutover_time)),
        },
    ))
    .await
    .expect("verify");
    assert!(verified.equal, "{verified}");
    let report = |equal: bool, drained: bool, sink_masters: &str, table_id: Option<&str>| {
        serde_json::json!({
            "version": 1,
            "jobId": "00112233445566778899aabbccddeeff",
            "savepoint": "/tmp/savepoint-001122-aaaaaaaaaaaa",
            "source": {"masters": old_source.split(',').collect::<Vec<_>>(), "table": "orders"},
            "sink": {"masters": sink_masters.split(',').collect::<Vec<_>>(), "table": "orders_copy", "tableId": table_id},
            "finalEnd": final_end,
            "cutoverTime": cutover_time,
            "drained": drained,
            "equal": equal,
            "rpoMs": 0,
            "verify": verified,
            "createdAtMs": 1,
        })
        .to_string()
    };
    let dir = tempfile::tempdir().expect("tmp");
    let file = |name: &str, body: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).expect("write report");
        p.to_string_lossy().into_owned()
    };
    let good = file(
        "cutover.json",
        report(true, true, &new_primary, Some(copy.id())),
    );
    let chk = dir.path().join("chk");
    let base = reverse_args(&new_primary, &old_source, &chk);
    let run_with = |extra: &[&str]| {
        let mut args = vec!["run".to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(base.iter().cloned());
        args
    };

    // Refusals before anything starts (usage: exit 2).
    for (what, extra, says) in [
        (
            "not equal",
            vec![
                "--fromCutover".to_string(),
                file("differs.json", report(false, true, &new_primary, None)),
            ],
            "found the tables different",
        ),
        (
            "not drained",
            vec![
                "--fromCutover".to_string(),
                file("busy.json", report(true, false, &new_primary, None)),
            ],
            "not drained",
        ),
        (
            "other clusters",
            vec![
                "--fromCutover".to_string(),
                file("other.json", report(true, true, &old_source, None)),
            ],
            "job.sourceMasterAddresses",
        ),
        (
            "with -s",
            vec![
                "--fromCutover".to_string(),
                good.clone(),
                "-s".into(),
                "/tmp/sp".into(),
            ],
            "not together with -s",
        ),
        (
            "no such file",
            vec![
                "--fromCutover".to_string(),
                "/nonexistent/cutover.json".into(),
            ],
            "cannot read the cutover report",
        ),
    ] {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let o = ferry(&run_with(&extra));
        assert_eq!(o.status.code(), Some(2), "{what}: {}", text(&o));
        assert!(text(&o).contains(says), "{what}: {}", text(&o));
    }
    // The table on the new primary was dropped and created since (exit 1).
    let o = ferry(&run_with(&[
        "--fromCutover",
        &file(
            "recreated.json",
            report(true, true, &new_primary, Some("0123")),
        ),
    ]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("dropped and created again"),
        "{}",
        text(&o)
    );

    // After the cutover only the new primary takes writes.
    let changes: Vec<(i64, Option<String>)> = (0..50)
        .map(|i| (i * 7, Some(format!("updated {i}"))))
        .chain((0..20).map(|i| (i * 11 + 1, None)))
        .chain((0..30).map(|i| (ROWS + i, Some(format!("new {i}")))))
        .collect();
    write(&cb, &copy, changes.clone()).await;

    let mut job = crate::ferry()
        .args(run_with(&["--fromCutover", &good]))
        .free_ports()
        .start();
    let id = job.job_id();
    let started = Instant::now();
    loop {
        let (x, y) = (
            read_all(&ca, "orders").await,
            read_all(&cb, "orders_copy").await,
        );
        if x == y {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the old source did not catch up: {} vs {} rows",
            x.len(),
            y.len()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let live = job.get_json(&format!("/ferry/jobs/{id}/live"));
    job.kill9();
    let totals = &live["totals"];
    assert_eq!(totals["snapshot_windows"], 0, "{live}");
    // Only the changed rows were read: no full scan of the new primary.
    let read = totals["rows_read"].as_u64().expect("rows_read");
    assert!(read <= changes.len() as u64, "{read} rows read: {live}");
    assert!(totals["windows_completed"].as_u64() >= Some(1), "{live}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cutover_time_older_than_the_new_primarys_history_is_refused() {
    let (a, b) = two_clusters();
    let cb = KuduClient::new(&b.master_addrs()).expect("client");
    let copy = table(&cb, "orders_copy", Some(1)).await;
    write(&cb, &copy, (0..10).map(|id| (id, Some("x".to_string())))).await;
    let cutover_time = cb.server_clock().await.expect("clock").raw();
    // Past the table's one-second history.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let verify = serde_json::json!({
        "equal": true,
        "source": {"masters": [], "table": "orders", "timestamp": 1, "rows": 10},
        "sink": {"masters": [], "table": "orders_copy", "timestamp": 1, "rows": 10},
        "columns": ["id", "v"],
        "method": "server",
        "ranges": 1, "rangesDiffering": 0, "rowsCompared": 10,
        "differences": 0, "missing": 0, "extra": 0, "differing": 0,
        "listed": [], "truncated": false, "startedAtMs": 1, "elapsedMs": 1,
    });
    let report = serde_json::json!({
        "version": 1, "jobId": "j", "savepoint": "sp",
        "source": {"masters": [a.master_addrs_joined()], "table": "orders"},
        "sink": {"masters": [b.master_addrs_joined()], "table": "orders_copy"},
        "finalEnd": 1, "cutoverTime": cutover_time, "drained": true, "equal": true,
        "rpoMs": 0, "verify": verify, "createdAtMs": 1,
    });
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("cutover.json");
    std::fs::write(&path, report.to_string()).expect("write");
    let mut args = vec![
        "run".to_string(),
        "--fromCutover".into(),
        path.to_string_lossy().into_owned(),
    ];
    args.extend(reverse_args(
        &b.master_addrs_joined(),
        &a.master_addrs_joined(),
        &dir.path().join("chk"),
    ));
    let o = ferry(&args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("as of the cutover time"), "{}", text(&o));
    assert!(text(&o).contains("history"), "{}", text(&o));
    assert!(text(&o).contains("ancient history mark"), "{}", text(&o));
}
