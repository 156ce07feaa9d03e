//! [`ScanBuilder`]: a [`ScanSpec`] bound to a client and a table, and the
//! client's entry point [`KuduClient::scan_builder`].

use std::time::Duration;

use super::predicate::Predicate;
use super::{scanner::*, spec::*};
use crate::client::KuduClient;
use crate::hybrid_time::HybridTime;
use crate::schema::Row;
use crate::table::KuduTable;
use crate::Result;

/// Builds a [`Scanner`] for one table: [`KuduClient::scan_builder`].
///
/// ```no_run
/// # async fn f(client: kudu_client::KuduClient) -> kudu_client::Result<()> {
/// use futures::TryStreamExt;
/// use kudu_client::scan::{ComparisonOp, Predicate};
/// let table = client.open_table("metrics").await?;
/// let mut scanner = client
///     .scan_builder(&table)
///     .projection(&["host", "value"])
///     .predicate(Predicate::comparison("value", ComparisonOp::Greater, 10i64))
///     .fault_tolerant(true)
///     .build()?;
/// while let Some(batch) = scanner.try_next().await? {
///     for row in batch.rows() {
///         println!("{} {}", row.get_str("host")?, row.get_i64("value")?);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ScanBuilder {
    pub(super) client: KuduClient,
    pub(super) table: KuduTable,
    pub(super) spec: ScanSpec,
}

macro_rules! forward {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(<$($g:ident: $b:path),*>)?; )*) => {
        $(
            $(#[$doc])*
            pub fn $name$(<$($g: $b),*>)?(mut self, $($arg: $ty),*) -> Self {
                self.spec = self.spec.$name($($arg),*);
                self
            }
        )*
    };
}

impl ScanBuilder {
    /// A builder scanning `table` with `client`.
    pub fn new(client: &KuduClient, table: &KuduTable) -> Self {
        ScanBuilder {
            client: client.clone(),
            table: table.clone(),
            spec: ScanSpec::new(),
        }
    }

    /// Replaces the whole scan description.
    pub fn with_spec(mut self, spec: ScanSpec) -> Self {
        self.spec = spec;
        self
    }

    /// The scan description built so far.
    pub fn spec(&self) -> &ScanSpec {
        &self.spec
    }

    /// Reads only these columns, in this order (empty: count rows only).
    pub fn projection<S: AsRef<str>>(mut self, columns: &[S]) -> Self {
        self.spec = self.spec.projection(columns);
        self
    }

    forward! {
        /// Adds a predicate; rows must satisfy all of them.
        fn predicate(p: Predicate);
        /// Sets the read mode.
        fn read_mode(m: ReadMode);
        /// `READ_AT_SNAPSHOT` at `ts`.
        fn snapshot(ts: HybridTime);
        /// `READ_AT_SNAPSHOT` at the time the first server picks.
        fn snapshot_now();
        /// Fault tolerant (ORDERED, resumable); implies a snapshot read.
        fn fault_tolerant(on: bool);
        /// Diff scan of the changes in `[start, end)`.
        fn diff(start: HybridTime, end: HybridTime);
        /// Bytes of row data per batch (hint).
        fn batch_size_bytes(bytes: u32);
        /// Stops after this many rows.
        fn limit(rows: u64);
        /// Which replica serves each tablet.
        fn replica_selection(s: ReplicaSelection);
        /// Inclusive lower primary-key bound, encoded.
        fn lower_bound_key(key: Vec<u8>);
        /// Exclusive upper primary-key bound, encoded.
        fn exclusive_upper_bound_key(key: Vec<u8>);
        /// Inclusive lower primary-key bound, as a row.
        fn lower_bound(row: &Row);
        /// Exclusive upper primary-key bound, as a row.
        fn exclusive_upper_bound(row: &Row);
        /// Restricts the scan to `[start, end)` of the partition key space.
        fn partition_key_range(start: Vec<u8>, end: Vec<u8>);
        /// Columnar result blocks (1.12+).
        fn columnar(on: bool);
        /// Whether servers may cache the blocks read.
        fn cache_blocks(on: bool);
        /// Deadline per tablet open and per continue call.
        fn timeout(t: Duration);
        /// Automatic keep-alive while the consumer is idle.
        fn keep_alive_interval(interval: Duration);
    }

    /// Checks the description against the table and returns the scanner.
    /// Nothing is sent until the stream is first polled.
    pub fn build(self) -> Result<Scanner> {
        Scanner::new(&self.client, &self.table, &self.spec)
    }
}

impl KuduClient {
    /// Starts describing a scan of `table`.
    pub fn scan_builder(&self, table: &KuduTable) -> ScanBuilder {
        ScanBuilder::new(self, table)
    }
}
