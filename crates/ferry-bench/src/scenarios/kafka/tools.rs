//! The Kafka side of the `kafka` scenario: the broker from the test kit,
//! Kafka's own command-line tools (perf tests, topics, offsets) on the
//! broker's jars, and what their output says.

use crate::monitor::Monitor;
use crate::procs::tail;
use crate::procs::{cpu_seconds, shell_line};
use crate::report::Report;
use anyhow::{anyhow, bail, Context, Result};
use ferry_testkit::KafkaBroker;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// JVM options of Kafka's `kafka-*-perf-test.sh` (`KAFKA_HEAP_OPTS` and
/// `kafka-run-class.sh`'s `KAFKA_JVM_PERFORMANCE_OPTS`).
const TOOL_JVM_OPTS: [&str; 7] = [
    "-Xmx512M",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
];

/// The broker, torn down when dropped (also when the scenario fails).
pub struct Broker {
    broker: Option<KafkaBroker>,
    pub bootstrap: String,
    pub pid: u32,
    data_dir: PathBuf,
}

impl Broker {
    pub async fn start(name: String) -> Result<Broker> {
        let started = Instant::now();
        let n = name.clone();
        let broker = tokio::task::spawn_blocking(move || KafkaBroker::start(&n))
            .await
            .context("broker start task")?
            .map_err(|e| anyhow!("starting Kafka broker {name}: {e}"))?;
        let info = broker.info().clone();
        let pid = info.pid.context("the broker has no pid")?;
        println!(
            "  Kafka broker {name} at {} (up in {:.1} s)",
            info.bootstrap(),
            started.elapsed().as_secs_f64()
        );
        Ok(Broker {
            bootstrap: info.bootstrap(),
            pid,
            data_dir: info.root.join("data"),
            broker: Some(broker),
        })
    }

    /// Stops the broker and removes its data.
    pub async fn destroy(mut self) -> Result<()> {
        if let Some(b) = self.broker.take() {
            tokio::task::spawn_blocking(move || b.destroy())
                .await
                .context("broker stop task")?
                .map_err(|e| anyhow!("stopping the Kafka broker: {e}"))?;
        }
        Ok(())
    }

    pub fn cpu_s(&self) -> f64 {
        cpu_seconds(self.pid).unwrap_or(0.0)
    }

    /// Bytes of the topic's log segments on disk (record batches with
    /// their headers, keys and values).
    pub fn topic_disk_bytes(&self, topic: &str) -> u64 {
        let Ok(dirs) = std::fs::read_dir(&self.data_dir) else {
            return 0;
        };
        let mut total = 0;
        for d in dirs.flatten() {
            let name = d.file_name().to_string_lossy().into_owned();
            let of_topic = name
                .rsplit_once('-')
                .is_some_and(|(t, p)| t == topic && p.parse::<u32>().is_ok());
            if !of_topic {
                continue;
            }
            for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
                if f.path().extension().is_some_and(|e| e == "log") {
                    total += f.metadata().map(|m| m.len()).unwrap_or(0);
                }
            }
        }
        total
    }
}

/// Kafka's tools on the broker's jars, with the JDK the test kit uses.
pub struct Tools {
    libs: PathBuf,
    java: PathBuf,
    log4j: PathBuf,
    bootstrap: String,
}

/// A finished tool run.
pub type ToolRun = crate::procs::MeasuredRun;

impl Tools {
    pub fn new(libs: PathBuf, work: &Path, bootstrap: &str) -> Result<Tools> {
        let log4j = work.join("tools-log4j2.properties");
        // Warnings and errors to stderr, as Kafka's tools-log4j2 does.
        std::fs::write(
            &log4j,
            "status = error\n\
             appender.stderr.type = Console\n\
             appender.stderr.name = STDERR\n\
             appender.stderr.target = SYSTEM_ERR\n\
             appender.stderr.layout.type = PatternLayout\n\
             appender.stderr.layout.pattern = [%d] %p %m (%c)%n\n\
             rootLogger.level = WARN\n\
             rootLogger.appenderRef.stderr.ref = STDERR\n",
        )
        .with_context(|| format!("writing {}", log4j.display()))?;
        // The same java as the test kit's broker: $JAVA_HOME, else PATH.
        let java = std::env::var_os("JAVA_HOME")
            .map(|h| PathBuf::from(h).join("bin/java"))
            .filter(|j| j.is_file())
            .unwrap_or_else(|| PathBuf::from("java"));
        Ok(Tools {
            libs,
            java,
            log4j,
            bootstrap: bootstrap.to_string(),
        })
    }

    fn args(&self, class: &str, args: &[String]) -> Vec<String> {
        let mut all: Vec<String> = TOOL_JVM_OPTS.iter().map(|s| s.to_string()).collect();
        all.push(format!(
            "-Dlog4j2.configurationFile={}",
            self.log4j.display()
        ));
        all.push("-cp".into());
        all.push(format!("{}/*", self.libs.display()));
        all.push(class.into());
        all.extend(args.iter().cloned());
        all
    }

    /// Runs a tool as a measured child; stdout and stderr kept under `dir`.
    pub async fn measured(
        &self,
        class: &str,
        args: &[String],
        dir: &Path,
        label: &str,
        monitor: &Monitor,
        timeout: Duration,
    ) -> Result<ToolRun> {
        crate::procs::run_measured(
            self.java.as_os_str(),
            &self.args(class, args),
            &[],
            (dir, label),
            monitor,
            timeout,
        )
        .await
    }

    /// Runs a tool unmeasured; returns its command line and stdout.
    async fn plain(&self, class: &str, args: &[String]) -> Result<(String, String)> {
        let all = self.args(class, args);
        let command = shell_line(&[], self.java.as_os_str(), &all);
        let out = tokio::time::timeout(
            Duration::from_secs(120),
            tokio::process::Command::new(&self.java)
                .args(&all)
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .map_err(|_| anyhow!("{command}: no answer within 120 s"))?
        .with_context(|| format!("running {command}"))?;
        if !out.status.success() {
            bail!(
                "{command} failed: {}",
                tail(String::from_utf8_lossy(&out.stderr).trim(), 8)
            );
        }
        Ok((command, String::from_utf8_lossy(&out.stdout).into_owned()))
    }

    /// Creates a topic (as ferry creates its own: `partitions`, one replica).
    pub async fn create_topic(&self, topic: &str, partitions: u32) -> Result<String> {
        let args: Vec<String> = vec![
            "--bootstrap-server".into(),
            self.bootstrap.clone(),
            "--create".into(),
            "--topic".into(),
            topic.into(),
            "--partitions".into(),
            partitions.to_string(),
            "--replication-factor".into(),
            "1".into(),
        ];
        Ok(self
            .plain("org.apache.kafka.tools.TopicCommand", &args)
            .await?
            .0)
    }

    /// Deletes topics (their data leaves the disk a minute later, the
    /// broker's `file.delete.delay.ms`).
    pub async fn delete_topics(&self, topics: &[String]) -> Result<String> {
        // --topic takes a regular expression; names are [A-Za-z0-9_-].
        let args: Vec<String> = vec![
            "--bootstrap-server".into(),
            self.bootstrap.clone(),
            "--delete".into(),
            "--topic".into(),
            topics.join("|"),
        ];
        Ok(self
            .plain("org.apache.kafka.tools.TopicCommand", &args)
            .await?
            .0)
    }

    /// Every topic's partitions' end offsets (`GetOffsetShell --time -1`).
    pub async fn end_offsets(&self) -> Result<(String, BTreeMap<String, Vec<i64>>)> {
        let args: Vec<String> = vec![
            "--bootstrap-server".into(),
            self.bootstrap.clone(),
            "--time".into(),
            "-1".into(),
            "--exclude-internal-topics".into(),
        ];
        let (command, out) = self
            .plain("org.apache.kafka.tools.GetOffsetShell", &args)
            .await?;
        Ok((command, parse_end_offsets(&out)))
    }
}

/// `topic:partition:offset` lines.
pub fn parse_end_offsets(out: &str) -> BTreeMap<String, Vec<i64>> {
    let mut topics: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for line in out.lines() {
        let mut it = line.trim().rsplitn(3, ':');
        let (Some(offset), Some(_partition), Some(topic)) = (it.next(), it.next(), it.next())
        else {
            continue;
        };
        if let Ok(o) = offset.parse::<i64>() {
            topics.entry(topic.to_string()).or_default().push(o);
        }
    }
    topics
}

/// The last summary line of ProducerPerformance: `N records sent, R
/// records/sec (M MB/sec), A ms avg latency, X ms max latency, …`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProducerStats {
    pub records: u64,
    pub records_per_s: f64,
    pub mb_per_s: f64,
    pub avg_latency_ms: f64,
    pub max_latency_ms: f64,
}

pub fn parse_producer(out: &str) -> Option<ProducerStats> {
    let line = out
        .lines()
        .rev()
        .find(|l| l.contains("records sent") && l.contains("max latency"))?;
    let parts: Vec<&str> = line.split(',').map(str::trim).collect();
    let first_num = |s: &str| s.split_whitespace().next()?.parse::<f64>().ok();
    let records = first_num(parts.first()?)? as u64;
    let rate_part = parts.get(1)?;
    let records_per_s = first_num(rate_part)?;
    let mb_per_s = rate_part.split_once('(').and_then(|(_, r)| first_num(r))?;
    let avg_latency_ms = first_num(parts.get(2)?)?;
    let max_latency_ms = first_num(parts.get(3)?)?;
    Some(ProducerStats {
        records,
        records_per_s,
        mb_per_s,
        avg_latency_ms,
        max_latency_ms,
    })
}

/// ConsumerPerformance's result line, by its header's names
/// (`data.consumed.in.MB`, `MB.sec`, `data.consumed.in.nMsg`, `nMsg.sec`,
/// `rebalance.time.ms`, `fetch.time.ms`, `fetch.MB.sec`, `fetch.nMsg.sec`).
pub fn parse_consumer(out: &str) -> Option<BTreeMap<String, f64>> {
    let mut lines = out.lines().map(str::trim).filter(|l| !l.is_empty());
    let header_at = lines.clone().position(|l| l.starts_with("start.time"))?;
    let header: Vec<&str> = lines.nth(header_at)?.split(',').map(str::trim).collect();
    // A warning (e.g. the timeout) may come between header and values.
    let values: Vec<&str> = lines
        .map(|l| l.split(',').map(str::trim).collect::<Vec<_>>())
        .find(|v| v.len() == header.len())?;
    let map: BTreeMap<String, f64> = header
        .iter()
        .zip(values.iter())
        .filter_map(|(k, v)| v.parse::<f64>().ok().map(|v| (k.to_string(), v)))
        .collect();
    map.contains_key("data.consumed.in.nMsg").then_some(map)
}

/// The Kafka jars: the test kit's folder, fetched with the scripts' own
/// `ensure_kafka` (Maven) when missing.
pub fn ensure_kafka_libs(report: &mut Report) -> Result<PathBuf> {
    if let Ok(libs) = ferry_testkit::kafka::kafka_libs() {
        return Ok(libs);
    }
    let script = "source scripts/lib/setup.sh; ensure_kafka";
    println!("  fetching the Kafka jars: bash -c '{script}' ...");
    let status = std::process::Command::new("bash")
        .args(["-c", script])
        .status()
        .context("running scripts/lib/setup.sh's ensure_kafka (run from the repository root)")?;
    if !status.success() {
        bail!("ensure_kafka failed ({status}); see its output above");
    }
    report.command(format!("bash -c '{script}'"));
    ferry_testkit::kafka::kafka_libs().map_err(|e| anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_producer_summary() {
        let out = "250000 records sent, 49990.0 records/sec (23.83 MB/sec), 600.1 ms avg latency, 1200.0 ms max latency.\n\
                   1000000 records sent, 97125.097125 records/sec (47.43 MB/sec), 527.58 ms avg latency, 1090.00 ms max latency, 526 ms 50th, 832 ms 95th, 1008 ms 99th, 1082 ms 99.9th.\n";
        let s = parse_producer(out).expect("summary");
        assert_eq!(s.records, 1_000_000);
        assert!((s.records_per_s - 97125.097125).abs() < 1e-6);
        assert!((s.mb_per_s - 47.43).abs() < 1e-9);
        assert!((s.avg_latency_ms - 527.58).abs() < 1e-9);
        assert!((s.max_latency_ms - 1090.0).abs() < 1e-9);
        assert!(parse_producer("nothing here").is_none());
    }

    #[test]
    fn parses_consumer_result() {
        let out = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n\
                   2026-12-04 10:00:00:000, 2026-12-04 10:00:05:000, 476.8372, 95.3674, 1000000, 200000.0000, 3012, 1988, 239.8578, 503018.1087\n";
        let m = parse_consumer(out).expect("result");
        assert_eq!(m["data.consumed.in.nMsg"], 1_000_000.0);
        assert_eq!(m["nMsg.sec"], 200_000.0);
        assert_eq!(m["fetch.nMsg.sec"], 503_018.108_7);
        assert!(parse_consumer("WARN something\n").is_none());
        let short = "start.time, end.time, data.consumed.in.MB, data.consumed.in.nMsg\n\
                     WARNING: Exiting before consuming the expected number of messages: timeout (30000 ms) exceeded.\n\
                     2026-12-05 12:41:13:245, 2026-12-05 12:41:43:760, 2.8858, 16556\n";
        assert_eq!(
            parse_consumer(short).expect("result")["data.consumed.in.nMsg"],
            16_556.0
        );
    }

    #[test]
    fn parses_end_offsets() {
        let m = parse_end_offsets("a_b:0:10\na_b:1:5\nx-y:0:3\ngarbage\n");
        assert_eq!(m["a_b"], vec![10, 5]);
        assert_eq!(m["x-y"], vec![3]);
        assert_eq!(m.len(), 2);
    }
}
