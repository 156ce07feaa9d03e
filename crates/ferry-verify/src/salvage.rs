//! The salvage of a failback: the rows of the old primary that changed
//! after the last replicated instant and never reached the new primary,
//! each with its key, its value then, its value now, the new primary's
//! value, and when it changed.
//!
//! Kudu's diff scan says *that* a row changed in an interval, not when, so
//! the interval is cut into `slices` equal parts, each diff-scanned for
//! its keys (key columns only), and each row is attributed to the last
//! part it changed in: the time is known to one slice's length (the
//! `precision` of the summary). The rows themselves come from one diff
//! scan of the whole interval (values as of its end), the value then from
//! a snapshot read at its start, the new primary's from a read now.
//!
//! A row whose value now equals the new primary's reached it (a window in
//! flight when the source died wrote part of it) and is left out, as is a
//! row whose value now equals its value then (changed and changed back).
//! Memory: the interval's changed rows (the writes of the outage, not
//! the table).

use std::collections::HashMap;
use std::time::Duration;

use kudu_client::scan::{ComparisonOp, Predicate, RowView, ScanSpec};
use kudu_client::{HybridTime, KuduClient, KuduTable};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::values::row_json;
use crate::VerifyError;

/// What [`salvage`] is asked to do.
#[derive(Debug, Clone)]
pub struct SalvageOptions {
    /// The old primary's client.
    pub old: KuduClient,
    /// The old primary's table.
    pub old_table: String,
    /// The new primary's client.
    pub new: KuduClient,
    /// The new primary's table.
    pub new_table: String,
    /// The last replicated instant (a hybrid time of the old primary).
    pub since: HybridTime,
    /// The end of the interval (a hybrid time of the old primary); `None`:
    /// its clock now.
    pub until: Option<HybridTime>,
    /// Parts the interval is cut into to date each row (at least 1).
    pub slices: u32,
    /// How long one RPC may take.
    pub timeout: Duration,
}

/// One salvaged row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SalvagedRow {
    /// The old primary's table.
    pub table: String,
    /// The primary key (column → value, as `ferry verify` shows values).
    pub key: Map<String, Json>,
    /// The row at the last replicated instant (`None`: it did not exist).
    pub then: Option<Map<String, Json>>,
    /// The row now on the old primary (`None`: deleted).
    pub now: Option<Map<String, Json>>,
    /// The row now on the new primary (`None`: absent there).
    pub new_primary: Option<Map<String, Json>>,
    /// It last changed at or after this hybrid time (raw) ...
    pub changed_after: u64,
    /// ... and before this one (raw).
    pub changed_before: u64,
    /// The same as microseconds since the epoch.
    pub changed_after_micros: u64,
    /// The same as microseconds since the epoch.
    pub changed_before_micros: u64,
}

/// What [`salvage`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SalvageSummary {
    /// The interval's start (raw hybrid time).
    pub since: u64,
    /// The interval's end (raw hybrid time).
    pub until: u64,
    /// Rows salvaged (handed to the caller).
    pub salvaged: u64,
    /// Changed rows left out because the new primary holds their value.
    pub reached: u64,
    /// Changed rows left out because they were changed back.
    pub unchanged: u64,
    /// How precisely each row is dated: one slice's length, in ms.
    pub precision_ms: u64,
}

impl SalvageSummary {
    /// Nothing salvaged yet, over `[since, until)` dated in `slices`.
    fn empty(since: HybridTime, until: HybridTime, slices: u32) -> Self {
        let span = until
            .physical_micros()
            .saturating_sub(since.physical_micros());
        SalvageSummary {
            since: since.raw(),
            until: until.raw(),
            salvaged: 0,
            reached: 0,
            unchanged: 0,
            precision_ms: span / u64::from(slices.max(1)) / 1000,
        }
    }
}

/// Hands every salvaged row of `opts` to `each`, in no particular order.
pub async fn salvage<F>(opts: &SalvageOptions, mut each: F) -> Result<SalvageSummary, VerifyError>
where
    F: FnMut(SalvagedRow) -> Result<(), String>,
{
    let old = Side::open(&opts.old, &opts.old_table, "old primary", opts.timeout).await?;
    let new = Side::open(&opts.new, &opts.new_table, "new primary", opts.timeout).await?;
    let until = match opts.until {
        Some(t) => t,
        None => old.clock().await?,
    };
    let since = opts.since;
    let bounds = slice_bounds(since, until, opts.slices.max(1));
    let keys = old.key_names();
    let slice_of = date_changes(&old, &keys, &bounds).await?;
    let mut summary = SalvageSummary::empty(since, until, opts.slices);
    let all = old.all_names();
    let new_names: Vec<String> = all
        .iter()
        .filter(|n| new.table.schema().column_by_name(n).is_some())
        .cloned()
        .collect();
    // Collected first: the point reads below cannot run while the diff
    // scan's batch is borrowed.
    let mut changed: Vec<Changed> = Vec::new();
    old.each_changed(&all, since, until, |row, deleted| {
        let n = keys.len();
        let key = row_json(row, 0, n)?;
        let now = if deleted {
            None
        } else {
            Some(row_json(row, 0, all.len())?)
        };
        let mut predicates = Vec::with_capacity(n);
        for (i, name) in keys.iter().enumerate() {
            predicates.push(Predicate::comparison(
                name.as_str(),
                ComparisonOp::Equal,
                row.get(i)?.into_owned(),
            ));
        }
        changed.push((row.encoded_primary_key()?, key, now, predicates));
        Ok(())
    })
    .await?;
    for (encoded, key, now, predicates) in changed {
        let then = old.point(&all, &predicates, Some(since)).await?;
        let on_new = new.point(&new_names, &predicates, None).await?;
        if then == now {
            summary.unchanged += 1;
            continue;
        }
        if on_new.is_some() && on_new == now.as_ref().map(|r| only(r, &new_names)) {
            summary.reached += 1;
            continue;
        }
        let slice = slice_of.get(&encoded).copied().unwrap_or(bounds.len() - 2);
        let (a, b) = (bounds[slice], bounds[slice + 1]);
        each(SalvagedRow {
            table: opts.old_table.clone(),
            key,
            then,
            now,
            new_primary: on_new,
            changed_after: a.raw(),
            changed_before: b.raw(),
            changed_after_micros: a.physical_micros(),
            changed_before_micros: b.physical_micros(),
        })
        .map_err(|e| VerifyError::Incomparable(format!("cannot keep a salvaged row: {e}")))?;
        summary.salvaged += 1;
    }
    Ok(summary)
}

/// Key → the last of the slices between `bounds` it changed in (a
/// keys-only diff scan per slice).
async fn date_changes(
    old: &Side<'_>,
    keys: &[String],
    bounds: &[HybridTime],
) -> Result<HashMap<Vec<u8>, usize>, VerifyError> {
    let mut slice_of = HashMap::new();
    for (i, w) in bounds.windows(2).enumerate() {
        old.each_changed(keys, w[0], w[1], |row, _| {
            slice_of.insert(row.encoded_primary_key()?, i);
            Ok(())
        })
        .await?;
    }
    Ok(slice_of)
}

/// Rows of `table` changed in `[start, end)`: a probe of whether anything
/// still writes to it.
pub async fn count_changes(
    client: &KuduClient,
    table: &str,
    start: HybridTime,
    end: HybridTime,
    timeout: Duration,
) -> Result<u64, VerifyError> {
    let side = Side::open(client, table, "probed", timeout).await?;
    let mut n = 0;
    side.each_changed(&side.key_names(), start, end, |_, _| {
        n += 1;
        Ok(())
    })
    .await?;
    Ok(n)
}

/// A changed row: its encoded key, key, value now and key predicates.
type Changed = (
    Vec<u8>,
    Map<String, Json>,
    Option<Map<String, Json>>,
    Vec<Predicate>,
);

/// The row's cells of `names`.
fn only(row: &Map<String, Json>, names: &[String]) -> Map<String, Json> {
    row.iter()
        .filter(|(k, _)| names.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `slices` + 1 boundaries from `since` to `until` (equal physical parts).
pub fn slice_bounds(since: HybridTime, until: HybridTime, slices: u32) -> Vec<HybridTime> {
    let (a, b) = (since.physical_micros(), until.physical_micros());
    let span = b.saturating_sub(a);
    let mut out = vec![since];
    for i in 1..slices {
        let t = HybridTime::from_micros(a + span * u64::from(i) / u64::from(slices));
        if t > *out.last().unwrap_or(&since) && t < until {
            out.push(t);
        }
    }
    out.push(until.max(since));
    out
}

/// One table read by the salvage.
struct Side<'a> {
    name: &'static str,
    client: &'a KuduClient,
    table: KuduTable,
    timeout: Duration,
}

impl<'a> Side<'a> {
    async fn open(
        client: &'a KuduClient,
        table: &str,
        name: &'static str,
        timeout: Duration,
    ) -> Result<Side<'a>, VerifyError> {
        let table = match client.open_table(table).await {
            Ok(t) => t,
            Err(kudu_client::Error::TableNotFound(_)) => {
                return Err(VerifyError::TableNotFound {
                    side: name,
                    table: table.to_owned(),
                })
            }
            Err(e) => return Err(kudu(name, table, "opening the table", e)),
        };
        Ok(Side {
            name,
            client,
            table,
            timeout,
        })
    }

    fn error(&self, what: &str, e: kudu_client::Error) -> VerifyError {
        match e {
            kudu_client::Error::SnapshotTooOld { .. } => VerifyError::HistoryTooOld {
                side: self.name,
                table: self.table.name().to_owned(),
                timestamp: 0,
            },
            e => kudu(self.name, self.table.name(), what, e),
        }
    }

    async fn clock(&self) -> Result<HybridTime, VerifyError> {
        self.client
            .server_clock()
            .await
            .map_err(|e| self.error("reading the cluster's clock", e))
    }

    fn key_names(&self) -> Vec<String> {
        let schema = self.table.schema();
        schema
            .key_columns()
            .iter()
            .map(|c| c.name().to_owned())
            .collect()
    }

    fn all_names(&self) -> Vec<String> {
        let schema = self.table.schema();
        schema
            .columns()
            .iter()
            .map(|c| c.name().to_owned())
            .collect()
    }

    /// Calls `f` with every row of `projection` changed in `[start, end)`
    /// (values as of `end`) and whether it is deleted then.
    async fn each_changed<F>(
        &self,
        projection: &[String],
        start: HybridTime,
        end: HybridTime,
        mut f: F,
    ) -> Result<(), VerifyError>
    where
        F: FnMut(&RowView<'_>, bool) -> Result<(), kudu_client::Error>,
    {
        let what = "diff-scanning the changes";
        if start >= end {
            return Ok(());
        }
        let spec = ScanSpec::new()
            .projection(projection)
            .diff(start, end)
            .timeout(self.timeout);
        let mut scanner = self
            .client
            .scan_builder(&self.table)
            .with_spec(spec)
            .build()
            .map_err(|e| self.error(what, e))?;
        while let Some(batch) = scanner
            .next_batch()
            .await
            .map_err(|e| self.error(what, e))?
        {
            for row in batch.rows() {
                let deleted = row.is_deleted();
                f(&row, deleted).map_err(|e| self.error(what, e))?;
            }
        }
        Ok(())
    }

    /// The row matching `predicates` (its key), read at `at` (`None`: now).
    async fn point(
        &self,
        projection: &[String],
        predicates: &[Predicate],
        at: Option<HybridTime>,
    ) -> Result<Option<Map<String, Json>>, VerifyError> {
        let what = "reading a changed row";
        let mut spec = ScanSpec::new().projection(projection).timeout(self.timeout);
        spec = match at {
            Some(t) => spec.snapshot(t),
            None => spec.snapshot_now(),
        };
        for p in predicates {
            spec = spec.predicate(p.clone());
        }
        let mut scanner = self
            .client
            .scan_builder(&self.table)
            .with_spec(spec)
            .build()
            .map_err(|e| self.error(what, e))?;
        let mut found = None;
        while let Some(batch) = scanner
            .next_batch()
            .await
            .map_err(|e| self.error(what, e))?
        {
            for row in batch.rows() {
                found = Some(row_json(&row, 0, projection.len()).map_err(|e| self.error(what, e))?);
            }
        }
        Ok(found)
    }
}

fn kudu(side: &'static str, table: &str, what: &str, e: kudu_client::Error) -> VerifyError {
    VerifyError::Kudu {
        side,
        table: table.to_owned(),
        what: what.to_owned(),
        cause: Box::new(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_interval_in_equal_parts() {
        let a = HybridTime::from_micros(1_000_000);
        let b = HybridTime::from_micros(2_000_000);
        let bounds = slice_bounds(a, b, 4);
        let micros: Vec<u64> = bounds.iter().map(|t| t.physical_micros()).collect();
        assert_eq!(
            micros,
            [1_000_000, 1_250_000, 1_500_000, 1_750_000, 2_000_000]
        );
        assert_eq!(bounds[0], a);
        assert_eq!(*bounds.last().unwrap(), b);
        // An empty interval is one empty slice.
        assert_eq!(slice_bounds(a, a, 10), vec![a, a]);
    }
}
