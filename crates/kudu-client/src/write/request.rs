//! The one per-tablet request builder every write goes through.
//!
//! [`RequestBuilder`] routes a row to the tablet covering its partition
//! key, appends it to the encoded request being filled for that tablet,
//! and seals the request at the session's byte/row budget
//! ([`RequestSize`]). It is fed row by row — from a buffer of operations
//! (`feed_ops`, below) and from scan rows copied through a
//! [`RowCopy`](crate::write::RowCopy) alike — and hands each sealed
//! [`Request`] to an [`Outlet`]: kept to be sent together (sync and manual
//! modes, a background buffer) or sent at once within the session's byte
//! budget (whole batches in background mode).
//!
//! A request keeps nothing per row but its encoded bytes: the rows a tablet
//! server refuses (or of a request that failed as a whole) are decoded
//! again to name their keys, and a request whose tablet moved is decoded
//! and fed to a new builder.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use tokio::runtime::Handle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::client::KuduClient;
use crate::error::{Error, KuduStatus, Result};
use crate::meta::{Lookup, RemoteTablet};
use crate::row_ops::{OpType, OpsEncoder};
use crate::schema::Row;
use crate::table::KuduTable;
use crate::write::buffer::BufferedOp;
use crate::write::inflight::InFlight;
use crate::write::options::RequestSize;
use crate::write::outcome::{status_of, FlushOutcome};
use crate::write::send::SendCtx;

/// How many rows of each operation type a request carries, by wire number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OpCounts([u32; 14]);

impl OpCounts {
    fn add(&mut self, op: OpType) {
        self.0[usize::from(op.to_wire())] += 1;
    }

    /// Takes one `op` away (a row the server refused).
    pub(crate) fn remove(&mut self, op: OpType) {
        let n = &mut self.0[usize::from(op.to_wire())];
        *n = n.saturating_sub(1);
    }

    /// (wire number, rows) of every type present.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (i, u64::from(*n)))
    }
}

/// One sealed request: the encoded rows of one tablet, in append order.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) table: KuduTable,
    pub(crate) tablet: Arc<RemoteTablet>,
    pub(crate) rows: OpsEncoder,
    pub(crate) ops: OpCounts,
    /// Its share of the session's byte budget (whole batches in background
    /// mode), released once it is answered.
    pub(crate) budget: Option<OwnedSemaphorePermit>,
}

/// A request being filled.
#[derive(Debug)]
struct Open {
    table: KuduTable,
    tablet: Arc<RemoteTablet>,
    rows: OpsEncoder,
    ops: OpCounts,
}

impl Open {
    fn seal(self) -> Request {
        Request {
            table: self.table,
            tablet: self.tablet,
            rows: self.rows,
            ops: self.ops,
            budget: None,
        }
    }
}

/// Where a row's partition key leads.
pub(crate) enum Route {
    /// The tablet covering it.
    Tablet(Arc<RemoteTablet>),
    /// No tablet covers it: the row fails on its own with this error.
    NotCovered(Error),
}

/// The tablets of one table found by this builder.
#[derive(Debug)]
struct Known {
    table: KuduTable,
    by_start: BTreeMap<Vec<u8>, Arc<RemoteTablet>>,
    /// The tablet of this table's previous row: most rows of a scan batch
    /// go where the row before went.
    last: Option<Arc<RemoteTablet>>,
}

/// Routes rows to tablets and fills one request per tablet (see the
/// module docs).
#[derive(Debug)]
pub(crate) struct RequestBuilder {
    client: KuduClient,
    size: RequestSize,
    /// Bytes to reserve for a new request (no regrowth copies).
    reserve: usize,
    /// Bound on this builder's tablet lookups.
    deadline: Instant,
    known: Vec<Known>,
    /// Requests being filled, one per tablet; few, so found by a scan.
    open: Vec<Open>,
}

impl RequestBuilder {
    /// A builder sealing requests at `size`, expecting about `expected`
    /// encoded bytes in all, looking tablets up until `deadline`.
    pub(crate) fn new(
        client: &KuduClient,
        size: RequestSize,
        expected: usize,
        deadline: Instant,
    ) -> RequestBuilder {
        let cap = size.bytes.min(size.max_bytes);
        RequestBuilder {
            client: client.clone(),
            size,
            // One row past the size at most.
            reserve: expected.min(cap.saturating_add(cap / 8)),
            deadline,
            known: Vec::new(),
            open: Vec::new(),
        }
    }

    /// The tablet of `table` covering partition key `key`, from the tablets
    /// this builder already found or from the client's location cache and
    /// the masters. `Err` only when the table's tablets cannot be located.
    pub(crate) async fn route(&mut self, table: &KuduTable, key: &[u8]) -> Result<Route> {
        let at = match self
            .known
            .iter()
            .position(|k| k.table.same_handle(table) || k.table.id() == table.id())
        {
            Some(at) => at,
            None => {
                self.known.push(Known {
                    table: table.clone(),
                    by_start: BTreeMap::new(),
                    last: None,
                });
                self.known.len() - 1
            }
        };
        let known = &mut self.known[at];
        if let Some(t) = known.last.as_ref().filter(|t| t.contains(key)) {
            return Ok(Route::Tablet(t.clone()));
        }
        let found = known
            .by_start
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
            .map(|(_, t)| t)
            .filter(|t| t.contains(key))
            .cloned();
        let tablet = match found {
            Some(t) => t,
            None => match self
                .client
                .locate_with_retry(table, key, self.deadline)
                .await?
            {
                Lookup::Tablet(t) => {
                    known
                        .by_start
                        .insert(t.partition_key_start.clone(), t.clone());
                    t
                }
                Lookup::NonCovered { .. } | Lookup::Miss => {
                    return Ok(Route::NotCovered(Error::NonCoveredRange {
                        table: table.name().to_owned(),
                        partition_key: key.to_vec(),
                    }))
                }
            },
        };
        known.last = Some(tablet.clone());
        Ok(Route::Tablet(tablet))
    }

    /// Appends `row` as `op` to the request of `tablet` (of `table`), and
    /// returns the request it sealed, if any: the one it completed, or the
    /// one the row did not fit in (the row then starts the next). `Err`
    /// (nothing appended) if the row is not a valid `op` of the table.
    pub(crate) fn append(
        &mut self,
        table: &KuduTable,
        tablet: &Arc<RemoteTablet>,
        op: OpType,
        row: &Row,
    ) -> Result<Option<Request>> {
        // By pointer first: the builder hands out one Arc per tablet.
        let found = (self.open.iter())
            .position(|o| Arc::ptr_eq(&o.tablet, tablet))
            .or_else(|| (self.open.iter()).position(|o| o.tablet.tablet_id == tablet.tablet_id));
        let at = match found {
            Some(at) => at,
            None => {
                self.open.push(self.new_open(table, tablet));
                self.open.len() - 1
            }
        };
        let open = &mut self.open[at];
        let (mark, had_rows) = (open.rows.mark(), open.rows.len() > 0);
        open.rows.push(op, row)?;
        if open.rows.encoded_size() > self.size.max_bytes && had_rows {
            // Over the cap: the request goes without this row, which
            // starts the next one.
            open.rows.truncate(mark);
            let mut next = self.new_open(table, tablet);
            next.rows.push(op, row)?;
            next.ops.add(op);
            let full = std::mem::replace(&mut self.open[at], next);
            return Ok(Some(full.seal()));
        }
        open.ops.add(op);
        if self.size.due(open.rows.encoded_size(), open.rows.len()) {
            return Ok(Some(self.open.swap_remove(at).seal()));
        }
        Ok(None)
    }

    fn new_open(&self, table: &KuduTable, tablet: &Arc<RemoteTablet>) -> Open {
        let mut rows = OpsEncoder::new(table.schema());
        rows.reserve(self.reserve);
        Open {
            table: table.clone(),
            tablet: tablet.clone(),
            rows,
            ops: OpCounts::default(),
        }
    }

    /// Seals every request still being filled (one per tablet; requests
    /// of different tablets need no order between them).
    pub(crate) fn finish(self) -> Vec<Request> {
        self.open.into_iter().map(Open::seal).collect()
    }
}

/// Where sealed requests go.
pub(crate) enum Outlet {
    /// Kept, to be sent together later.
    Keep(Vec<Request>),
    /// Sent at once — after the request takes its bytes from the session's
    /// budget — tracked by `inflight`.
    Send {
        ctx: Arc<SendCtx>,
        budget: Arc<Semaphore>,
        /// The budget's size: a larger request takes all of it.
        total: usize,
        inflight: Arc<InFlight>,
        runtime: Handle,
    },
}

impl Outlet {
    /// The requests kept (none for [`Outlet::Send`]).
    pub(crate) fn into_kept(self) -> Vec<Request> {
        match self {
            Outlet::Keep(kept) => kept,
            Outlet::Send { .. } => Vec::new(),
        }
    }

    /// Hands on one sealed request.
    pub(crate) async fn put(&mut self, mut request: Request) {
        match self {
            Outlet::Keep(kept) => kept.push(request),
            Outlet::Send {
                ctx,
                budget,
                total,
                inflight,
                runtime,
            } => {
                let want = request.rows.encoded_size().clamp(1, (*total).max(1));
                let want = u32::try_from(want).unwrap_or(u32::MAX);
                // The budget is never closed; if it were, send without it.
                request.budget = budget.clone().acquire_many_owned(want).await.ok();
                let send = ctx.dispatch(request);
                inflight.spawn(runtime, send);
            }
        }
    }
}

/// Feeds buffered operations, in order, to `builder`, handing each sealed
/// request to `outlet` (the rest too, at the end). A row that cannot be
/// routed or encoded fails on its own in the returned outcome; once a
/// table's tablets cannot be located, its remaining rows fail at once.
pub(crate) async fn feed_ops(
    mut builder: RequestBuilder,
    ops: Vec<BufferedOp>,
    outlet: &mut Outlet,
) -> FlushOutcome {
    let mut failed = FlushOutcome::default();
    let mut failed_tables: HashMap<String, KuduStatus> = HashMap::new();
    for op in ops {
        if let Some(status) = failed_tables.get(op.table.id()) {
            failed.row_errors.push(op.row_error(status.clone()));
            continue;
        }
        let tablet = match builder.route(&op.table, &op.partition_key).await {
            Ok(Route::Tablet(t)) => t,
            Ok(Route::NotCovered(e)) => {
                failed.fail_one(op.row_error(status_of(&e)), e);
                continue;
            }
            Err(e) => {
                failed_tables.insert(op.table.id().to_owned(), status_of(&e));
                failed.fail_one(op.row_error(status_of(&e)), e);
                continue;
            }
        };
        match builder.append(&op.table, &tablet, op.op, &op.row) {
            Ok(Some(sealed)) => outlet.put(sealed).await,
            Ok(None) => {}
            // Validated at apply time, so this is not expected.
            Err(e) => failed.fail_one(op.row_error(status_of(&e)), e),
        }
    }
    for rest in builder.finish() {
        outlet.put(rest).await;
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row_ops;
    use crate::write::testutil::table;

    fn tablet(id: &str) -> Arc<RemoteTablet> {
        Arc::new(RemoteTablet {
            tablet_id: id.into(),
            partition_key_start: Vec::new(),
            partition_key_end: Vec::new(),
            replicas: Vec::new(),
        })
    }

    fn builder(size: RequestSize) -> RequestBuilder {
        let client = KuduClient::new(&["127.0.0.1:1"]).unwrap();
        RequestBuilder::new(&client, size, 0, Instant::now())
    }

    /// The keys of a request, in request order.
    fn keys(r: &Request) -> Vec<i32> {
        let rows = row_ops::decode(r.table.schema(), &r.rows.clone().finish()).unwrap();
        rows.iter()
            .map(|(_, row)| row.get_i32("k").unwrap())
            .collect()
    }

    fn row(t: &KuduTable, k: i32, s: Option<&str>) -> Row {
        let mut r = t.new_row();
        r.set_i32("k", k).unwrap();
        if let Some(s) = s {
            r.set_str("s", s).unwrap();
        }
        r
    }

    #[test]
    fn requests_respect_the_cap_and_keep_row_order() {
        // A key-only row encodes to 7 bytes: two fit in 15.
        let t = table();
        let a = tablet("a");
        let mut b = builder(RequestSize::capped(15));
        let mut sealed = Vec::new();
        for k in 0..10 {
            sealed.extend(b.append(&t, &a, OpType::Upsert, &row(&t, k, None)).unwrap());
        }
        sealed.extend(b.finish());
        assert_eq!(
            sealed.iter().map(|r| r.rows.len()).collect::<Vec<_>>(),
            vec![2, 2, 2, 2, 2]
        );
        assert!(sealed.iter().all(|r| r.rows.encoded_size() <= 15));
        let all: Vec<i32> = sealed.iter().flat_map(keys).collect();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(sealed[0].ops.iter().collect::<Vec<_>>(), vec![(5, 2)]);
    }

    #[test]
    fn a_row_larger_than_the_cap_goes_alone() {
        let t = table();
        let a = tablet("a");
        let mut b = builder(RequestSize::capped(15));
        assert!(b
            .append(&t, &a, OpType::Insert, &row(&t, 1, None))
            .unwrap()
            .is_none());
        let big = row(&t, 2, Some("a long value"));
        let first = b
            .append(&t, &a, OpType::Insert, &big)
            .unwrap()
            .expect("sealed");
        assert_eq!(keys(&first), [1]);
        let second = b
            .append(&t, &a, OpType::Delete, &row(&t, 3, None))
            .unwrap()
            .expect("sealed");
        assert_eq!(keys(&second), [2]);
        let rest = b.finish();
        assert_eq!(rest.len(), 1);
        assert_eq!(keys(&rest[0]), [3]);
        assert_eq!(rest[0].ops.iter().collect::<Vec<_>>(), vec![(3, 1)]);
    }

    #[test]
    fn streamed_requests_are_due_at_their_bytes_and_rows_per_tablet() {
        let t = table();
        let (a, c) = (tablet("a"), tablet("c"));
        let size = RequestSize {
            bytes: 20,
            min_rows: 4,
            max_bytes: 1000,
        };
        let mut b = builder(size);
        let mut sealed = Vec::new();
        for k in 0..12 {
            // Tablet "a" gets k = 0, 2, 4, ...; "c" the odd keys.
            let to = if k % 2 == 0 { &a } else { &c };
            sealed.extend(b.append(&t, to, OpType::Upsert, &row(&t, k, None)).unwrap());
        }
        // 4 rows × 7 bytes ≥ 20 bytes: each tablet's request is due at
        // its 4th row.
        assert_eq!(
            sealed
                .iter()
                .map(|r| (r.tablet.tablet_id.clone(), keys(r)))
                .collect::<Vec<_>>(),
            vec![
                ("a".to_owned(), vec![0, 2, 4, 6]),
                ("c".to_owned(), vec![1, 3, 5, 7])
            ]
        );
        let rest = b.finish();
        assert_eq!(
            rest.iter().map(keys).collect::<Vec<_>>(),
            vec![vec![8, 10], vec![9, 11]]
        );
    }

    #[test]
    fn a_row_of_another_schema_is_refused_and_nothing_is_appended() {
        let t = table();
        let a = tablet("a");
        let mut b = builder(RequestSize::capped(1000));
        let mut r = t.new_row();
        r.set_i32("v", 1).unwrap();
        let e = b.append(&t, &a, OpType::Insert, &r).unwrap_err();
        assert!(e.to_string().contains("'k'"), "{e}");
        assert!(b.finish().iter().all(|r| r.rows.len() == 0));
    }
}
