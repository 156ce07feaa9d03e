//! `ferry failover --to consistent | --to-time T` (issue 33, item 2) with
//! the real binary: a job of three tables replicates under writers; the
//! cuts each table's sink position shows while it runs are recorded (a
//! source instant and the sink time at which that table held it; each
//! table has its own windows) and written to the cuts table, each row
//! naming its table (standing in for the job's own cuts history, task C);
//! the job is killed mid-window. One table's position is set back to an
//! older real cut, so the tables' last window ends differ by seconds. Then
//! (the source is kept alive to be read at those instants):
//!
//! - `--to consistent --dry-run` writes nothing;
//! - `--to consistent` targets the oldest last end and rewinds each table
//!   to its newest cut at or before it: each equals its source read at
//!   the instant the report states for it;
//! - `--to-time T` (T seconds back) likewise for T.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferry_engine::checkpoint::WindowState;
use ferry_engine::{SinkTime, SourceTime};
use ferry_fixtures::process::output_text;
use ferry_fixtures::{read_all, read_at};
use ferry_kudu::position::PositionTable;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, HybridTime, KuduClient, Schema, TableBuilder};

const TABLES: [&str; 3] = ["cut_1", "cut_2", "cut_3"];

async fn ferry(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || crate::ferry().args(&args).output())
        .await
        .expect("join")
}

/// The cuts table of the contract (job_id, source_time) → sink_time,
/// tables, generation, written_at, holding `cuts`.
async fn write_cuts(client: &KuduClient, job: &str, cuts: &BTreeMap<&str, Vec<(u64, u64)>>) {
    let col = |n: &str, t, key| {
        ColumnSchema::builder(n, t)
            .key(key)
            .nullable(!key)
            .build()
            .unwrap()
    };
    let schema = Schema::new(vec![
        col("job_id", DataType::String, true),
        col("source_time", DataType::Int64, true),
        col("sink_time", DataType::Int64, false),
        col("tables", DataType::String, false),
        col("generation", DataType::Int64, false),
        col("written_at", DataType::UnixtimeMicros, false),
    ])
    .unwrap();
    let b = TableBuilder::new("ferry_cuts", schema)
        .add_hash_partitions(&["job_id"], 2, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create cuts");
    let t = client.open_table("ferry_cuts").await.unwrap();
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
        .unwrap();
    for (table, list) in cuts {
        for &(source, sink) in list {
            let mut r = t.new_row();
            r.set_str("job_id", job).unwrap();
            r.set_i64("source_time", source as i64).unwrap();
            r.set_i64("sink_time", sink as i64).unwrap();
            let tables = serde_json::to_string(&[table]).unwrap();
            r.set_str("tables", &tables).unwrap();
            r.set_i64("generation", 0).unwrap();
            r.set_timestamp_micros("written_at", 0).unwrap();
            s.apply(Operation::upsert(&t, r)).await.unwrap();
        }
    }
    s.flush().await.expect("cuts");
}

async fn assert_at_source_instant(ca: &KuduClient, cb: &KuduClient, t: &str, source_time: u64) {
    {
        let then = read_at(ca, t, Some(HybridTime::from_raw(source_time))).await;
        let sink = read_all(cb, t).await;
        let differing: Vec<_> = sink
            .iter()
            .filter(|(k, v)| then.get(k) != Some(v))
            .chain(then.iter().filter(|(k, _)| !sink.contains_key(k)))
            .collect();
        assert!(
            differing.is_empty(),
            "{t} is not the source at {source_time}: {differing:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_rewinds_each_table_to_its_newest_cut_at_or_before_the_target() {
    let (a, b) = ferry_fixtures::two_clusters();
    let (am, bm) = (a.master_addrs_joined(), b.master_addrs_joined());
    let ca = KuduClient::new(&a.master_addrs()).expect("client a");
    let cb = KuduClient::new(&b.master_addrs()).expect("client b");
    let mut handles = Vec::new();
    for t in TABLES {
        let builder = TableBuilder::new(t, ferry_fixtures::small_schema())
            .add_hash_partitions(&["id"], 2, 0)
            .num_replicas(1);
        ca.create_table(&builder).await.expect("create");
        handles.push(ca.open_table(t).await.expect("open"));
    }
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk").to_string_lossy().into_owned();
    let options: Vec<String> = [
        "--job.sourceMasterAddresses",
        &am,
        "--job.sinkMasterAddresses",
        &bm,
        "--job.tableName",
        &TABLES.join(","),
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        &chk,
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut args = vec!["run".to_string()];
    args.extend(options.clone());
    // Cuts off while the job runs: each table keeps windows of its own,
    // so the tables' last ends differ (the case `--to` exists for); the
    // test writes the cuts history itself below.
    args.extend(["--job.cutsTable".to_string(), String::new()]);
    let mut job = crate::ferry().args(&args).free_ports().start();

    // Writers on the three tables; the cuts each table's position shows
    // meanwhile (each table has its own windows).
    let mut session = ca
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushSync))
        .unwrap();
    let mut cuts: BTreeMap<&str, BTreeSet<(u64, u64)>> = BTreeMap::new();
    let mut job_id = String::new();
    let started = Instant::now();
    let mut n: i64 = 0;
    while started.elapsed() < Duration::from_secs(60) {
        for t in &handles {
            let mut r = t.new_row();
            r.set_i64("id", n % 150).unwrap();
            r.set_str("v", &format!("w{n}")).unwrap();
            session.apply(Operation::upsert(t, r)).await.unwrap();
            if n % 7 == 0 {
                let mut r = t.new_row();
                r.set_i64("id", (n + 50) % 150).unwrap();
                session.apply(Operation::delete_ignore(t, r)).await.unwrap();
            }
        }
        n += 1;
        if n % 5 == 0 {
            for t in TABLES {
                if let Ok(Some(p)) = PositionTable::lookup(&cb, "ferry_positions", t).await {
                    if let (Some(e), Some(s)) = (p.last_end, p.last_end_sink_time) {
                        cuts.entry(t).or_default().insert((e.raw(), s.raw()));
                        job_id = p.job_id.clone();
                    }
                }
            }
            let enough = TABLES
                .iter()
                .all(|t| cuts.get(t).is_some_and(|c| c.len() >= 6));
            if enough && started.elapsed() > Duration::from_secs(8) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    job.kill9();
    for t in TABLES {
        let p = PositionTable::lookup(&cb, "ferry_positions", t)
            .await
            .unwrap()
            .expect("a position");
        let (e, s) = (
            p.last_end.unwrap().raw(),
            p.last_end_sink_time.unwrap().raw(),
        );
        cuts.entry(t).or_default().insert((e, s));
    }
    let cuts: BTreeMap<&str, Vec<(u64, u64)>> = cuts
        .into_iter()
        .map(|(t, c)| (t, c.into_iter().collect()))
        .collect();
    for t in TABLES {
        assert!(cuts[t].len() >= 4, "too few windows of {t}: {cuts:?}");
    }

    // cut_2's position set back to an older real cut of its own: the
    // tables' last ends differ by seconds.
    let c2 = &cuts[TABLES[1]];
    let mid = c2.len() / 2;
    let (mid_source, mid_sink) = c2[mid];
    let mut positions = PositionTable::new(cb.clone(), "ferry_positions");
    positions.prepare(1).await.expect("positions");
    let sink_2 = cb.open_table(TABLES[1]).await.unwrap();
    let mut p = PositionTable::lookup(&cb, "ferry_positions", TABLES[1])
        .await
        .unwrap()
        .expect("cut_2's position");
    p.last_end = Some(SourceTime::from_raw(mid_source));
    p.last_end_sink_time = Some(SinkTime::from_raw(mid_sink));
    p.window = WindowState {
        start_timestamp: Some(SourceTime::from_raw(mid_source)),
        end_timestamp: SourceTime::from_raw(c2[mid + 1].0),
    };
    positions.write(&sink_2, &p).await.expect("older position");
    // The cuts history of the windows seen, each row naming its table.
    write_cuts(&cb, &job_id, &cuts).await;

    let mut dry: Vec<String> = ["failover", "--to", "consistent", "--dry-run"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    dry.extend(options.clone());
    let before: Vec<_> = futures::future::join_all(TABLES.map(|t| read_all(&cb, t))).await;
    let out = ferry(dry).await;
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("would rewind"),
        "{}",
        output_text(&out)
    );
    let after: Vec<_> = futures::future::join_all(TABLES.map(|t| read_all(&cb, t))).await;
    assert_eq!(before, after, "a dry run wrote");

    // Consistent: the smallest last end (cut_2's); each table at its
    // newest cut at or before it, equal to its source then.
    let report = failover(&options, &["--to", "consistent"]).await;
    assert_eq!(report["target"], mid_source, "{report}");
    let stated = check_report(&ca, &cb, &report, &cuts, mid_source).await;
    assert_eq!(stated[1], mid_source, "{report}");
    let rewound: u64 = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["rewritten"].as_u64().unwrap() + t["deleted"].as_u64().unwrap())
        .sum();
    assert!(rewound > 0, "nothing was rewound: {report}");

    // An earlier time: seconds back, each table's newest cut at or before it.
    let asked = TABLES.iter().map(|t| cuts[t][1].0).max().unwrap();
    assert!(asked < mid_source);
    let report = failover(&options, &["--to-time", &asked.to_string()]).await;
    assert_eq!(report["target"], asked, "{report}");
    check_report(&ca, &cb, &report, &cuts, asked).await;
}

/// `ferry failover <extra> --json`, successful, its report.
async fn failover(options: &[String], extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["failover".to_string(), "--json".to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(options.iter().cloned());
    let out = ferry(args).await;
    assert!(out.status.success(), "{}", output_text(&out));
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

/// Each table of `report` was rewound to its newest cut at or before
/// `target` and equals its source at that cut's instant; the instants.
async fn check_report(
    ca: &KuduClient,
    cb: &KuduClient,
    report: &serde_json::Value,
    cuts: &BTreeMap<&str, Vec<(u64, u64)>>,
    target: u64,
) -> Vec<u64> {
    let tables = report["tables"].as_array().expect("tables");
    assert_eq!(tables.len(), 3, "{report}");
    let mut stated = Vec::new();
    for (t, r) in TABLES.iter().zip(tables) {
        assert_eq!(r["table"], *t, "{report}");
        let source = r["cut"]["sourceTime"].as_u64().expect("source time");
        let newest = cuts[t].iter().filter(|c| c.0 <= target).max().copied();
        assert_eq!(Some(source), newest.map(|c| c.0), "{t}: {report}");
        assert_eq!(
            r["cut"]["sinkTime"].as_u64(),
            newest.map(|c| c.1),
            "{report}"
        );
        assert_eq!(r["equalAfter"], true, "{report}");
        assert_at_source_instant(ca, cb, t, source).await;
        stated.push(source);
    }
    let one = stated.windows(2).all(|w| w[0] == w[1]);
    assert_eq!(report["oneInstant"], one, "{report}");
    stated
}
