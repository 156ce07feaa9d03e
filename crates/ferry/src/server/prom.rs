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
use ferry_kafka::metrics::KafkaSnapshot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::sync::Arc;

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

fn job_labels(v: &JobView) -> Labels {
    vec![
        ("job_id".into(), v.job.id.to_string()),
        ("job_name".into(), v.job.name.clone()),
    ]
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

/// ferry's own counters (`ferry_*_total`) and gauges.
fn push_ferry(out: &mut Families, v: &JobView, labels: &Labels) {
    let m = &v.metrics;
    for (name, help, value) in [
        ("rows_read", "Rows read from the source table", m.rows_read),
        (
            "rows_upserted",
            "Rows upserted into the sink table",
            m.rows_upserted,
        ),
        (
            "rows_deleted",
            "Rows deleted from the sink table",
            m.rows_deleted,
        ),
        (
            "bytes_read",
            "Bytes of row data read from the source",
            m.bytes_read,
        ),
        (
            "windows_completed",
            "Windows (snapshot or diff) completed",
            m.windows_completed,
        ),
        (
            "snapshot_windows_completed",
            "Full-snapshot windows completed",
            m.snapshot_windows,
        ),
        (
            "checkpoints_completed",
            "Checkpoints completed",
            m.checkpoints_completed,
        ),
        (
            "checkpoints_failed",
            "Checkpoints failed",
            m.checkpoints_failed,
        ),
        (
            "restarts",
            "Restarts after transient failures",
            v.num_restarts(),
        ),
    ] {
        out.ferry(
            name,
            help,
            MetricType::Counter,
            labels.clone(),
            value as f64,
        );
    }
    let gauge = MetricType::Gauge;
    out.ferry(
        "replication_lag_ms",
        "now - lastEndTimestamp in ms (-1 until the snapshot completes)",
        gauge,
        labels.clone(),
        v.lag_ms().map_or(-1.0, |l| l as f64),
    );
    out.ferry(
        "last_window_duration_ms",
        "Duration of the last completed window in ms",
        gauge,
        labels.clone(),
        m.last_window_duration_ms as f64,
    );
    out.ferry(
        "job_running",
        "1 until the job ended (also while it restarts), 0 once it ended",
        gauge,
        labels.clone(),
        if v.is_terminal() { 0.0 } else { 1.0 },
    );
    out.ferry(
        "job_restarting",
        "1 while the job waits to run again after a transient failure (RESTARTING)",
        gauge,
        labels.clone(),
        if v.is_restarting() { 1.0 } else { 0.0 },
    );
}

/// Periodic savepoints and state replicas.
fn push_dr(out: &mut Families, v: &JobView, labels: &Labels) {
    let m = &v.metrics;
    let counter = MetricType::Counter;
    let gauge = MetricType::Gauge;
    out.ferry(
        "periodic_savepoints",
        "Periodic savepoints written (job.periodicSavepointInterval)",
        counter,
        labels.clone(),
        m.periodic_savepoints_completed as f64,
    );
    out.ferry(
        "periodic_savepoints_failed",
        "Periodic savepoints that failed (the job went on)",
        counter,
        labels.clone(),
        m.periodic_savepoints_failed as f64,
    );
    out.ferry(
        "last_periodic_savepoint_timestamp_ms",
        "When the last periodic savepoint completed, epoch ms (0 = none yet)",
        gauge,
        labels.clone(),
        m.last_periodic_savepoint_ms as f64,
    );
    for r in &v.replicas {
        let l = with(labels.clone(), &[("replica", &r.location)]);
        out.ferry(
            "state_replica_lag_seconds",
            "Seconds between a state completing on the primary and on the replica; while behind, age of the oldest state not yet copied",
            gauge,
            l.clone(),
            r.lag_ms as f64 / 1000.0,
        );
        out.ferry(
            "state_replica_behind",
            "1 while a completed state waits to be copied to the replica",
            gauge,
            l.clone(),
            if r.behind { 1.0 } else { 0.0 },
        );
        out.ferry(
            "state_replica_last_success_timestamp_ms",
            "When a copy to the replica last succeeded, epoch ms (0 = never)",
            gauge,
            l.clone(),
            r.last_success_ms as f64,
        );
        out.ferry(
            "state_replica_failures",
            "Failed copy attempts to the replica",
            counter,
            l.clone(),
            r.failures as f64,
        );
        out.ferry(
            "state_replica_copies",
            "States (checkpoints and savepoints) copied to the replica",
            counter,
            l,
            r.states_copied as f64,
        );
    }
}

/// `ferry_table_*`: each table of the job, labelled `table_name` (the
/// source table's current name), `table_id` and `sink_table`.
fn push_tables(out: &mut Families, v: &JobView, labels: &Labels) {
    let gauge = MetricType::Gauge;
    let counter = MetricType::Counter;
    for t in &v.tables {
        let l = with(
            labels.clone(),
            &[
                ("table_name", &t.table_name),
                ("table_id", t.table_id.as_str()),
                ("sink_table", &t.sink_table),
            ],
        );
        let end_ms = t.last_end_timestamp_ms;
        out.ferry(
            "table_last_end_timestamp_seconds",
            "End of the table's last completed window (everything before it is in the sink), seconds since the epoch; 0 until its snapshot completes",
            gauge,
            l.clone(),
            end_ms as f64 / 1000.0,
        );
        out.ferry(
            "table_lag_seconds",
            "now - the table's last window end in seconds (-1 until its snapshot completes)",
            gauge,
            l.clone(),
            if end_ms == 0 {
                -1.0
            } else {
                v.now_ms.saturating_sub(end_ms) as f64 / 1000.0
            },
        );
        for (name, help, value) in [
            (
                "table_pending_count",
                "Splits of the table's open window being read",
                t.pending_count,
            ),
            (
                "table_unassigned_count",
                "Splits of the table's open window not yet handed out",
                t.unassigned_count,
            ),
        ] {
            out.ferry(name, help, gauge, l.clone(), value as f64);
        }
        out.ferry(
            "table_paused",
            "1 while the table is paused after a failure of its own (the job's other tables go on)",
            gauge,
            l.clone(),
            if t.paused.is_some() { 1.0 } else { 0.0 },
        );
        for (name, help, value) in [
            ("table_rows_read", "Rows read from the table", t.rows_read),
            (
                "table_rows_upserted",
                "Rows of the table upserted into its sink",
                t.rows_upserted,
            ),
            (
                "table_rows_deleted",
                "Rows of the table deleted from its sink",
                t.rows_deleted,
            ),
            (
                "table_windows_completed",
                "Windows of the table completed since the job started",
                t.windows_completed,
            ),
            (
                "table_schema_changes",
                "Source schema changes applied to the table's sink since the job started",
                t.schema_changes,
            ),
            (
                "table_tablet_scans_skipped",
                "Tablet scans left out of diff windows because the tablet was proven unchanged",
                t.tablet_scans_skipped,
            ),
        ] {
            out.ferry(name, help, counter, l.clone(), value as f64);
        }
    }
}

/// `ferry_verify_*`: the last verification run through the REST API
/// (absent until one finished).
fn push_verify(out: &mut Families, v: &JobView, labels: &Labels) {
    let Some(last) = v.job.verify_live() else {
        return;
    };
    let Some(result) = last.last_result else {
        return;
    };
    let gauge = MetricType::Gauge;
    for (name, help, value) in [
        (
            "verify_last_result",
            "Last verification of the copy: 1 equal, 0 differs, -1 failed",
            f64::from(result),
        ),
        (
            "verify_rows_compared",
            "Source rows compared by the last verification",
            last.rows_compared as f64,
        ),
        (
            "verify_rows_differing",
            "Rows that differed (missing, extra or differing) in the last verification",
            last.rows_differing as f64,
        ),
        (
            "verify_last_timestamp_seconds",
            "When the last verification finished, seconds since the epoch",
            last.finished_at as f64 / 1000.0,
        ),
    ] {
        out.ferry(name, help, gauge, labels.clone(), value);
    }
}

/// `ferry_kudu_table_rows_*`: the tablet servers' write counters.
fn push_kudu_tables(out: &mut Families, v: &JobView, labels: &Labels) {
    for t in v.job.activity.snapshot() {
        let Some(c) = t.counters else { continue };
        let l = with(
            labels.clone(),
            &[("cluster", &t.cluster), ("table_name", &t.table_name)],
        );
        for (suffix, value) in c.named() {
            out.ferry(
                &format!("kudu_table_rows_{suffix}"),
                &format!("Kudu tablet counter rows_{suffix} of the table (each tablet once, highest replica value), from the tablet servers' /metrics"),
                MetricType::Gauge,
                l.clone(),
                value as f64,
            );
        }
    }
}

/// `ferry_kafka_*`: the job's Kafka connectors, if it has any.
fn push_kafka(out: &mut Families, v: &JobView, labels: &Labels) {
    if let Some(kafka) = &v.job.kafka {
        push_kafka_snapshot(out, &kafka.snapshot(), labels);
    }
}

/// The `ferry_kafka_*` families of one snapshot (apart from
/// [`push_kafka`] so that tests can render a snapshot built by hand).
fn push_kafka_snapshot(out: &mut Families, s: &KafkaSnapshot, labels: &Labels) {
    let counter = MetricType::Counter;
    let gauge = MetricType::Gauge;
    for t in &s.topics {
        let l = with(labels.clone(), &[("topic", &t.topic)]);
        let c = &t.counters;
        for (name, help, value) in [
            (
                "kafka_records_produced",
                "Records sent to the topic (acknowledged by the brokers, except with delivery none)",
                c.records_produced,
            ),
            (
                "kafka_bytes_produced",
                "Key and value bytes of the records sent to the topic",
                c.bytes_produced,
            ),
            (
                "kafka_records_consumed",
                "Records read from the topic",
                c.records_consumed,
            ),
            (
                "kafka_bytes_consumed",
                "Key and value bytes of the records read from the topic",
                c.bytes_consumed,
            ),
            (
                "kafka_transactions_committed",
                "Kafka transactions committed for the topic (exactly-once: one per checkpoint and savepoint)",
                c.transactions_committed,
            ),
            (
                "kafka_transactions_aborted",
                "Kafka transactions for the topic this process abandoned after a failure and aborted (a predecessor's transaction aborted at start is not counted)",
                c.transactions_aborted,
            ),
            (
                "kafka_records_skipped",
                "Records of the topic set aside by job.sourceErrorPolicy=skip",
                c.records_skipped,
            ),
            (
                "kafka_records_dead_lettered",
                "Records of the topic sent to the dead-letter topic",
                c.records_dead_lettered,
            ),
        ] {
            out.ferry(name, help, counter, l.clone(), value as f64);
        }
    }
    for p in &s.partitions {
        let partition = p.partition.to_string();
        let l = with(
            labels.clone(),
            &[("topic", &p.topic), ("partition", &partition)],
        );
        out.ferry(
            "kafka_consumer_lag",
            "Records between the partition's end offset when the last window opened and the next offset the job reads",
            gauge,
            l.clone(),
            p.lag as f64,
        );
        out.ferry(
            "kafka_partition_end_offset",
            "The partition's end offset (high watermark) when the job's last window opened",
            gauge,
            l.clone(),
            p.end_offset as f64,
        );
        out.ferry(
            "kafka_partition_position",
            "The next offset the job reads from the partition",
            gauge,
            l,
            p.position as f64,
        );
    }
}

/// The write guard: `ferry_sink_foreign_writes_total` (rows written to
/// the sink table beyond ferry's own) and `ferry_sink_foreign_writes_suspected`
/// (1 when that rose within the last polls).
fn push_foreign_writes(out: &mut Families, v: &JobView, labels: &Labels) {
    if !v.job.activity.enabled() {
        return;
    }
    let f = v.job.activity.foreign_writes();
    let l = with(labels.clone(), &[("table_name", &v.job.sink_table_name())]);
    out.ferry(
        "sink_foreign_writes",
        "Rows written to the sink table by others than ferry (tablet server write counters beyond the rows ferry wrote), since this process started watching",
        MetricType::Counter,
        l.clone(),
        f.total as f64,
    );
    out.ferry(
        "sink_foreign_writes_suspected",
        "1 when rows written to the sink table by others than ferry were seen in the last 30 polls of the tablet servers",
        MetricType::Gauge,
        l,
        if f.suspected { 1.0 } else { 0.0 },
    );
}

impl FerryCollector {
    pub fn new(registry: Arc<Registry>) -> Self {
        FerryCollector { registry }
    }

    fn families(&self) -> Vec<Family> {
        let jobs = self.registry.jobs();
        let views: Vec<JobView> = jobs.iter().map(|j| j.view()).collect();
        let mut out = Families::default();
        let running = views.iter().filter(|v| !v.is_terminal()).count();
        out.flink(SCOPE_JOBMANAGER, "numRunningJobs", vec![], running as f64);
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
