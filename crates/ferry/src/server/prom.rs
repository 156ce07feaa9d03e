//! The Prometheus endpoint (`metrics.port`, path `/metrics`, text format
//! 0.0.4).
//!
//! Flink-compatible families are emitted with the names Flink's Prometheus
//! reporter gives them (`flink_` + scope + `_` + metric, characters outside
//! `[a-zA-Z0-9:_]` replaced by `_`), all as gauges without `_total`, with
//! `job_id` and `job_name` labels — so the reference job's dashboards and
//! PromQL work unchanged. ferry's own counters are `ferry_*_total`; the
//! tablet servers' per-table write counters are
//! `ferry_kudu_table_rows_{inserted,upserted,updated,deleted}` gauges with
//! `cluster` and `table_name` labels. State replicas
//! (`job.stateReplicas`) are `ferry_state_replica_*` families with a
//! `replica` label (the location URI); periodic savepoints are
//! `ferry_periodic_savepoints_*`; the last REST verification is
//! `ferry_verify_*`. Each table of the job has `ferry_table_*` families
//! (window end, lag, splits, rows, schema changes, paused) labelled with
//! `table_name` (the current source name), `table_id` and `sink_table`.
//! Jobs with a Kafka side have `ferry_kafka_*` families: counters per topic
//! (label `topic`: records and bytes produced or consumed, transactions
//! committed and aborted, records skipped or dead-lettered) and gauges per
//! source partition (labels `topic`, `partition`: end offset, position,
//! consumer lag); docs/kafka.md, "Metrics".

use crate::server::registry::Registry;
use crate::server::sampler::METER_SPAN_MS;
use crate::server::view::{JobView, SINK_NAME};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::sync::Arc;

mod ferry_families;
mod throttle_families;
use ferry_families::{
    push_dr, push_ferry, push_foreign_writes, push_kafka, push_kudu_tables, push_tables,
    push_verify,
};
use throttle_families::push_throttle;

type Labels = Vec<(String, String)>;

/// Flink's logical scopes (the name is `flink_<scope>_<metric>`, the help
/// `<metric> (scope: <scope>)`).
const SCOPE_JOBMANAGER: &str = "jobmanager";
const SCOPE_JOB: &str = "jobmanager_job";
const SCOPE_ENUMERATOR: &str = "jobmanager_job_operator_coordinator_enumerator";
const SCOPE_OPERATOR: &str = "taskmanager_job_task_operator";

struct Family {
    name: String,
    help: String,
    kind: MetricType,
    samples: Vec<(Labels, f64)>,
}

/// The families of one scrape, in first-seen order.
#[derive(Default)]
struct Families(Vec<Family>);

impl Families {
    fn push(&mut self, name: String, help: String, kind: MetricType, labels: Labels, v: f64) {
        match self.0.iter_mut().find(|f| f.name == name) {
            Some(f) => f.samples.push((labels, v)),
            None => self.0.push(Family {
                name,
                help,
                kind,
                samples: vec![(labels, v)],
            }),
        }
    }

    /// A gauge named as Flink's Prometheus reporter names `metric` of `scope`.
    fn flink(&mut self, scope: &str, metric: &str, labels: Labels, v: f64) {
        self.push(
            format!("flink_{scope}_{metric}"),
            format!("{metric} (scope: {scope})"),
            MetricType::Gauge,
            labels,
            v,
        );
    }

    /// One of ferry's own families.
    fn ferry(&mut self, name: &str, help: &str, kind: MetricType, labels: Labels, v: f64) {
        self.push(format!("ferry_{name}"), help.into(), kind, labels, v);
    }
}

/// Collects every job's metrics at scrape time.
#[derive(Clone)]
pub struct FerryCollector {
    registry: Arc<Registry>,
}

impl std::fmt::Debug for FerryCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FerryCollector")
    }
}

/// A job's labels; a shard of a sharded job (`job.shards` > 1) adds
/// `shard`, so every family of it (Flink's job scope and `ferry_*`) says
/// which shard it is.
fn job_labels(v: &JobView) -> Labels {
    let mut labels: Labels = vec![
        ("job_id".into(), v.job.id.to_string()),
        ("job_name".into(), v.job.name.clone()),
    ];
    if let Some(shard) = v.job.config.shard.filter(|s| s.count > 1) {
        labels.push(("shard".into(), shard.label()));
    }
    labels
}

fn with(mut labels: Labels, extra: &[(&str, &str)]) -> Labels {
    labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    labels
}

/// Flink's label value for an operator name: `Source: KuduSource` →
/// `Source:_KuduSource`, `Source: KafkaSource` → `Source:_KafkaSource`.
pub fn flink_label(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == ':' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `flink_jobmanager_job_*`: the job-scope metrics of `GET /jobs/:id/metrics`.
fn push_job_scope(out: &mut Families, v: &JobView, labels: &Labels) {
    for (metric, value) in v.job_scope_metrics() {
        out.flink(SCOPE_JOB, metric, labels.clone(), value);
    }
}

/// The split enumerator's gauges, labelled with the job's source operator.
fn push_enumerator(out: &mut Families, v: &JobView, labels: &Labels) {
    let m = &v.metrics;
    let coord = with(
        labels.clone(),
        &[("operator_name", &flink_label(&v.source_operator()))],
    );
    for (metric, value) in [
        ("lastEndTimestamp", m.last_end_timestamp_ms),
        ("pendingCount", m.pending_count),
        ("unassignedCount", m.unassigned_count),
        ("pendingRemovalCount", m.pending_removal_count),
    ] {
        out.flink(SCOPE_ENUMERATOR, metric, coord.clone(), value as f64);
    }
}

/// Records out of the source and into the sink, totals and 60 s rates.
fn push_operators(out: &mut Families, v: &JobView, labels: &Labels) {
    let rates = v.job.sampler.rates(METER_SPAN_MS);
    let operator = |name: &str| {
        let op = flink_label(name);
        with(
            labels.clone(),
            &[
                ("task_name", &op),
                ("operator_name", &op),
                ("subtask_index", "0"),
            ],
        )
    };
    let (src, snk) = (operator(&v.source_operator()), operator(SINK_NAME));
    let m = &v.metrics;
    out.flink(
        SCOPE_OPERATOR,
        "numRecordsOut",
        src.clone(),
        m.rows_read as f64,
    );
    out.flink(
        SCOPE_OPERATOR,
        "numRecordsOutPerSecond",
        src,
        rates.records_out_per_second,
    );
    out.flink(
        SCOPE_OPERATOR,
        "numRecordsIn",
        snk.clone(),
        v.rows_written() as f64,
    );
    out.flink(
        SCOPE_OPERATOR,
        "numRecordsInPerSecond",
        snk,
        rates.records_in_per_second,
    );
}

impl FerryCollector {
    /// Collects the jobs of `registry`.
    pub fn new(registry: Arc<Registry>) -> Self {
        FerryCollector { registry }
    }

    fn families(&self) -> Vec<Family> {
        let jobs = self.registry.jobs();
        let views: Vec<JobView> = jobs.iter().map(|j| j.view()).collect();
        let mut out = Families::default();
        let running = views.iter().filter(|v| !v.is_terminal()).count();
        out.flink(SCOPE_JOBMANAGER, "numRunningJobs", vec![], running as f64);
        if let Some((standing_by, generation)) = self.registry.ha.get() {
            out.ferry(
                "ha_standing_by",
                "1 while this process stands by for the job's lease (fenced off, or waiting for the holder to go silent), 0 while it holds it",
                MetricType::Gauge,
                vec![],
                f64::from(u8::from(standing_by)),
            );
            out.ferry(
                "ha_generation",
                "The lease generation this process holds (0 while it stands by)",
                MetricType::Gauge,
                vec![],
                generation as f64,
            );
        }
        for v in &views {
            let labels = job_labels(v);
            push_job_scope(&mut out, v, &labels);
            push_enumerator(&mut out, v, &labels);
            push_operators(&mut out, v, &labels);
            push_ferry(&mut out, v, &labels);
            push_dr(&mut out, v, &labels);
            push_tables(&mut out, v, &labels);
            push_kudu_tables(&mut out, v, &labels);
            push_foreign_writes(&mut out, v, &labels);
            push_kafka(&mut out, v, &labels);
            push_verify(&mut out, v, &labels);
            push_throttle(&mut out, v, &labels);
        }
        out.0
    }
}

/// Writes `families` in the exposition format (counters get `_total`).
fn encode_families(
    families: Vec<Family>,
    mut encoder: DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    for fam in families {
        let mut metric = encoder.encode_descriptor(&fam.name, &fam.help, None, fam.kind)?;
        for (labels, value) in &fam.samples {
            let family = metric.encode_family(labels)?;
            match fam.kind {
                MetricType::Counter => {
                    prometheus_client::metrics::counter::ConstCounter::new(*value)
                        .encode(family)?;
                }
                _ => ConstGauge::new(*value).encode(family)?,
            }
        }
    }
    Ok(())
}

impl Collector for FerryCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        encode_families(self.families(), encoder)
    }
}

/// Renders the whole exposition.
pub fn render(registry: &prometheus_client::registry::Registry) -> String {
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, registry) {
        tracing::warn!(error = %e, "cannot encode metrics");
    }
    out
}

/// A prometheus-client registry holding the ferry collector.
pub fn new_registry(jobs: Arc<Registry>) -> prometheus_client::registry::Registry {
    let mut r = prometheus_client::registry::Registry::default();
    r.register_collector(Box::new(FerryCollector::new(jobs)));
    r
}

/// The metrics router: `/metrics` (and `/` for convenience).
pub fn router(registry: Arc<prometheus_client::registry::Registry>) -> axum::Router {
    use axum::http::header;
    use axum::routing::get;
    let handler = move || {
        let registry = registry.clone();
        async move {
            (
                [(
                    header::CONTENT_TYPE,
                    prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                )],
                render(&registry),
            )
        }
    };
    axum::Router::new()
        .route("/metrics", get(handler.clone()))
        .route("/", get(handler))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_families::push_kafka_snapshot;
    use ferry_kafka::metrics::KafkaSnapshot;
    use ferry_kafka::metrics::{PartitionLag, TopicCounters, TopicSnapshot};

    /// A collector rendering one Kafka snapshot, as a job's would be.
    #[derive(Debug)]
    struct Kafka(KafkaSnapshot);

    impl Collector for Kafka {
        fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let mut out = Families::default();
            let labels = vec![
                ("job_id".to_string(), "j1".to_string()),
                ("job_name".to_string(), "orders".to_string()),
            ];
            push_kafka_snapshot(&mut out, &self.0, &labels);
            encode_families(out.0, encoder)
        }
    }

    fn exposition(s: KafkaSnapshot) -> String {
        let mut r = prometheus_client::registry::Registry::default();
        r.register_collector(Box::new(Kafka(s)));
        render(&r)
    }

    #[test]
    fn kafka_families_per_topic_and_partition() {
        let text = exposition(KafkaSnapshot {
            topics: vec![
                TopicSnapshot {
                    topic: "cdc.orders".into(),
                    counters: TopicCounters {
                        records_produced: 5,
                        bytes_produced: 50,
                        transactions_committed: 2,
                        transactions_aborted: 1,
                        ..Default::default()
                    },
                },
                TopicSnapshot {
                    topic: "in".into(),
                    counters: TopicCounters {
                        records_consumed: 7,
                        bytes_consumed: 70,
                        records_skipped: 3,
                        records_dead_lettered: 4,
                        ..Default::default()
                    },
                },
            ],
            partitions: vec![PartitionLag {
                topic: "in".into(),
                partition: 2,
                end_offset: 25,
                position: 20,
                lag: 5,
            }],
        });
        let out = r#"job_id="j1",job_name="orders",topic="cdc.orders""#;
        let inp = r#"job_id="j1",job_name="orders",topic="in""#;
        let part = r#"job_id="j1",job_name="orders",topic="in",partition="2""#;
        for line in [
            format!("ferry_kafka_records_produced_total{{{out}}} 5.0"),
            format!("ferry_kafka_bytes_produced_total{{{out}}} 50.0"),
            format!("ferry_kafka_transactions_committed_total{{{out}}} 2.0"),
            format!("ferry_kafka_transactions_aborted_total{{{out}}} 1.0"),
            format!("ferry_kafka_records_consumed_total{{{out}}} 0.0"),
            format!("ferry_kafka_records_consumed_total{{{inp}}} 7.0"),
            format!("ferry_kafka_bytes_consumed_total{{{inp}}} 70.0"),
            format!("ferry_kafka_records_skipped_total{{{inp}}} 3.0"),
            format!("ferry_kafka_records_dead_lettered_total{{{inp}}} 4.0"),
            format!("ferry_kafka_consumer_lag{{{part}}} 5.0"),
            format!("ferry_kafka_partition_end_offset{{{part}}} 25.0"),
            format!("ferry_kafka_partition_position{{{part}}} 20.0"),
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        assert!(text.contains("# TYPE ferry_kafka_records_produced_total counter"));
        assert!(text.contains("# TYPE ferry_kafka_consumer_lag gauge"));
        assert!(!text.contains("_total_total"), "{text}");
        // Counters are pushed without `_total` (the encoder adds it); one
        // descriptor per family, whatever the number of topics.
        assert_eq!(
            text.matches("# TYPE ferry_kafka_records_consumed_total ")
                .count(),
            1
        );
    }

    #[test]
    fn an_empty_kafka_snapshot_emits_nothing() {
        let text = exposition(KafkaSnapshot::default());
        assert!(!text.contains("ferry_kafka_"), "{text}");
    }
}
