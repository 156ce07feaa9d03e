//! `ferry failover`: the reference DR pattern's failover script, done
//! right. It finds the newest *complete and valid* savepoint or checkpoint
//! of the job in one or more stores (`--from`, default
//! `job.checkpointsDirectory`) — chosen by the window end the state
//! records, never by name or listing order, torn and damaged directories
//! skipped with a warning naming each — prints what it found (path, window
//! end, age = RPO of that copy), and starts the job from it in this process
//! under the state's job id, so checkpoints continue where they were. It
//! prints an RTO breakdown (find, verify, connect, first window completed).
//!
//! Exit codes: 0 the job ran and ended cleanly (or `--dry-run` found a
//! state), 1 a runtime failure (store unreachable, the job failed), 2 a
//! usage or configuration error, 3 no valid state was found.
//!
//! `--report` only prints the data RPO of an unplanned failover (`report`).
//!
//! The flag parsing and the search are shared with `ferry standby`.

pub mod report;
pub mod to;

use crate::run_args::{self, RunArgs, RunCommand};
use crate::server::holder::run_holding;
use crate::server::lease::standby_for;
use crate::server::rto::Rto;
use crate::server::submit::StartExtras;
use crate::wiring::connect;
use anyhow::{bail, Result};
use ferry_engine::checkpoint::{JobId, StorageLocation};
use ferry_engine::lease::{FoundState, LeaseRecord, Search, CLOCK_SLACK};
use ferry_engine::time::now_ms;
use ferry_engine::{JobStatus, SourceClock};
use std::process::ExitCode;
use std::time::Instant;

/// Exit code of `ferry failover` when no valid state was found.
pub const EXIT_NOTHING_FOUND: u8 = 3;

/// `ferry failover` / `ferry standby` arguments: `ferry run`'s plus where
/// to look for state.
#[derive(Debug)]
pub struct DrArgs {
    /// The job, as `ferry run` would take it.
    pub run: RunArgs,
    /// Where to look for state (`--from`, repeatable).
    pub from: Vec<StorageLocation>,
    /// Whose state: `--job-id`, else the HA job id with
    /// `high-availability.type lease` or `zookeeper`, else any job's.
    pub job: Option<JobId>,
    /// Only report.
    pub dry_run: bool,
    /// Report as JSON.
    pub json: bool,
    /// `--report`: only print the data RPO of a failover now.
    pub report: bool,
    /// `--to consistent` / `--to-time T`: only rewind the sink tables to
    /// one cut (`to`).
    pub to: Option<to::Target>,
}

/// Parses `args` (everything after the verb); `Ok(None)` for `--help`.
/// Errors are usage errors (exit code 2).
pub fn parse(args: &[String], verb: &str) -> Result<Option<DrArgs>, String> {
    let mut from = Vec::new();
    let mut job_id = None;
    let (mut dry_run, mut json, mut report) = (false, false, false);
    let mut rewind_to = None;
    let mut flags = super::flags::Flags::new(args);
    while let Some(arg) = flags.next_arg() {
        let flag = arg.flag();
        match flag {
            "-h" | "--help" => return Ok(None),
            "--from" => from.push(flags.value(&arg)?),
            "--job-id" => job_id = Some(flags.value(&arg)?),
            "--dry-run" if verb == "failover" => dry_run = true,
            "--json" if verb == "failover" => json = true,
            "--report" if verb == "failover" => report = true,
            "--to" if verb == "failover" => {
                rewind_to = Some(to::Target::parse_to(&flags.value(&arg)?)?)
            }
            "--to-time" if verb == "failover" => {
                rewind_to = Some(to::Target::parse_time(&flags.value(&arg)?)?)
            }
            _ => flags.keep(arg),
        }
    }
    let rest = flags.into_rest();
    let run = match run_args::parse(&rest).map_err(|e| e.to_string())? {
        RunCommand::Help => return Ok(None),
        RunCommand::Run(run) => *run,
    };
    if run.jobmanager.is_some() {
        return Err(format!(
            "ferry {verb} runs the job in this process; --jobmanager is not accepted"
        ));
    }
    let mut locations = Vec::new();
    for f in &from {
        let loc = StorageLocation::parse(f)
            .map_err(|e| format!("invalid value '{f}' for --from: {}", e.reason))?;
        locations.push(loc);
    }
    if locations.is_empty() {
        locations.push(run.config.checkpoints_directory.clone());
    }
    let job = match job_id {
        Some(id) => Some(
            id.parse::<JobId>()
                .map_err(|e| format!("invalid value for --job-id: {e}"))?,
        ),
        None if run.config.ha.kind.holds_lease() => Some(run.config.ha_job_id()),
        None => None,
    };
    Ok(Some(DrArgs {
        run,
        from: locations,
        job,
        dry_run,
        json,
        report,
        to: rewind_to,
    }))
}

/// What `ferry failover` did.
#[derive(Debug)]
pub enum Outcome {
    /// The job ran and ended with this status.
    Ran(JobStatus),
    /// `--dry-run`: a state was found and reported.
    Reported,
    /// No valid state anywhere.
    NothingFound,
}

/// When the previous holder of `claim`'s lease was lost, in ms since the
/// epoch: the moment its writes stopped reaching the state, so the age of
/// a copy then is its RPO (the lease wait after it changes nothing the
/// copy holds). See [`lost_at_ms`].
pub fn holder_lost_at_ms(claim: &ferry_engine::lease::Claim) -> u64 {
    let seen_ago =
        u64::try_from(claim.last_renewal_seen().elapsed().as_millis()).unwrap_or(u64::MAX);
    lost_at_ms(now_ms().saturating_sub(seen_ago), claim.holder.as_ref())
}

/// The old holder's last renewal: the time its last lease record carries
/// — its own clock, the clock its states' creation times were read on, so
/// a copy's age then compares one machine's times — unless that is past
/// `seen_ms` (when this instance first read the record, on this machine's
/// clock) by more than [`CLOCK_SLACK`]: a clock that far ahead is not
/// believed. Not when this instance noticed the loss: `ferry failover`
/// may start long after the holder died, and a claim waits a lease
/// duration on top.
pub fn lost_at_ms(seen_ms: u64, holder: Option<&LeaseRecord>) -> u64 {
    let slack = u64::try_from(CLOCK_SLACK.as_millis()).unwrap_or(u64::MAX);
    match holder {
        Some(r) if r.at_ms > 0 && r.at_ms <= seen_ms.saturating_add(slack) => r.at_ms,
        _ => seen_ms,
    }
}

/// Prints a search's result (human or JSON).
/// `clock` reads the states' source times as wall-clock time; ages and
/// the RPO are taken at `as_of_ms` (the old holder's loss, else now).
pub fn print_search(
    search: &Search,
    from: &[StorageLocation],
    clock: SourceClock,
    json: bool,
    as_of_ms: Option<u64>,
) {
    let now = as_of_ms.unwrap_or_else(now_ms);
    if json {
        let found = search.newest.as_ref().map(|f| found_json(f, clock, now));
        let skipped: Vec<_> = search
            .skipped
            .iter()
            .map(|s| serde_json::json!({ "path": s.location.to_uri(), "reason": s.reason }))
            .collect();
        let body = serde_json::json!({
            "searched": from.iter().map(|l| l.to_uri()).collect::<Vec<_>>(),
            "found": found,
            "valid": search.valid.len(),
            "unread": search.unread,
            "skipped": skipped,
        });
        crate::say!("{body}");
        return;
    }
    let places: Vec<String> = from.iter().map(|l| l.to_string()).collect();
    let unread = match search.unread {
        0 => String::new(),
        n => format!(", {n} older not read"),
    };
    crate::say!(
        "Searched {}: {} valid state(s), {} skipped{unread}",
        places.join(", "),
        search.valid.len(),
        search.skipped.len()
    );
    for s in &search.skipped {
        crate::say!("  skipped {}: {}", s.location, s.reason);
    }
    match &search.newest {
        None => crate::say!("No complete, valid savepoint or checkpoint found."),
        Some(f) => {
            let s = &f.state;
            crate::say!(
                "Newest: {} ({} {} of job {}, generation {})",
                f.location,
                s.kind,
                s.checkpoint_id,
                s.job_id,
                s.generation
            );
            let when = if as_of_ms.is_some() {
                "when the last holder was lost"
            } else {
                "now"
            };
            if let Some(end) = f.window_end() {
                let behind = if as_of_ms.is_some() { "then" } else { "now" };
                crate::say!(
                    "  window end: {end} ({}; {} ms behind {behind})",
                    clock.name(),
                    now.saturating_sub(clock.epoch_millis(end))
                );
            }
            crate::say!(
                "  age {when}: {} ms (RPO of this copy: written at {} ms since the epoch)",
                now.saturating_sub(s.created_at_ms),
                s.created_at_ms
            );
        }
    }
}

fn found_json(f: &FoundState, clock: SourceClock, now: u64) -> serde_json::Value {
    let s = &f.state;
    serde_json::json!({
        "path": f.location.to_uri(),
        "kind": s.kind.to_string(),
        "jobId": s.job_id.to_string(),
        "checkpointId": s.checkpoint_id,
        "generation": s.generation,
        "lastEndTimestamp": s.last_end_timestamp,
        "windowEnd": f.window_end(),
        "windowEndAgeMs": f.window_end().map(|e| now.saturating_sub(clock.epoch_millis(e))),
        "createdAtMs": s.created_at_ms,
        "ageMs": now.saturating_sub(s.created_at_ms),
    })
}

/// `ferry failover`.
pub async fn failover(args: DrArgs) -> Result<Outcome> {
    if args.report {
        return report::report(&args).await;
    }
    if let Some(target) = args.to {
        to::rewind_to(&args, target).await?;
        return Ok(Outcome::Reported);
    }
    let began = Instant::now();
    let mut rto = Rto::printed();
    let ha = args.run.config.ha.kind.holds_lease();
    // With a lease: claim first (the engine's Standby, as the active
    // instance), then search; without one, only search.
    let mut claimed = None;
    let mut search = crate::wiring::state_search(&args.run.process, &args.from, args.job);
    if ha && !args.dry_run {
        let mut standby = standby_for(&args.run, &args.from, args.job)?;
        let claim = crate::server::lease::claim(&mut standby, &mut rto).await?;
        claimed = Some((standby, claim));
    }
    let t = Instant::now();
    let search = match &mut claimed {
        Some((standby, _)) => standby.find_newest().await?,
        None => search.find_newest().await?,
    };
    rto.step("find", search.listed_in);
    rto.step("verify", t.elapsed().saturating_sub(search.listed_in));
    let lost_at = claimed.as_ref().map(|(_, claim)| holder_lost_at_ms(claim));
    print_search(
        &search,
        &args.from,
        crate::wiring::source_clock(&args.run.config),
        args.json,
        lost_at,
    );
    let Some(found) = search.newest else {
        return Ok(Outcome::NothingFound);
    };
    if args.dry_run {
        return Ok(Outcome::Reported);
    }
    let t = Instant::now();
    let clients = connect(&args.run).await?;
    rto.step("connect", t.elapsed());
    let job_id = if ha {
        args.run.config.ha_job_id()
    } else {
        found.state.job_id
    };
    let extras = StartExtras {
        job_id: Some(job_id),
        restore: Some(found.loaded()),
        clients: Some(clients),
        ..StartExtras::default()
    };
    crate::say!("Starting job {job_id} from {}", found.location);
    let json = args.json;
    let status = match claimed {
        Some((standby, claim)) => {
            run_holding(standby, claim, args.run, extras, rto, began, json).await?
        }
        None => {
            crate::server::run::run_with(args.run, extras, |entry| {
                rto.report_when_first_window_completes(entry, began, json)
            })
            .await?
        }
    };
    if let JobStatus::Failed { error } = &status {
        bail!("the job failed: {error}");
    }
    Ok(Outcome::Ran(status))
}

/// `ferry failover` and `ferry standby`: help, or the takeover.
pub fn command(args: &[String], verb: &str) -> ExitCode {
    let (parsed, runtime) = match super::prepare(parse(args, verb), || dr_help(verb), verb) {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    let cfg = &parsed.run.config;
    if cfg.shards > 1 && cfg.shard.is_none() {
        return super::usage_error(
            &format!("ferry {verb} takes over one job, and job.shards = {} makes this one a job run by workers: start `ferry run` with the same keys where it should run (each worker resumes its shards from their newest state in job.checkpointsDirectory, which may be a replica of the lost region's), or take over one shard with --job.shard K", cfg.shards),
            &format!("ferry {verb} --help"),
        );
    }
    if verb == "standby" && !parsed.run.config.ha.kind.holds_lease() {
        return super::usage_error(
            "ferry standby needs high-availability.type lease, zookeeper or kubernetes (the active instance must hold a lease to be taken over from)",
            "ferry standby --help",
        );
    }
    let outcome = if verb == "standby" {
        runtime
            .block_on(super::standby::standby(parsed))
            .map(Outcome::Ran)
    } else {
        runtime.block_on(failover(parsed))
    };
    match outcome {
        Ok(Outcome::Reported) | Ok(Outcome::Ran(JobStatus::Canceled)) => ExitCode::SUCCESS,
        Ok(Outcome::Ran(JobStatus::Finished { savepoint })) => {
            crate::say!("{}", super::finished_line(&savepoint));
            ExitCode::SUCCESS
        }
        Ok(Outcome::NothingFound) => ExitCode::from(EXIT_NOTHING_FOUND),
        Ok(Outcome::Ran(JobStatus::Failed { error })) => {
            eprintln!("error: the job failed: {error}");
            ExitCode::FAILURE
        }
        Ok(Outcome::Ran(other)) => {
            eprintln!("error: the job ended in state {other:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {}", crate::error_line(&e));
            super::exit_code_of(&e)
        }
    }
}

fn dr_help(verb: &str) -> String {
    let what = if verb == "failover" {
        "Find the newest complete, valid savepoint or checkpoint of the job (chosen by the window
         end it records, torn and damaged directories skipped with a warning), print it (path,
         window end, age = RPO of that copy) and start the job from it in this process, under
         the state's job id. Prints an RTO breakdown once the first window completes.

         Usage: ferry failover [--from LOCATION]... [--job-id ID] [--dry-run | --report] [--json] <ferry run options>
                ferry failover (--to consistent | --to-time T) [--dry-run] [--json] <ferry run options>

               --from LOCATION   where to look (repeatable) [default: job.checkpointsDirectory]
               --job-id ID       only this job's state [default: the HA job id with
                                 high-availability.type lease, zookeeper or kubernetes, else any job's]
               --dry-run         only report what would be started
               --report          only print the data RPO of a failover now: now − the end of the last
                                 window the sink holds (newest valid state, and the sink position if
                                 the sink cluster answers), as a span and a UTC time; starts nothing
               --json            report as JSON
               --to consistent   only rewind every sink table of the job (source lost, job stopped) to
                                 its newest cut at or before the smallest last window end of the job's
                                 tables, with the sink's own history; starts nothing
               --to-time T       the same for source time T (a raw hybrid time or a UTC time like
                                 2026-12-07T06:30:00Z): 'before the bad deploy'. Cuts come from the sink
                                 positions and the cuts table; with --dry-run only count what would be
                                 rewound; the report states the target and, per table, its cut and the
                                 rows rewritten and deleted

         With high-availability.type lease, zookeeper or kubernetes it claims the lease first (waiting for a
         live holder's lease to lapse); once fenced it stops the job and stands by for the lease
         again.

         Exit codes: 0 the job ended cleanly or --dry-run / --report found a state, 1 runtime failure,
         2 usage or configuration error, 3 no valid state found.
"
    } else {
        "Watch the job's lease (high-availability.type lease, zookeeper or kubernetes) with warm Kudu connections and the
         newest valid state pre-loaded; when the lease has not been renewed for
         high-availability.lease-duration, claim the next generation and start the job from the
         newest valid state (same job id), with REST and metrics like `ferry run`. Time during
         which the lease cannot be read never counts as silence; failed reads and claims are
         retried. Once fenced it stops the job and stands by again (job state SUSPENDED).

         Usage: ferry standby [--from LOCATION]... <ferry run options>

               --from LOCATION   where to look for state, e.g. the DR replica (repeatable)
                                 [default: job.checkpointsDirectory]

         Exit codes: 0 the job ended cleanly, 1 runtime failure, 2 usage or configuration error.
"
    };
    format!(
        "{what}
The job's options are `ferry run`'s (see `ferry run --help`); docs/dr.md has the runbook.
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(at_ms: u64) -> LeaseRecord {
        LeaseRecord {
            seq: 7,
            generation: 3,
            owner: "host:1".into(),
            at_ms,
            ..LeaseRecord::default()
        }
    }

    #[test]
    fn the_holder_is_lost_at_its_last_renewal_not_when_the_loss_was_noticed() {
        // `ferry failover` first read the record 40 s after the holder's
        // last renewal: the copy's age is taken at the renewal.
        let seen = 1_800_000_040_000;
        assert_eq!(
            lost_at_ms(seen, Some(&record(1_800_000_000_000))),
            1_800_000_000_000
        );
        // A holder clock far ahead of ours is not believed.
        assert_eq!(lost_at_ms(seen, Some(&record(seen + 60_000))), seen);
        assert_eq!(lost_at_ms(seen, Some(&record(0))), seen);
        // Nobody held the lease.
        assert_eq!(lost_at_ms(seen, None), seen);
    }
}
