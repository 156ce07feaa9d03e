//! One tablet of a scan: the open call (retried, relocating the tablet
//! after routing errors), continue calls, and folding answers into
//! batches.

use std::sync::Arc;
use std::time::Instant;

use super::decode::RowBatch;
use super::{keep_alive::*, replica::*, scanner::*};
use crate::client::tserver_error;
use crate::error::RetryAction;
use crate::hybrid_time::HybridTime;
use crate::meta::{Lookup, RemoteTablet};
use crate::pb;
use crate::pb::tserver::tablet_server_error_pb::Code as TsCode;
use crate::pb::tserver::tablet_server_service::Scan;
use crate::pb::tserver::{NewScanRequestPb, ScanRequestPb, ScanResponsePb};
use crate::retry::Retrier;
use crate::rpc::{CallOptions, RpcContext};
use crate::{Error, Result};

/// `TabletServerFeatures.COLUMN_PREDICATES`.
const FEATURE_COLUMN_PREDICATES: u32 = 1;
/// `TabletServerFeatures.COLUMNAR_LAYOUT_FEATURE`.
const FEATURE_COLUMNAR_LAYOUT: u32 = 5;
/// `RowFormatFlags.COLUMNAR_LAYOUT`.
const ROW_FORMAT_COLUMNAR: u64 = 2;

/// Outcome of one open or continue call.
pub(super) enum CallOutcome {
    Ok(Box<ScanResponsePb>, Vec<bytes::Bytes>),
    Failed(Error, Option<TsCode>),
}

impl Core {
    pub(super) fn new_scan_request(&self, tablet: &RemoteTablet) -> NewScanRequestPb {
        let plan = &self.plan;
        // A resume key below the lower bound (a stale or foreign key) must
        // not widen the scan: start at the bound instead.
        let resume = self
            .last_primary_key
            .clone()
            .filter(|k| plan.lower_bound.as_ref().is_none_or(|lo| k >= lo));
        NewScanRequestPb {
            tablet_id: tablet.tablet_id.as_bytes().to_vec(),
            limit: plan.limit.map(|l| l.saturating_sub(self.rows_returned)),
            projected_columns: plan.projected_columns.clone(),
            read_mode: Some(if plan.snapshot.is_some() {
                pb::ReadMode::ReadAtSnapshot as i32
            } else {
                pb::ReadMode::ReadLatest as i32
            }),
            snap_timestamp: self.snapshot.map(HybridTime::raw),
            propagated_timestamp: self.client.last_propagated_raw(),
            // Never both a start key and a resume key
            // (docs/kudu-protocol.md#scan-messages).
            start_primary_key: if resume.is_none() {
                plan.lower_bound.clone()
            } else {
                None
            },
            stop_primary_key: plan.upper_bound.clone(),
            cache_blocks: (!plan.cache_blocks).then_some(false),
            order_mode: plan.ordered.then_some(pb::OrderMode::Ordered as i32),
            last_primary_key: resume,
            column_predicates: plan.predicates.clone(),
            row_format_flags: plan.columnar.then_some(ROW_FORMAT_COLUMNAR),
            authz_token: self.table.authz_token().cloned(),
            snap_start_timestamp: plan.diff_start.map(HybridTime::raw),
        }
    }

    pub(super) fn call_options(&self, deadline: Instant) -> CallOptions {
        let mut opts = CallOptions::with_deadline(tokio::time::Instant::from_std(deadline));
        if !self.plan.predicates.is_empty() {
            opts = opts.require_feature(FEATURE_COLUMN_PREDICATES);
        }
        if self.plan.columnar {
            opts = opts.require_feature(FEATURE_COLUMNAR_LAYOUT);
        }
        opts
    }

    /// One Scan call (`attempt` of its open, 1 for a continue).
    pub(super) async fn call(
        &self,
        addr: &str,
        tablet_id: &str,
        attempt: u32,
        req: &ScanRequestPb,
        opts: &CallOptions,
    ) -> CallOutcome {
        let rpc = RpcContext::attempt(attempt)
            .table(self.table.name())
            .tablet(tablet_id);
        match self
            .client
            .pool()
            .call_for::<Scan>(rpc, addr, req, opts)
            .await
        {
            Ok(resp) => {
                if let Some(ts) = resp.body.propagated_timestamp {
                    self.client.observe_timestamp(ts);
                }
                match &resp.body.error {
                    Some(e) => {
                        let code = TsCode::try_from(e.code).ok();
                        CallOutcome::Failed(tserver_error(e, addr, tablet_id), code)
                    }
                    None => CallOutcome::Ok(Box::new(resp.body), resp.sidecars),
                }
            }
            Err(e) => CallOutcome::Failed(e, None),
        }
    }

    /// Re-resolves the tablet covering `tablet`'s start after a routing
    /// error, keeping `tablet` if the lookup fails.
    pub(super) async fn relocate(
        &mut self,
        tablet: &Arc<RemoteTablet>,
    ) -> Result<Arc<RemoteTablet>> {
        self.client
            .invalidate_tablet(self.table.id(), &tablet.tablet_id);
        let deadline = self.deadline();
        match self
            .client
            .locate_with_retry(&self.table, &tablet.partition_key_start, deadline)
            .await?
        {
            Lookup::Tablet(t) => {
                if t.tablet_id != tablet.tablet_id {
                    if self.last_primary_key.is_some() {
                        // Rows were returned from the old tablet; resuming in a
                        // different one is only safe by key, which we keep.
                        tracing::warn!(old = %tablet.tablet_id, new = %t.tablet_id, "tablet replaced mid-scan; resuming by primary key");
                    }
                    self.bad_servers.clear();
                }
                Ok(t)
            }
            // The range was dropped: nothing left to read there.
            _ => Err(Error::TabletNotFound {
                tablet_id: tablet.tablet_id.clone(),
                addr: "master (the tablet's range is no longer covered)".into(),
            }),
        }
    }

    /// `Open`: opens a scanner on `tablet`, retrying per [`Retrier`].
    // Long on purpose: one retry loop whose three outcomes (no healthy
    // replica, an answer, a failure) share the retrier and the tablet.
    pub(super) async fn open(&mut self, mut tablet: Arc<RemoteTablet>) -> Result<Option<RowBatch>> {
        let mut retrier = Retrier::new(
            format!(
                "opening a scan of tablet {} of table '{}'",
                tablet.tablet_id,
                self.table.name()
            ),
            self.plan.timeout,
        );
        loop {
            retrier.begin_attempt();
            let Some(replica) = self.pick_replica(&tablet) else {
                let err = if self.bad_servers.is_empty() {
                    Error::NotLeaderReplica {
                        tablet_id: tablet.tablet_id.clone(),
                        addr: "(no leader known)".into(),
                    }
                } else {
                    Error::ServiceUnavailable {
                        addr: format!("replicas of tablet {}", tablet.tablet_id),
                        message: format!(
                            "no healthy replica (failed: {})",
                            self.bad_servers
                                .iter()
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    }
                };
                // Give every replica another chance after the back-off.
                self.bad_servers.clear();
                retrier.on_error(err).await?;
                tablet = self.relocate(&tablet).await?;
                self.phase = Phase::Open {
                    tablet: tablet.clone(),
                };
                continue;
            };
            let req = ScanRequestPb {
                new_scan_request: Some(self.new_scan_request(&tablet)),
                batch_size_bytes: self.plan.batch_size_bytes,
                ..Default::default()
            };
            let opts = self.call_options(retrier.deadline());
            match self
                .call(
                    &replica.addr,
                    &tablet.tablet_id,
                    retrier.attempts(),
                    &req,
                    &opts,
                )
                .await
            {
                CallOutcome::Ok(resp, sidecars) => {
                    self.last_server = Some(replica.addr.clone());
                    if self.plan.snapshot.is_some() && self.snapshot.is_none() {
                        // A server that short-circuits an open (predicates
                        // that match nothing) reports no snapshot; its clock
                        // then stands in, so later tablets share one time.
                        self.snapshot = resp
                            .snap_timestamp
                            .or(resp.propagated_timestamp)
                            .map(HybridTime::from_raw);
                    }
                    let scanner_id = resp
                        .scanner_id
                        .clone()
                        .filter(|_| resp.has_more_results == Some(true));
                    let batch = self.take_batch(&resp, &sidecars, &replica.addr)?;
                    self.phase = match scanner_id {
                        Some(scanner_id) => Phase::Scanning {
                            tablet,
                            addr: replica.addr,
                            scanner_id,
                            call_seq_id: 1,
                        },
                        None => Phase::NextTablet { tablet },
                    };
                    self.finish_if_limit_reached();
                    return Ok(batch);
                }
                CallOutcome::Failed(err, _) => {
                    tracing::debug!(tablet = %tablet.tablet_id, addr = %replica.addr, error = %err, "scan open failed");
                    let refresh =
                        err.server_unusable() || err.retry_action() == RetryAction::RefreshAndRetry;
                    if err.server_unusable() {
                        self.bad_servers.insert(replica.addr.clone());
                    }
                    retrier.on_error(err).await?;
                    if refresh {
                        tablet = self.relocate(&tablet).await?;
                        self.phase = Phase::Open {
                            tablet: tablet.clone(),
                        };
                    }
                }
            }
        }
    }

    /// `Scanning`: one continue call; on failure either reopens (fault
    /// tolerant) or fails.
    pub(super) async fn continue_scan(&mut self) -> Result<Option<RowBatch>> {
        let Phase::Scanning {
            tablet,
            addr,
            scanner_id,
            call_seq_id,
        } = &self.phase
        else {
            return Ok(None);
        };
        let (tablet, addr) = (tablet.clone(), addr.clone());
        let req = ScanRequestPb {
            scanner_id: Some(scanner_id.clone()),
            call_seq_id: Some(*call_seq_id),
            batch_size_bytes: self.plan.batch_size_bytes,
            ..Default::default()
        };
        let opts = self.call_options(self.deadline());
        match self.call(&addr, &tablet.tablet_id, 1, &req, &opts).await {
            CallOutcome::Ok(resp, sidecars) => {
                let batch = self.take_batch(&resp, &sidecars, &addr)?;
                if resp.has_more_results == Some(true) {
                    if let Phase::Scanning { call_seq_id, .. } = &mut self.phase {
                        *call_seq_id += 1;
                    }
                } else {
                    // The server dropped the scanner itself.
                    self.phase = Phase::NextTablet { tablet };
                }
                self.finish_if_limit_reached();
                Ok(batch)
            }
            CallOutcome::Failed(err, code) => {
                if self.plan.ordered && resumable(&err, code) {
                    tracing::info!(
                        tablet = %tablet.tablet_id, %addr, error = %err,
                        "scan interrupted; reopening the tablet at another replica"
                    );
                    if let Phase::Scanning {
                        addr, scanner_id, ..
                    } = std::mem::replace(
                        &mut self.phase,
                        Phase::Open {
                            tablet: tablet.clone(),
                        },
                    ) {
                        // If the server is still there, free its scanner.
                        if !err.server_unusable() {
                            spawn_close(&self.client, addr, scanner_id);
                        }
                    }
                    if err.server_unusable() || matches!(err, Error::NotLeaderReplica { .. }) {
                        self.bad_servers.insert(addr);
                        self.client
                            .invalidate_tablet(self.table.id(), &tablet.tablet_id);
                    }
                    return Ok(None);
                }
                // The server-side scanner is unusable: forget it.
                self.phase = Phase::Done;
                if !self.plan.ordered && resumable(&err, code) {
                    Err(mid_scan_failure(&err, &tablet.tablet_id, &addr))
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Folds a successful answer into the state and decodes its rows;
    /// `None` for an answer without rows.
    pub(super) fn take_batch(
        &mut self,
        resp: &ScanResponsePb,
        sidecars: &[bytes::Bytes],
        addr: &str,
    ) -> Result<Option<RowBatch>> {
        if let Some(k) = &resp.last_primary_key {
            self.last_primary_key = Some(k.clone());
        }
        let with_addr = |e: Error| match e {
            Error::Protocol { message, .. } => Error::Protocol {
                addr: addr.to_owned(),
                message,
            },
            e => e,
        };
        let batch = if let Some(block) = &resp.columnar_data {
            RowBatch::from_columnar(&self.plan.projection, block, sidecars).map_err(with_addr)?
        } else if let Some(block) = &resp.data {
            RowBatch::from_rowwise(&self.plan.projection, block, sidecars).map_err(with_addr)?
        } else {
            return Ok(None);
        };
        if batch.is_empty() {
            return Ok(None);
        }
        let batch = batch.with_key_columns(self.plan.key_columns.clone());
        self.rows_returned += batch.num_rows() as u64;
        Ok(Some(batch))
    }

    /// Ends the scan once the row limit is met, closing an open scanner.
    pub(super) fn finish_if_limit_reached(&mut self) {
        if !self.limit_reached() {
            return;
        }
        if let Phase::Scanning {
            addr, scanner_id, ..
        } = std::mem::replace(&mut self.phase, Phase::Done)
        {
            spawn_close(&self.client, addr, scanner_id);
        }
    }
}
