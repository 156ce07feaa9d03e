//! Replica health: which failures mean "reopen the tablet elsewhere",
//! which replica to read from (leader, or closest), and the error of a scan
//! that cannot resume.

use std::net::IpAddr;

use rand::seq::SliceRandom;

use super::{scanner::*, spec::*};
use crate::error::{KuduStatus, StatusCode};
use crate::meta::{RemoteTablet, Replica};
use crate::pb::tserver::tablet_server_error_pb::Code as TsCode;
use crate::Error;

/// Whether a failed continue (or keep-alive) of an ORDERED scan should be
/// answered by reopening the tablet elsewhere
/// (docs/kudu-protocol.md#fault-tolerant-scans): a new attempt may succeed, or
/// another replica may serve it. A call-sequence mismatch (an answer lost in
/// transit) also means "reopen".
pub(super) fn resumable(err: &Error, code: Option<TsCode>) -> bool {
    matches!(code, Some(TsCode::InvalidScanCallSeqId))
        || err.is_transient()
        || err.server_unusable()
}

/// Whether `host` (from `host:port`) is this machine, for CLOSEST_REPLICA.
/// Binding a socket to an IP succeeds only for local addresses.
pub(super) fn is_local_host(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(ip) if ip.is_loopback() => true,
        Ok(ip) => std::net::UdpSocket::bind((ip, 0)).is_ok(),
        Err(_) => false,
    }
}

impl Core {
    /// Picks the replica to open the scan on, avoiding `bad_servers`.
    pub(super) fn pick_replica(&mut self, tablet: &RemoteTablet) -> Option<Replica> {
        let healthy: Vec<&Replica> = tablet
            .replicas
            .iter()
            .filter(|r| !self.bad_servers.contains(&r.addr))
            .collect();
        let mut rng = rand::thread_rng();
        match self.plan.replica_selection {
            ReplicaSelection::LeaderOnly => {
                if let Some(l) = healthy.iter().find(|r| r.role == crate::meta::Role::Leader) {
                    return Some((*l).clone());
                }
                // Snapshot reads are consistent on any replica.
                if self.plan.snapshot.is_some() {
                    healthy.choose(&mut rng).map(|r| (*r).clone())
                } else {
                    None
                }
            }
            ReplicaSelection::ClosestReplica => {
                let local: Vec<&&Replica> =
                    healthy.iter().filter(|r| is_local_host(&r.addr)).collect();
                match local.choose(&mut rng) {
                    Some(r) => Some((**r).clone()),
                    None => healthy.choose(&mut rng).map(|r| (*r).clone()),
                }
            }
        }
    }
}

/// The error of a scan that is not fault tolerant when a continue call
/// fails in a way a fault-tolerant scan would have survived.
pub(super) fn mid_scan_failure(err: &Error, tablet_id: &str, addr: &str) -> Error {
    let code = match err {
        Error::ScannerExpired { .. } | Error::TabletNotFound { .. } => StatusCode::NotFound,
        Error::NotLeaderReplica { .. } => StatusCode::IllegalState,
        Error::Io { .. } | Error::ConnectionClosed { .. } => StatusCode::NetworkError,
        Error::TimedOut { .. } => StatusCode::TimedOut,
        Error::ServiceUnavailable { .. } => StatusCode::ServiceUnavailable,
        Error::Status { status, .. } => status.code,
        _ => StatusCode::RuntimeError,
    };
    Error::Status {
        context: format!(
            "scan of tablet {tablet_id} on {addr} failed mid-stream and is not fault tolerant, \
             so it cannot resume without repeating or losing rows (use a fault-tolerant scan, \
             or restart it)"
        ),
        status: KuduStatus {
            code,
            message: err.to_string(),
            posix_code: None,
        },
    }
}
