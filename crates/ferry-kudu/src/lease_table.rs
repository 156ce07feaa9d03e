//! [`LeaseTable`]: the engine's [`StateStore`] in a small Kudu table on the
//! sink cluster, where the HA lease lives by default
//! (`high-availability.storageDir = kudu:ferry_ha`).
//!
//! Why the sink cluster: it is in the DR region, and a job that cannot
//! reach its sink cannot write anyway, so the lease shares exactly the
//! failure domain of the writes it fences. Losing the primary region (its
//! object store included) leaves the lease reachable to a standby there.
//!
//! The table (created on first use with the cluster's default replication
//! factor, one tablet) has two columns:
//!
//! | column  | type            | meaning                               |
//! |---------|-----------------|---------------------------------------|
//! | `key`   | STRING, key     | the object's key (`<job-id>/_lease/seq-…`) |
//! | `value` | BINARY not null | the object's bytes (at most 60 KiB)   |
//!
//! Each operation is one row operation on the tablet leader:
//! `put_if_absent` an INSERT (Kudu refuses a second insert of a key
//! atomically under the row lock: exactly one creator wins), `put` an
//! UPSERT, `delete` a DELETE_IGNORE, `get` and `list` READ_LATEST scans
//! of the leader (an acknowledged write is on a majority and visible
//! there). Objects are the lease's small records: a value over the cell
//! limit is refused rather than split, since a split object would not be
//! created atomically.

use std::fmt;

use bytes::Bytes;
use ferry_engine::checkpoint::{StateKey, StateStore, StoreError, StoreFuture};
use kudu_client::error::StatusCode;
use kudu_client::scan::{ComparisonOp, Predicate, ReadMode, ReplicaSelection};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, Error as KuduError};
use kudu_client::{KuduClient, KuduTable, Schema, TableBuilder};
use tokio::sync::OnceCell;

/// The largest object the table holds (Kudu's default cell limit is
/// 64 KiB; the rest is left for the row's key and overhead).
pub const MAX_OBJECT_BYTES: usize = 60 * 1024;

/// The configuration key that names the table, for messages.
const KEY_NAME: &str = "high-availability.storageDir";

/// A [`StateStore`] in the Kudu table `name` of one cluster (the sink's).
/// Opened, and created if missing, on the first operation.
pub struct LeaseTable {
    client: KuduClient,
    name: String,
    table: OnceCell<KuduTable>,
}

impl fmt::Debug for LeaseTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseTable")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn schema() -> Result<Schema, KuduError> {
    Schema::new(vec![
        ColumnSchema::builder("key", DataType::String)
            .key(true)
            .build()?,
        ColumnSchema::builder("value", DataType::Binary)
            .nullable(false)
            .build()?,
    ])
}

impl LeaseTable {
    /// The table `name` on the cluster of `client` (nothing is contacted
    /// until the first operation).
    pub fn new(client: KuduClient, name: impl Into<String>) -> Self {
        LeaseTable {
            client,
            name: name.into(),
            table: OnceCell::new(),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `kudu:<table>`, as the key's value names it.
    pub fn uri(&self) -> String {
        format!("kudu:{}", self.name)
    }

    fn open_error(&self, reason: String) -> StoreError {
        StoreError::Open {
            location: self.uri(),
            reason,
        }
    }

    async fn table(&self) -> Result<&KuduTable, StoreError> {
        self.table.get_or_try_init(|| self.open_or_create()).await
    }

    async fn open_or_create(&self) -> Result<KuduTable, StoreError> {
        let table = match self.client.open_table(&self.name).await {
            Ok(t) => t,
            Err(KuduError::TableNotFound(_)) => self.create().await?,
            Err(e) => return Err(self.open_error(format!("opening it on the sink cluster: {e}"))),
        };
        let s = table.schema();
        let fits = |name: &str, kind: DataType| {
            s.column_by_name(name)
                .is_some_and(|c| c.data_type() == kind)
        };
        if !fits("key", DataType::String) || !fits("value", DataType::Binary) {
            return Err(self.open_error(format!(
                "table '{}' on the sink cluster is not a lease table (it needs a STRING key \
                 column 'key' and a BINARY column 'value'); name another table in {KEY_NAME}",
                self.name
            )));
        }
        Ok(table)
    }

    async fn create(&self) -> Result<KuduTable, StoreError> {
        let schema = schema().map_err(|e| self.open_error(e.to_string()))?;
        let builder = TableBuilder::new(&self.name, schema)
            .set_range_partition_columns(&["key"])
            .comment("ferry: HA leases (docs/dr.md)");
        tracing::info!(table = %self.name, "creating the lease table on the sink cluster");
        match self.client.create_table(&builder).await {
            Ok(_) => {}
            // Another instance created it meanwhile.
            Err(KuduError::Status { status, .. }) if status.code == StatusCode::AlreadyPresent => {}
            Err(e) => {
                return Err(self.open_error(format!(
                    "creating it on the sink cluster failed: {e}; create it there \
                     (columns key STRING primary key, value BINARY NOT NULL; docs/dr.md) \
                     or set {KEY_NAME} to a directory every instance reaches"
                )))
            }
        }
        self.client
            .open_table(&self.name)
            .await
            .map_err(|e| self.open_error(format!("opening it on the sink cluster: {e}")))
    }

    /// Applies one row operation and waits for its outcome.
    async fn write(&self, op: Operation) -> Result<(), KuduError> {
        let mut session = self
            .client
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushSync))?;
        session.apply(op).await?;
        session.flush().await
    }

    fn row(
        &self,
        table: &KuduTable,
        op: &'static str,
        key: &StateKey,
        value: Option<&[u8]>,
    ) -> Result<kudu_client::Row, StoreError> {
        if let Some(v) = value.filter(|v| v.len() > MAX_OBJECT_BYTES) {
            return Err(StoreError::backend(
                op,
                key,
                format!(
                    "{} bytes is more than a lease table holds ({MAX_OBJECT_BYTES})",
                    v.len()
                ),
            ));
        }
        let mut row = table.new_row();
        let filled = (|| -> Result<(), KuduError> {
            row.set_str("key", key.as_str())?;
            if let Some(v) = value {
                row.set_binary("value", v)?;
            }
            Ok(())
        })();
        filled.map_err(|e| StoreError::backend(op, key, e))?;
        Ok(row)
    }

    /// Every (key, value) whose key is `exact` or (with `under`) lies
    /// under the prefix; read from the leader at its latest state.
    async fn scan(
        &self,
        op: &'static str,
        at: &StateKey,
        exact: bool,
    ) -> Result<Vec<(StateKey, Bytes)>, StoreError> {
        let table = self.table().await?;
        let fail = |e: KuduError| StoreError::backend(op, at, e);
        let mut builder = self
            .client
            .scan_builder(table)
            .read_mode(ReadMode::Latest)
            .replica_selection(ReplicaSelection::LeaderOnly);
        if exact {
            builder = builder.predicate(Predicate::comparison(
                "key",
                ComparisonOp::Equal,
                at.as_str().to_owned(),
            ));
        } else if !at.is_root() {
            // Whole segments: `a/b/` ≤ key < `a/b0` ('0' follows '/').
            builder = builder
                .predicate(Predicate::comparison(
                    "key",
                    ComparisonOp::GreaterEqual,
                    format!("{at}/"),
                ))
                .predicate(Predicate::comparison(
                    "key",
                    ComparisonOp::Less,
                    format!("{at}0"),
                ));
        }
        let mut scanner = builder.build().map_err(fail)?;
        let mut found = Vec::new();
        while let Some(batch) = scanner.next_batch().await.map_err(fail)? {
            for row in batch.rows() {
                let raw = row.get_binary("key").map_err(fail)?;
                let text = std::str::from_utf8(raw)
                    .map_err(|e| StoreError::backend(op, at, format!("a key is not UTF-8: {e}")))?;
                // A row someone wrote by hand with an invalid key is not
                // one of ours: skip it rather than fail every listing.
                let Ok(key) = StateKey::parse(text) else {
                    tracing::warn!(table = %self.name, key = text, "ignoring a lease table row with an invalid key");
                    continue;
                };
                let value = Bytes::copy_from_slice(row.get_binary("value").map_err(fail)?);
                found.push((key, value));
            }
        }
        Ok(found)
    }
}

/// Whether `e` is the refusal of an INSERT whose key exists.
fn already_present(e: &KuduError) -> bool {
    match e {
        KuduError::RowErrors(rows) => rows
            .iter()
            .any(|r| r.status.code == StatusCode::AlreadyPresent),
        KuduError::Status { status, .. } => status.code == StatusCode::AlreadyPresent,
        _ => false,
    }
}

impl StateStore for LeaseTable {
    fn put_if_absent<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let table = self.table().await?;
            let row = self.row(table, "create", key, Some(&bytes))?;
            match self.write(Operation::insert(table, row)).await {
                Ok(()) => Ok(()),
                Err(e) if already_present(&e) => {
                    Err(StoreError::AlreadyExists { key: key.clone() })
                }
                Err(e) => Err(StoreError::backend("create", key, e)),
            }
        })
    }

    fn put<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let table = self.table().await?;
            let row = self.row(table, "write", key, Some(&bytes))?;
            self.write(Operation::upsert(table, row))
                .await
                .map_err(|e| StoreError::backend("write", key, e))
        })
    }

    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>> {
        Box::pin(async move {
            let found = self.scan("read", key, true).await?;
            Ok(found.into_iter().next().map(|(_, v)| v))
        })
    }

    fn list<'a>(&'a self, prefix: &'a StateKey) -> StoreFuture<'a, Vec<StateKey>> {
        Box::pin(async move {
            let found = self.scan("list", prefix, false).await?;
            Ok(found.into_iter().map(|(k, _)| k).collect())
        })
    }

    fn delete<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let table = self.table().await?;
            let row = self.row(table, "delete", key, None)?;
            self.write(Operation::delete_ignore(table, row))
                .await
                .map_err(|e| StoreError::backend("delete", key, e))
        })
    }
}
