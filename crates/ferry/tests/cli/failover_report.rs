//! `ferry failover --report` with the source cluster gone: the data RPO of
//! a failover now, from the newest valid state and — the sink cluster being
//! up — the sink position when it knows a later window end; JSON and human
//! output; exit 3 when no valid state exists. Nothing is started.

use ferry_engine::checkpoint::{encode_metadata, JobId, JobState, SnapshotKind, WindowState};
use ferry_engine::sink_position::SinkPosition;
use ferry_kudu::position::PositionTable;
use ferry_testkit::MiniCluster;
use kudu_client::{HybridTime, KuduClient, TableBuilder};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, SystemTime};

const JOB: &str = "00112233445566778899aabbccddeeff";

/// A hybrid time `ago` before this machine's now.
fn ago(ago: Duration) -> u64 {
    HybridTime::from_system_time(SystemTime::now() - ago).raw()
}

fn report(store: &Path, sink_masters: &str, json: bool) -> Output {
    let mut cmd = crate::ferry().args(["failover", "--report"]);
    if json {
        cmd = cmd.arg("--json");
    }
    cmd.args([
        "--job.sourceMasterAddresses",
        "127.0.0.1:1",
        "--job.sinkMasterAddresses",
        sink_masters,
        "--job.tableName",
        "orders",
        "--job.checkpointsDirectory",
    ])
    .arg(store.to_string_lossy())
    .output()
}

fn json(o: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON line")
}

/// Asserts the RPO is about `expected` (this process and the binary read
/// the same clock; the slack covers the run itself).
fn assert_rpo(r: &serde_json::Value, expected: Duration) {
    let rpo = r["rpoMs"].as_u64().expect("rpoMs");
    let low = expected.as_millis() as u64;
    assert!(
        (low..low + 20_000).contains(&rpo),
        "{rpo} ms, expected ~{low}: {r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_prints_the_data_rpo_from_the_state_and_the_sink_position() {
    let cluster = MiniCluster::builder().tservers(1).start().expect("cluster");
    let masters = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let b = TableBuilder::new("orders", ferry_fixtures::small_schema()).num_replicas(1);
    client.create_table(&b).await.expect("create");
    let sink = client.open_table("orders").await.expect("open");

    let dir = tempfile::tempdir().expect("tmp");
    let store = dir.path();
    // Nothing there yet.
    let o = report(store, &masters, true);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The newest valid checkpoint's last window ended a minute ago; a
    // window after it was in progress.
    let state_end = ago(Duration::from_secs(60));
    let job: JobId = JOB.parse().expect("id");
    let mut s = JobState::new(job, SnapshotKind::Checkpoint, 4, "orders", vec![], vec![]);
    s.last_end_timestamp = Some(ferry_engine::SourceTime::from_raw(state_end));
    s.window = Some(WindowState {
        start_timestamp: Some(ferry_engine::SourceTime::from_raw(state_end)),
        end_timestamp: ferry_engine::SourceTime::from_raw(state_end + 1),
    });
    let chk = store.join(JOB).join("chk-4");
    std::fs::create_dir_all(&chk).expect("mkdir");
    std::fs::write(chk.join("_metadata"), encode_metadata(&s).expect("encode")).expect("write");

    // No position table on the sink: the state's end counts.
    let r = json(&report(store, &masters, true));
    assert_eq!(r["stateLastEnd"], state_end, "{r}");
    assert_eq!(r["lastEnd"], state_end, "{r}");
    assert!(r["position"].is_null(), "{r}");
    assert!(
        r["positionUnknown"]
            .as_str()
            .is_some_and(|w| w.contains("no record")),
        "{r}"
    );
    assert_rpo(&r, Duration::from_secs(60));
    // No cluster is touched but the sink (the source is 127.0.0.1:1) and
    // nothing is started: the report returns.

    // The sink position knows a later window: it counts.
    let position_end = ago(Duration::from_secs(5));
    let mut positions = PositionTable::new(client.clone(), "ferry_positions");
    positions.prepare(1).await.expect("position table");
    let p = SinkPosition {
        source_table: "orders".into(),
        job_id: JOB.into(),
        generation: 0,
        last_end: Some(ferry_engine::SourceTime::from_raw(position_end)),
        window: WindowState {
            start_timestamp: Some(ferry_engine::SourceTime::from_raw(position_end)),
            end_timestamp: ferry_engine::SourceTime::from_raw(position_end + 10),
        },
        last_end_sink_time: Some(ferry_engine::SinkTime::from_raw(4242)),
    };
    positions.write(&sink, &p).await.expect("write position");
    let r = json(&report(store, &masters, true));
    assert_eq!(r["lastEnd"], position_end, "{r}");
    assert_eq!(r["position"]["lastEnd"], position_end, "{r}");
    assert_eq!(r["position"]["lastEndSinkTime"], 4242, "{r}");
    assert_rpo(&r, Duration::from_secs(5));
    let utc = r["lastEndUtc"].as_str().expect("utc").to_owned();
    assert!(utc.ends_with('Z') && utc.len() == 24, "{utc}");

    // The human form says the same.
    let o = report(store, &masters, false);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("Data RPO of a failover now: "), "{out}");
    assert!(
        out.contains(&format!("writes to the source after {utc}")),
        "{out}"
    );
    assert!(out.contains(&format!("last end {position_end}")), "{out}");
}
