//! Routing operations to tablets and sending one `Write` per tablet.
//!
//! A flush goes through two steps:
//!
//! 1. `Dispatcher::route` turns the buffered operations into one
//!    `TabletGroup` per tablet, keeping the order in which the operations
//!    were applied. A row whose partition key falls in a non-covered range
//!    fails on its own (a `NonCoveredRange` row error); the rest go on.
//! 2. `Dispatcher::dispatch` sends the groups concurrently, at most
//!    `max_batches_in_flight` at a time for the whole session. A group is
//!    cut into requests of at most `max_batch_bytes` of encoded rows, sent
//!    one after the other to the tablet's leader.
//!
//! # Ordering
//!
//! Operations on one key always go to one tablet, and the rows of a tablet
//! are never reordered: inside a group they keep their apply order, the
//! requests of a group are sent sequentially, and a group waits until the
//! previous group dispatched for the same tablet has finished (a per-tablet
//! chain of completion signals, registered synchronously at dispatch time, so
//! the chain order is the flush order even when flushes overlap).
//!
//! # Retries and exactly-once
//!
//! Each request gets one request id (client id + sequence number) that is
//! kept across all its attempts; only `attempt_no` grows, so a tablet server
//! (or the next leader) answers a retry of an applied write from its result
//! cache instead of applying it twice. Failed attempts are classified by
//! [`Error::retry_action`]: stale routing (not the leader, tablet not
//! found) and an unusable server ([`Error::server_unusable`]) drop the tablet from the location cache and
//! look it up again by its start key; a busy server is retried after a
//! backoff; anything else, or running out of time, fails the request, and
//! every row in it becomes a row error carrying that cause. A refused authz
//! token (they expire after 5 minutes by default) is replaced once per
//! request by a fresh one from the master, kept for the session's later
//! requests to that table.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Semaphore};

use crate::client::{tserver_error, KuduClient};
use crate::error::RowError;
use crate::error::{Error, KuduStatus, Result, RetryAction, RpcErrorCode};
use crate::master::status_from_pb;
use crate::meta::{Lookup, RemoteTablet};
use crate::pb;
use crate::pb::tserver::tablet_server_service::Write;
use crate::retry::Retrier;
use crate::row_ops::OpType;
use crate::row_ops::OpsEncoder;
use crate::rpc::CallOptions;
use crate::schema::SchemaPbOptions;
use crate::table::KuduTable;
use crate::write::buffered::BufferedOp;
use crate::write::copy::{CopiedRows, EncodedChunk};
use crate::write::options::ExternalConsistencyMode;
use crate::write::outcome::{add, status_of, FlushOutcome, MetricsInner};

/// Settings every batch of a session shares.
#[derive(Debug, Clone)]
pub(crate) struct BatchConfig {
    /// Bound on one request's attempts, from its first send to its answer.
    pub(crate) timeout: Duration,
    pub(crate) consistency: ExternalConsistencyMode,
    /// Cap on encoded row bytes per request.
    pub(crate) max_batch_bytes: usize,
    /// Concurrent requests per session.
    pub(crate) max_batches_in_flight: usize,
}

/// The operations of one tablet, in apply order.
#[derive(Debug)]
pub(crate) struct TabletGroup {
    table: KuduTable,
    tablet: Arc<RemoteTablet>,
    ops: Vec<BufferedOp>,
}

/// Operations grouped by tablet, plus the rows that could not be routed.
#[derive(Debug, Default)]
pub(crate) struct Routed {
    groups: Vec<TabletGroup>,
    outcome: FlushOutcome,
}

/// The rows one request carries, in request order: buffered operations,
/// or rows of a scan batch encoded straight into the request
/// ([`crate::write::copy`]).
#[derive(Debug)]
pub(crate) enum ChunkRows {
    Ops(Vec<BufferedOp>),
    Copied(CopiedRows),
}

impl ChunkRows {
    fn len(&self) -> usize {
        match self {
            ChunkRows::Ops(ops) => ops.len(),
            ChunkRows::Copied(rows) => rows.len(),
        }
    }

    fn op(&self, i: usize) -> OpType {
        match self {
            ChunkRows::Ops(ops) => ops[i].op,
            ChunkRows::Copied(rows) => rows.op(i),
        }
    }

    fn row_error(&self, i: usize, status: KuduStatus) -> RowError {
        match self {
            ChunkRows::Ops(ops) => ops[i].row_error(status),
            ChunkRows::Copied(rows) => rows.row_error(i, status),
        }
    }

    /// Fails every row with `err`, which is kept as a cause.
    fn fail_all(&self, outcome: &mut FlushOutcome, err: Error) {
        match self {
            ChunkRows::Ops(ops) => outcome.fail_all(ops, err),
            ChunkRows::Copied(rows) => {
                let status = status_of(&err);
                outcome
                    .row_errors
                    .extend((0..rows.len()).map(|i| rows.row_error(i, status.clone())));
                outcome.causes.push(err);
            }
        }
    }

    /// The rows as buffered operations, to route again; rows that cannot
    /// be rebuilt fail in the returned outcome.
    fn into_ops(self) -> (Vec<BufferedOp>, FlushOutcome) {
        match self {
            ChunkRows::Ops(ops) => (ops, FlushOutcome::default()),
            ChunkRows::Copied(rows) => rows.into_ops(),
        }
    }
}

/// What a dispatched batch shares with its session.
#[derive(Debug)]
struct SendCtx {
    client: KuduClient,
    cfg: BatchConfig,
    metrics: Arc<MetricsInner>,
    permits: Arc<Semaphore>,
    /// Authz tokens fetched after the table's own expired, by table id.
    tokens: Mutex<HashMap<String, pb::security::SignedTokenPb>>,
}

impl SendCtx {
    /// The freshest authz token known for `table`.
    fn authz_token(&self, table: &KuduTable) -> Option<pb::security::SignedTokenPb> {
        let cached = self
            .tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(table.id())
            .cloned();
        cached.or_else(|| table.authz_token().cloned())
    }

    /// Fetches a new authz token for `table` (GetTableSchema) after a
    /// tablet server refused the one sent.
    async fn refresh_authz_token(
        &self,
        table: &KuduTable,
    ) -> Result<Option<pb::security::SignedTokenPb>> {
        let fresh = self.client.open_table(table.name()).await?;
        if fresh.id() != table.id() {
            return Err(Error::TableNotFound(format!(
                "{} (id {}; the name now belongs to table {})",
                table.name(),
                table.id(),
                fresh.id()
            )));
        }
        let token = fresh.authz_token().cloned();
        if let Some(t) = &token {
            self.tokens
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(table.id().to_owned(), t.clone());
        }
        Ok(token)
    }
}

/// Routes and sends the flushes of one session.
#[derive(Debug)]
pub(crate) struct Dispatcher {
    ctx: Arc<SendCtx>,
    chains: TabletChains,
}

impl Dispatcher {
    pub(crate) fn new(client: KuduClient, cfg: BatchConfig, metrics: Arc<MetricsInner>) -> Self {
        let permits = Arc::new(Semaphore::new(cfg.max_batches_in_flight.max(1)));
        Dispatcher {
            ctx: Arc::new(SendCtx {
                client,
                cfg,
                metrics,
                permits,
                tokens: Mutex::new(HashMap::new()),
            }),
            chains: TabletChains::default(),
        }
    }

    /// Groups `ops` by tablet (see [`route`]).
    pub(crate) async fn route(&self, ops: Vec<BufferedOp>) -> Routed {
        let deadline = Instant::now() + self.ctx.cfg.timeout;
        route(&self.ctx.client, ops, deadline).await
    }

    /// Starts sending `routed`: the returned future resolves when every
    /// group has finished. Each group first waits for the group dispatched
    /// before it for the same tablet, so dispatch order is write order.
    pub(crate) fn dispatch(
        &mut self,
        routed: Routed,
    ) -> impl Future<Output = FlushOutcome> + Send + 'static {
        let mut groups = Vec::with_capacity(routed.groups.len());
        for group in routed.groups {
            let mut turn = self.chains.enqueue(&group.tablet.tablet_id);
            let ctx = self.ctx.clone();
            groups.push(async move {
                turn.wait().await;
                // The semaphore is never closed; if it were, send anyway.
                let _permit = ctx.permits.clone().acquire_owned().await.ok();
                let outcome = write_group(&ctx, group).await;
                drop(turn);
                outcome
            });
        }
        let ctx = self.ctx.clone();
        let mut outcome = routed.outcome;
        async move {
            for o in futures::future::join_all(groups).await {
                outcome.merge(o);
            }
            add(&ctx.metrics.row_errors, outcome.row_errors.len() as u64);
            outcome
        }
    }

    /// Starts sending one request encoded from scan rows, after the
    /// requests dispatched before it for the same tablet.
    pub(crate) fn dispatch_chunk(
        &mut self,
        chunk: Box<EncodedChunk>,
    ) -> impl Future<Output = FlushOutcome> + Send + 'static {
        let mut turn = self.chains.enqueue(&chunk.tablet.tablet_id);
        let ctx = self.ctx.clone();
        async move {
            turn.wait().await;
            let _permit = ctx.permits.clone().acquire_owned().await.ok();
            let EncodedChunk {
                table,
                tablet,
                encoder,
                rows,
                _budget,
            } = *chunk;
            let rows = ChunkRows::Copied(rows);
            let mut outcome = FlushOutcome::default();
            let bytes = encoder.encoded_size() as u64;
            match request(&ctx, &table, &tablet, encoder) {
                Ok(req) => {
                    let end = send_chunk(&ctx, &table, tablet, req, rows, bytes, outcome).await;
                    outcome = finish_chunk(&ctx, &table, end).await;
                }
                Err(e) => {
                    add(&ctx.metrics.batches_failed, 1);
                    rows.fail_all(&mut outcome, e);
                }
            }
            drop(turn);
            add(&ctx.metrics.row_errors, outcome.row_errors.len() as u64);
            outcome
        }
    }

    /// Routes and sends `ops`, waiting for the answer.
    pub(crate) async fn send(&mut self, ops: Vec<BufferedOp>) -> FlushOutcome {
        if ops.is_empty() {
            return FlushOutcome::default();
        }
        let routed = self.route(ops).await;
        self.dispatch(routed).await
    }
}

/// Keeps the groups dispatched for one tablet in dispatch order: each
/// [`Turn`] waits until the previous turn of its tablet has been dropped.
/// Turns are handed out synchronously by the one task that dispatches, so
/// the order cannot depend on how spawned tasks get scheduled.
#[derive(Debug, Default)]
struct TabletChains {
    /// tablet id → "previous turn finished" signal of the newest turn.
    last: HashMap<String, oneshot::Receiver<()>>,
}

impl TabletChains {
    /// The next turn for `tablet`.
    fn enqueue(&mut self, tablet: &str) -> Turn {
        // Forget tablets whose newest turn has finished.
        self.last
            .retain(|_, rx| matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty)));
        let (done, rx) = oneshot::channel();
        let previous = self.last.insert(tablet.to_owned(), rx);
        Turn {
            previous,
            _done: done,
        }
    }
}

/// One group's place in its tablet's chain; dropping it lets the next go.
#[derive(Debug)]
struct Turn {
    previous: Option<oneshot::Receiver<()>>,
    _done: oneshot::Sender<()>,
}

impl Turn {
    /// Waits until every earlier turn of the tablet has finished.
    async fn wait(&mut self) {
        if let Some(previous) = self.previous.take() {
            // Err only means the sender is gone: that turn is over.
            let _ = previous.await;
        }
    }
}

/// Groups `ops` by the tablet covering each one's partition key, keeping
/// apply order inside each group. Rows in non-covered ranges, or whose
/// lookup failed, become row errors.
async fn route(client: &KuduClient, ops: Vec<BufferedOp>, deadline: Instant) -> Routed {
    let mut routed = Routed::default();
    let mut group_of: HashMap<String, usize> = HashMap::new();
    // Tablets found during this pass, per table: most rows of a flush hit
    // one of them, which saves a lock and a lookup per row.
    let mut seen: HashMap<String, BTreeMap<Vec<u8>, Arc<RemoteTablet>>> = HashMap::new();
    // A table whose lookups failed fails its remaining rows at once.
    let mut failed_tables: HashMap<String, KuduStatus> = HashMap::new();
    for op in ops {
        let table_id = op.table.id();
        if let Some(status) = failed_tables.get(table_id) {
            routed.outcome.row_errors.push(op.row_error(status.clone()));
            continue;
        }
        let known = seen.get(table_id).and_then(|m| {
            m.range::<[u8], _>((
                std::ops::Bound::Unbounded,
                std::ops::Bound::Included(op.partition_key.as_slice()),
            ))
            .next_back()
            .map(|(_, t)| t)
            .filter(|t| t.contains(&op.partition_key))
            .cloned()
        });
        let tablet = match known {
            Some(t) => t,
            None => match client
                .locate_with_retry(&op.table, &op.partition_key, deadline)
                .await
            {
                Ok(Lookup::Tablet(t)) => {
                    seen.entry(table_id.to_owned())
                        .or_default()
                        .insert(t.partition_key_start.clone(), t.clone());
                    t
                }
                Ok(Lookup::NonCovered { .. } | Lookup::Miss) => {
                    let err = Error::NonCoveredRange {
                        table: op.table.name().to_owned(),
                        partition_key: op.partition_key.clone(),
                    };
                    routed.outcome.fail_all(std::slice::from_ref(&op), err);
                    continue;
                }
                Err(e) => {
                    failed_tables.insert(table_id.to_owned(), status_of(&e));
                    routed.outcome.fail_all(std::slice::from_ref(&op), e);
                    continue;
                }
            },
        };
        let idx = *group_of.entry(tablet.tablet_id.clone()).or_insert_with(|| {
            routed.groups.push(TabletGroup {
                table: op.table.clone(),
                tablet: tablet.clone(),
                ops: Vec::new(),
            });
            routed.groups.len() - 1
        });
        routed.groups[idx].ops.push(op);
    }
    routed
}

/// Cuts `ops` into runs of at most `cap` encoded bytes (a single larger row
/// goes alone).
fn chunks(ops: Vec<BufferedOp>, cap: usize) -> VecDeque<Vec<BufferedOp>> {
    // The common case, one request: no copy of the operations.
    if !ops.is_empty() && ops.iter().map(|op| op.size).sum::<usize>() <= cap {
        return VecDeque::from([ops]);
    }
    let mut out = VecDeque::new();
    let mut cur = Vec::new();
    let mut bytes = 0usize;
    for op in ops {
        if !cur.is_empty() && bytes + op.size > cap {
            out.push_back(std::mem::take(&mut cur));
            bytes = 0;
        }
        bytes += op.size;
        cur.push(op);
    }
    if !cur.is_empty() {
        out.push_back(cur);
    }
    out
}

/// How one request ended.
enum ChunkEnd {
    /// Answered or failed for good; `tablet` is the freshest location.
    Done(Arc<RemoteTablet>, FlushOutcome),
    /// The key range now belongs to another tablet (partitions changed):
    /// route these rows again.
    Moved(ChunkRows),
}

/// The outcome of a request sent on its own (not part of a group): rows
/// whose tablet moved are routed again and sent.
async fn finish_chunk(ctx: &SendCtx, table: &KuduTable, end: ChunkEnd) -> FlushOutcome {
    match end {
        ChunkEnd::Done(_, outcome) => outcome,
        ChunkEnd::Moved(rows) => {
            let (ops, mut outcome) = rows.into_ops();
            tracing::debug!(
                table = table.name(),
                rows = ops.len(),
                "tablet moved; routing its rows again"
            );
            let deadline = Instant::now() + ctx.cfg.timeout;
            let routed = route(&ctx.client, ops, deadline).await;
            outcome.merge(routed.outcome);
            for group in routed.groups {
                outcome.merge(Box::pin(write_group(ctx, group)).await);
            }
            outcome
        }
    }
}

/// Sends one tablet's operations, request after request.
async fn write_group(ctx: &SendCtx, group: TabletGroup) -> FlushOutcome {
    let mut outcome = FlushOutcome::default();
    let mut work = VecDeque::from([group]);
    while let Some(TabletGroup {
        table,
        mut tablet,
        ops,
    }) = work.pop_front()
    {
        let mut pending = chunks(ops, ctx.cfg.max_batch_bytes);
        while let Some(chunk) = pending.pop_front() {
            match write_chunk(ctx, &table, tablet.clone(), chunk).await {
                ChunkEnd::Done(latest, o) => {
                    tablet = latest;
                    outcome.merge(o);
                }
                ChunkEnd::Moved(rows) => {
                    let (mut rest, failed) = rows.into_ops();
                    outcome.merge(failed);
                    rest.extend(pending.drain(..).flatten());
                    tracing::debug!(table = table.name(), tablet = %tablet.tablet_id, rows = rest.len(), "tablet moved; routing its rows again");
                    let deadline = Instant::now() + ctx.cfg.timeout;
                    let routed = route(&ctx.client, rest, deadline).await;
                    outcome.merge(routed.outcome);
                    work.extend(routed.groups);
                }
            }
        }
    }
    outcome
}

/// Sends one request to the tablet's leader, retrying per the rules in the
/// module docs with one request id.
async fn write_chunk(
    ctx: &SendCtx,
    table: &KuduTable,
    tablet: Arc<RemoteTablet>,
    ops: Vec<BufferedOp>,
) -> ChunkEnd {
    let mut outcome = FlushOutcome::default();
    match encode_chunk(ctx, table, &tablet, ops, &mut outcome) {
        Some((req, sent, bytes)) => send_chunk(ctx, table, tablet, req, sent, bytes, outcome).await,
        None => ChunkEnd::Done(tablet, outcome),
    }
}

/// The write request for `ops`, the operations it carries and their
/// encoded bytes; `None` if no operation is left to send (the failed ones
/// are in `outcome`).
fn encode_chunk(
    ctx: &SendCtx,
    table: &KuduTable,
    tablet: &RemoteTablet,
    ops: Vec<BufferedOp>,
    outcome: &mut FlushOutcome,
) -> Option<(pb::tserver::WriteRequestPb, ChunkRows, u64)> {
    let mut encoder = OpsEncoder::new(table.schema());
    encoder.reserve(ops.iter().map(|op| op.size).sum());
    let mut sent = Vec::with_capacity(ops.len());
    for op in ops {
        match encoder.push(op.op, &op.row) {
            Ok(()) => sent.push(op),
            // Validated at apply time, so this is not expected; fail the row.
            Err(e) => outcome.fail_all(std::slice::from_ref(&op), e),
        }
    }
    if sent.is_empty() {
        return None;
    }
    let bytes = encoder.encoded_size() as u64;
    match request(ctx, table, tablet, encoder) {
        Ok(req) => Some((req, ChunkRows::Ops(sent), bytes)),
        Err(e) => {
            outcome.fail_all(&sent, e);
            add(&ctx.metrics.batches_failed, 1);
            None
        }
    }
}

/// The write request carrying `encoder`'s rows to `tablet`.
fn request(
    ctx: &SendCtx,
    table: &KuduTable,
    tablet: &RemoteTablet,
    encoder: OpsEncoder,
) -> Result<pb::tserver::WriteRequestPb> {
    let schema = table.schema().to_pb(SchemaPbOptions::WRITE)?;
    Ok(pb::tserver::WriteRequestPb {
        tablet_id: tablet.tablet_id.as_bytes().to_vec(),
        schema: Some(schema),
        row_operations: Some(encoder.finish()),
        external_consistency_mode: Some(ctx.cfg.consistency.to_pb()),
        authz_token: ctx.authz_token(table),
        ..Default::default()
    })
}

/// Sends `req` (carrying `sent`) until it is answered, fails for good, or
/// the tablet turns out to have moved.
// Long on purpose: one retry loop whose branches (authz token refresh,
// classification, relocation) share the request, retrier and outcome.
async fn send_chunk(
    ctx: &SendCtx,
    table: &KuduTable,
    mut tablet: Arc<RemoteTablet>,
    mut req: pb::tserver::WriteRequestPb,
    sent: ChunkRows,
    bytes: u64,
    mut outcome: FlushOutcome,
) -> ChunkEnd {
    let request = ctx.client.track_request();
    let mut retrier = Retrier::new(
        format!(
            "write of {} operation(s) to tablet {} of table '{}'",
            sent.len(),
            tablet.tablet_id,
            table.name()
        ),
        ctx.cfg.timeout,
    );
    let mut token_refreshed = false;
    loop {
        retrier.begin_attempt();
        add(&ctx.metrics.write_attempts, 1);
        req.propagated_timestamp = ctx.client.last_propagated_raw();
        let err = match attempt(
            ctx,
            &tablet,
            &req,
            request.for_attempt(retrier.attempts()),
            retrier.deadline(),
        )
        .await
        {
            Ok(resp) => {
                record_success(ctx, &sent, &resp, bytes, &mut outcome);
                return ChunkEnd::Done(tablet, outcome);
            }
            Err(e) => e,
        };
        if is_invalid_authz_token(&err) && !token_refreshed {
            // Expired or unknown token: fetch a new one and try again at
            // once (one refresh per request; a second refusal is final).
            token_refreshed = true;
            match ctx.refresh_authz_token(table).await {
                Ok(token) => {
                    req.authz_token = token;
                    continue;
                }
                Err(e) => {
                    add(&ctx.metrics.batches_failed, 1);
                    sent.fail_all(&mut outcome, e);
                    return ChunkEnd::Done(tablet, outcome);
                }
            }
        }
        let relocate = err.retry_action() == RetryAction::RefreshAndRetry || err.server_unusable();
        tracing::debug!(tablet = %tablet.tablet_id, attempt = retrier.attempts(), error = %err, "write attempt failed");
        let verdict = retrier.on_error(err).await;
        if let Err(fatal) = verdict {
            add(&ctx.metrics.batches_failed, 1);
            tracing::warn!(table = table.name(), tablet = %tablet.tablet_id, rows = sent.len(), error = %fatal, "write batch failed");
            sent.fail_all(&mut outcome, fatal);
            return ChunkEnd::Done(tablet, outcome);
        }
        if relocate {
            ctx.client.invalidate_tablet(table.id(), &tablet.tablet_id);
            match ctx
                .client
                .locate_with_retry(table, &tablet.partition_key_start, retrier.deadline())
                .await
            {
                Ok(Lookup::Tablet(t)) if t.tablet_id == tablet.tablet_id => tablet = t,
                Ok(_) => return ChunkEnd::Moved(sent),
                Err(e) => {
                    add(&ctx.metrics.batches_failed, 1);
                    sent.fail_all(&mut outcome, e);
                    return ChunkEnd::Done(tablet, outcome);
                }
            }
        }
    }
}

fn is_invalid_authz_token(err: &Error) -> bool {
    matches!(
        err,
        Error::Rpc {
            code: RpcErrorCode::InvalidAuthorizationToken,
            ..
        }
    )
}

/// One attempt: send to the leader, map a batch-level error.
async fn attempt(
    ctx: &SendCtx,
    tablet: &RemoteTablet,
    req: &pb::tserver::WriteRequestPb,
    request_id: pb::rpc::RequestIdPb,
    deadline: Instant,
) -> Result<pb::tserver::WriteResponsePb> {
    let leader = tablet.leader().ok_or_else(|| Error::NotLeaderReplica {
        tablet_id: tablet.tablet_id.clone(),
        addr: "(no leader known)".into(),
    })?;
    let opts =
        CallOptions::with_deadline(tokio::time::Instant::from_std(deadline)).request_id(request_id);
    let resp = ctx
        .client
        .pool()
        .call::<Write>(&leader.addr, req, &opts)
        .await?
        .body;
    if let Some(e) = &resp.error {
        return Err(tserver_error(e, &leader.addr, &tablet.tablet_id));
    }
    Ok(resp)
}

fn record_success(
    ctx: &SendCtx,
    sent: &ChunkRows,
    resp: &pb::tserver::WriteResponsePb,
    bytes: u64,
    outcome: &mut FlushOutcome,
) {
    if let Some(ts) = resp.timestamp {
        ctx.client.observe_timestamp(ts);
    }
    let mut failed = vec![false; sent.len()];
    for e in &resp.per_row_errors {
        match usize::try_from(e.row_index)
            .ok()
            .filter(|&i| i < sent.len())
        {
            Some(i) if !failed[i] => {
                failed[i] = true;
                outcome
                    .row_errors
                    .push(sent.row_error(i, status_from_pb(&e.error)));
            }
            _ => tracing::warn!(
                row_index = e.row_index,
                rows = sent.len(),
                "write response names a row the request did not have; ignored"
            ),
        }
    }
    let m = &ctx.metrics;
    let mut written = [0u64; 14];
    for (i, _) in failed.iter().enumerate().filter(|(_, f)| !**f) {
        if let Some(n) = written.get_mut(usize::from(sent.op(i).to_wire())) {
            *n += 1;
        }
    }
    for (counter, n) in m.written.iter().zip(written) {
        if n > 0 {
            add(counter, n);
        }
    }
    add(&m.bytes_written, bytes);
    add(&m.batches_written, 1);
    m.record_response(resp.resource_metrics.as_ref());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::PartitionSchema;
    use crate::row_ops::OpType;
    use crate::schema::{ColumnSchema, DataType, Schema};
    use crate::write::buffered::encoded_size;
    use std::collections::BTreeMap as Map;

    fn table() -> KuduTable {
        let schema = Schema::new(vec![
            ColumnSchema::builder("k", DataType::Int32)
                .key(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("v", DataType::Int32)
                .nullable(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("s", DataType::String)
                .nullable(true)
                .build()
                .unwrap(),
        ])
        .unwrap();
        let ps = PartitionSchema::builder(&schema)
            .add_hash_partitions(&["k"], 4, 0)
            .build()
            .unwrap();
        KuduTable::new(
            "t".into(),
            "id".into(),
            schema,
            ps,
            1,
            None,
            None,
            Map::new(),
            None,
        )
    }

    #[test]
    fn size_estimate_matches_the_encoder() {
        let t = table();
        let mut row = t.new_row();
        row.set_i32("k", 1)
            .unwrap()
            .set_null("v")
            .unwrap()
            .set_str("s", "hello")
            .unwrap();
        for op in [OpType::Insert, OpType::Delete, OpType::Update] {
            let mut enc = OpsEncoder::new(t.schema());
            enc.push(op, &row).unwrap();
            assert_eq!(encoded_size(op, &row), enc.encoded_size(), "{op}");
        }
    }

    #[test]
    fn validation_names_the_problem() {
        let t = table();
        let mut row = t.new_row();
        row.set_i32("v", 1).unwrap();
        let err = BufferedOp::new(t.clone(), OpType::Insert, row).unwrap_err();
        assert!(
            err.to_string()
                .contains("primary key column 'k' is not set"),
            "{err}"
        );
        let err = BufferedOp::new(t.clone(), OpType::SplitRow, t.new_row()).unwrap_err();
        assert!(err.to_string().contains("not a write operation"), "{err}");
    }

    #[test]
    fn chunks_respect_the_cap_and_order() {
        let t = table();
        let ops: Vec<BufferedOp> = (0..10)
            .map(|i| {
                let mut r = t.new_row();
                r.set_i32("k", i).unwrap();
                let mut op = BufferedOp::new(t.clone(), OpType::Upsert, r).unwrap();
                op.size = 40;
                op
            })
            .collect();
        let c = chunks(ops, 100);
        assert_eq!(
            c.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![2, 2, 2, 2, 2]
        );
        let keys: Vec<i32> = c
            .iter()
            .flatten()
            .map(|o| o.row.get_i32("k").unwrap())
            .collect();
        assert_eq!(keys, (0..10).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn turns_of_one_tablet_run_in_dispatch_order() {
        let mut chains = TabletChains::default();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // The first turn of tablet "t" is the slowest; "u" is independent.
        for (name, tablet, delay_ms) in [
            ("t1", "t", 60),
            ("t2", "t", 0),
            ("u1", "u", 20),
            ("t3", "t", 10),
        ] {
            let mut turn = chains.enqueue(tablet);
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                turn.wait().await;
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                order.lock().unwrap().push(name);
                drop(turn);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec!["u1", "t1", "t2", "t3"]);
        // Finished chains are forgotten.
        chains.enqueue("v");
        assert_eq!(chains.last.len(), 1);
    }

    #[test]
    fn request_watermark_is_the_oldest_outstanding() {
        let client = KuduClient::new(&["127.0.0.1:1"]).unwrap();
        let a = client.track_request();
        let b = client.track_request();
        assert_eq!(b.for_attempt(1).first_incomplete_seq_no, a.seq_no());
        assert_eq!(b.for_attempt(3).attempt_no, 3);
        drop(a);
        assert_eq!(b.for_attempt(2).first_incomplete_seq_no, b.seq_no());
    }
}
