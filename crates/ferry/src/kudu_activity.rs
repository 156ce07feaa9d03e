//! Per-table write activity on the source and sink clusters, read from the
//! tablet servers' JSON `/metrics` (Kudu 1.17's `/metrics_prometheus` has
//! no tablet metrics).
//!
//! The tablet servers are found through a master's web UI
//! (`/dump-entities`, whose `tablet_servers[].http_addrs` lists each
//! server's web address). Each poll asks every tablet server for
//! `rows_inserted`, `rows_upserted`, `rows_updated` and `rows_deleted` of
//! the replicated table's tablets. Followers count writes too, so a
//! tablet's value is the highest among its replicas (not their sum, which
//! would multiply by the replication factor); the table's value is the sum
//! over its tablets. `ferry stop --drain-check` uses "the counters stopped
//! moving" as "no writes".
//!
//! The sink's counters also feed the write guard (`write_guard`): rows
//! the servers counted beyond the rows the job wrote are foreign writes.

mod write_guard;

pub use write_guard::ForeignWrites;
use write_guard::WriteGuard;

use crate::http_client::{base_url, HttpClient};
use crate::process_opts::{KuduMetricsOptions, KUDU_MASTER_WEB_PORT};
use ferry_engine::time::now_ms;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The four write counters of one table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableCounters {
    pub rows_inserted: u64,
    pub rows_upserted: u64,
    pub rows_updated: u64,
    pub rows_deleted: u64,
}

impl TableCounters {
    /// Rows written, all kinds.
    pub fn total(&self) -> u64 {
        self.rows_inserted + self.rows_upserted + self.rows_updated + self.rows_deleted
    }

    fn set(&mut self, name: &str, v: u64) {
        match name {
            "rows_inserted" => self.rows_inserted = v,
            "rows_upserted" => self.rows_upserted = v,
            "rows_updated" => self.rows_updated = v,
            "rows_deleted" => self.rows_deleted = v,
            _ => {}
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

/// What is known about one table on one cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableActivity {
    /// `source` or `sink`.
    pub cluster: String,
    pub table_name: String,
    /// Latest counters; `None` until a poll succeeded.
    pub counters: Option<TableCounters>,
    /// Epoch ms of the poll that first saw the current values (counters
    /// unchanged since). Until two polls agree, the first poll's time.
    pub unchanged_since_ms: u64,
    /// Epoch ms of the last successful poll.
    pub last_poll_ms: u64,
    /// Successful polls so far.
    pub polls: u64,
    /// Tablet servers answering in the last poll.
    pub tservers: usize,
    /// The last poll's problem, if it failed.
    pub error: Option<String>,
}

const METRICS: &str = "rows_inserted,rows_upserted,rows_updated,rows_deleted";

struct ClusterPoller {
    masters_http: Vec<String>,
    tservers: Vec<String>,
    tservers_fetched: Option<Instant>,
    state: Arc<Mutex<TableActivity>>,
}

/// Polls both clusters for one job.
pub struct KuduActivity {
    http: HttpClient,
    interval: Duration,
    source: Mutex<Option<ClusterPoller>>,
    sink: Mutex<Option<ClusterPoller>>,
    source_state: Arc<Mutex<TableActivity>>,
    sink_state: Arc<Mutex<TableActivity>>,
    /// Rows the job has written to the sink so far (for the write guard).
    own_writes: Mutex<Option<OwnWrites>>,
    guard: Mutex<WriteGuard>,
}

/// Reads the rows the job has written to the sink so far.
pub type OwnWrites = Box<dyn Fn() -> u64 + Send + Sync>;

/// Default master web addresses: each master's host on Kudu's default web
/// port.
pub fn default_master_http(masters: &[String]) -> Vec<String> {
    masters
        .iter()
        .map(|m| {
            let host = match m.rsplit_once(':') {
                Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
                _ => m.as_str(),
            };
            format!("{host}:{KUDU_MASTER_WEB_PORT}")
        })
        .collect()
}

impl KuduActivity {
    /// A poller for `table` on the source and `sink_table` on the sink.
    pub fn new(
        opts: &KuduMetricsOptions,
        source_masters: &[String],
        sink_masters: &[String],
        table: &str,
        sink_table: &str,
    ) -> Self {
        let state = |cluster: &str, name: &str| {
            Arc::new(Mutex::new(TableActivity {
                cluster: cluster.to_string(),
                table_name: name.to_string(),
                ..Default::default()
            }))
        };
        let source_state = state("source", table);
        let sink_state = state("sink", sink_table);
        let poller = |http: Vec<String>, st: &Arc<Mutex<TableActivity>>| ClusterPoller {
            masters_http: http,
            tservers: Vec::new(),
            tservers_fetched: None,
            state: st.clone(),
        };
        KuduActivity {
            http: HttpClient::new(Duration::from_secs(5)),
            interval: opts.poll_interval,
            source: Mutex::new(Some(poller(
                opts.source_master_http
                    .clone()
                    .unwrap_or_else(|| default_master_http(source_masters)),
                &source_state,
            ))),
            sink: Mutex::new(Some(poller(
                opts.sink_master_http
                    .clone()
                    .unwrap_or_else(|| default_master_http(sink_masters)),
                &sink_state,
            ))),
            source_state,
            sink_state,
            own_writes: Mutex::new(None),
            guard: Mutex::new(WriteGuard::default()),
        }
    }

    /// Turns the write guard on: `own` counts the job's rows written to
    /// the sink (set once the job exists, before polling starts).
    pub fn with_own_writes(self, own: OwnWrites) -> Self {
        if let Ok(mut o) = self.own_writes.lock() {
            *o = Some(own);
        }
        self
    }

    /// The write guard's figures (all zero until two sink polls compared).
    pub fn foreign_writes(&self) -> ForeignWrites {
        self.guard.lock().map(|g| g.view()).unwrap_or_default()
    }

    /// Feeds the write guard after a poll of the sink.
    fn guard_sink(&self) {
        let own = match self.own_writes.lock() {
            Ok(o) => match o.as_ref() {
                Some(f) => f(),
                None => return,
            },
            Err(_) => return,
        };
        let sink = self
            .sink_state
            .lock()
            .ok()
            .filter(|s| s.error.is_none())
            .and_then(|s| s.counters)
            .map(|c| c.total());
        if let Ok(mut g) = self.guard.lock() {
            let before = g.view().total;
            g.observe(sink, own);
            let after = g.view().total;
            if after > before {
                tracing::warn!(
                    foreign_rows = after,
                    "rows were written to the sink table by someone else than ferry (write guard; see docs/operations.md)"
                );
            }
        }
    }

    /// Whether polling is on.
    pub fn enabled(&self) -> bool {
        !self.interval.is_zero()
    }

    /// The poll interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The latest view of both tables (source first).
    pub fn snapshot(&self) -> Vec<TableActivity> {
        let get = |s: &Arc<Mutex<TableActivity>>| s.lock().map(|a| a.clone()).unwrap_or_default();
        vec![get(&self.source_state), get(&self.sink_state)]
    }

    /// Polls until `stop` (no-op when disabled).
    pub fn spawn(self: Arc<Self>, stop: CancellationToken) {
        if !self.enabled() {
            return;
        }
        tokio::spawn(async move {
            let (Some(mut source), Some(mut sink)) = (
                self.source.lock().ok().and_then(|mut s| s.take()),
                self.sink.lock().ok().and_then(|mut s| s.take()),
            ) else {
                return;
            };
            let mut tick = tokio::time::interval(self.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.cancelled() => return,
                }
                tokio::join!(source.poll(&self.http), sink.poll(&self.http));
                self.guard_sink();
            }
        });
    }
}

impl ClusterPoller {
    async fn poll(&mut self, http: &HttpClient) {
        let table = self
            .state
            .lock()
            .map(|s| s.table_name.clone())
            .unwrap_or_default();
        let result = self.poll_table(http, &table).await;
        let now = now_ms();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok((counters, tservers)) => {
                if st.counters != Some(counters) || st.polls == 0 {
                    st.unchanged_since_ms = now;
                }
                st.counters = Some(counters);
                st.last_poll_ms = now;
                st.polls += 1;
                st.tservers = tservers;
                st.error = None;
            }
            Err(e) => {
                tracing::debug!(cluster = %st.cluster, error = %e, "tablet server metrics poll failed");
                st.error = Some(e);
            }
        }
    }

    async fn refresh_tservers(&mut self, http: &HttpClient) -> Result<(), String> {
        let mut causes = Vec::new();
        for master in &self.masters_http {
            let url = format!("{}/dump-entities", base_url(master));
            match http.get(&url).await.and_then(|r| r.json()) {
                Ok(v) => {
                    let addrs: Vec<String> = v
                        .get("tablet_servers")
                        .and_then(|t| t.as_array())
                        .map(|list| {
                            list.iter()
                                .filter(|ts| {
                                    ts.get("live").and_then(|l| l.as_bool()).unwrap_or(true)
                                })
                                .filter_map(|ts| {
                                    ts.get("http_addrs")?.as_array()?.first()?.as_str()
                                })
                                .map(base_url)
                                .collect()
                        })
                        .unwrap_or_default();
                    if addrs.is_empty() {
                        causes.push(format!("{url}: no live tablet servers listed"));
                        continue;
                    }
                    self.tservers = addrs;
                    self.tservers_fetched = Some(Instant::now());
                    return Ok(());
                }
                Err(e) => causes.push(format!("{e:#}")),
            }
        }
        Err(format!(
            "cannot list tablet servers from the masters' web UIs ({}); set --metrics.kudu.*MasterHttpAddresses",
            causes.join("; ")
        ))
    }

    async fn poll_table(
        &mut self,
        http: &HttpClient,
        table: &str,
    ) -> Result<(TableCounters, usize), String> {
        let stale = self
            .tservers_fetched
            .is_none_or(|t| t.elapsed() > Duration::from_secs(30));
        if stale {
            self.refresh_tservers(http).await?;
        }
        let query = format!(
            "/metrics?types=tablet&metrics={METRICS}&attributes=table_name,{}&compact=1",
            percent_encode(table)
        );
        let calls = self.tservers.iter().map(|ts| {
            let url = format!("{ts}{query}");
            async move { (ts.clone(), http.get(&url).await.and_then(|r| r.json())) }
        });
        let answers = futures::future::join_all(calls).await;
        let mut per_tablet: HashMap<String, TableCounters> = HashMap::new();
        let mut ok = 0;
        let mut failures = Vec::new();
        for (ts, answer) in answers {
            match answer {
                Ok(v) => {
                    ok += 1;
                    for entity in v.as_array().into_iter().flatten() {
                        let attrs = entity.get("attributes");
                        let name = attrs
                            .and_then(|a| a.get("table_name"))
                            .and_then(|n| n.as_str());
                        if name != Some(table) {
                            continue;
                        }
                        let Some(id) = entity.get("id").and_then(|i| i.as_str()) else {
                            continue;
                        };
                        let mut c = TableCounters::default();
                        for m in entity
                            .get("metrics")
                            .and_then(|m| m.as_array())
                            .into_iter()
                            .flatten()
                        {
                            if let (Some(n), Some(v)) = (
                                m.get("name").and_then(|n| n.as_str()),
                                m.get("value").and_then(|v| v.as_u64()),
                            ) {
                                c.set(n, v);
                            }
                        }
                        let e = per_tablet.entry(id.to_string()).or_default();
                        *e = e.max(c);
                    }
                }
                Err(e) => failures.push(format!("{ts}: {e:#}")),
            }
        }
        if !failures.is_empty() {
            // A server may have moved or died: list them again next time.
            self.tservers_fetched = None;
        }
        if ok == 0 {
            return Err(format!(
                "no tablet server answered: {}",
                failures.join("; ")
            ));
        }
        let total = per_tablet
            .values()
            .fold(TableCounters::default(), |a, c| a.add(*c));
        Ok((total, ok))
    }
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_master_web_addresses() {
        assert_eq!(
            default_master_http(&["127.1.2.1:7051".into(), "m2".into()]),
            vec!["127.1.2.1:8051".to_string(), "m2:8051".to_string()]
        );
        assert_eq!(percent_encode("default.t 1"), "default.t%201");
    }
}
