//! Quiet tablets: the tablets a diff window may leave out because they are
//! proven to have no change in it.
//!
//! A diff scan costs the source tablet server even when the tablet has no
//! change: a walk of every row ordinal and an LLVM compile that never hits
//! the code cache (docs/operations.md, "What a diff window costs the
//! source"). Kudu has no "changed since T?" call; what it has, per replica,
//! are write counters on the web server (the JSON `/metrics`; since 1.18
//! `/metrics_prometheus` too) and the server's hybrid clock. They prove a
//! tablet T unchanged in a window `[s, e)` on replica L when all three
//! hold:
//!
//! 1. **a baseline**: a reading of L's counters whose clock, read after
//!    the counters, is below `s`. A write is counted once applied, and by
//!    then L's clock is at or past its timestamp (leaders assign timestamps
//!    from it; followers move it forward with every write they receive),
//!    so no write at or after `s` is in the baseline;
//! 2. **a barrier**: L has applied every write below `e`
//!    ([`kudu_client::KuduClient::wait_applied`], a scan that opens at
//!    snapshot `e` and reads nothing);
//! 3. **a reading after the barrier** with the same counters, by the same
//!    server process (uuid and instance number).
//!
//! Every write of `[s, e)` was applied on L after the baseline and before
//! the barrier returned; none was. So the window's end holds for T as for
//! the tablets scanned: no per-tablet watermark, and checkpoints, sink
//! positions and `lastEndTimestamp` keep their meaning. Anything missing —
//! no baseline yet, a failed request, another leader, a restarted server,
//! a counter that moved, a web server that needs credentials — means the
//! tablet is scanned. `reader.quietTabletMaxSkips` bounds the windows in a
//! row a tablet is skipped, as a safety net.
//!
//! - this file: [`QuietTablets`], the readings per tablet and the decision;
//! - [`crate::tserver_metrics`]: the reading of one tablet server, from
//!   the endpoint [`EndpointChoice`] picks for its release.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kudu_client::{HybridTime, KuduClient, KuduTable, RemoteTablet, TabletServerInfo};

use ferry_engine::checkpoint::WindowState;

use crate::tserver_metrics::{self as web, Counters, Endpoint, EndpointChoice};

/// A tablet server process: its uuid and the number that changes when it
/// restarts (its counters start over then).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Process {
    uuid: String,
    seqno: i64,
}

/// One reading of one tablet's counters.
#[derive(Debug, Clone)]
struct Reading {
    process: Process,
    counters: Counters,
    /// The server's hybrid clock, read after the counters.
    clock: u64,
}

/// Readings kept per tablet: enough to find one from before the window
/// start (taken one or two windows earlier).
const READINGS_KEPT: usize = 4;

/// Timeout of one barrier or web request.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Barriers in flight at once.
const CONCURRENT_BARRIERS: usize = 16;

#[derive(Debug, Default)]
struct TabletHistory {
    readings: VecDeque<Reading>,
    /// Windows in a row this tablet was skipped.
    skipped_in_row: u32,
}

impl TabletHistory {
    /// The newest reading on `process` taken before any write at or after
    /// `start` could have been applied there.
    fn baseline(&self, process: &Process, start: u64) -> Option<&Reading> {
        self.readings
            .iter()
            .rev()
            .find(|r| &r.process == process && r.clock < start)
    }

    fn record(&mut self, reading: Reading) {
        if self.readings.len() == READINGS_KEPT {
            self.readings.pop_front();
        }
        self.readings.push_back(reading);
    }
}

/// The readings of one table's tablets and the skip decision for each diff
/// window.
#[derive(Debug)]
pub struct QuietTablets {
    max_skips: u32,
    endpoints: EndpointChoice,
    tablets: Mutex<HashMap<String, TabletHistory>>,
    /// Web servers already reported unreadable (logged once each).
    unreadable: Mutex<HashSet<String>>,
}

/// What [`QuietTablets::select`] found for one window.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Tablets proven unchanged in the window: no scan needed.
    pub skip: HashSet<String>,
    /// The servers read for the window (web address) and the endpoint
    /// each reading came from.
    pub read_from: HashMap<String, Endpoint>,
}

/// One tablet server's share of a window: its process, web address and the
/// table's tablets it leads.
struct ServerWork<'a> {
    process: Process,
    http_addr: String,
    endpoint: Endpoint,
    tablets: Vec<&'a RemoteTablet>,
    candidates: Vec<&'a RemoteTablet>,
}

impl QuietTablets {
    /// Skips at most `max_skips` windows in a row per tablet (0: never);
    /// reads the JSON `/metrics` of every server.
    pub fn new(max_skips: u32) -> Self {
        QuietTablets {
            max_skips,
            endpoints: EndpointChoice::default(),
            tablets: Mutex::new(HashMap::new()),
            unreadable: Mutex::new(HashSet::new()),
        }
    }

    /// Reads each server from the endpoint `choice` picks for its release.
    pub fn with_endpoints(mut self, choice: EndpointChoice) -> Self {
        self.endpoints = choice;
        self
    }

    /// The tablets of `table` that the diff `window` may leave out, among
    /// those `owned` keeps (by partition key start: a shard's tablets; the
    /// others cost no barrier). Takes a reading of every such tablet (for
    /// later windows) and proves the candidates unchanged. Never fails:
    /// whatever cannot be read or proven is scanned.
    pub async fn select(
        &self,
        client: &KuduClient,
        table: &KuduTable,
        window: WindowState,
        owned: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Selection {
        // Readings are kept in the Kudu source's own clock: hybrid times.
        let Some(start) = window.start_timestamp.map(|t| t.raw()) else {
            return Selection::default();
        };
        if self.max_skips == 0 {
            return Selection::default();
        }
        let deadline = Instant::now() + CALL_TIMEOUT;
        let (tablets, servers) = match futures::try_join!(
            client.tablets_in_range(table, &[], &[], deadline),
            client.list_tablet_servers()
        ) {
            Ok(found) => found,
            Err(e) => {
                tracing::debug!(table = %table.name(), error = %e, "cannot locate the tablets' leaders: every tablet is scanned");
                return Selection::default();
            }
        };
        let tablets: Vec<_> = tablets
            .into_iter()
            .filter(|t| owned(&t.partition_key_start))
            .collect();
        let work = self.plan_work(&tablets, &servers, start);
        let end = HybridTime::from_raw(window.end_timestamp.raw());
        let outcomes =
            futures::future::join_all(work.iter().map(|w| self.read_server(client, table, w, end)))
                .await;
        let mut skip = HashSet::new();
        let mut read_from = HashMap::new();
        let Ok(mut history) = self.tablets.lock() else {
            return Selection::default();
        };
        for (w, (proven, reading)) in work.iter().zip(outcomes) {
            if reading.is_some() {
                read_from.insert(w.http_addr.clone(), w.endpoint);
            }
            for t in &w.candidates {
                let h = history.entry(t.tablet_id.clone()).or_default();
                let unchanged = proven.contains(t.tablet_id.as_str())
                    && match (reading.as_ref(), h.baseline(&w.process, start)) {
                        (Some(r), Some(b)) => r.counters.get(&t.tablet_id) == Some(&b.counters),
                        _ => false,
                    };
                if unchanged {
                    skip.insert(t.tablet_id.clone());
                }
            }
            if let Some(r) = reading {
                for (id, counters) in r.counters {
                    history.entry(id).or_default().record(Reading {
                        process: w.process.clone(),
                        counters,
                        clock: r.clock,
                    });
                }
            }
        }
        let ids: HashSet<&str> = tablets.iter().map(|t| t.tablet_id.as_str()).collect();
        // Tablets gone (dropped ranges) leave with their history.
        history.retain(|id, _| ids.contains(id.as_str()));
        for (id, h) in history.iter_mut() {
            h.skipped_in_row = if skip.contains(id) {
                h.skipped_in_row + 1
            } else {
                0
            };
        }
        tracing::debug!(table = %table.name(), servers = ?read_from, skipped = skip.len(), "tablet write counters read");
        Selection { skip, read_from }
    }

    /// Groups `tablets` by leader and picks the candidates: a baseline for
    /// `start` on the leader's process and skips left.
    fn plan_work<'a>(
        &self,
        tablets: &'a [std::sync::Arc<RemoteTablet>],
        servers: &[TabletServerInfo],
        start: u64,
    ) -> Vec<ServerWork<'a>> {
        let history = self.tablets.lock().ok();
        let mut by_uuid: HashMap<&str, ServerWork<'a>> = HashMap::new();
        for t in tablets {
            let Some(leader) = t.leader() else { continue };
            let Some(server) = servers.iter().find(|s| s.uuid == leader.ts_uuid) else {
                continue;
            };
            // HTTPS (or none) is not read here: those tablets are scanned.
            let Some(http_addr) = server
                .http_addresses
                .first()
                .filter(|_| !server.https_enabled)
            else {
                continue;
            };
            let w = by_uuid.entry(&server.uuid).or_insert_with(|| ServerWork {
                process: Process {
                    uuid: server.uuid.clone(),
                    seqno: server.instance_seqno,
                },
                http_addr: http_addr.clone(),
                endpoint: self.endpoints.for_server(&server.software_version),
                tablets: Vec::new(),
                candidates: Vec::new(),
            });
            w.tablets.push(t);
            let candidate = history
                .as_ref()
                .and_then(|h| h.get(&t.tablet_id))
                .is_some_and(|h| {
                    h.skipped_in_row < self.max_skips && h.baseline(&w.process, start).is_some()
                });
            if candidate {
                w.candidates.push(t);
            }
        }
        by_uuid.into_values().collect()
    }

    /// Barriers at `end` for the server's candidates, then one reading of
    /// all its tablets: (candidates whose barrier held, the reading).
    async fn read_server(
        &self,
        client: &KuduClient,
        table: &KuduTable,
        w: &ServerWork<'_>,
        end: HybridTime,
    ) -> (HashSet<String>, Option<web::ServerReading>) {
        // Owned arguments: a closure over borrowed tablets is not `Send`
        // for every lifetime, which the job's future must be.
        let barriers: Vec<(String, kudu_client::Replica)> = w
            .candidates
            .iter()
            .filter_map(|t| Some((t.tablet_id.clone(), t.leader()?.clone())))
            .collect();
        let proven: HashSet<String> = futures::stream::iter(barriers)
            .map(|(id, leader)| async move {
                match client
                    .wait_applied(table, &id, &leader, end, CALL_TIMEOUT)
                    .await
                {
                    Ok(_) => Some(id),
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
        let ids: Vec<&str> = w.tablets.iter().map(|t| t.tablet_id.as_str()).collect();
        match web::read(&w.http_addr, w.endpoint, &ids, CALL_TIMEOUT).await {
            Ok(reading) => {
                if let Ok(mut u) = self.unreadable.lock() {
                    u.remove(&w.http_addr);
                }
                (proven, Some(reading))
            }
            Err(e) => {
                let first = self
                    .unreadable
                    .lock()
                    .map(|mut u| u.insert(w.http_addr.clone()))
                    .unwrap_or(false);
                if first {
                    tracing::warn!(server = %w.http_addr, error = %e, "cannot read the tablet server's write counters: its tablets are scanned every window");
                }
                (HashSet::new(), None)
            }
        }
    }
}

#[cfg(test)]
mod tests;
