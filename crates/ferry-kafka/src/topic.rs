//! The sink's topics: created when missing (`job.sinkTopicPartitions`,
//! `job.sinkTopicReplicationFactor`; `cleanup.policy=compact` for the
//! upsert format, so the topic keeps each key's latest row, and for the
//! progress topic), checked when present.

use crate::error::{kafka_error, KafkaSinkError};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;
use std::time::Duration;

const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A topic the sink writes.
#[derive(Debug, Clone, Copy)]
pub struct TopicSpec<'a> {
    /// The topic's name.
    pub name: &'a str,
    /// Partitions if created (0: the broker's default).
    pub partitions: u32,
    /// Whether it must compact (`cleanup.policy=compact`).
    pub compact: bool,
}

/// Creates `spec`'s topic on `servers` (with `replication` replicas, 0:
/// the broker's default), or checks the one there: an existing topic that
/// should compact and does not is used, with a warning (its retention may
/// drop keys' latest state).
pub async fn ensure_topic(
    client: &ClientConfig,
    servers: &str,
    replication: u32,
    spec: TopicSpec<'_>,
) -> Result<(), KafkaSinkError> {
    let topic = spec.name;
    let admin: AdminClient<DefaultClientContext> = client
        .create()
        .map_err(|e| kafka_error(format!("connecting to Kafka ({})", servers), e))?;
    let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    // -1: the broker's default (Kafka 2.4+).
    let count = |n: u32| {
        if n == 0 {
            -1
        } else {
            i32::try_from(n).unwrap_or(i32::MAX)
        }
    };
    let mut new = NewTopic::new(
        topic,
        count(spec.partitions),
        TopicReplication::Fixed(count(replication)),
    );
    if spec.compact {
        new = new.set("cleanup.policy", "compact");
    }
    let results = tokio::time::timeout(ADMIN_TIMEOUT, admin.create_topics([&new], &options))
        .await
        .map_err(|_| KafkaSinkError::Timeout {
            what: format!("creating topic '{topic}' on {}", servers),
        })?
        .map_err(|e| kafka_error(format!("creating topic '{topic}'"), e))?;
    for result in results {
        match result {
            Ok(_) => {
                tracing::info!(%topic, compact = spec.compact, "created the topic");
                return Ok(());
            }
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(KafkaSinkError::Topic {
                    topic: topic.to_string(),
                    reason: format!("the broker refused to create it: {code}"),
                })
            }
        }
    }
    if spec.compact {
        check_compaction(&admin, &options, topic).await?;
    }
    tracing::info!(%topic, "using the existing topic");
    Ok(())
}

async fn check_compaction(
    admin: &AdminClient<DefaultClientContext>,
    options: &AdminOptions,
    topic: &str,
) -> Result<(), KafkaSinkError> {
    let resource = ResourceSpecifier::Topic(topic);
    let described = admin
        .describe_configs([&resource], options)
        .await
        .map_err(|e| kafka_error(format!("describing topic '{topic}'"), e))?;
    let policy = described
        .into_iter()
        .filter_map(Result::ok)
        .find_map(|r| r.get("cleanup.policy").and_then(|e| e.value.clone()));
    if !policy.as_deref().is_some_and(|p| p.contains("compact")) {
        tracing::warn!(
            %topic,
            cleanup_policy = policy.as_deref().unwrap_or("unknown"),
            "the topic does not compact: once its retention drops old records, \
             a reader from the start no longer sees every key's latest record (set cleanup.policy=compact)"
        );
    }
    Ok(())
}
