//! The decision's pure parts: which reading is a baseline, and which
//! tablets are candidates. The whole proof runs against real tablet servers
//! in `crates/ferry/tests/quiet_tablets.rs`.

use super::*;
use kudu_client::{Replica, ReplicaRole};
use std::sync::Arc;

fn process(uuid: &str, seqno: i64) -> Process {
    Process {
        uuid: uuid.to_owned(),
        seqno,
    }
}

fn reading(p: &Process, counters: u64, clock: u64) -> Reading {
    Reading {
        process: p.clone(),
        counters: Counters([counters, 0, 0, 0, counters * 100]),
        clock,
    }
}

#[test]
fn a_baseline_is_the_newest_reading_of_the_same_process_before_the_start() {
    let a = process("a", 1);
    let mut h = TabletHistory::default();
    h.record(reading(&a, 1, 100));
    h.record(reading(&a, 2, 200));
    h.record(reading(&a, 3, 300));
    assert_eq!(h.baseline(&a, 250).map(|r| r.clock), Some(200));
    // Its clock must be strictly below the start: a write stamped exactly
    // at the start may be in a reading whose clock equals it.
    assert_eq!(h.baseline(&a, 200).map(|r| r.clock), Some(100));
    assert!(h.baseline(&a, 100).is_none());
    // Another process (a restart, or another server) has no baseline.
    assert!(h.baseline(&process("a", 2), 1_000).is_none());
    assert!(h.baseline(&process("b", 1), 1_000).is_none());
}

#[test]
fn only_the_newest_readings_are_kept() {
    let a = process("a", 1);
    let mut h = TabletHistory::default();
    for i in 0..10 {
        h.record(reading(&a, i, 100 * (i + 1)));
    }
    assert_eq!(h.readings.len(), READINGS_KEPT);
    assert!(h.baseline(&a, 500).is_none(), "old readings were dropped");
    assert_eq!(h.baseline(&a, 10_000).map(|r| r.clock), Some(1_000));
}

fn tablet(id: &str, leader: Option<&str>) -> Arc<RemoteTablet> {
    let replicas = ["a", "b"]
        .iter()
        .map(|u| {
            let role = if Some(*u) == leader {
                ReplicaRole::Leader
            } else {
                ReplicaRole::Follower
            };
            Replica::new(*u, format!("{u}:7050"), role)
        })
        .collect();
    Arc::new(RemoteTablet::new(id, Vec::new(), Vec::new(), replicas))
}

fn server(uuid: &str, seqno: i64, https: bool) -> TabletServerInfo {
    let mut s = TabletServerInfo::new(uuid);
    s.instance_seqno = seqno;
    s.rpc_addresses = vec![format!("{uuid}:7050")];
    s.http_addresses = vec![format!("{uuid}:8050")];
    s.https_enabled = https;
    s.millis_since_heartbeat = Some(10);
    s.software_version = "kudu 1.17.1 (rev x)".to_owned();
    s
}

fn ids(tablets: &[&RemoteTablet]) -> Vec<String> {
    let mut v: Vec<String> = tablets.iter().map(|t| t.tablet_id.clone()).collect();
    v.sort();
    v
}

#[test]
fn candidates_need_a_baseline_on_the_leader_process_and_skips_left() {
    let q = QuietTablets::new(2);
    let a1 = process("a", 1);
    {
        let mut h = q.tablets.lock().expect("lock");
        // t1: baseline on a's process: a candidate.
        h.entry("t1".into())
            .or_default()
            .record(reading(&a1, 5, 90));
        // t2: its only reading is too new for a window starting at 100.
        h.entry("t2".into())
            .or_default()
            .record(reading(&a1, 5, 150));
        // t3: skipped twice in a row already (the bound is 2).
        let t3 = h.entry("t3".into()).or_default();
        t3.record(reading(&a1, 5, 90));
        t3.skipped_in_row = 2;
        // t4: its baseline is from before a's restart.
        h.entry("t4".into())
            .or_default()
            .record(reading(&process("a", 0), 5, 90));
        // t5 (led by b): baseline on a, the former leader.
        h.entry("t5".into())
            .or_default()
            .record(reading(&a1, 5, 90));
    }
    let tablets = vec![
        tablet("t1", Some("a")),
        tablet("t2", Some("a")),
        tablet("t3", Some("a")),
        tablet("t4", Some("a")),
        tablet("t5", Some("b")),
        tablet("t6", None),
    ];
    let servers = [server("a", 1, false), server("b", 7, false)];
    let mut work = q.plan_work(&tablets, &servers, 100);
    work.sort_by(|x, y| x.process.uuid.cmp(&y.process.uuid));
    assert_eq!(work.len(), 2);
    assert_eq!(work[0].http_addr, "a:8050");
    assert_eq!(ids(&work[0].tablets), ["t1", "t2", "t3", "t4"]);
    assert_eq!(ids(&work[0].candidates), ["t1"]);
    assert_eq!(ids(&work[1].tablets), ["t5"]);
    assert!(work[1].candidates.is_empty());
    // A leaderless tablet is read nowhere (and so scanned).
    assert!(work
        .iter()
        .all(|w| w.tablets.iter().all(|t| t.tablet_id != "t6")));
}

#[test]
fn servers_behind_https_are_not_read() {
    let q = QuietTablets::new(5);
    let tablets = vec![tablet("t1", Some("a"))];
    assert!(q
        .plan_work(&tablets, &[server("a", 1, true)], 100)
        .is_empty());
}
