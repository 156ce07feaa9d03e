//! Scanners: snapshot, fault-tolerant (ordered) and diff scans as async
//! streams of row batches, and serializable splits ("scan tokens").
//!
//! - `spec`, `builder`, `plan`: [`ScanSpec`] and [`ScanBuilder`] (what to
//!   read and how), checked against the table as a plan.
//! - `scanner`, `tablet`, `replica`, `keep_alive`: [`Scanner`], a `Stream` of [`RowBatch`]es that walks the tablets,
//!   reopens fault-tolerant scans after failures and closes server-side
//!   scanners it abandons.
//! - `checksum`: [`ScanBuilder::checksum`], the tablet servers' Checksum
//!   RPC over the same tablet walk, summed into a [`Checksum`];
//!   `row_checksum`: the same per-row CRC32C and the encoded primary key
//!   of a streamed row ([`RowView::checksum`],
//!   [`RowView::encoded_primary_key`]).
//! - `barrier`: [`KuduClient::wait_applied`], a replica's safe-time
//!   barrier (a scan that opens at a snapshot and reads nothing).
//! - `predicate`: [`Predicate`]s pushed down to the tablet servers.
//! - `split`: [`Split`]s, one per tablet (or key range), that another
//!   process can execute and resume.
//! - `decode`: row-wise and columnar result blocks → [`RowBatch`].
//!
//! Entry points on the client: [`KuduClient::scan_builder`],
//! [`KuduClient::scan_splits`], [`KuduClient::scanner_for_split`].
//!
//! [`KuduClient::wait_applied`]: crate::KuduClient::wait_applied
//! [`KuduClient::scan_builder`]: crate::KuduClient::scan_builder
//! [`KuduClient::scan_splits`]: crate::KuduClient::scan_splits
//! [`KuduClient::scanner_for_split`]: crate::KuduClient::scanner_for_split

pub(crate) mod barrier;
pub(crate) mod builder;
pub(crate) mod checksum;
pub(crate) mod decode;
pub(crate) mod keep_alive;
pub(crate) mod plan;
pub(crate) mod predicate;
pub(crate) mod replica;
pub(crate) mod row_checksum;
pub(crate) mod scanner;
pub(crate) mod spec;
pub(crate) mod split;
pub(crate) mod tablet;

pub use builder::ScanBuilder;
pub use checksum::Checksum;
pub use decode::{RowBatch, RowView};
pub use predicate::{ComparisonOp, Predicate, PredicateKind};
pub use scanner::Scanner;
pub use spec::{ReadMode, ReplicaSelection, ScanSpec};
pub use split::Split;
