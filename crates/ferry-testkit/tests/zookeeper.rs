//! The ZooKeeper test server: a real ZooKeeper 3.9 (standalone) on
//! loopback that can be paused, stopped and started again on the same port
//! with the same data, and that leaves nothing behind when its handle is
//! dropped.

use ferry_testkit::process::processes_under;
use ferry_testkit::ZooKeeperServer;
use std::time::{Duration, Instant};

#[test]
fn pause_stop_and_restart_keep_port_and_data_and_drop_cleans_up() {
    let name = format!("zk-kit-{}", std::process::id());
    let mut zk = ZooKeeperServer::start(&name).expect("start ZooKeeper");
    let root = zk.info().root.clone();
    let quorum = zk.connect_string();
    assert!(zk.serving(), "{quorum} serves after start");
    assert!(quorum.starts_with("127.0.0.1:"), "{quorum}");
    assert_eq!(
        ZooKeeperServer::attach(&name)
            .expect("attach")
            .connect_string(),
        quorum
    );

    // Paused: the socket is there, nothing answers.
    zk.pause().expect("pause");
    let asked = Instant::now();
    assert!(!zk.serving(), "a paused server must not answer");
    assert!(asked.elapsed() < Duration::from_secs(5));
    zk.resume().expect("resume");
    assert!(zk.serving(), "it answers again after SIGCONT");

    let snapshots = root.join("data/version-2");
    assert!(snapshots.is_dir(), "its data dir is under its root");
    zk.stop().expect("stop");
    assert!(!zk.is_running() && !zk.serving());
    assert!(snapshots.is_dir(), "stop keeps the data");
    zk.restart().expect("restart");
    assert!(zk.serving());
    assert_eq!(zk.connect_string(), quorum, "same port after a restart");

    // Even a paused server is gone after drop.
    zk.pause().expect("pause");
    drop(zk);
    assert!(processes_under(&root).is_empty(), "left behind");
    assert!(!root.exists(), "folder removed");
}
