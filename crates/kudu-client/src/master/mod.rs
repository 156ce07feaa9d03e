//! Master leader discovery and catalog operations (list, open, create,
//! alter, delete tables; server clock).
//!
//! [`MasterProxy`] owns "which master is the leader": it asks every master
//! at once (`ConnectToMaster`), keeps the leader's address, and re-discovers
//! it when a call answers NOT_THE_LEADER or fails on the network. Catalog
//! calls ([`catalog`]) are plain request builders over [`MasterProxy::call`].

pub(crate) mod catalog;

use crate::error::{Error, KuduStatus, Result, RetryAction, StatusCode};
use crate::pb;
use crate::pb::master::master_error_pb::Code as MasterCode;
use crate::pb::master::MasterErrorPb;
use crate::pb::RpcMethod;
use crate::retry::Retrier;
use crate::rpc::{CallOptions, ConnectionPool, RpcContext};
use std::sync::Mutex;
use std::time::Duration;
use tokio::task::JoinSet;

/// `MasterFeatures.CONNECT_TO_MASTER`.
const FEATURE_CONNECT_TO_MASTER: u32 = 3;

/// Responses of master calls carry their application error in field 1.
pub(crate) trait MasterResponse {
    /// The response's `error` field.
    fn master_error(&self) -> Option<&MasterErrorPb>;
}

macro_rules! master_responses {
    ($($t:ty),* $(,)?) => {
        $(impl MasterResponse for $t {
            fn master_error(&self) -> Option<&MasterErrorPb> {
                self.error.as_ref()
            }
        })*
    };
}

master_responses!(
    pb::master::ConnectToMasterResponsePb,
    pb::master::ListTablesResponsePb,
    pb::master::GetTableSchemaResponsePb,
    pb::master::CreateTableResponsePb,
    pb::master::IsCreateTableDoneResponsePb,
    pb::master::AlterTableResponsePb,
    pb::master::IsAlterTableDoneResponsePb,
    pb::master::DeleteTableResponsePb,
    pb::master::GetTableLocationsResponsePb,
    pb::master::ListTabletServersResponsePb,
);

impl MasterResponse for pb::master::PingResponsePb {
    fn master_error(&self) -> Option<&MasterErrorPb> {
        None
    }
}

impl MasterResponse for pb::server::ServerClockResponsePb {
    fn master_error(&self) -> Option<&MasterErrorPb> {
        None
    }
}

/// Maps an `AppStatusPB`.
pub(crate) fn status_from_pb(s: &pb::AppStatusPb) -> KuduStatus {
    KuduStatus {
        code: StatusCode::from_i32(s.code),
        message: s.message.clone().unwrap_or_default(),
        posix_code: s.posix_code,
    }
}

/// Maps a master's application error to the error a caller acts on.
pub(crate) fn master_error(err: &MasterErrorPb, addr: &str, operation: &str) -> Error {
    let status = status_from_pb(&err.status);
    match MasterCode::try_from(err.code) {
        Ok(MasterCode::NotTheLeader) => Error::NotLeaderMaster {
            addr: addr.to_owned(),
        },
        Ok(MasterCode::CatalogManagerNotInitialized) => Error::ServiceUnavailable {
            addr: addr.to_owned(),
            message: status.message,
        },
        Ok(MasterCode::TableNotFound) => Error::TableNotFound(status.message),
        _ if status.code == StatusCode::ServiceUnavailable => Error::ServiceUnavailable {
            addr: addr.to_owned(),
            message: status.message,
        },
        _ => Error::Status {
            context: format!("{operation} on master {addr}"),
            status,
        },
    }
}

/// The masters of one cluster and the current leader.
#[derive(Debug)]
pub(crate) struct MasterProxy {
    addrs: Vec<String>,
    pool: ConnectionPool,
    leader: Mutex<Option<String>>,
}

impl MasterProxy {
    /// A proxy for `addrs` (1, 3 or 5 masters), connecting through `pool`.
    pub(crate) fn new(addrs: Vec<String>, pool: ConnectionPool) -> Self {
        MasterProxy {
            addrs,
            pool,
            leader: Mutex::new(None),
        }
    }

    /// The configured master addresses.
    pub(crate) fn addrs(&self) -> &[String] {
        &self.addrs
    }

    fn cached_leader(&self) -> Option<String> {
        self.leader.lock().ok().and_then(|l| l.clone())
    }

    /// Forgets the leader only if it is still `addr` (another caller may
    /// already have found the new one).
    fn forget_leader(&self, addr: &str) {
        if let Ok(mut l) = self.leader.lock() {
            if l.as_deref() == Some(addr) {
                *l = None;
            }
        }
    }

    /// Asks every master at once; the first that says LEADER wins. On
    /// failure the error lists each master's answer.
    pub(crate) async fn find_leader(&self, timeout: Duration, attempt: u32) -> Result<String> {
        let mut set = JoinSet::new();
        for addr in &self.addrs {
            let pool = self.pool.clone();
            let addr = addr.clone();
            set.spawn(async move {
                let opts =
                    CallOptions::with_timeout(timeout).require_feature(FEATURE_CONNECT_TO_MASTER);
                let req = pb::master::ConnectToMasterRequestPb::default();
                let res = pool
                    .call_for::<pb::master::master_service::ConnectToMaster>(
                        RpcContext::attempt(attempt),
                        &addr,
                        &req,
                        &opts,
                    )
                    .await;
                (addr, res)
            });
        }
        let mut causes = Vec::new();
        let mut auth_errors = Vec::new();
        while let Some(joined) = set.join_next().await {
            let Ok((addr, res)) = joined else { continue };
            match res {
                Ok(resp) => {
                    if let Some(e) = resp.body.error.as_ref() {
                        causes.push(format!(
                            "{addr}: {}",
                            master_error(e, &addr, "ConnectToMaster")
                        ));
                    } else if resp.body.role
                        == Some(pb::consensus::raft_peer_pb::Role::Leader as i32)
                    {
                        set.abort_all();
                        self.check_master_list(&resp.body);
                        if let Some(tokens) = &self.pool.options().negotiate.tokens {
                            tokens.update(resp.body.authn_token.as_ref(), &resp.body.ca_cert_der);
                        }
                        if let Ok(mut l) = self.leader.lock() {
                            *l = Some(addr.clone());
                        }
                        return Ok(addr);
                    } else {
                        causes.push(format!("{addr}: not the leader"));
                    }
                }
                Err(e @ Error::Authentication { .. }) => {
                    causes.push(format!("{addr}: {e}"));
                    auth_errors.push(e);
                }
                Err(e) => causes.push(format!("{addr}: {e}")),
            }
        }
        // Every master refused our credentials: waiting will not help, and
        // the cause is clearer alone.
        if !auth_errors.is_empty() && auth_errors.len() == self.addrs.len() {
            return Err(auth_errors.swap_remove(0));
        }
        causes.sort();
        Err(Error::NoLeaderMaster {
            masters: self.addrs.join(","),
            details: causes.join("; "),
        })
    }

    /// Warns when the cluster has masters the caller did not list.
    fn check_master_list(&self, resp: &pb::master::ConnectToMasterResponsePb) {
        if resp.master_addrs.is_empty() {
            return;
        }
        let reported: Vec<String> = resp
            .master_addrs
            .iter()
            .map(|hp| format!("{}:{}", hp.host, hp.port))
            .collect();
        if reported.len() != self.addrs.len() {
            tracing::warn!(
                configured = ?self.addrs,
                reported = ?reported,
                "the cluster reports a different master list than configured"
            );
        }
    }

    /// Calls `M` (about `table`, if any) on the leader master, discovering
    /// it first and following leader changes, until `timeout` passes.
    pub(crate) async fn call<M>(
        &self,
        table: Option<&str>,
        request: &M::Request,
        timeout: Duration,
        features: &[u32],
    ) -> Result<M::Response>
    where
        M: RpcMethod,
        M::Response: MasterResponse,
    {
        let mut retrier = Retrier::new(M::METHOD, timeout);
        loop {
            retrier.begin_attempt();
            match self
                .call_once::<M>(table, request, &retrier, features)
                .await
            {
                Ok(resp) => return Ok(resp),
                Err(e) => retrier.on_error(e).await?,
            }
        }
    }

    async fn call_once<M>(
        &self,
        table: Option<&str>,
        request: &M::Request,
        retrier: &Retrier,
        features: &[u32],
    ) -> Result<M::Response>
    where
        M: RpcMethod,
        M::Response: MasterResponse,
    {
        let refresh_token = self
            .pool
            .options()
            .negotiate
            .tokens
            .as_ref()
            .is_some_and(|t| t.take_refresh_due());
        let leader = match self.cached_leader() {
            Some(l) if !refresh_token => l,
            // ConnectToMaster also hands out a fresh authentication token.
            _ => {
                self.find_leader(retrier.remaining(), retrier.attempts())
                    .await?
            }
        };
        let mut opts = CallOptions::with_deadline(retrier.deadline().into());
        for &f in features {
            opts = opts.require_feature(f);
        }
        let ctx = RpcContext {
            table,
            tablet: None,
            attempt: retrier.attempts(),
        };
        let resp = match self.pool.call_for::<M>(ctx, &leader, request, &opts).await {
            Ok(r) => r.body,
            Err(e) => {
                if e.retry_action() != RetryAction::Fail || e.server_unusable() {
                    self.forget_leader(&leader);
                }
                return Err(e);
            }
        };
        if let Some(err) = resp.master_error() {
            let e = master_error(err, &leader, M::METHOD);
            if matches!(e, Error::NotLeaderMaster { .. }) {
                self.forget_leader(&leader);
            }
            return Err(e);
        }
        Ok(resp)
    }
}
