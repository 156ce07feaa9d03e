//! [`ZooKeeperLease`] against a real ZooKeeper server (ferry-testkit):
//! the engine's lease-backend conformance suite, the znode layout, an
//! unreachable quorum, the `creator` ACL without authentication, and a
//! session the server no longer knows (its data lost while it was down).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_engine::config::ZooKeeperConfig;
use ferry_engine::lease::{conformance, LeaseBackend, LeaseError};
use ferry_testkit::ZooKeeperServer;
use ferry_zk::ZooKeeperLease;

mod common;
use common::{job, record};

fn settings(quorum: &str, extra: &[(&str, &str)]) -> ZooKeeperConfig {
    let timeouts = common::Timeouts {
        connect: "1 s",
        session: "2 s",
    };
    common::settings(quorum, timeouts, extra)
}

/// The lease-backend contract, on one server: every handle is its own
/// ZooKeeper session (as separate processes would be); then the znodes
/// are where docs/dr.md says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conforms_and_keeps_records_where_the_docs_say() {
    let zk = ZooKeeperServer::start(&format!("zk-conf-{}", std::process::id())).expect("server");
    let quorum = zk.connect_string();
    let handle = || -> Arc<dyn LeaseBackend> {
        Arc::new(ZooKeeperLease::new(settings(&quorum, &[]), "orders", &job()).expect("lease"))
    };
    let backend = handle();
    assert_eq!(
        backend.location(),
        format!("zookeeper://{quorum}/flink/orders/{}/lease", job())
    );
    conformance::run(backend, (0..4).map(|_| handle()).collect()).await;

    let raw = zookeeper_client::Client::connect(&quorum)
        .await
        .expect("raw client");
    let dir = format!("/flink/orders/{}/lease", job());
    let mut children = raw.list_children(&dir).await.expect("children");
    children.sort();
    // forget_before(5) dropped the record just below 5 (one per renewal).
    assert!(children.contains(&format!("seq-{:020}", 6)), "{children:?}");
    assert!(
        !children.contains(&format!("seq-{:020}", 4)),
        "{children:?}"
    );
    let (data, _) = raw
        .get_data(&format!("{dir}/seq-{:020}", 6))
        .await
        .expect("record");
    let text = String::from_utf8(data).expect("utf-8");
    assert!(text.contains("\"generation\":1"), "{text}");
    let (position, _) = raw.get_data(&dir).await.expect("position");
    assert_eq!(position, b"6");
}

#[tokio::test]
async fn an_unreachable_quorum_fails_naming_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let quorum = format!("127.0.0.1:{port}");
    let lease = ZooKeeperLease::new(settings(&quorum, &[]), "orders", &job()).expect("lease");
    let started = Instant::now();
    let err = lease.newest().await.expect_err("nothing listens");
    let text = chain(&err);
    assert!(
        text.starts_with(&format!(
            "cannot list the lease at 'zookeeper://{quorum}/flink/orders/"
        )),
        "{text}"
    );
    assert!(text.contains("(2 attempts)"), "{text}");
    assert!(matches!(err, LeaseError::Service { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creator_acl_needs_an_authenticated_session() {
    let zk = ZooKeeperServer::start(&format!("zk-acl-{}", std::process::id())).expect("server");
    let config = settings(
        &zk.connect_string(),
        &[("high-availability.zookeeper.client.acl", "creator")],
    );
    let lease = ZooKeeperLease::new(config, "orders", &job()).expect("lease");
    let err = lease.write_next(&record(1, 1)).await.expect_err("refused");
    let text = chain(&err);
    assert!(text.contains("client.acl to open"), "{text}");
    assert_eq!(lease.newest().await.expect("read"), None, "nothing written");
}

/// The server restarts without the data it had (so it no longer knows
/// the client's session): the client's next calls start a new session
/// instead of failing for ever, and the lease is created again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_session_is_replaced() {
    let mut zk =
        ZooKeeperServer::start(&format!("zk-session-{}", std::process::id())).expect("server");
    let lease =
        ZooKeeperLease::new(settings(&zk.connect_string(), &[]), "orders", &job()).expect("lease");
    assert_eq!(lease.write_next(&record(1, 1)).await.expect("write"), None);

    tokio::task::block_in_place(|| zk.stop()).expect("stop");
    let err = lease.newest().await.expect_err("the server is down");
    assert!(
        chain(&err).contains("cannot list the lease"),
        "{}",
        chain(&err)
    );
    std::fs::remove_dir_all(zk.info().root.join("data/version-2")).expect("wipe");
    tokio::task::block_in_place(|| zk.restart()).expect("restart");

    let deadline = Instant::now() + Duration::from_secs(20);
    let written = loop {
        match lease.write_next(&record(1, 2)).await {
            Ok(outcome) => break outcome,
            Err(e) => {
                assert!(Instant::now() < deadline, "never recovered: {}", chain(&e));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert_eq!(written, None, "the lease is empty on the new server");
    let newest = lease.newest().await.expect("read").expect("record");
    assert_eq!((newest.seq, newest.generation), (1, 2));
}

/// The error and its causes, one per line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
