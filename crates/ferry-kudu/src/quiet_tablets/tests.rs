//! The decision's pure parts: which sweep is a baseline, which cycles are
//! kept, and how far the sweeps prove a tablet unchanged. The whole proof
//! runs against real tablet servers in `crates/ferry/tests/jobs/quiet_tablets.rs`
//! and `crates/ferry-kudu/tests/kudu/quiet_writes.rs`.

use super::probe::{thin, web_address, ServerCycle};
use super::*;
use crate::tserver_metrics::{ReplicaReading, ServerSweep};
use kudu_client::{Replica, ReplicaRole, TabletServerInfo};
use std::collections::VecDeque;
use std::time::Instant;

fn process(uuid: &str, seqno: i64) -> Process {
    Process {
        uuid: uuid.to_owned(),
        seqno,
    }
}

fn counters(n: u64) -> Counters {
    Counters([n, 0, 0, 0, n * 100])
}

/// A server's share of a cycle: `tablets` as (id, counters, in flight).
fn server(p: &Process, before: u64, after: u64, tablets: &[(&str, u64, u64)]) -> ServerCycle {
    let replicas = tablets
        .iter()
        .map(|&(id, c, inflight)| {
            let r = ReplicaReading {
                table_id: Some("table".to_owned()),
                inflight: Some(inflight),
                counters: Some(counters(c)),
            };
            (id.to_owned(), r)
        })
        .collect();
    ServerCycle {
        process: p.clone(),
        http_addr: format!("{}:8050", p.uuid),
        endpoint: Endpoint::Json,
        sweep: Some(ServerSweep {
            clock_before: before,
            replicas,
            clock_after: after,
        }),
    }
}

fn cycle(servers: Vec<ServerCycle>) -> Arc<Cycle> {
    Arc::new(Cycle {
        for_end: 0,
        taken: Instant::now(),
        servers: servers
            .into_iter()
            .map(|s| (s.process.uuid.clone(), s))
            .collect(),
    })
}

#[test]
fn a_baseline_is_the_newest_sweep_of_the_same_process_before_the_start() {
    let a = process("a", 1);
    let history: Vec<Arc<Cycle>> = (1..=3)
        .map(|i| cycle(vec![server(&a, 100 * i - 10, 100 * i, &[("t", i, 0)])]))
        .collect();
    assert_eq!(baseline(&history, &a, "t", 250), Some(counters(2)));
    // Its clock must be strictly below the start: a write stamped exactly
    // at the start may be in a sweep whose clock equals it.
    assert_eq!(baseline(&history, &a, "t", 200), Some(counters(1)));
    assert!(baseline(&history, &a, "t", 100).is_none());
    // Another process (a restart, or another server) has no baseline.
    assert!(baseline(&history, &process("a", 2), "t", 1_000).is_none());
    assert!(baseline(&history, &process("b", 1), "t", 1_000).is_none());
    // Nor a tablet the server did not report.
    assert!(baseline(&history, &a, "u", 1_000).is_none());
}

#[test]
fn only_the_newest_cycles_are_kept_when_they_come_fast() {
    let a = process("a", 1);
    let mut cycles: VecDeque<Arc<Cycle>> = (1..=10)
        .map(|i| cycle(vec![server(&a, 100 * i - 10, 100 * i, &[("t", i, 0)])]))
        .collect();
    thin(&mut cycles);
    assert_eq!(cycles.len(), 4, "taken within 500 ms of each other");
    let history: Vec<Arc<Cycle>> = cycles.into_iter().collect();
    assert!(
        baseline(&history, &a, "t", 500).is_none(),
        "old ones were dropped"
    );
    assert_eq!(baseline(&history, &a, "t", 10_000), Some(counters(10)));
}

fn tablet(id: &str, leader: Option<&str>, replicas: &[&str]) -> RemoteTablet {
    let replicas = replicas
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
    RemoteTablet::new(id, Vec::new(), Vec::new(), replicas)
}

#[test]
fn a_barrier_needs_a_baseline_on_the_leader_process_and_unmoved_counters() {
    let (a0, a1, b7) = (process("a", 0), process("a", 1), process("b", 7));
    // Baselines before the window [100, 200): t1, t2 (on a), t5 (on a,
    // led by b now); t4's only reading is from a's previous process.
    let history = vec![
        cycle(vec![server(&a0, 10, 20, &[("t4", 5, 0)])]),
        cycle(vec![
            server(&a1, 80, 90, &[("t1", 5, 0), ("t2", 5, 0), ("t5", 5, 0)]),
            server(&b7, 80, 90, &[]),
        ]),
        // Too new to be a baseline of t3.
        cycle(vec![server(&a1, 140, 150, &[("t3", 5, 0)])]),
    ];
    let now = cycle(vec![
        server(
            &a1,
            210,
            220,
            &[("t1", 5, 0), ("t2", 6, 0), ("t3", 5, 0), ("t4", 5, 0)],
        ),
        server(&b7, 210, 220, &[("t5", 5, 0)]),
    ]);
    let prove_one = |t: &RemoteTablet| prove(&now, &history, t, 100, 200, None);
    assert_eq!(
        prove_one(&tablet("t1", Some("a"), &["a"])),
        Proof::Barrier {
            leader: a1.clone(),
            baseline: counters(5)
        }
    );
    // Moved in the window: scanned, no barrier.
    assert_eq!(prove_one(&tablet("t2", Some("a"), &["a"])), Proof::None);
    assert_eq!(prove_one(&tablet("t3", Some("a"), &["a"])), Proof::None);
    assert_eq!(prove_one(&tablet("t4", Some("a"), &["a"])), Proof::None);
    // Its leader is b now, which has no baseline.
    assert_eq!(
        prove_one(&tablet("t5", Some("b"), &["a", "b"])),
        Proof::None
    );
}

#[test]
fn a_settled_tablet_is_proven_by_every_replica_s_sweep_alone() {
    let (a, b) = (process("a", 1), process("b", 1));
    let history = vec![cycle(vec![
        server(&a, 80, 90, &[("t", 5, 0)]),
        server(&b, 80, 90, &[("t", 5, 0)]),
    ])];
    let t = tablet("t", Some("a"), &["a", "b"]);
    let settled = (a.clone(), counters(5));
    let barrier = Proof::Barrier {
        leader: a.clone(),
        baseline: counters(5),
    };
    let with = |a_now: ServerCycle, b_now: ServerCycle, settled: Option<&(Process, Counters)>| {
        prove(&cycle(vec![a_now, b_now]), &history, &t, 100, 200, settled)
    };
    let quiet = |p: &Process| server(p, 210, 220, &[("t", 5, 0)]);
    assert_eq!(with(quiet(&a), quiet(&b), Some(&settled)), Proof::Proven);
    // Not settled since its counters last moved: a barrier first.
    assert_eq!(with(quiet(&a), quiet(&b), None), barrier);
    let stale = (a.clone(), counters(4));
    assert_eq!(with(quiet(&a), quiet(&b), Some(&stale)), barrier);
    // An op in flight on any replica (the one that stamped a write may be
    // the follower the locations name, after a leader change).
    assert_eq!(
        with(
            quiet(&a),
            server(&b, 210, 220, &[("t", 5, 1)]),
            Some(&settled)
        ),
        barrier
    );
    // A follower's counters moved (it led a write).
    assert_eq!(
        with(
            quiet(&a),
            server(&b, 210, 220, &[("t", 6, 0)]),
            Some(&settled)
        ),
        barrier
    );
    // A server's clock not yet at the window's end: a write below the end
    // may still be stamped there.
    assert_eq!(
        with(
            server(&a, 199, 220, &[("t", 5, 0)]),
            quiet(&b),
            Some(&settled)
        ),
        barrier
    );
    // A server not read: nothing is proven by the sweeps.
    let mut unread = quiet(&b);
    unread.sweep = None;
    assert_eq!(with(quiet(&a), unread, Some(&settled)), barrier);
    // The leader moved in the window: scanned.
    assert_eq!(
        with(
            server(&a, 210, 220, &[("t", 6, 0)]),
            quiet(&b),
            Some(&settled)
        ),
        Proof::None
    );
}

#[test]
fn servers_behind_https_are_not_read() {
    let mut s = TabletServerInfo::new("a");
    s.http_addresses = vec!["a:8050".to_owned()];
    assert_eq!(web_address(&s).as_deref(), Some("a:8050"));
    s.https_enabled = true;
    assert!(web_address(&s).is_none());
    assert!(web_address(&TabletServerInfo::new("b")).is_none());
}
