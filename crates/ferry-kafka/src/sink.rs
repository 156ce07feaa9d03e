//! [`KafkaSink`]: a source table's changes as records on a Kafka topic.
//!
//! One producer per table, shared by the job's pipelines. Each row of a
//! batch becomes one record keyed by its primary key (see [`crate::format`]),
//! partitioned by the key's murmur2 hash as Kafka's Java clients do, so all
//! changes of a row stay in one partition, in order. The window a batch
//! belongs to comes from [`Sink::record_position`], which the engine calls
//! before any split of a window is handed out.
//!
//! Delivery (`job.sinkDeliveryGuarantee`):
//! - `at-least-once`: the producer is idempotent (`acks=all`,
//!   `enable.idempotence=true`: no duplicates or reordering from its own
//!   retries), and a batch counts as written only once every record was
//!   acknowledged, so a checkpoint never covers a record the brokers do not
//!   hold. After a crash the job replays from its checkpoint: records of
//!   the replayed batches appear again (a consumer folding by key is not
//!   affected: the replay writes the same rows in the same order).
//! - `none`: `acks=1`, and records are not waited for: a crash or a broker
//!   failure may lose them.
//! - `exactly-once`: each table's records go through its own
//!   transactional producer and become visible only when the engine
//!   commits them with the checkpoint's state ([`crate::transaction`]).

use crate::config::{DeliveryGuarantee, KafkaSinkConfig, RecordFormat};
use crate::error::{kafka_error, KafkaSinkError};
use crate::format::{Encoder, Record, WindowInfo};
use crate::metrics::KafkaMetrics;
use crate::topic::{ensure_topic, TopicSpec};
use crate::transaction::Transactions;
use crate::watermark::{TimeHeaders, Watermarks};
use ferry_engine::checkpoint::TableState;
use ferry_engine::connector::{
    CapabilityFuture, SchemaFollower, SchemaRecord, Sink, SinkPositions, SinkWriter, TableRef,
    TwoPhaseCommit, WriteStats,
};
use ferry_engine::sink_position::SinkPosition;
use ferry_engine::EngineError;
use ferry_engine::{SinkTime, SourceTime};
use ferry_kudu::KuduBatch;
use kudu_client::KuduClient;
use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Writes one source table's changes to its topic.
pub struct KafkaSink {
    config: KafkaSinkConfig,
    topic: String,
    encoder: Encoder,
    /// The source cluster and table, for the table's key columns.
    source: KuduClient,
    table: TableRef,
    /// The source table's key columns, read by `prepare` and again after a
    /// followed schema change (a key column may be renamed).
    keys: Arc<RwLock<Vec<String>>>,
    client: ClientConfig,
    /// Made by `prepare` (by `recover` for exactly-once, which replaces it
    /// after a failure).
    producer: Arc<RwLock<Option<FutureProducer>>>,
    /// The window being written, set by `record_position`.
    window: Arc<RwLock<Option<WindowInfo>>>,
    /// `job.sinkWatermarks`: the newest window end written as watermarks,
    /// and the topic's partitions as last read.
    watermarks: Option<Watermarks>,
    /// Exactly-once: the table's transactions.
    transactions: Option<Transactions>,
    /// Exactly-once: a write failed since the last recovery, so the open
    /// transaction must not be committed.
    failed: Arc<AtomicBool>,
    metrics: Arc<KafkaMetrics>,
}

impl KafkaSink {
    /// A sink for source table `table` (on the cluster of `source`) of job
    /// `job_name`: its topic is `config.topic_for(table)`.
    pub fn new(
        config: &KafkaSinkConfig,
        source: KuduClient,
        table: &TableRef,
        job_name: &str,
    ) -> Self {
        let client = client_config(config, job_name);
        let transactions = (config.delivery == DeliveryGuarantee::ExactlyOnce).then(|| {
            let id = format!(
                "{}-{}",
                config.transactional_id_prefix_for(job_name),
                if table.id.is_unknown() {
                    &table.name
                } else {
                    table.id.as_str()
                }
            );
            let mut producer = client.clone();
            producer.set("transactional.id", &id).set(
                "transaction.timeout.ms",
                config.transaction_timeout.as_millis().to_string(),
            );
            let mut reader = ClientConfig::new();
            reader
                .set("bootstrap.servers", &config.bootstrap_servers)
                .set("client.id", format!("ferry-{job_name}-progress"))
                .set("group.id", format!("ferry-{job_name}-progress"))
                .set("enable.auto.commit", "false")
                .set("enable.partition.eof", "true")
                .set("isolation.level", "read_committed");
            Transactions {
                id,
                progress_topic: config.progress_topic_for(job_name),
                producer,
                reader,
            }
        });
        let topic = config.topic_for(&table.name);
        KafkaSink {
            watermarks: config.watermarks.then(|| Watermarks::new(topic.clone())),
            topic,
            encoder: Encoder::new(config.format, &table.name, job_name),
            source,
            table: table.clone(),
            keys: Arc::new(RwLock::new(Vec::new())),
            client,
            config: config.clone(),
            producer: Arc::new(RwLock::new(None)),
            window: Arc::new(RwLock::new(None)),
            transactions,
            failed: Arc::new(AtomicBool::new(false)),
            metrics: Arc::default(),
        }
    }

    /// Counts what the sink writes into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<KafkaMetrics>) -> Self {
        metrics.register(&self.topic);
        self.metrics = metrics;
        self
    }

    fn set_producer(&self, producer: FutureProducer) {
        if let Ok(mut p) = self.producer.write() {
            *p = Some(producer);
        }
    }

    fn current_producer(&self) -> Result<FutureProducer, KafkaSinkError> {
        current(&self.producer, &self.topic)
    }

    /// The topic the records go to.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Reads the source table's key columns.
    async fn read_keys(&self) -> Result<(), EngineError> {
        let opened = if self.table.id.is_unknown() {
            self.source.open_table(&self.table.name).await
        } else {
            self.source.open_table_by_id(self.table.id.as_str()).await
        };
        let table =
            opened.map_err(|source| ferry_kudu::error::source_error(&self.table.name, source))?;
        let keys = record_key_columns(table.schema());
        if let Ok(mut k) = self.keys.write() {
            *k = keys;
        }
        Ok(())
    }
}

/// The columns of a record's key: the table's whole primary key. For a
/// table with a non-unique primary key that includes the hidden
/// `auto_incrementing_id`, the only thing that tells apart rows with the
/// same key values, so an update or a delete lands on its own row's record
/// (and a compacted topic keeps one record per row).
pub fn record_key_columns(schema: &kudu_client::Schema) -> Vec<String> {
    schema
        .key_columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect()
}

/// The producer's settings for `config`'s delivery guarantee.
fn client_config(config: &KafkaSinkConfig, job_name: &str) -> ClientConfig {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", &config.bootstrap_servers)
        .set("client.id", format!("ferry-{job_name}"))
        // Java clients' key hashing: a key lands where they would put it.
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5");
    match config.delivery {
        DeliveryGuarantee::None => {
            client.set("acks", "1").set("enable.idempotence", "false");
        }
        DeliveryGuarantee::AtLeastOnce | DeliveryGuarantee::ExactlyOnce => {
            client.set("acks", "all").set("enable.idempotence", "true");
        }
    }
    client
}

impl Sink<KuduBatch> for KafkaSink {
    type Writer = KafkaSinkWriter;

    async fn prepare(&mut self) -> Result<(), EngineError> {
        self.read_keys().await?;
        let data = TopicSpec {
            name: &self.topic,
            partitions: self.config.topic_partitions,
            compact: self.config.format == RecordFormat::UpsertJson,
        };
        ensure_topic(
            &self.client,
            &self.config.bootstrap_servers,
            self.config.topic_replication_factor,
            data,
        )
        .await?;
        if let Some(t) = &self.transactions {
            // One partition: progress records are few and small.
            let progress = TopicSpec {
                name: &t.progress_topic,
                partitions: 1,
                compact: true,
            };
            ensure_topic(
                &self.client,
                &self.config.bootstrap_servers,
                self.config.topic_replication_factor,
                progress,
            )
            .await?;
            // The transactional producer is made by `recover`.
            return Ok(());
        }
        let producer: FutureProducer = self.client.create().map_err(|e| {
            kafka_error(
                format!("creating a producer for {}", self.config.bootstrap_servers),
                e,
            )
        })?;
        self.set_producer(producer);
        Ok(())
    }

    async fn writer(&self) -> Result<KafkaSinkWriter, EngineError> {
        // Fails early if the sink is not ready; each batch takes the
        // current producer again (a recovery replaces it).
        drop(self.current_producer()?);
        Ok(KafkaSinkWriter {
            producer: self.producer.clone(),
            failed: self.failed.clone(),
            topic: self.topic.clone(),
            encoder: self.encoder.clone(),
            keys: self.keys.clone(),
            window: self.window.clone(),
            delivery: self.config.delivery,
            record: Record::default(),
            pending: Vec::new(),
            metrics: self.metrics.clone(),
        })
    }

    fn name(&self) -> String {
        self.topic.clone()
    }

    fn two_phase_commit(&self) -> Option<&dyn TwoPhaseCommit> {
        // Exactly-once delivery only.
        self.transactions
            .as_ref()
            .map(|_| self as &dyn TwoPhaseCommit)
    }

    fn positions(&self) -> Option<&dyn SinkPositions> {
        // Not kept on Kafka: the sink learns each window's bounds, which
        // its records carry.
        Some(self)
    }

    fn schema_follower(&self) -> Option<&dyn SchemaFollower> {
        Some(self)
    }
}

impl SchemaFollower for KafkaSink {
    fn follow_schema<'a>(
        &'a self,
        _applied: Option<&'a SchemaRecord>,
        _now: &'a SchemaRecord,
    ) -> CapabilityFuture<'a, ()> {
        // Records carry the columns each batch has; only the key names
        // matter here.
        Box::pin(self.read_keys())
    }
}

impl SinkPositions for KafkaSink {
    fn record_position<'a>(&'a self, position: &'a SinkPosition) -> CapabilityFuture<'a, ()> {
        if let Ok(mut window) = self.window.write() {
            *window = Some(position.window.into());
        }
        Box::pin(async move {
            match position.last_end {
                Some(end) => self.write_watermarks(end).await,
                None => Ok(()),
            }
        })
    }

    fn read_position(&self) -> CapabilityFuture<'_, Option<SinkPosition>> {
        Box::pin(async { Ok(None) })
    }

    fn sink_time(&self) -> CapabilityFuture<'_, Option<SinkTime>> {
        Box::pin(async { Ok(None) })
    }
}

impl TwoPhaseCommit for KafkaSink {
    fn commit<'a>(&'a self, state: &'a TableState) -> CapabilityFuture<'a, ()> {
        Box::pin(self.commit_transaction(state))
    }

    fn recover(&self) -> CapabilityFuture<'_, Option<TableState>> {
        Box::pin(self.recover_transactions())
    }
}

impl KafkaSink {
    async fn commit_transaction(&self, state: &TableState) -> Result<(), EngineError> {
        let Some(t) = &self.transactions else {
            return Ok(());
        };
        if self.failed.load(Ordering::SeqCst) {
            return Err(KafkaSinkError::FailedTransaction { id: t.id.clone() }.into());
        }
        let producer = self.current_producer()?;
        if let Err(e) = t.commit(&producer, state).await {
            // Committed or not: the restart's recovery finds out.
            self.failed.store(true, Ordering::SeqCst);
            return Err(e.into());
        }
        self.metrics.transaction_committed(&self.topic);
        Ok(())
    }

    async fn recover_transactions(&self) -> Result<Option<TableState>, EngineError> {
        let Some(t) = &self.transactions else {
            return Ok(None);
        };
        // This process's own open transaction, if it had one, is given up
        // (a predecessor's is aborted too, uncounted: the broker does not
        // say whether there was one).
        let abandoned = self.producer.read().is_ok_and(|p| p.is_some());
        let producer = t.start().await?;
        if abandoned {
            self.metrics.transaction_aborted(&self.topic);
        }
        self.set_producer(producer);
        self.failed.store(false, Ordering::SeqCst);
        let state = t.last_progress().await?;
        tracing::info!(
            transactional_id = %t.id,
            progress_topic = %t.progress_topic,
            committed = state.is_some(),
            "exactly-once sink ready: earlier transactions of this id fenced and aborted"
        );
        Ok(state)
    }
}

impl KafkaSink {
    /// Writes a watermark of `end` to every partition of the topic, unless
    /// one as new was written (or watermarks are off).
    async fn write_watermarks(&self, end: SourceTime) -> Result<(), EngineError> {
        let Some(watermarks) = &self.watermarks else {
            return Ok(());
        };
        let producer = self.current_producer()?;
        let wait = self.config.delivery != DeliveryGuarantee::None;
        match watermarks
            .write(&producer, self.encoder.table(), end, wait)
            .await
        {
            Ok(written) => {
                self.metrics.watermarks(&self.topic, written);
                Ok(())
            }
            Err(e) => {
                // Exactly-once: the open transaction is spoilt.
                self.failed.store(true, Ordering::SeqCst);
                Err(e.into())
            }
        }
    }
}

/// The producer in `slot`, if the sink was prepared (and recovered).
fn current(
    slot: &RwLock<Option<FutureProducer>>,
    topic: &str,
) -> Result<FutureProducer, KafkaSinkError> {
    slot.read()
        .ok()
        .and_then(|p| p.clone())
        .ok_or_else(|| KafkaSinkError::NotPrepared {
            topic: topic.to_string(),
        })
}

/// One pipeline's writer: encodes a batch's rows and hands them to the
/// shared producer.
pub struct KafkaSinkWriter {
    producer: Arc<RwLock<Option<FutureProducer>>>,
    /// Set when a write fails (exactly-once: the transaction is spoilt).
    failed: Arc<AtomicBool>,
    topic: String,
    encoder: Encoder,
    keys: Arc<RwLock<Vec<String>>>,
    window: Arc<RwLock<Option<WindowInfo>>>,
    delivery: DeliveryGuarantee,
    record: Record,
    pending: Vec<DeliveryFuture>,
    metrics: Arc<KafkaMetrics>,
}

impl KafkaSinkWriter {
    fn err(&self, e: KafkaError) -> KafkaSinkError {
        kafka_error(format!("writing Kafka topic '{}'", self.topic), e)
    }

    /// Waits for every record handed over so far; the first failure is
    /// the batch's.
    async fn await_pending(&mut self) -> Result<(), KafkaSinkError> {
        let mut first = None;
        for delivery in self.pending.drain(..) {
            let failure = match delivery.await {
                Ok(Ok(_)) => continue,
                Ok(Err((e, _))) => e,
                // The producer was dropped with the record queued.
                Err(_) => KafkaError::Canceled,
            };
            first.get_or_insert(failure);
        }
        match first {
            Some(e) => Err(self.err(e)),
            None => Ok(()),
        }
    }

    async fn write_rows(&mut self, batch: &KuduBatch) -> Result<WriteStats, KafkaSinkError> {
        let window =
            self.window
                .read()
                .ok()
                .and_then(|w| *w)
                .ok_or_else(|| KafkaSinkError::NoWindow {
                    topic: self.topic.clone(),
                })?;
        if let Ok(keys) = self.keys.read() {
            self.encoder.set_keys(keys.clone());
        }
        let producer = current(&self.producer, &self.topic)?;
        let mut stats = WriteStats::default();
        let schema = batch.schema();
        let headers = TimeHeaders::new(window.end);
        for row in batch.rows() {
            self.encoder
                .encode(schema, &row, window, &mut self.record)
                .map_err(|source| KafkaSinkError::Encode {
                    table: self.encoder.table().to_string(),
                    topic: self.topic.clone(),
                    source: Box::new(source),
                })?;
            if row.is_deleted() {
                stats.deletes += 1;
            } else {
                stats.upserts += 1;
            }
            stats.bytes +=
                (self.record.key.len() + self.record.value.as_ref().map_or(0, Vec::len)) as u64;
            loop {
                let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&self.topic)
                    .key(self.record.key.as_slice())
                    .headers(headers.owned());
                if let Some(value) = &self.record.value {
                    record = record.payload(value.as_slice());
                }
                match producer.send_result(record) {
                    Ok(delivery) => {
                        self.pending.push(delivery);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        // The producer's queue is full: let it drain.
                        if self.pending.is_empty() {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        } else {
                            let result = self.await_pending().await;
                            if self.delivery != DeliveryGuarantee::None {
                                result?;
                            }
                        }
                    }
                    Err((e, _)) => return Err(self.err(e)),
                }
            }
        }
        match self.delivery {
            DeliveryGuarantee::None => self.pending.clear(),
            DeliveryGuarantee::AtLeastOnce | DeliveryGuarantee::ExactlyOnce => {
                self.await_pending().await?
            }
        }
        self.metrics
            .produced(&self.topic, stats.upserts + stats.deletes, stats.bytes);
        Ok(stats)
    }
}

impl SinkWriter<KuduBatch> for KafkaSinkWriter {
    async fn write(&mut self, batch: &KuduBatch) -> Result<WriteStats, EngineError> {
        if batch.is_empty() {
            return Ok(WriteStats::default());
        }
        let written = self.write_rows(batch).await;
        if written.is_err() {
            self.failed.store(true, Ordering::SeqCst);
        }
        Ok(written?)
    }
}
