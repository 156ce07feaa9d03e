//! A paced, fault-tolerant writer for tests that replicate under faults:
//! a mix of INSERT (new keys), UPSERT, UPDATE_IGNORE and DELETE_IGNORE with
//! random values (NULLs included) in every column of the table's schema.
//!
//! The source may be mid-fault itself (hung or restarting tablet servers,
//! a master election), so a failed write is counted, the session replaced
//! and writing goes on; whatever did land is what the sink must match.
//! Writes go in one small flush per 50 ms tick, so a fault costs at most a
//! tick's worth of operations and a stall does not turn into a burst (at
//! most one second of backlog is caught up).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kudu_client::write::{FlushMode, Operation, Session, SessionOptions};
use kudu_client::{ColumnSchema, DataType, Error, KuduClient, KuduTable, Row};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;

/// How often a batch is written.
const TICK: Duration = Duration::from_millis(50);
/// Bound on one flush; a write that takes longer counts as failed.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the writer should do.
#[derive(Debug, Clone)]
pub struct WorkloadOptions {
    /// Operations per second.
    pub ops_per_sec: u32,
    /// Seed of the operation mix and values.
    pub seed: u64,
    /// First key the writer inserts; updates and deletes hit keys from
    /// `key_floor` up to the newest inserted one.
    pub first_id: i64,
    /// Lowest key updates and deletes touch (rows loaded before the
    /// workload started can be included).
    pub key_floor: i64,
}

/// Counts of a workload so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadStats {
    /// Operations the servers acknowledged.
    pub applied: u64,
    /// Operations that failed (timeouts, unavailable servers, ...); they
    /// may or may not have landed.
    pub failed: u64,
    pub inserts: u64,
    pub upserts: u64,
    pub updates: u64,
    pub deletes: u64,
    /// Sessions replaced after an error.
    pub sessions_replaced: u64,
    /// Next key an INSERT would use.
    pub next_id: i64,
    /// The newest error, for a test's log.
    pub last_error: Option<String>,
}

#[derive(Default)]
struct Counters {
    applied: AtomicU64,
    failed: AtomicU64,
    inserts: AtomicU64,
    upserts: AtomicU64,
    updates: AtomicU64,
    deletes: AtomicU64,
    sessions_replaced: AtomicU64,
    next_id: AtomicI64,
    last_error: Mutex<Option<String>>,
}

impl Counters {
    fn snapshot(&self) -> WorkloadStats {
        WorkloadStats {
            applied: self.applied.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            upserts: self.upserts.load(Ordering::Relaxed),
            updates: self.updates.load(Ordering::Relaxed),
            deletes: self.deletes.load(Ordering::Relaxed),
            sessions_replaced: self.sessions_replaced.load(Ordering::Relaxed),
            next_id: self.next_id.load(Ordering::Relaxed),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        }
    }

    fn error(&self, failed: u64, e: impl ToString) {
        self.failed.fetch_add(failed, Ordering::Relaxed);
        *self
            .last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e.to_string());
    }
}

/// A running writer (a Tokio task). [`Workload::stop`] ends it.
pub struct Workload {
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    task: JoinHandle<()>,
}

impl Workload {
    /// Starts writing `ops_per_sec` operations per second to `table`,
    /// whose first column is an INT64 key, inserting keys from 0 up. Must
    /// be called inside a Tokio runtime.
    pub fn start(client: KuduClient, table: &str, ops_per_sec: u32, seed: u64) -> Workload {
        Self::start_with(
            client,
            table,
            WorkloadOptions {
                ops_per_sec,
                seed,
                first_id: 0,
                key_floor: 0,
            },
        )
    }

    /// Like [`Workload::start`] with every option.
    pub fn start_with(client: KuduClient, table: &str, options: WorkloadOptions) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        counters.next_id.store(options.first_id, Ordering::Relaxed);
        let task = tokio::spawn(run(
            client,
            table.to_string(),
            options,
            stop.clone(),
            counters.clone(),
        ));
        Workload {
            stop,
            counters,
            task,
        }
    }

    /// The counts so far, while it runs.
    pub fn stats(&self) -> WorkloadStats {
        self.counters.snapshot()
    }

    /// Stops after the write in flight and returns the final counts.
    pub async fn stop(self) -> WorkloadStats {
        self.stop.store(true, Ordering::Relaxed);
        if let Err(e) = self.task.await {
            self.counters.error(0, format!("workload task: {e}"));
        }
        self.counters.snapshot()
    }
}

fn new_session(client: &KuduClient) -> Result<Session, Error> {
    client.new_session_with(
        SessionOptions::default()
            .flush_mode(FlushMode::ManualFlush)
            .mutation_buffer_max_ops(100_000)
            .mutation_buffer_max_bytes(256 << 20)
            .operation_timeout(WRITE_TIMEOUT),
    )
}

async fn run(
    client: KuduClient,
    name: String,
    options: WorkloadOptions,
    stop: Arc<AtomicBool>,
    c: Arc<Counters>,
) {
    let mut rng = StdRng::seed_from_u64(options.seed);
    // The table may be on a server that is down right now.
    let table = loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match client.open_table(&name).await {
            Ok(t) => break t,
            Err(e) => {
                c.error(0, e);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    let mut session: Option<Session> = None;
    let rate = f64::from(options.ops_per_sec.max(1));
    let started = Instant::now();
    let mut done = 0u64;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let due = (rate * started.elapsed().as_secs_f64()) as u64;
        done = done.max(due.saturating_sub(rate as u64));
        let n = due - done;
        done = due;
        if n == 0 {
            continue;
        }
        let s = match session
            .take()
            .map(Ok)
            .unwrap_or_else(|| new_session(&client))
        {
            Ok(s) => s,
            Err(e) => {
                c.error(n, e);
                continue;
            }
        };
        session = write_batch(s, &table, &options, n, &mut rng, &c).await;
        if session.is_none() {
            c.sessions_replaced.fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Some(mut s) = session {
        let _ = s.close().await;
    }
}

/// Applies and flushes `n` operations; returns the session if it is still
/// good (no error).
async fn write_batch(
    mut session: Session,
    table: &KuduTable,
    options: &WorkloadOptions,
    n: u64,
    rng: &mut StdRng,
    c: &Counters,
) -> Option<Session> {
    for _ in 0..n {
        let op = match next_op(table, options, rng, c) {
            Ok(op) => op,
            Err(e) => {
                // A bug in value generation, not a fault: keep it visible.
                c.error(1, format!("building an operation: {e}"));
                continue;
            }
        };
        if let Err(e) = session.apply(op).await {
            c.error(1, e);
        }
    }
    let pending = session.buffered_ops() as u64;
    // The session's own timeout bounds each request; this bounds the
    // flush as a whole (lookups included), past which its rows are
    // abandoned with the session.
    match tokio::time::timeout(WRITE_TIMEOUT * 2, session.flush()).await {
        Ok(Ok(())) => {
            c.applied.fetch_add(pending, Ordering::Relaxed);
            Some(session)
        }
        Ok(Err(Error::RowErrors(rows))) => {
            let failed = rows.len() as u64;
            c.applied
                .fetch_add(pending.saturating_sub(failed), Ordering::Relaxed);
            c.error(failed, Error::RowErrors(rows));
            None
        }
        Ok(Err(e)) => {
            c.error(pending, e);
            None
        }
        Err(_) => {
            c.error(
                pending,
                format!("flush took longer than {:?}", WRITE_TIMEOUT * 2),
            );
            None
        }
    }
}

/// INSERT 40 %, UPSERT 25 %, UPDATE_IGNORE 20 %, DELETE_IGNORE 15 %.
fn next_op(
    table: &KuduTable,
    options: &WorkloadOptions,
    rng: &mut StdRng,
    c: &Counters,
) -> Result<Operation, Error> {
    let next_id = c.next_id.load(Ordering::Relaxed);
    let existing = |rng: &mut StdRng| {
        if next_id > options.key_floor {
            rng.gen_range(options.key_floor..next_id)
        } else {
            options.key_floor
        }
    };
    let pick = rng.gen_range(0..100);
    let mut row = table.new_row();
    let key = table.schema().columns()[0].name().to_string();
    Ok(if pick < 40 {
        row.set_i64(key.as_str(), next_id)?;
        fill_values(&mut row, table, rng, 1.0)?;
        c.next_id.store(next_id + 1, Ordering::Relaxed);
        c.inserts.fetch_add(1, Ordering::Relaxed);
        Operation::insert(table, row)
    } else if pick < 65 {
        row.set_i64(key.as_str(), existing(rng))?;
        fill_values(&mut row, table, rng, 1.0)?;
        c.upserts.fetch_add(1, Ordering::Relaxed);
        Operation::upsert(table, row)
    } else if pick < 85 {
        row.set_i64(key.as_str(), existing(rng))?;
        fill_values(&mut row, table, rng, 0.5)?;
        c.updates.fetch_add(1, Ordering::Relaxed);
        Operation::update_ignore(table, row)
    } else {
        row.set_i64(key.as_str(), existing(rng))?;
        c.deletes.fetch_add(1, Ordering::Relaxed);
        Operation::delete_ignore(table, row)
    })
}

/// Sets each non-key column with probability `share` (at least one).
fn fill_values(
    row: &mut Row,
    table: &KuduTable,
    rng: &mut StdRng,
    share: f64,
) -> Result<(), Error> {
    let cols = table.schema().columns();
    let values: Vec<&ColumnSchema> = cols.iter().filter(|c| !c.is_key()).collect();
    let forced = rng.gen_range(0..values.len().max(1));
    for (i, col) in values.into_iter().enumerate() {
        if i != forced && !rng.gen_bool(share) {
            continue;
        }
        if col.is_nullable() && rng.gen_bool(0.15) {
            row.set_null(col.name())?;
        } else {
            set_random(row, col, rng)?;
        }
    }
    Ok(())
}

const TEXT: &[&str] = &["", "a", "ß", "日本", "🦀", "x y", "\u{0}", "long-ish text"];

fn random_text(rng: &mut StdRng, max_chars: usize) -> String {
    let mut s = String::new();
    for _ in 0..rng.gen_range(0..4) {
        s.push_str(TEXT[rng.gen_range(0..TEXT.len())]);
    }
    s.chars().take(max_chars).collect()
}

fn set_random(row: &mut Row, col: &ColumnSchema, rng: &mut StdRng) -> Result<(), Error> {
    let name = col.name();
    match col.data_type() {
        DataType::Bool => row.set_bool(name, rng.gen())?,
        DataType::Int8 => row.set_i8(name, rng.gen())?,
        DataType::Int16 => row.set_i16(name, rng.gen())?,
        DataType::Int32 => row.set_i32(name, rng.gen())?,
        DataType::Int64 => row.set_i64(name, rng.gen())?,
        DataType::Float => row.set_f32(name, random_f64(rng) as f32)?,
        DataType::Double => row.set_f64(name, random_f64(rng))?,
        DataType::UnixtimeMicros => row.set_timestamp_micros(
            name,
            rng.gen_range(-62_135_596_800_000_000..253_402_300_799_999_999),
        )?,
        // 0001-01-01 ..= 9999-12-31.
        DataType::Date => row.set_date(name, rng.gen_range(-719_162..=2_932_896))?,
        DataType::String => row.set_str(name, &random_text(rng, 64))?,
        DataType::Varchar => {
            let max = col
                .type_attributes()
                .and_then(|a| a.length)
                .map_or(64, |l| l as usize);
            row.set_str(name, &random_text(rng, max))?
        }
        DataType::Binary => {
            let len = rng.gen_range(0..24);
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            row.set_binary(name, &bytes)?
        }
        t if t.is_decimal() => {
            let limit = 10i128.pow(u32::from(col.precision()));
            row.set_decimal(name, rng.gen_range(-limit + 1..limit), col.scale())?
        }
        _ => return Ok(()),
    };
    Ok(())
}

fn random_f64(rng: &mut StdRng) -> f64 {
    match rng.gen_range(0..10) {
        0 => 0.0,
        1 => -0.0,
        2 => f64::from(rng.gen::<i32>()),
        _ => (rng.gen::<f64>() - 0.5) * 10f64.powi(rng.gen_range(-30..30)),
    }
}
