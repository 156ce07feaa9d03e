//! The one reader of tablet servers' metrics: the write counters of tablet
//! replicas and the server's hybrid clock, from each server's web server
//! (plain HTTP/1.1, one request per connection: [`http`]).
//!
//! Two endpoints have the tablets' counters, chosen per server
//! ([`EndpointChoice`], so a cluster mid-upgrade is read too):
//! - the JSON `/metrics` ([`json`]), on every release; the server filters
//!   it to the tablets and counters asked for. The default everywhere;
//! - `/metrics_prometheus` ([`prometheus`]), which has tablet metrics
//!   since Kudu 1.18 ([`Feature::TabletPrometheusMetrics`]). It takes no
//!   filter: every answer is the whole dump, ~65 KiB per tablet replica
//!   (on a 1.18.1 server with 104 tablets 6.8 MB in ~110 ms, against
//!   47 KB in ~5 ms from `/metrics`; docs/operations.md), with the same
//!   values.
//!
//! The servers come from the Kudu client's tablet-server list
//! (ListTabletServers names each server's web address and release), never
//! from the masters' web UI. Two readings are taken here:
//! - [`TserverMetrics::table_counters`]: a table's row write counters on
//!   one cluster (per-table activity, the drain check, the write guard);
//! - `read`: a server's counters of some tablets (quiet tablets, after
//!   a safe-time barrier);
//! - [`sweep`]: every replica of a server, its counters and ops in
//!   flight between two readings of its clock (quiet tablets, one sweep
//!   per server shared by every table of a job).

mod http;
mod json;
mod prometheus;
mod sweep;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use kudu_client::{Feature, KuduClient, KuduRelease};
use serde::{Deserialize, Serialize};

pub(crate) use http::WebError;
#[cfg(test)]
pub(crate) use sweep::ReplicaReading;
pub(crate) use sweep::{sweep, ServerSweep};

/// A replica's write counters ([`COUNTER_NAMES`], in that order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counters(pub [u64; 5]);

impl Counters {
    /// The counters when every one of them was read.
    fn complete(values: [Option<u64>; 5]) -> Option<Self> {
        let [Some(a), Some(b), Some(c), Some(d), Some(e)] = values else {
            return None;
        };
        Some(Counters([a, b, c, d, e]))
    }
}

/// The per-tablet counters a reading compares: every row a write changed
/// (by kind) and every byte the replica appended to its WAL (which also
/// moves on transaction commits and schema changes, whose rows the row
/// counters may not show). The first four are a table's row counters.
pub(crate) const COUNTER_NAMES: [&str; 5] = [
    "rows_inserted",
    "rows_upserted",
    "rows_updated",
    "rows_deleted",
    "log_bytes_logged",
];

/// Above this many tablets the request asks for every tablet of the
/// server and filters here (the id list would make a very long URL).
const MAX_IDS_IN_URL: usize = 64;

/// What the JSON requests accept.
const JSON: &str = "application/json";

/// The web endpoint a tablet server's tablet counters are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Endpoint {
    /// `/metrics`, filtered by the server to what is asked.
    Json,
    /// `/metrics_prometheus`, the whole dump (with tablets since 1.18).
    Prometheus,
}

impl Endpoint {
    /// The endpoint's path on the web server.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Json => "/metrics",
            Endpoint::Prometheus => "/metrics_prometheus",
        }
    }
}

/// Which endpoint the reader asks each tablet server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndpointChoice {
    /// The JSON `/metrics` on every server: the cheapest on every release.
    #[default]
    Json,
    /// `/metrics_prometheus` on servers whose release has tablet metrics
    /// there (Kudu 1.18+), the JSON `/metrics` on older ones and on those
    /// that did not say their release.
    PrometheusWhereAvailable,
}

impl EndpointChoice {
    /// The endpoint for a server that reported `software_version`
    /// (`TabletServerInfo::software_version`).
    pub fn for_server(self, software_version: &str) -> Endpoint {
        let has_tablets = KuduRelease::from_software_version(software_version)
            .is_some_and(|r| r >= Feature::TabletPrometheusMetrics.since());
        match self {
            EndpointChoice::PrometheusWhereAvailable if has_tablets => Endpoint::Prometheus,
            EndpointChoice::Json | EndpointChoice::PrometheusWhereAvailable => Endpoint::Json,
        }
    }
}

/// The [`COUNTER_NAMES`] values of each wanted tablet in one server's
/// answer. `json_path` is the request on the JSON endpoint; `wanted`
/// takes a tablet's id and, from JSON, its table's name (the Prometheus
/// dump does not name it).
async fn tablet_values(
    addr: &str,
    endpoint: Endpoint,
    json_path: &str,
    wanted: &(dyn Fn(&str, Option<&str>) -> bool + Sync),
    timeout: Duration,
) -> Result<HashMap<String, [Option<u64>; 5]>, WebError> {
    match endpoint {
        Endpoint::Json => {
            let body = http::get(addr, json_path, JSON, timeout).await?;
            json::tablet_values(&body, &COUNTER_NAMES, wanted)
                .map_err(|why| WebError::malformed(addr, json_path, why))
        }
        Endpoint::Prometheus => {
            let path = endpoint.path();
            let body = http::get(addr, path, "text/plain", timeout).await?;
            prometheus::tablet_values(&body, &COUNTER_NAMES, |id| wanted(id, None))
                .map_err(|why| WebError::malformed(addr, path, why))
        }
    }
}

/// One tablet server's counters of the asked tablets (tablets it does not
/// host, or with a counter missing, are left out).
#[derive(Debug, Clone)]
pub(crate) struct ServerReading {
    pub counters: HashMap<String, Counters>,
}

/// The tablets with every counter read. A counter the server does not
/// report: no proof for that tablet.
fn complete_counters(values: HashMap<String, [Option<u64>; 5]>) -> HashMap<String, Counters> {
    values
        .into_iter()
        .filter_map(|(id, v)| Some((id, Counters::complete(v)?)))
        .collect()
}

/// Reads the counters of `tablets` on the tablet server whose web server is
/// at `addr` (`host:port`) from `endpoint` (quiet tablets, after a
/// barrier).
pub(crate) async fn read(
    addr: &str,
    endpoint: Endpoint,
    tablets: &[&str],
    timeout: Duration,
) -> Result<ServerReading, WebError> {
    let ids = if tablets.len() <= MAX_IDS_IN_URL {
        format!("&ids={}", tablets.join(","))
    } else {
        String::new()
    };
    let json_path = format!(
        "/metrics?types=tablet{ids}&metrics={}&compact=true",
        COUNTER_NAMES.join(",")
    );
    let asked: HashSet<&str> = tablets.iter().copied().collect();
    let wanted = |id: &str, _: Option<&str>| asked.contains(id);
    let values = tablet_values(addr, endpoint, &json_path, &wanted, timeout).await?;
    Ok(ServerReading {
        counters: complete_counters(values),
    })
}

/// The four row counters of one table on one cluster: per tablet the
/// highest among its replicas (followers count writes too, so a sum would
/// multiply by the replication factor), summed over the tablets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableCounters {
    /// Rows inserted.
    pub rows_inserted: u64,
    /// Rows upserted.
    pub rows_upserted: u64,
    /// Rows updated.
    pub rows_updated: u64,
    /// Rows deleted.
    pub rows_deleted: u64,
}

impl TableCounters {
    /// Rows written, all kinds.
    pub fn total(&self) -> u64 {
        self.rows_inserted + self.rows_upserted + self.rows_updated + self.rows_deleted
    }

    /// The row counters among a tablet's [`COUNTER_NAMES`] values (a
    /// missing one counts 0).
    fn of_tablet(values: &[Option<u64>; 5]) -> TableCounters {
        let [inserted, upserted, updated, deleted, _] = values.map(|v| v.unwrap_or(0));
        TableCounters {
            rows_inserted: inserted,
            rows_upserted: upserted,
            rows_updated: updated,
            rows_deleted: deleted,
        }
    }

    fn max(self, o: TableCounters) -> TableCounters {
        TableCounters {
            rows_inserted: self.rows_inserted.max(o.rows_inserted),
            rows_upserted: self.rows_upserted.max(o.rows_upserted),
            rows_updated: self.rows_updated.max(o.rows_updated),
            rows_deleted: self.rows_deleted.max(o.rows_deleted),
        }
    }

    fn add(self, o: TableCounters) -> TableCounters {
        TableCounters {
            rows_inserted: self.rows_inserted + o.rows_inserted,
            rows_upserted: self.rows_upserted + o.rows_upserted,
            rows_updated: self.rows_updated + o.rows_updated,
            rows_deleted: self.rows_deleted + o.rows_deleted,
        }
    }

    /// Every counter with its name (metric suffix).
    pub fn named(&self) -> [(&'static str, u64); 4] {
        [
            ("inserted", self.rows_inserted),
            ("upserted", self.rows_upserted),
            ("updated", self.rows_updated),
            ("deleted", self.rows_deleted),
        ]
    }
}

/// One table's counters on one cluster and who gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableReading {
    /// The table's row counters.
    pub counters: TableCounters,
    /// Each tablet server that answered (its web address) and the
    /// endpoint it was read from.
    pub servers: Vec<(String, Endpoint)>,
}

/// Why a table's counters could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The client could not list the tablet servers.
    #[error("cannot list the tablet servers")]
    List(#[source] kudu_client::Error),
    /// The list named no tablet server with a web address.
    #[error("the masters list no tablet server with a web address")]
    NoServers,
    /// The table's tablets could not be located (the Prometheus dump names
    /// tablets, not tables).
    #[error("cannot locate the tablets of {table}")]
    Tablets {
        /// The table.
        table: String,
        /// The client's error.
        #[source]
        source: kudu_client::Error,
    },
    /// Every tablet server failed; each one's reason.
    #[error("no tablet server answered: {0}")]
    NoAnswer(String),
}

/// How long a tablet-server list is used before it is asked for again.
const RELIST_AFTER: Duration = Duration::from_secs(30);

/// One listed tablet server.
#[derive(Debug, Clone)]
struct Server {
    /// Its web address (`host:port`).
    http: String,
    endpoint: Endpoint,
}

/// One cluster's tablet servers, listed through its Kudu client, and
/// their tablet metrics.
pub struct TserverMetrics {
    client: KuduClient,
    servers: Vec<Server>,
    listed: Option<Instant>,
    timeout: Duration,
    choice: EndpointChoice,
}

impl TserverMetrics {
    /// The tablet servers of `client`'s cluster, each asked with
    /// `timeout`, through the JSON `/metrics`.
    pub fn new(client: KuduClient, timeout: Duration) -> Self {
        TserverMetrics {
            client,
            servers: Vec::new(),
            listed: None,
            timeout,
            choice: EndpointChoice::default(),
        }
    }

    /// Reads each server from the endpoint `choice` picks for it.
    pub fn with_endpoints(mut self, choice: EndpointChoice) -> Self {
        self.choice = choice;
        self
    }

    async fn list(&mut self) -> Result<(), MetricsError> {
        let servers = self
            .client
            .list_tablet_servers()
            .await
            .map_err(MetricsError::List)?;
        let choice = self.choice;
        let servers: Vec<Server> = servers
            .into_iter()
            .filter_map(|s| {
                Some(Server {
                    endpoint: choice.for_server(&s.software_version),
                    http: s.http_addresses.into_iter().next()?,
                })
            })
            .collect();
        if servers.is_empty() {
            return Err(MetricsError::NoServers);
        }
        self.servers = servers;
        self.listed = Some(Instant::now());
        Ok(())
    }

    /// The ids of `table`'s tablets, for servers read from the Prometheus
    /// dump; empty when no server is.
    async fn tablet_ids(&self, table: &str) -> Result<HashSet<String>, MetricsError> {
        if self.servers.iter().all(|s| s.endpoint == Endpoint::Json) {
            return Ok(HashSet::new());
        }
        let located = async {
            let t = self.client.open_table(table).await?;
            let deadline = Instant::now() + self.timeout;
            self.client.tablets_in_range(&t, &[], &[], deadline).await
        };
        let tablets = located.await.map_err(|source| MetricsError::Tablets {
            table: table.to_owned(),
            source,
        })?;
        Ok(tablets.iter().map(|t| t.tablet_id.clone()).collect())
    }

    /// Table `table`'s row counters now, and the servers that answered.
    /// The servers are listed again every 30 s and after a server failed
    /// (it may have moved, died or been upgraded).
    pub async fn table_counters(&mut self, table: &str) -> Result<TableReading, MetricsError> {
        if self.listed.is_none_or(|t| t.elapsed() > RELIST_AFTER) {
            self.list().await?;
        }
        let ids = self.tablet_ids(table).await?;
        // JSON names each tablet's table (asked for by attribute); the
        // Prometheus dump only its id.
        let wanted = |id: &str, name: Option<&str>| match name {
            Some(name) => name == table,
            None => ids.contains(id),
        };
        let json_path = format!(
            "/metrics?types=tablet&metrics={}&attributes=table_name,{}&compact=1",
            COUNTER_NAMES[..4].join(","),
            http::percent_encode(table)
        );
        let timeout = self.timeout;
        let calls = self.servers.iter().map(|s| {
            let (wanted, json_path) = (&wanted, json_path.as_str());
            async move {
                let answer = tablet_values(&s.http, s.endpoint, json_path, wanted, timeout).await;
                (s, answer)
            }
        });
        let answers = futures::future::join_all(calls).await;
        let mut per_tablet: HashMap<String, TableCounters> = HashMap::new();
        let mut servers = Vec::new();
        let mut failures = Vec::new();
        for (server, answer) in answers {
            match answer {
                Ok(tablets) => {
                    servers.push((server.http.clone(), server.endpoint));
                    for (id, values) in tablets {
                        let e = per_tablet.entry(id).or_default();
                        *e = e.max(TableCounters::of_tablet(&values));
                    }
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
        if !failures.is_empty() {
            self.listed = None;
        }
        if servers.is_empty() {
            return Err(MetricsError::NoAnswer(failures.join("; ")));
        }
        let counters = per_tablet
            .values()
            .fold(TableCounters::default(), |a, c| a.add(*c));
        Ok(TableReading { counters, servers })
    }
}

#[cfg(test)]
mod tests;
