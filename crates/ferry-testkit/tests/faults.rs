//! Faults of the test kit against the real kernel and real Kudu daemons: a
//! network namespace that reaches the root namespace's loopback addresses
//! and can be partitioned and healed, a tmpfs that turns read-only, and a
//! whole cluster hung, stopped and started again. Needs root.

use ferry_testkit::fault::{NetNs, SmallFs};
use ferry_testkit::{DaemonKind, MiniCluster};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::process::Output;
use std::sync::mpsc;
use std::time::Duration;

/// From inside `ns`, connects to `ip:port` (bash's /dev/tcp, 3 s limit) and
/// reads what the server sends.
fn connect_from(ns: &NetNs, ip: Ipv4Addr, port: u16) -> Output {
    ns.command("timeout")
        .args([
            "3",
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/{ip}/{port}; cat <&3"),
        ])
        .output()
        .expect("run bash in the namespace")
}

/// A listener on a root-namespace loopback address outside 127.0.0.1 (as
/// clusters use), answering "hello" and reporting each peer address.
fn listener() -> (Ipv4Addr, u16, mpsc::Receiver<std::net::SocketAddr>) {
    let ip = Ipv4Addr::new(127, 31, (std::process::id() % 250) as u8, 11);
    let l = TcpListener::bind((ip, 0)).expect("bind");
    let port = l.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = tx.send(conn.peer_addr().expect("peer"));
            let _ = conn.write_all(b"hello");
        }
    });
    (ip, port, rx)
}

#[test]
fn namespace_reaches_root_loopback_until_partitioned_and_again_after_heal() {
    let (ip, port, accepted) = listener();
    let ns = NetNs::create().expect("namespace");
    let other = NetNs::create().expect("a second namespace alongside");
    assert_ne!(ns.name(), other.name());
    assert_ne!(ns.addr_inside(), other.addr_inside());

    let out = connect_from(&ns, ip, port);
    assert!(
        out.status.success(),
        "connect before the partition: {out:?}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello");
    let peer = accepted
        .recv_timeout(Duration::from_secs(5))
        .expect("accepted");
    assert_eq!(peer.ip(), std::net::IpAddr::V4(ns.addr_inside()));

    ns.partition(&format!(
        "{}.0/24",
        ip.to_string().rsplit_once('.').expect("ip").0
    ))
    .expect("partition");
    let out = connect_from(&ns, ip, port);
    assert_eq!(out.status.code(), Some(124), "connect timed out: {out:?}");
    assert!(
        accepted.try_recv().is_err(),
        "nothing reached the listener during the partition"
    );
    // The partition is the namespace's own: the other one still connects.
    let out = connect_from(&other, ip, port);
    assert!(out.status.success(), "other namespace: {out:?}");
    accepted
        .recv_timeout(Duration::from_secs(5))
        .expect("other accepted");

    ns.heal().expect("heal");
    let out = connect_from(&ns, ip, port);
    assert!(out.status.success(), "connect after heal: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello");

    let name = ns.name();
    drop(ns);
    assert!(
        !NetNs::list_names().contains(&name),
        "{name} removed on drop"
    );
}

#[test]
fn namespace_is_removed_when_the_test_panics() {
    let name = std::sync::Mutex::new(String::new());
    let r = std::panic::catch_unwind(|| {
        let ns = NetNs::create().expect("namespace");
        *name.lock().expect("lock") = ns.name();
        panic!("test failure while the namespace exists");
    });
    assert!(r.is_err());
    let name = name.into_inner().expect("lock");
    assert!(!name.is_empty());
    assert!(!NetNs::list_names().contains(&name), "{name} left behind");
}

#[test]
fn partition_rejects_a_malformed_cidr() {
    let ns = NetNs::create().expect("namespace");
    let err = ns.partition("127.1.2/24").expect_err("bad cidr");
    assert!(err.to_string().contains("127.1.2/24"), "{err}");
}

#[test]
fn small_fs_turns_read_only_and_writable_again() {
    let fs = SmallFs::mount(1 << 20).expect("mount");
    let file = fs.path().join("a");
    std::fs::write(&file, b"before").expect("write while writable");

    fs.make_unwritable().expect("remount ro");
    let err = std::fs::write(fs.path().join("b"), b"x").expect_err("write while read-only");
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    let mut text = String::new();
    std::fs::File::open(&file)
        .expect("open")
        .read_to_string(&mut text)
        .expect("read while read-only");
    assert_eq!(text, "before");

    fs.make_writable().expect("remount rw");
    std::fs::write(fs.path().join("b"), b"after").expect("write after");

    // Its size is the limit.
    let err = std::fs::write(fs.path().join("big"), vec![0u8; 2 << 20]).expect_err("full");
    assert_eq!(err.kind(), ErrorKind::StorageFull, "{err}");

    let path = fs.path().to_path_buf();
    drop(fs);
    assert!(!path.exists(), "{} removed on drop", path.display());
}

fn live_tservers(c: &MiniCluster) -> usize {
    c.tserver_status()
        .map(|ts| ts.iter().filter(|t| t.live).count())
        .unwrap_or(0)
}

#[test]
fn whole_cluster_hangs_resumes_stops_and_starts_at_the_same_addresses() {
    let mut c = MiniCluster::builder().tservers(3).start().expect("cluster");
    let subnet = c.subnet();
    let prefix = subnet.strip_suffix("0/24").expect("a /24");
    assert!(
        c.master_addrs()
            .iter()
            .chain(c.tserver_addrs().iter())
            .all(|a| a.starts_with(prefix)),
        "{subnet} holds every daemon"
    );

    c.pause_all(DaemonKind::TabletServer).expect("pause");
    c.wait_for(
        Duration::from_secs(30),
        "tservers missing heartbeats",
        |c| Ok(live_tservers(c) == 0),
    )
    .expect("hung tablet servers stop heartbeating");
    c.resume_all(DaemonKind::TabletServer).expect("resume");
    c.wait_for(Duration::from_secs(30), "tservers live", |c| {
        Ok(live_tservers(c) == 3)
    })
    .expect("resumed tablet servers heartbeat again");

    let before = (c.master_addrs(), c.tserver_addrs());
    c.stop_all().expect("stop all");
    assert!(c.pids().is_empty(), "nothing runs after stop_all");
    assert!(c.tserver_status().is_err(), "no master answers");

    c.start_all().expect("start all");
    assert_eq!((c.master_addrs(), c.tserver_addrs()), before);
    let out = c
        .kudu_ok(&["tserver", "list", &c.master_addrs_joined(), "-format=json"])
        .expect("kudu tserver list");
    let rows: Vec<serde_json::Value> = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(
        rows.len(),
        3,
        "the same 3 tablet servers, not new ones: {out}"
    );
    assert_eq!(live_tservers(&c), 3);
}
