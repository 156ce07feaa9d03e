//! The drill's DR store section: the newest valid state in the DR store
//! (the search a takeover makes: the states that may be the newest read
//! and checked, the newest by recorded window end), its age against now and against the
//! primary store's newest — STALE when either is over `--max-dr-lag` —
//! and a dry-run restore of it: loaded again and validated (checksum,
//! invariants), its tables opened on both clusters (same table id on the
//! source), the sink position each table would continue from, and a
//! snapshot scan of each source table at the state's window end (the
//! source's history must still reach it for the diff windows that follow).
//! Nothing is started or written.

use super::report::{mark, ms};
use super::Ctx;
use crate::cli::failover::report::{utc, utc_ms};
use ferry_engine::checkpoint::{CheckpointStore, JobState, StorageLocation, TableState};
use ferry_engine::lease::{FoundState, Search};
use ferry_engine::sink_position::{choose, Resume};
use ferry_engine::time::now_ms;
use ferry_engine::SourceTime;
use ferry_kudu::position::PositionTable;
use kudu_client::HybridTime;
use std::fmt;
use std::time::{Duration, Instant};

/// A state as the report shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateView {
    /// Its directory.
    pub path: String,
    /// `checkpoint` or `savepoint`.
    pub kind: String,
    /// Its job.
    pub job_id: String,
    /// Its checkpoint number.
    pub checkpoint_id: u64,
    /// The lease generation that wrote it.
    pub generation: u64,
    /// When it was written (the writer's clock, ms since the epoch).
    pub created_at_ms: u64,
    /// Now (this machine's clock) minus `created_at_ms`.
    pub age_ms: u64,
    /// Its last completed window end (source hybrid time, raw).
    pub last_end: Option<SourceTime>,
    /// The same in UTC.
    pub last_end_utc: Option<String>,
}

impl StateView {
    fn new(found: &FoundState, clock: ferry_engine::SourceClock, now: u64) -> Self {
        let s = &found.state;
        StateView {
            path: found.location.to_uri(),
            kind: s.kind.to_string(),
            job_id: s.job_id.to_string(),
            checkpoint_id: s.checkpoint_id,
            generation: s.generation,
            created_at_ms: s.created_at_ms,
            age_ms: now.saturating_sub(s.created_at_ms),
            last_end: s.last_end_timestamp,
            last_end_utc: s.last_end_timestamp.map(|t| utc(clock, t)),
        }
    }
}

/// One check of the dry-run restore.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    /// What was checked (`load`, `tables`, `positions`, `history`).
    pub check: String,
    /// Whether it passed.
    pub ok: bool,
    /// What was found.
    pub detail: String,
}

/// A directory the search passed over.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Skipped {
    /// The directory.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// The DR store section.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrStoreSection {
    /// Fresh and restorable.
    pub ok: bool,
    /// The newest state is older than `--max-dr-lag` (or there is none).
    pub stale: bool,
    /// Why it is stale, with the numbers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_reason: Option<String>,
    /// The DR store's locations (`--from`).
    pub searched: Vec<String>,
    /// `--max-dr-lag` in ms.
    pub max_lag_ms: u64,
    /// Valid states found in the DR store.
    pub valid: usize,
    /// Directories passed over there.
    pub skipped: Vec<Skipped>,
    /// The DR store's newest valid state.
    pub newest: Option<StateView>,
    /// The primary store's (`job.checkpointsDirectory`) newest.
    pub primary: Option<StateView>,
    /// The primary's newest `createdAtMs` minus the DR store's.
    pub behind_primary_ms: Option<u64>,
    /// The dry-run restore of `newest`.
    pub restore: Vec<Check>,
    /// Why the store could not be searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the primary store could not be searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_error: Option<String>,
}

/// How long the steps a failover repeats took here.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    /// The search of the DR store.
    pub search: Option<Duration>,
    /// Loading the newest state again.
    pub load: Option<Duration>,
}

/// The section and its timing.
pub(super) struct Measured {
    pub section: DrStoreSection,
    pub timing: Timing,
}

/// How long a store's search may take (an endpoint that does not answer
/// is retried by the object store client).
const STORE_TIMEOUT: Duration = Duration::from_secs(60);

async fn search(ctx: &Ctx<'_>, from: &[StorageLocation]) -> Result<Search, String> {
    let mut search = crate::wiring::state_search(&ctx.args.run.process, from, ctx.args.job);
    match tokio::time::timeout(STORE_TIMEOUT, search.find_newest()).await {
        Ok(found) => found.map_err(|e| ferry_engine::error::display_chain(&e)),
        Err(_) => {
            let places: Vec<String> = from.iter().map(|l| l.to_string()).collect();
            Err(format!(
                "{} did not answer within {} s",
                places.join(", "),
                STORE_TIMEOUT.as_secs()
            ))
        }
    }
}

/// Searches both stores, decides staleness, dry-runs the restore.
pub(super) async fn section(ctx: &Ctx<'_>) -> Measured {
    let max = ctx.args.max_dr_lag;
    let clock = ctx.clock();
    let mut s = DrStoreSection {
        ok: false,
        stale: false,
        stale_reason: None,
        searched: ctx.args.from.iter().map(|l| l.to_uri()).collect(),
        max_lag_ms: ms(max),
        valid: 0,
        skipped: Vec::new(),
        newest: None,
        primary: None,
        behind_primary_ms: None,
        restore: Vec::new(),
        error: None,
        primary_error: None,
    };
    let mut timing = Timing::default();
    let began = Instant::now();
    let dr = search(ctx, &ctx.args.from).await;
    timing.search = Some(began.elapsed());
    let primary = search(ctx, std::slice::from_ref(&ctx.cfg().checkpoints_directory)).await;
    let now = now_ms();
    let dr = match dr {
        Ok(dr) => dr,
        Err(e) => {
            s.error = Some(e);
            return Measured { section: s, timing };
        }
    };
    s.valid = dr.valid.len();
    s.skipped = dr
        .skipped
        .iter()
        .map(|k| Skipped {
            path: k.location.to_uri(),
            reason: k.reason.clone(),
        })
        .collect();
    s.newest = dr.newest.as_ref().map(|f| StateView::new(f, clock, now));
    match &primary {
        Ok(p) => s.primary = p.newest.as_ref().map(|f| StateView::new(f, clock, now)),
        Err(e) => s.primary_error = Some(e.clone()),
    }
    s.behind_primary_ms = match (&s.primary, &s.newest) {
        (Some(p), Some(d)) => Some(p.created_at_ms.saturating_sub(d.created_at_ms)),
        _ => None,
    };
    s.stale_reason = stale_reason(&s, max);
    s.stale = s.stale_reason.is_some();
    if let Some(found) = &dr.newest {
        let t = Instant::now();
        let loaded = load(ctx, found).await;
        timing.load = Some(t.elapsed());
        s.restore.push(loaded.check);
        if let Some(state) = loaded.state {
            s.restore.extend(restore_checks(ctx, &state).await);
        }
    }
    s.ok = !s.stale
        && s.primary_error.is_none()
        && !s.restore.is_empty()
        && s.restore.iter().all(|c| c.ok);
    Measured { section: s, timing }
}

/// Why the DR store is stale (with the numbers), if it is.
fn stale_reason(s: &DrStoreSection, max: Duration) -> Option<String> {
    let max_ms = ms(max);
    let Some(newest) = &s.newest else {
        return Some(format!(
            "no valid state in {} (a takeover would have nothing to start from)",
            s.searched.join(", ")
        ));
    };
    if newest.age_ms > max_ms {
        return Some(format!(
            "its newest state is {} ms old (written {}), over --max-dr-lag {max_ms} ms",
            newest.age_ms,
            utc_ms(newest.created_at_ms)
        ));
    }
    match s.behind_primary_ms {
        Some(behind) if behind > max_ms => Some(format!(
            "its newest state is {behind} ms older than the primary store's newest ({}), over --max-dr-lag {max_ms} ms",
            s.primary.as_ref().map(|p| p.path.as_str()).unwrap_or_default()
        )),
        _ => None,
    }
}

struct Loaded {
    check: Check,
    state: Option<JobState>,
}

/// Loads the state again, as a restore does, and validates it.
async fn load(ctx: &Ctx<'_>, found: &FoundState) -> Loaded {
    let resolver = crate::wiring::resolver(&ctx.args.run.process);
    let loaded =
        match CheckpointStore::open(&found.location, ctx.cfg().checkpoints_retained, resolver) {
            Ok(store) => store.load_location(&found.location).await,
            Err(e) => Err(e),
        };
    let (ok, detail, state) = match loaded {
        Err(e) => (false, e.to_string(), None),
        Ok(l) => match l.state.validate() {
            Err(e) => (false, format!("its invariants do not hold: {e}"), None),
            Ok(()) => (
                true,
                format!(
                    "{} loaded: checksum and invariants valid, {} table(s)",
                    l.location,
                    l.state.table_states().len()
                ),
                Some(l.state),
            ),
        },
    };
    Loaded {
        check: Check {
            check: "load".into(),
            ok,
            detail,
        },
        state,
    }
}

/// The sink table of a table of the state (older states name none: the
/// job's table pair by source name).
fn sink_of(ctx: &Ctx<'_>, t: &TableState) -> String {
    if !t.sink_table.is_empty() {
        return t.sink_table.clone();
    }
    ctx.tables
        .iter()
        .find(|p| p.source == t.table_name)
        .map(|p| p.sink.clone())
        .unwrap_or_else(|| ctx.cfg().sink_table_name())
}

/// The tables, positions and history checks of the dry-run restore.
async fn restore_checks(ctx: &Ctx<'_>, state: &JobState) -> Vec<Check> {
    let (mut tables, mut positions, mut history) = (Vec::new(), Vec::new(), Vec::new());
    let (mut tables_ok, mut positions_ok, mut history_ok) = (true, true, true);
    for t in state.table_states() {
        let sink = sink_of(ctx, &t);
        match open_pair(ctx, &t, &sink).await {
            Ok(()) => tables.push(format!("{} -> {sink}", t.table_name)),
            Err(e) => {
                tables_ok = false;
                tables.push(e);
            }
        }
        match resume_from(ctx, state, &t, &sink).await {
            Ok(line) => positions.push(line),
            Err(e) => {
                positions_ok = false;
                positions.push(e);
            }
        }
        match readable_at(ctx, &t).await {
            Ok(line) => history.push(line),
            Err(e) => {
                history_ok = false;
                history.push(e);
            }
        }
    }
    let check = |name: &str, ok, lines: Vec<String>| Check {
        check: name.into(),
        ok,
        detail: lines.join("; "),
    };
    vec![
        check("tables", tables_ok, tables),
        check("positions", positions_ok, positions),
        check("history", history_ok, history),
    ]
}

/// Both tables of a state's table exist (the source one with the id the
/// state recorded, when it has one).
async fn open_pair(ctx: &Ctx<'_>, t: &TableState, sink: &str) -> Result<(), String> {
    let source = ctx
        .source
        .open_table(&t.table_name)
        .await
        .map_err(|e| format!("source table '{}' cannot be opened: {e}", t.table_name))?;
    if !t.table_id.is_unknown() && source.id() != t.table_id.as_str() {
        return Err(format!(
            "source table '{}' has id {}, not {} as in the state: it was recreated since (a restore copies it afresh)",
            t.table_name,
            source.id(),
            t.table_id.as_str()
        ));
    }
    ctx.sink
        .open_table(sink)
        .await
        .map_err(|e| format!("sink table '{sink}' cannot be opened: {e}"))?;
    Ok(())
}

/// Where a restore of `state` continues for table `t`: the state or the
/// sink position (`ferry_engine::sink_position::choose`).
async fn resume_from(
    ctx: &Ctx<'_>,
    state: &JobState,
    t: &TableState,
    sink: &str,
) -> Result<String, String> {
    let Some(position_table) = &ctx.cfg().position_table else {
        return Ok(format!("{sink}: from the state (job.positionTable is off)"));
    };
    let position = PositionTable::lookup(&ctx.sink, position_table, sink)
        .await
        .map_err(|e| format!("{sink}: cannot read its sink position: {e}"))?;
    // The choice is per table: a state of this table alone.
    let mut one = state.clone();
    one.set_tables(vec![t.clone()]);
    Ok(match choose(&one, position.as_ref(), &t.table_name) {
        Resume::State { why } => format!("{sink}: from the state ({why})"),
        Resume::Position { position } => format!(
            "{sink}: from the sink position, last end {} (the sink is further than the state)",
            position
                .last_end
                .map_or_else(|| "none".to_string(), |e| e.to_string())
        ),
    })
}

/// A snapshot scan of the source table at the state's window end (the
/// diff windows after a restore start there).
async fn readable_at(ctx: &Ctx<'_>, t: &TableState) -> Result<String, String> {
    let at = t.last_end_timestamp.or(t
        .window
        .map(|w| w.start_timestamp.unwrap_or(w.end_timestamp)));
    let Some(at) = at else {
        return Ok(format!("{}: nothing replicated yet", t.table_name));
    };
    let time = HybridTime::from_raw(at.raw());
    let probe = async {
        let table = ctx.source.open_table(&t.table_name).await?;
        let mut scanner = ctx.source.scan_builder(&table).snapshot(time).build()?;
        // The first batch is enough: the server checks the time on open.
        scanner.next_batch().await?;
        Ok::<_, kudu_client::Error>(())
    };
    probe.await.map_err(|e| {
        format!(
            "source table '{}' cannot be read at the state's window end {at}: {e} (its history no longer reaches it: a restore would need a new snapshot)",
            t.table_name
        )
    })?;
    Ok(format!(
        "{}: readable at {at} ({})",
        t.table_name,
        utc(ctx.clock(), at)
    ))
}

impl fmt::Display for DrStoreSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = if self.stale {
            "STALE".to_string()
        } else {
            mark(self.ok).to_string()
        };
        writeln!(
            f,
            "[{head}] DR state store {} (limit {} ms)",
            self.searched.join(", "),
            self.max_lag_ms
        )?;
        if let Some(e) = &self.error {
            writeln!(f, "  cannot search it: {e}")?;
        }
        if let Some(why) = &self.stale_reason {
            writeln!(f, "  STALE: {why}")?;
        }
        if let Some(n) = &self.newest {
            writeln!(
                f,
                "  newest: {} ({} {}, generation {}), {} ms old, last window end {}",
                n.path,
                n.kind,
                n.checkpoint_id,
                n.generation,
                n.age_ms,
                n.last_end_utc.as_deref().unwrap_or("none")
            )?;
        }
        match (&self.primary, &self.primary_error) {
            (Some(p), _) => writeln!(
                f,
                "  primary's newest: {} ({} ms old); the DR copy is {} ms behind it",
                p.path,
                p.age_ms,
                self.behind_primary_ms.unwrap_or(0)
            )?,
            (None, Some(e)) => writeln!(f, "  primary store: cannot search it: {e}")?,
            (None, None) => writeln!(f, "  primary store: no valid state")?,
        }
        for k in &self.skipped {
            writeln!(f, "  skipped {}: {}", k.path, k.reason)?;
        }
        for c in &self.restore {
            writeln!(
                f,
                "  dry-run restore, {}: {} — {}",
                c.check,
                if c.ok { "ok" } else { "FAILED" },
                c.detail
            )?;
        }
        Ok(())
    }
}
