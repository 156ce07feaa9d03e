//! Keeping an idle server-side scanner alive (on request and by a
//! background task while the consumer holds the stream), and closing
//! server-side scanners a scan abandons.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::{replica::*, scanner::*};
use crate::client::{tserver_error, KuduClient};
use crate::pb::tserver::tablet_server_service::{Scan, ScannerKeepAlive};
use crate::pb::tserver::{ScanRequestPb, ScannerKeepAliveRequestPb};
use crate::rpc::{CallOptions, RpcContext};
use crate::Result;

/// What the automatic keep-alive task may ping: set while the stream is
/// idle with a server-side scanner open.
#[derive(Debug, Default)]
pub(super) struct KeepAliveSlot {
    pub(super) target: Option<(String, Vec<u8>)>,
    pub(super) idle_since: Option<Instant>,
}

impl Scanner {
    /// Tells the server not to expire the open scanner (if one is open and
    /// no call is in flight). An expired scanner of a fault-tolerant scan
    /// is reopened at the next poll; otherwise the expiry is returned.
    pub async fn keep_alive(&mut self) -> Result<()> {
        let State::Idle(core) = &mut self.state else {
            return Ok(());
        };
        let Phase::Scanning {
            tablet,
            addr,
            scanner_id,
            ..
        } = &core.phase
        else {
            return Ok(());
        };
        let (tablet, addr) = (tablet.clone(), addr.clone());
        let req = ScannerKeepAliveRequestPb {
            scanner_id: scanner_id.clone(),
        };
        let opts = CallOptions::with_timeout(core.plan.timeout);
        let rpc = RpcContext::default()
            .table(core.table.name())
            .tablet(&tablet.tablet_id);
        let result = match core
            .client
            .pool()
            .call_for::<ScannerKeepAlive>(rpc, &addr, &req, &opts)
            .await
        {
            Ok(resp) => match resp.body.error {
                Some(e) => Err(tserver_error(&e, &addr, &tablet.tablet_id)),
                None => Ok(()),
            },
            Err(e) => Err(e),
        };
        match result {
            Err(e) if core.plan.ordered && resumable(&e, None) => {
                tracing::debug!(tablet = %tablet.tablet_id, %addr, error = %e, "keep-alive failed; the scan will reopen");
                if e.server_unusable() {
                    core.bad_servers.insert(addr);
                }
                core.phase = Phase::Open { tablet };
                Ok(())
            }
            other => other,
        }
    }

    pub(super) fn set_keep_alive_target(&self, target: Option<(String, Vec<u8>)>) {
        if let Ok(mut slot) = self.keep_alive.lock() {
            slot.idle_since = target.as_ref().map(|_| Instant::now());
            slot.target = target;
        }
    }

    /// After a step: publish the open scanner for the keep-alive task and
    /// start that task the first time it is needed.
    pub(super) fn after_step(&mut self, core: &Core) {
        let Some(interval) = core.plan.keep_alive_interval else {
            return;
        };
        let target = match &core.phase {
            Phase::Scanning {
                addr, scanner_id, ..
            } => Some((addr.clone(), scanner_id.clone())),
            _ => None,
        };
        let needed = target.is_some();
        self.set_keep_alive_target(target);
        if needed && !self.keep_alive_task {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                self.keep_alive_task = true;
                handle.spawn(keep_alive_loop(
                    Arc::downgrade(&self.keep_alive),
                    core.client.clone(),
                    interval,
                ));
            }
        }
    }
}

/// Pings the idle scanner published in `slot` every `interval` until the
/// scanner is dropped.
pub(super) async fn keep_alive_loop(
    slot: Weak<Mutex<KeepAliveSlot>>,
    client: KuduClient,
    interval: Duration,
) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(slot) = slot.upgrade() else { return };
        let target = match slot.lock() {
            Ok(s) => match (&s.target, s.idle_since) {
                (Some(t), Some(since)) if since.elapsed() >= interval => Some(t.clone()),
                _ => None,
            },
            Err(_) => return,
        };
        drop(slot);
        if let Some((addr, scanner_id)) = target {
            let req = ScannerKeepAliveRequestPb { scanner_id };
            let opts = CallOptions::with_timeout(interval.max(Duration::from_secs(1)));
            match client
                .pool()
                .call::<ScannerKeepAlive>(&addr, &req, &opts)
                .await
            {
                Ok(resp) if resp.body.error.is_none() => {
                    tracing::trace!(%addr, "scanner keep-alive sent")
                }
                Ok(resp) => {
                    tracing::debug!(%addr, error = ?resp.body.error, "scanner keep-alive refused")
                }
                Err(e) => tracing::debug!(%addr, error = %e, "scanner keep-alive failed"),
            }
        }
    }
}
/// Closes a server-side scanner in the background, if a tokio runtime is
/// around (otherwise the server expires it after its TTL).
pub(super) fn spawn_close(client: &KuduClient, addr: String, scanner_id: Vec<u8>) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(close_scanner(client.clone(), addr, scanner_id));
    }
}

/// Best-effort close of a server-side scanner.
pub(super) async fn close_scanner(client: KuduClient, addr: String, scanner_id: Vec<u8>) {
    let req = ScanRequestPb {
        scanner_id: Some(scanner_id),
        batch_size_bytes: Some(0),
        close_scanner: Some(true),
        ..Default::default()
    };
    let opts = CallOptions::with_timeout(Duration::from_secs(10));
    if let Err(e) = client.pool().call::<Scan>(&addr, &req, &opts).await {
        tracing::debug!(%addr, error = %e, "closing a scanner failed (it will expire)");
    }
}
