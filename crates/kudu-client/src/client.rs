//! [`KuduClient`]: the entry point. Holds the connection pool, the master
//! proxy, the tablet location cache and the client's clock bookkeeping
//! (last propagated timestamp, exactly-once request ids).
//!
//! Write sessions and scanners are created from here; they use the
//! crate-internal routing helpers ([`KuduClient::locate`],
//! [`KuduClient::invalidate_tablet`], `tserver_error`) so retry and
//! routing rules exist once.

use crate::error::{Error, Result, StatusCode};
use crate::hybrid_time::HybridTime;
use crate::master::catalog::{self, TableSummary, TabletServerInfo};
use crate::master::{status_from_pb, MasterProxy};
use crate::meta::{Lookup, RemoteTablet, Replica, Role, TableLocations};
use crate::partition::ranges::derive_range_partitions;
use crate::partition::RangePartition;
use crate::pb;
use crate::pb::master::master_service as ms;
use crate::pb::tserver::tablet_server_error_pb::Code as TsCode;
use crate::retry::{Retrier, DEFAULT_OPERATION_TIMEOUT};
use crate::rpc::{ConnectOptions, ConnectionPool, NegotiateOptions};
use crate::security::token::TokenStore;
use crate::table::{AlterTableBuilder, KuduTable, TableBuilder};

mod request_id;

use rand::Rng;
use request_id::RequestTracker;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default deadline for catalog (DDL) operations.
pub(crate) const DEFAULT_ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// How many tablet locations one master lookup asks for.
const LOOKUP_BATCH: u32 = 100;

/// Configures a [`KuduClient`].
#[derive(Debug, Clone)]
pub struct KuduClientBuilder {
    masters: Vec<String>,
    admin_timeout: Duration,
    operation_timeout: Duration,
    connect: ConnectOptions,
}

impl KuduClientBuilder {
    /// Master addresses (`host:port`, comma-separated entries are split).
    pub fn new<S: AsRef<str>>(masters: &[S]) -> Self {
        let masters = masters
            .iter()
            .flat_map(|m| m.as_ref().split(','))
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(|m| {
                if m.contains(':') {
                    m.to_owned()
                } else {
                    format!("{m}:7051")
                }
            })
            .collect();
        KuduClientBuilder {
            masters,
            admin_timeout: DEFAULT_ADMIN_TIMEOUT,
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
            connect: ConnectOptions::default(),
        }
    }

    /// Deadline for create/alter/delete/list/open (default 60 s).
    pub fn admin_timeout(mut self, t: Duration) -> Self {
        self.admin_timeout = t;
        self
    }

    /// Deadline for writes and scan calls (default 30 s).
    pub fn operation_timeout(mut self, t: Duration) -> Self {
        self.operation_timeout = t;
        self
    }

    /// Bound on TCP connect plus negotiation with one server.
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect.connect_timeout = t;
        self
    }

    /// User name and TLS policy for negotiation.
    pub fn negotiate_options(mut self, opts: NegotiateOptions) -> Self {
        self.connect.negotiate = opts;
        self
    }

    /// Authenticates with Kerberos (SASL GSSAPI) to servers that offer it,
    /// and with the masters' authentication tokens to tablet servers.
    #[cfg(feature = "kerberos")]
    pub fn kerberos(mut self, login: crate::security::kerberos::Kerberos) -> Self {
        self.connect.negotiate.kerberos = Some(Arc::new(login));
        self
    }

    /// Builds the client. Nothing is contacted until the first call.
    pub fn build(mut self) -> Result<KuduClient> {
        if self.masters.is_empty() {
            return Err(Error::InvalidArgument("no master addresses given".into()));
        }
        // Tokens only matter where the primary credentials are Kerberos:
        // SASL PLAIN works against every server anyway.
        if self.connect.negotiate.uses_kerberos() {
            self.connect.negotiate.tokens = Some(Arc::new(TokenStore::new(&self.masters)));
        }
        let pool = ConnectionPool::new(self.connect);
        let client_id: String = {
            let mut rng = rand::thread_rng();
            (0..16)
                .map(|_| format!("{:02x}", rng.gen::<u8>()))
                .collect()
        };
        Ok(KuduClient {
            inner: Arc::new(Inner {
                masters: MasterProxy::new(self.masters, pool.clone()),
                pool,
                locations: Mutex::new(HashMap::new()),
                last_propagated: AtomicU64::new(0),
                client_id,
                requests: Mutex::new(RequestTracker::default()),
                admin_timeout: self.admin_timeout,
                operation_timeout: self.operation_timeout,
            }),
        })
    }
}

/// A client of one Kudu cluster. Cheap to clone; share it.
#[derive(Debug, Clone)]
pub struct KuduClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    masters: MasterProxy,
    pool: ConnectionPool,
    /// table id → locations.
    locations: Mutex<HashMap<String, TableLocations>>,
    last_propagated: AtomicU64,
    client_id: String,
    requests: Mutex<RequestTracker>,
    admin_timeout: Duration,
    operation_timeout: Duration,
}

impl KuduClient {
    /// A builder for a client of the cluster whose masters are `masters`.
    pub fn builder<S: AsRef<str>>(masters: &[S]) -> KuduClientBuilder {
        KuduClientBuilder::new(masters)
    }

    /// A client with default settings.
    pub fn new<S: AsRef<str>>(masters: &[S]) -> Result<KuduClient> {
        KuduClientBuilder::new(masters).build()
    }

    /// The configured master addresses.
    pub fn master_addrs(&self) -> &[String] {
        self.inner.masters.addrs()
    }

    /// Deadline used for catalog operations.
    pub fn admin_timeout(&self) -> Duration {
        self.inner.admin_timeout
    }

    /// Deadline used for writes and scan calls.
    pub fn operation_timeout(&self) -> Duration {
        self.inner.operation_timeout
    }

    /// Lists tables whose name contains `filter` (all if empty).
    pub async fn list_tables(&self, filter: &str) -> Result<Vec<TableSummary>> {
        catalog::list_tables(&self.inner.masters, filter, self.inner.admin_timeout).await
    }

    /// Whether a table with exactly this name exists.
    pub async fn table_exists(&self, name: &str) -> Result<bool> {
        Ok(self.list_tables(name).await?.iter().any(|t| t.name == name))
    }

    /// Opens a table: schema, partition schema and metadata.
    pub async fn open_table(&self, name: &str) -> Result<KuduTable> {
        catalog::open_table(&self.inner.masters, name, self.inner.admin_timeout).await
    }

    /// Opens a table by its id: follows the table across renames.
    pub async fn open_table_by_id(&self, id: &str) -> Result<KuduTable> {
        catalog::open_table_by_id(&self.inner.masters, id, self.inner.admin_timeout).await
    }

    /// Creates a table (waiting until it is ready unless the builder says
    /// otherwise) and returns its id.
    pub async fn create_table(&self, builder: &TableBuilder) -> Result<String> {
        catalog::create_table(&self.inner.masters, builder, self.inner.admin_timeout).await
    }

    /// Alters a table and waits until the change is applied.
    pub async fn alter_table(&self, table: &KuduTable, builder: &AlterTableBuilder) -> Result<()> {
        catalog::alter_table(
            &self.inner.masters,
            table,
            builder,
            self.inner.admin_timeout,
        )
        .await?;
        // Range partitions may have changed: forget cached locations.
        self.forget_table(table.id());
        Ok(())
    }

    /// Renames a table.
    pub async fn rename_table(&self, table: &KuduTable, new_name: &str) -> Result<()> {
        self.alter_table(table, &AlterTableBuilder::new().rename_table(new_name))
            .await
    }

    /// Deletes a table.
    pub async fn delete_table(&self, name: &str) -> Result<()> {
        catalog::delete_table(&self.inner.masters, name, self.inner.admin_timeout).await
    }

    /// The leader master's hybrid time now. Use it, not the local clock,
    /// for snapshot and diff-scan timestamps.
    pub async fn server_clock(&self) -> Result<HybridTime> {
        let ts = catalog::server_clock(&self.inner.masters, self.inner.operation_timeout).await?;
        self.observe_timestamp(ts.raw());
        Ok(ts)
    }

    /// The tablet servers the leader master knows (uuid, whether the
    /// process restarted, RPC and web addresses), sorted by uuid. Bounded
    /// by the admin timeout.
    pub async fn list_tablet_servers(&self) -> Result<Vec<TabletServerInfo>> {
        catalog::list_tablet_servers(&self.inner.masters, self.inner.admin_timeout).await
    }

    /// The Kudu release of every tablet server the leader master knows,
    /// to ask before relying on a [`Feature`](crate::Feature). Bounded by
    /// the admin timeout.
    pub async fn cluster_releases(&self) -> Result<crate::ClusterReleases> {
        let servers = self.list_tablet_servers().await?;
        Ok(crate::ClusterReleases::new(
            servers
                .into_iter()
                .map(|s| {
                    let address = s.rpc_addresses.first().cloned().unwrap_or_default();
                    crate::ServerRelease::new(s.uuid, address, s.software_version)
                })
                .collect(),
        ))
    }

    /// Whether the masters support a `MasterFeatures` flag.
    pub async fn supports_master_feature(&self, feature: u32) -> Result<bool> {
        catalog::supports_feature(&self.inner.masters, feature, self.inner.admin_timeout).await
    }

    /// The largest hybrid timestamp this client has seen in server answers,
    /// if any: a read at or after it sees this client's writes.
    pub fn last_propagated_timestamp(&self) -> Option<HybridTime> {
        self.last_propagated_raw().map(HybridTime::from_raw)
    }

    /// Raises the last propagated timestamp to `ts` (never lowers it), so
    /// every later request of this client carries at least `ts` and each
    /// write is given a larger timestamp (client-propagated consistency).
    pub fn update_last_propagated_timestamp(&self, ts: HybridTime) {
        self.observe_timestamp(ts.raw());
    }

    /// [`last_propagated_timestamp`](Self::last_propagated_timestamp) in
    /// wire form, for requests.
    pub(crate) fn last_propagated_raw(&self) -> Option<u64> {
        match self.inner.last_propagated.load(Ordering::Relaxed) {
            0 => None,
            ts => Some(ts),
        }
    }

    /// Folds a timestamp from a server answer into the last propagated one.
    pub(crate) fn observe_timestamp(&self, ts: u64) {
        self.inner.last_propagated.fetch_max(ts, Ordering::Relaxed);
    }

    pub(crate) fn pool(&self) -> &ConnectionPool {
        &self.inner.pool
    }

    /// The tablet covering `partition_key` of `table`, from the cache or the
    /// master. A key in a non-covered range yields `Lookup::NonCovered`.
    pub(crate) async fn locate(
        &self,
        table: &KuduTable,
        partition_key: &[u8],
        deadline: Instant,
    ) -> Result<Lookup> {
        if let Some(hit) = self.cached(table.id(), partition_key) {
            return Ok(hit);
        }
        let timeout = deadline.saturating_duration_since(Instant::now());
        let req = pb::master::GetTableLocationsRequestPb {
            table: pb::master::TableIdentifierPb {
                table_id: Some(table.id().as_bytes().to_vec()),
                table_name: None,
            },
            partition_key_start: (!partition_key.is_empty()).then(|| partition_key.to_vec()),
            max_returned_locations: Some(LOOKUP_BATCH),
            intern_ts_infos_in_response: Some(true),
            ..Default::default()
        };
        let resp = self
            .inner
            .masters
            .call::<ms::GetTableLocations>(Some(table.name()), &req, timeout, &[])
            .await?;
        let tablets = tablets_from_pb(&resp)?;
        let exhausted = tablets.len() < LOOKUP_BATCH as usize;
        let ttl = Duration::from_millis(u64::from(resp.ttl_millis.unwrap_or(300_000)));
        {
            let mut map = self
                .inner
                .locations
                .lock()
                .map_err(|_| Error::InvalidArgument("location cache lock poisoned".into()))?;
            map.entry(table.id().to_owned()).or_default().insert(
                partition_key,
                tablets,
                exhausted,
                ttl,
                Instant::now(),
            );
        }
        Ok(self
            .cached(table.id(), partition_key)
            .unwrap_or(Lookup::NonCovered { end: Vec::new() }))
    }

    fn cached(&self, table_id: &str, key: &[u8]) -> Option<Lookup> {
        let map = self.inner.locations.lock().ok()?;
        match map.get(table_id)?.lookup(key, Instant::now()) {
            Lookup::Miss => None,
            hit => Some(hit),
        }
    }

    /// The range partitions of `table`, in key order, derived from its
    /// tablets (the master does not list them); gaps between them are
    /// non-covered ranges. A table without range columns has one unbounded
    /// range. Bounded by the admin timeout.
    pub async fn range_partitions(&self, table: &KuduTable) -> Result<Vec<RangePartition>> {
        let deadline = Instant::now() + self.admin_timeout();
        let tablets = self.tablets_in_range(table, &[], &[], deadline).await?;
        let keys: Vec<(&[u8], &[u8])> = tablets
            .iter()
            .map(|t| {
                (
                    t.partition_key_start.as_slice(),
                    t.partition_key_end.as_slice(),
                )
            })
            .collect();
        derive_range_partitions(table.partition_schema(), &keys).map_err(|e| table.partitioning(e))
    }

    /// `table` described as the [`TableBuilder`] that creates a copy of it
    /// named `name`, with all its range partitions: see
    /// [`KuduTable::to_builder`].
    pub async fn table_builder_like(&self, table: &KuduTable, name: &str) -> Result<TableBuilder> {
        let ranges = self.range_partitions(table).await?;
        table.to_builder(name, &ranges)
    }

    /// Every tablet of `table` whose range intersects
    /// [`start`, `end`) (partition keys; empty = unbounded), in key order,
    /// as the master knows them now (the table's cached locations are
    /// refreshed).
    pub async fn tablets_in_range(
        &self,
        table: &KuduTable,
        start: &[u8],
        end: &[u8],
        deadline: Instant,
    ) -> Result<Vec<Arc<RemoteTablet>>> {
        // Asked of the master afresh, not the location cache: a range kept
        // there as non-covered (for its TTL) may have been filled by a range
        // partition added since, and a dropped range may still be listed.
        self.forget_table(table.id());
        let mut out = Vec::new();
        let mut key = start.to_vec();
        loop {
            let next_key = match self.locate_with_retry(table, &key, deadline).await? {
                Lookup::Tablet(t) => {
                    let next = t.partition_key_end.clone();
                    out.push(t);
                    next
                }
                Lookup::NonCovered { end } => end,
                Lookup::Miss => break,
            };
            if next_key.is_empty() || (!end.is_empty() && next_key.as_slice() >= end) {
                break;
            }
            key = next_key;
        }
        Ok(out)
    }

    /// `locate` retried on transient errors until `deadline`.
    pub(crate) async fn locate_with_retry(
        &self,
        table: &KuduTable,
        key: &[u8],
        deadline: Instant,
    ) -> Result<Lookup> {
        let mut retrier = Retrier::new(
            format!("locating tablet of table '{}'", table.name()),
            deadline.saturating_duration_since(Instant::now()),
        );
        loop {
            retrier.begin_attempt();
            match self.locate(table, key, deadline).await {
                Ok(l) => return Ok(l),
                Err(e) => retrier.on_error(e).await?,
            }
        }
    }

    /// Drops a tablet from the cache after a routing error.
    pub(crate) fn invalidate_tablet(&self, table_id: &str, tablet_id: &str) {
        if let Ok(mut map) = self.inner.locations.lock() {
            if let Some(t) = map.get_mut(table_id) {
                t.invalidate_tablet(tablet_id);
            }
        }
    }

    fn forget_table(&self, table_id: &str) {
        if let Ok(mut map) = self.inner.locations.lock() {
            map.remove(table_id);
        }
    }
}

fn tablets_from_pb(resp: &pb::master::GetTableLocationsResponsePb) -> Result<Vec<RemoteTablet>> {
    let ts_addr = |ts: &pb::master::TsInfoPb| -> Replica {
        Replica {
            ts_uuid: String::from_utf8_lossy(&ts.permanent_uuid).into_owned(),
            addr: ts
                .rpc_addresses
                .first()
                .map(|hp| format!("{}:{}", hp.host, hp.port))
                .unwrap_or_default(),
            location: ts.location.clone(),
            role: Role::Unknown,
        }
    };
    let mut tablets = Vec::with_capacity(resp.tablet_locations.len());
    for loc in &resp.tablet_locations {
        let mut replicas = Vec::new();
        for r in &loc.interned_replicas {
            let ts = resp
                .ts_infos
                .get(r.ts_info_idx as usize)
                .ok_or_else(|| Error::Protocol {
                    addr: "leader master".into(),
                    message: format!(
                        "replica points at ts_infos[{}] of {}",
                        r.ts_info_idx,
                        resp.ts_infos.len()
                    ),
                })?;
            replicas.push(Replica {
                role: Role::from_i32(r.role),
                ..ts_addr(ts)
            });
        }
        for r in &loc.deprecated_replicas {
            replicas.push(Replica {
                role: Role::from_i32(r.role),
                ..ts_addr(&r.ts_info)
            });
        }
        replicas.retain(|r| !r.addr.is_empty());
        let partition = loc.partition.as_ref();
        tablets.push(RemoteTablet {
            tablet_id: String::from_utf8_lossy(&loc.tablet_id).into_owned(),
            partition_key_start: partition
                .and_then(|p| p.partition_key_start.clone())
                .unwrap_or_default(),
            partition_key_end: partition
                .and_then(|p| p.partition_key_end.clone())
                .unwrap_or_default(),
            replicas,
        });
    }
    Ok(tablets)
}

/// Maps a tablet server's application error to the error a caller acts on
/// (docs/kudu-protocol.md#tablet-server-errors and
/// docs/kudu-protocol.md#retry-rules).
pub(crate) fn tserver_error(
    err: &pb::tserver::TabletServerErrorPb,
    addr: &str,
    tablet_id: &str,
) -> Error {
    let status = status_from_pb(&err.status);
    let code = TsCode::try_from(err.code).unwrap_or(TsCode::UnknownError);
    match code {
        TsCode::TabletNotFound | TsCode::TabletNotRunning | TsCode::TabletFailed => {
            Error::TabletNotFound {
                tablet_id: tablet_id.to_owned(),
                addr: addr.to_owned(),
            }
        }
        TsCode::NotTheLeader => Error::NotLeaderReplica {
            tablet_id: tablet_id.to_owned(),
            addr: addr.to_owned(),
        },
        TsCode::ScannerExpired => Error::ScannerExpired {
            addr: addr.to_owned(),
        },
        TsCode::Throttled => Error::ServiceUnavailable {
            addr: addr.to_owned(),
            message: status.message,
        },
        TsCode::InvalidSnapshot
            if status.message.contains("ancient history")
                || status.message.contains("too old")
                || status.message.contains("history mark") =>
        {
            Error::SnapshotTooOld {
                message: status.message,
            }
        }
        _ if status.code == StatusCode::ServiceUnavailable => Error::ServiceUnavailable {
            addr: addr.to_owned(),
            message: status.message,
        },
        TsCode::UnknownError
            if matches!(status.code, StatusCode::IllegalState | StatusCode::Aborted) =>
        {
            Error::NotLeaderReplica {
                tablet_id: tablet_id.to_owned(),
                addr: addr.to_owned(),
            }
        }
        _ => Error::Status {
            context: format!("{code:?} from tablet {tablet_id} on {addr}"),
            status,
        },
    }
}
