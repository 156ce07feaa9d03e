//! One verification from start to end: open both sides, match their
//! columns, cut the key space, checksum the ranges in parallel, cut the
//! differing ones again until they are small, diff those row by row,
//! and (with repair) verify again.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::{watch, Semaphore};

use crate::checksum::range_sum;
use crate::columns::{match_columns, Columns};
use crate::diff::{diff_range, RangeDiff};
use crate::range::{cut_points, KeyRange};
use crate::reader::Reader;
use crate::{
    At, Method, Progress, RepairSummary, Side, TableSide, VerifyError, VerifyOptions, VerifyReport,
};

/// A differing range with at most this many rows (on either side) is
/// compared row by row instead of being cut again.
const SMALL_ROWS: u64 = 20_000;
/// Each cut of a differing range aims at chunks this much smaller.
const CUT_FACTOR: u64 = 16;
/// Below this chunk size a range is not cut again.
const MIN_CHUNK_BYTES: u64 = 256;

/// What every range of one verification pass shares.
pub(crate) struct Ctx {
    pub source: Reader,
    pub sink: Reader,
    pub columns: Columns,
    pub method: Method,
    pub max_listed: usize,
    pub repair: bool,
    pub parallelism: usize,
    /// Data per range of the first cut.
    pub chunk_bytes: u64,
    /// Bounds the tablet-level work running at once (checksums, diffs).
    pub permits: Semaphore,
    pub progress: Option<watch::Sender<Progress>>,
}

/// What one pass found.
#[derive(Debug, Default)]
struct Outcome {
    /// Ranges of the finest cut.
    ranges: u64,
    ranges_differing: u64,
    source_rows: u64,
    sink_rows: u64,
    diff: RangeDiff,
}

impl Outcome {
    fn merge(&mut self, other: Outcome, max_listed: usize) {
        self.ranges += other.ranges;
        self.ranges_differing += other.ranges_differing;
        self.source_rows += other.source_rows;
        self.sink_rows += other.sink_rows;
        let (d, o) = (&mut self.diff, other.diff);
        d.missing += o.missing;
        d.extra += o.extra;
        d.differing += o.differing;
        d.upserted += o.upserted;
        d.deleted += o.deleted;
        d.listed.extend(o.listed);
        // Keep the first `max_listed` in key order.
        if d.listed.len() > max_listed {
            d.listed.sort_by(|a, b| a.0.cmp(&b.0));
            d.listed.truncate(max_listed);
        }
    }
}

/// See [`crate::verify`].
pub(crate) async fn verify(opts: VerifyOptions) -> Result<VerifyReport, VerifyError> {
    let started = Instant::now();
    let started_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let (source, sink) = futures::try_join!(
        Reader::open(&opts.source, "source", opts.timeout),
        Reader::open(&opts.sink, "sink", opts.timeout)
    )?;
    let columns = match_columns(source.table.schema(), sink.table.schema())?;
    let parallelism = opts.parallelism.max(1);
    let ctx = Ctx {
        source,
        sink,
        columns,
        method: opts.method,
        max_listed: opts.max_listed,
        repair: opts.repair,
        parallelism,
        chunk_bytes: opts.chunk_bytes.max(1),
        permits: Semaphore::new(parallelism),
        progress: opts.progress.clone(),
    };
    let mut first = ctx.compare().await?;
    first.diff.listed.sort_by(|a, b| a.0.cmp(&b.0));
    let differences = first.diff.differences();
    let mut report = VerifyReport {
        equal: differences == 0,
        source: table_side(&ctx.source, first.source_rows),
        sink: table_side(&ctx.sink, first.sink_rows),
        columns: ctx.columns.projection.clone(),
        skipped_columns: ctx.columns.skipped.clone(),
        method: ctx.method,
        ranges: first.ranges,
        ranges_differing: first.ranges_differing,
        rows_compared: first.source_rows,
        differences,
        missing: first.diff.missing,
        extra: first.diff.extra,
        differing: first.diff.differing,
        truncated: differences > first.diff.listed.len() as u64,
        listed: first.diff.listed.into_iter().map(|(_, d)| d).collect(),
        repair: None,
        started_at_ms,
        elapsed_ms: 0,
    };
    if opts.repair {
        let equal_after = if differences == 0 {
            true
        } else {
            // The sink again, now (after the repair's writes, which this
            // client has seen); the source at the same time as before.
            let sink = Side {
                at: At::Now,
                ..opts.sink.clone()
            };
            let again = Ctx {
                sink: Reader::open(&sink, "sink", opts.timeout).await?,
                max_listed: 0,
                repair: false,
                ..ctx
            };
            again.compare().await?.diff.differences() == 0
        };
        report.repair = Some(RepairSummary {
            upserted: first.diff.upserted,
            deleted: first.diff.deleted,
            equal_after,
        });
        report.equal = equal_after;
    }
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

fn table_side(reader: &Reader, rows: u64) -> TableSide {
    TableSide {
        masters: reader.client.master_addrs().to_vec(),
        table: reader.name().to_owned(),
        timestamp: reader.at.raw(),
        rows,
    }
}

impl Ctx {
    /// One pass over the whole key space.
    async fn compare(&self) -> Result<Outcome, VerifyError> {
        let all = KeyRange::all();
        let chunk = self.chunk_bytes;
        let points = cut_points(&self.source, &self.columns.projection, &all, chunk).await?;
        let ranges = all.cut(points);
        self.update(|p| p.ranges_total += ranges.len() as u64);
        self.check_all(ranges, chunk, true).await
    }

    /// Checks `ranges` (cut at about `chunk` bytes), `parallelism` at once.
    async fn check_all(
        &self,
        ranges: Vec<KeyRange>,
        chunk: u64,
        top: bool,
    ) -> Result<Outcome, VerifyError> {
        let mut total = Outcome::default();
        let mut results = futures::stream::iter(ranges)
            .map(|range| self.check(range, chunk, top))
            .buffer_unordered(self.parallelism);
        while let Some(outcome) = results.try_next().await? {
            total.merge(outcome, self.max_listed);
        }
        Ok(total)
    }

    /// Checks one range: equal checksums end it; else it is cut again and
    /// its parts checked, or, when small or not cuttable, diffed.
    fn check(
        &self,
        range: KeyRange,
        chunk: u64,
        top: bool,
    ) -> BoxFuture<'_, Result<Outcome, VerifyError>> {
        Box::pin(async move {
            let (s, k) = futures::try_join!(
                range_sum(self, &self.source, &range),
                range_sum(self, &self.sink, &range)
            )?;
            let mut out = Outcome {
                source_rows: s.rows,
                sink_rows: k.rows,
                ..Outcome::default()
            };
            if s == k {
                out.ranges = 1;
            } else {
                // Finer and finer until the servers cut the range (asking
                // is cheap: no rows are read).
                let mut finer = chunk / CUT_FACTOR;
                let mut parts = Vec::new();
                while s.rows.max(k.rows) > SMALL_ROWS && finer >= MIN_CHUNK_BYTES {
                    let p = &self.columns.projection;
                    let (a, b) = futures::try_join!(
                        cut_points(&self.source, p, &range, finer),
                        cut_points(&self.sink, p, &range, finer)
                    )?;
                    parts = range.cut(a.into_iter().chain(b));
                    if parts.len() > 1 {
                        break;
                    }
                    finer /= CUT_FACTOR;
                }
                tracing::debug!(
                    source_rows = s.rows,
                    sink_rows = k.rows,
                    parts = parts.len(),
                    "a key range differs: cut again, or compared row by row (parts <= 1)"
                );
                if parts.len() > 1 {
                    self.update(|p| p.ranges_total += parts.len() as u64);
                    let inner = self.check_all(parts, finer, false).await?;
                    out.ranges = inner.ranges;
                    out.ranges_differing = inner.ranges_differing;
                    out.diff = inner.diff;
                } else {
                    let diff = diff_range(self, &range).await?;
                    self.update(|p| p.differences += diff.differences());
                    out.ranges = 1;
                    out.ranges_differing = u64::from(diff.differences() > 0);
                    out.diff = diff;
                }
            }
            self.update(|p| {
                p.ranges_done += 1;
                if top {
                    p.rows_compared += s.rows;
                }
            });
            if !top {
                // Rows are counted once, by the top-level range.
                out.source_rows = 0;
                out.sink_rows = 0;
            }
            Ok(out)
        })
    }

    fn update(&self, f: impl FnOnce(&mut Progress)) {
        if let Some(tx) = &self.progress {
            tx.send_modify(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DiffKind, Difference};

    fn listed(keys: &[u8]) -> Outcome {
        let mut out = Outcome::default();
        for &k in keys {
            out.diff.missing += 1;
            let mut key = serde_json::Map::new();
            key.insert("id".into(), k.into());
            out.diff.listed.push((
                vec![k],
                Difference {
                    kind: DiffKind::Missing,
                    key,
                    columns: Vec::new(),
                    source: None,
                    sink: None,
                },
            ));
        }
        out
    }

    #[test]
    fn merging_keeps_the_first_listed_in_key_order_and_counts_all() {
        let mut total = Outcome::default();
        total.merge(listed(&[9, 4]), 2);
        total.merge(listed(&[7, 1, 8]), 2);
        let keys: Vec<u8> = total.diff.listed.iter().map(|(k, _)| k[0]).collect();
        assert_eq!(keys, [1, 4]);
        assert_eq!(total.diff.differences(), 5);
    }
}
