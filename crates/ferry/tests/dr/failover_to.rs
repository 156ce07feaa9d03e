//! `ferry failover --to consistent | --to-time T` (issue 33, item 2) with
//! the real binary: a job of three tables replicates under writers; the
//! cuts the sink positions show while it runs are recorded (each a source
//! instant and the sink time at which every table held it); the job is
//! killed mid-window. One table's position is set back to an older real
//! cut, so the three tables' last window ends differ. Then (the source is
//! kept alive to be read at those instants):
//!
//! - `--to consistent --dry-run` writes nothing;
//! - `--to consistent` rewinds all three to the oldest last end: each
//!   equals its source read at that instant;
//! - `--to-time T` (T a few seconds back) rewinds all three to the newest
//!   cut at or before T, read from the cuts table: each equals its source
//!   read at that cut's instant.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

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
async fn write_cuts(client: &KuduClient, job: &str, cuts: &[(u64, u64)]) {
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
    for &(source, sink) in cuts {
        let mut r = t.new_row();
        r.set_str("job_id", job).unwrap();
        r.set_i64("source_time", source as i64).unwrap();
        r.set_i64("sink_time", sink as i64).unwrap();
        r.set_str("tables", &TABLES.join(",")).unwrap();
        s.apply(Operation::insert(&t, r)).await.unwrap();
    }
    s.flush().await.expect("cuts");
}

async fn assert_at_source_instant(ca: &KuduClient, cb: &KuduClient, source_time: u64) {
    for t in TABLES {
        let then = read_at(ca, t, Some(HybridTime::from_raw(source_time))).await;
        let sink = read_all(cb, t).await;
        assert_eq!(
            sink.len(),
            then.len(),
            "{t}: rows differ from the source at {source_time}"
        );
        assert_eq!(sink, then, "{t} is not the source at {source_time}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_rewinds_every_table_to_one_cut_or_an_earlier_time() {
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
    let mut job = crate::ferry().args(&args).free_ports().start();

    // Writers on the three tables; the cuts the positions show meanwhile.
    let mut session = ca
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushSync))
        .unwrap();
    let mut cuts: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut job_id = String::new();
    let started = Instant::now();
    let mut n: i64 = 0;
    while started.elapsed() < Duration::from_secs(40) {
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
            if let Ok(Some(p)) = PositionTable::lookup(&cb, "ferry_positions", TABLES[0]).await {
                if let (Some(e), Some(s)) = (p.last_end, p.last_end_sink_time) {
                    cuts.insert((e.raw(), s.raw()));
                    job_id = p.job_id.clone();
                }
            }
            if cuts.len() >= 8 && started.elapsed() > Duration::from_secs(8) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    job.kill9();
    let cuts: Vec<(u64, u64)> = cuts.into_iter().collect();
    assert!(cuts.len() >= 4, "too few windows: {cuts:?}");

    // cut_2's position set back to an older cut: the tables' last ends differ.
    let (mid_source, mid_sink) = cuts[cuts.len() / 2];
    let mut positions = PositionTable::new(cb.clone(), "ferry_positions");
    positions.prepare(1).await.expect("positions");
    let sink_2 = cb.open_table(TABLES[1]).await.unwrap();
    let mut p = PositionTable::lookup(&cb, "ferry_positions", TABLES[1])
        .await
        .unwrap()
        .expect("cut_2's position");
    assert!(p.last_end > Some(SourceTime::from_raw(mid_source)), "{p:?}");
    p.last_end = Some(SourceTime::from_raw(mid_source));
    p.last_end_sink_time = Some(SinkTime::from_raw(mid_sink));
    positions.write(&sink_2, &p).await.expect("older position");

    let mut dry = vec!["failover".to_string(), "--to".into(), "consistent".into()];
    dry.push("--dry-run".into());
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

    let mut args: Vec<String> = ["failover", "--to", "consistent", "--json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(options.clone());
    let out = ferry(args).await;
    assert!(out.status.success(), "{}", output_text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["cut"]["sourceTime"], mid_source, "{report}");
    assert_eq!(report["cut"]["sinkTime"], mid_sink, "{report}");
    assert_eq!(
        report["tables"].as_array().map(Vec::len),
        Some(3),
        "{report}"
    );
    let rewound: u64 = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["rewritten"].as_u64().unwrap() + t["deleted"].as_u64().unwrap())
        .sum();
    assert!(rewound > 0, "nothing was rewound: {report}");
    assert_at_source_instant(&ca, &cb, mid_source).await;

    // An earlier time, from the cuts table: the newest cut at or before it.
    write_cuts(&cb, &job_id, &cuts).await;
    let (early_source, _) = cuts[1];
    let asked = early_source + 1;
    assert!(cuts[2].0 > asked);
    let mut args: Vec<String> = ["failover", "--to-time", &asked.to_string(), "--json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(options.clone());
    let out = ferry(args).await;
    assert!(out.status.success(), "{}", output_text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["cut"]["sourceTime"], early_source, "{report}");
    assert_at_source_instant(&ca, &cb, early_source).await;
}
