//! Exactly-once delivery: one transactional producer per table
//! (`transactional.id = <prefix>-<source table id>`), its records
//! committed at every checkpoint together with a *progress record* — the
//! table's state that covers them — on the job's compacted progress topic.
//! A commit therefore makes visible, atomically, a set of records and the
//! state that says how far they go.
//!
//! Recovery (a restart, or a restore with `-s`): a new producer with the
//! same transactional id calls `init_transactions`, which fences any
//! earlier one (a process killed with `kill -9`, or a zombie) and aborts
//! its open transaction; then the last committed progress record of the
//! table is read (`read_committed`). The engine continues from that state
//! when it is further than the one restored, so every record a
//! `read_committed` consumer sees was written once.
//!
//! The progress topic defaults to one per job (`<prefix>_progress`): a
//! `read_committed` reader stops at the first transaction still open, and
//! the only open ones there are then this job's own, which a restore
//! aborts table by table before it reads.

use crate::error::{kafka_error, KafkaSinkError};
use ferry_engine::checkpoint::TableState;
use ferry_engine::time::now_ms;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How long a transaction call (init, commit, abort) or a read of the
/// progress topic may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The progress record of one table: its key is the transactional id.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Progress {
    /// The transactional id that committed it.
    pub transactional_id: String,
    /// When it was committed (epoch ms).
    pub committed_at_ms: u64,
    /// The table's state covering every record committed with it.
    pub state: TableState,
}

/// One table's transactions.
pub(crate) struct Transactions {
    /// `transactional.id`, also the progress record's key.
    pub id: String,
    pub progress_topic: String,
    /// The producer's settings (with the transactional id).
    pub producer: ClientConfig,
    /// Settings of the reader of the progress topic.
    pub reader: ClientConfig,
}

impl Transactions {
    /// A producer that fenced off every earlier one with this id (their
    /// open transaction aborted), with a transaction begun.
    pub(crate) async fn start(&self) -> Result<FutureProducer, KafkaSinkError> {
        let producer: FutureProducer = self.producer.create().map_err(|e| {
            kafka_error(
                format!("creating the transactional producer '{}'", self.id),
                e,
            )
        })?;
        let p = producer.clone();
        blocking(move || {
            p.init_transactions(CALL_TIMEOUT)?;
            p.begin_transaction()
        })
        .await
        .map_err(|e| {
            kafka_error(
                format!(
                    "starting transactions of '{}' (fencing earlier producers)",
                    self.id
                ),
                e,
            )
        })?;
        Ok(producer)
    }

    /// Commits the open transaction with `state` as the table's progress,
    /// then begins the next one.
    pub(crate) async fn commit(
        &self,
        producer: &FutureProducer,
        state: &TableState,
    ) -> Result<(), KafkaSinkError> {
        let progress = Progress {
            transactional_id: self.id.clone(),
            committed_at_ms: now_ms(),
            state: state.clone(),
        };
        let value = serde_json::to_vec(&progress).map_err(|e| KafkaSinkError::Topic {
            topic: self.progress_topic.clone(),
            reason: format!("cannot encode the progress record: {e}"),
        })?;
        let record = FutureRecord::to(&self.progress_topic)
            .key(self.id.as_str())
            .payload(value.as_slice());
        producer
            .send(record, CALL_TIMEOUT)
            .await
            .map_err(|(e, _)| {
                kafka_error(
                    format!(
                        "writing the progress of '{}' to topic '{}'",
                        self.id, self.progress_topic
                    ),
                    e,
                )
            })?;
        let p = producer.clone();
        blocking(move || {
            p.commit_transaction(CALL_TIMEOUT)?;
            p.begin_transaction()
        })
        .await
        .map_err(|e| kafka_error(format!("committing the transaction of '{}'", self.id), e))
    }

    /// The state of the last progress record committed under this id, if
    /// any (read to the end of what is committed).
    pub(crate) async fn last_progress(&self) -> Result<Option<TableState>, KafkaSinkError> {
        let reader = self.reader.clone();
        let topic = self.progress_topic.clone();
        let id = self.id.clone();
        let what = format!(
            "reading the progress of '{}' from topic '{}'",
            self.id, self.progress_topic
        );
        let found = tokio::task::spawn_blocking(move || read_progress(&reader, &topic, &id))
            .await
            .map_err(|_| KafkaSinkError::Timeout { what: what.clone() })?
            .map_err(|e| kafka_error(what.clone(), e))?;
        match found {
            None => Ok(None),
            Some(bytes) => {
                let progress: Progress =
                    serde_json::from_slice(&bytes).map_err(|e| KafkaSinkError::Topic {
                        topic: self.progress_topic.clone(),
                        reason: format!(
                            "the progress record of '{}' is not ferry's ({e}); was the topic used by something else?",
                            self.id
                        ),
                    })?;
                Ok(Some(progress.state))
            }
        }
    }
}

/// The value of the last committed record keyed `id` on `topic`, reading
/// every partition up to its last stable offset.
fn read_progress(
    config: &ClientConfig,
    topic: &str,
    id: &str,
) -> Result<Option<Vec<u8>>, KafkaError> {
    let consumer: BaseConsumer = config.create()?;
    let metadata = consumer.fetch_metadata(Some(topic), CALL_TIMEOUT)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    let mut assignment = TopicPartitionList::new();
    let mut open = Vec::new();
    for &p in &partitions {
        let (low, high) = consumer.fetch_watermarks(topic, p, CALL_TIMEOUT)?;
        if high > low {
            assignment.add_partition_offset(topic, p, Offset::Beginning)?;
            open.push(p);
        }
    }
    if open.is_empty() {
        return Ok(None);
    }
    consumer.assign(&assignment)?;
    let mut last = None;
    let deadline = Instant::now() + CALL_TIMEOUT;
    while !open.is_empty() {
        if Instant::now() > deadline {
            return Err(KafkaError::Global(
                rdkafka::types::RDKafkaErrorCode::OperationTimedOut,
            ));
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => open.retain(|&q| q != p),
            Some(Err(e)) => return Err(e),
            Some(Ok(m)) if m.key() == Some(id.as_bytes()) => {
                last = m.payload().map(<[u8]>::to_vec);
            }
            Some(Ok(_)) => {}
        }
    }
    Ok(last)
}

/// Runs a blocking librdkafka call off the async workers.
async fn blocking(
    f: impl FnOnce() -> Result<(), KafkaError> + Send + 'static,
) -> Result<(), KafkaError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or(Err(KafkaError::Canceled))
}
