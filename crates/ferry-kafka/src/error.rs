//! The Kafka connectors' errors, and how they reach the engine: as
//! [`EngineError::Connector`], retryable (the job's restart strategy
//! retries) unless the broker's answer cannot change by retrying.

use ferry_engine::error::{ConnectorError, Domain};
use ferry_engine::EngineError;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// Why the Kafka sink failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaSinkError {
    /// A call to Kafka failed; `context` says what ferry was doing.
    #[error("{context}")]
    Kafka {
        /// What ferry was doing.
        context: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
    /// The topic cannot be used.
    #[error("Kafka topic '{topic}': {reason}")]
    Topic {
        /// The topic.
        topic: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A call did not answer in time.
    #[error("{what}: no answer in time (are the brokers up?)")]
    Timeout {
        /// The call that did not answer.
        what: String,
    },
    /// A row could not be encoded.
    #[error("encoding a row of table '{table}' for topic '{topic}'")]
    Encode {
        /// The Kudu table the row comes from.
        table: String,
        /// The topic it was to be written to.
        topic: String,
        /// Why the row could not be encoded.
        #[source]
        source: Box<crate::format::FormatError>,
    },
    /// A changelog record cannot be applied (`job.sourceErrorPolicy=fail`).
    #[error("record at offset {offset} of partition {partition} of topic '{topic}' cannot be applied to table '{table}': {reason}")]
    Record {
        /// The topic the record was read from.
        topic: String,
        /// Its partition.
        partition: i32,
        /// Its offset in the partition.
        offset: i64,
        /// The Kudu table it was to be applied to.
        table: String,
        /// Why it cannot be applied.
        reason: String,
    },
    /// A writer was asked for before `prepare` made the producer (a bug).
    #[error("the Kafka sink for topic '{topic}' was used before it was prepared")]
    NotPrepared {
        /// The sink's topic.
        topic: String,
    },
    /// Exactly-once: a write of the open transaction failed, so it cannot
    /// be committed (the job restarts and aborts it).
    #[error("the transaction of '{id}' cannot be committed: one of its writes failed")]
    FailedTransaction {
        /// The producer's `transactional.id`.
        id: String,
    },
    /// A batch arrived before the engine said which window it belongs to
    /// (a bug).
    #[error("a batch for topic '{topic}' arrived before its window was recorded")]
    NoWindow {
        /// The sink's topic.
        topic: String,
    },
}

/// A [`KafkaSinkError::Kafka`] with `context`.
pub(crate) fn kafka_error(context: String, source: KafkaError) -> KafkaSinkError {
    KafkaSinkError::Kafka { context, source }
}

impl KafkaSinkError {
    /// Whether a restart of the job may help.
    pub fn is_transient(&self) -> bool {
        match self {
            KafkaSinkError::Kafka { source, .. } => {
                !source.rdkafka_error_code().is_some_and(is_permanent)
            }
            KafkaSinkError::Timeout { .. } | KafkaSinkError::FailedTransaction { .. } => true,
            KafkaSinkError::Topic { .. }
            | KafkaSinkError::Encode { .. }
            | KafkaSinkError::Record { .. }
            | KafkaSinkError::NotPrepared { .. }
            | KafkaSinkError::NoWindow { .. } => false,
        }
    }
}

/// Broker answers that a retry cannot change.
fn is_permanent(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidConfig
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::TransactionalIdAuthorizationFailed
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::UnsupportedVersion
            | RDKafkaErrorCode::SaslAuthenticationFailed
            | RDKafkaErrorCode::Fatal
    )
}

impl From<KafkaSinkError> for EngineError {
    fn from(e: KafkaSinkError) -> Self {
        let table = match &e {
            KafkaSinkError::Encode { table, .. } | KafkaSinkError::Record { table, .. } => {
                Some(table.clone())
            }
            _ => None,
        };
        let transient = e.is_transient();
        let mut error = ConnectorError::new(Domain::Sink, "Connector", e)
            .context("Kafka sink")
            .transient(transient);
        if let Some(table) = table {
            error = error.table(table);
        }
        error.into()
    }
}
