//! A sweep: one reading of every tablet replica a tablet server hosts, for
//! quiet tablets shared by every table of a job (`crate::quiet_tablets`).
//! Four small GETs, in this order, each one's answer before the next is
//! asked:
//!
//! 1. the server's hybrid clock (`clock_before`);
//! 2. every replica's ops in flight (`all_transactions_inflight`, JSON,
//!    with the replica's table id);
//! 3. every replica's write counters ([`super::COUNTER_NAMES`], from the
//!    endpoint chosen for the server);
//! 4. the clock again (`clock_after`).
//!
//! The order carries the proof (docs/operations.md, "What a diff window
//! costs the source"): an op is in flight from before its timestamp is
//! assigned until after its counters moved, so an op stamped below
//! `clock_before` is, at (3), either counted or was seen in flight at (2);
//! and nothing counted at (3) is stamped above `clock_after`.

use std::collections::HashMap;
use std::time::Duration;

use super::{http, json, tablet_values, Counters, Endpoint, WebError, COUNTER_NAMES, JSON};

/// The Kudu gauge of a replica's ops in flight, of every kind (writes,
/// schema changes, transaction participant ops).
pub(crate) const INFLIGHT: &str = "all_transactions_inflight";

/// One replica in a [`ServerSweep`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplicaReading {
    /// The id of the replica's table.
    pub table_id: Option<String>,
    /// Its ops in flight at (2); `None`: not reported.
    pub inflight: Option<u64>,
    /// Its counters at (3); `None`: one was not reported.
    pub counters: Option<Counters>,
}

/// One sweep of one tablet server.
#[derive(Debug, Clone)]
pub(crate) struct ServerSweep {
    pub clock_before: u64,
    pub replicas: HashMap<String, ReplicaReading>,
    pub clock_after: u64,
}

/// The server's hybrid clock, from the JSON `/metrics` (~190 bytes).
async fn clock(addr: &str, timeout: Duration) -> Result<u64, WebError> {
    let path = "/metrics?types=server&metrics=hybrid_clock_timestamp&compact=true";
    let body = http::get(addr, path, JSON, timeout).await?;
    json::clock(&body).map_err(|why| WebError::malformed(addr, path, why))
}

/// Sweeps the tablet server whose web server is at `addr`, its counters
/// from `endpoint`.
pub(crate) async fn sweep(
    addr: &str,
    endpoint: Endpoint,
    timeout: Duration,
) -> Result<ServerSweep, WebError> {
    let clock_before = clock(addr, timeout).await?;
    let path = format!("/metrics?types=tablet&metrics={INFLIGHT}&compact=true");
    let body = http::get(addr, &path, JSON, timeout).await?;
    let inflight = json::tablet_entities(&body, &[INFLIGHT])
        .map_err(|why| WebError::malformed(addr, &path, why))?;
    let json_path = format!(
        "/metrics?types=tablet&metrics={}&compact=true",
        COUNTER_NAMES.join(",")
    );
    let all = |_: &str, _: Option<&str>| true;
    let counters = tablet_values(addr, endpoint, &json_path, &all, timeout).await?;
    let clock_after = clock(addr, timeout).await?;
    let mut replicas: HashMap<String, ReplicaReading> = inflight
        .into_iter()
        .map(|(id, (table_id, [n]))| {
            let r = ReplicaReading {
                table_id,
                inflight: n,
                counters: None,
            };
            (id, r)
        })
        .collect();
    for (id, values) in counters {
        // A replica created between (2) and (3) has no in-flight reading:
        // kept, so its table's tablets are known, but never proven.
        let r = replicas.entry(id).or_insert(ReplicaReading {
            table_id: None,
            inflight: None,
            counters: None,
        });
        r.counters = Counters::complete(values);
    }
    Ok(ServerSweep {
        clock_before,
        replicas,
        clock_after,
    })
}
