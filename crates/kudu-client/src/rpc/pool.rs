//! A per-server connection pool that caches the *connect*, not just the
//! connection.
//!
//! The pool keeps at most one entry per server address: a shared future of
//! one connect + negotiate. Concurrent callers asking for the same server
//! await that same future, so a burst of calls opens one connection. The
//! connect runs in its own task, so a caller that times out or is dropped
//! does not cancel it for the others (nor leave a half-negotiated socket).
//!
//! An entry goes away when its connect fails or its connection closes
//! (idle timeout on the server, reset, fatal error). Removal checks that the
//! entry is still the one that failed, so a late failure never evicts a
//! newer, healthy connection to the same address.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::future::{BoxFuture, FutureExt, Shared};
use tracing::Instrument;

use super::connection::{CallOptions, ConnectOptions, Connection, Response};
use crate::error::{Error, Result};
use crate::pb::RpcMethod;

/// What an RPC serves, for the span it runs in: the table and tablet, and
/// which attempt of its operation it is (1 = the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpcContext<'a> {
    /// The table the call reads, writes or describes.
    pub table: Option<&'a str>,
    /// The tablet it goes to.
    pub tablet: Option<&'a str>,
    /// The attempt number.
    pub attempt: u32,
}

impl Default for RpcContext<'_> {
    fn default() -> Self {
        RpcContext::attempt(1)
    }
}

impl<'a> RpcContext<'a> {
    /// Attempt `n` of an operation on no particular table.
    pub fn attempt(n: u32) -> Self {
        RpcContext {
            table: None,
            tablet: None,
            attempt: n,
        }
    }

    /// On `table`.
    pub fn table(mut self, table: &'a str) -> Self {
        self.table = Some(table);
        self
    }

    /// On `tablet`.
    pub fn tablet(mut self, tablet: &'a str) -> Self {
        self.tablet = Some(tablet);
        self
    }
}

type SharedConnect = Shared<BoxFuture<'static, Result<Connection, Arc<Error>>>>;

struct Entry {
    /// Distinguishes successive entries for one address.
    id: u64,
    connect: SharedConnect,
}

struct Inner {
    opts: ConnectOptions,
    entries: Mutex<HashMap<String, Entry>>,
    next_id: AtomicU64,
}

/// Connections to many servers, at most one per address. Cheap to clone.
#[derive(Clone)]
pub struct ConnectionPool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ConnectionPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addrs: Vec<String> = self.inner.lock().keys().cloned().collect();
        f.debug_struct("ConnectionPool")
            .field("addrs", &addrs)
            .finish_non_exhaustive()
    }
}

impl ConnectionPool {
    /// A pool opening connections with `opts`.
    pub fn new(opts: ConnectOptions) -> Self {
        ConnectionPool {
            inner: Arc::new(Inner {
                opts,
                entries: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// The options new connections use.
    pub fn options(&self) -> &ConnectOptions {
        &self.inner.opts
    }

    /// A live connection to `addr`, opening one if needed. Callers that
    /// arrive while a connect is under way share it.
    pub async fn get(&self, addr: &str) -> Result<Connection> {
        // A cached connection may close between lookups; one fresh
        // attempt after that is enough.
        for _ in 0..2 {
            let (id, connect) = self.entry(addr);
            match connect.await {
                Ok(conn) if !conn.is_closed() => return Ok(conn),
                Ok(_) => self.inner.remove_if(addr, id),
                Err(e) => return Err(duplicate(&e, addr)),
            }
        }
        Err(Error::ConnectionClosed {
            addr: addr.to_owned(),
            reason: "new connection closed right after it was opened".into(),
        })
    }

    /// [`call_for`](Self::call_for) with no table, tablet or retry.
    pub async fn call<M: RpcMethod>(
        &self,
        addr: &str,
        request: &M::Request,
        opts: &CallOptions,
    ) -> Result<Response<M::Response>> {
        self.call_for::<M>(RpcContext::default(), addr, request, opts)
            .await
    }

    /// Calls method `M` on `addr`, inside a debug-level `rpc` span (target
    /// `kudu_client::rpc`) with fields `service`, `method`, `server`,
    /// `table`, `tablet` and `attempt` from `ctx` (nothing is built when
    /// the level is off). Connecting counts against the call's deadline,
    /// but a deadline hit while connecting leaves the connect running for
    /// later callers.
    pub async fn call_for<M: RpcMethod>(
        &self,
        ctx: RpcContext<'_>,
        addr: &str,
        request: &M::Request,
        opts: &CallOptions,
    ) -> Result<Response<M::Response>> {
        let span = tracing::debug_span!(
            target: "kudu_client::rpc",
            "rpc",
            service = M::SERVICE,
            method = M::METHOD,
            server = addr,
            table = ctx.table,
            tablet = ctx.tablet,
            attempt = ctx.attempt,
        );
        self.call_once::<M>(addr, request, opts)
            .instrument(span)
            .await
    }

    async fn call_once<M: RpcMethod>(
        &self,
        addr: &str,
        request: &M::Request,
        opts: &CallOptions,
    ) -> Result<Response<M::Response>> {
        let started = tokio::time::Instant::now();
        let conn = match tokio::time::timeout_at(opts.deadline, self.get(addr)).await {
            Ok(conn) => conn?,
            Err(_) => {
                return Err(Error::TimedOut {
                    operation: format!("{}.{} on {addr}", M::SERVICE, M::METHOD),
                    attempts: 1,
                    elapsed: started.elapsed(),
                    last: "still connecting when the deadline passed".into(),
                })
            }
        };
        conn.call::<M>(request, opts).await
    }

    /// Whether the pool has an entry (connecting or connected) for `addr`.
    pub fn contains(&self, addr: &str) -> bool {
        self.inner.lock().contains_key(addr)
    }

    /// Drops the entry for `addr` if it still holds `conn`, and closes
    /// `conn`. For callers that decided a connection is bad.
    pub fn evict(&self, conn: &Connection, reason: &str) {
        let mut entries = self.inner.lock();
        if let Some(entry) = entries.get(conn.addr()) {
            let same = matches!(entry.connect.peek(), Some(Ok(c)) if c.ptr_eq(conn));
            if same {
                entries.remove(conn.addr());
            }
        }
        drop(entries);
        conn.close(reason);
    }

    /// The entry for `addr`, starting a connect if there is none.
    fn entry(&self, addr: &str) -> (u64, SharedConnect) {
        let mut entries = self.inner.lock();
        if let Some(e) = entries.get(addr) {
            return (e.id, e.connect.clone());
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let task = tokio::spawn(connect_task(
            Arc::downgrade(&self.inner),
            addr.to_owned(),
            id,
            self.inner.opts.clone(),
        ));
        let owned_addr = addr.to_owned();
        let connect = async move {
            match task.await {
                Ok(result) => result,
                Err(e) => Err(Arc::new(Error::ConnectionClosed {
                    addr: owned_addr,
                    reason: format!("connect task failed: {e}"),
                })),
            }
        }
        .boxed()
        .shared();
        entries.insert(
            addr.to_owned(),
            Entry {
                id,
                connect: connect.clone(),
            },
        );
        (id, connect)
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Single inserts/removes cannot leave the map half-updated.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes `addr`'s entry only if it is still entry `id`.
    fn remove_if(&self, addr: &str, id: u64) {
        let mut entries = self.lock();
        if entries.get(addr).is_some_and(|e| e.id == id) {
            entries.remove(addr);
        }
    }
}

/// Connects, and arranges for the entry to go away when the connect fails
/// or the connection later closes. Holds the pool only weakly.
async fn connect_task(
    pool: Weak<Inner>,
    addr: String,
    id: u64,
    opts: ConnectOptions,
) -> Result<Connection, Arc<Error>> {
    match Connection::connect(&addr, &opts).await {
        Ok(conn) => {
            let closed = conn.closed();
            tokio::spawn(async move {
                closed.await;
                if let Some(pool) = pool.upgrade() {
                    pool.remove_if(&addr, id);
                }
            });
            Ok(conn)
        }
        Err(e) => {
            tracing::debug!(%addr, error = %e, "connect failed");
            if let Some(pool) = pool.upgrade() {
                pool.remove_if(&addr, id);
            }
            Err(Arc::new(e))
        }
    }
}

/// Gives each caller of a shared connect its own copy of the error.
fn duplicate(e: &Error, addr_hint: &str) -> Error {
    match e {
        Error::Io { addr, source } => Error::Io {
            addr: addr.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        Error::ConnectionClosed { addr, reason } => Error::ConnectionClosed {
            addr: addr.clone(),
            reason: reason.clone(),
        },
        Error::Negotiation { addr, message } => Error::Negotiation {
            addr: addr.clone(),
            message: message.clone(),
        },
        Error::Protocol { addr, message } => Error::Protocol {
            addr: addr.clone(),
            message: message.clone(),
        },
        Error::Tls { addr, message } => Error::Tls {
            addr: addr.clone(),
            message: message.clone(),
        },
        Error::Authentication { addr, message } => Error::Authentication {
            addr: addr.clone(),
            message: message.clone(),
        },
        Error::Rpc {
            addr,
            method,
            code,
            message,
        } => Error::Rpc {
            addr: addr.clone(),
            method: method.clone(),
            code: *code,
            message: message.clone(),
        },
        Error::TimedOut {
            operation,
            attempts,
            elapsed,
            last,
        } => Error::TimedOut {
            operation: operation.clone(),
            attempts: *attempts,
            elapsed: *elapsed,
            last: last.clone(),
        },
        Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
        // Connecting produces none of the other variants; keep the text.
        other => Error::ConnectionClosed {
            addr: addr_hint.to_owned(),
            reason: other.to_string(),
        },
    }
}
