//! The failback drill (issue 33, item 1) with the real binary and two real
//! clusters: a job replicates a → b; it dies; writes land on a that never
//! reach b (logged); the source cluster a is killed; the applications
//! fail over and write to b; a comes back. Then:
//!
//! - `ferry failback` refuses while a still takes writes, naming the
//!   fence;
//! - it salvages exactly the logged unreplicated writes (key, value now),
//!   rewinds a to the last replicated instant (a equals b read at the
//!   divergence sink time, cell by cell), and writes a cutover report;
//! - the reverse job (`ferry run --fromCutover`) takes no snapshot and
//!   keeps a equal to b under further writes on b;
//! - a second failback is refused.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::process::output_text;
use ferry_fixtures::{read_all, read_at};
use ferry_kudu::position::PositionTable;
use ferry_testkit::DaemonKind;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{HybridTime, KuduClient, KuduTable, TableBuilder};

const TABLE: &str = "fb_orders";

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The forward job a → b.
fn forward(a: &str, b: &str, chk: &str) -> Vec<String> {
    strings(&[
        "--job.sourceMasterAddresses",
        a,
        "--job.sinkMasterAddresses",
        b,
        "--job.tableName",
        TABLE,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        chk,
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
    ])
}

/// Upserts (id, v) or deletes (`None`), logging what each key holds now.
async fn write(
    client: &KuduClient,
    table: &KuduTable,
    ops: impl IntoIterator<Item = (i64, Option<String>)>,
    log: &mut BTreeMap<i64, Option<String>>,
) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for (id, v) in ops {
        let mut r = table.new_row();
        r.set_i64("id", id).expect("id");
        let op = match &v {
            Some(v) => {
                r.set_str("v", v).expect("v");
                Operation::upsert(table, r)
            }
            None => Operation::delete(table, r),
        };
        s.apply(op).await.expect("apply");
        log.insert(id, v);
    }
    s.flush().await.expect("flush");
}

async fn ferry(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || crate::ferry().args(&args).output())
        .await
        .expect("join")
}

async fn wait_equal(a: &KuduClient, b: &KuduClient, within: Duration) {
    let started = Instant::now();
    loop {
        let (x, y) = (read_all(a, TABLE).await, read_all(b, TABLE).await);
        if x == y {
            return;
        }
        assert!(
            started.elapsed() < within,
            "still different after {within:?}: {} vs {} rows",
            x.len(),
            y.len()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Waits until the restarted cluster serves the table again.
async fn wait_serving(client: &KuduClient) {
    let started = Instant::now();
    loop {
        let table = match client.open_table(TABLE).await {
            Ok(t) => t,
            Err(_) if started.elapsed() < Duration::from_secs(60) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(e) => panic!("the old primary did not come back: {e}"),
        };
        let mut scanner = client.scan_builder(&table).build().expect("scanner");
        let mut ok = true;
        loop {
            match scanner.next_batch().await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "not serving");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failback_salvages_rewinds_and_reverses_without_a_copy() {
    let (mut a, b) = ferry_fixtures::two_clusters();
    let (am, bm) = (a.master_addrs_joined(), b.master_addrs_joined());
    let ca = KuduClient::new(&a.master_addrs()).expect("client a");
    let cb = KuduClient::new(&b.master_addrs()).expect("client b");
    let builder = TableBuilder::new(TABLE, ferry_fixtures::small_schema())
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(1);
    ca.create_table(&builder).await.expect("create");
    let ta = ca.open_table(TABLE).await.expect("open");
    let mut replicated = BTreeMap::new();
    write(
        &ca,
        &ta,
        (0..500).map(|id| (id, Some(format!("v{id}")))),
        &mut replicated,
    )
    .await;

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk").to_string_lossy().into_owned();
    let options = forward(&am, &bm, &chk);
    let mut args = strings(&["run"]);
    args.extend(options.clone());
    let mut job = crate::ferry().args(&args).free_ports().start();
    let job_id = job.job_id();
    write(
        &ca,
        &ta,
        (0..20).map(|id| (id, Some(format!("r1 {id}")))),
        &mut replicated,
    )
    .await;
    wait_equal(&ca, &cb, Duration::from_secs(90)).await;
    // Until a window opened after those writes: the sink position's last
    // end covers everything written so far.
    let written = ca.server_clock().await.expect("clock").raw();
    let started = Instant::now();
    loop {
        let p = PositionTable::lookup(&cb, "ferry_positions", TABLE).await;
        if let Ok(Some(p)) = p {
            if p.last_end_sink_time.is_some() && p.last_end.is_some_and(|e| e.raw() > written) {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no window after the writes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    job.kill9();

    // Writes that reach the old primary but never the new one.
    let mut lost = BTreeMap::new();
    let ops = (100..130)
        .map(|id| (id, Some(format!("lost {id}"))))
        .chain((200..210).map(|id| (id, None)))
        .chain((10_000..10_020).map(|id| (id, Some("lost new".to_string()))));
    write(&ca, &ta, ops, &mut lost).await;

    // The source cluster dies; the applications move to b.
    tokio::task::block_in_place(|| {
        for i in 0..3 {
            a.kill(DaemonKind::TabletServer, i).expect("kill tserver");
        }
        a.kill(DaemonKind::Master, 0).expect("kill master");
    });
    let tb = cb.open_table(TABLE).await.expect("open b");
    let mut on_b = BTreeMap::new();
    let ops = (300..320)
        .map(|id| (id, Some(format!("on b {id}"))))
        .chain((20_000..20_010).map(|id| (id, Some("new on b".to_string()))));
    write(&cb, &tb, ops, &mut on_b).await;

    // The old primary comes back, and one of its writers is still running.
    tokio::task::block_in_place(|| a.start_all()).expect("source back");
    wait_serving(&ca).await;
    let ta = ca.open_table(TABLE).await.expect("open a");
    let stop = Arc::new(AtomicBool::new(false));
    let late_writer = {
        let (ca, ta, stop) = (ca.clone(), ta.clone(), stop.clone());
        tokio::spawn(async move {
            let mut log = BTreeMap::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                write(
                    &ca,
                    &ta,
                    [(30_000 + n, Some(format!("late {n}")))],
                    &mut log,
                )
                .await;
                n += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            log
        })
    };
    let report = dir.path().join("failback.json");
    let mut args = strings(&[
        "failback",
        "--probe-seconds",
        "2",
        "--report",
        &report.to_string_lossy(),
    ]);
    args.extend(options.clone());
    let out = ferry(args.clone()).await;
    stop.store(true, Ordering::Relaxed);
    lost.extend(late_writer.await.expect("late writer"));
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let text = output_text(&out);
    assert!(text.contains("still takes writes"), "{text}");
    assert!(text.contains("Fence it"), "{text}");
    assert!(!report.exists(), "a refused failback wrote its report");

    // The failback.
    let out = ferry(args.clone()).await;
    assert!(out.status.success(), "{}", output_text(&out));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(printed.contains("--fromCutover"), "{printed}");

    // The salvage holds exactly the unreplicated writes, with their values.
    let position = PositionTable::lookup(&cb, "ferry_positions", TABLE)
        .await
        .expect("position lookup")
        .expect("a position record");
    let last_end = position.last_end.expect("a completed window").raw();
    let sink_time = position.last_end_sink_time.expect("a sink time").raw();
    let salvage_file = std::path::Path::new(&chk)
        .join(&job_id)
        .join(format!("failback-{last_end}"))
        .join(format!("salvage-{TABLE}.jsonl"));
    let body = std::fs::read_to_string(&salvage_file)
        .unwrap_or_else(|e| panic!("{}: {e}\n{printed}", salvage_file.display()));
    let mut salvaged = BTreeMap::new();
    for line in body.lines() {
        let row: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let id = row["key"]["id"].as_i64().expect("key id");
        let now = row["now"]["v"].as_str().map(str::to_owned);
        assert!(
            row["changedAfter"].as_u64() < row["changedBefore"].as_u64(),
            "{row}"
        );
        assert!(row["changedAfter"].as_u64() >= Some(last_end), "{row}");
        salvaged.insert(id, now);
    }
    assert_eq!(salvaged, lost, "the salvage is not the unreplicated writes");

    // The old primary was rewound: it equals the new primary at the
    // divergence point, cell by cell.
    let old_now = read_all(&ca, TABLE).await;
    let new_then = read_at(&cb, TABLE, Some(HybridTime::from_raw(sink_time))).await;
    assert_eq!(old_now, new_then);

    // The reverse job: no snapshot; b's writes reach a and keep reaching it.
    let reverse_chk = dir.path().join("reverse").to_string_lossy().into_owned();
    let mut args = strings(&["run", "--fromCutover", &report.to_string_lossy()]);
    args.extend(strings(&[
        "--job.sourceMasterAddresses",
        &bm,
        "--job.sinkMasterAddresses",
        &am,
        "--job.tableName",
        TABLE,
        "--job.sinkTableName",
        TABLE,
        "--job.checkpointsDirectory",
        &reverse_chk,
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
    ]));
    let mut reverse = crate::ferry().args(&args).free_ports().start();
    let reverse_id = reverse.job_id();
    wait_equal(&ca, &cb, Duration::from_secs(60)).await;
    let mut more = BTreeMap::new();
    write(
        &cb,
        &tb,
        (0..10).map(|id| (id, Some(format!("after {id}")))),
        &mut more,
    )
    .await;
    wait_equal(&ca, &cb, Duration::from_secs(60)).await;
    let diff = compare_tables(&cb, &ca, TABLE, TABLE).await;
    assert!(diff.is_equal(), "{diff:?}");
    let live = reverse.get_json(&format!("/ferry/jobs/{reverse_id}/live"));
    reverse.kill9();
    assert_eq!(live["totals"]["snapshot_windows"], 0, "{live}");

    // A second failback would undo the reverse job's writes: refused.
    let mut args = strings(&["failback", "--probe-seconds", "1"]);
    args.extend(options.clone());
    let out = ferry(args).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("already done"),
        "{}",
        output_text(&out)
    );
}

/// A failback whose divergence point is older than the old primary's
/// history is refused naming --tablet_history_max_age_sec and a fresh
/// copy; one whose sink table was recreated since is refused too. Nothing
/// is written either time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failback_refuses_past_the_history_and_for_a_recreated_table() {
    use ferry_engine::checkpoint::{JobId, WindowState};
    use ferry_engine::sink_position::SinkPosition;
    use ferry_engine::{SinkTime, SourceTime};

    const SHORT: &str = "fb_short";
    let clusters = crate::verify_clusters();
    let (a, b) = (&clusters.0, &clusters.1);
    let ca = KuduClient::new(&a.master_addrs()).expect("client a");
    let cb = KuduClient::new(&b.master_addrs()).expect("client b");
    let create = |history: Option<u32>| {
        let mut t = TableBuilder::new(SHORT, ferry_fixtures::small_schema())
            .add_hash_partitions(&["id"], 2, 0)
            .num_replicas(1);
        if let Some(s) = history {
            t = t.extra_config("kudu.table.history_max_age_sec", s.to_string());
        }
        t
    };
    ca.create_table(&create(Some(1))).await.expect("create a");
    cb.create_table(&create(None)).await.expect("create b");
    let (ta, tb) = (
        ca.open_table(SHORT).await.unwrap(),
        cb.open_table(SHORT).await.unwrap(),
    );
    let mut log = BTreeMap::new();
    let rows = || (0..10).map(|id| (id, Some(format!("v{id}"))));
    write(&ca, &ta, rows(), &mut log).await;
    write(&cb, &tb, rows(), &mut log).await;
    let last_end = ca.server_clock().await.unwrap().raw();
    let sink_time = cb.server_clock().await.unwrap().raw();
    write(&ca, &ta, [(3, Some("later".to_string()))], &mut log).await;
    let mut positions = PositionTable::new(cb.clone(), "ferry_positions");
    positions.prepare(1).await.expect("positions");
    let position = SinkPosition {
        source_table: SHORT.into(),
        job_id: JobId::random().to_string(),
        generation: 0,
        last_end: Some(SourceTime::from_raw(last_end)),
        window: WindowState {
            start_timestamp: Some(SourceTime::from_raw(last_end)),
            end_timestamp: SourceTime::from_raw(last_end + (1 << 20)),
        },
        last_end_sink_time: Some(SinkTime::from_raw(sink_time)),
    };
    positions.write(&tb, &position).await.expect("position");
    // Past the old primary's one-second history.
    tokio::time::sleep(Duration::from_secs(4)).await;

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk").to_string_lossy().into_owned();
    let mut args = strings(&["failback", "--probe-seconds", "1"]);
    args.extend(forward(
        &a.master_addrs_joined(),
        &b.master_addrs_joined(),
        &chk,
    ));
    let pos = args.iter().position(|x| x == TABLE).unwrap();
    args[pos] = SHORT.to_string();
    let before = read_all(&ca, SHORT).await;
    let out = ferry(args.clone()).await;
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("--tablet_history_max_age_sec"), "{text}");
    assert!(text.contains("afresh"), "{text}");
    assert_eq!(
        read_all(&ca, SHORT).await,
        before,
        "a refused failback wrote"
    );

    // The new primary's table dropped and created again: its position is
    // of the dropped table.
    cb.delete_table(SHORT).await.expect("drop b");
    cb.create_table(&create(None)).await.expect("recreate b");
    let out = ferry(args).await;
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("dropped and created again"), "{text}");
    assert_eq!(
        read_all(&ca, SHORT).await,
        before,
        "a refused failback wrote"
    );
}
