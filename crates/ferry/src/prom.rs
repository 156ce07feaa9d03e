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
//! `cluster` and `table_name` labels.

use crate::registry::{now_ms, JobEntry, Registry};
use crate::sampler::METER_SPAN_MS;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::sync::Arc;

type Labels = Vec<(String, String)>;

struct Family {
    name: &'static str,
    help: String,
    kind: MetricType,
    samples: Vec<(Labels, f64)>,
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

fn job_labels(job: &JobEntry) -> Labels {
    vec![
        ("job_id".into(), job.id.to_string()),
        ("job_name".into(), job.name.clone()),
    ]
}

fn with(mut labels: Labels, extra: &[(&str, &str)]) -> Labels {
    labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    labels
}

/// Flink's label value for an operator name: `Source: KuduSource` →
/// `Source:_KuduSource`.
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

impl FerryCollector {
    pub fn new(registry: Arc<Registry>) -> Self {
        FerryCollector { registry }
    }

    fn families(&self) -> Vec<Family> {
        let jobs = self.registry.jobs();
        let mut fams: Vec<Family> = Vec::new();
        let mut push =
            |name: &'static str, help: String, kind: MetricType, labels: Labels, v: f64| match fams
                .iter_mut()
                .find(|f| f.name == name)
            {
                Some(f) => f.samples.push((labels, v)),
                None => fams.push(Family {
                    name,
                    help,
                    kind,
                    samples: vec![(labels, v)],
                }),
            };
        let gauge = MetricType::Gauge;
        let running = jobs.iter().filter(|j| !j.status().is_terminal()).count();
        push(
            "flink_jobmanager_numRunningJobs",
            "numRunningJobs (scope: jobmanager)".into(),
            gauge,
            vec![],
            running as f64,
        );
        let source_op = flink_label(crate::rest::SOURCE_NAME);
        let sink_op = flink_label(crate::rest::SINK_NAME);
        for job in &jobs {
            let labels = job_labels(job);
            let m = job.handle.metrics().snapshot();
            for (name, value) in crate::rest::job_scope_metrics(job) {
                let Some(full) = jobmanager_job_name(name) else {
                    continue;
                };
                push(
                    full,
                    format!("{name} (scope: jobmanager_job)"),
                    gauge,
                    labels.clone(),
                    value,
                );
            }
            let coord = with(labels.clone(), &[("operator_name", &source_op)]);
            for (name, help, value) in [
                (
                    "flink_jobmanager_job_operator_coordinator_enumerator_lastEndTimestamp",
                    "lastEndTimestamp",
                    m.last_end_timestamp_ms as f64,
                ),
                (
                    "flink_jobmanager_job_operator_coordinator_enumerator_pendingCount",
                    "pendingCount",
                    m.pending_count as f64,
                ),
                (
                    "flink_jobmanager_job_operator_coordinator_enumerator_unassignedCount",
                    "unassignedCount",
                    m.unassigned_count as f64,
                ),
                (
                    "flink_jobmanager_job_operator_coordinator_enumerator_pendingRemovalCount",
                    "pendingRemovalCount",
                    m.pending_removal_count as f64,
                ),
            ] {
                push(
                    name,
                    format!("{help} (scope: jobmanager_job_operator_coordinator_enumerator)"),
                    gauge,
                    coord.clone(),
                    value,
                );
            }
            let rates = job.sampler.rates(METER_SPAN_MS);
            let src = with(
                labels.clone(),
                &[
                    ("task_name", &source_op),
                    ("operator_name", &source_op),
                    ("subtask_index", "0"),
                ],
            );
            let snk = with(
                labels.clone(),
                &[
                    ("task_name", &sink_op),
                    ("operator_name", &sink_op),
                    ("subtask_index", "0"),
                ],
            );
            let op_help = |n: &str| format!("{n} (scope: taskmanager_job_task_operator)");
            push(
                "flink_taskmanager_job_task_operator_numRecordsOut",
                op_help("numRecordsOut"),
                gauge,
                src.clone(),
                m.rows_read as f64,
            );
            push(
                "flink_taskmanager_job_task_operator_numRecordsOutPerSecond",
                op_help("numRecordsOutPerSecond"),
                gauge,
                src,
                rates.records_out_per_second,
            );
            let written = (m.rows_upserted + m.rows_deleted) as f64;
            push(
                "flink_taskmanager_job_task_operator_numRecordsIn",
                op_help("numRecordsIn"),
                gauge,
                snk.clone(),
                written,
            );
            push(
                "flink_taskmanager_job_task_operator_numRecordsInPerSecond",
                op_help("numRecordsInPerSecond"),
                gauge,
                snk,
                rates.records_in_per_second,
            );

            let counter = MetricType::Counter;
            for (name, help, value) in [
                (
                    "ferry_rows_read",
                    "Rows read from the source table",
                    m.rows_read,
                ),
                (
                    "ferry_rows_upserted",
                    "Rows upserted into the sink table",
                    m.rows_upserted,
                ),
                (
                    "ferry_rows_deleted",
                    "Rows deleted from the sink table",
                    m.rows_deleted,
                ),
                (
                    "ferry_bytes_read",
                    "Bytes of row data read from the source",
                    m.bytes_read,
                ),
                (
                    "ferry_windows_completed",
                    "Windows (snapshot or diff) completed",
                    m.windows_completed,
                ),
                (
                    "ferry_snapshot_windows_completed",
                    "Full-snapshot windows completed",
                    m.snapshot_windows,
                ),
                (
                    "ferry_checkpoints_completed",
                    "Checkpoints completed",
                    m.checkpoints_completed,
                ),
                (
                    "ferry_checkpoints_failed",
                    "Checkpoints failed",
                    m.checkpoints_failed,
                ),
                ("ferry_restarts", "Transient failures retried", m.restarts),
            ] {
                push(name, help.into(), counter, labels.clone(), value as f64);
            }
            let now = now_ms();
            let lag = if m.last_end_timestamp_ms > 0 {
                now.saturating_sub(m.last_end_timestamp_ms) as f64
            } else {
                -1.0
            };
            push(
                "ferry_replication_lag_ms",
                "now - lastEndTimestamp in ms (-1 until the snapshot completes)".into(),
                gauge,
                labels.clone(),
                lag,
            );
            push(
                "ferry_last_window_duration_ms",
                "Duration of the last completed window in ms".into(),
                gauge,
                labels.clone(),
                m.last_window_duration_ms as f64,
            );
            push(
                "ferry_job_running",
                "1 while the job runs, 0 once it ended".into(),
                gauge,
                labels.clone(),
                if job.status().is_terminal() { 0.0 } else { 1.0 },
            );
            for t in job.activity.snapshot() {
                let Some(c) = t.counters else { continue };
                let l = with(
                    labels.clone(),
                    &[("cluster", t.cluster), ("table_name", &t.table_name)],
                );
                for (suffix, value) in c.named() {
                    let name = match suffix {
                        "inserted" => "ferry_kudu_table_rows_inserted",
                        "upserted" => "ferry_kudu_table_rows_upserted",
                        "updated" => "ferry_kudu_table_rows_updated",
                        _ => "ferry_kudu_table_rows_deleted",
                    };
                    push(
                        name,
                        format!("Kudu tablet counter rows_{suffix} of the table (each tablet once, highest replica value), from the tablet servers' /metrics"),
                        gauge,
                        l.clone(),
                        value as f64,
                    );
                }
            }
        }
        fams
    }
}

fn jobmanager_job_name(metric: &str) -> Option<&'static str> {
    Some(match metric {
        "uptime" => "flink_jobmanager_job_uptime",
        "downtime" => "flink_jobmanager_job_downtime",
        "numRestarts" => "flink_jobmanager_job_numRestarts",
        "fullRestarts" => "flink_jobmanager_job_fullRestarts",
        "lastCheckpointDuration" => "flink_jobmanager_job_lastCheckpointDuration",
        "lastCheckpointSize" => "flink_jobmanager_job_lastCheckpointSize",
        "lastCheckpointFullSize" => "flink_jobmanager_job_lastCheckpointFullSize",
        "numberOfCompletedCheckpoints" => "flink_jobmanager_job_numberOfCompletedCheckpoints",
        "numberOfFailedCheckpoints" => "flink_jobmanager_job_numberOfFailedCheckpoints",
        "numberOfInProgressCheckpoints" => "flink_jobmanager_job_numberOfInProgressCheckpoints",
        "totalNumberOfCheckpoints" => "flink_jobmanager_job_totalNumberOfCheckpoints",
        "lastCheckpointRestoreTimestamp" => "flink_jobmanager_job_lastCheckpointRestoreTimestamp",
        _ => return None,
    })
}

impl Collector for FerryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for fam in self.families() {
            let mut metric = encoder.encode_descriptor(fam.name, &fam.help, None, fam.kind)?;
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
