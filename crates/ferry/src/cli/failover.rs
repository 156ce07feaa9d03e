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

use crate::registry::JobEntry;
use crate::run_args::{self, RunArgs, RunCommand};
use crate::submit::StartExtras;
use anyhow::{bail, Context, Result};
use ferry_engine::checkpoint::{JobId, LoadedState, StateStore, StorageLocation, StoreResolver};
use ferry_engine::config::HaKind;
use ferry_engine::lease::{find_newest_reusing, sort_newest_first, FoundState, Search};
use ferry_engine::time::now_ms;
use ferry_engine::{JobStatus, SourceClock};
use kudu_client::KuduClient;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// `high-availability.type lease`, else any job's.
    pub job: Option<JobId>,
    /// Only report.
    pub dry_run: bool,
    /// Report as JSON.
    pub json: bool,
    /// `--report`: only print the data RPO of a failover now.
    pub report: bool,
}

/// Parses `args` (everything after the verb); `Ok(None)` for `--help`.
/// Errors are usage errors (exit code 2).
pub fn parse(args: &[String], verb: &str) -> Result<Option<DrArgs>, String> {
    let mut from = Vec::new();
    let mut job_id = None;
    let (mut dry_run, mut json, mut report) = (false, false, false);
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
        None if run.config.ha.kind == HaKind::Lease => Some(run.config.ha_job_id()),
        None => None,
    };
    Ok(Some(DrArgs {
        run,
        from: locations,
        job,
        dry_run,
        json,
        report,
    }))
}

/// The store a location lives in (`s3://` through the process's `s3.*`
/// settings); the error names the location, never a secret.
pub fn store_for(
    resolver: &dyn StoreResolver,
    location: &StorageLocation,
) -> Result<Arc<dyn StateStore>> {
    // Not `?` on the error itself: its text is already complete.
    resolver.open(location).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Searches every location; states already in `known` are not read again.
pub async fn search_all(
    resolver: &dyn StoreResolver,
    from: &[StorageLocation],
    job: Option<JobId>,
    known: &[FoundState],
) -> Result<Search> {
    let mut all = Search::default();
    for location in from {
        let store = store_for(resolver, location)?;
        let search = find_newest_reusing(store.as_ref(), location, job, known).await?;
        all.valid.extend(search.valid);
        all.skipped.extend(search.skipped);
        all.listed_in += search.listed_in;
        all.reused += search.reused;
    }
    sort_newest_first(&mut all.valid);
    all.newest = all.valid.first().cloned();
    Ok(all)
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

/// Timings of a takeover, printed when the first window completes.
/// [`Rto::default`] records but prints nothing (a plain `ferry run`).
#[derive(Debug, Clone, Default)]
pub struct Rto {
    /// Steps before the job started, in order, with their durations.
    pub steps: Vec<(&'static str, Duration)>,
    print: bool,
}

impl Rto {
    /// A breakdown that is printed.
    pub fn printed() -> Self {
        Rto {
            steps: Vec::new(),
            print: true,
        }
    }

    /// Adds a step.
    pub fn step(&mut self, name: &'static str, took: Duration) {
        self.steps.push((name, took));
    }

    /// Watches `entry` and prints the breakdown once its first window
    /// completed (`began`: when the takeover began).
    pub fn report_when_first_window_completes(
        self,
        entry: &Arc<JobEntry>,
        began: Instant,
        json: bool,
    ) {
        if !self.print {
            return;
        }
        let entry = entry.clone();
        let started = Instant::now();
        tokio::spawn(async move {
            let metrics = entry.handle.metrics().clone();
            while metrics.snapshot().windows_completed == 0 {
                if entry.status().is_terminal() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut rto = self;
            rto.step("first window completed", started.elapsed());
            let total = began.elapsed();
            let ms = |d: Duration| d.as_millis() as u64;
            if json {
                let steps: serde_json::Map<String, serde_json::Value> = rto
                    .steps
                    .iter()
                    .map(|(n, d)| (n.replace(' ', "_"), ms(*d).into()))
                    .collect();
                let line = serde_json::json!({ "rtoMs": ms(total), "steps": steps });
                crate::say!("{line}");
            } else {
                let parts: Vec<String> = rto
                    .steps
                    .iter()
                    .map(|(n, d)| format!("{n} {} ms", ms(*d)))
                    .collect();
                crate::say!("RTO: {} ms ({})", ms(total), parts.join(", "));
            }
        });
    }
}

/// Prints a search's result (human or JSON).
/// `clock` reads the states' source times as wall-clock time.
pub fn print_search(search: &Search, from: &[StorageLocation], clock: SourceClock, json: bool) {
    let now = now_ms();
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
            "skipped": skipped,
        });
        crate::say!("{body}");
        return;
    }
    let places: Vec<String> = from.iter().map(|l| l.to_string()).collect();
    crate::say!(
        "Searched {}: {} valid state(s), {} skipped",
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
            if let Some(end) = f.window_end() {
                crate::say!(
                    "  window end: {end} ({}; {} ms behind now)",
                    clock.name(),
                    now.saturating_sub(clock.epoch_millis(end))
                );
            }
            crate::say!(
                "  age: {} ms (RPO of this copy: written at {} ms since the epoch)",
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

/// Connects to both clusters and opens the tables (the sink table may not
/// exist yet: `job.createTable` makes it).
pub async fn connect(run: &RunArgs) -> Result<(KuduClient, KuduClient)> {
    let (source, sink) = crate::submit::clients(&run.config)?;
    if !run.config.tables.is_single() {
        // A job of several tables finds its tables when it starts.
        return Ok((source, sink));
    }
    source
        .open_table(&run.config.table_name)
        .await
        .with_context(|| format!("opening source table '{}'", run.config.table_name))?;
    if let Err(e) = sink.open_table(&run.config.sink_table_name()).await {
        tracing::debug!(error = %e, "sink table not open yet");
    }
    Ok((source, sink))
}

/// `ferry failover`.
pub async fn failover(args: DrArgs) -> Result<Outcome> {
    if args.report {
        return report::report(&args).await;
    }
    let began = Instant::now();
    let mut rto = Rto::printed();
    let ha = args.run.config.ha.kind == HaKind::Lease;
    let claimed = if ha && !args.dry_run {
        Some(super::standby::claim(&args.run, &mut rto).await?)
    } else {
        None
    };
    let t = Instant::now();
    let resolver = crate::submit::resolver(&args.run.process);
    let search = search_all(resolver.as_ref(), &args.from, args.job, &[]).await?;
    rto.step("find", search.listed_in);
    rto.step("verify", t.elapsed().saturating_sub(search.listed_in));
    print_search(
        &search,
        &args.from,
        crate::submit::source_clock(&args.run.config),
        args.json,
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
        restore: Some(LoadedState {
            location: found.location.clone(),
            state: found.state.clone(),
        }),
        clients: Some(clients),
        ..StartExtras::default()
    };
    crate::say!("Starting job {job_id} from {}", found.location);
    let json = args.json;
    let status = match claimed {
        Some(claimed) => claimed.run(args.run, extras, rto, began, json).await?,
        None => {
            crate::run::run_with(args.run, extras, |entry| {
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
