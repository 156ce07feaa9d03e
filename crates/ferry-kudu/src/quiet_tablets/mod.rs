//! Quiet tablets: the tablets a diff window may leave out because they are
//! proven to have no change in it.
//!
//! A diff scan costs the source tablet server even when the tablet has no
//! change: a walk of every row ordinal and an LLVM compile that never hits
//! the code cache (docs/operations.md, "What a diff window costs the
//! source"). Kudu has no "changed since T?" call; what it has, per replica,
//! are write counters and a gauge of ops in flight on the web server (the
//! JSON `/metrics`; since 1.18 `/metrics_prometheus` too) and the server's
//! hybrid clock. The [`TabletProbe`] of the job's source cluster sweeps
//! every tablet server once per cycle (clock, ops in flight, counters,
//! clock: [`crate::tserver_metrics::sweep`]) for every table at once.
//!
//! A tablet T is unchanged in a window `[s, e)` when, on **every** server
//! hosting a replica of T (so on the leader that stamped any write of T):
//!
//! 1. **a baseline**: a sweep of the same server process (uuid and
//!    instance number) whose `clock_after` is below `s`. A write is
//!    counted after its timestamp was assigned from that leader's clock,
//!    so no write at or after `s` is in it;
//! 2. **a sweep for the window** whose `clock_before` is at or past `e`,
//!    with T's ops in flight at 0 and T's counters equal to the
//!    baseline's. A write stamped below `e` by that server was stamped
//!    before `clock_before` was read; an op is in flight from before it is
//!    stamped until after its counters moved; so such a write is either
//!    in flight or counted, and neither was seen;
//! 3. **settled**: since T's counters last moved, one **safe-time
//!    barrier** on a replica L ([`kudu_client::KuduClient::wait_applied`],
//!    a scan that opens at snapshot `e` and reads nothing: it returns once
//!    L applied every write below `e`) was followed by a reading with the
//!    same counters as a baseline. This covers what no op in flight shows:
//!    a transaction committed with a timestamp below that of its last op
//!    on T. The barrier proves its window on its own (the proof before
//!    issue 32), and is needed only once after each change.
//!
//! So the window's end holds for T as for the tablets scanned: no
//! per-tablet watermark, and checkpoints, sink positions and
//! `lastEndTimestamp` keep their meaning. Anything missing — no baseline
//! yet, a failed request, a server not read, a restarted server, a counter
//! that moved, an op in flight, a web server that needs credentials —
//! means the tablet is scanned. `reader.quietTabletMaxSkips` bounds the
//! windows in a row a tablet is skipped, as a safety net.
//!
//! - this file: [`QuietTablets`], one table's decision;
//! - `probe`: [`TabletProbe`], the cycles and the tablet locations shared
//!   by a job's tables;
//! - [`crate::tserver_metrics`]: the readings of one tablet server.

mod probe;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kudu_client::{HybridTime, KuduClient, KuduTable, RemoteTablet};

use ferry_engine::checkpoint::WindowState;

use crate::tserver_metrics::{self as web, Counters, Endpoint, EndpointChoice};
pub use probe::TabletProbe;
use probe::{Cycle, Process, CALL_TIMEOUT};

/// Barriers in flight at once.
const CONCURRENT_BARRIERS: usize = 16;

/// What one table knows of one of its tablets.
#[derive(Debug, Default)]
struct TabletState {
    /// Windows in a row this tablet was skipped.
    skipped_in_row: u32,
    /// The replica process and counters a barrier proof held on; the
    /// tablet is settled while that replica shows the same counters.
    settled: Option<(Process, Counters)>,
}

/// One table's quiet tablets: the skip decision for each diff window.
#[derive(Debug)]
pub struct QuietTablets {
    max_skips: u32,
    probe: Arc<TabletProbe>,
    tablets: Mutex<HashMap<String, TabletState>>,
}

/// What [`QuietTablets::select`] found for one window.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Tablets proven unchanged in the window: no scan needed.
    pub skip: HashSet<String>,
    /// The servers read for the window (web address) and the endpoint
    /// each reading came from.
    pub read_from: HashMap<String, Endpoint>,
    /// Every tablet of the table is in `skip`, and the window's sweep read
    /// every server, so the table has no tablet the locations lack: the
    /// window copies nothing.
    pub every_tablet: bool,
}

/// How far the sweeps prove one tablet unchanged.
#[derive(Debug, PartialEq, Eq)]
enum Proof {
    /// Unchanged in the window, and settled.
    Proven,
    /// Not proven by the sweeps (or not settled); a barrier on `leader`
    /// may prove it against `baseline`.
    Barrier { leader: Process, baseline: Counters },
    /// Scanned.
    None,
}

/// A barrier candidate: tablet id, its replica on the server, baseline.
type Candidate = (String, kudu_client::Replica, Counters);

impl QuietTablets {
    /// Skips at most `max_skips` windows in a row per tablet (0: never);
    /// reads the JSON `/metrics` of every server, through its own probe.
    pub fn new(max_skips: u32) -> Self {
        QuietTablets {
            max_skips,
            probe: Arc::new(TabletProbe::new(EndpointChoice::default())),
            tablets: Mutex::new(HashMap::new()),
        }
    }

    /// Reads each server's counters from the endpoint `choice` picks for
    /// its release, through its own probe.
    pub fn with_endpoints(mut self, choice: EndpointChoice) -> Self {
        self.probe = Arc::new(TabletProbe::new(choice));
        self
    }

    /// Reads the servers through `probe`, shared with the job's other
    /// tables on the same cluster.
    pub fn with_probe(mut self, probe: Arc<TabletProbe>) -> Self {
        self.probe = probe;
        self
    }

    /// The tablets of `table` that the diff `window` may leave out, among
    /// those `owned` keeps (by partition key start: a shard's tablets; the
    /// others cost no barrier). Never fails: whatever cannot be read or
    /// proven is scanned.
    pub async fn select(
        &self,
        client: &KuduClient,
        table: &KuduTable,
        window: WindowState,
        owned: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Selection {
        // Readings are in the Kudu source's own clock: hybrid times.
        let Some(start) = window.start_timestamp.map(|t| t.raw()) else {
            return Selection::default();
        };
        if self.max_skips == 0 {
            return Selection::default();
        }
        let end = window.end_timestamp.raw();
        let cycle = self.probe.cycle_for(client, end).await;
        let tablets = match self.probe.tablets(client, table, cycle.as_deref()).await {
            Ok(t) => t,
            Err(e) => {
                tracing::debug!(table = %table.name(), error = %e, "cannot locate the tablets: every tablet is scanned");
                return Selection::default();
            }
        };
        let Some(cycle) = cycle else {
            return Selection::default();
        };
        // A shard's part of a split table: `every_tablet` below then stays
        // false (the cycle knows the whole table), so such a window is
        // planned with the masters as before.
        let tablets: Vec<_> = tablets
            .iter()
            .filter(|t| owned(&t.partition_key_start))
            .cloned()
            .collect();
        let history = self.probe.history().await;
        let Some((mut skip, barriers)) = self.triage(&cycle, &history, &tablets, start, end) else {
            return Selection::default();
        };
        let proven = futures::future::join_all(
            barriers
                .into_iter()
                .filter_map(|(uuid, c)| Some((cycle.servers.get(&uuid)?, c)))
                .map(|(server, c)| barrier_proof(client, table, server, c, end)),
        )
        .await;
        let mut settled_now = Vec::new();
        for (process, ids) in proven.into_iter().flatten() {
            for (id, counters) in ids {
                skip.insert(id.clone());
                settled_now.push((id, (process.clone(), counters)));
            }
        }
        self.record(&tablets, &skip, settled_now);
        let ids: HashSet<&str> = tablets.iter().map(|t| t.tablet_id.as_str()).collect();
        let every_tablet =
            cycle.complete() && skip.len() == ids.len() && cycle.tablets_of(table.id()) == ids;
        let read_from = read_from(&cycle, &tablets);
        tracing::debug!(table = %table.name(), servers = ?read_from, skipped = skip.len(), "tablet write counters read");
        Selection {
            skip,
            read_from,
            every_tablet,
        }
    }

    /// Splits `tablets` into those the sweeps alone prove unchanged in
    /// `[start, end)` and, per leader's server, those one barrier can
    /// settle. `None` when the tablets' records cannot be read.
    fn triage(
        &self,
        cycle: &Cycle,
        history: &[Arc<Cycle>],
        tablets: &[Arc<RemoteTablet>],
        start: u64,
        end: u64,
    ) -> Option<(HashSet<String>, Barriers)> {
        let mut skip = HashSet::new();
        let mut barriers = Barriers::new();
        let states = self.tablets.lock().ok()?;
        for t in tablets {
            let state = states.get(&t.tablet_id);
            if state.is_some_and(|s| s.skipped_in_row >= self.max_skips) {
                continue;
            }
            let settled = state.and_then(|s| s.settled.as_ref());
            match prove(cycle, history, t, start, end, settled) {
                Proof::Proven => {
                    skip.insert(t.tablet_id.clone());
                }
                Proof::Barrier { leader, baseline } => {
                    if let Some(r) = t.replicas.iter().find(|r| r.ts_uuid == leader.uuid) {
                        let c = (t.tablet_id.clone(), r.clone(), baseline);
                        barriers.entry(leader.uuid).or_default().push(c);
                    }
                }
                Proof::None => {}
            }
        }
        Some((skip, barriers))
    }

    /// The tablet server of each of `table`'s tablets' leaders (of any
    /// replica when no leader is known), by tablet id, from the locations
    /// the probe keeps; empty when they cannot be read.
    pub async fn leaders(&self, client: &KuduClient, table: &KuduTable) -> HashMap<String, String> {
        let Ok(tablets) = self.probe.located(client, table).await else {
            return HashMap::new();
        };
        tablets
            .iter()
            .filter_map(|t| {
                let leader = t
                    .replicas
                    .iter()
                    .find(|r| r.role == kudu_client::ReplicaRole::Leader)
                    .or(t.replicas.first())?;
                Some((t.tablet_id.clone(), leader.ts_uuid.clone()))
            })
            .collect()
    }

    /// Forgets `table`'s tablet locations (a scan found them stale).
    pub async fn forget_locations(&self, table_id: &str) {
        self.probe.forget(table_id).await;
    }

    /// Counts the skips in a row, keeps the new settlements and forgets
    /// tablets gone (dropped ranges).
    fn record(
        &self,
        tablets: &[Arc<RemoteTablet>],
        skip: &HashSet<String>,
        settled: Vec<(String, (Process, Counters))>,
    ) {
        let Ok(mut states) = self.tablets.lock() else {
            return;
        };
        let ids: HashSet<&str> = tablets.iter().map(|t| t.tablet_id.as_str()).collect();
        states.retain(|id, _| ids.contains(id.as_str()));
        for id in ids {
            let s = states.entry(id.to_owned()).or_default();
            s.skipped_in_row = if skip.contains(id) {
                s.skipped_in_row + 1
            } else {
                0
            };
        }
        for (id, at) in settled {
            if let Some(s) = states.get_mut(&id) {
                s.settled = Some(at);
            }
        }
    }
}

/// The servers of `cycle` hosting a tablet of `tablets` and read, with
/// the endpoint each was read from.
fn read_from(cycle: &Cycle, tablets: &[Arc<RemoteTablet>]) -> HashMap<String, Endpoint> {
    let hosts: HashSet<&str> = tablets
        .iter()
        .flat_map(|t| t.replicas.iter().map(|r| r.ts_uuid.as_str()))
        .collect();
    cycle
        .servers
        .iter()
        .filter(|(uuid, s)| hosts.contains(uuid.as_str()) && s.sweep.is_some())
        .map(|(_, s)| (s.http_addr.clone(), s.endpoint))
        .collect()
}

/// The counters of `tablet` in the newest sweep of `process` (on its
/// server) whose `clock_after` is below `start`.
fn baseline(
    history: &[Arc<Cycle>],
    process: &Process,
    tablet: &str,
    start: u64,
) -> Option<Counters> {
    history.iter().rev().find_map(|c| {
        let s = c.servers.get(&process.uuid)?;
        let sweep = s.sweep.as_ref()?;
        if &s.process != process || sweep.clock_after >= start {
            return None;
        }
        sweep.replicas.get(tablet)?.counters
    })
}

/// The replica a barrier runs on: the leader the locations name, else the
/// first replica.
fn barrier_replica(t: &RemoteTablet) -> Option<&kudu_client::Replica> {
    t.leader().or_else(|| t.replicas.first())
}

/// Per server (by uuid), the tablets one barrier there may settle.
type Barriers = HashMap<String, Vec<Candidate>>;

/// How far `cycle` (the window `[start, end)`'s sweep) and the sweeps
/// before it (`history`) prove tablet `t` unchanged; `settled`: where its
/// last barrier proof held.
fn prove(
    cycle: &Cycle,
    history: &[Arc<Cycle>],
    t: &RemoteTablet,
    start: u64,
    end: u64,
    settled: Option<&(Process, Counters)>,
) -> Proof {
    let Some(l) = barrier_replica(t) else {
        return Proof::None;
    };
    let Some(leader) = cycle.servers.get(&l.ts_uuid) else {
        return Proof::None;
    };
    let Some(base) = baseline(history, &leader.process, &t.tablet_id, start) else {
        return Proof::None;
    };
    let now = leader
        .sweep
        .as_ref()
        .and_then(|s| s.replicas.get(&t.tablet_id))
        .and_then(|r| r.counters);
    if now.is_some_and(|c| c != base) {
        // Moved in the window: scanned, no barrier needed to see it.
        return Proof::None;
    }
    let barrier = Proof::Barrier {
        leader: leader.process.clone(),
        baseline: base,
    };
    if settled != Some(&(leader.process.clone(), base)) || !cycle.complete() {
        return barrier;
    }
    // Every server hosting a replica, by the locations or by the sweep.
    let mut hosts: HashSet<&str> = t.replicas.iter().map(|r| r.ts_uuid.as_str()).collect();
    for (uuid, s) in &cycle.servers {
        if s.sweep
            .as_ref()
            .is_some_and(|w| w.replicas.contains_key(&t.tablet_id))
        {
            hosts.insert(uuid);
        }
    }
    let unchanged_on = |uuid: &str| -> bool {
        let Some(s) = cycle.servers.get(uuid) else {
            return false;
        };
        let Some(sweep) = &s.sweep else { return false };
        let Some(r) = sweep.replicas.get(&t.tablet_id) else {
            return false;
        };
        let Some(c) = r.counters else { return false };
        sweep.clock_before >= end
            && r.inflight == Some(0)
            && baseline(history, &s.process, &t.tablet_id, start) == Some(c)
    };
    if hosts.iter().all(|h| unchanged_on(h)) {
        Proof::Proven
    } else {
        barrier
    }
}

/// Barriers at `end` for `candidates` on `server`, then one reading of
/// their counters: the process and the candidates whose barrier held with
/// counters still equal to their baseline (with those counters).
async fn barrier_proof(
    client: &KuduClient,
    table: &KuduTable,
    server: &probe::ServerCycle,
    candidates: Vec<Candidate>,
    end: u64,
) -> Option<(Process, Vec<(String, Counters)>)> {
    let end = HybridTime::from_raw(end);
    let held: Vec<(String, Counters)> = futures::stream::iter(candidates)
        .map(|(id, replica, base)| async move {
            match client
                .wait_applied(table, &id, &replica, end, CALL_TIMEOUT)
                .await
            {
                Ok(_) => Some((id, base)),
                Err(e) => {
                    tracing::debug!(tablet = %id, error = %e, "safe-time barrier failed: the tablet is scanned");
                    None
                }
            }
        })
        .buffer_unordered(CONCURRENT_BARRIERS)
        .filter_map(futures::future::ready)
        .collect()
        .await;
    if held.is_empty() || server.http_addr.is_empty() {
        return None;
    }
    let ids: Vec<&str> = held.iter().map(|(id, _)| id.as_str()).collect();
    let reading = match web::read(&server.http_addr, server.endpoint, &ids, CALL_TIMEOUT).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(server = %server.http_addr, error = %e, "cannot read the counters after the barriers: the tablets are scanned");
            return None;
        }
    };
    let proven = held
        .into_iter()
        .filter(|(id, base)| reading.counters.get(id) == Some(base))
        .collect();
    Some((server.process.clone(), proven))
}

#[cfg(test)]
mod tests;
