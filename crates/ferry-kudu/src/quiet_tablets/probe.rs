//! The tablet probe: what quiet tablets read of one source cluster, shared
//! by every table of a job. A *cycle* lists the tablet servers (one master
//! RPC) and sweeps each of them once ([`crate::tserver_metrics::sweep`]:
//! every replica's counters and ops in flight between two clock readings);
//! every table whose window ends at or before the cycle's end uses it, so
//! with the job's windows opening together (consistent cuts, the default)
//! one cycle serves every table of a round. Earlier cycles are kept as
//! baselines. The probe also keeps each table's tablet locations, asked of
//! the master again only when a cycle shows the table's tablets changed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kudu_client::{KuduClient, KuduTable, RemoteTablet};

use crate::tserver_metrics::{self as web, Endpoint, EndpointChoice, ServerSweep};

/// A tablet server process: its uuid and the number that changes when it
/// restarts (its counters start over then).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Process {
    pub uuid: String,
    pub seqno: i64,
}

/// One server in a cycle.
#[derive(Debug)]
pub(crate) struct ServerCycle {
    pub process: Process,
    pub http_addr: String,
    pub endpoint: Endpoint,
    /// `None`: the server could not be read.
    pub sweep: Option<ServerSweep>,
}

/// One cycle: every listed tablet server, swept once.
#[derive(Debug)]
pub(crate) struct Cycle {
    /// The window end (raw hybrid time) it was taken for: it started after
    /// that end was chosen.
    pub for_end: u64,
    pub taken: Instant,
    /// By server uuid.
    pub servers: HashMap<String, ServerCycle>,
}

impl Cycle {
    /// Every listed server was read: a tablet of a table cannot hide on
    /// an unread one.
    pub(crate) fn complete(&self) -> bool {
        !self.servers.is_empty() && self.servers.values().all(|s| s.sweep.is_some())
    }

    /// The ids of the tablets of table `table_id` any server hosts.
    pub(crate) fn tablets_of(&self, table_id: &str) -> HashSet<&str> {
        self.servers
            .values()
            .filter_map(|s| s.sweep.as_ref())
            .flat_map(|s| s.replicas.iter())
            .filter(|(_, r)| r.table_id.as_deref() == Some(table_id))
            .map(|(id, _)| id.as_str())
            .collect()
    }
}

/// Cycles always kept (the newest ones).
const NEWEST_KEPT: usize = 4;
/// Older cycles are kept one per this much time, up to [`HISTORY`]: a
/// table whose windows open apart from the others' still finds a
/// baseline from before its window start.
const THINNED_TO: Duration = Duration::from_millis(500);
const HISTORY: Duration = Duration::from_secs(20);
/// Timeout of one web request.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Tablet locations are asked again at least this often.
const LOCATIONS_TTL: Duration = Duration::from_secs(60);

/// A table's tablets, as located.
pub(crate) type Tablets = Arc<Vec<Arc<RemoteTablet>>>;

#[derive(Debug, Default)]
struct State {
    /// Newest last.
    cycles: VecDeque<Arc<Cycle>>,
    /// Web servers already reported unreadable (logged once each).
    unreadable: HashSet<String>,
    /// Each table's tablets, by table id, and when they were located.
    locations: HashMap<String, (Tablets, Instant)>,
}

/// What quiet tablets read of one source cluster, shared by its tables.
#[derive(Debug, Default)]
pub struct TabletProbe {
    endpoints: EndpointChoice,
    state: tokio::sync::Mutex<State>,
}

impl TabletProbe {
    /// A probe reading each server's counters from the endpoint `choice`
    /// picks for its release (in-flight ops and clocks always from JSON).
    pub fn new(choice: EndpointChoice) -> Self {
        TabletProbe {
            endpoints: choice,
            state: Default::default(),
        }
    }

    /// The newest cycle taken for a window end at or after `end`, taken
    /// now if there is none. `None` when the servers cannot be listed.
    pub(crate) async fn cycle_for(&self, client: &KuduClient, end: u64) -> Option<Arc<Cycle>> {
        // Held while a cycle is taken: the tables asking meanwhile wait
        // for it instead of taking their own.
        let mut state = self.state.lock().await;
        if let Some(c) = state.cycles.back().filter(|c| c.for_end >= end) {
            return Some(c.clone());
        }
        let cycle = Arc::new(self.take_cycle(client, end, &mut state).await?);
        state.cycles.push_back(cycle.clone());
        thin(&mut state.cycles);
        Some(cycle)
    }

    /// Every cycle kept, oldest first.
    pub(crate) async fn history(&self) -> Vec<Arc<Cycle>> {
        self.state.lock().await.cycles.iter().cloned().collect()
    }

    async fn take_cycle(&self, client: &KuduClient, end: u64, state: &mut State) -> Option<Cycle> {
        let servers = match client.list_tablet_servers().await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "cannot list the tablet servers: every tablet is scanned");
                return None;
            }
        };
        let reads = servers.into_iter().map(|s| async move {
            let process = Process {
                uuid: s.uuid.clone(),
                seqno: s.instance_seqno,
            };
            let endpoint = self.endpoints.for_server(&s.software_version);
            let http_addr = web_address(&s);
            let sweep = match &http_addr {
                Some(addr) => Some(web::sweep(addr, endpoint, CALL_TIMEOUT).await),
                None => None,
            };
            (process, http_addr.unwrap_or_default(), endpoint, sweep)
        });
        let swept = futures::future::join_all(reads).await;
        let mut servers = HashMap::new();
        for (process, http_addr, endpoint, sweep) in swept {
            let sweep = match sweep {
                Some(Ok(s)) => {
                    state.unreadable.remove(&http_addr);
                    Some(s)
                }
                Some(Err(e)) => {
                    if state.unreadable.insert(http_addr.clone()) {
                        tracing::warn!(server = %http_addr, error = %e, "cannot read the tablet server's write counters: its tablets are scanned every window");
                    }
                    None
                }
                None => None,
            };
            let s = ServerCycle {
                process,
                http_addr,
                endpoint,
                sweep,
            };
            servers.insert(s.process.uuid.clone(), s);
        }
        Some(Cycle {
            for_end: end,
            taken: Instant::now(),
            servers,
        })
    }

    /// `table`'s tablets: the ones located before while `cycle` (when it
    /// read every server) shows the same tablets of the table and the
    /// locations are younger than a minute; else located again.
    pub(crate) async fn tablets(
        &self,
        client: &KuduClient,
        table: &KuduTable,
        cycle: Option<&Cycle>,
    ) -> Result<Tablets, kudu_client::Error> {
        {
            let state = self.state.lock().await;
            if let Some((tablets, at)) = state.locations.get(table.id()) {
                let same = cycle.filter(|c| c.complete()).is_some_and(|c| {
                    let ids: HashSet<&str> = tablets.iter().map(|t| t.tablet_id.as_str()).collect();
                    c.tablets_of(table.id()) == ids
                });
                if same && at.elapsed() < LOCATIONS_TTL {
                    return Ok(tablets.clone());
                }
            }
        }
        let deadline = Instant::now() + CALL_TIMEOUT;
        let tablets = Arc::new(client.tablets_in_range(table, &[], &[], deadline).await?);
        let mut state = self.state.lock().await;
        state
            .locations
            .insert(table.id().to_owned(), (tablets.clone(), Instant::now()));
        Ok(tablets)
    }

    /// `table`'s tablets as located last when that is younger than a
    /// minute, else located again.
    pub(crate) async fn located(
        &self,
        client: &KuduClient,
        table: &KuduTable,
    ) -> Result<Tablets, kudu_client::Error> {
        if let Some((tablets, at)) = self.state.lock().await.locations.get(table.id()) {
            if at.elapsed() < LOCATIONS_TTL {
                return Ok(tablets.clone());
            }
        }
        self.tablets(client, table, None).await
    }

    /// Forgets `table_id`'s locations (a tablet moved, or the table went).
    pub(crate) async fn forget(&self, table_id: &str) {
        self.state.lock().await.locations.remove(table_id);
    }
}

/// Where a server's counters are read: its first web address, over plain
/// HTTP. HTTPS (or none) is not read: its tablets are scanned.
pub(crate) fn web_address(s: &kudu_client::TabletServerInfo) -> Option<String> {
    s.http_addresses
        .first()
        .filter(|_| !s.https_enabled)
        .cloned()
}

/// Keeps the newest cycles and, older ones, one per [`THINNED_TO`] up to
/// [`HISTORY`].
pub(crate) fn thin(cycles: &mut VecDeque<Arc<Cycle>>) {
    let now = Instant::now();
    let n = cycles.len();
    let mut kept: VecDeque<Arc<Cycle>> = VecDeque::with_capacity(n);
    let mut last_kept: Option<Instant> = None;
    for (i, c) in cycles.drain(..).rev().enumerate() {
        let newest = i < NEWEST_KEPT;
        let spaced = last_kept.is_none_or(|t| t.duration_since(c.taken) >= THINNED_TO);
        if newest || (spaced && now.duration_since(c.taken) < HISTORY) {
            last_kept = Some(c.taken);
            kept.push_front(c);
        }
    }
    *cycles = kept;
}
