//! `ferry failback`: after an unplanned failover (the source cluster was
//! lost, the applications moved to the sink, the new primary), bring the
//! old source back as the copy without copying it again.
//!
//! Run with the *forward* job's configuration (source = the old primary,
//! sink = the new primary). The divergence point is the sink position of
//! the sink table on the new primary: `last_end` L (the old primary's last
//! replicated instant) and `last_end_sink_time` S (the new primary's time
//! at which it equalled the old primary at L). Then:
//!
//! 1. refusals, each before anything is written: the old primary still
//!    takes writes (changes between two probes), its history or the new
//!    primary's no longer reaches L / S, a table recreated on either side,
//!    a failback of this divergence point already done;
//! 2. the **salvage** (`ferry_verify::salvage`): the old primary's rows
//!    changed after L that never reached the new primary, with their value
//!    then and now and when they changed, to JSON Lines in the state store
//!    (`<checkpointsDirectory>/<job>/failback-<L>/`);
//! 3. the **rewind** of the old primary to L (`ferry_verify::rewind`);
//! 4. a verification that the old primary now equals the new primary at
//!    S, written as a cutover report: `ferry run --fromCutover REPORT` with
//!    the reverse job's configuration starts new primary → old primary by
//!    diff scans from S, no snapshot (this verb prints the command).
//!
//! A rerun after a crash continues (the salvage is kept once written; the
//! rewind is idempotent); after a completed failback it is refused.

mod steps;

use crate::cutover_report::{CutoverReport, CutoverSide, CUTOVER_REPORT_VERSION};
use crate::run_args::{self, RunArgs, RunCommand};
use anyhow::Context;
use ferry_verify::rewind::{check_history, rewind, RewindError, RewindOptions, RewindReport};
use ferry_verify::salvage::{salvage, SalvageOptions, SalvageSummary};
use ferry_verify::{At, Side, VerifyOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use steps::{FailbackDir, Failure};

/// `ferry failback` arguments.
#[derive(Debug)]
pub struct FailbackArgs {
    /// The forward job (source = old primary, sink = new primary).
    pub run: RunArgs,
    /// `--report`: where the cutover report for the reverse job goes.
    pub report: PathBuf,
    /// `--dry-run`: refusals, salvage and rewind counted, nothing written.
    pub dry_run: bool,
    /// `--json`: the summary as JSON.
    pub json: bool,
    /// `--slices`: parts of the outage each salvaged row is dated to.
    pub slices: u32,
    /// `--probe-seconds`: how long the old primary is watched for writes.
    pub probe: Duration,
    /// `--history-max-age-sec`: the clusters' history retention.
    pub history_max_age: Duration,
}

/// Parses `args`; `Ok(None)` for `--help`. Errors are usage errors.
pub fn parse(args: &[String]) -> Result<Option<FailbackArgs>, String> {
    let mut report = PathBuf::from("failback-report.json");
    let (mut dry_run, mut json) = (false, false);
    let mut slices = 20u32;
    let mut probe = Duration::from_secs(3);
    let mut history_max_age = ferry_verify::rewind::DEFAULT_HISTORY_MAX_AGE;
    let mut flags = super::flags::Flags::new(args);
    let number = |flag: &str, v: &str, min: u64, max: u64| -> Result<u64, String> {
        v.parse::<u64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| {
                format!("invalid value '{v}' for {flag}: expected a whole number {min}..={max}")
            })
    };
    while let Some(arg) = flags.next_arg() {
        let flag = arg.flag();
        match flag {
            "-h" | "--help" => return Ok(None),
            "--report" => report = PathBuf::from(flags.value(&arg)?),
            "--dry-run" => dry_run = true,
            "--json" => json = true,
            "--slices" => slices = number(flag, &flags.value(&arg)?, 1, 10_000)? as u32,
            "--probe-seconds" => {
                probe = Duration::from_secs(number(flag, &flags.value(&arg)?, 1, 600)?)
            }
            "--history-max-age-sec" => {
                history_max_age =
                    Duration::from_secs(number(flag, &flags.value(&arg)?, 1, u64::MAX >> 24)?)
            }
            _ => flags.keep(arg),
        }
    }
    let run = match run_args::parse(&flags.into_rest()).map_err(|e| e.to_string())? {
        RunCommand::Help => return Ok(None),
        RunCommand::Run(run) => *run,
    };
    if run.jobmanager.is_some() {
        return Err(
            "ferry failback works on the clusters itself; --jobmanager is not accepted".into(),
        );
    }
    crate::wiring::kudu_table_pair(&run.config, "failback")?;
    Ok(Some(FailbackArgs {
        run,
        report,
        dry_run,
        json,
        slices,
        probe,
        history_max_age,
    }))
}

/// What `ferry failback` did.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailbackSummary {
    /// The old primary's last replicated instant (raw hybrid time).
    pub last_end: u64,
    /// The new primary's time equal to it (raw hybrid time).
    pub sink_time: u64,
    /// Where the salvage and the records are.
    pub directory: String,
    /// The salvage (`None`: kept from an earlier, interrupted run).
    pub salvage: Option<SalvageSummary>,
    /// The rewind of the old primary.
    pub rewind: RewindReport,
    /// Whether the old primary equals the new primary at the sink time.
    pub equal: bool,
    /// How long the reverse job may wait before the new primary's history
    /// no longer reaches the sink time, in ms.
    pub headroom_ms: u64,
    /// The cutover report for the reverse job (not with `--dry-run`).
    pub report: Option<String>,
    /// Whether nothing was written.
    pub dry_run: bool,
}

/// The failback (see the module docs).
/// A rewind error as the failback reports it: history past the
/// divergence point is a refusal with the way out.
fn history(e: RewindError, who: &str) -> Failure {
    match e {
        RewindError::HistoryExpired { .. } => Failure::Refused(format!(
            "{e}. The {who}'s history no longer reaches the divergence point: the outage was longer than --tablet_history_max_age_sec allows a failback for; make the old primary a copy afresh (drop its table, start the reverse job with a snapshot)"
        )),
        e => Failure::Failed(anyhow::Error::new(e)),
    }
}

async fn failback(args: &FailbackArgs) -> Result<FailbackSummary, Failure> {
    let cfg = &args.run.config;
    let (old, new) = crate::wiring::clients(cfg)?;
    let (table, sink_table) = (cfg.table_name.clone(), cfg.sink_table_name());
    let position = steps::divergence(&old, &new, cfg, &sink_table).await?;
    let (last_end, sink_time) = (position.last_end, position.sink_time);
    let dir = FailbackDir::open(&args.run, &position.job_id, last_end).await?;
    if let Some(done) = dir.done().await? {
        return Err(Failure::Refused(format!(
            "a failback from this divergence point (last replicated instant {last_end}) was already done: {done}; its report is in {}. Run the reverse job with --fromCutover; a second failback would undo its writes",
            dir.location()
        )));
    }
    let timeout = Duration::from_secs(30);
    let old_then = check_history(&old, &table, last_end, timeout)
        .await
        .map_err(|e| history(e, "old primary"))?;
    let new_then = check_history(&new, &sink_table, sink_time, timeout)
        .await
        .map_err(|e| history(e, "new primary"))?;
    steps::refuse_if_recreated(
        (&table, old_then.held_rows),
        (&sink_table, new_then.held_rows),
    )?;
    steps::refuse_if_writing(&old, &table, args.probe).await?;
    let salvage_summary = salvage_step(
        args,
        &dir,
        (&old, &table),
        (&new, &sink_table),
        last_end,
        timeout,
    )
    .await?;
    let mut opts = RewindOptions::new(old.clone(), table.clone(), last_end);
    opts.dry_run = args.dry_run;
    opts.history_max_age = args.history_max_age;
    let rewound = rewind(opts).await.map_err(|e| history(e, "old primary"))?;
    let headroom = ferry_verify::rewind::headroom(sink_time, new_then.now, args.history_max_age)
        .as_millis() as u64;
    let mut summary = FailbackSummary {
        last_end: last_end.raw(),
        sink_time: sink_time.raw(),
        directory: dir.location(),
        salvage: salvage_summary,
        equal: rewound.equal_after,
        rewind: rewound,
        headroom_ms: headroom,
        report: None,
        dry_run: args.dry_run,
    };
    if args.dry_run {
        return Ok(summary);
    }
    let verify = verify_rewound((&old, &table), (&new, &sink_table), sink_time).await?;
    summary.equal = verify.equal;
    let report = cutover_report(
        &position,
        dir.location(),
        (&old, &table),
        (&new, &sink_table),
        verify,
    );
    report
        .save(&args.report)
        .map_err(|e| Failure::Failed(anyhow::Error::new(e)))?;
    summary.report = Some(args.report.display().to_string());
    if report.equal {
        dir.finish(&report).await?;
    }
    Ok(summary)
}

/// The rewound old primary now against the new primary at `sink_time`.
async fn verify_rewound(
    (old, table): (&kudu_client::KuduClient, &String),
    (new, sink_table): (&kudu_client::KuduClient, &String),
    sink_time: kudu_client::HybridTime,
) -> Result<ferry_verify::VerifyReport, Failure> {
    let side = |client: &kudu_client::KuduClient, table: &str, at| Side {
        client: client.clone(),
        table: table.to_owned(),
        at,
    };
    Ok(ferry_verify::verify(VerifyOptions::new(
        side(old, table, At::Now),
        side(new, sink_table, At::Time(sink_time)),
    ))
    .await
    .context("verifying the rewound old primary against the new primary")?)
}

/// Salvages the old primary's unreplicated writes into the failback's
/// directory (once: a rerun after a crash reuses what was kept).
async fn salvage_step(
    args: &FailbackArgs,
    dir: &FailbackDir,
    (old, table): (&kudu_client::KuduClient, &String),
    (new, sink_table): (&kudu_client::KuduClient, &String),
    last_end: kudu_client::HybridTime,
    timeout: Duration,
) -> Result<Option<SalvageSummary>, Failure> {
    if dir.salvaged().await? {
        return Ok(None);
    }
    let opts = SalvageOptions {
        old: old.clone(),
        old_table: table.clone(),
        new: new.clone(),
        new_table: sink_table.clone(),
        since: last_end,
        until: None,
        slices: args.slices,
        timeout,
    };
    let mut lines = Vec::new();
    let summary = salvage(&opts, |row| {
        serde_json::to_writer(&mut lines, &row).map_err(|e| e.to_string())?;
        lines.push(b'\n');
        Ok(())
    })
    .await
    .context("salvaging the old primary's unreplicated writes")?;
    if !args.dry_run {
        dir.keep_salvage(table, lines, &summary).await?;
    }
    Ok(Some(summary))
}

/// The cutover report the reverse job starts from: the new primary is its
/// source, from the sink time at which it equalled the old primary.
fn cutover_report(
    position: &steps::Divergence,
    directory: String,
    (old, table): (&kudu_client::KuduClient, &String),
    (new, sink_table): (&kudu_client::KuduClient, &String),
    verify: ferry_verify::VerifyReport,
) -> CutoverReport {
    let (last_end, sink_time) = (position.last_end, position.sink_time);
    CutoverReport {
        version: CUTOVER_REPORT_VERSION,
        job_id: position.job_id.clone(),
        savepoint: directory,
        source: CutoverSide {
            masters: old.master_addrs().to_vec(),
            table: table.clone(),
            table_id: Some(position.old_table_id.clone()),
        },
        sink: CutoverSide {
            masters: new.master_addrs().to_vec(),
            table: sink_table.clone(),
            table_id: Some(position.new_table_id.clone()),
        },
        final_end: ferry_engine::SourceTime::from_raw(last_end.raw()),
        cutover_time: ferry_engine::SinkTime::from_raw(sink_time.raw()),
        drained: true,
        equal: verify.equal,
        rpo_ms: 0,
        verify,
        created_at_ms: ferry_engine::time::now_ms(),
    }
}

fn print(summary: &FailbackSummary, json: bool) {
    if json {
        match serde_json::to_string_pretty(summary) {
            Ok(text) => crate::say!("{text}"),
            Err(e) => eprintln!("error: cannot encode the summary: {e}"),
        }
        return;
    }
    let verb = if summary.dry_run { "would be " } else { "" };
    crate::say!(
        "Divergence point: old primary {} = new primary {}",
        summary.last_end,
        summary.sink_time
    );
    match &summary.salvage {
        Some(s) => crate::say!(
            "Salvage: {} unreplicated row(s) {verb}kept in {} ({} changed rows had reached the new primary, {} were changed back); each dated to within {} ms",
            s.salvaged, summary.directory, s.reached, s.unchanged, s.precision_ms
        ),
        None => crate::say!("Salvage: kept from an earlier run in {}", summary.directory),
    }
    crate::say!(
        "Rewind of the old primary: {} row(s) {verb}written back, {} {verb}deleted",
        summary.rewind.rewritten,
        summary.rewind.deleted
    );
    let hours = summary.headroom_ms as f64 / 3_600_000.0;
    crate::say!("History headroom: the reverse job must start within {hours:.1} h (new primary's --tablet_history_max_age_sec)");
    if let Some(report) = &summary.report {
        crate::say!(
            "Old primary {} the new primary at the divergence point.",
            if summary.equal {
                "equals"
            } else {
                "DIFFERS from"
            }
        );
        crate::say!("Start the reverse replication (new primary -> old primary), diff scans from the divergence point, no snapshot:");
        crate::say!("  ferry run --config REVERSE_JOB.toml --fromCutover {report}");
    }
}

/// `ferry failback`: parses, fails back, prints, maps to the exit code.
pub fn command(args: &[String]) -> ExitCode {
    let (parsed, runtime) = match super::prepare(parse(args), help, "failback") {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    match runtime.block_on(failback(&parsed)) {
        Ok(summary) => {
            print(&summary, parsed.json);
            if summary.equal || summary.dry_run {
                ExitCode::SUCCESS
            } else {
                eprintln!("error: the old primary does not equal the new primary at the divergence point after the rewind; do not start the reverse job from this report");
                ExitCode::FAILURE
            }
        }
        Err(Failure::Refused(why)) => super::usage_error(&why, "ferry failback --help"),
        Err(Failure::Failed(e)) => {
            eprintln!("error: {}", crate::error_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// `ferry failback --help`.
pub fn help() -> String {
    "Bring the old source back after an unplanned failover, without copying it again: salvage its
unreplicated writes, rewind it to the last replicated instant with its own history, and prepare
the reverse replication (new primary -> old primary) by diff scans, no snapshot.

Usage: ferry failback [--report FILE] [--dry-run] [--json] [--slices N] [--probe-seconds S]
                      [--history-max-age-sec S] <ferry run options of the FORWARD job>

The forward job's configuration names the old primary (job.sourceMasterAddresses) and the new
primary (job.sinkMasterAddresses); one table. The divergence point is the sink position of the
sink table on the new primary (job.positionTable): last_end (old primary) and its sink time (new
primary). Stop the old primary's writers first (fence it: its applications must write to the new
primary only); the failback refuses while the old primary's table changes.

  --report FILE              the cutover report for `ferry run --fromCutover` [default:
                             failback-report.json]
  --dry-run                  check, count the salvage and the rewind; write nothing
  --json                     the summary as JSON
  --slices N                 Kudu's diff scans do not date a change: the outage is cut into N equal
                             parts, each diff-scanned, and a salvaged row is dated to its part
                             (the precision is printed) [default: 20]
  --probe-seconds S          watch the old primary for writes this long [default: 3]
  --history-max-age-sec S    the clusters' --tablet_history_max_age_sec, for the headroom
                             [default: 604800]

Salvage: every row of the old primary changed after last_end whose value there differs from
the new primary's (rows the in-flight window copied are left out), with its key, its value then
(at last_end), now, on the new primary, and when it changed, as JSON Lines in
<job.checkpointsDirectory>/<job id>/failback-<last_end>/salvage-<table>.jsonl, for a person to
review and re-apply on the new primary.

Refused (exit code 2, nothing written): the old primary still takes writes; the divergence point
is older than either cluster's history (--tablet_history_max_age_sec: make a fresh copy
instead); a table recreated on either side; a failback of this divergence point already done.
A run interrupted after the salvage continues where it stopped.

Exit codes: 0 done (or the dry run), 1 failure, 2 usage error or refusal.
docs/dr.md, \"Failback after an unplanned failover\", has the runbook.
"
    .to_string()
}
