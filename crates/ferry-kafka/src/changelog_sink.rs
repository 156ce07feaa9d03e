//! [`ChangelogSink`]: a Kafka changelog applied to a Kudu table. Each
//! batch of raw records (one partition, in offset order) is decoded
//! against the table's schema ([`crate::changelog`]) and written with the
//! idempotent operations of every ferry job (UPSERT_IGNORE, key-only
//! DELETE_IGNORE), so replaying records after a restore is harmless.
//!
//! A record that cannot be decoded or that the table refuses follows
//! `job.sourceErrorPolicy`: `fail` fails the job with the record's
//! topic/partition/offset; `skip` counts it; `dead-letter` sends it, as it
//! was, to `job.sourceDeadLetterTopic` with headers saying where it came
//! from and why (awaited before the batch counts as written, so a
//! checkpoint never covers a record that is neither in the table nor in
//! the dead-letter topic). A batch's decoded records go to the Kudu
//! session in one `Session::apply_batch` call; row errors are found by
//! writing the batch again one record at a time.

use crate::changelog::{decode, Change, ChangelogFormat};
use crate::config::{ErrorPolicy, KafkaSourceConfig};
use crate::error::{kafka_error, KafkaSinkError};
use crate::metrics::KafkaMetrics;
use crate::source::{RawRecord, RecordBatch};
use crate::topic::{ensure_topic, TopicSpec};
use ferry_engine::config::{FlushMode, WriterConfig};
use ferry_engine::connector::{Sink, SinkWriter, WriteStats};
use ferry_engine::EngineError;
use kudu_client::write::{FlushMode as ClientFlushMode, Operation, Session, SessionOptions};
use kudu_client::{KuduClient, KuduTable};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use std::sync::Arc;
use std::time::Duration;

/// Writes a changelog topic's records to one Kudu table.
pub struct ChangelogSink {
    client: KuduClient,
    table_name: String,
    config: KafkaSourceConfig,
    format: ChangelogFormat,
    writer: WriterConfig,
    job_name: String,
    /// Opened by `prepare`.
    table: Option<KuduTable>,
    /// Made by `prepare` with `dead-letter`.
    dead_letter: Option<FutureProducer>,
    metrics: Arc<KafkaMetrics>,
}

impl ChangelogSink {
    /// A sink writing `config`'s topic to table `table_name` of `client`'s
    /// cluster.
    pub fn new(
        client: KuduClient,
        table_name: &str,
        config: &KafkaSourceConfig,
        writer: &WriterConfig,
        job_name: &str,
    ) -> Result<Self, EngineError> {
        let format = ChangelogFormat::parse(config.format).ok_or_else(|| {
            EngineError::from(KafkaSinkError::Topic {
                topic: config.topic.clone(),
                reason: format!("unknown changelog format '{}'", config.format),
            })
        })?;
        Ok(ChangelogSink {
            client,
            table_name: table_name.to_string(),
            config: config.clone(),
            format,
            writer: writer.clone(),
            job_name: job_name.to_string(),
            table: None,
            dead_letter: None,
            metrics: Arc::default(),
        })
    }

    /// Counts what the sink reads and sets aside into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<KafkaMetrics>) -> Self {
        metrics.register(&self.config.topic);
        self.metrics = metrics;
        self
    }

    fn err(&self, source: kudu_client::Error) -> EngineError {
        ferry_kudu::error::sink_error(&self.table_name, source)
    }
}

impl Sink<RecordBatch> for ChangelogSink {
    type Writer = ChangelogWriter;

    async fn prepare(&mut self) -> Result<(), EngineError> {
        let table = self
            .client
            .open_table(&self.table_name)
            .await
            .map_err(|e| self.err(e))?;
        self.table = Some(table);
        if self.config.error_policy == ErrorPolicy::DeadLetter {
            let topic = self.config.dead_letter_topic.clone().unwrap_or_default();
            let mut client = ClientConfig::new();
            client
                .set("bootstrap.servers", &self.config.bootstrap_servers)
                .set("client.id", format!("ferry-{}-dead-letter", self.job_name))
                .set("acks", "all")
                .set("enable.idempotence", "true");
            let spec = TopicSpec {
                name: &topic,
                partitions: 0,
                compact: false,
            };
            ensure_topic(&client, &self.config.bootstrap_servers, 0, spec).await?;
            let producer: FutureProducer = client.create().map_err(|e| {
                kafka_error(
                    format!("creating the dead-letter producer for '{topic}'"),
                    e,
                )
            })?;
            self.dead_letter = Some(producer);
        }
        Ok(())
    }

    async fn writer(&self) -> Result<ChangelogWriter, EngineError> {
        let table = match &self.table {
            Some(t) => t.clone(),
            None => self
                .client
                .open_table(&self.table_name)
                .await
                .map_err(|e| self.err(e))?,
        };
        let mode = match self.writer.flush_mode {
            FlushMode::AutoFlushSync => ClientFlushMode::AutoFlushSync,
            FlushMode::AutoFlushBackground => ClientFlushMode::AutoFlushBackground,
            FlushMode::ManualFlush => ClientFlushMode::ManualFlush,
        };
        let session = self.session(mode)?;
        Ok(ChangelogWriter {
            session,
            single: None,
            table,
            client: self.client.clone(),
            table_name: self.table_name.clone(),
            format: self.format,
            policy: self.config.error_policy,
            dead_letter: self
                .dead_letter
                .clone()
                .zip(self.config.dead_letter_topic.clone()),
            manual_flush_at: (mode == ClientFlushMode::ManualFlush)
                .then_some(self.writer.max_buffer_size.get()),
            operation_timeout: self.writer.operation_timeout,
            metrics: self.metrics.clone(),
        })
    }

    fn name(&self) -> String {
        self.table_name.clone()
    }
}

impl ChangelogSink {
    fn session(&self, mode: ClientFlushMode) -> Result<Session, EngineError> {
        let options = SessionOptions::default()
            .flush_mode(mode)
            .mutation_buffer_max_ops(self.writer.max_buffer_size.get())
            .flush_interval(self.writer.flush_interval)
            .operation_timeout(self.writer.operation_timeout);
        let options = match mode {
            ClientFlushMode::ManualFlush => options.mutation_buffer_max_bytes(usize::MAX),
            _ => options,
        };
        self.client
            .new_session_with(options)
            .map_err(|e| self.err(e))
    }
}

/// One pipeline's writer.
pub struct ChangelogWriter {
    session: Session,
    /// A sync session for finding row errors one record at a time.
    single: Option<Session>,
    table: KuduTable,
    client: KuduClient,
    table_name: String,
    format: ChangelogFormat,
    policy: ErrorPolicy,
    dead_letter: Option<(FutureProducer, String)>,
    manual_flush_at: Option<usize>,
    operation_timeout: Duration,
    metrics: Arc<KafkaMetrics>,
}

impl ChangelogWriter {
    fn err(&self, source: kudu_client::Error) -> EngineError {
        ferry_kudu::error::sink_error(&self.table_name, source)
    }

    /// The operation of `change`.
    fn operation(&self, change: Change) -> (Operation, bool) {
        match change {
            Change::Upsert(row) => (Operation::upsert_ignore(&self.table, row), false),
            Change::Delete(row) => (Operation::delete_ignore(&self.table, row), true),
        }
    }

    /// `record`'s operation (and whether it deletes); `None` for a record
    /// without a change, or one that cannot be decoded, which is set aside
    /// as the policy says when `reject` (else it was already).
    async fn decoded(
        &mut self,
        topic: &str,
        record: &RawRecord,
        reject: bool,
    ) -> Result<Option<(Operation, bool)>, EngineError> {
        match decode(
            self.format,
            self.table.schema(),
            record.key.as_deref(),
            record.value.as_deref(),
        ) {
            Ok(Some(change)) => Ok(Some(self.operation(change))),
            Ok(None) => Ok(None),
            Err(e) => {
                if reject {
                    self.reject(topic, record, e.to_string()).await?;
                }
                Ok(None)
            }
        }
    }

    /// Sets `record` aside as the policy says (`reason`: why it cannot be
    /// applied).
    async fn reject(
        &mut self,
        topic: &str,
        record: &RawRecord,
        reason: String,
    ) -> Result<(), EngineError> {
        match self.policy {
            ErrorPolicy::Fail => Err(KafkaSinkError::Record {
                topic: topic.to_string(),
                partition: record.partition,
                offset: record.offset,
                table: self.table_name.clone(),
                reason,
            }
            .into()),
            ErrorPolicy::Skip => {
                self.metrics.skipped(topic);
                tracing::warn!(%topic, partition = record.partition, offset = record.offset, %reason, "record skipped (job.sourceErrorPolicy=skip)");
                Ok(())
            }
            ErrorPolicy::DeadLetter => {
                let Some((producer, dlq)) = &self.dead_letter else {
                    return Err(KafkaSinkError::NotPrepared {
                        topic: topic.to_string(),
                    }
                    .into());
                };
                let partition = record.partition.to_string();
                let offset = record.offset.to_string();
                let headers = OwnedHeaders::new()
                    .insert(Header {
                        key: "ferry.topic",
                        value: Some(topic),
                    })
                    .insert(Header {
                        key: "ferry.partition",
                        value: Some(&partition),
                    })
                    .insert(Header {
                        key: "ferry.offset",
                        value: Some(&offset),
                    })
                    .insert(Header {
                        key: "ferry.table",
                        value: Some(&self.table_name),
                    })
                    .insert(Header {
                        key: "ferry.error",
                        value: Some(&reason),
                    });
                let mut out: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(dlq).headers(headers);
                if let Some(k) = &record.key {
                    out = out.key(k.as_slice());
                }
                if let Some(v) = &record.value {
                    out = out.payload(v.as_slice());
                }
                producer
                    .send(out, self.operation_timeout)
                    .await
                    .map_err(|(e, _)| {
                        EngineError::from(kafka_error(
                            format!("sending a record to the dead-letter topic '{dlq}'"),
                            e,
                        ))
                    })?;
                self.metrics.dead_lettered(topic);
                tracing::warn!(%topic, partition = record.partition, offset = record.offset, %reason, dead_letter_topic = %dlq, "record sent to the dead-letter topic");
                Ok(())
            }
        }
    }

    /// Writes the batch again one record at a time, setting aside each one
    /// the table refuses (after a flush reported row errors).
    async fn write_one_by_one(
        &mut self,
        batch: &RecordBatch,
        stats: &mut WriteStats,
        decoded: usize,
    ) -> Result<(), EngineError> {
        if self.single.is_none() {
            let options = SessionOptions::default()
                .flush_mode(ClientFlushMode::AutoFlushSync)
                .operation_timeout(self.operation_timeout);
            let session = self
                .client
                .new_session_with(options)
                .map_err(|e| self.err(e))?;
            self.single = Some(session);
        }
        *stats = WriteStats::default();
        for (i, record) in batch.records.iter().enumerate() {
            // Records before `decoded` were decoded (and any bad one set
            // aside) by the first pass already.
            let Some((op, delete)) = self.decoded(&batch.topic, record, i >= decoded).await? else {
                continue;
            };
            let applied = match self.single.as_mut() {
                Some(s) => s.apply(op).await,
                None => Ok(()),
            };
            match applied {
                Ok(()) => count(stats, delete),
                Err(kudu_client::Error::RowErrors(errors)) => {
                    let reason = errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ");
                    self.reject(&batch.topic, record, reason).await?;
                }
                Err(e) => return Err(self.err(e)),
            }
        }
        Ok(())
    }
}

fn count(stats: &mut WriteStats, delete: bool) {
    if delete {
        stats.deletes += 1;
    } else {
        stats.upserts += 1;
    }
}

impl SinkWriter<RecordBatch> for ChangelogWriter {
    async fn write(&mut self, batch: &RecordBatch) -> Result<WriteStats, EngineError> {
        let mut stats = WriteStats::default();
        let mut ops = Vec::with_capacity(batch.records.len());
        for record in &batch.records {
            let Some((op, delete)) = self.decoded(&batch.topic, record, true).await? else {
                continue;
            };
            count(&mut stats, delete);
            ops.push(op);
        }
        if let Err(e) = self.apply(ops).await {
            let decoded = batch.records.len();
            return self.after_row_errors(e, batch, stats, decoded).await;
        }
        stats.bytes = batch
            .records
            .iter()
            .map(|r| {
                (r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len)) as u64
            })
            .sum();
        Ok(stats)
    }
}

impl ChangelogWriter {
    /// Writes `ops` as whole batches — one call into the session's
    /// per-tablet requests, no hop per record; MANUAL_FLUSH a buffer's
    /// worth at a time — and flushes.
    async fn apply(&mut self, ops: Vec<Operation>) -> Result<(), kudu_client::Error> {
        match self.manual_flush_at {
            Some(max) => {
                let mut ops = ops.into_iter().peekable();
                while ops.peek().is_some() {
                    let room = max.saturating_sub(self.session.buffered_ops()).max(1);
                    self.session.apply_batch(ops.by_ref().take(room)).await?;
                    self.session.flush().await?;
                }
            }
            None => self.session.apply_batch(ops).await?,
        }
        self.session.flush().await
    }
}

impl ChangelogWriter {
    /// Row errors: write the batch again record by record (idempotent) to
    /// find and set aside the refused ones; anything else fails the batch.
    async fn after_row_errors(
        &mut self,
        error: kudu_client::Error,
        batch: &RecordBatch,
        mut stats: WriteStats,
        decoded: usize,
    ) -> Result<WriteStats, EngineError> {
        if !matches!(error, kudu_client::Error::RowErrors(_)) {
            return Err(self.err(error));
        }
        // What the batch session still holds was sent or refused already.
        let _ = self.session.flush().await;
        self.write_one_by_one(batch, &mut stats, decoded).await?;
        Ok(stats)
    }
}
