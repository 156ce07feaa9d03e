//! Kafka → Kudu against a real Kafka 4.x broker (KRaft) and a real Kudu
//! cluster.
//!
//! 1. A producer writes an upsert-json changelog (inserts, updates,
//!    tombstones, and a few malformed records) to a 3-partition topic while
//!    `ferry run --job.sourceType kafka` applies it to a Kudu table and is
//!    killed with SIGKILL and restarted from its newest checkpoint; the
//!    table then equals the fold of the changelog, and every malformed
//!    record is in the dead-letter topic with its topic/partition/offset
//!    in headers. A second job with `job.sourceErrorPolicy=fail` fails on
//!    the first malformed record, naming it; a bounded one
//!    (`latest-offset`) ends FINISHED by itself with the table equal to
//!    the fold and the consumer group's offsets at the ends.
//! 2. Round trip: Kudu → Kafka (debezium-json, exactly-once) → Kudu leaves
//!    the second table equal to the first, cell by cell, while a mixed
//!    workload changes every type.
//! 3. A Kafka source's window ends read as wall-clock time: the job's
//!    `lastEndTimestamp` is close to now, the table's lag is seconds, and
//!    the enumerator's gauges name the Kafka source as their operator.

use ferry_engine::checkpoint::{CheckpointStore, JobId, StorageLocation};
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_testkit::MiniCluster;
use kudu_client::{DataType, KuduClient, TableBuilder, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::time::Duration;

const TOPIC: &str = "changes";
const DLQ: &str = "changes.dlq";
const PARTITIONS: i32 = 3;

fn admin_create(bootstrap: &str, topic: &str) {
    let rt = tokio::runtime::Handle::current();
    let bootstrap = bootstrap.to_string();
    let topic = topic.to_string();
    std::thread::spawn(move || {
        rt.block_on(async move {
            use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
            let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .create()
                .expect("admin");
            let new = NewTopic::new(&topic, PARTITIONS, TopicReplication::Fixed(1));
            let results = admin
                .create_topics([&new], &AdminOptions::new())
                .await
                .expect("create topic");
            for r in results {
                r.expect("topic created");
            }
        })
    })
    .join()
    .expect("admin thread");
}

fn producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("partitioner", "murmur2_random")
        .create()
        .expect("producer")
}

/// What the test produced: the expected table (id → (v, n)) and where the
/// malformed records went.
#[derive(Default)]
struct Produced {
    rows: BTreeMap<i64, (String, Option<i32>)>,
    malformed: BTreeSet<(i32, i64)>,
    first_malformed: Option<(i32, i64)>,
}

/// Sends `count` changes over keys `0..keys` (a tenth deletes), and every
/// `malformed_every` records a malformed one; each record is acknowledged
/// before the next, so a key's records keep their order.
async fn produce(
    producer: &FutureProducer,
    produced: &mut Produced,
    rng: &mut StdRng,
    count: usize,
    keys: i64,
    malformed_every: usize,
) {
    produce_to(TOPIC, producer, produced, rng, count, keys, malformed_every).await;
}

/// [`produce`] into `topic`.
async fn produce_to(
    topic: &str,
    producer: &FutureProducer,
    produced: &mut Produced,
    rng: &mut StdRng,
    count: usize,
    keys: i64,
    malformed_every: usize,
) {
    for i in 0..count {
        let id = rng.gen_range(0..keys);
        let key = json!({ "id": id }).to_string();
        let (value, bad): (Option<String>, bool) =
            if malformed_every > 0 && i % malformed_every == 7 {
                let bad = match i % 3 {
                    0 => "{not json".to_string(),
                    1 => json!({"id": id, "v": "x", "n": "not a number"}).to_string(),
                    _ => json!({"id": id, "v": "x", "n": 5_000_000_000_i64}).to_string(),
                };
                (Some(bad), true)
            } else if rng.gen_range(0..10) == 0 {
                (None, false)
            } else {
                let n = rng
                    .gen_range(0..3)
                    .ne(&0)
                    .then(|| rng.gen_range(-1000..1000));
                let v = format!("row {id} change {i}");
                (Some(json!({ "id": id, "v": v, "n": n }).to_string()), false)
            };
        let mut record: FutureRecord<'_, str, str> = FutureRecord::to(topic).key(&key);
        if let Some(v) = &value {
            record = record.payload(v);
        }
        let delivery = producer
            .send(record, Duration::from_secs(30))
            .await
            .map_err(|(e, _)| e)
            .expect("produced");
        let (partition, offset) = (delivery.partition, delivery.offset);
        if bad {
            produced.malformed.insert((partition, offset));
            produced.first_malformed.get_or_insert((partition, offset));
            continue;
        }
        match value {
            None => {
                produced.rows.remove(&id);
            }
            Some(v) => {
                let v: serde_json::Value = serde_json::from_str(&v).expect("json");
                let n = v["n"].as_i64().map(|n| n as i32);
                produced
                    .rows
                    .insert(id, (v["v"].as_str().unwrap_or_default().to_string(), n));
            }
        }
    }
}

fn args(
    kafka: &str,
    master: &str,
    table: &str,
    chk: &std::path::Path,
    extra: &[&str],
    resume: Option<&str>,
) -> Vec<String> {
    let mut all = vec![
        "--job.sourceTopic",
        TOPIC,
        "--job.sourceFormat",
        "upsert-json",
    ];
    all.extend_from_slice(extra);
    source_args(kafka, master, table, chk, &all, resume)
}

fn source_args(
    kafka: &str,
    master: &str,
    table: &str,
    chk: &std::path::Path,
    extra: &[&str],
    resume: Option<&str>,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "--job.sourceType",
        "kafka",
        "--job.sourceBootstrapServers",
        kafka,
        "--job.sinkMasterAddresses",
        master,
        "--job.tableName",
        table,
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
        "-p",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    if let Some(path) = resume {
        args.extend(["-s".to_string(), path.to_string()]);
    }
    args
}

async fn table_rows(client: &KuduClient, table: &str) -> BTreeMap<i64, (String, Option<i32>)> {
    ferry_fixtures::read_all(client, table)
        .await
        .into_iter()
        .map(|(id, values)| {
            let v = match &values[1] {
                Value::String(s) => s.clone(),
                other => panic!("v is {other:?}"),
            };
            let n = match &values[2] {
                Value::Int32(n) => Some(*n),
                Value::Null => None,
                other => panic!("n is {other:?}"),
            };
            (id, (v, n))
        })
        .collect()
}

/// Waits until `check` holds (polled), or panics with `what`.
async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// (partition, offset) headers of every dead-letter record.
fn dead_letters(bootstrap: &str) -> Vec<(String, i32, i64, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "ferry-test-dlq")
        .set("enable.partition.eof", "true")
        .create()
        .expect("consumer");
    let metadata = consumer
        .fetch_metadata(Some(DLQ), Duration::from_secs(10))
        .expect("metadata");
    let mut list = TopicPartitionList::new();
    let mut open = Vec::new();
    for t in metadata.topics() {
        for p in t.partitions() {
            list.add_partition_offset(DLQ, p.id(), Offset::Beginning)
                .expect("assign");
            open.push(p.id());
        }
    }
    consumer.assign(&list).expect("assign");
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !open.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "reading the DLQ stalled"
        );
        match consumer.poll(Duration::from_millis(300)) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => open.retain(|&q| q != p),
            Some(Err(e)) => panic!("{e}"),
            Some(Ok(m)) => {
                let headers = m.headers().expect("headers");
                let get = |name: &str| {
                    headers
                        .iter()
                        .find(|h| h.key == name)
                        .and_then(|h| h.value)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                        .unwrap_or_default()
                };
                out.push((
                    get("ferry.topic"),
                    get("ferry.partition").parse().expect("partition header"),
                    get("ferry.offset").parse().expect("offset header"),
                    get("ferry.error"),
                ));
            }
        }
    }
    out
}

/// The committed offsets of `group` in [`TOPIC`], and the partitions' ends.
fn group_offsets(bootstrap: &str, group: &str) -> (BTreeMap<i32, i64>, BTreeMap<i32, i64>) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .expect("consumer");
    let mut list = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in 0..PARTITIONS {
        list.add_partition(TOPIC, p);
        let (_, high) = consumer
            .fetch_watermarks(TOPIC, p, Duration::from_secs(10))
            .expect("watermarks");
        ends.insert(p, high);
    }
    let committed = consumer
        .committed_offsets(list, Duration::from_secs(10))
        .expect("committed offsets")
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect();
    (committed, ends)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_changelog_is_applied_through_kill_9_restarts_with_bad_records_set_aside() {
    let kudu_start = std::thread::spawn(|| {
        MiniCluster::builder()
            .tservers(1)
            .start()
            .expect("Kudu cluster")
    });
    let broker = crate::broker();
    let cluster = kudu_start.join().expect("cluster thread");
    let bootstrap = broker.bootstrap();
    let master = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let schema =
        ferry_fixtures::small_schema_with(vec![ferry_fixtures::nullable("n", DataType::Int32)]);
    for table in ["applied", "applied_fail", "applied_bounded"] {
        let builder = TableBuilder::new(table, schema.clone())
            .add_hash_partitions(&["id"], 2, 0)
            .num_replicas(1);
        client.create_table(&builder).await.expect("create");
    }
    admin_create(&bootstrap, TOPIC);

    let producer = producer(&bootstrap);
    let mut rng = StdRng::seed_from_u64(21);
    let mut produced = Produced::default();
    produce(&producer, &mut produced, &mut rng, 1_500, 400, 300).await;

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let store = CheckpointStore::open_local(
        &StorageLocation::local(&chk).expect("location"),
        NonZeroUsize::MIN,
    );
    let dlq = [
        "--job.sourceErrorPolicy",
        "dead-letter",
        "--job.sourceDeadLetterTopic",
        DLQ,
    ];
    let mut resume: Option<String> = None;
    let mut restored = 0;
    for round in 0..4 {
        let a = args(
            &bootstrap,
            &master,
            "applied",
            &chk,
            &dlq,
            resume.as_deref(),
        );
        let mut ferry = crate::run(&a, &[]);
        // More changes while it runs, then a kill at a random moment.
        produce(&producer, &mut produced, &mut rng, 600, 400, 200).await;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(200..1500))).await;
        ferry.kill9();
        let job: JobId = ferry.job_id().parse().expect("job id");
        if let Some(c) = store.latest_complete(&job).await.expect("list").checkpoint {
            resume = Some(c.location.to_uri());
            restored += 1;
        }
        eprintln!("round {round}: resume from {resume:?}");
    }
    assert!(restored >= 2, "checkpoints were taken between kills");

    let a = args(
        &bootstrap,
        &master,
        "applied",
        &chk,
        &dlq,
        resume.as_deref(),
    );
    let mut ferry = crate::run(&a, &[]);
    let expected = produced.rows.clone();
    eventually(
        "the table equals the fold of the changelog",
        Duration::from_secs(90),
        || {
            let client = client.clone();
            let expected = expected.clone();
            async move { table_rows(&client, "applied").await == expected }
        },
    )
    .await;
    // Every partition read to its end, as Prometheus shows it.
    let ends = tokio::task::spawn_blocking({
        let bootstrap = bootstrap.clone();
        move || group_offsets(&bootstrap, "unused").1
    })
    .await
    .expect("watermarks");
    eventually("no consumer lag left", Duration::from_secs(30), || {
        let text = ferry.metrics_text();
        let ends = ends.clone();
        async move {
            ends.iter().all(|(p, end)| {
                let p = p.to_string();
                let labels = [TOPIC, p.as_str()];
                sample(&text, "ferry_kafka_consumer_lag", &labels) == 0.0
                    && sample(&text, "ferry_kafka_partition_end_offset", &labels) == *end as f64
            })
        }
    })
    .await;
    ferry.kill9();
    assert!(expected.len() > 100, "{} rows", expected.len());

    let letters = tokio::task::spawn_blocking({
        let bootstrap = bootstrap.clone();
        move || dead_letters(&bootstrap)
    })
    .await
    .expect("dlq reader");
    let positions: BTreeSet<(i32, i64)> = letters.iter().map(|(_, p, o, _)| (*p, *o)).collect();
    assert_eq!(
        positions, produced.malformed,
        "every malformed record, and only those"
    );
    assert!(letters
        .iter()
        .all(|(t, _, _, e)| t == TOPIC && !e.is_empty()));

    // A bounded run (`latest-offset`, `skip`) of the same changelog ends
    // FINISHED by itself with the table equal to the fold, its final
    // checkpoint reported, and the consumer group's offsets at the ends.
    let bounded_chk = dir.path().join("chk-bounded");
    let bounded = [
        "--job.sourceBoundedMode",
        "latest-offset",
        "--job.sourceErrorPolicy",
        "skip",
        "--job.sourceGroupId",
        "bounded-test",
    ];
    let a = args(
        &bootstrap,
        &master,
        "applied_bounded",
        &bounded_chk,
        &bounded,
        None,
    );
    let mut ferry = crate::run(&a, &[("FERRY_LOG", "info")]);
    let status = ferry.wait_exit(Duration::from_secs(90));
    let stderr = ferry.stderr_text();
    assert!(status.success(), "a bounded job ends by itself: {stderr}");
    assert_eq!(table_rows(&client, "applied_bounded").await, expected);
    let job: JobId = ferry.job_id().parse().expect("job id");
    let bounded_store = CheckpointStore::open_local(
        &StorageLocation::local(&bounded_chk).expect("location"),
        NonZeroUsize::MIN,
    );
    let last = bounded_store
        .latest_complete(&job)
        .await
        .expect("list")
        .checkpoint
        .expect("a final checkpoint");
    let last_path = last.location.to_string();
    assert!(
        stderr.contains("bounded end") && stderr.contains(last_path.trim_end_matches('/')),
        "the job names its final checkpoint {last_path}: {stderr}"
    );
    let (committed, ends) = tokio::task::spawn_blocking({
        let bootstrap = bootstrap.clone();
        move || group_offsets(&bootstrap, "bounded-test")
    })
    .await
    .expect("group reader");
    assert_eq!(committed, ends, "the group's offsets are at the bound");

    // The same changelog with `fail`: the job fails on the first malformed
    // record of some partition, naming where it is.
    let fail_chk = dir.path().join("chk-fail");
    let a = args(&bootstrap, &master, "applied_fail", &fail_chk, &[], None);
    let mut ferry = crate::run(&a, &[]);
    let status = ferry.wait_exit(Duration::from_secs(90));
    assert!(!status.success(), "the job fails");
    let stderr = ferry.stderr_text();
    assert!(
        produced
            .malformed
            .iter()
            .any(|(p, o)| stderr.contains(&format!(
                "record at offset {o} of partition {p} of topic '{TOPIC}'"
            ))),
        "the failure names a malformed record's position: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kudu_to_kafka_to_kudu_round_trip_copies_every_type() {
    let kudu_start = std::thread::spawn(|| {
        MiniCluster::builder()
            .tservers(1)
            .start()
            .expect("Kudu cluster")
    });
    let broker = crate::broker();
    let cluster = kudu_start.join().expect("cluster thread");
    let bootstrap = broker.bootstrap();
    let master = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    for table in ["events", "events_copy"] {
        let builder = TableBuilder::new(table, ferry_fixtures::all_types_schema())
            .add_hash_partitions(&["id"], 3, 0)
            .num_replicas(1);
        client.create_table(&builder).await.expect("create");
    }
    let workload = Workload::start_with(
        client.clone(),
        "events",
        WorkloadOptions {
            ops_per_sec: 1_000,
            seed: 12,
            first_id: 0,
            key_floor: 0,
        },
    );
    tokio::time::sleep(Duration::from_secs(2)).await;

    let dir = tempfile::tempdir().expect("tmp");
    let to_kafka: Vec<String> = [
        "--job.sourceMasterAddresses",
        &master,
        "--job.tableName",
        "events",
        "--job.checkpointsDirectory",
        &dir.path().join("chk-out").to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "300",
        "--job.sinkType",
        "kafka",
        "--job.sinkBootstrapServers",
        &bootstrap,
        "--job.sinkTopic",
        "rt.{table}",
        "--job.sinkTopicPartitions",
        "3",
        "--job.sinkDeliveryGuarantee",
        "exactly-once",
        // Its own transactional ids and progress topic: the binary's other
        // exactly-once test writes a table of the same name to the same
        // broker.
        "--job.sinkTransactionalIdPrefix",
        "ferry-round-trip",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut out = crate::run(&to_kafka, &[]);
    let from_kafka = source_args(
        &bootstrap,
        &master,
        "events_copy",
        &dir.path().join("chk-in"),
        &[
            "--job.sourceTopic",
            "rt.events",
            "--job.sourceFormat",
            "debezium-json",
        ],
        None,
    );
    // The topic exists once the first job prepared its sink.
    eventually(
        "the first job created its topic",
        Duration::from_secs(60),
        || {
            let bootstrap = bootstrap.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    let c: BaseConsumer = ClientConfig::new()
                        .set("bootstrap.servers", &bootstrap)
                        .create()
                        .expect("consumer");
                    c.fetch_metadata(Some("rt.events"), Duration::from_secs(5))
                        .map(|m| {
                            m.topics()
                                .iter()
                                .any(|t| t.error().is_none() && !t.partitions().is_empty())
                        })
                        .unwrap_or(false)
                })
                .await
                .unwrap_or(false)
            }
        },
    )
    .await;
    let mut back = crate::run(&from_kafka, &[]);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let stats = workload.stop().await;
    assert_eq!(stats.failed, 0, "{stats:?}");
    assert!(stats.deletes > 0 && stats.updates > 0, "{stats:?}");
    let expected = ferry_fixtures::read_all(&client, "events").await;
    eventually(
        "the copy equals the source",
        Duration::from_secs(90),
        || {
            let client = client.clone();
            let expected = expected.clone();
            async move { ferry_fixtures::read_all(&client, "events_copy").await == expected }
        },
    )
    .await;
    assert!(expected.len() > 500, "{} rows", expected.len());
    // Both sides count on Prometheus: the exactly-once job's records and
    // commits, the reading job's records, and no lag left.
    let produced = out.metrics_text();
    assert!(
        sample(
            &produced,
            "ferry_kafka_records_produced_total",
            &["rt.events"]
        ) >= 500.0
            && sample(
                &produced,
                "ferry_kafka_transactions_committed_total",
                &["rt.events"]
            ) >= 1.0,
        "{produced}"
    );
    // Watermarks went into the topic (in the transactions), and the
    // reading job left them out: the copy above equals the source.
    assert!(
        sample(
            &produced,
            "ferry_kafka_watermarks_written_total",
            &["rt.events"]
        ) >= 3.0,
        "{produced}"
    );
    let consumed = back.metrics_text();
    assert!(
        sample(
            &consumed,
            "ferry_kafka_records_consumed_total",
            &["rt.events"]
        ) >= 500.0,
        "{consumed}"
    );
    out.kill9();
    back.kill9();
}

/// Milliseconds since the Unix epoch, on this machine's clock.
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// The `family` sample line of the job `job` on Prometheus, if any.
fn job_sample<'a>(text: &'a str, family: &str, job: &str) -> Option<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .find(|l| l.contains(&format!("job_id=\"{job}\"")))
}

/// The value of label `name` in a sample line.
fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("{name}=\""))? + name.len() + 2;
    line[start..].split('"').next()
}

fn value(line: &str) -> f64 {
    line.rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The window ends of a Kafka source are epoch milliseconds: the job's
/// `lastEndTimestamp` is a wall-clock time close to now (not a Kafka time
/// read as a Kudu hybrid time, 1970-01-01 00:07), the table's lag is
/// seconds (not 57 years), and the enumerator's gauges name the Kafka
/// source as their operator (not `Source:_KuduSource`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kafka_sources_last_end_and_lag_are_wall_clock_times() {
    let test_started_ms = wall_ms();
    let kudu_start = std::thread::spawn(|| {
        MiniCluster::builder()
            .tservers(1)
            .start()
            .expect("Kudu cluster")
    });
    let broker = crate::broker();
    let cluster = kudu_start.join().expect("cluster thread");
    let bootstrap = broker.bootstrap();
    let master = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let schema =
        ferry_fixtures::small_schema_with(vec![ferry_fixtures::nullable("n", DataType::Int32)]);
    let builder = TableBuilder::new("lagged", schema)
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    client.create_table(&builder).await.expect("create");
    // The broker is shared: a topic of its own.
    let topic = "changes-lag";
    admin_create(&bootstrap, topic);
    let producer = producer(&bootstrap);
    let mut rng = StdRng::seed_from_u64(30);
    let mut produced = Produced::default();
    produce_to(topic, &producer, &mut produced, &mut rng, 50, 20, 0).await;

    let dir = tempfile::tempdir().expect("tmp");
    let a = source_args(
        &bootstrap,
        &master,
        "lagged",
        &dir.path().join("chk"),
        &[
            "--job.sourceTopic",
            topic,
            "--job.sourceFormat",
            "upsert-json",
        ],
        None,
    );
    let ferry = crate::run(&a, &[]);
    let expected = produced.rows.clone();
    eventually(
        "the table equals the fold of the 50 records",
        Duration::from_secs(90),
        || {
            let client = client.clone();
            let expected = expected.clone();
            async move { table_rows(&client, "lagged").await == expected }
        },
    )
    .await;

    let last_end = "flink_jobmanager_job_operator_coordinator_enumerator_lastEndTimestamp";
    let job = ferry.job_id();
    let mut text = String::new();
    eventually("a window completed", Duration::from_secs(60), || {
        text = ferry.metrics_text();
        let done = job_sample(&text, last_end, &job).is_some_and(|l| value(l) > 0.0)
            && job_sample(&text, "ferry_table_lag_seconds", &job).is_some_and(|l| value(l) >= 0.0);
        async move { done }
    })
    .await;
    let now = wall_ms();
    let end_line = job_sample(&text, last_end, &job).expect("lastEndTimestamp");
    let end_ms = value(end_line);
    assert!(
        end_ms >= (test_started_ms - 60_000) as f64 && end_ms <= (now + 300_000) as f64,
        "lastEndTimestamp {end_ms} is a wall-clock time between the test's start \
         ({test_started_ms}, less a minute) and five minutes after now ({now}): {end_line}"
    );
    assert_eq!(
        label(end_line, "operator_name"),
        Some("Source:_KafkaSource"),
        "the enumerator's gauges name the job's own source: {end_line}"
    );
    assert!(
        !text.contains("operator_name=\"Source:_KuduSource\""),
        "no operator of this Kafka job is the Kudu source:\n{text}"
    );
    let lag_line = job_sample(&text, "ferry_table_lag_seconds", &job).expect("table lag");
    let lag = value(lag_line);
    assert!(
        (0.0..120.0).contains(&lag),
        "ferry_table_lag_seconds {lag} is seconds, not years: {lag_line}"
    );
    let table_end = job_sample(&text, "ferry_table_last_end_timestamp_seconds", &job)
        .map(value)
        .expect("table last end");
    assert!(
        table_end * 1000.0 >= (test_started_ms - 60_000) as f64,
        "the table's last end {table_end} s is a wall-clock time"
    );
    // The live JSON of the web page and the drain check agree.
    let live = ferry_fixtures::http::get_json(ferry.rest(), &format!("/ferry/jobs/{job}/live"));
    let live_end = live["last_end_timestamp"]
        .as_u64()
        .expect("last_end_timestamp");
    assert!(live_end >= test_started_ms - 60_000, "{live}");
    assert!(
        live["lag_ms"].as_u64().is_some_and(|l| l < 120_000),
        "{live}"
    );
}

/// The value of `family`'s sample whose labels include every one of
/// `labels` (as `="<value>"`), or -1.
fn sample(text: &str, family: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .find(|l| labels.iter().all(|v| l.contains(&format!("=\"{v}\""))))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1.0)
}
