//! `Plan`: a [`ScanSpec`] checked against a table schema — what each
//! request of one scan carries.

use std::collections::HashSet;
use std::time::Duration;

use super::decode::KeyColumns;
use super::predicate::Encoded;
use super::spec::*;
use crate::client::KuduClient;
use crate::hybrid_time::HybridTime;
use crate::pb;
use crate::schema::{Schema, SchemaPbOptions};
use crate::table::KuduTable;
use crate::{Error, Result};

/// A scan description checked against a table schema: what each request
/// carries. Shared by all steps of one scan.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Schema of the batches (IS_DELETED last for diff scans).
    pub projection: Schema,
    /// Projected column names without the IS_DELETED column.
    pub projected_names: Vec<String>,
    pub projected_columns: Vec<pb::ColumnSchemaPb>,
    pub predicates: Vec<pb::ColumnPredicatePb>,
    pub matches_nothing: bool,
    /// `None` = READ_LATEST; `Some(None)` = snapshot at the server's "now".
    pub snapshot: Option<Option<HybridTime>>,
    pub diff_start: Option<HybridTime>,
    pub ordered: bool,
    pub batch_size_bytes: Option<u32>,
    pub limit: Option<u64>,
    pub replica_selection: ReplicaSelection,
    pub lower_bound: Option<Vec<u8>>,
    pub upper_bound: Option<Vec<u8>>,
    pub partition_key_start: Vec<u8>,
    pub partition_key_end: Vec<u8>,
    pub columnar: bool,
    pub cache_blocks: bool,
    pub timeout: Duration,
    pub keep_alive_interval: Option<Duration>,
    pub resume_key: Option<Vec<u8>>,
    /// Where the table's key columns are in the projection.
    pub key_columns: KeyColumns,
}

impl Plan {
    /// Validates `spec` against `table`.
    // Long on purpose: one check per field of the spec, in order.
    pub(crate) fn new(client: &KuduClient, table: &KuduTable, spec: &ScanSpec) -> Result<Plan> {
        if let Some(msg) = &spec.invalid {
            return Err(Error::InvalidArgument(msg.clone()));
        }
        let schema = table.schema();
        let names: Vec<String> = match &spec.projection {
            Some(names) => names.clone(),
            None => schema
                .columns()
                .iter()
                .map(|c| c.name().to_owned())
                .collect(),
        };
        let mut seen = HashSet::new();
        for n in &names {
            if !seen.insert(n.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "column '{n}' is projected twice"
                )));
            }
        }
        let mut projection = schema.project(&names).map_err(|e| {
            Error::InvalidArgument(format!("projection of table '{}': {e}", table.name()))
        })?;
        if spec.diff.is_some() {
            // The virtual column's name must not collide with any column of
            // the table, projected or not.
            let full = schema.with_is_deleted()?;
            let mut cols = projection.columns().to_vec();
            if let Some(is_deleted) = full.columns().last() {
                cols.push(is_deleted.clone());
            }
            projection = Schema::new(cols)?;
        }
        let key_columns = std::sync::Arc::new(
            schema
                .key_columns()
                .iter()
                .map(|k| {
                    names.iter().position(|n| n == k.name()).ok_or_else(|| {
                        format!("the projection lacks the key column '{}'", k.name())
                    })
                })
                .collect::<std::result::Result<Vec<usize>, String>>(),
        );
        let projected_columns = projection.columns_to_pb(SchemaPbOptions::PROJECTION)?;

        let mut predicates = spec.raw_predicates.clone();
        let mut matches_nothing = spec.limit == Some(0);
        for p in &spec.predicates {
            match p.encode(schema)? {
                Encoded::Pb(pb) => predicates.push(pb),
                Encoded::MatchesNothing => matches_nothing = true,
            }
        }

        let (snapshot, diff_start, ordered) = match spec.diff {
            Some((start, end)) => {
                if start > end {
                    return Err(Error::InvalidArgument(format!(
                        "diff scan start {start} is after its end {end}"
                    )));
                }
                (Some(Some(end)), Some(start), true)
            }
            None => match (spec.read_mode, spec.fault_tolerant) {
                (ReadMode::Latest, false) => (None, None, false),
                // ORDERED scans must be snapshot reads (the server insists).
                (ReadMode::Latest, true) => (Some(None), None, true),
                (ReadMode::Snapshot(ts), ft) => (Some(ts), None, ft),
            },
        };
        if spec.resume_key.is_some() && !ordered {
            return Err(Error::InvalidArgument(
                "a resume key needs a fault-tolerant (ORDERED) scan".into(),
            ));
        }
        let (pks, pke) = (&spec.partition_key_start, &spec.partition_key_end);
        if !pks.is_empty() && !pke.is_empty() && pks > pke {
            return Err(Error::InvalidArgument(
                "partition key range start is after its end".into(),
            ));
        }
        if let (Some(lo), Some(hi)) = (&spec.lower_bound, &spec.upper_bound) {
            if lo >= hi {
                matches_nothing = true;
            }
        }
        Ok(Plan {
            projection,
            projected_names: names,
            projected_columns,
            predicates,
            matches_nothing,
            snapshot,
            diff_start,
            ordered,
            batch_size_bytes: spec.batch_size_bytes,
            limit: spec.limit,
            replica_selection: spec.replica_selection,
            lower_bound: spec.lower_bound.clone(),
            upper_bound: spec.upper_bound.clone(),
            partition_key_start: spec.partition_key_start.clone(),
            partition_key_end: spec.partition_key_end.clone(),
            columnar: spec.columnar,
            cache_blocks: spec.cache_blocks,
            timeout: spec.timeout.unwrap_or_else(|| client.operation_timeout()),
            keep_alive_interval: spec.keep_alive_interval,
            resume_key: spec.resume_key.clone(),
            key_columns,
        })
    }
}
