//! One table as verified: its client, the opened table and the hybrid time
//! it is read at, with the scan descriptions and the error mapping every
//! read of that side shares.

use std::time::Duration;

use kudu_client::scan::{ScanSpec, Split};
use kudu_client::{HybridTime, KuduClient, KuduTable};

use crate::range::KeyRange;
use crate::{At, Side, VerifyError};

/// Rows of data per scan batch: the servers' maximum, fewer round trips.
const BATCH_BYTES: u32 = 8 * 1024 * 1024;

/// One side, opened.
#[derive(Debug, Clone)]
pub(crate) struct Reader {
    /// "source" or "sink".
    pub side: &'static str,
    pub client: KuduClient,
    pub table: KuduTable,
    /// The snapshot every read of this side uses.
    pub at: HybridTime,
    /// Deadline of each RPC.
    pub timeout: Duration,
}

impl Reader {
    /// Opens the table and fixes the time (`At::Now`: the cluster's clock,
    /// and after every write this client has seen).
    pub(crate) async fn open(
        side: &Side,
        name: &'static str,
        timeout: Duration,
    ) -> Result<Reader, VerifyError> {
        let mut reader = Reader {
            side: name,
            client: side.client.clone(),
            table: match side.client.open_table(&side.table).await {
                Ok(t) => t,
                Err(kudu_client::Error::TableNotFound(_)) => {
                    return Err(VerifyError::TableNotFound {
                        side: name,
                        table: side.table.clone(),
                    })
                }
                Err(e) => {
                    return Err(VerifyError::Kudu {
                        side: name,
                        table: side.table.clone(),
                        what: "opening the table".into(),
                        cause: Box::new(e),
                    })
                }
            },
            at: HybridTime::from_raw(0),
            timeout,
        };
        reader.at = match side.at {
            At::Time(ts) => ts,
            At::Now => {
                let clock = side
                    .client
                    .server_clock()
                    .await
                    .map_err(|e| reader.error("reading the cluster's clock", e))?;
                // A write acknowledged at `seen` is only in snapshots after it.
                let seen = side
                    .client
                    .last_propagated_timestamp()
                    .map_or(0, |t| t.raw().saturating_add(1));
                clock.max(HybridTime::from_raw(seen))
            }
        };
        Ok(reader)
    }

    /// The table's name.
    pub(crate) fn name(&self) -> &str {
        self.table.name()
    }

    /// Maps a client error of this side: a snapshot older than the
    /// history retention becomes [`VerifyError::HistoryTooOld`].
    pub(crate) fn error(&self, what: impl Into<String>, e: kudu_client::Error) -> VerifyError {
        match e {
            kudu_client::Error::SnapshotTooOld { .. } => VerifyError::HistoryTooOld {
                side: self.side,
                table: self.name().to_owned(),
                timestamp: self.at.raw(),
            },
            kudu_client::Error::TableNotFound(_) => VerifyError::TableNotFound {
                side: self.side,
                table: self.name().to_owned(),
            },
            e => VerifyError::Kudu {
                side: self.side,
                table: self.name().to_owned(),
                what: what.into(),
                cause: Box::new(e),
            },
        }
    }

    /// A snapshot scan of `range` with `projection`.
    pub(crate) fn spec(&self, projection: &[String], range: &KeyRange) -> ScanSpec {
        ScanSpec::new()
            .projection(projection)
            .snapshot(self.at)
            .lower_bound_key(range.lower.clone())
            .exclusive_upper_bound_key(range.upper.clone())
            .batch_size_bytes(BATCH_BYTES)
            .cache_blocks(false)
            .timeout(self.timeout)
    }

    /// The scan of `spec`, one split per tablet it visits.
    pub(crate) async fn tablets(&self, spec: &ScanSpec) -> Result<Vec<Split>, VerifyError> {
        self.client
            .scan_splits(&self.table, spec)
            .await
            .map_err(|e| self.error("listing the tablets of a key range", e))
    }

    /// The scan spec of one split, with this side's execution settings.
    pub(crate) fn split_spec(&self, split: &Split) -> ScanSpec {
        split
            .scan_spec()
            .batch_size_bytes(BATCH_BYTES)
            .timeout(self.timeout)
    }
}
