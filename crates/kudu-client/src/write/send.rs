//! Sending sealed requests: one `Write` RPC per request to its tablet's
//! leader, in order per tablet, with retries.
//!
//! # Ordering
//!
//! Operations on one key always go to one tablet, and the rows of a tablet
//! are never reordered: a request keeps its rows in apply order, and it is
//! sent only after every request sealed before it for the same tablet has
//! finished ([`TabletChains`], a turn taken synchronously when the request
//! is dispatched, so the order is the seal order even when sends overlap).
//! At most `max_batches_in_flight` requests of a session are on the wire
//! at once.
//!
//! # Retries and exactly-once
//!
//! Each request gets one request id (client id + sequence number) that is
//! kept across all its attempts; only `attempt_no` grows, so a tablet server
//! (or the next leader) answers a retry of an applied write from its result
//! cache instead of applying it twice. Failed attempts are classified by
//! [`Error::retry_action`]: stale routing (not the leader, tablet not
//! found) and an unusable server ([`Error::server_unusable`]) drop the
//! tablet from the location cache and look it up again by its start key
//! (rows whose key range now belongs to other tablets are routed again
//! through a new request builder); a busy server is retried after a
//! backoff; anything else, or running out of time, fails the request, and
//! every row in it becomes a row error carrying that cause. A refused
//! authz token (they expire after 5 minutes by default) is replaced once
//! per request by a fresh one from the master, kept for the session's later
//! requests to that table.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::client::{tserver_error, KuduClient};
use crate::error::{Error, KuduStatus, Result, RetryAction, RowError, RpcErrorCode};
use crate::master::status_from_pb;
use crate::meta::{Lookup, RemoteTablet};
use crate::pb;
use crate::pb::tserver::tablet_server_service::Write;
use crate::retry::Retrier;
use crate::row_ops::{self, OpType};
use crate::rpc::{CallOptions, RpcContext};
use crate::schema::{Row, SchemaPbOptions};
use crate::table::KuduTable;
use crate::write::buffer::BufferedOp;
use crate::write::options::{ExternalConsistencyMode, RequestSize, Settings};
use crate::write::order::TabletChains;
use crate::write::outcome::{add, status_of, FlushOutcome, MetricsInner};
use crate::write::request::{feed_ops, OpCounts, Outlet, Request, RequestBuilder};

/// What every send of a session shares.
#[derive(Debug)]
pub(crate) struct SendCtx {
    client: KuduClient,
    timeout: Duration,
    consistency: ExternalConsistencyMode,
    /// How rows routed again (their tablet moved) are cut into requests.
    rerouted: RequestSize,
    metrics: Arc<MetricsInner>,
    /// Requests on the wire at once (`max_batches_in_flight`).
    permits: Arc<Semaphore>,
    chains: Mutex<TabletChains>,
    /// Authz tokens fetched after the table's own expired, by table id.
    tokens: Mutex<HashMap<String, pb::security::SignedTokenPb>>,
}

/// Locks `m`; the data behind the session's mutexes stays consistent under
/// a panic (maps and counters), so a poisoned lock is used as is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SendCtx {
    pub(crate) fn new(client: KuduClient, s: &Settings, metrics: Arc<MetricsInner>) -> SendCtx {
        SendCtx {
            client,
            timeout: s.timeout,
            consistency: s.consistency,
            rerouted: s.buffered,
            metrics,
            permits: Arc::new(Semaphore::new(s.max_batches_in_flight.max(1))),
            chains: Mutex::new(TabletChains::default()),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn client(&self) -> &KuduClient {
        &self.client
    }

    /// When tablet lookups started now must end.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// `outcome`, its row errors now counted in the session's metrics.
    pub(crate) fn counted(&self, outcome: FlushOutcome) -> FlushOutcome {
        add(&self.metrics.row_errors, outcome.row_errors.len() as u64);
        outcome
    }

    /// Starts sending `request`: its turn in its tablet's chain is taken
    /// now; the returned future waits for it, sends, and resolves with the
    /// request's (counted) outcome.
    pub(crate) fn dispatch(
        self: &Arc<Self>,
        request: Request,
    ) -> impl Future<Output = FlushOutcome> + Send + 'static {
        let mut turn = lock(&self.chains).enqueue(&request.tablet.tablet_id);
        let ctx = self.clone();
        async move {
            turn.wait().await;
            // The semaphore is never closed; if it were, send anyway.
            let _permit = ctx.permits.clone().acquire_owned().await.ok();
            let outcome = send(&ctx, request).await;
            drop(turn);
            ctx.counted(outcome)
        }
    }

    /// Dispatches `requests` in order and resolves once all are answered,
    /// with their outcomes and `failed` (rows that failed before any
    /// request).
    pub(crate) fn dispatch_all(
        self: &Arc<Self>,
        requests: Vec<Request>,
        failed: FlushOutcome,
    ) -> impl Future<Output = FlushOutcome> + Send + 'static {
        let sends: Vec<_> = requests.into_iter().map(|r| self.dispatch(r)).collect();
        let mut outcome = self.counted(failed);
        async move {
            for o in futures::future::join_all(sends).await {
                outcome.merge(o);
            }
            outcome
        }
    }

    /// The freshest authz token known for `table`.
    fn authz_token(&self, table: &KuduTable) -> Option<pb::security::SignedTokenPb> {
        let cached = lock(&self.tokens).get(table.id()).cloned();
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
            lock(&self.tokens).insert(table.id().to_owned(), t.clone());
        }
        Ok(token)
    }
}

/// The rows of a request as sent, decoded again only to name the rows
/// that failed.
struct SentRows<'a> {
    table: &'a KuduTable,
    rows: &'a pb::RowOperationsPb,
    count: usize,
    decoded: Option<Vec<(OpType, Row)>>,
}

impl<'a> SentRows<'a> {
    fn new(table: &'a KuduTable, rows: &'a pb::RowOperationsPb, count: usize) -> Self {
        SentRows {
            table,
            rows,
            count,
            decoded: None,
        }
    }

    /// Row `i`'s error with `status`, and its operation if known.
    fn row_error(&mut self, i: usize, status: KuduStatus) -> (Option<OpType>, RowError) {
        let (table, rows) = (self.table, self.rows);
        let decoded = self.decoded.get_or_insert_with(|| {
            row_ops::decode(table.schema(), rows).unwrap_or_else(|e| {
                tracing::warn!(table = table.name(), error = %e, "a sent write request does not decode; its failed rows are named by index");
                Vec::new()
            })
        });
        match decoded.get(i) {
            Some((op, row)) => (
                Some(*op),
                RowError {
                    operation: op.name().to_owned(),
                    key: row.key_string(),
                    status,
                },
            ),
            None => (
                None,
                RowError {
                    operation: "WRITE".into(),
                    key: format!("(row {i} of a write to table '{}')", table.name()),
                    status,
                },
            ),
        }
    }

    /// Every row failed with `err`, which is kept as the cause.
    fn fail_all(mut self, err: Error) -> FlushOutcome {
        let status = status_of(&err);
        let row_errors = (0..self.count)
            .map(|i| self.row_error(i, status.clone()).1)
            .collect();
        FlushOutcome {
            row_errors,
            causes: vec![err],
        }
    }
}

/// How a request's attempts ended.
enum End {
    Answered(Box<pb::tserver::WriteResponsePb>),
    Failed(Error),
    /// The key range now belongs to another tablet (partitions changed).
    Moved,
}

/// Sends one request until it is answered or fails for good; rows whose
/// tablet moved are routed again and sent here, after the rest of it.
async fn send(ctx: &SendCtx, request: Request) -> FlushOutcome {
    let Request {
        table,
        tablet,
        rows,
        ops,
        budget,
    } = request;
    // Held until the answer.
    let _budget = budget;
    let (count, bytes) = (rows.len(), rows.encoded_size() as u64);
    let schema = match table.schema().to_pb(SchemaPbOptions::WRITE) {
        Ok(schema) => schema,
        Err(e) => {
            add(&ctx.metrics.batches_failed, 1);
            return SentRows::new(&table, &rows.finish(), count).fail_all(e);
        }
    };
    let mut req = pb::tserver::WriteRequestPb {
        tablet_id: tablet.tablet_id.as_bytes().to_vec(),
        schema: Some(schema),
        row_operations: Some(rows.finish()),
        external_consistency_mode: Some(ctx.consistency.to_pb()),
        authz_token: ctx.authz_token(&table),
        ..Default::default()
    };
    let end = attempts(ctx, &table, tablet, &mut req, count).await;
    let rows = req.row_operations.unwrap_or_default();
    match end {
        End::Answered(resp) => {
            record_success(ctx, SentRows::new(&table, &rows, count), ops, &resp, bytes)
        }
        End::Failed(e) => {
            add(&ctx.metrics.batches_failed, 1);
            tracing::warn!(table = table.name(), rows = count, error = %e, "write request failed");
            SentRows::new(&table, &rows, count).fail_all(e)
        }
        End::Moved => route_again(ctx, &table, &rows, count).await,
    }
}

/// The rows of a request whose tablet moved, routed again through a new
/// builder and sent one request after the other.
async fn route_again(
    ctx: &SendCtx,
    table: &KuduTable,
    rows: &pb::RowOperationsPb,
    count: usize,
) -> FlushOutcome {
    let decoded = match row_ops::decode(table.schema(), rows) {
        Ok(d) => d,
        Err(e) => return SentRows::new(table, rows, count).fail_all(e),
    };
    tracing::debug!(
        table = table.name(),
        rows = count,
        "tablet moved; routing its rows again"
    );
    let mut outcome = FlushOutcome::default();
    let mut ops = Vec::with_capacity(decoded.len());
    for (op, row) in decoded {
        let key = row.key_string();
        match BufferedOp::new(table.clone(), op, row) {
            Ok(op) => ops.push(op),
            Err(e) => {
                let status = status_of(&e);
                let error = RowError {
                    operation: op.name().to_owned(),
                    key,
                    status,
                };
                outcome.fail_one(error, e);
            }
        }
    }
    let expected = rows.rows.as_ref().map_or(0, Vec::len);
    let builder = RequestBuilder::new(&ctx.client, ctx.rerouted, expected, ctx.deadline());
    let mut outlet = Outlet::Keep(Vec::new());
    outcome.merge(feed_ops(builder, ops, &mut outlet).await);
    for request in outlet.into_kept() {
        outcome.merge(Box::pin(send(ctx, request)).await);
    }
    outcome
}

/// Sends `req` (carrying `count` rows) to the tablet's leader until it is
/// answered, fails for good, or the tablet turns out to have moved,
/// retrying per the rules in the module docs with one request id.
// Long on purpose: one retry loop whose branches (authz token refresh,
// classification, relocation) share the request, retrier and tablet.
async fn attempts(
    ctx: &SendCtx,
    table: &KuduTable,
    mut tablet: Arc<RemoteTablet>,
    req: &mut pb::tserver::WriteRequestPb,
    count: usize,
) -> End {
    let request = ctx.client.track_request();
    let mut retrier = Retrier::new(
        format!(
            "write of {count} operation(s) to tablet {} of table '{}'",
            tablet.tablet_id,
            table.name()
        ),
        ctx.timeout,
    );
    let mut token_refreshed = false;
    loop {
        retrier.begin_attempt();
        add(&ctx.metrics.write_attempts, 1);
        req.propagated_timestamp = ctx.client.last_propagated_raw();
        let id = request.for_attempt(retrier.attempts());
        let rpc = RpcContext::attempt(retrier.attempts())
            .table(table.name())
            .tablet(&tablet.tablet_id);
        let err = match attempt(ctx, rpc, &tablet, req, id, retrier.deadline()).await {
            Ok(resp) => return End::Answered(Box::new(resp)),
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
                Err(e) => return End::Failed(e),
            }
        }
        let relocate = err.retry_action() == RetryAction::RefreshAndRetry || err.server_unusable();
        tracing::debug!(tablet = %tablet.tablet_id, attempt = retrier.attempts(), error = %err, "write attempt failed");
        if let Err(fatal) = retrier.on_error(err).await {
            return End::Failed(fatal);
        }
        if relocate {
            ctx.client.invalidate_tablet(table.id(), &tablet.tablet_id);
            match ctx
                .client
                .locate_with_retry(table, &tablet.partition_key_start, retrier.deadline())
                .await
            {
                Ok(Lookup::Tablet(t)) if t.tablet_id == tablet.tablet_id => tablet = t,
                Ok(_) => return End::Moved,
                Err(e) => return End::Failed(e),
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
    rpc: RpcContext<'_>,
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
        .call_for::<Write>(rpc, &leader.addr, req, &opts)
        .await?
        .body;
    if let Some(e) = &resp.error {
        return Err(tserver_error(e, &leader.addr, &tablet.tablet_id));
    }
    Ok(resp)
}

/// An answered request: the rows the server refused become row errors;
/// the rest count as written.
fn record_success(
    ctx: &SendCtx,
    mut sent: SentRows<'_>,
    mut ops: OpCounts,
    resp: &pb::tserver::WriteResponsePb,
    bytes: u64,
) -> FlushOutcome {
    if let Some(ts) = resp.timestamp {
        ctx.client.observe_timestamp(ts);
    }
    let mut outcome = FlushOutcome::default();
    let mut failed = vec![
        false;
        if resp.per_row_errors.is_empty() {
            0
        } else {
            sent.count
        }
    ];
    for e in &resp.per_row_errors {
        match usize::try_from(e.row_index)
            .ok()
            .filter(|&i| i < sent.count)
        {
            Some(i) if !failed[i] => {
                failed[i] = true;
                let (op, error) = sent.row_error(i, status_from_pb(&e.error));
                if let Some(op) = op {
                    ops.remove(op);
                }
                outcome.row_errors.push(error);
            }
            _ => tracing::warn!(
                row_index = e.row_index,
                rows = sent.count,
                "write response names a row the request did not have; ignored"
            ),
        }
    }
    let m = &ctx.metrics;
    for (wire, n) in ops.iter() {
        if let Some(counter) = m.written.get(wire) {
            add(counter, n);
        }
    }
    add(&m.bytes_written, bytes);
    add(&m.batches_written, 1);
    m.record_response(resp.resource_metrics.as_ref());
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

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
