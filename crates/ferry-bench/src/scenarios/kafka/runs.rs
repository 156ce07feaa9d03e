//! The four measured runs of the `kafka` scenario: (a) ferry Kudu →
//! Kafka, (b) the consumer perf test, (c) ferry Kafka → Kudu, (d) the
//! producer perf test; each returns one [`Run`].

use super::tools::{parse_consumer, parse_producer};
use super::{
    series_to_kafka, to_kafka_topic, Env, Guarantee, ProducerTest, Run, CHECKPOINT_MS,
    FINISH_GRACE, SERIES_CONSUMER, SERIES_FROM_KAFKA, TABLE,
};
use crate::data;
use crate::ferry::Ferry;
use crate::kudu::{http_get, tail};
use crate::report::Report;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The first sample of each of `names` on ferry's Prometheus endpoint (one
/// scrape); names this build does not export are missing.
async fn metrics(ferry: &Ferry, names: &[&str]) -> BTreeMap<String, f64> {
    let mut found = BTreeMap::new();
    let Some(addr) = ferry.metrics_addr.as_deref() else {
        return found;
    };
    let Ok(body) = http_get(addr, "/metrics").await else {
        return found;
    };
    for name in names {
        let value = body
            .lines()
            .find(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with([' ', '{']))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok());
        if let Some(v) = value {
            found.insert(name.to_string(), v);
        }
    }
    found
}

const ROWS_UPSERTED: &str = "ferry_rows_upserted_total";
const ROWS_DELETED: &str = "ferry_rows_deleted_total";

/// ferry's row and Kafka counters (the Kafka ones where this build has them).
async fn counters(ferry: &Ferry) -> BTreeMap<String, f64> {
    metrics(
        ferry,
        &[
            "ferry_kafka_records_produced_total",
            "ferry_kafka_bytes_produced_total",
            "ferry_kafka_records_consumed_total",
            "ferry_kafka_bytes_consumed_total",
            "ferry_kafka_transactions_committed_total",
            "ferry_rows_read_total",
            ROWS_UPSERTED,
            ROWS_DELETED,
        ],
    )
    .await
}

/// (a) Kudu → Kafka: the snapshot of the source table into a new topic.
pub(super) async fn to_kafka(
    e: &Env<'_>,
    g: Guarantee,
    round: usize,
    report: &mut Report,
) -> Result<Run> {
    let topic = to_kafka_topic(g, round);
    let label = format!("to-kafka-{}-{round}", g.tag());
    let mut o = e.ferry_options(TABLE, &label);
    o.sink_masters = String::new();
    // One window: the snapshot.
    o.discovery_s = Some(600);
    let mut kafka: Vec<String> = [
        ("--job.sinkType", "kafka".to_string()),
        ("--job.sinkBootstrapServers", e.broker.bootstrap.clone()),
        ("--job.sinkTopic", topic.clone()),
        ("--job.sinkFormat", e.p.format.key().into()),
        ("--job.sinkDeliveryGuarantee", g.key().into()),
        ("--job.sinkTopicPartitions", e.p.partitions.to_string()),
        ("--job.sinkTopicReplicationFactor", "1".into()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_string(), v])
    .collect();
    if g == Guarantee::ExactlyOnce {
        // A prefix per run: a later run must not take an earlier run's
        // committed progress for its own.
        kafka.extend([
            "--job.sinkTransactionalIdPrefix".into(),
            format!("ferry-bench-{label}"),
        ]);
    }
    kafka.append(&mut o.extra);
    o.extra = kafka;
    let b = e.before();
    let ferry = Ferry::start(&o, &e.ctx.monitor)?;
    if round == 0 {
        report.command(ferry.command.clone());
    }
    let done = ferry
        .wait_windows(1, Duration::from_secs(120 + e.p.rows / 2_000))
        .await?;
    if !done.snapshot {
        bail!("ferry's first completed window was not the snapshot");
    }
    let mut r = e.blank(series_to_kafka(g), round, &topic, &b);
    r.cpu_s = ferry.cpu_s();
    r.wall_s = done.at_s;
    r.rows_per_s = e.p.rows as f64 / done.at_s;
    r.tool_rows_per_s = (done.took_ms > 0).then(|| e.p.rows as f64 * 1000.0 / done.took_ms as f64);
    let counters = counters(&ferry).await;
    r.command = ferry.command.clone();
    let usage = ferry.stop().await?;
    r.peak_rss_mib = done.hwm_mib.unwrap_or(0.0).max(usage.peak_rss_mib);
    r.check = "records counted below".into();
    r.details = json!({"window_took_ms": done.took_ms, "ferry_metrics": counters,
                       "exit_after_sigterm": usage.exit});
    Ok(r)
}

/// (b) ConsumerPerformance reading a topic ferry wrote.
pub(super) async fn consumer_perf(
    e: &Env<'_>,
    topic: &str,
    round: usize,
    report: &mut Report,
) -> Result<Run> {
    let config = e.work.join("consumer-read-committed.properties");
    std::fs::write(&config, "isolation.level=read_committed\n")
        .with_context(|| format!("writing {}", config.display()))?;
    let args: Vec<String> = vec![
        "--bootstrap-server".into(),
        e.broker.bootstrap.clone(),
        "--topic".into(),
        topic.into(),
        "--messages".into(),
        e.p.rows.to_string(),
        "--group".into(),
        format!("perf-{topic}"),
        "--consumer.config".into(),
        config.to_string_lossy().into_owned(),
        // A topic with fewer records ends the test after this long.
        "--timeout".into(),
        "30000".into(),
    ];
    let b = e.before();
    let run = e
        .tools
        .measured(
            "org.apache.kafka.tools.ConsumerPerformance",
            &args,
            e.work,
            &format!("consumer-perf-{topic}"),
            &e.ctx.monitor,
            Duration::from_secs(300 + e.p.rows / 1_000),
        )
        .await?;
    if round == 0
        && report
            .commands
            .iter()
            .all(|c| !c.contains("ConsumerPerformance"))
    {
        report.command(run.command.clone());
    }
    let stats = parse_consumer(&run.stdout).with_context(|| {
        format!(
            "no result line in ConsumerPerformance's output: {}",
            tail(&run.stdout, 4)
        )
    })?;
    let got = stats.get("data.consumed.in.nMsg").copied().unwrap_or(0.0) as u64;
    if got != e.p.rows {
        bail!(
            "ConsumerPerformance read {got} records of {topic}, expected {}",
            e.p.rows
        );
    }
    let mb = stats.get("data.consumed.in.MB").copied().unwrap_or(0.0);
    let mut r = e.blank(SERIES_CONSUMER.into(), round, topic, &b);
    r.wall_s = run.usage.wall_s;
    r.rows_per_s = e.p.rows as f64 / run.usage.wall_s;
    r.tool_rows_per_s = stats.get("nMsg.sec").copied();
    r.tool_mb_per_s = stats.get("MB.sec").copied();
    r.cpu_s = run.usage.cpu_s();
    r.peak_rss_mib = run.usage.peak_rss_mib;
    r.check = format!(
        "{got} committed records, {:.0} B each (key + value)",
        mb * 1048576.0 / got.max(1) as f64
    );
    r.details = json!({"reported": stats, "record_bytes": mb * 1048576.0 / got.max(1) as f64});
    r.command = run.command;
    Ok(r)
}

/// (d) ProducerPerformance: as many records of `size` bytes into a new topic.
pub(super) async fn producer_perf(
    e: &Env<'_>,
    t: ProducerTest,
    size: u64,
    round: usize,
    report: &mut Report,
) -> Result<Run> {
    let topic = t.topic(round);
    let create = e.tools.create_topic(&topic, e.p.partitions).await?;
    let mut args: Vec<String> = vec![
        "--topic".into(),
        topic.clone(),
        "--num-records".into(),
        e.p.rows.to_string(),
        "--record-size".into(),
        size.to_string(),
        "--throughput".into(),
        "-1".into(),
    ];
    if t.guarantee == Guarantee::ExactlyOnce {
        // A commit per checkpoint interval, as ferry commits per checkpoint.
        args.extend([
            "--transactional-id".into(),
            format!("perf-{topic}"),
            "--transaction-duration-ms".into(),
            CHECKPOINT_MS.to_string(),
        ]);
    }
    args.extend([
        "--producer-props".into(),
        format!("bootstrap.servers={}", e.broker.bootstrap),
    ]);
    args.extend(t.props());
    let b = e.before();
    let run = e
        .tools
        .measured(
            "org.apache.kafka.tools.ProducerPerformance",
            &args,
            e.work,
            &format!("producer-perf-{topic}"),
            &e.ctx.monitor,
            Duration::from_secs(300 + e.p.rows / 1_000),
        )
        .await?;
    if round == 0 {
        report.command(create);
        report.command(run.command.clone());
    }
    let stats = parse_producer(&run.stdout).with_context(|| {
        format!(
            "no summary line in ProducerPerformance's output: {}",
            tail(&run.stdout, 4)
        )
    })?;
    if stats.records != e.p.rows {
        bail!(
            "ProducerPerformance sent {} records, expected {}",
            stats.records,
            e.p.rows
        );
    }
    let mut r = e.blank(t.series(), round, &topic, &b);
    r.wall_s = run.usage.wall_s;
    r.rows_per_s = e.p.rows as f64 / run.usage.wall_s;
    r.tool_rows_per_s = Some(stats.records_per_s);
    r.tool_mb_per_s = Some(stats.mb_per_s);
    r.cpu_s = run.usage.cpu_s();
    r.peak_rss_mib = run.usage.peak_rss_mib;
    r.check = format!("{} records of {size} B sent", stats.records);
    r.details = json!({"reported": stats, "record_size": size});
    r.command = run.command;
    Ok(r)
}

/// How the Kafka → Kudu job ended.
#[derive(Debug, Clone, Copy, Serialize)]
struct Ending {
    /// When ferry's rows_upserted + rows_deleted reached the record count,
    /// if a scrape saw it before the window completed or the process ended
    /// (the first of the three ends the measurement).
    all_rows_written_s: Option<f64>,
    /// When ferry logged its first completed window, and the window's
    /// own time (open to completed).
    window_completed_s: Option<f64>,
    window_took_ms: Option<u64>,
    /// When the process was seen to have ended by itself.
    exited_s: Option<f64>,
    ended_by_itself: bool,
    exit: i32,
}

/// (c) Kafka → Kudu: the topic, bounded at its end, into an empty table.
pub(super) async fn from_kafka(
    e: &Env<'_>,
    topic: &str,
    round: usize,
    report: &mut Report,
) -> Result<Run> {
    let sink = format!("{TABLE}_from_kafka_{round}");
    report.command(data::create_table(&e.cluster.masters, &sink).await?);
    let label = format!("from-kafka-{round}");
    let mut o = e.ferry_options(&sink, &label);
    o.source_masters = String::new();
    o.discovery_s = Some(1);
    let mut kafka: Vec<String> = [
        ("--job.sourceType", "kafka".to_string()),
        ("--job.sourceBootstrapServers", e.broker.bootstrap.clone()),
        ("--job.sourceTopic", topic.to_string()),
        ("--job.sourceFormat", e.p.format.key().into()),
        ("--job.sourceStartupMode", "earliest-offset".into()),
        ("--job.sourceBoundedMode", "latest-offset".into()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_string(), v])
    .collect();
    kafka.append(&mut o.extra);
    o.extra = kafka;
    let b = e.before();
    let before_rpc = e.cluster.rpc_counts().await?;
    let ferry = Ferry::start(&o, &e.ctx.monitor)?;
    if round == 0 {
        report.command(ferry.command.clone());
    }
    let timeout = Duration::from_secs(120 + e.p.rows / 2_000);
    let mut end = Ending {
        all_rows_written_s: None,
        window_completed_s: None,
        window_took_ms: None,
        exited_s: None,
        ended_by_itself: false,
        exit: 0,
    };
    let mut last_counters = BTreeMap::new();
    // Done at whichever comes first: every row written (ferry counts a
    // row once the Kudu session's flush of it succeeded), the first window
    // completed (the topic was whole before the job started, so its first
    // window holds every record), or the process ended by itself (a
    // bounded job ends FINISHED).
    loop {
        if !ferry.alive() {
            end.exited_s = Some(ferry.elapsed_s());
            break;
        }
        if let Some(w) = ferry.windows().first() {
            end.window_completed_s = Some(w.at_s);
            break;
        }
        let m = counters(&ferry).await;
        let written = m.get(ROWS_UPSERTED).copied().unwrap_or(0.0)
            + m.get(ROWS_DELETED).copied().unwrap_or(0.0);
        if !m.is_empty() {
            last_counters = m;
        }
        if written >= e.p.rows as f64 {
            end.all_rows_written_s = Some(ferry.elapsed_s());
            break;
        }
        if ferry.elapsed_s() > timeout.as_secs_f64() {
            bail!(
                "ferry did not write the {} records of {topic} within {timeout:?} (log {})",
                e.p.rows,
                ferry.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let done_s = end
        .all_rows_written_s
        .or(end.window_completed_s)
        .or(end.exited_s);
    let mut r = e.blank(SERIES_FROM_KAFKA.into(), round, topic, &b);
    r.cpu_s = ferry.cpu_s();
    // Give a job that wrote everything the chance to end by itself.
    let grace = Instant::now() + FINISH_GRACE;
    while end.exited_s.is_none() && Instant::now() < grace {
        if !ferry.alive() {
            end.exited_s = Some(ferry.elapsed_s());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if let Some(w) = ferry.windows().first() {
        end.window_completed_s.get_or_insert(w.at_s);
        end.window_took_ms = Some(w.took_ms);
    }
    r.command = ferry.command.clone();
    let log = ferry.log.clone();
    let errors = ferry.error_lines();
    let usage = if end.exited_s.is_some() {
        end.ended_by_itself = true;
        let mut ferry = ferry;
        // stop() writes the --perf report; a process that ended needs it too.
        ferry.finish_profile().await?;
        ferry.reap(Duration::from_secs(10)).await?
    } else {
        ferry.stop().await?
    };
    end.exit = usage.exit;
    if end.ended_by_itself && usage.exit != 0 {
        bail!(
            "ferry (Kafka → Kudu) exited with {} (log {}): {}",
            usage.exit,
            log.display(),
            errors.join("\n")
        );
    }
    match done_s {
        Some(w) => r.wall_s = w,
        None => {
            r.wall_s = usage.wall_s;
            r.cpu_s = usage.cpu_s();
        }
    }
    r.rows_per_s = e.p.rows as f64 / r.wall_s;
    r.tool_rows_per_s = end
        .window_took_ms
        .filter(|ms| *ms > 0)
        .map(|ms| e.p.rows as f64 * 1000.0 / ms as f64);
    r.peak_rss_mib = usage.peak_rss_mib;
    let rpc = e.cluster.rpc_counts().await? - before_rpc;
    let fp = data::fingerprint(e.client, &sink, None, false).await?;
    let identical = fp == e.source_fp;
    if !identical {
        bail!(
            "{sink} ({} rows) differs from the source ({} rows) after Kafka → Kudu",
            fp.rows,
            e.source_fp.rows
        );
    }
    r.check = format!(
        "sink == source ({} rows); {}",
        fp.rows,
        if end.ended_by_itself {
            "job ended by itself"
        } else {
            "job stopped by the bench"
        }
    );
    r.details = json!({"ending": end, "sink_write_rpcs": rpc.write,
                       "rows_per_write_rpc": e.p.rows as f64 / rpc.write.max(1) as f64,
                       "ferry_metrics": last_counters, "sink_table": sink,
                       "cpu_s_whole_process": usage.cpu_s()});
    data::drop_table(&e.cluster.masters, &sink).await?;
    Ok(r)
}
