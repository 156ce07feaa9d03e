//! ferry's own Prometheus families (`ferry_*`): the job's counters and
//! gauges, periodic savepoints and state replicas, each table's window end,
//! lag and rows, the last verification, the tablet servers' per-table write
//! counters, foreign writes and the Kafka connectors.

use super::{with, Families, Labels};
use crate::server::view::JobView;
use ferry_engine::config::HISTORY_MAX_AGE_SEC;
use ferry_engine::connector::Source;
use ferry_engine::status::TableSnapshot;
use ferry_kafka::metrics::KafkaSnapshot;
use prometheus_client::metrics::MetricType;

/// ferry's own counters (`ferry_*_total`) and gauges.
pub(super) fn push_ferry(out: &mut Families, v: &JobView, labels: &Labels) {
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
    push_ferry_gauges(out, v, labels);
}

/// ferry's own job gauges: lag, last window, running, restarting.
fn push_ferry_gauges(out: &mut Families, v: &JobView, labels: &Labels) {
    let m = &v.metrics;
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
    if let Some(ms) = v.job.takeover_ms() {
        out.ferry(
            "ha_takeover_ms",
            "The takeover that started this job (a standby's, or a shard's on a worker): ms from the last renewal seen of the lost lease to the first window completed",
            gauge,
            labels.clone(),
            ms as f64,
        );
    }
}

/// Periodic savepoints and state replicas.
pub(super) fn push_dr(out: &mut Families, v: &JobView, labels: &Labels) {
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
pub(super) fn push_tables(out: &mut Families, v: &JobView, labels: &Labels) {
    for t in &v.tables {
        let l = with(
            labels.clone(),
            &[
                ("table_name", &t.table_name),
                ("table_id", t.table_id.as_str()),
                ("sink_table", &t.sink_table),
            ],
        );
        push_table_gauges(out, v, t, &l);
        push_table_counters(out, t, &l);
        push_table_verify(out, t, &l);
    }
}

/// `ferry_table_verify_*`: continuous verify of the table
/// (`job.verifyInterval`), once it has run.
fn push_table_verify(out: &mut Families, t: &TableSnapshot, l: &Labels) {
    let v = &t.verify;
    if v.runs + v.failures == 0 {
        return;
    }
    let (gauge, counter) = (MetricType::Gauge, MetricType::Counter);
    for (name, help, kind, value) in [
        (
            "table_verify_last_cut_seconds",
            "Source instant of the table's last verified cut (its sink held exactly the source as of then), seconds since the epoch",
            gauge,
            v.last_cut_ms as f64 / 1000.0,
        ),
        (
            "table_verify_rows_compared",
            "Source rows compared by the table's last continuous verification",
            gauge,
            v.last_rows_compared as f64,
        ),
        (
            "table_verify_differences",
            "Rows that differed (missing, extra or differing) in the table's last continuous verification",
            gauge,
            v.last_differences as f64,
        ),
        (
            "table_verify_differences_found",
            "Rows found differing by continuous verify, all verifications of the table",
            counter,
            v.differences_total as f64,
        ),
        (
            "table_verify_repaired",
            "Sink rows written or deleted by continuous verify's repairs (job.verifyRepair)",
            counter,
            v.repaired_total as f64,
        ),
        (
            "table_verify_runs",
            "Continuous verifications of the table that finished",
            counter,
            v.runs as f64,
        ),
        (
            "table_verify_failures",
            "Continuous verifications of the table that failed (tried again at its next turn)",
            counter,
            v.failures as f64,
        ),
    ] {
        out.ferry(name, help, kind, l.clone(), value);
    }
}

/// One table's gauges: window end, lag, splits, paused.
fn push_table_gauges(out: &mut Families, v: &JobView, t: &TableSnapshot, l: &Labels) {
    let gauge = MetricType::Gauge;
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
    if let Some(headroom) = history_headroom_s(v, end_ms) {
        out.ferry(
            "table_history_headroom_seconds",
            "How long the table's next diff window can still start where the last one ended: the source's history retention (reader.historyMaxAgeSec) - (now - the last window end); below 0 the tablets are re-copied (reader.recopyExpiredTablets) or the table stops",
            gauge,
            l.clone(),
            headroom,
        );
    }
    out.ferry(
        "table_window_interval_seconds",
        "Time from the table's last window opening to its next one may open: job.discoveryIntervalSeconds, or longer while the source budget (reader.diffScanBudget) paces the table, never past reader.maxLag",
        gauge,
        l.clone(),
        t.window_interval_ms as f64 / 1000.0,
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
}

/// Seconds of Kudu source history left after the table's last window end
/// (`None` for other sources, and until its snapshot completes).
fn history_headroom_s(v: &JobView, end_ms: u64) -> Option<f64> {
    if end_ms == 0 || v.job.source_name != ferry_kudu::KuduSource::NAME {
        return None;
    }
    let retention = v.job.config.reader.keys.get(&HISTORY_MAX_AGE_SEC).ok()?;
    let lag_s = v.now_ms.saturating_sub(end_ms) as f64 / 1000.0;
    Some(retention.as_secs_f64() - lag_s)
}

/// One table's counters: rows, windows, schema changes, skipped scans.
fn push_table_counters(out: &mut Families, t: &TableSnapshot, l: &Labels) {
    let counter = MetricType::Counter;
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
        (
            "table_rows_recreated",
            "Rows of the table deleted from its sink and written again because the source re-created them with new immutable cells",
            t.rows_recreated,
        ),
        (
            "table_tablets_recopied",
            "Tablets of the table copied again because a diff window started before their history (reader.recopyExpiredTablets)",
            t.tablets_recopied,
        ),
    ] {
        out.ferry(name, help, counter, l.clone(), value as f64);
    }
}

/// `ferry_verify_*`: the last verification run through the REST API
/// (absent until one finished).
pub(super) fn push_verify(out: &mut Families, v: &JobView, labels: &Labels) {
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
pub(super) fn push_kudu_tables(out: &mut Families, v: &JobView, labels: &Labels) {
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
pub(super) fn push_kafka(out: &mut Families, v: &JobView, labels: &Labels) {
    if let Some(kafka) = &v.job.kafka {
        push_kafka_snapshot(out, &kafka.snapshot(), labels);
    }
}

/// The `ferry_kafka_*` families of one snapshot (apart from
/// [`push_kafka`] so that tests can render a snapshot built by hand).
// Long on purpose: one flat table of the topic families, name by name.
pub(super) fn push_kafka_snapshot(out: &mut Families, s: &KafkaSnapshot, labels: &Labels) {
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
            (
                "kafka_watermarks_written",
                "Watermark records written to the topic's partitions (job.sinkWatermarks)",
                c.watermarks_written,
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
pub(super) fn push_foreign_writes(out: &mut Families, v: &JobView, labels: &Labels) {
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
