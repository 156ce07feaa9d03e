//! `ferry drill` (issue 33, item 5) through the real binary, against the
//! standby tests' real Kudu clusters and a real S3 server (s3s-fs) as the
//! DR store, while the job replicates under a writer:
//!
//! - a healthy setup — the job holds its lease (on the sink cluster) and
//!   replicates its state to the DR bucket with `job.stateReplicas`: exit
//!   0, and the JSON report (stdout and `--report FILE`) has every section
//!   with plausible values: RPO of seconds, the table equal at the cut,
//!   the DR copy fresh and restorable, the lease renewed by generation 1,
//!   every failover step measured and the RTO estimate at least the lease
//!   duration;
//! - a stale DR store — a bucket holding only a copy `ferry state mirror`
//!   made once, a few seconds old against a `--max-dr-lag` of 2 s: the
//!   report says STALE with the numbers, exit 1;
//! - an unreachable DR store: the report names it, exit 1;
//! - bad input (unknown flag, unknown key, no DR store, a table not of
//!   the job): exit 2 with the offending value named.

use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_fixtures::process::output_text;
use ferry_fixtures::workload::Workload;
use ferry_testkit::S3Server;
use kudu_client::{KuduClient, TableBuilder};
use serde_json::Value;
use std::num::NonZeroUsize;
use std::process::Output;
use std::time::{Duration, Instant};

const TABLE: &str = "drilled";
const BUCKET: &str = "drill-dr";
const REPLICA: &str = "s3://drill-dr/replica";
const OLD_COPY: &str = "s3://drill-dr/old";

fn drill(job: &[String], extra: &[&str]) -> Output {
    crate::ferry().arg("drill").args(job).args(extra).output()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(o)))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Waits until the DR replica holds a checkpoint past source time `ts`.
async fn replica_past(store: &CheckpointStore, job: &JobId, ts: u64) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(latest) = store.latest_complete(job).await {
            if let Some(c) = latest.checkpoint {
                if c.state.last_end_timestamp.is_some_and(|t| t.raw() > ts) {
                    return;
                }
            }
        }
        assert!(Instant::now() < deadline, "the replica never got past {ts}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_reports_a_healthy_setup_and_a_stale_dr_store() {
    let clusters = tokio::task::block_in_place(crate::standby_clusters);
    let (src, dst) = (&clusters.0, &clusters.1);
    let source = KuduClient::new(&src.master_addrs()).expect("client");
    let b = TableBuilder::new(TABLE, ferry_fixtures::all_types_schema())
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(3);
    source.create_table(&b).await.expect("create");
    let s3 = S3Server::start(&format!("drill-{}", std::process::id())).expect("s3s-fs");
    s3.create_bucket(BUCKET).expect("bucket");
    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk").to_string_lossy().to_string();
    let s3_keys = [
        format!("-Ds3.endpoint={}", s3.endpoint()),
        format!("-Ds3.access-key={}", s3.access_key()),
        format!("-Ds3.secret-key={}", s3.secret_key()),
    ];
    let mut job: Vec<String> = [
        "--job.sourceMasterAddresses",
        &src.master_addrs_joined(),
        "--job.sinkMasterAddresses",
        &dst.master_addrs_joined(),
        "--job.tableName",
        TABLE,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        &chk,
        "--job.stateReplicas",
        REPLICA,
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
    ]
    .iter()
    .chain(&crate::ha_kit::LEASE_KEYS)
    .map(|s| s.to_string())
    .collect();
    job.extend(s3_keys.iter().cloned());

    let mut active = tokio::task::block_in_place(|| {
        crate::ferry()
            .arg("run")
            .args(&job)
            .log_level("info")
            .free_ports()
            .start()
    });
    let writer = Workload::start(source.clone(), TABLE, 100, 51);
    let t0 = source.server_clock().await.expect("clock").raw();
    let ha_job = ferry_engine::config::ha_job_id(&format!("ferry-replication-{TABLE}"));
    let replica = CheckpointStore::open(
        &StorageLocation::parse(REPLICA).expect("loc"),
        NonZeroUsize::MIN,
        ferry_fixtures::s3::resolver(&s3),
    )
    .expect("replica");
    replica_past(&replica, &ha_job, t0).await;
    // One more window: the sink position, written when a window opens,
    // then names a completed one (the snapshot's may be the first).
    let t1 = source.server_clock().await.expect("clock").raw();
    replica_past(&replica, &ha_job, t1).await;

    // Healthy: every section, plausible values, exit 0.
    let report_file = dir.path().join("drill.json");
    let out = tokio::task::block_in_place(|| {
        drill(
            &job,
            &["--json", "--report", &report_file.to_string_lossy()],
        )
    });
    assert_eq!(code(&out), 0, "{}", output_text(&out));
    let r = json(&out);
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_file).expect("report"))
            .expect("json");
    assert_eq!(written, r, "--report holds the printed report");
    assert_eq!(r["healthy"], true, "{r:#}");
    assert_eq!(r["stale"], false);
    assert_eq!(r["failed"], serde_json::json!([]));
    let rpo = &r["rpo"]["tables"][0];
    assert_eq!(rpo["table"], TABLE);
    let rpo_s = f(&rpo["rpoSeconds"]);
    assert!((0.0..15.0).contains(&rpo_s), "RPO {rpo_s} s: {r:#}");
    let v = &r["verify"];
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(v["tables"][0]["equal"], true, "{v:#}");
    assert!(f(&v["tables"][0]["rowsCompared"]) > 0.0, "{v:#}");
    assert!(v["target"].as_u64().is_some_and(|t| t > t0), "{v:#}");
    let d = &r["drStore"];
    assert_eq!(d["searched"], serde_json::json!([REPLICA]));
    let newest = &d["newest"];
    assert!(
        newest["path"].as_str().unwrap().starts_with(REPLICA),
        "{d:#}"
    );
    assert_eq!(newest["jobId"], ha_job.to_string());
    assert!(f(&newest["ageMs"]) < 15_000.0, "{d:#}");
    assert!(f(&d["behindPrimaryMs"]) < 15_000.0, "{d:#}");
    let checks: Vec<&str> = d["restore"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(checks, ["load", "tables", "positions", "history"], "{d:#}");
    assert!(
        d["restore"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true),
        "{d:#}"
    );
    let s = &r["standby"];
    assert_eq!(s["ha"], true);
    assert_eq!(s["renewed"], true, "{s:#}");
    assert_eq!(s["holder"]["generation"], 1, "{s:#}");
    assert!(
        s["location"]
            .as_str()
            .unwrap()
            .starts_with("kudu:ferry_ha/"),
        "{s:#}"
    );
    assert!(s["standby"].as_str().unwrap().starts_with("not observable"));
    let steps = &r["failoverSteps"];
    let names: Vec<&str> = steps["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "leaseWait",
            "leaseRead",
            "stateSearch",
            "stateLoad",
            "connect",
            "positions"
        ]
    );
    assert!(
        steps["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["ms"].is_u64()),
        "{steps:#}"
    );
    assert_eq!(steps["steps"][0]["ms"], 2000);
    let rto = f(&steps["estimatedRtoMs"]);
    assert!((2000.0..30_000.0).contains(&rto), "{steps:#}");

    // Stale: a DR bucket holding only a copy made once, now older than
    // --max-dr-lag (and than the primary's newest by more than it).
    let mirror = crate::ferry()
        .args(["state", "mirror"])
        .args(&s3_keys)
        .args([&chk, OLD_COPY])
        .output();
    assert_eq!(code(&mirror), 0, "{}", output_text(&mirror));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let out = tokio::task::block_in_place(|| {
        drill(
            &job,
            &["--from", OLD_COPY, "--max-dr-lag", "2 s", "--no-verify"],
        )
    });
    assert_eq!(code(&out), 1, "{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("[STALE] DR state store {OLD_COPY}")),
        "{text}"
    );
    assert!(
        text.contains("DR STORE STALE: its newest state is"),
        "{text}"
    );
    assert!(text.contains("over --max-dr-lag 2000 ms"), "{text}");
    assert!(text.contains("NOT HEALTHY: failed: drStore"), "{text}");
    assert!(text.contains("[SKIPPED] Verify"), "{text}");

    // Unreachable: the store named, exit 1.
    let out = tokio::task::block_in_place(|| {
        drill(
            &job,
            &["--from", "s3://no-such-bucket/x", "--no-verify", "--json"],
        )
    });
    assert_eq!(code(&out), 1, "{}", output_text(&out));
    let r = json(&out);
    let error = r["drStore"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("s3://no-such-bucket/x"), "{r:#}");
    assert_eq!(r["stale"], false, "unreachable is not reported as stale");

    let stats = writer.stop().await;
    assert!(stats.applied > 100, "changes flowed: {stats:?}");
    active.assert_running("through the drills");
    active.kill9();
    let _ = s3.destroy();
}

#[test]
fn drill_bad_input_is_a_usage_error() {
    let job = [
        "--job.sourceMasterAddresses",
        "127.0.0.1:1",
        "--job.sinkMasterAddresses",
        "127.0.0.1:2",
        "--job.tableName",
        "t",
        "--job.checkpointsDirectory",
        "/tmp/ferry-drill-chk",
    ]
    .map(String::from);
    for (extra, named) in [
        (&["--from", "/tmp/dr", "--bogus"][..], "bogus"),
        (
            &["--from", "/tmp/dr", "--job.bogusKey", "1"][..],
            "job.bogusKey",
        ),
        (&[][..], "--from"),
        (&["--from", "/tmp/dr", "--max-dr-lag", "soon"][..], "soon"),
        (
            &["--from", "/tmp/dr", "--verify-tables", "other"][..],
            "other",
        ),
    ] {
        let out = drill(&job, extra);
        assert_eq!(code(&out), 2, "{extra:?}: {}", output_text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(named), "{extra:?}: {err}");
    }
}
