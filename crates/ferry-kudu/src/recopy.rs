//! Re-copy of a split whose history ran out (`reader.recopyExpiredTablets`).
//!
//! A diff window that starts before a tablet's ancient history mark cannot
//! be read: the tablet no longer knows which rows were deleted since the
//! window start. Instead of stopping, the split's key range is copied
//! again at the window's end: the source's rows then (a snapshot scan of
//! the same range, upserted) merged in key order with the sink's keys of
//! that range, and every sink key the source no longer has is handed on as
//! a deleted row. Afterwards the range on the sink is the source at the
//! window end, as a diff would have left it; the job's other tablets are
//! not touched. Both scans are ORDERED and resume after the last key
//! handed on, so a restart continues the re-copy where it was.
//!
//! The merge needs the sink's rows of the range in the source's key order,
//! which holds when the sink is partitioned as the source (a created copy
//! is); otherwise the split fails as before, with the advice to start
//! afresh.

use crate::prefetch::{Fetched, ScanBatches};
use ferry_engine::config::ReaderConfig;
use kudu_client::scan::{RowBatch, ScanSpec, Scanner, Split};
use kudu_client::{KuduClient, KuduTable};
use std::collections::VecDeque;
use std::sync::{Arc, RwLock};

/// The Kudu sink table a re-copy reconciles with.
#[derive(Debug, Clone)]
pub struct SinkKeys {
    client: KuduClient,
    /// The sink's name now, shared with the sink (it follows renames);
    /// empty until the sink was prepared.
    current: Arc<RwLock<String>>,
    configured: String,
}

impl SinkKeys {
    /// The sink table on the cluster of `client`: `configured` until the
    /// sink records its name in `current`.
    pub(crate) fn new(
        client: KuduClient,
        current: Arc<RwLock<String>>,
        configured: String,
    ) -> Self {
        SinkKeys {
            client,
            current,
            configured,
        }
    }

    fn name(&self) -> String {
        crate::sink::name_now(&self.current, &self.configured)
    }

    /// An ORDERED scan of the sink's keys in `split`'s range, after the
    /// split's resume key; `None` when the sink is not partitioned as
    /// `source`, so its keys of the range would not come in order.
    async fn scanner(
        &self,
        source: &KuduTable,
        split: &Split,
        reader: &ReaderConfig,
    ) -> Result<Option<Scanner>, kudu_client::Error> {
        let sink = self.client.open_table(&self.name()).await?;
        if !sink
            .partition_schema()
            .partitions_like(source.partition_schema())
        {
            return Ok(None);
        }
        let schema = sink.schema();
        let keys: Vec<&str> = schema.columns()[..schema.num_key_columns()]
            .iter()
            .map(|c| c.name())
            .collect();
        let mut spec = ScanSpec::new()
            .projection(&keys)
            .partition_key_range(
                split.partition_key_start().to_vec(),
                split.partition_key_end().to_vec(),
            )
            .fault_tolerant(true)
            .batch_size_bytes(reader.batch_size_bytes)
            .timeout(reader.scan_request_timeout)
            .keep_alive_interval(reader.keep_alive_period);
        if let Some(lower) = split.lower_bound_key() {
            spec = spec.lower_bound_key(lower.to_vec());
        }
        if let Some(upper) = split.upper_bound_key() {
            spec = spec.exclusive_upper_bound_key(upper.to_vec());
        }
        if let Some(resume) = split.resume_key() {
            spec = spec.resume_after(resume.to_vec());
        }
        self.client
            .scan_builder(&sink)
            .with_spec(spec)
            .build()
            .map(Some)
    }
}

/// A split being re-copied: the source's rows at the window end, and
/// deletions of the sink keys of the range the source lacks.
pub(crate) struct Recopy {
    source: ScanBatches,
    sink: Scanner,
    /// A sink batch not yet merged to its end, and its next row.
    pending: Option<(RowBatch, usize)>,
    sink_done: bool,
    /// The last sink key seen, to prove the sink's keys come in order.
    last_sink_key: Option<Vec<u8>>,
    /// Batches merged and not yet handed on.
    ready: VecDeque<(RowBatch, Option<Vec<u8>>)>,
    /// Resume key of the last source batch merged.
    resume: Option<Vec<u8>>,
    source_done: bool,
}

impl Recopy {
    /// The re-copy of diff split `split` of `table` (already resumed at the
    /// key last handed on), or `None` when the sink cannot be reconciled
    /// in key order.
    pub(crate) async fn start(
        client: &KuduClient,
        table: &KuduTable,
        split: &Split,
        sink: &SinkKeys,
        reader: &ReaderConfig,
    ) -> Result<Option<Recopy>, kudu_client::Error> {
        let Some(sink) = sink.scanner(table, split, reader).await? else {
            return Ok(None);
        };
        let snapshot = client.scanner_for_split_on(table, &split.as_snapshot_at_end())?;
        Ok(Some(Recopy {
            source: ScanBatches::new(snapshot, reader.prefetching),
            sink,
            pending: None,
            sink_done: false,
            last_sink_key: None,
            ready: VecDeque::new(),
            resume: split.resume_key().map(<[u8]>::to_vec),
            source_done: false,
        }))
    }

    /// The next batch: deletions before the source rows they precede (with
    /// the resume key of the batch before them), `None` at the end.
    pub(crate) async fn next(&mut self) -> Result<Fetched, kudu_client::Error> {
        loop {
            if let Some(batch) = self.ready.pop_front() {
                ferry_engine::failpoint::hit("recopy.batch");
                return Ok(Some(batch));
            }
            if self.source_done {
                return Ok(None);
            }
            match self.source.next().await? {
                Some((rows, resume_key)) => {
                    let keys = rows
                        .rows()
                        .map(|r| r.encoded_primary_key())
                        .collect::<Result<Vec<_>, _>>()?;
                    if let Some(upto) = keys.last() {
                        self.delete_missing(&keys, Some(upto)).await?;
                    }
                    self.ready.push_back((rows, resume_key.clone()));
                    self.resume = resume_key;
                }
                None => {
                    self.delete_missing(&[], None).await?;
                    self.source_done = true;
                }
            }
        }
    }

    /// Queues, as deleted rows, the sink keys up to `upto` (every one left
    /// when `None`) that are not among the source's sorted `keys`.
    async fn delete_missing(
        &mut self,
        keys: &[Vec<u8>],
        upto: Option<&[u8]>,
    ) -> Result<(), kudu_client::Error> {
        let mut next_source = 0;
        loop {
            let (batch, start) = match self.pending.take() {
                Some(pending) => pending,
                None if self.sink_done => return Ok(()),
                None => match self.sink.next_batch().await? {
                    Some(batch) => (batch, 0),
                    None => {
                        self.sink_done = true;
                        return Ok(());
                    }
                },
            };
            let mut gone = Vec::new();
            let mut row = start;
            while row < batch.num_rows() {
                let key = batch.row(row).encoded_primary_key()?;
                if upto.is_some_and(|upto| key.as_slice() > upto) {
                    break;
                }
                self.check_order(&key)?;
                while keys.get(next_source).is_some_and(|k| *k < key) {
                    next_source += 1;
                }
                if keys.get(next_source) != Some(&key) {
                    gone.push(row);
                }
                self.last_sink_key = Some(key);
                row += 1;
            }
            if !gone.is_empty() {
                self.ready
                    .push_back((batch.deletions(&gone)?, self.resume.clone()));
            }
            if row < batch.num_rows() {
                self.pending = Some((batch, row));
                return Ok(());
            }
        }
    }

    fn check_order(&self, key: &[u8]) -> Result<(), kudu_client::Error> {
        match &self.last_sink_key {
            Some(last) if last.as_slice() >= key => Err(kudu_client::Error::InvalidArgument(
                "the sink's keys of a re-copied range did not come in key order: the sink is not partitioned as the source".into(),
            )),
            _ => Ok(()),
        }
    }
}
