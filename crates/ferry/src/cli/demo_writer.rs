//! `ferry demo-writer` (hidden): the demo's source workload. Creates the
//! demo table if needed (id INT64 key, 8 hash buckets; event_ts, value,
//! payload), optionally loads some rows, then applies inserts, upserts,
//! updates and deletes with weights 0.4 / 0.25 / 0.2 / 0.15 at a given rate
//! until SIGTERM / Ctrl-C. Updates and deletes pick keys that exist, so no
//! operation fails.

use anyhow::{Context, Result};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, KuduClient, KuduTable, Schema, TableBuilder};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Options of `ferry demo-writer`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoWriterArgs {
    /// Source masters (comma-separated host:port).
    #[arg(long)]
    pub masters: String,
    /// Table to write.
    #[arg(long, default_value = "demo_table")]
    pub table: String,
    /// Operations per second.
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// Rows inserted before the steady workload starts.
    #[arg(long, default_value_t = 0)]
    pub initial_rows: u64,
    /// Replicas of a new table.
    #[arg(long, default_value_t = 3)]
    pub replicas: i32,
    /// Stop after this many seconds (default: until interrupted).
    #[arg(long)]
    pub duration_secs: Option<u64>,
}

fn schema() -> Result<Schema> {
    Ok(Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()?,
        ColumnSchema::builder("event_ts", DataType::UnixtimeMicros)
            .nullable(true)
            .build()?,
        ColumnSchema::builder("value", DataType::Int64)
            .nullable(true)
            .build()?,
        ColumnSchema::builder("payload", DataType::String)
            .nullable(true)
            .build()?,
    ])?)
}

fn full_row(table: &KuduTable, id: i64, rng: &mut StdRng) -> Result<kudu_client::Row> {
    let mut r = table.new_row();
    r.set_i64("id", id)?;
    r.set_timestamp_micros("event_ts", ferry_engine::time::now_micros())?;
    r.set_i64("value", rng.gen_range(0..1_000_000))?;
    r.set_str("payload", &format!("payload-{id}-{}", rng.gen::<u32>()))?;
    Ok(r)
}

/// The first id of this run: after whatever ids a previous run left.
fn first_id() -> i64 {
    (SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64)
        * 1000
}

/// Creates the demo table unless it exists.
async fn ensure_table(client: &KuduClient, args: &DemoWriterArgs) -> Result<()> {
    if !client.table_exists(&args.table).await? {
        let b = TableBuilder::new(&args.table, schema()?)
            .add_hash_partitions(&["id"], 8, 0)
            .num_replicas(args.replicas);
        client
            .create_table(&b)
            .await
            .with_context(|| format!("creating table {}", args.table))?;
        eprintln!("demo-writer: created table '{}'", args.table);
    }
    Ok(())
}

/// Picks the next operation by weight (0 insert, 1 upsert, 2 update,
/// 3 delete) and builds it; `live` holds the ids this run wrote.
fn next_op(
    table: &KuduTable,
    rng: &mut StdRng,
    next_id: &mut i64,
    live: &mut Vec<i64>,
) -> Result<(usize, Operation)> {
    let roll: f64 = rng.gen();
    let kind = if live.is_empty() || roll < 0.40 {
        0
    } else if roll < 0.65 {
        1
    } else if roll < 0.85 {
        2
    } else {
        3
    };
    let op = match kind {
        0 => {
            let id = *next_id;
            *next_id += 1;
            live.push(id);
            Operation::insert(table, full_row(table, id, rng)?)
        }
        1 => {
            // Half the upserts touch an existing row, half add one.
            let id = if rng.gen_bool(0.5) {
                live[rng.gen_range(0..live.len())]
            } else {
                let id = *next_id;
                *next_id += 1;
                live.push(id);
                id
            };
            Operation::upsert(table, full_row(table, id, rng)?)
        }
        2 => {
            let id = live[rng.gen_range(0..live.len())];
            let mut r = table.new_row();
            r.set_i64("id", id)?;
            r.set_i64("value", rng.gen_range(0..1_000_000))?;
            r.set_timestamp_micros("event_ts", ferry_engine::time::now_micros())?;
            Operation::update(table, r)
        }
        _ => {
            let id = live.swap_remove(rng.gen_range(0..live.len()));
            let mut r = table.new_row();
            r.set_i64("id", id)?;
            Operation::delete(table, r)
        }
    };
    Ok((kind, op))
}

/// Runs the writer until interrupted.
pub async fn run(args: DemoWriterArgs) -> Result<()> {
    let masters: Vec<String> = args
        .masters
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let client = crate::wiring::kudu_builder(&masters)
        .build()
        .context("source cluster")?;
    ensure_table(&client, &args).await?;
    let table = client.open_table(&args.table).await?;
    let mut session = client.new_session_with(
        SessionOptions::default()
            .flush_mode(FlushMode::AutoFlushBackground)
            .flush_interval(Duration::from_millis(200)),
    )?;
    let mut rng = StdRng::from_entropy();
    let mut next_id = first_id();
    let mut live: Vec<i64> = Vec::new();
    if args.initial_rows > 0 {
        eprintln!("demo-writer: loading {} rows", args.initial_rows);
        for _ in 0..args.initial_rows {
            session
                .apply(Operation::insert(
                    &table,
                    full_row(&table, next_id, &mut rng)?,
                ))
                .await?;
            live.push(next_id);
            next_id += 1;
        }
        session.flush().await?;
    }
    eprintln!(
        "demo-writer: writing to '{}' at {} ops/s (insert 0.4, upsert 0.25, update 0.2, delete 0.15)",
        args.table, args.rate
    );
    let period = Duration::from_secs_f64(1.0 / args.rate.max(0.01));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut counts = [0u64; 4];
    let mut last_report = Instant::now();
    let started = Instant::now();
    let stop = crate::server::run::shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = &mut stop => break,
        }
        if args
            .duration_secs
            .is_some_and(|d| started.elapsed() >= Duration::from_secs(d))
        {
            break;
        }
        let (kind, op) = next_op(&table, &mut rng, &mut next_id, &mut live)?;
        session.apply(op).await?;
        counts[kind] += 1;
        if last_report.elapsed() >= Duration::from_secs(10) {
            eprintln!(
                "demo-writer: {} inserts, {} upserts, {} updates, {} deletes so far; {} live rows written by this run",
                counts[0],
                counts[1],
                counts[2],
                counts[3],
                live.len()
            );
            last_report = Instant::now();
        }
    }
    session.flush().await?;
    eprintln!(
        "demo-writer: stopped after {} inserts, {} upserts, {} updates, {} deletes",
        counts[0], counts[1], counts[2], counts[3]
    );
    Ok(())
}
