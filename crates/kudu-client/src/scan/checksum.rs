//! Server-side checksums: [`ScanBuilder::checksum`] runs the tablet
//! server's `Checksum` RPC (the one `kudu cluster ksck --checksum_scan`
//! uses) over every tablet a scan would visit and sums the answers into a
//! [`Checksum`] (docs/kudu-protocol.md#checksum).
//!
//! The walk is the scanner's own: the same plan (projection, predicates,
//! key bounds, partition-key range, snapshot), tablet location with
//! pruning and non-covered ranges skipped, replica selection, open retries
//! and relocation after routing errors. What differs is the call: the
//! server scans and reduces rows to a 64-bit wrapping sum of per-row
//! CRC32Cs, so no row crosses the network.
//!
//! A checksum answer carries no resume key, so a tablet whose checksum
//! fails after it started (scanner expired, server gone, leader change) is
//! checksummed again from its start on another replica, at the same
//! snapshot, and its partial sum dropped: the result never counts a row
//! twice or misses one.

use std::sync::Arc;

use super::keep_alive::spawn_close;
use super::plan::Plan;
use super::replica::resumable;
use super::scanner::{Core, Phase};
use super::ScanBuilder;
use crate::client::tserver_error;
use crate::error::RetryAction;
use crate::hybrid_time::HybridTime;
use crate::meta::RemoteTablet;
use crate::pb::tserver::tablet_server_error_pb::Code as TsCode;
use crate::pb::tserver::tablet_server_service::Checksum as ChecksumRpc;
use crate::pb::tserver::{ChecksumRequestPb, ChecksumResponsePb, ContinueChecksumRequestPb};
use crate::retry::Retrier;
use crate::rpc::RpcContext;
use crate::{Error, Result};

/// How often one tablet's checksum is started over after failing midway
/// before the error is returned.
const MAX_TABLET_RESTARTS: u32 = 5;

/// Result of a server-side checksum over a table (or key range) at a
/// snapshot: [`ScanBuilder::checksum`], or the sum of
/// [`RowView::checksum`](super::RowView::checksum) over a snapshot scan.
///
/// Sums are order-independent, so checksums of disjoint parts (tablets,
/// key ranges) [`add`](Checksum::add) up to the checksum of the whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Checksum {
    /// Wrapping sum of the rows' CRC32Cs.
    pub sum: u64,
    /// Rows reduced.
    pub rows: u64,
    /// The snapshot the rows were read at, once known.
    pub snapshot: Option<HybridTime>,
}

impl Checksum {
    /// Adds `other`'s rows (wrapping sum); keeps this snapshot, or takes
    /// `other`'s if this one has none.
    pub fn add(&mut self, other: &Checksum) {
        self.sum = self.sum.wrapping_add(other.sum);
        self.rows = self.rows.wrapping_add(other.rows);
        self.snapshot = self.snapshot.or(other.snapshot);
    }

    /// Adds one row's checksum ([`RowView::checksum`](super::RowView::checksum)).
    pub fn add_row(&mut self, row_crc: u32) {
        self.sum = self.sum.wrapping_add(u64::from(row_crc));
        self.rows = self.rows.wrapping_add(1);
    }
}

impl ScanBuilder {
    /// Runs the tablet server `Checksum` RPC instead of a scan, over every
    /// tablet the scan would visit (same pruning, key bounds, predicates,
    /// snapshot, projection, replica selection, retries and relocation as
    /// a scan), and returns the summed checksum.
    ///
    /// Requires `READ_AT_SNAPSHOT` ([`snapshot`](Self::snapshot) or
    /// [`snapshot_now`](Self::snapshot_now)): with "now" the first
    /// server's time is used for every tablet and returned in
    /// [`Checksum::snapshot`]. Diff scans, row limits and resume keys are
    /// refused. The sum covers the projection's columns in projection
    /// order, so two tables compare equal only with the same projection;
    /// start it with the key columns (the server reads UNORDERED, so order
    /// does not matter otherwise). A snapshot older than the tablets'
    /// history retention fails like a scan, with
    /// [`Error::SnapshotTooOld`](crate::Error::SnapshotTooOld).
    ///
    /// The server's answer is a running sum: each continue call sends the
    /// previous answer's `checksum` back as `previous_checksum` and gets
    /// that plus the new rows (tested in `tests/checksum.rs`), while
    /// `rows_checksummed` counts only the call's own rows.
    pub async fn checksum(self) -> Result<Checksum> {
        let mut plan = Plan::new(&self.client, &self.table, &self.spec)?;
        if plan.snapshot.is_none() || plan.diff_start.is_some() {
            return Err(Error::InvalidArgument(
                "a checksum needs a READ_AT_SNAPSHOT scan (snapshot(ts) or snapshot_now()), \
                 not a diff scan or READ_LATEST"
                    .into(),
            ));
        }
        if plan.limit.is_some() || plan.resume_key.is_some() {
            return Err(Error::InvalidArgument(
                "a checksum covers whole tablets or key ranges: no row limit or resume key".into(),
            ));
        }
        // The server reduces rows in any order; ORDERED only costs a merge.
        plan.ordered = false;
        let mut core = Core::for_plan(&self.client, &self.table, plan);
        let mut total = Checksum {
            snapshot: core.snapshot,
            ..Checksum::default()
        };
        loop {
            match &core.phase {
                Phase::Done => break,
                Phase::Locate => core.locate().await?,
                Phase::NextTablet { tablet } => {
                    let tablet = tablet.clone();
                    core.advance_past(&tablet);
                }
                Phase::Open { tablet } => {
                    let tablet = tablet.clone();
                    let part = core.checksum_tablet(tablet).await?;
                    total.add(&part);
                    if core.snapshot.is_none() {
                        // A server that short-circuits an open (predicates
                        // matching nothing) names no snapshot; later
                        // tablets must still share one time.
                        core.snapshot = Some(core.client.server_clock().await?);
                    }
                    total.snapshot = core.snapshot;
                }
                // Checksums never leave a scanner open between steps.
                Phase::Scanning { tablet, .. } => {
                    core.phase = Phase::NextTablet {
                        tablet: tablet.clone(),
                    };
                }
            }
        }
        Ok(total)
    }
}

/// One pass over a tablet: its checksum, or an error another pass may
/// survive; with the tablet (relocated if needed).
type Pass = std::result::Result<(Checksum, Arc<RemoteTablet>), (Error, Arc<RemoteTablet>)>;

/// Outcome of one checksum call.
enum Answer {
    Ok(Box<ChecksumResponsePb>),
    Failed(Error, Option<TsCode>),
}

impl Core {
    /// Checksums all of `tablet` (within the plan's bounds), starting over
    /// on another replica if it fails midway; leaves `NextTablet`.
    async fn checksum_tablet(&mut self, mut tablet: Arc<RemoteTablet>) -> Result<Checksum> {
        let mut restarts = 0;
        loop {
            match self.checksum_tablet_once(&tablet).await? {
                Ok((part, t)) => {
                    self.phase = Phase::NextTablet { tablet: t };
                    return Ok(part);
                }
                Err((err, t)) => {
                    restarts += 1;
                    if restarts > MAX_TABLET_RESTARTS {
                        return Err(err);
                    }
                    tracing::info!(tablet = %t.tablet_id, error = %err, "checksum interrupted; starting the tablet over");
                    tablet = t;
                }
            }
        }
    }

    /// One pass over `tablet`: open (retried per [`Retrier`]), then
    /// continue calls. `Ok(Err(..))` = failed midway in a way that another
    /// pass may survive.
    async fn checksum_tablet_once(&mut self, tablet: &Arc<RemoteTablet>) -> Result<Pass> {
        let (mut tablet, addr, first) = self.open_checksum(tablet.clone()).await?;
        let mut part = Checksum {
            sum: first.checksum.unwrap_or(0),
            rows: rows_of(&first),
            snapshot: self.snapshot,
        };
        let mut scanner_id = first
            .scanner_id
            .clone()
            .filter(|_| first.has_more_results == Some(true));
        let mut call_seq_id = 1u32;
        while let Some(id) = scanner_id.take() {
            let req = ChecksumRequestPb {
                continue_request: Some(ContinueChecksumRequestPb {
                    scanner_id: id.clone(),
                    previous_checksum: part.sum,
                }),
                call_seq_id: Some(call_seq_id),
                batch_size_bytes: self.plan.batch_size_bytes,
                ..Default::default()
            };
            match self.checksum_call(&addr, &tablet.tablet_id, 1, &req).await {
                Answer::Ok(resp) => {
                    part.sum = resp.checksum.unwrap_or(part.sum);
                    part.rows = part.rows.wrapping_add(rows_of(&resp));
                    if resp.has_more_results == Some(true) {
                        scanner_id = Some(id);
                        call_seq_id += 1;
                    }
                }
                Answer::Failed(err, code) => {
                    if !resumable(&err, code) {
                        return Err(err);
                    }
                    if err.server_unusable() || matches!(err, Error::NotLeaderReplica { .. }) {
                        self.bad_servers.insert(addr.clone());
                    } else {
                        spawn_close(&self.client, addr.clone(), id);
                    }
                    if err.server_unusable() {
                        tablet = self.relocate(&tablet).await?;
                    }
                    return Ok(Err((err, tablet)));
                }
            }
        }
        Ok(Ok((part, tablet)))
    }

    /// Opens a checksum scanner on a replica of `tablet`, retrying and
    /// relocating like a scan's open; returns the tablet (possibly
    /// relocated), the server and its first answer.
    async fn open_checksum(
        &mut self,
        mut tablet: Arc<RemoteTablet>,
    ) -> Result<(Arc<RemoteTablet>, String, Box<ChecksumResponsePb>)> {
        let mut retrier = Retrier::new(
            format!(
                "starting a checksum of tablet {} of table '{}'",
                tablet.tablet_id,
                self.table.name()
            ),
            self.plan.timeout,
        );
        loop {
            retrier.begin_attempt();
            let Some(replica) = self.pick_replica(&tablet) else {
                let err = Error::ServiceUnavailable {
                    addr: format!("replicas of tablet {}", tablet.tablet_id),
                    message: "no healthy replica".into(),
                };
                self.bad_servers.clear();
                retrier.on_error(err).await?;
                tablet = self.relocate(&tablet).await?;
                continue;
            };
            let req = ChecksumRequestPb {
                new_request: Some(self.new_scan_request(&tablet)),
                batch_size_bytes: self.plan.batch_size_bytes,
                ..Default::default()
            };
            match self
                .checksum_call(&replica.addr, &tablet.tablet_id, retrier.attempts(), &req)
                .await
            {
                Answer::Ok(resp) => {
                    self.last_server = Some(replica.addr.clone());
                    if self.snapshot.is_none() {
                        self.snapshot = resp.snap_timestamp.map(HybridTime::from_raw);
                    }
                    return Ok((tablet, replica.addr, resp));
                }
                Answer::Failed(err, _) => {
                    tracing::debug!(tablet = %tablet.tablet_id, addr = %replica.addr, error = %err, "checksum open failed");
                    let refresh =
                        err.server_unusable() || err.retry_action() == RetryAction::RefreshAndRetry;
                    if err.server_unusable() {
                        self.bad_servers.insert(replica.addr.clone());
                    }
                    retrier.on_error(err).await?;
                    if refresh {
                        tablet = self.relocate(&tablet).await?;
                    }
                }
            }
        }
    }

    /// One Checksum call (`attempt` of its open, 1 for a continue).
    async fn checksum_call(
        &self,
        addr: &str,
        tablet_id: &str,
        attempt: u32,
        req: &ChecksumRequestPb,
    ) -> Answer {
        let opts = self.call_options(self.deadline());
        let rpc = RpcContext::attempt(attempt)
            .table(self.table.name())
            .tablet(tablet_id);
        match self
            .client
            .pool()
            .call_for::<ChecksumRpc>(rpc, addr, req, &opts)
            .await
        {
            Ok(resp) => match &resp.body.error {
                Some(e) => Answer::Failed(
                    tserver_error(e, addr, tablet_id),
                    TsCode::try_from(e.code).ok(),
                ),
                None => Answer::Ok(Box::new(resp.body)),
            },
            Err(e) => Answer::Failed(e, None),
        }
    }
}

fn rows_of(resp: &ChecksumResponsePb) -> u64 {
    u64::try_from(resp.rows_checksummed.unwrap_or(0)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_add_wrapping_and_keep_the_first_snapshot() {
        let mut a = Checksum {
            sum: u64::MAX,
            rows: 1,
            snapshot: None,
        };
        let b = Checksum {
            sum: 2,
            rows: 2,
            snapshot: Some(HybridTime::from_raw(7)),
        };
        a.add(&b);
        assert_eq!((a.sum, a.rows, a.snapshot), (1, 3, b.snapshot));
        a.add(&Checksum {
            snapshot: Some(HybridTime::from_raw(9)),
            ..Checksum::default()
        });
        assert_eq!(a.snapshot, Some(HybridTime::from_raw(7)));
        a.add_row(u32::MAX);
        assert_eq!((a.sum, a.rows), (u64::from(u32::MAX) + 1, 4));
    }
}
