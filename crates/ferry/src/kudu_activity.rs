//! Per-table write activity on the source and sink clusters: each poll
//! reads the replicated table's row counters through `ferry-kudu`'s
//! tablet-server metrics reader (`ferry_kudu::tserver_metrics`, servers
//! from the Kudu client's tablet-server list). `ferry stop --drain-check`
//! uses "the counters stopped moving" as "no writes".
//!
//! The sink's counters also feed the write guard (`write_guard`): rows
//! the servers counted beyond the rows the job wrote are foreign writes.

mod write_guard;

pub use ferry_kudu::tserver_metrics::TableCounters;
pub use write_guard::ForeignWrites;
use write_guard::WriteGuard;

use crate::process_opts::KuduMetricsOptions;
use ferry_engine::time::now_ms;
use ferry_kudu::tserver_metrics::{EndpointChoice, TserverMetrics};
use kudu_client::KuduClient;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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

/// How long one tablet server may take to answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

struct ClusterPoller {
    /// `None`: the job has no Kudu table on this side.
    metrics: Option<TserverMetrics>,
    state: Arc<Mutex<TableActivity>>,
}

/// Polls both clusters for one job.
pub struct KuduActivity {
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

impl KuduActivity {
    /// A poller for `table` on the source cluster (of `source`) and
    /// `sink_table` on the sink cluster (of `sink`), reading each server's
    /// endpoint as `endpoints` says (`reader.tabletMetricsEndpoint`).
    pub fn new(
        opts: &KuduMetricsOptions,
        endpoints: EndpointChoice,
        source: Option<KuduClient>,
        sink: Option<KuduClient>,
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
        let poller = |client: Option<KuduClient>, st: &Arc<Mutex<TableActivity>>| ClusterPoller {
            metrics: client.map(|c| TserverMetrics::new(c, CALL_TIMEOUT).with_endpoints(endpoints)),
            state: st.clone(),
        };
        KuduActivity {
            interval: opts.poll_interval,
            source: Mutex::new(Some(poller(source, &source_state))),
            sink: Mutex::new(Some(poller(sink, &sink_state))),
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
                tokio::join!(source.poll(), sink.poll());
                self.guard_sink();
            }
        });
    }
}

impl ClusterPoller {
    async fn poll(&mut self) {
        let Some(metrics) = self.metrics.as_mut() else {
            return;
        };
        let table = self
            .state
            .lock()
            .map(|s| s.table_name.clone())
            .unwrap_or_default();
        let result = metrics.table_counters(&table).await;
        let now = now_ms();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(reading) => {
                let (counters, tservers) = (reading.counters, reading.servers.len());
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
                let e = ferry_engine::error::display_chain(&e);
                tracing::debug!(cluster = %st.cluster, error = %e, "tablet server metrics poll failed");
                st.error = Some(e);
            }
        }
    }
}
