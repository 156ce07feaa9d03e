//! A safe-time barrier on one replica: [`KuduClient::wait_applied`].
//!
//! A tablet server opens a READ_AT_SNAPSHOT scan only once the replica's
//! safe time has passed the snapshot and every operation below it is
//! applied (its MVCC snapshot is clean). Opening such a scan with an empty
//! projection and a zero batch size therefore reads no row but returns
//! only when the replica holds every write with a timestamp below the
//! snapshot: what a caller needs before it trusts that replica's write
//! counters to describe everything up to that time.
//!
//! An empty projection (no virtual column) keeps the open cheap on the
//! server: no row is decoded, and the projection the MemRowSet compiles is
//! the same every time, so the server's code cache serves it after the
//! first call (a diff scan's IS_DELETED projection never hits it; see
//! docs/operations.md).

use std::time::Duration;

use super::keep_alive::close_scanner;
use crate::client::tserver_error;
use crate::hybrid_time::HybridTime;
use crate::meta::Replica;
use crate::pb;
use crate::pb::tserver::tablet_server_service::Scan;
use crate::pb::tserver::{NewScanRequestPb, ScanRequestPb};
use crate::retry::Retrier;
use crate::rpc::{CallOptions, RpcContext};
use crate::{KuduClient, KuduTable, Result};

impl KuduClient {
    /// Waits until `replica` of tablet `tablet_id` (of `table`) has applied
    /// every write with a timestamp below `ts`, by opening (and closing) a
    /// scan at snapshot `ts` there that reads no rows. Retries what the
    /// server asks to retry (a snapshot it cannot serve yet) until
    /// `timeout`; any other failure is returned as is. Returns the
    /// snapshot time the server used.
    pub async fn wait_applied(
        &self,
        table: &KuduTable,
        tablet_id: &str,
        replica: &Replica,
        ts: HybridTime,
        timeout: Duration,
    ) -> Result<HybridTime> {
        let mut retrier = Retrier::new(
            format!(
                "waiting for tablet {tablet_id} of table '{}' to apply every write before {ts} on {}",
                table.name(),
                replica.addr
            ),
            timeout,
        );
        let req = ScanRequestPb {
            new_scan_request: Some(NewScanRequestPb {
                tablet_id: tablet_id.as_bytes().to_vec(),
                projected_columns: Vec::new(),
                read_mode: Some(pb::ReadMode::ReadAtSnapshot as i32),
                snap_timestamp: Some(ts.raw()),
                propagated_timestamp: self.last_propagated_raw(),
                authz_token: table.authz_token().cloned(),
                ..Default::default()
            }),
            batch_size_bytes: Some(0),
            ..Default::default()
        };
        loop {
            retrier.begin_attempt();
            let opts =
                CallOptions::with_deadline(tokio::time::Instant::from_std(retrier.deadline()));
            let rpc = RpcContext::attempt(retrier.attempts())
                .table(table.name())
                .tablet(tablet_id);
            let err = match self
                .pool()
                .call_for::<Scan>(rpc, &replica.addr, &req, &opts)
                .await
            {
                Ok(resp) => match &resp.body.error {
                    None => {
                        if let Some(id) = resp.body.scanner_id.clone() {
                            close_scanner(self.clone(), replica.addr.clone(), id).await;
                        }
                        return Ok(resp
                            .body
                            .snap_timestamp
                            .map(HybridTime::from_raw)
                            .unwrap_or(ts));
                    }
                    Some(e) => tserver_error(e, &replica.addr, tablet_id),
                },
                Err(e) => e,
            };
            retrier.on_error(err).await?;
        }
    }
}
