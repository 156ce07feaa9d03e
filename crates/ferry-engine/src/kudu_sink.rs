//! The Kudu sink: live rows become UPSERT_IGNORE with every column, rows a
//! diff scan reports deleted become key-only DELETE_IGNORE, so replaying a
//! batch (after a crash or a retried split) is harmless.

use crate::config::{FlushMode, WriterConfig};
use crate::connector::{Sink, SinkWriter, WriteStats};
use crate::error::EngineError;
use crate::sink_table::SinkTableError;
use kudu_client::scan::RowBatch;
use kudu_client::write::{FlushMode as ClientFlushMode, Operation, Session, SessionOptions};
use kudu_client::{KuduClient, KuduTable, Schema};

/// Writes the sink table.
#[derive(Debug, Clone)]
pub struct KuduSink {
    client: KuduClient,
    table: KuduTable,
    writer: WriterConfig,
}

impl KuduSink {
    /// A sink writing `table` (already opened on the sink cluster).
    pub fn new(client: KuduClient, table: KuduTable, writer: WriterConfig) -> Self {
        KuduSink {
            client,
            table,
            writer,
        }
    }
}

/// How far a buffer waiting for a send may grow (encoded rows): about the
/// 1 MiB batches `kudu table copy` writes; a buffered row costs ~3× its
/// encoded size in memory.
const ADAPTIVE_BATCH_BYTES: usize = 1 << 20;

impl Sink for KuduSink {
    type Writer = KuduSinkWriter;

    async fn writer(&self) -> Result<KuduSinkWriter, EngineError> {
        // Batches are flushed explicitly before progress is reported, so
        // AUTO_FLUSH_SYNC would only add round trips; MANUAL_FLUSH would
        // fail on scan batches larger than the buffer.
        let mode = match self.writer.flush_mode {
            FlushMode::AutoFlushSync => ClientFlushMode::AutoFlushSync,
            FlushMode::AutoFlushBackground | FlushMode::ManualFlush => {
                ClientFlushMode::AutoFlushBackground
            }
        };
        let options = SessionOptions::default()
            .flush_mode(mode)
            .mutation_buffer_max_ops(self.writer.max_buffer_size.get())
            // A snapshot hands over scan batches of ~80 000 rows; 1 000-op
            // requests cost the sink a third more CPU than table copy's
            // (docs/benchmarks.md, finding 1). Buffers that wait for a
            // send grow instead, so a busy sink gets larger requests.
            .adaptive_batching(Some(ADAPTIVE_BATCH_BYTES))
            .flush_interval(self.writer.flush_interval)
            .operation_timeout(self.writer.operation_timeout);
        let session =
            self.client
                .new_session_with(options)
                .map_err(|source| EngineError::Sink {
                    table: self.table.name().to_owned(),
                    source,
                })?;
        Ok(KuduSinkWriter {
            session,
            table: self.table.clone(),
            mapping: None,
        })
    }
}

/// Column mapping from a projection schema to the sink schema.
struct Mapping {
    projection: Schema,
    /// (projection index, sink index) for every sink column the batch has.
    columns: Vec<(usize, usize)>,
    /// The same for key columns only.
    keys: Vec<(usize, usize)>,
}

/// One pipeline's writer.
pub struct KuduSinkWriter {
    session: Session,
    table: KuduTable,
    mapping: Option<Mapping>,
}

impl KuduSinkWriter {
    fn err(&self, source: kudu_client::Error) -> EngineError {
        EngineError::Sink {
            table: self.table.name().to_owned(),
            source,
        }
    }

    fn mapping_for(&mut self, projection: &Schema) -> Result<&Mapping, EngineError> {
        let stale = self
            .mapping
            .as_ref()
            .is_none_or(|m| &m.projection != projection);
        if stale {
            let sink = self.table.schema();
            let mut columns = Vec::new();
            let mut keys = Vec::new();
            for (pi, col) in projection.columns().iter().enumerate() {
                if Some(pi) == projection.is_deleted_index() {
                    continue;
                }
                let si = sink.index_of(col.name()).ok_or_else(|| {
                    EngineError::from(SinkTableError::ColumnNotInSink {
                        sink: self.table.name().to_owned(),
                        column: col.name().to_owned(),
                    })
                })?;
                columns.push((pi, si));
                if si < sink.num_key_columns() {
                    keys.push((pi, si));
                }
            }
            if keys.len() != sink.num_key_columns() {
                return Err(SinkTableError::KeyColumnsNotSent {
                    sink: self.table.name().to_owned(),
                }
                .into());
            }
            self.mapping = Some(Mapping {
                projection: projection.clone(),
                columns,
                keys,
            });
        }
        self.mapping
            .as_ref()
            .ok_or_else(|| SinkTableError::NoColumnMapping.into())
    }
}

impl SinkWriter for KuduSinkWriter {
    async fn write(&mut self, batch: &RowBatch) -> Result<WriteStats, EngineError> {
        if batch.is_empty() {
            return Ok(WriteStats::default());
        }
        let (columns, keys) = {
            let m = self.mapping_for(batch.schema())?;
            (m.columns.clone(), m.keys.clone())
        };
        let mut stats = WriteStats::default();
        for view in batch.rows() {
            let deleted = view.is_deleted();
            let mut row = self.table.new_row();
            let cells = if deleted { &keys } else { &columns };
            for &(pi, si) in cells {
                let value = view.get(pi).map_err(|e| self.err(e))?;
                row.set(si, value).map_err(|e| self.err(e))?;
            }
            let op = if deleted {
                stats.deletes += 1;
                Operation::delete_ignore(&self.table, row)
            } else {
                stats.upserts += 1;
                Operation::upsert_ignore(&self.table, row)
            };
            self.session.apply(op).await.map_err(|e| self.err(e))?;
        }
        self.session.flush().await.map_err(|e| self.err(e))?;
        stats.bytes = batch.byte_size() as u64;
        Ok(stats)
    }
}
