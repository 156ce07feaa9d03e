//! `ferry failover --dry-run` (issue 11, item 4): in a store holding valid
//! checkpoints and savepoints next to a truncated `_metadata`, a directory
//! without `_metadata` and a `_metadata` with a flipped byte — each of them
//! *newer* by its name and by the window it claims — the real binary
//! picks the newest valid state by recorded window end, names each damaged
//! one in a warning, and never picks one of them. Exit codes: 0 found,
//! 3 nothing valid, 2 usage. No Kudu needed: a dry run does not connect.

use ferry_engine::checkpoint::{encode_metadata, JobId, JobState, SnapshotKind, WindowState};
use std::path::Path;
use std::process::Output;

const JOB: &str = "00112233445566778899aabbccddeeff";

fn state(kind: SnapshotKind, id: u64, last_end: u64, window_end: Option<u64>) -> JobState {
    let job: JobId = JOB.parse().expect("id");
    let mut s = JobState::new(job, kind, id, "orders", vec![], vec![]);
    s.last_end_timestamp = Some(ferry_engine::SourceTime::from_raw(last_end));
    s.window = window_end.map(|end| WindowState {
        start_timestamp: Some(ferry_engine::SourceTime::from_raw(last_end)),
        end_timestamp: ferry_engine::SourceTime::from_raw(end),
    });
    s
}

fn write(dir: &Path, rel: &str, bytes: &[u8]) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}

fn meta(s: &JobState) -> Vec<u8> {
    encode_metadata(s).expect("encode")
}

/// The keys of a job on clusters nobody listens at, its states in `store`.
fn job_keys(store: &Path) -> Vec<String> {
    [
        "--job.sourceMasterAddresses",
        "127.0.0.1:1",
        "--job.sinkMasterAddresses",
        "127.0.0.1:2",
        "--job.tableName",
        "orders",
        "--job.checkpointsDirectory",
        &store.to_string_lossy(),
    ]
    .map(String::from)
    .to_vec()
}

fn failover(store: &Path, extra: &[&str]) -> Output {
    crate::ferry()
        .args(["failover", "--dry-run"])
        .args(extra)
        .args(job_keys(store))
        .output()
}

#[test]
fn dry_run_picks_the_newest_valid_state_and_never_a_damaged_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let dr = dir.path();
    // Valid: an old checkpoint, the newest valid savepoint (window end 700),
    // and a checkpoint with a high number but old windows.
    write(
        dr,
        &format!("{JOB}/chk-4/_metadata"),
        &meta(&state(SnapshotKind::Checkpoint, 4, 300, Some(400))),
    );
    write(
        dr,
        "savepoints/savepoint-001122-aaaaaaaaaaaa/_metadata",
        &meta(&state(SnapshotKind::Savepoint, 6, 600, Some(700))),
    );
    write(
        dr,
        &format!("{JOB}/chk-9/_metadata"),
        &meta(&state(SnapshotKind::Checkpoint, 9, 100, None)),
    );
    // Damaged, all claiming newer windows.
    let mut truncated = meta(&state(SnapshotKind::Checkpoint, 10, 900, None));
    truncated.truncate(truncated.len() - 7);
    write(dr, &format!("{JOB}/chk-10/_metadata"), &truncated);
    write(
        dr,
        &format!("{JOB}/chk-11/part-0"),
        b"state written before _metadata",
    );
    let mut flipped = meta(&state(SnapshotKind::Savepoint, 12, 950, None));
    let at = flipped.len() / 2;
    flipped[at] ^= 0x10;
    write(dr, "savepoint-001122-bbbbbbbbbbbb/_metadata", &flipped);

    let out = failover(dr, &["--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let found = &report["found"];
    assert!(
        found["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("savepoints/savepoint-001122-aaaaaaaaaaaa")),
        "{report}"
    );
    assert_eq!(found["kind"], "savepoint");
    assert_eq!(found["windowEnd"], 700);
    assert_eq!(found["lastEndTimestamp"], 600);
    assert_eq!(found["jobId"], JOB);
    assert_eq!(report["valid"], 3);
    let skipped = report["skipped"].as_array().expect("skipped");
    assert_eq!(skipped.len(), 3, "{report}");
    for (name, why) in [
        ("chk-10", "truncated"),
        ("chk-11", "no _metadata"),
        ("savepoint-001122-bbbbbbbbbbbb", "checksum"),
    ] {
        assert!(
            skipped
                .iter()
                .any(|s| s["path"].as_str().is_some_and(|p| p.ends_with(name))
                    && s["reason"].as_str().is_some_and(|r| r.contains(why))),
            "{name} skipped ({why}): {report}"
        );
        assert!(stderr.contains(name), "a warning names {name}:\n{stderr}");
    }

    // The human report says the same.
    let out = failover(dr, &["--from", &dr.to_string_lossy()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout.contains("Newest: ") && stdout.contains("savepoint-001122-aaaaaaaaaaaa"),
        "{stdout}"
    );
    assert!(stdout.contains("3 valid state(s), 3 skipped"), "{stdout}");
}

#[test]
fn nothing_valid_is_exit_code_3_and_bad_flags_exit_code_2() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut truncated = meta(&state(SnapshotKind::Checkpoint, 1, 100, None));
    truncated.truncate(10);
    write(dir.path(), &format!("{JOB}/chk-1/_metadata"), &truncated);
    let out = failover(dir.path(), &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("No complete, valid"));

    let out = failover(dir.path(), &["--from", "s4://nope/x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--from"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = failover(dir.path(), &["--job-id", "xyz"]);
    assert_eq!(out.status.code(), Some(2));
    // A job run by workers is not one job to take over.
    for verb in ["failover", "standby"] {
        let out = crate::ferry()
            .arg(verb)
            .args(job_keys(dir.path()))
            .args(["--job.shards", "3", "--high-availability.type", "lease"])
            .output();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb}: {err}");
        for part in ["job.shards = 3", "workers", "--job.shard K"] {
            assert!(err.contains(part), "{verb} says {part:?}: {err}");
        }
    }
}
