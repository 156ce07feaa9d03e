//! `ferry drill`: proves, without stopping replication, that a job's DR
//! setup works, and writes a report (human on stdout; JSON with `--json`
//! and/or `--report FILE`). It takes the job's configuration as `ferry
//! failover` does, and the DR state store as `--from` (default: the job's
//! `job.stateReplicas`). Its checks, each a section of the report:
//!
//! 1. `rpo` ([`rpo`]): per sink table, the source's clock now minus the
//!    table's last replicated window end (its sink position).
//! 2. `verify` ([`verify_cut`]): every table verified (tablet-server
//!    checksums, read-only) at one consistent cut: the newest row of the
//!    cuts table, else each table's own position, as `ferry failover --to
//!    consistent` picks them.
//! 3. `drStore` ([`dr_store`]): the newest valid state in the DR store,
//!    its age against now and against the primary store's newest (STALE
//!    past `--max-dr-lag`), and a dry-run restore of it (load, checksums,
//!    its tables and positions on the clusters, the source's history back
//!    to its window end).
//! 4. `standby` ([`lease`]): the lease as observed, read twice a renew
//!    interval apart (is it being renewed?).
//! 5. `failoverSteps` ([`steps`]): each step a failover takes, measured
//!    for real without acting, and the estimated RTO.
//!
//! Exit codes: 0 every check passed, 1 a check failed (or a runtime
//! failure), 2 usage error.

pub mod dr_store;
pub mod lease;
pub mod report;
pub mod rpo;
pub mod steps;
pub mod switchover;
pub mod verify_cut;

pub use report::DrillReport;

use crate::run_args::{self, RunArgs, RunCommand};
use anyhow::Result;
use ferry_engine::checkpoint::{JobId, StorageLocation};
use ferry_engine::config::{parse_duration, HaKind, JobConfig, SinkKind, SourceKind};
use kudu_client::KuduClient;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Added to twice the checkpoint interval for the default `--max-dr-lag`:
/// room for one slow copy to a remote bucket.
const DR_LAG_SLACK: Duration = Duration::from_secs(60);

/// `ferry drill` arguments.
#[derive(Debug)]
pub struct DrillArgs {
    /// The job, as `ferry run` would take it.
    pub run: RunArgs,
    /// The DR state store (`--from`, repeatable; default
    /// `job.stateReplicas`).
    pub from: Vec<StorageLocation>,
    /// Whose state: `--job-id`, else the HA job id with a lease, else any
    /// one job's.
    pub job: Option<JobId>,
    /// The DR store is STALE when its newest state is older than this
    /// (against now, or against the primary's newest).
    pub max_dr_lag: Duration,
    /// A table fails the RPO check when it is further behind than this.
    pub max_rpo: Duration,
    /// Sink tables to verify (`--verify-tables`; `None`: all of the job's).
    pub verify_tables: Option<Vec<String>>,
    /// `--no-verify`.
    pub no_verify: bool,
    /// Key ranges checksummed at once.
    pub parallelism: usize,
    /// Print the report as JSON.
    pub json: bool,
    /// Also write the JSON report here.
    pub report: Option<PathBuf>,
}

/// The default `--max-dr-lag`: a healthy replica is at most one checkpoint
/// interval plus a copy behind; twice the interval allows one late
/// checkpoint, [`DR_LAG_SLACK`] a slow copy.
pub fn default_max_dr_lag(cfg: &JobConfig) -> Duration {
    cfg.checkpointing_interval * 2 + DR_LAG_SLACK
}

/// The default `--max-rpo`: a table is at most one window interval plus
/// one window behind; twice the interval plus a minute leaves room for a
/// slow window.
pub fn default_max_rpo(cfg: &JobConfig) -> Duration {
    cfg.discovery_interval * 2 + Duration::from_secs(60)
}

fn duration(flag: &str, value: &str) -> Result<Duration, String> {
    parse_duration(value).map_err(|e| {
        format!("invalid value '{value}' for {flag}: {e} (e.g. '90 s', '5 min', '500 ms')")
    })
}

/// Parses `args` (everything after `drill`); `Ok(None)` for `--help`.
/// Errors are usage errors (exit code 2).
pub fn parse(args: &[String]) -> Result<Option<DrillArgs>, String> {
    let (mut from, mut job_id) = (Vec::new(), None);
    let (mut max_dr_lag, mut max_rpo, mut verify_tables) = (None, None, None);
    let (mut no_verify, mut json, mut report) = (false, false, None);
    let mut parallelism = super::verify::DEFAULT_PARALLELISM;
    let mut flags = super::flags::Flags::new(args);
    while let Some(arg) = flags.next_arg() {
        let flag = arg.flag();
        match flag {
            "-h" | "--help" => return Ok(None),
            "--from" => from.push(flags.value(&arg)?),
            "--job-id" => job_id = Some(flags.value(&arg)?),
            "--max-dr-lag" => max_dr_lag = Some(duration(flag, &flags.value(&arg)?)?),
            "--max-rpo" => max_rpo = Some(duration(flag, &flags.value(&arg)?)?),
            "--verify-tables" => verify_tables = Some(table_list(&flags.value(&arg)?)?),
            "--no-verify" => no_verify = true,
            "-p" | "--parallelism" => {
                parallelism = super::verify::number(flag, &flags.value(&arg)?, 1, 1024)?
            }
            "--json" => json = true,
            "--report" => report = Some(PathBuf::from(flags.value(&arg)?)),
            _ => flags.keep(arg),
        }
    }
    let run = match run_args::parse(&flags.into_rest()).map_err(|e| e.to_string())? {
        RunCommand::Help => return Ok(None),
        RunCommand::Run(run) => *run,
    };
    if run.jobmanager.is_some() {
        return Err(
            "ferry drill reads the clusters and stores itself; --jobmanager is not accepted".into(),
        );
    }
    check_job(&run.config)?;
    let mut locations = Vec::new();
    for f in &from {
        let loc = StorageLocation::parse(f)
            .map_err(|e| format!("invalid value '{f}' for --from: {}", e.reason))?;
        locations.push(loc);
    }
    if locations.is_empty() {
        locations = run.config.state_replicas.clone();
    }
    if locations.is_empty() {
        return Err("no DR state store: give --from LOCATION (where a takeover reads the state, e.g. the DR bucket) or set job.stateReplicas".into());
    }
    let job = match job_id {
        Some(id) => Some(
            id.parse::<JobId>()
                .map_err(|e| format!("invalid value for --job-id: {e}"))?,
        ),
        None if run.config.ha.kind == HaKind::Lease => Some(run.config.ha_job_id()),
        None => None,
    };
    let tables = rpo::table_pairs(&run.config)?;
    if let Some(asked) = &verify_tables {
        for t in asked {
            if !tables.iter().any(|p| &p.sink == t) {
                let known: Vec<&str> = tables.iter().map(|p| p.sink.as_str()).collect();
                return Err(format!(
                    "invalid value '{t}' for --verify-tables: not a sink table of this job (its sink tables: {})",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(Some(DrillArgs {
        max_dr_lag: max_dr_lag.unwrap_or_else(|| default_max_dr_lag(&run.config)),
        max_rpo: max_rpo.unwrap_or_else(|| default_max_rpo(&run.config)),
        run,
        from: locations,
        job,
        verify_tables,
        no_verify,
        parallelism,
        json,
        report,
    }))
}

fn table_list(value: &str) -> Result<Vec<String>, String> {
    let tables: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    if tables.is_empty() {
        return Err(format!(
            "invalid value '{value}' for --verify-tables: expected sink table names separated by commas (or --no-verify)"
        ));
    }
    Ok(tables)
}

/// A drill needs a Kudu source and a Kudu sink.
fn check_job(cfg: &JobConfig) -> Result<(), String> {
    if cfg.sink == SinkKind::Kafka || cfg.source == SourceKind::Kafka {
        return Err("ferry drill checks a Kudu-to-Kudu job (sink positions, verify, history); this job's source or sink is Kafka".into());
    }
    Ok(())
}

/// What every section reads: the job, both clusters, its tables.
pub(crate) struct Ctx<'a> {
    args: &'a DrillArgs,
    source: KuduClient,
    sink: KuduClient,
    tables: Vec<rpo::TablePair>,
}

impl Ctx<'_> {
    fn cfg(&self) -> &JobConfig {
        &self.args.run.config
    }

    fn clock(&self) -> ferry_engine::SourceClock {
        crate::wiring::source_clock(self.cfg())
    }
}

/// Runs every check and returns the report (a failed check is in the
/// report, not an error).
pub async fn drill(args: &DrillArgs) -> Result<DrillReport> {
    let (source, sink) = crate::wiring::clients(&args.run.config)?;
    let tables = rpo::table_pairs(&args.run.config).map_err(anyhow::Error::msg)?;
    let ctx = Ctx {
        args,
        source,
        sink,
        tables,
    };
    // Fresh connections first, as a failover would make them.
    let connect = steps::connect(&ctx).await;
    let (rpo, positions) = rpo::section(&ctx).await;
    let dr = dr_store::section(&ctx).await;
    let standby = lease::section(&ctx).await;
    let verify = verify_cut::section(&ctx, &positions).await;
    let steps = steps::section(connect, &dr.timing, &standby);
    Ok(DrillReport::new(
        ctx.cfg(),
        rpo,
        verify,
        dr.section,
        standby.section,
        steps,
    ))
}

/// `ferry drill`: parses, drills, prints, writes the report, exit code.
pub fn command(raw: &[String]) -> ExitCode {
    if raw.iter().any(|a| a == "--switchover") {
        return switchover::command(raw);
    }
    let (args, runtime) = match super::prepare(parse(raw), help, "drill") {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    let report = match runtime.block_on(drill(&args)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {}", crate::error_line(&e));
            return ExitCode::FAILURE;
        }
    };
    let json = match serde_json::to_string_pretty(&report) {
        Ok(json) => json,
        Err(e) => {
            eprintln!("error: cannot encode the report: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        crate::say!("{json}");
    } else {
        crate::say!("{}", report.to_string().trim_end());
    }
    if let Some(path) = &args.report {
        if let Err(e) = std::fs::write(path, format!("{json}\n")) {
            eprintln!(
                "error: cannot write the report to '{}': {e}",
                path.display()
            );
            return ExitCode::FAILURE;
        }
    }
    if report.healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `ferry drill --help`.
pub fn help() -> String {
    "Prove, without stopping replication, that the job's DR setup works, and report it: the RPO now
per table, a verification of every table at one consistent cut, the DR state store's freshness
and a dry-run restore from it, the lease as observed, and the measured time of each step a
failover would take (with the estimated RTO). Nothing is written to the clusters or the stores.

Usage: ferry drill [--from LOCATION]... [--job-id ID] [--max-dr-lag D] [--max-rpo D]
                   [--verify-tables T1,T2 | --no-verify] [-p N] [--json] [--report FILE]
                   <ferry run options>

      --from LOCATION      the DR state store a takeover reads (repeatable)
                           [default: job.stateReplicas]
      --job-id ID          only this job's state [default: the HA job id with
                           high-availability.type lease, else any one job's]
      --max-dr-lag D       the DR store is STALE when its newest state is older than D, or older
                           than the primary store's newest by more than D
                           [default: 2 x job.checkpointingIntervalMillis + 60 s]
      --max-rpo D          a table fails when its RPO is over D
                           [default: 2 x job.discoveryIntervalSeconds + 60 s]
      --verify-tables LIST only verify these sink tables (comma-separated)
      --no-verify          skip the verification (the costliest check: tablet-server checksums
                           of every table on both clusters)
  -p, --parallelism N      key ranges checksummed at the same time [default: 4]
      --json               print the report as JSON
      --report FILE        also write the JSON report to FILE

The job's options are `ferry run`'s (--config FILE, --job.*, -D s3.*); docs/dr.md (Drills)
explains each check and the JSON.

Exit codes: 0 every check passed, 1 a check failed (STALE DR store, tables differ, RPO over
--max-rpo, lease not renewed, restore would fail) or a runtime failure, 2 usage error.

A real planned switchover and back, timed:

Usage: ferry drill --switchover --jobmanager HOST:PORT --job-id ID [--hold D] [--report FILE]
                   [--json] [ferry cutover's options] <ferry run options of the job>

  `ferry cutover` of the running job to the sink cluster (drain check, stop with a drained
  savepoint, verify), the reverse job in this process (no snapshot), --hold D [default: 0],
  the same cutover back, then the original direction again in this process, where it keeps
  running. `Drill:` lines on stdout say when the application must stop and may resume its
  writes. The report (human, --json one line, --report FILE; cutover reports beside it) has
  each step's time, each switch's write outage (drain check start to the new job's first
  window), the RPO (0: drained and verified equal) and the final state. Not for jobs with
  high-availability.type, Kafka or several tables. Exit codes: 0 the drill passed and the
  final job ended cleanly, 1 the drill stopped (the report says what runs) or a failure,
  2 usage error.
"
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = [
            "--job.sourceMasterAddresses",
            "a:7051",
            "--job.sinkMasterAddresses",
            "b:7051",
            "--job.tableName",
            "t",
            "--job.checkpointsDirectory",
            "/tmp/chk",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    #[test]
    fn the_dr_store_defaults_to_the_state_replicas_and_is_required() {
        let err = parse(&args(&[])).unwrap_err();
        assert!(err.contains("--from"), "{err}");
        let parsed = parse(&args(&["--job.stateReplicas", "/tmp/dr"]))
            .unwrap()
            .unwrap();
        assert_eq!(parsed.from.len(), 1);
        assert!(parsed.from[0].to_string().contains("/tmp/dr"));
        let parsed = parse(&args(&["--from", "/tmp/other"])).unwrap().unwrap();
        assert!(parsed.from[0].to_string().contains("/tmp/other"));
    }

    #[test]
    fn thresholds_default_from_the_job_and_parse_durations() {
        let parsed = parse(&args(&[
            "--from",
            "/tmp/dr",
            "--job.checkpointingIntervalMillis",
            "5000",
            "--job.discoveryIntervalSeconds",
            "10",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(parsed.max_dr_lag, Duration::from_secs(70));
        assert_eq!(parsed.max_rpo, Duration::from_secs(80));
        let parsed = parse(&args(&["--from", "/tmp/dr", "--max-dr-lag", "3 s"]))
            .unwrap()
            .unwrap();
        assert_eq!(parsed.max_dr_lag, Duration::from_secs(3));
        let err = parse(&args(&["--from", "/tmp/dr", "--max-dr-lag", "soon"])).unwrap_err();
        assert!(
            err.contains("--max-dr-lag") && err.contains("soon"),
            "{err}"
        );
    }

    #[test]
    fn bad_flags_and_tables_are_named() {
        let err = parse(&args(&["--from", "/tmp/dr", "--verify-tables", "nope"])).unwrap_err();
        assert!(err.contains("'nope'") && err.contains("t"), "{err}");
        let err = parse(&args(&["--from", "/tmp/dr", "--bogus"])).unwrap_err();
        assert!(err.contains("bogus"), "{err}");
        let err = parse(&args(&["--from", "/tmp/dr", "--jobmanager", "h:1"])).unwrap_err();
        assert!(err.contains("--jobmanager"), "{err}");
        assert!(parse(&args(&["--help"])).unwrap().is_none());
    }
}
