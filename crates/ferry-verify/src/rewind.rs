//! Rewinding a table to an earlier hybrid time with its own history: every
//! row that changed after the time is written back to its value then, or
//! deleted if it did not exist then.
//!
//! It is [`crate::verify`] with the table read at the earlier time as the
//! source and the same table now as the sink, with repair: the checksums
//! find the key ranges that changed (no row crosses the network for the
//! others), the row diff of those ranges streams in key order (memory: one
//! batch per tablet), and the repair writes the old version of each
//! changed row (UPSERT_IGNORE; deleted and written again when an immutable
//! cell changed; DELETE_IGNORE of rows that did not exist then). A
//! non-unique primary key's hidden `auto_incrementing_id` is part of the
//! compared key. A rerun finds nothing left to write: it is idempotent.
//!
//! The cost is that of a `ferry verify` of the table (tablet-server
//! checksums over the whole table at both times), not of a copy.

use std::time::Duration;

use kudu_client::scan::ScanSpec;
use kudu_client::{HybridTime, KuduClient};
use serde::{Deserialize, Serialize};

use crate::{At, Side, VerifyError, VerifyOptions, VerifyReport};

/// Kudu's default `--tablet_history_max_age_sec` (7 days).
pub const DEFAULT_HISTORY_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// What [`rewind`] is asked to do.
#[derive(Debug, Clone)]
pub struct RewindOptions {
    /// A client of the table's cluster.
    pub client: KuduClient,
    /// The table.
    pub table: String,
    /// The hybrid time (of this cluster) the table is rewound to.
    pub to: HybridTime,
    /// Only count what would be written.
    pub dry_run: bool,
    /// The cluster's `--tablet_history_max_age_sec`, for the headroom in
    /// the report (Kudu does not publish it to clients).
    pub history_max_age: Duration,
    /// Ranges compared at the same time.
    pub parallelism: usize,
    /// How long one RPC may take.
    pub timeout: Duration,
}

impl RewindOptions {
    /// `table` rewound to `to`, for real, a 7-day history assumed, 4
    /// ranges at a time, 30 s per RPC.
    pub fn new(client: KuduClient, table: impl Into<String>, to: HybridTime) -> Self {
        RewindOptions {
            client,
            table: table.into(),
            to,
            dry_run: false,
            history_max_age: DEFAULT_HISTORY_MAX_AGE,
            parallelism: 4,
            timeout: Duration::from_secs(30),
        }
    }
}

/// What [`rewind`] did (or, dry, would do).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindReport {
    /// The table.
    pub table: String,
    /// The time it was rewound to (raw hybrid time).
    pub to: u64,
    /// The time "now" was read at (raw hybrid time).
    pub from: u64,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// Rows written back to their value at `to` (they changed after it, or
    /// were deleted after it).
    pub rewritten: u64,
    /// Rows deleted (they did not exist at `to`).
    pub deleted: u64,
    /// Whether the table equals itself at `to` afterwards (a dry run: it
    /// already did).
    pub equal_after: bool,
    /// How long `to` stays within the history retention (from the
    /// physical clock and `history_max_age`): a later failback or reverse
    /// start from `to` must happen within it.
    pub headroom_ms: u64,
    /// The comparison in full.
    pub verify: VerifyReport,
}

/// Why a table cannot be rewound.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    /// The time is older than the table's history.
    #[error("table '{table}' cannot be rewound to hybrid time {to}: it is older than the cluster keeps history for (--tablet_history_max_age_sec); a rewind is impossible, copy the table afresh instead (a job with a full snapshot)")]
    HistoryExpired {
        /// The table.
        table: String,
        /// The raw hybrid time asked for.
        to: u64,
    },
    /// The time is in the future of the cluster's clock.
    #[error("table '{table}' cannot be rewound to hybrid time {to}: it is later than the cluster's clock ({now})")]
    InFuture {
        /// The table.
        table: String,
        /// The raw hybrid time asked for.
        to: u64,
        /// The cluster's clock.
        now: u64,
    },
    /// Reading or writing failed.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

impl RewindError {
    /// Whether the error is the caller's input (exit code 2).
    pub fn is_usage(&self) -> bool {
        match self {
            RewindError::HistoryExpired { .. } | RewindError::InFuture { .. } => true,
            RewindError::Verify(e) => e.is_usage(),
        }
    }
}

/// How long `to` stays readable: `to` + the retention − the clock `now`.
pub fn headroom(to: HybridTime, now: HybridTime, history_max_age: Duration) -> Duration {
    let end = to.physical_micros() + history_max_age.as_micros() as u64;
    Duration::from_micros(end.saturating_sub(now.physical_micros()))
}

/// What [`check_history`] learned of a table at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct History {
    /// The cluster's clock when checked.
    pub now: HybridTime,
    /// Whether the table held a row at the time checked.
    pub held_rows: bool,
}

/// Refuses `to` when the table cannot be read at it (before the ancient
/// history mark, or after the clock); else the cluster's clock and whether
/// the table held a row then. Cheap: one snapshot scan of one row.
pub async fn check_history(
    client: &KuduClient,
    table: &str,
    to: HybridTime,
    timeout: Duration,
) -> Result<History, RewindError> {
    let kudu = |what: &str, e| {
        RewindError::Verify(VerifyError::Kudu {
            side: "rewound",
            table: table.to_owned(),
            what: what.to_owned(),
            cause: Box::new(e),
        })
    };
    let now = client
        .server_clock()
        .await
        .map_err(|e| kudu("reading the cluster's clock", e))?;
    if to > now {
        return Err(RewindError::InFuture {
            table: table.to_owned(),
            to: to.raw(),
            now: now.raw(),
        });
    }
    let opened = match client.open_table(table).await {
        Ok(t) => t,
        Err(kudu_client::Error::TableNotFound(_)) => {
            return Err(VerifyError::TableNotFound {
                side: "rewound",
                table: table.to_owned(),
            }
            .into())
        }
        Err(e) => return Err(kudu("opening the table", e)),
    };
    let keys: Vec<String> = opened
        .schema()
        .key_columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    let spec = ScanSpec::new()
        .projection(&keys)
        .snapshot(to)
        .limit(1)
        .timeout(timeout);
    let first = match client.scan_builder(&opened).with_spec(spec).build() {
        // The server checks the time on open; a row, if any, comes within
        // the first batches (an empty batch may precede it).
        Ok(mut scanner) => loop {
            match scanner.next_batch().await {
                Ok(Some(batch)) if batch.num_rows() > 0 => break Ok(true),
                Ok(Some(_)) => {}
                Ok(None) => break Ok(false),
                Err(e) => break Err(e),
            }
        },
        Err(e) => Err(e),
    };
    match first {
        Ok(held_rows) => Ok(History { now, held_rows }),
        Err(kudu_client::Error::SnapshotTooOld { .. }) => Err(RewindError::HistoryExpired {
            table: table.to_owned(),
            to: to.raw(),
        }),
        Err(e) => Err(kudu("reading the table at the rewind time", e)),
    }
}

/// Rewinds `opts.table` to `opts.to` (see the module docs).
pub async fn rewind(opts: RewindOptions) -> Result<RewindReport, RewindError> {
    let now = check_history(&opts.client, &opts.table, opts.to, opts.timeout)
        .await?
        .now;
    let side = |at| Side {
        client: opts.client.clone(),
        table: opts.table.clone(),
        at,
    };
    let mut verify = VerifyOptions::new(side(At::Time(opts.to)), side(At::Now));
    verify.repair = !opts.dry_run;
    verify.parallelism = opts.parallelism.max(1);
    verify.timeout = opts.timeout;
    verify.max_listed = 20;
    let report = crate::verify(verify).await.map_err(|e| match e {
        VerifyError::HistoryTooOld { .. } => RewindError::HistoryExpired {
            table: opts.table.clone(),
            to: opts.to.raw(),
        },
        e => RewindError::Verify(e),
    })?;
    Ok(RewindReport {
        table: opts.table.clone(),
        to: opts.to.raw(),
        from: report.sink.timestamp,
        dry_run: opts.dry_run,
        rewritten: report.missing + report.differing,
        deleted: report.extra,
        equal_after: report.equal || (opts.dry_run && report.differences == 0),
        headroom_ms: headroom(opts.to, now, opts.history_max_age).as_millis() as u64,
        verify: report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_is_what_is_left_of_the_retention() {
        let to = HybridTime::from_micros(1_000_000_000);
        let now = HybridTime::from_micros(1_000_000_000 + 3_600_000_000);
        let day = Duration::from_secs(86_400);
        assert_eq!(headroom(to, now, day), Duration::from_secs(86_400 - 3_600));
        // Past the retention: none left.
        assert_eq!(headroom(to, now, Duration::from_secs(60)), Duration::ZERO);
    }
}
