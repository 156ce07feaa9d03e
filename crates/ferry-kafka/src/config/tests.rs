//! The Kafka keys with the engine's, composed as the binary does.

use super::*;
use ferry_engine::config::{
    ConfigError, JobConfig, KeyOrigin, Registry, Section, ENGINE_SECTIONS, HA_KEYS,
    HA_ZOOKEEPER_KEYS, JOB_KEYS, KERBEROS_CLUSTER_KEYS, KERBEROS_LOGIN_KEYS, KUBERNETES_HA_KEYS,
    READER_KEYS, RESTART_KEYS, SHARD_KEYS, SINK_KIND_KEYS, SOURCE_KIND_KEYS, TABLE_KEYS,
    THROTTLE_KEYS, WRITER_KEYS,
};

static KEYS: Registry = Registry::new(&[
    &JOB_KEYS,
    &SHARD_KEYS,
    &TABLE_KEYS,
    &SINK_KIND_KEYS,
    &KAFKA_SINK_KEYS,
    &SOURCE_KIND_KEYS,
    &KAFKA_SOURCE_KEYS,
    &READER_KEYS,
    &WRITER_KEYS,
    &THROTTLE_KEYS,
    &RESTART_KEYS,
    &HA_KEYS,
    &KUBERNETES_HA_KEYS,
    &HA_ZOOKEEPER_KEYS,
    &KERBEROS_LOGIN_KEYS,
    &KERBEROS_CLUSTER_KEYS,
]);

/// A job and its Kafka sides, from named pairs.
type Parsed = (
    JobConfig,
    Option<KafkaSinkConfig>,
    Option<KafkaSourceConfig>,
);

fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Parsed, ConfigError> {
    let keys = KEYS.config_from_pairs(pairs)?;
    let job = JobConfig::from_config(&keys)?;
    let sink = KafkaSinkConfig::from_config(&keys, &job)?;
    let source = KafkaSourceConfig::from_config(&keys, &job)?;
    Ok((job, sink, source))
}

/// Every key of the job in canonical form, as pairs: the engine's and the
/// Kafka sections'.
fn effective(pairs: &[(&str, &str)]) -> Vec<(&'static str, String)> {
    let keys = KEYS
        .config_from_pairs(pairs.iter().copied())
        .expect("known");
    let mut out = JobConfig::from_config(&keys)
        .expect("valid")
        .effective_values();
    for section in [&KAFKA_SINK_KEYS, &KAFKA_SOURCE_KEYS] {
        let values = section.effective(&keys).expect("valid");
        out.extend(values.iter().map(|(k, v)| (k, v.to_string())));
    }
    out
}

fn kafka_sink(pairs: &[(&str, &str)]) -> Result<Parsed, ConfigError> {
    let mut all = vec![
        ("job.sourceMasterAddresses", "m1:7051"),
        ("job.tableName", "orders"),
        ("job.checkpointsDirectory", "/tmp/ferry-sink-config"),
        ("job.sinkType", "kafka"),
    ];
    all.extend_from_slice(pairs);
    parse(all)
}

fn kafka_source(pairs: &[(&str, &str)]) -> Result<Parsed, ConfigError> {
    let mut all = vec![
        ("job.sinkMasterAddresses", "k1:7051"),
        ("job.tableName", "orders"),
        ("job.checkpointsDirectory", "/tmp/ferry-source-config"),
        ("job.sourceType", "kafka"),
    ];
    all.extend_from_slice(pairs);
    parse(all)
}

#[test]
fn the_kafka_keys_are_ferrys_and_documented() {
    let names: Vec<_> = [&KAFKA_SINK_KEYS, &KAFKA_SOURCE_KEYS]
        .iter()
        .flat_map(|s| s.keys.iter())
        .map(|k| {
            assert_eq!(k.spec().origin, KeyOrigin::Ferry, "{}", k.name());
            assert!(!k.spec().doc.is_empty(), "{}", k.name());
            if let Some(default) = k.spec().default_value() {
                assert_eq!(k.normalize(default).as_deref(), Ok(default));
            }
            k.name()
        })
        .collect();
    assert_eq!(
        names,
        [
            "job.sinkBootstrapServers",
            "job.sinkTopic",
            "job.sinkFormat",
            "job.sinkDeliveryGuarantee",
            "job.sinkTransactionalIdPrefix",
            "job.sinkProgressTopic",
            "job.sinkTopicPartitions",
            "job.sinkTopicReplicationFactor",
            "job.sinkWatermarks",
            "job.sourceBootstrapServers",
            "job.sourceTopic",
            "job.sourceFormat",
            "job.sourceStartupMode",
            "job.sourceStartupTimestampMillis",
            "job.sourceBoundedMode",
            "job.sourceBoundedTimestampMillis",
            "job.sourceGroupId",
            "job.sourceErrorPolicy",
            "job.sourceDeadLetterTopic",
        ]
    );
    // None of them is the engine's.
    for name in names {
        assert!(ENGINE_SECTIONS
            .iter()
            .all(|s: &&Section| s.keys.iter().all(|k| k.name() != name)));
    }
}

#[test]
fn a_kafka_sink_needs_brokers_and_no_sink_masters() {
    let err = kafka_sink(&[]).expect_err("no brokers");
    assert!(
        err.to_string().contains("job.sinkBootstrapServers"),
        "{err}"
    );
    let err = kafka_sink(&[
        ("job.sinkBootstrapServers", "127.0.0.1:9092"),
        ("job.sinkMasterAddresses", "k1:7051"),
    ])
    .expect_err("sink masters");
    assert!(err.to_string().contains("job.sinkMasterAddresses"), "{err}");
    let (cfg, sink, _) =
        kafka_sink(&[("job.sinkBootstrapServers", " a:9092, b:9092 ")]).expect("valid");
    let k = sink.expect("kafka");
    assert_eq!(k.bootstrap_servers, "a:9092,b:9092");
    assert_eq!(k.format, RecordFormat::DebeziumJson);
    assert_eq!(k.delivery, DeliveryGuarantee::AtLeastOnce);
    assert!(k.watermarks, "watermarks by default");
    assert!(cfg.sink_master_addresses.is_empty());
    let (_, off, _) = kafka_sink(&[
        ("job.sinkBootstrapServers", "a:9092"),
        ("job.sinkWatermarks", "false"),
    ])
    .expect("valid");
    assert!(!off.expect("kafka").watermarks);
}

#[test]
fn kafka_values_are_checked_and_named() {
    let base = ("job.sinkBootstrapServers", "a:9092");
    for (pair, needle) in [
        (("job.sinkFormat", "avro"), "job.sinkFormat"),
        (("job.sinkWatermarks", "sometimes"), "job.sinkWatermarks"),
        (("job.sinkTopic", "bad topic"), "job.sinkTopic"),
        (
            ("job.sinkDeliveryGuarantee", "twice"),
            "job.sinkDeliveryGuarantee",
        ),
        (
            ("job.sinkProgressTopic", "p.{table}"),
            "job.sinkProgressTopic",
        ),
        (("job.sinkTopicPartitions", "-2"), "job.sinkTopicPartitions"),
    ] {
        let err = kafka_sink(&[base, pair]).expect_err("refused");
        assert!(err.to_string().contains(needle), "{pair:?}: {err}");
    }
    let err = kafka_sink(&[("job.sinkBootstrapServers", "nohost")]).expect_err("no port");
    assert!(err.to_string().contains("'nohost'"), "{err}");
}

#[test]
fn kafka_keys_on_a_kudu_sink_are_refused() {
    let err = parse([
        ("job.sourceMasterAddresses", "m1:7051"),
        ("job.sinkMasterAddresses", "k1:7051"),
        ("job.tableName", "orders"),
        ("job.checkpointsDirectory", "/tmp/x"),
        ("job.sinkTopic", "t"),
    ])
    .expect_err("kafka key on kudu");
    assert!(err.to_string().contains("job.sinkTopic"), "{err}");
}

#[test]
fn sink_effective_values_round_trip() {
    let given = [
        ("job.sinkBootstrapServers", "a:9092"),
        ("job.sinkFormat", "upsert-json"),
        ("job.sinkTopic", "cdc.{table}"),
    ];
    let cfg = kafka_sink(&given).expect("valid");
    let mut all = vec![
        ("job.sourceMasterAddresses", "m1:7051"),
        ("job.tableName", "orders"),
        ("job.checkpointsDirectory", "/tmp/ferry-sink-config"),
        ("job.sinkType", "kafka"),
    ];
    all.extend_from_slice(&given);
    let pairs = effective(&all);
    let again = parse(
        pairs
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (*k, v.as_str())),
    )
    .expect("round trip");
    assert_eq!(again, cfg);
    let k = cfg.1.expect("kafka");
    assert_eq!(k.topic_for("sales/2026 q1"), "cdc.sales_2026_q1");
}

#[test]
fn a_kafka_source_needs_brokers_and_a_topic_and_no_source_masters() {
    let err = kafka_source(&[("job.sourceTopic", "cdc")]).expect_err("no brokers");
    assert!(
        err.to_string().contains("job.sourceBootstrapServers"),
        "{err}"
    );
    let err = kafka_source(&[("job.sourceBootstrapServers", "a:9092")]).expect_err("no topic");
    assert!(err.to_string().contains("job.sourceTopic"), "{err}");
    let err = kafka_source(&[
        ("job.sourceBootstrapServers", "a:9092"),
        ("job.sourceTopic", "cdc"),
        ("job.sourceMasterAddresses", "m:7051"),
    ])
    .expect_err("source masters");
    assert!(
        err.to_string().contains("job.sourceMasterAddresses"),
        "{err}"
    );
    let (cfg, _, source) = kafka_source(&[
        ("job.sourceBootstrapServers", "a:9092"),
        ("job.sourceTopic", "cdc"),
    ])
    .expect("valid");
    let k = source.expect("kafka");
    assert_eq!(k.startup, StartupMode::Earliest);
    assert_eq!(k.bounded, BoundedMode::Unbounded);
    assert_eq!(k.error_policy, ErrorPolicy::Fail);
    assert_eq!(
        k.group_id_for(&cfg.job_name),
        format!("ferry-{}", cfg.job_name)
    );
}

#[test]
fn kafka_source_values_are_checked_and_named() {
    let base = [
        ("job.sourceBootstrapServers", "a:9092"),
        ("job.sourceTopic", "cdc"),
    ];
    for (pair, needle) in [
        (("job.sourceFormat", "avro"), "job.sourceFormat"),
        (
            ("job.sourceStartupMode", "timestamp"),
            "job.sourceStartupTimestampMillis",
        ),
        (
            ("job.sourceBoundedMode", "timestamp"),
            "job.sourceBoundedTimestampMillis",
        ),
        (
            ("job.sourceErrorPolicy", "dead-letter"),
            "job.sourceDeadLetterTopic",
        ),
        (("job.sourceTopic", "a b"), "job.sourceTopic"),
        (("job.sinkType", "kafka"), "job.sinkType"),
    ] {
        let mut pairs = base.to_vec();
        pairs.retain(|(k, _)| *k != pair.0);
        pairs.push(pair);
        let err = kafka_source(&pairs).expect_err("refused");
        assert!(err.to_string().contains(needle), "{pair:?}: {err}");
    }
    let err = parse([
        ("job.sourceMasterAddresses", "m1:7051"),
        ("job.sinkMasterAddresses", "k1:7051"),
        ("job.tableName", "orders"),
        ("job.checkpointsDirectory", "/tmp/x"),
        ("job.sourceTopic", "t"),
    ])
    .expect_err("kafka key on a kudu source");
    assert!(err.to_string().contains("job.sourceTopic"), "{err}");
}

#[test]
fn source_effective_values_round_trip() {
    let given = [
        ("job.sourceBootstrapServers", "a:9092"),
        ("job.sourceTopic", "cdc"),
        ("job.sourceStartupMode", "timestamp"),
        ("job.sourceStartupTimestampMillis", "1700000000000"),
        ("job.sourceErrorPolicy", "dead-letter"),
        ("job.sourceDeadLetterTopic", "cdc.dlq"),
    ];
    let cfg = kafka_source(&given).expect("valid");
    let mut all = vec![
        ("job.sinkMasterAddresses", "k1:7051"),
        ("job.tableName", "orders"),
        ("job.checkpointsDirectory", "/tmp/ferry-source-config"),
        ("job.sourceType", "kafka"),
    ];
    all.extend_from_slice(&given);
    let pairs = effective(&all);
    let again = parse(
        pairs
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (*k, v.as_str())),
    )
    .expect("round trip");
    assert_eq!(again, cfg);
}
