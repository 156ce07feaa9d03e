//! A tiny end-to-end run of the `snapshot` scenario (2 000 rows, one
//! round) against real clusters: proves the harness works, not how fast
//! anything is. About 20 s.

use std::path::PathBuf;
use std::process::Command;

/// The `ferry` binary of the same build (the workspace tests build it for
/// the ferry crate's own integration tests).
fn ferry_binary() -> PathBuf {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_ferry-bench"));
    let ferry = bench.with_file_name("ferry");
    assert!(
        ferry.exists(),
        "{} is missing: build it first (`cargo build -p ferry`), or run the workspace tests (`cargo test --workspace`)",
        ferry.display()
    );
    ferry
}

#[test]
fn snapshot_scenario_runs_and_reports_every_figure() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let results = tmp.path().join("results");
    let out = Command::new(env!("CARGO_BIN_EXE_ferry-bench"))
        .arg("--ferry")
        .arg(ferry_binary())
        .arg("--results")
        .arg(&results)
        .arg("--work")
        .arg(tmp.path().join("work"))
        .args(["snapshot", "--rows", "2000", "--repeat", "1"])
        .output()
        .expect("run ferry-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ferry-bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("snapshot.json")).expect("snapshot.json"),
    )
    .expect("valid JSON");
    let r = &json["results"];
    for method in ["ferry", "table_copy", "loadgen"] {
        let v = r["rows_per_s"][method].as_f64().unwrap_or(0.0);
        assert!(v > 0.0, "rows/s of {method}: {}", r["rows_per_s"]);
    }
    for ratio in ["ferry_over_table_copy", "ferry_over_loadgen"] {
        let v = r["ratios"][ratio].as_f64().unwrap_or(0.0);
        assert!(v > 0.0, "{ratio}: {}", r["ratios"]);
    }
    assert_eq!(
        r["ferry"]["median"]["identical_to_source"], true,
        "ferry's copy differs"
    );
    assert_eq!(
        r["table_copy"]["median"]["identical_to_source"], true,
        "table copy differs"
    );
    assert!(json["machine"]["nproc"].as_u64().unwrap_or(0) >= 1);
    assert!(
        json["commands"].as_array().is_some_and(|c| c.len() >= 5),
        "commands: {}",
        json["commands"]
    );
    assert!(stdout.contains("ratios"), "{stdout}");
}

/// A tiny soak: two faults (ferry killed, sink hung) 12 s apart, each
/// followed by a quiet-point comparison, then the final one. About 1 min.
#[test]
fn soak_scenario_records_each_fault_and_comparison() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let results = tmp.path().join("results");
    let out = Command::new(env!("CARGO_BIN_EXE_ferry-bench"))
        .arg("--ferry")
        .arg(ferry_binary())
        .arg("--results")
        .arg(&results)
        .arg("--work")
        .arg(tmp.path().join("work"))
        .args([
            "soak",
            "--minutes",
            "0.6",
            "--fault-every",
            "12",
            "--rate",
            "50",
            "--seed",
            "3",
            "--faults",
            "ferry-kill,sink-hang",
        ])
        .output()
        .expect("run ferry-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ferry-bench soak failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("soak.json")).expect("soak.json"),
    )
    .expect("valid JSON");
    let r = &json["results"];
    let faults = r["faults"].as_array().expect("faults");
    let mut kinds: Vec<&str> = faults.iter().filter_map(|f| f["kind"].as_str()).collect();
    kinds.sort();
    assert_eq!(kinds, ["ferry-kill", "sink-hang"], "{}", r["faults"]);
    for f in faults {
        assert!(f["recover_s"].as_f64().is_some(), "not recovered: {f}");
        assert!(f["duration_s"].as_f64().unwrap_or(0.0) > 0.0, "{f}");
        assert_eq!(f["comparison"]["equal"], true, "{f}");
    }
    assert_eq!(
        r["final_comparison"]["equal"], true,
        "{}",
        r["final_comparison"]
    );
    assert_eq!(r["summary"]["verdict"], "pass", "{}", r["summary"]);
    assert!(
        r["workload"]["applied"].as_u64().unwrap_or(0) > 0,
        "{}",
        r["workload"]
    );
    assert!(stdout.contains("soak: summary"), "{stdout}");
}
