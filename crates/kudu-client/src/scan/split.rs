//! Serializable scan splits ("scan tokens"): one [`Split`] per tablet (or
//! per key range of a tablet), each a complete scan description another
//! process can execute with [`KuduClient::scanner_for_split`].
//!
//! # Format
//!
//! [`Split::to_bytes`] writes the 4-byte magic `FSPL` followed by a
//! protobuf message (`SplitPb` below, this crate's own definition):
//!
//! | field | # | type |
//! | --- | --- | --- |
//! | version | 1 | uint32 (currently 1) |
//! | table_id, table_name, tablet_id | 2, 3, 4 | string |
//! | partition_key_start / _end | 5 / 6 | bytes |
//! | lower_bound / upper_bound (encoded primary keys) | 7 / 8 | bytes |
//! | projection (column names) | 9 | repeated string |
//! | predicates | 10 | repeated `kudu.ColumnPredicatePB` |
//! | snapshot_read | 11 | bool |
//! | snapshot (end of a diff) | 12 | fixed64 |
//! | diff_start | 13 | fixed64 |
//! | fault_tolerant | 14 | bool |
//! | batch_size_bytes, limit | 15, 16 | uint32, uint64 |
//! | replica_selection | 17 | uint32 (0 leader, 1 closest) |
//! | columnar, cache_blocks | 18, 19 | bool |
//! | resume_key | 20 | bytes |
//!
//! Readers reject a newer `version`, so a format change bumps it. Protobuf
//! keeps the format compact and lets a later version add fields.
//!
//! # Snapshots
//!
//! All splits of one call read the same snapshot: a snapshot scan without a
//! time, or a fault-tolerant one, gets the cluster's current time from
//! [`KuduClient::server_clock`] when the splits are made.
//!
//! # Resuming
//!
//! An ORDERED (fault-tolerant or diff) split can be resumed after a crash:
//! remember [`Scanner::last_primary_key`] with the rows processed, and
//! execute `split.with_resume_key(key)`; the scan restarts just after that
//! key, at the same snapshot.

use std::time::Instant;

use prost::Message;

use super::plan::Plan;
use super::scanner::Scanner;
use super::spec::{ReadMode, ReplicaSelection, ScanSpec};
use crate::client::{tserver_error, KuduClient};
use crate::hybrid_time::HybridTime;
use crate::meta::RemoteTablet;
use crate::pb;
use crate::pb::tserver::tablet_server_service::SplitKeyRange;
use crate::pb::tserver::SplitKeyRangeRequestPb;
use crate::retry::Retrier;
use crate::rpc::{CallOptions, RpcContext};
use crate::table::KuduTable;
use crate::{Error, Result};

/// Magic prefix of serialized splits.
const MAGIC: &[u8; 4] = b"FSPL";
/// Current format version.
const VERSION: u32 = 1;

/// The wire form of a [`Split`] (see the module docs).
#[derive(Clone, PartialEq, Message)]
struct SplitPb {
    #[prost(uint32, required, tag = "1")]
    version: u32,
    #[prost(string, required, tag = "2")]
    table_id: String,
    #[prost(string, required, tag = "3")]
    table_name: String,
    #[prost(string, required, tag = "4")]
    tablet_id: String,
    #[prost(bytes = "vec", optional, tag = "5")]
    partition_key_start: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "6")]
    partition_key_end: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "7")]
    lower_bound: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "8")]
    upper_bound: Option<Vec<u8>>,
    #[prost(string, repeated, tag = "9")]
    projection: Vec<String>,
    #[prost(message, repeated, tag = "10")]
    predicates: Vec<pb::ColumnPredicatePb>,
    #[prost(bool, optional, tag = "11")]
    snapshot_read: Option<bool>,
    #[prost(fixed64, optional, tag = "12")]
    snapshot: Option<u64>,
    #[prost(fixed64, optional, tag = "13")]
    diff_start: Option<u64>,
    #[prost(bool, optional, tag = "14")]
    fault_tolerant: Option<bool>,
    #[prost(uint32, optional, tag = "15")]
    batch_size_bytes: Option<u32>,
    #[prost(uint64, optional, tag = "16")]
    limit: Option<u64>,
    #[prost(uint32, optional, tag = "17")]
    replica_selection: Option<u32>,
    #[prost(bool, optional, tag = "18")]
    columnar: Option<bool>,
    #[prost(bool, optional, tag = "19")]
    cache_blocks: Option<bool>,
    #[prost(bytes = "vec", optional, tag = "20")]
    resume_key: Option<Vec<u8>>,
}

/// One independently executable piece of a scan: a tablet (or a primary
/// key range of one) plus the full scan description.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    table_id: String,
    table_name: String,
    tablet_id: String,
    partition_key_start: Vec<u8>,
    partition_key_end: Vec<u8>,
    lower_bound: Option<Vec<u8>>,
    upper_bound: Option<Vec<u8>>,
    projection: Vec<String>,
    predicates: Vec<pb::ColumnPredicatePb>,
    /// `None` = READ_LATEST, else the snapshot (end of a diff).
    snapshot: Option<HybridTime>,
    snapshot_read: bool,
    diff_start: Option<HybridTime>,
    fault_tolerant: bool,
    batch_size_bytes: Option<u32>,
    limit: Option<u64>,
    replica_selection: ReplicaSelection,
    columnar: bool,
    cache_blocks: bool,
    resume_key: Option<Vec<u8>>,
}

impl Split {
    /// The table's id (checked when the split is executed).
    pub fn table_id(&self) -> &str {
        &self.table_id
    }

    /// The table's name when the split was made.
    pub fn table_name(&self) -> &str {
        &self.table_name
    }

    /// The tablet this split reads.
    pub fn tablet_id(&self) -> &str {
        &self.tablet_id
    }

    /// Inclusive start of the split's partition key range (empty = −∞).
    pub fn partition_key_start(&self) -> &[u8] {
        &self.partition_key_start
    }

    /// Exclusive end of the split's partition key range (empty = +∞).
    pub fn partition_key_end(&self) -> &[u8] {
        &self.partition_key_end
    }

    /// Inclusive lower primary-key bound (encoded), if any.
    pub fn lower_bound_key(&self) -> Option<&[u8]> {
        self.lower_bound.as_deref()
    }

    /// Exclusive upper primary-key bound (encoded), if any.
    pub fn upper_bound_key(&self) -> Option<&[u8]> {
        self.upper_bound.as_deref()
    }

    /// The projected column names (without a diff scan's IS_DELETED).
    pub fn projection(&self) -> &[String] {
        &self.projection
    }

    /// The snapshot the split reads at (the end of a diff scan), if any.
    pub fn snapshot(&self) -> Option<HybridTime> {
        self.snapshot
    }

    /// The start of a diff scan, if this is one.
    pub fn diff_start(&self) -> Option<HybridTime> {
        self.diff_start
    }

    /// Whether the split is fault tolerant (ORDERED).
    pub fn is_fault_tolerant(&self) -> bool {
        self.fault_tolerant || self.diff_start.is_some()
    }

    /// The resume key, if set.
    pub fn resume_key(&self) -> Option<&[u8]> {
        self.resume_key.as_deref()
    }

    /// This split, continuing just after the row whose encoded primary key
    /// is `last_primary_key` (from [`Scanner::last_primary_key`]). Only
    /// ORDERED splits can resume; executing any other fails with
    /// `InvalidArgument`. An empty key clears the resume point.
    pub fn with_resume_key(mut self, last_primary_key: impl Into<Vec<u8>>) -> Split {
        self.resume_key = Some(last_primary_key.into()).filter(|k| !k.is_empty());
        self
    }

    /// A diff split as a snapshot scan of the same key range at the diff's
    /// end (the rows that exist then, with no IS_DELETED column), keeping
    /// its resume key: how a reader re-copies a range whose history before
    /// the diff's start is gone. Other splits are returned as they are.
    pub fn as_snapshot_at_end(&self) -> Split {
        Split {
            diff_start: None,
            ..self.clone()
        }
    }

    /// This split reading `columns` instead of its projection (e.g. after
    /// a column planned in was dropped or renamed: only the columns that
    /// exist now can be read).
    pub fn with_projection(mut self, columns: Vec<String>) -> Split {
        self.projection = columns;
        self
    }

    /// The scan description this split executes; adjust execution-local
    /// settings (timeout, keep-alive, batch size) before building a scanner
    /// with [`KuduClient::scan_builder`]`(..).with_spec(..)`.
    pub fn scan_spec(&self) -> ScanSpec {
        let mut spec = ScanSpec::new()
            .projection(&self.projection)
            .partition_key_range(
                self.partition_key_start.clone(),
                self.partition_key_end.clone(),
            )
            .fault_tolerant(self.fault_tolerant)
            .replica_selection(self.replica_selection)
            .columnar(self.columnar)
            .cache_blocks(self.cache_blocks);
        spec.raw_predicates = self.predicates.clone();
        spec.lower_bound = self.lower_bound.clone();
        spec.upper_bound = self.upper_bound.clone();
        spec.batch_size_bytes = self.batch_size_bytes;
        spec.limit = self.limit;
        spec.resume_key = self.resume_key.clone();
        spec = match (self.diff_start, self.snapshot) {
            (Some(start), Some(end)) => spec.diff(start, end),
            (_, Some(ts)) => spec.snapshot(ts),
            (_, None) if self.snapshot_read => spec.snapshot_now(),
            (_, None) => spec.read_mode(ReadMode::Latest),
        };
        spec
    }

    /// Serializes the split (see the module docs for the format).
    pub fn to_bytes(&self) -> Vec<u8> {
        let msg = SplitPb {
            version: VERSION,
            table_id: self.table_id.clone(),
            table_name: self.table_name.clone(),
            tablet_id: self.tablet_id.clone(),
            partition_key_start: Some(self.partition_key_start.clone()).filter(|k| !k.is_empty()),
            partition_key_end: Some(self.partition_key_end.clone()).filter(|k| !k.is_empty()),
            lower_bound: self.lower_bound.clone(),
            upper_bound: self.upper_bound.clone(),
            projection: self.projection.clone(),
            predicates: self.predicates.clone(),
            snapshot_read: Some(self.snapshot_read),
            snapshot: self.snapshot.map(HybridTime::raw),
            diff_start: self.diff_start.map(HybridTime::raw),
            fault_tolerant: Some(self.fault_tolerant),
            batch_size_bytes: self.batch_size_bytes,
            limit: self.limit,
            replica_selection: Some(match self.replica_selection {
                ReplicaSelection::LeaderOnly => 0,
                ReplicaSelection::ClosestReplica => 1,
            }),
            columnar: Some(self.columnar),
            cache_blocks: Some(self.cache_blocks),
            resume_key: self.resume_key.clone(),
        };
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&msg.encode_to_vec());
        out
    }

    /// Reads a split written by [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(bytes: &[u8]) -> Result<Split> {
        let bad = |why: String| Error::InvalidArgument(format!("not a valid scan split: {why}"));
        let body = bytes
            .strip_prefix(MAGIC.as_slice())
            .ok_or_else(|| bad("missing the FSPL prefix".into()))?;
        let msg = SplitPb::decode(body).map_err(|e| bad(e.to_string()))?;
        if msg.version == 0 || msg.version > VERSION {
            return Err(bad(format!(
                "format version {} (this client reads up to {VERSION})",
                msg.version
            )));
        }
        let replica_selection = match msg.replica_selection.unwrap_or(0) {
            0 => ReplicaSelection::LeaderOnly,
            1 => ReplicaSelection::ClosestReplica,
            v => return Err(bad(format!("unknown replica selection {v}"))),
        };
        if msg.diff_start.is_some() && msg.snapshot.is_none() {
            return Err(bad("a diff start without an end snapshot".into()));
        }
        Ok(Split {
            table_id: msg.table_id,
            table_name: msg.table_name,
            tablet_id: msg.tablet_id,
            partition_key_start: msg.partition_key_start.unwrap_or_default(),
            partition_key_end: msg.partition_key_end.unwrap_or_default(),
            lower_bound: msg.lower_bound,
            upper_bound: msg.upper_bound,
            projection: msg.projection,
            predicates: msg.predicates,
            snapshot_read: msg.snapshot_read.unwrap_or(msg.snapshot.is_some()),
            snapshot: msg.snapshot.map(HybridTime::from_raw),
            diff_start: msg.diff_start.map(HybridTime::from_raw),
            fault_tolerant: msg.fault_tolerant.unwrap_or(false),
            batch_size_bytes: msg.batch_size_bytes,
            limit: msg.limit,
            replica_selection,
            columnar: msg.columnar.unwrap_or(false),
            cache_blocks: msg.cache_blocks.unwrap_or(true),
            resume_key: msg.resume_key,
        })
    }
}

/// `max(a, b)` of inclusive lower bounds, where `None` is −∞.
fn max_lower(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b).to_vec()),
        (x, y) => x.or(y).map(<[u8]>::to_vec),
    }
}

/// `min(a, b)` of exclusive upper bounds, where `None` is +∞.
fn min_upper(a: Option<&[u8]>, b: Option<&[u8]>) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b).to_vec()),
        (x, y) => x.or(y).map(<[u8]>::to_vec),
    }
}

impl KuduClient {
    /// Cuts a scan of `table` into one [`Split`] per tablet (or per key
    /// range of about [`ScanSpec::split_size_bytes`]), in partition-key
    /// order. A spec whose predicates match nothing gives no splits. A row
    /// limit applies to each split separately. The tablets are asked of the
    /// master afresh (not the location cache), so a range partition added
    /// a moment ago is covered.
    ///
    /// Size-based cutting uses the tablet servers' `SplitKeyRange`, which
    /// cuts at the key bounds of *flushed* rowsets: data still in memory,
    /// or a tablet with a single rowset, gives one range.
    pub async fn scan_splits(&self, table: &KuduTable, spec: &ScanSpec) -> Result<Vec<Split>> {
        let plan = Plan::new(self, table, spec)?;
        if plan.matches_nothing {
            return Ok(Vec::new());
        }
        // Every split must read the same snapshot: fix "now" here.
        let snapshot = match plan.snapshot {
            None => None,
            Some(Some(ts)) => Some(ts),
            Some(None) => {
                // After everything this client has seen (a write acknowledged
                // at `seen` is only in snapshots later than `seen`).
                let seen = self.last_propagated_raw().unwrap_or(0);
                let now = self
                    .server_clock()
                    .await?
                    .max(HybridTime::from_raw(seen.saturating_add(1)));
                self.observe_timestamp(now.raw());
                Some(now)
            }
        };
        let deadline = Instant::now() + plan.timeout;
        let tablets = self
            .tablets_in_range(
                table,
                &plan.partition_key_start,
                &plan.partition_key_end,
                deadline,
            )
            .await?;
        let mut splits = Vec::with_capacity(tablets.len());
        for tablet in tablets {
            let pk_start = max_partition(&tablet.partition_key_start, &plan.partition_key_start);
            let pk_end = min_partition_end(&tablet.partition_key_end, &plan.partition_key_end);
            let ranges = match spec.split_size_bytes {
                Some(size) if size > 0 => {
                    self.split_key_ranges(table, &plan, &tablet, size).await?
                }
                _ => vec![(plan.lower_bound.clone(), plan.upper_bound.clone())],
            };
            for (lower, upper) in ranges {
                if let (Some(l), Some(u)) = (&lower, &upper) {
                    if l >= u {
                        continue;
                    }
                }
                splits.push(Split {
                    table_id: table.id().to_owned(),
                    table_name: table.name().to_owned(),
                    tablet_id: tablet.tablet_id.clone(),
                    partition_key_start: pk_start.clone(),
                    partition_key_end: pk_end.clone(),
                    lower_bound: lower,
                    upper_bound: upper,
                    projection: plan.projected_names.clone(),
                    predicates: plan.predicates.clone(),
                    snapshot,
                    snapshot_read: plan.snapshot.is_some(),
                    diff_start: plan.diff_start,
                    fault_tolerant: plan.ordered,
                    batch_size_bytes: plan.batch_size_bytes,
                    limit: plan.limit,
                    replica_selection: plan.replica_selection,
                    columnar: plan.columnar,
                    cache_blocks: plan.cache_blocks,
                    resume_key: None,
                });
            }
        }
        Ok(splits)
    }

    /// A scanner executing `split` (possibly made by another process).
    /// Fails with `TableNotFound` if the table was dropped, renamed or
    /// re-created since.
    pub async fn scanner_for_split(&self, split: &Split) -> Result<Scanner> {
        let table = self.open_table(&split.table_name).await?;
        self.scanner_for_split_on(&table, split)
    }

    /// A scanner executing `split` on `table` as opened by the caller (by
    /// id, so a renamed table is still found). Fails with `TableNotFound`
    /// if `table` is not the split's table.
    pub fn scanner_for_split_on(&self, table: &KuduTable, split: &Split) -> Result<Scanner> {
        if table.id() != split.table_id {
            return Err(Error::TableNotFound(format!(
                "{} with id {} (the name now belongs to table {}; the split is stale)",
                split.table_name,
                split.table_id,
                table.id()
            )));
        }
        Scanner::new(self, table, &split.scan_spec())
    }

    /// Asks a replica of `tablet` to cut the scan's key range into chunks
    /// of about `size` bytes (`SplitKeyRange`). Returns (lower, upper)
    /// primary-key bounds, already intersected with the scan's bounds.
    // Long on purpose: one retry loop per tablet whose outcomes share the
    // retrier and the tablet being cut.
    async fn split_key_ranges(
        &self,
        table: &KuduTable,
        plan: &Plan,
        tablet: &RemoteTablet,
        size: u64,
    ) -> Result<Vec<(Option<Vec<u8>>, Option<Vec<u8>>)>> {
        let mut retrier = Retrier::new(
            format!(
                "splitting tablet {} of table '{}' by size",
                tablet.tablet_id,
                table.name()
            ),
            plan.timeout,
        );
        let mut replicas: Vec<_> = tablet.replicas.clone();
        // Leader first: it has the freshest view of the tablet's size.
        replicas.sort_by_key(|r| r.role != crate::meta::Role::Leader);
        let columns = if plan.projected_columns.is_empty() {
            // Size estimates need at least one column; use the key.
            table
                .schema()
                .project(
                    &table
                        .schema()
                        .key_columns()
                        .iter()
                        .map(|c| c.name())
                        .collect::<Vec<_>>(),
                )?
                .columns_to_pb(crate::schema::SchemaPbOptions::PROJECTION)?
        } else {
            plan.projected_columns
                .iter()
                .filter(|c| c.r#type != crate::schema::DataType::IsDeleted.to_wire())
                .cloned()
                .collect()
        };
        let req = SplitKeyRangeRequestPb {
            tablet_id: tablet.tablet_id.as_bytes().to_vec(),
            start_primary_key: plan.lower_bound.clone(),
            stop_primary_key: plan.upper_bound.clone(),
            target_chunk_size_bytes: Some(size),
            columns,
            authz_token: table.authz_token().cloned(),
        };
        let mut i = 0usize;
        loop {
            retrier.begin_attempt();
            let Some(replica) = replicas.get(i % replicas.len().max(1)) else {
                return Err(Error::ServiceUnavailable {
                    addr: format!("tablet {}", tablet.tablet_id),
                    message: "the tablet has no replicas".into(),
                });
            };
            i += 1;
            let opts =
                CallOptions::with_deadline(tokio::time::Instant::from_std(retrier.deadline()));
            let rpc = RpcContext::attempt(retrier.attempts())
                .table(table.name())
                .tablet(&tablet.tablet_id);
            let result = match self
                .pool()
                .call_for::<SplitKeyRange>(rpc, &replica.addr, &req, &opts)
                .await
            {
                Ok(resp) => match resp.body.error {
                    Some(e) => Err(tserver_error(&e, &replica.addr, &tablet.tablet_id)),
                    None => Ok(resp.body.ranges),
                },
                Err(e) => Err(e),
            };
            match result {
                Ok(ranges) if ranges.is_empty() => {
                    return Ok(vec![(plan.lower_bound.clone(), plan.upper_bound.clone())])
                }
                Ok(ranges) => {
                    return Ok(ranges
                        .into_iter()
                        .map(|r| {
                            let start = r.start_primary_key.filter(|k| !k.is_empty());
                            let stop = r.stop_primary_key.filter(|k| !k.is_empty());
                            (
                                max_lower(plan.lower_bound.as_deref(), start.as_deref()),
                                min_upper(plan.upper_bound.as_deref(), stop.as_deref()),
                            )
                        })
                        .collect())
                }
                Err(e) => retrier.on_error(e).await?,
            }
        }
    }
}

fn max_partition(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.max(b).to_vec()
}

/// The smaller of two exclusive partition ends, empty being +∞.
fn min_partition_end(a: &[u8], b: &[u8]) -> Vec<u8> {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_vec(),
        (_, true) => a.to_vec(),
        _ => a.min(b).to_vec(),
    }
}

#[cfg(test)]
mod tests;
