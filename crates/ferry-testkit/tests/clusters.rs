//! The test kit against real Kudu daemons: concurrent clusters, daemon
//! faults, master elections, and nothing left behind.

use ferry_testkit::process::processes_under;
use ferry_testkit::{DaemonKind, MiniCluster};
use std::time::Duration;

fn tserver_count_via_cli(c: &MiniCluster) -> usize {
    let out = c
        .kudu_ok(&["tserver", "list", &c.master_addrs_joined(), "-format=json"])
        .expect("kudu tserver list");
    let rows: Vec<serde_json::Value> = serde_json::from_str(out.trim()).expect("json");
    rows.len()
}

#[test]
fn two_clusters_start_concurrently_and_leave_nothing_behind() {
    let handles: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(|| {
                MiniCluster::builder()
                    .masters(1)
                    .tservers(3)
                    .start()
                    .expect("cluster starts")
            })
        })
        .collect();
    let clusters: Vec<MiniCluster> = handles
        .into_iter()
        .map(|h| h.join().expect("start thread"))
        .collect();
    assert_ne!(clusters[0].master_addrs(), clusters[1].master_addrs());
    for c in &clusters {
        assert_eq!(tserver_count_via_cli(c), 3, "cluster {}", c.name());
        assert_eq!(c.pids().len(), 4, "1 master + 3 tservers running");
    }
    let roots: Vec<_> = clusters.iter().map(|c| c.root().to_path_buf()).collect();
    drop(clusters);
    for root in roots {
        assert!(
            processes_under(&root).is_empty(),
            "daemons left under {}",
            root.display()
        );
        assert!(!root.exists(), "{} not removed", root.display());
    }
}

#[test]
fn killed_tserver_is_reported_dead_then_live_after_restart() {
    let mut c = MiniCluster::builder()
        .tservers(3)
        .start()
        .expect("cluster starts");
    let victim = c
        .daemon(DaemonKind::TabletServer, 1)
        .expect("ts-1")
        .rpc_addr
        .clone();
    c.kill(DaemonKind::TabletServer, 1).expect("kill ts-1");
    c.wait_for(Duration::from_secs(30), "ts-1 reported dead", |c| {
        Ok(c.tserver_status()?
            .iter()
            .any(|t| t.rpc_addr == victim && !t.live))
    })
    .expect("master reports the killed tserver dead");
    c.start(DaemonKind::TabletServer, 1).expect("restart ts-1");
    c.wait_for(Duration::from_secs(30), "ts-1 reported live", |c| {
        Ok(c.tserver_status()?
            .iter()
            .any(|t| t.rpc_addr == victim && t.live))
    })
    .expect("master reports the restarted tserver live");
    assert_eq!(
        tserver_count_via_cli(&c),
        3,
        "same tserver came back, not a new one"
    );
}

#[test]
fn killing_the_leader_master_elects_a_new_one() {
    let mut c = MiniCluster::builder()
        .masters(3)
        .tservers(1)
        .start()
        .expect("cluster starts");
    let old = c.leader_master().expect("a leader");
    c.kill(DaemonKind::Master, old).expect("kill leader");
    c.wait_for(Duration::from_secs(60), "a new leader master", |c| {
        Ok(c.leader_master().is_ok_and(|new| new != old))
    })
    .expect("new leader elected");
    let roles = c.master_status().expect("master list");
    assert_eq!(
        roles.iter().filter(|m| m.role == "LEADER").count(),
        1,
        "{roles:?}"
    );
}

#[test]
fn paused_tserver_resumes() {
    let mut c = MiniCluster::builder()
        .tservers(1)
        .start()
        .expect("cluster starts");
    c.pause(DaemonKind::TabletServer, 0).expect("pause");
    c.wait_for(
        Duration::from_secs(30),
        "paused tserver stops heartbeating",
        |c| Ok(c.tserver_status()?.iter().all(|t| !t.live)),
    )
    .expect("heartbeats stop while paused");
    c.resume(DaemonKind::TabletServer, 0).expect("resume");
    c.wait_for(Duration::from_secs(30), "resumed tserver heartbeats", |c| {
        Ok(c.tserver_status()?.iter().all(|t| t.live))
    })
    .expect("heartbeats resume");
}

#[test]
fn bad_requests_are_clear_errors() {
    let err = MiniCluster::builder()
        .masters(2)
        .start()
        .expect_err("2 masters");
    assert!(err.to_string().contains("1 or 3 masters"), "{err}");
    let err = MiniCluster::attach("no-such-cluster-xyz").expect_err("unknown");
    assert!(
        err.to_string()
            .contains("no cluster named 'no-such-cluster-xyz'"),
        "{err}"
    );
}

#[test]
fn a_failing_test_keeps_the_daemon_logs() {
    let root = std::thread::spawn(|| {
        let c = MiniCluster::builder()
            .tservers(1)
            .start()
            .expect("cluster starts");
        let root = c.root().to_path_buf();
        // Smuggle the root out through the panic payload.
        std::panic::panic_any(root);
    })
    .join()
    .expect_err("the thread panicked")
    .downcast::<std::path::PathBuf>()
    .map(|b| *b)
    .expect("root in the payload");
    assert!(
        processes_under(&root).is_empty(),
        "daemons are still killed"
    );
    let log = root.join("ts-0").join("logs");
    let has_logs = std::fs::read_dir(&log)
        .map(|d| d.count() > 0)
        .unwrap_or(false);
    assert!(has_logs, "logs kept under {}", log.display());
    std::fs::remove_dir_all(&root).expect("clean up");
}
