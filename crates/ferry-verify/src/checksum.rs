//! One key range of one side reduced to a [`Sum`]: the 64-bit wrapping sum
//! of the rows' CRC32Cs and the row count. Order-independent, so the sums
//! of a range's tablets add up to the range's whatever the partitioning.
//!
//! Each tablet of the range is one unit of work (run under the
//! verification's parallelism permits): the tablet servers' Checksum RPC
//! ([`Method::Server`], no row crosses the network), or the rows streamed
//! and checksummed here ([`Method::Client`], `RowView::checksum`, the same
//! per-row CRC the servers compute).
//!
//! [`Sum`] rather than the client's `Checksum`: equality must ignore the
//! snapshot, which differs between the two sides.

use futures::future::try_join_all;
use kudu_client::scan::{Checksum, Split};

use crate::range::KeyRange;
use crate::reader::Reader;
use crate::run::Ctx;
use crate::{Method, VerifyError};

/// A range reduced to its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Sum {
    /// Wrapping sum of the per-row CRC32Cs.
    pub sum: u64,
    /// Rows.
    pub rows: u64,
}

impl Sum {
    fn add(&mut self, other: Sum) {
        self.sum = self.sum.wrapping_add(other.sum);
        self.rows += other.rows;
    }
}

/// `range` of `reader`'s table at its snapshot.
pub(crate) async fn range_sum(
    ctx: &Ctx,
    reader: &Reader,
    range: &KeyRange,
) -> Result<Sum, VerifyError> {
    let splits = reader
        .tablets(&reader.spec(&ctx.columns.projection, range))
        .await?;
    let sums = try_join_all(splits.iter().map(|split| async move {
        // Never closed; without a permit the unit just runs.
        let _permit = ctx.permits.acquire().await.ok();
        match ctx.method {
            Method::Server => server_sum(reader, split).await,
            Method::Client => client_sum(reader, split).await,
        }
    }))
    .await?;
    let mut total = Sum::default();
    for s in sums {
        total.add(s);
    }
    Ok(total)
}

/// The tablet servers' Checksum RPC over one split.
async fn server_sum(reader: &Reader, split: &Split) -> Result<Sum, VerifyError> {
    let c = reader
        .client
        .scan_builder(&reader.table)
        .with_spec(reader.split_spec(split))
        .checksum()
        .await
        .map_err(|e| reader.error("checksumming a key range", e))?;
    Ok(Sum {
        sum: c.sum,
        rows: c.rows,
    })
}

/// The split's rows streamed and checksummed here.
async fn client_sum(reader: &Reader, split: &Split) -> Result<Sum, VerifyError> {
    let what = "scanning a key range";
    let mut scanner = reader
        .client
        .scan_builder(&reader.table)
        .with_spec(reader.split_spec(split))
        .build()
        .map_err(|e| reader.error(what, e))?;
    let mut total = Checksum::default();
    while let Some(batch) = scanner
        .next_batch()
        .await
        .map_err(|e| reader.error(what, e))?
    {
        for row in batch.rows() {
            total.add_row(row.checksum());
        }
    }
    Ok(Sum {
        sum: total.sum,
        rows: total.rows,
    })
}
