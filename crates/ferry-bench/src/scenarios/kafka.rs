//! `kafka`: ferry between Kudu and a real Kafka broker, next to the
//! broker's own performance tools on the same machine.
//!
//! One Kudu cluster (1 master + `--tservers` tablet servers) holds the
//! source table and, in other tables of the same schema, what the Kafka →
//! Kudu runs write; one Apache Kafka 4.1.1 broker from the test kit (KRaft,
//! one node, loopback) holds the topics. Every round:
//!
//! (a) `ferry run` Kudu → Kafka (`job.sinkType=kafka`) of the loaded table
//!     into a new topic, once per delivery guarantee, timed from process
//!     start to the snapshot window's `window completed` line: ferry logs it
//!     at the checkpoint after the brokers acknowledged every record
//!     (at-least-once) or after the transaction holding them committed
//!     (exactly-once);
//! (b) `kafka-consumer-perf-test` (ConsumerPerformance, `read_committed` as
//!     ferry reads) of each of those topics: the consumer's rate, and how
//!     many records and key + value bytes the topic holds;
//! (c) `ferry run` Kafka → Kudu (`job.sourceType=kafka`, from the earliest
//!     offset, bounded at the topic's end) of the first topic into an empty
//!     table, timed until every record is written (its `rows_upserted`
//!     metric), its first window completed, or the process ended by itself,
//!     whichever comes first; the table is then compared cell by cell with
//!     the source;
//! (d) `kafka-producer-perf-test` (ProducerPerformance) writing as many
//!     records of the topic's average size into a new topic with as many
//!     partitions, sending as each guarantee measured does: `acks=all`
//!     (at-least-once), also with a transaction committed every checkpoint
//!     interval (exactly-once); each once with the Java
//!     producer's default batches (16 KiB) and once with librdkafka's
//!     (`batch.size=1000000`, as ferry's producer has).
//!
//! The tools run as Kafka's own scripts start them (`-Xmx512M`, G1). Odd
//! rounds run (d) first and (b) after (c); each round ends by counting its
//! topics' records (end offsets) and deleting them. Medians of `--repeat`
//! rounds; every run is timed from process start, and the tools' own
//! figures (which leave out JVM start-up) are kept next to them.
//!
//! This module holds the rounds, the topics' accounting and the report;
//! the four runs are in `runs`, the Kafka tools and the broker in `tools`.

mod runs;
mod tools;

use super::{prepare_source, settle, Ctx};
use crate::data::{self, Fingerprint};
use crate::ferry::FerryOptions;
use crate::kudu::Cluster;
use crate::procs::cpu_seconds_of;
use crate::report::{f0, f1, f2, Report, Table};
use anyhow::{bail, Context, Result};
use kudu_client::KuduClient;
use runs::{consumer_perf, from_kafka, producer_perf, to_kafka};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tools::{ensure_kafka_libs, Broker, Tools};

pub const TABLE: &str = "bench";
/// The checkpoint interval of every ferry run, and the transaction length
/// of the transactional producer test.
const CHECKPOINT_MS: u64 = 500;
/// How long a Kafka → Kudu job that wrote every record is given to end by
/// itself (a bounded job ends FINISHED) before it is stopped.
const FINISH_GRACE: Duration = Duration::from_secs(10);

/// `job.sinkDeliveryGuarantee`. Not `none`: its window completes before
/// the brokers acknowledged the records (and a stop drops those still
/// queued), so ferry's log cannot time it; that would need the topic's
/// offsets polled from the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    AtLeastOnce,
    ExactlyOnce,
}

impl Guarantee {
    pub fn key(self) -> &'static str {
        match self {
            Guarantee::AtLeastOnce => "at-least-once",
            Guarantee::ExactlyOnce => "exactly-once",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Guarantee::AtLeastOnce => "alo",
            Guarantee::ExactlyOnce => "eo",
        }
    }
}

/// librdkafka's default `batch.size` (bytes per partition batch), which
/// ferry's producer keeps; the Java producer's default is 16 384.
const RDKAFKA_BATCH_SIZE: u32 = 1_000_000;

/// One way of running the producer test: sending as a guarantee does
/// (`acks`, transactions), with the Java producer's default batches or
/// with batches as large as librdkafka's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProducerTest {
    guarantee: Guarantee,
    large_batches: bool,
}

impl ProducerTest {
    /// Both batch sizes for every guarantee.
    fn all(guarantees: &[Guarantee]) -> Vec<ProducerTest> {
        guarantees
            .iter()
            .flat_map(|&guarantee| {
                [false, true].map(|large_batches| ProducerTest {
                    guarantee,
                    large_batches,
                })
            })
            .collect()
    }

    fn series(self) -> String {
        let send = match self.guarantee {
            Guarantee::AtLeastOnce => "acks=all".to_string(),
            Guarantee::ExactlyOnce => format!("acks=all, a transaction every {CHECKPOINT_MS} ms"),
        };
        if self.large_batches {
            format!("kafka-producer-perf-test ({send}, batch.size={RDKAFKA_BATCH_SIZE})")
        } else {
            format!("kafka-producer-perf-test ({send})")
        }
    }

    fn topic(self, round: usize) -> String {
        let batches = if self.large_batches { "_large" } else { "" };
        format!("perf_{}{batches}_{round}", self.guarantee.tag())
    }

    /// `--producer-props` besides `bootstrap.servers`.
    fn props(self) -> Vec<String> {
        let mut props = vec!["acks=all".to_string()];
        if self.large_batches {
            props.push(format!("batch.size={RDKAFKA_BATCH_SIZE}"));
        }
        props
    }
}

/// `job.sinkFormat` / `job.sourceFormat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    DebeziumJson,
    UpsertJson,
}

impl Format {
    pub fn key(self) -> &'static str {
        match self {
            Format::DebeziumJson => "debezium-json",
            Format::UpsertJson => "upsert-json",
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct Params {
    pub rows: u64,
    /// ferry `-p`.
    pub threads: usize,
    /// Partitions of every topic.
    pub partitions: u32,
    pub repeat: usize,
    pub guarantees: Vec<Guarantee>,
    pub format: Format,
}

/// One measured run of ferry or of a Kafka tool.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// Which series the run belongs to (a row of the table).
    pub series: String,
    pub round: usize,
    pub topic: String,
    pub records: u64,
    /// From process start until the records are written (ferry) or the
    /// process ended (tools).
    pub wall_s: f64,
    pub rows_per_s: f64,
    /// Rows/s by the tool's own timing: ferry's window (open to completed),
    /// the tools' reported records/sec (JVM start-up left out).
    pub tool_rows_per_s: Option<f64>,
    pub tool_mb_per_s: Option<f64>,
    pub cpu_s: f64,
    pub peak_rss_mib: f64,
    pub kudu_tservers_cpu_s: f64,
    pub broker_cpu_s: f64,
    /// What was checked after the run, in words.
    pub check: String,
    /// Everything else the run reported.
    pub details: Value,
    pub command: String,
}

/// The median run (by rows/s) of one series, plus all of them.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub median: Run,
    pub rows_per_s_runs: Vec<f64>,
    pub runs: Vec<Run>,
}

fn summarize(runs: &[Run]) -> Option<Summary> {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.rows_per_s.total_cmp(&b.rows_per_s));
    // Lower median for an even count: never flatters.
    let median = sorted.get(sorted.len().checked_sub(1)? / 2)?.clone();
    Some(Summary {
        median,
        rows_per_s_runs: runs.iter().map(|r| r.rows_per_s).collect(),
        runs: runs.to_vec(),
    })
}

const SERIES_CONSUMER: &str = "kafka-consumer-perf-test (read_committed)";
const SERIES_FROM_KAFKA: &str = "ferry run Kafka → Kudu";

fn series_to_kafka(g: Guarantee) -> String {
    format!("ferry run Kudu → Kafka ({})", g.key())
}

struct Env<'a> {
    ctx: &'a Ctx,
    p: &'a Params,
    cluster: &'a Cluster,
    client: &'a KuduClient,
    broker: &'a Broker,
    tools: &'a Tools,
    work: &'a Path,
    source_fp: Fingerprint,
    quiet: Vec<u32>,
}

/// CPU counters read before a run.
struct Before {
    tservers: f64,
    broker: f64,
}

impl Env<'_> {
    fn before(&self) -> Before {
        Before {
            tservers: cpu_seconds_of(&self.cluster.tserver_pids()),
            broker: self.broker.cpu_s(),
        }
    }

    /// CPU seconds of the tablet servers and of the broker since `b`.
    fn cpu_since(&self, b: &Before) -> (f64, f64) {
        (
            cpu_seconds_of(&self.cluster.tserver_pids()) - b.tservers,
            self.broker.cpu_s() - b.broker,
        )
    }

    fn blank(&self, series: String, round: usize, topic: &str, b: &Before) -> Run {
        let (kudu_tservers_cpu_s, broker_cpu_s) = self.cpu_since(b);
        Run {
            series,
            round,
            topic: topic.into(),
            records: self.p.rows,
            wall_s: 0.0,
            rows_per_s: 0.0,
            tool_rows_per_s: None,
            tool_mb_per_s: None,
            cpu_s: 0.0,
            peak_rss_mib: 0.0,
            kudu_tservers_cpu_s,
            broker_cpu_s,
            check: String::new(),
            details: Value::Null,
            command: String::new(),
        }
    }

    async fn settle(&self, what: &str) {
        let s = settle(&self.quiet, Duration::from_secs(120)).await;
        println!(
            "  {what} (daemons quiet after {:.0} s{}) ...",
            s.waited_s,
            if s.quiet { "" } else { ", gave up waiting" }
        );
    }

    fn ferry_options(&self, table: &str, label: &str) -> FerryOptions {
        let mut o = self
            .ctx
            .ferry_options(self.cluster, self.cluster, table, self.work, label);
        o.checkpointing_ms = Some(CHECKPOINT_MS);
        o.parallelism = Some(self.p.threads);
        o
    }
}

pub async fn run(ctx: &Ctx, p: Params) -> Result<PathBuf> {
    let mut report = ctx.report(
        "kafka",
        json!({"rows": p.rows, "threads": p.threads, "partitions": p.partitions,
               "repeat": p.repeat, "format": p.format,
               "guarantees": p.guarantees, "tablets": data::TABLETS,
               "tservers": ctx.tservers, "replicas": 1,
               "checkpointing_interval_ms": CHECKPOINT_MS}),
    )?;
    let libs = ensure_kafka_libs(&mut report)?;
    let work = report.work_dir.clone();
    let tag = std::process::id();
    let (cluster, broker) = tokio::join!(
        Cluster::start(
            format!("bench-kafka-{tag}"),
            1,
            ctx.tservers,
            &ctx.source_tserver_flags,
            &ctx.monitor
        ),
        Broker::start(format!("bench-kafka-{tag}")),
    );
    // Whichever started is torn down on drop if the other failed.
    let (cluster, broker) = (cluster?, broker?);
    ctx.monitor.track([broker.pid]);
    report.command(cluster.up_command(ctx.tservers));
    report.command(format!(
        "ferry-testkit kafka up --name bench-kafka-{tag}   # via the ferry-testkit library; {}",
        broker.bootstrap
    ));
    let outcome = measure(ctx, &p, &cluster, &broker, &libs, &work, &mut report).await;
    // Both are torn down whatever the outcome.
    let down = broker.destroy().await;
    drop(cluster);
    outcome?;
    down?;
    report.finish(&ctx.results_dir, &ctx.monitor)
}

async fn measure(
    ctx: &Ctx,
    p: &Params,
    cluster: &Cluster,
    broker: &Broker,
    libs: &Path,
    work: &Path,
    report: &mut Report,
) -> Result<()> {
    let client = KuduClient::new(&cluster.masters.split(',').collect::<Vec<_>>())?;
    let mut quiet = cluster.pids();
    quiet.push(broker.pid);
    let prepared = prepare_source(cluster, &client, TABLE, p.rows, report, &quiet).await?;
    report.result("source", &prepared);
    let source_fp = data::fingerprint(&client, TABLE, None, false).await?;
    if source_fp.rows != p.rows {
        bail!("source holds {} rows, expected {}", source_fp.rows, p.rows);
    }
    let tools = Tools::new(libs.to_path_buf(), work, &broker.bootstrap)?;
    let env = Env {
        ctx,
        p,
        cluster,
        client: &client,
        broker,
        tools: &tools,
        work,
        source_fp,
        quiet,
    };

    let mut runs: Vec<Run> = Vec::new();
    let mut topics = BTreeMap::new();
    // Records of the producer tests: the average key + value size of
    // ferry's first topic, measured in the first round.
    let mut record_size = None;
    for round in 0..p.repeat {
        let round_runs = run_round(&env, round, &mut record_size, report).await?;
        topics.append(&mut account_topics(&env, round, &round_runs, report).await?);
        runs.extend(round_runs);
    }
    report.result("topics", &topics);
    record(&env, runs, report);
    Ok(())
}

/// One round. The first one starts with ferry (the producer tests need the
/// size of its records); odd rounds run the producer tests first and the
/// consumer test after ferry's Kafka → Kudu, so no run always goes first.
async fn run_round(
    env: &Env<'_>,
    round: usize,
    record_size: &mut Option<u64>,
    report: &mut Report,
) -> Result<Vec<Run>> {
    let p = env.p;
    let step = |what: String| format!("round {}/{}: {what}", round + 1, p.repeat);
    let swap = round % 2 == 1;
    let mut runs = Vec::new();
    if swap {
        producer_tests(env, round, *record_size, &mut runs, report).await?;
    }
    for &g in &p.guarantees {
        env.settle(&step(series_to_kafka(g))).await;
        let run = to_kafka(env, g, round, report).await?;
        print_run(&run);
        runs.push(run);
    }
    let topics: Vec<(Guarantee, String)> = p
        .guarantees
        .iter()
        .map(|&g| (g, to_kafka_topic(g, round)))
        .collect();
    let first_topic = topics
        .first()
        .map(|(_, t)| t.clone())
        .context("no guarantee to measure")?;
    if swap {
        env.settle(&step(SERIES_FROM_KAFKA.into())).await;
        let run = from_kafka(env, &first_topic, round, report).await?;
        print_run(&run);
        runs.push(run);
    }
    for (g, topic) in &topics {
        env.settle(&step(format!("{SERIES_CONSUMER} of the {} topic", g.key())))
            .await;
        let run = consumer_perf(env, topic, round, report).await?;
        print_run(&run);
        if record_size.is_none() {
            *record_size = run.details["record_bytes"]
                .as_f64()
                .map(|b| b.round().max(1.0) as u64);
        }
        runs.push(run);
    }
    if !swap {
        env.settle(&step(SERIES_FROM_KAFKA.into())).await;
        let run = from_kafka(env, &first_topic, round, report).await?;
        print_run(&run);
        runs.push(run);
        producer_tests(env, round, *record_size, &mut runs, report).await?;
    }
    Ok(runs)
}

async fn producer_tests(
    env: &Env<'_>,
    round: usize,
    record_size: Option<u64>,
    runs: &mut Vec<Run>,
    report: &mut Report,
) -> Result<()> {
    let size = record_size.context("the consumer test reported no record size")?;
    for t in ProducerTest::all(&env.p.guarantees) {
        env.settle(&format!(
            "round {}/{}: {}",
            round + 1,
            env.p.repeat,
            t.series()
        ))
        .await;
        let run = producer_perf(env, t, size, round, report).await?;
        print_run(&run);
        runs.push(run);
    }
    Ok(())
}

/// The round's topics as the broker has them (end offsets, bytes on
/// disk); checks that topics written without transactions hold exactly
/// the rows, then deletes the round's topics so the broker's disk and page
/// cache do not grow round after round.
async fn account_topics(
    env: &Env<'_>,
    round: usize,
    runs: &[Run],
    report: &mut Report,
) -> Result<BTreeMap<String, Value>> {
    let (command, offsets) = env.tools.end_offsets().await?;
    if round == 0 {
        report.command(command);
    }
    // The runs that wrote a topic.
    let writers: Vec<&Run> = runs
        .iter()
        .filter(|r| r.series != SERIES_CONSUMER && r.series != SERIES_FROM_KAFKA)
        .collect();
    let mut ours: Vec<String> = writers.iter().map(|r| r.topic.clone()).collect();
    // exactly-once's progress topics.
    ours.extend(
        offsets
            .keys()
            .filter(|t| t.ends_with(&format!("-{round}_progress")))
            .cloned(),
    );
    let mut topics = BTreeMap::new();
    for r in writers {
        let Some(o) = offsets.get(&r.topic) else {
            continue;
        };
        let records: i64 = o.iter().sum();
        // Commit markers take offsets too: only transaction-less topics
        // must end at exactly the row count.
        let transactional = r.series.contains("exactly-once") || r.series.contains("transaction");
        if !transactional && records != env.p.rows as i64 {
            bail!(
                "topic {} ends at {records} offsets in total, expected {} records",
                r.topic,
                env.p.rows
            );
        }
        let disk = env.broker.topic_disk_bytes(&r.topic);
        topics.insert(
            r.topic.clone(),
            json!({"end_offsets": o, "end_offsets_sum": records, "disk_bytes": disk,
                   "disk_bytes_per_offset": disk as f64 / records.max(1) as f64}),
        );
    }
    let command = env.tools.delete_topics(&ours).await?;
    if round == 0 {
        report.command(command);
    }
    Ok(topics)
}

fn to_kafka_topic(g: Guarantee, round: usize) -> String {
    format!("ferry_{}_{round}", g.tag())
}

fn print_run(r: &Run) {
    println!(
        "      {:.1} s, {:.0} rows/s{}, CPU {:.1} s, peak RSS {:.0} MiB, broker CPU {:.1} s; {}",
        r.wall_s,
        r.rows_per_s,
        r.tool_rows_per_s
            .map(|v| format!(" ({v:.0} by its own timing)"))
            .unwrap_or_default(),
        r.cpu_s,
        r.peak_rss_mib,
        r.broker_cpu_s,
        r.check
    );
}

/// The report's tables, JSON results and notes.
fn record(e: &Env<'_>, runs: Vec<Run>, report: &mut Report) {
    let p = e.p;
    let mut series: Vec<String> = p.guarantees.iter().map(|g| series_to_kafka(*g)).collect();
    series.extend(ProducerTest::all(&p.guarantees).iter().map(|t| t.series()));
    series.push(SERIES_FROM_KAFKA.into());
    series.push(SERIES_CONSUMER.into());
    let mut summaries: BTreeMap<String, Summary> = BTreeMap::new();
    for s in &series {
        // The consumer baseline is the test of the topic ferry read back.
        let of: Vec<Run> = runs
            .iter()
            .filter(|r| &r.series == s)
            .filter(|r| {
                s != SERIES_CONSUMER
                    || p.guarantees
                        .first()
                        .is_some_and(|g| r.topic == to_kafka_topic(*g, r.round))
            })
            .cloned()
            .collect();
        if let Some(sum) = summarize(&of) {
            summaries.insert(s.clone(), sum);
        }
    }
    let mut t = Table::new(
        &format!(
            "kafka: {} rows, {} tablets → {}-partition topics ({}), ferry -p {}, {} tablet servers, one broker, median of {}",
            f0(p.rows as f64),
            data::TABLETS,
            p.partitions,
            p.format.key(),
            p.threads,
            e.ctx.tservers,
            p.repeat
        ),
        &["run", "wall s", "rows/s", "rows/s of each run", "rows/s, own timing", "MB/s, own timing", "CPU s", "peak RSS MiB", "Kudu ts CPU s", "broker CPU s", "check"],
    );
    for s in &series {
        let Some(sum) = summaries.get(s) else {
            continue;
        };
        let r = &sum.median;
        t.row(vec![
            r.series.clone(),
            f1(r.wall_s),
            f0(r.rows_per_s),
            sum.rows_per_s_runs
                .iter()
                .map(|v| f0(*v))
                .collect::<Vec<_>>()
                .join(", "),
            r.tool_rows_per_s.map(f0).unwrap_or_else(|| "-".into()),
            r.tool_mb_per_s.map(f1).unwrap_or_else(|| "-".into()),
            f1(r.cpu_s),
            f0(r.peak_rss_mib),
            f1(r.kudu_tservers_cpu_s),
            f1(r.broker_cpu_s),
            r.check.clone(),
        ]);
    }
    report.tables.push(t);

    let mut ratios = Table::new(
        "ratios (medians)",
        &[
            "ratio",
            "rows/s from process start",
            "rows/s, own timing",
            "peak RSS",
        ],
    );
    let mut ratio_json = serde_json::Map::new();
    let mut pairs: Vec<(String, String, String)> = ProducerTest::all(&p.guarantees)
        .into_iter()
        .map(|t| {
            let ferry = series_to_kafka(t.guarantee);
            let name = format!(
                "{} / {}",
                ferry.trim_start_matches("ferry run "),
                t.series()
            );
            (name, ferry, t.series())
        })
        .collect();
    pairs.push((
        format!("Kafka → Kudu / {SERIES_CONSUMER}"),
        SERIES_FROM_KAFKA.into(),
        SERIES_CONSUMER.into(),
    ));
    for (name, a, b) in pairs {
        let (Some(a), Some(b)) = (summaries.get(&a), summaries.get(&b)) else {
            continue;
        };
        let (a, b) = (&a.median, &b.median);
        let wall = a.rows_per_s / b.rows_per_s;
        let own = match (a.tool_rows_per_s, b.tool_rows_per_s) {
            (Some(x), Some(y)) => x / y,
            _ => f64::NAN,
        };
        let rss = a.peak_rss_mib / b.peak_rss_mib;
        ratios.row(vec![name.clone(), f2(wall), f2(own), f2(rss)]);
        ratio_json.insert(
            name,
            json!({"rows_per_s": wall, "rows_per_s_own_timing": own, "peak_rss": rss}),
        );
    }
    report.tables.push(ratios);
    report.result("ratios", Value::Object(ratio_json));
    report.result(
        "rows_per_s",
        summaries
            .iter()
            .map(|(k, s)| (k.clone(), s.median.rows_per_s))
            .collect::<BTreeMap<_, _>>(),
    );
    report.result("series", &summaries);
    report.result("runs", &runs);
    report.note("One Kudu cluster holds the source table and the Kafka → Kudu sink tables (created empty, same schema, dropped after each round); one Kafka broker (KRaft, one node, loopback, the test kit's settings) holds every topic. Everything shares this machine's cores.");
    report.note(format!("ferry Kudu → Kafka: wall s from process start (connecting, creating the topic, planning included) to the snapshot window's `window completed` line, logged at the checkpoint (every {CHECKPOINT_MS} ms) after the brokers acknowledged every record (at-least-once, acks=all, idempotent) or after the transaction holding them committed (exactly-once); own timing = window open to completed."));
    report.note("ferry Kafka → Kudu: earliest-offset to the topic's end (job.sourceBoundedMode=latest-offset); wall s from process start until ferry's rows_upserted reached the record count (rows are counted after the Kudu session's flush) or the process ended by itself, whichever came first; the sink is then compared with the source cell by cell.");
    report.note("kafka-producer-perf-test writes as many records of the average key + value size of ferry's topic (measured by the consumer test) into a new topic with as many partitions, created beforehand (ferry creates its own topic inside its timing); its records have random values and no key. Own timing = its records/sec.");
    report.note("kafka-consumer-perf-test reads ferry's topic with isolation.level=read_committed (as ferry does) and only counts the records: it neither decodes the JSON nor writes to Kudu, so it is the ceiling of reading the topic here, not a like-for-like rival; ferry Kafka → Kudu also pays for decoding and for Kudu's write path (the tablet servers share the cores). Own timing = its nMsg.sec (from its start, group join included; JVM start-up left out).");
    report.note("The tools run with the JVM options of Kafka's own scripts (-Xmx512M, G1); wall s of a tool counts from process start (JVM start-up included) to exit.");
}
