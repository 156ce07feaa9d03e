//! The benchmark table and its data: schema (created with `kudu table
//! create`, so the command can be printed and re-run), deterministic rows,
//! a fast parallel loader, a paced insert/update/delete writer, and an
//! order-independent fingerprint to prove two tables hold the same rows.

use anyhow::{bail, Context, Result};
use kudu_client::scan::ScanSpec;
use kudu_client::write::{FlushMode, Operation, Session, SessionOptions};
use kudu_client::{HybridTime, KuduClient, KuduTable, Row};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Hash buckets of every benchmark table.
pub const TABLETS: u32 = 6;
/// Length of the STRING column's values.
pub const STRING_LEN: usize = 32;
pub const DECIMAL_PRECISION: u8 = 18;
pub const DECIMAL_SCALE: u8 = 4;

/// `kudu table create` JSON for a benchmark table: INT64 key plus INT32,
/// INT64, DOUBLE, STRING (32 B), BOOL, UNIXTIME_MICROS and DECIMAL(18,4);
/// `buckets` hash tablets on `id` (the benchmarks' tables: [`TABLETS`]);
/// one replica.
pub fn table_json_with(name: &str, buckets: u32) -> String {
    let col = |n: &str, t: &str| {
        format!(r#"{{"column_name":"{n}","column_type":"{t}","is_nullable":true}}"#)
    };
    let columns = [
        r#"{"column_name":"id","column_type":"INT64","is_nullable":false}"#.to_string(),
        col("i32", "INT32"),
        col("i64", "INT64"),
        col("d", "DOUBLE"),
        col("s", "STRING"),
        col("b", "BOOL"),
        col("ts", "UNIXTIME_MICROS"),
        format!(
            r#"{{"column_name":"dec","column_type":"DECIMAL","is_nullable":true,"type_attributes":{{"precision":{DECIMAL_PRECISION},"scale":{DECIMAL_SCALE}}}}}"#
        ),
    ];
    format!(
        r#"{{"table_name":"{name}","schema":{{"columns":[{}],"key_column_names":["id"]}},"partition":{{"hash_partitions":[{{"columns":["id"],"num_buckets":{buckets},"seed":0}}]}},"num_replicas":1}}"#,
        columns.join(",")
    )
}

/// Creates a benchmark table with the `kudu` CLI; returns the command line.
pub async fn create_table(masters: &str, name: &str) -> Result<String> {
    create_table_with(masters, name, TABLETS).await
}

/// [`create_table`] with `buckets` hash tablets.
pub async fn create_table_with(masters: &str, name: &str, buckets: u32) -> Result<String> {
    let json = table_json_with(name, buckets);
    crate::kudu::kudu_ok(&["table", "create", masters, &json]).await?;
    crate::kudu::kudu_line(&["table".into(), "create".into(), masters.into(), json])
}

/// Drops a table with the `kudu` CLI.
pub async fn drop_table(masters: &str, name: &str) -> Result<()> {
    crate::kudu::kudu_ok(&["table", "delete", masters, name])
        .await
        .map(|_| ())
}

fn mix(mut z: u64) -> u64 {
    // splitmix64 finaliser
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Fills every column of `row` for key `id`; `version` changes the values
/// (0 for the initial load, > 0 for updates).
pub fn fill_row(row: &mut Row, id: i64, version: u64) -> Result<()> {
    let h1 = mix(id as u64 ^ version.wrapping_mul(0xA24B_AED4_963E_E407));
    let h2 = mix(h1);
    let mut s = [0u8; STRING_LEN];
    for (i, c) in s.iter_mut().enumerate() {
        let word = if i < 16 { h1 } else { h2 };
        *c = HEX[((word >> ((i % 16) * 4)) & 0xF) as usize];
    }
    let s = std::str::from_utf8(&s).unwrap_or("x");
    row.set_i64("id", id)?;
    row.set_i32("i32", h1 as i32)?;
    row.set_i64("i64", h2 as i64)?;
    row.set_f64("d", (h1 >> 11) as f64 / (1u64 << 20) as f64)?;
    row.set_str("s", s)?;
    row.set_bool("b", h2 & 1 == 1)?;
    // 2020-01-01 plus up to ~6 years, in microseconds.
    row.set_timestamp_micros(
        "ts",
        1_577_836_800_000_000 + (h1 % 200_000_000_000_000) as i64,
    )?;
    row.set_decimal("dec", (h2 % 100_000_000_000_000) as i128, DECIMAL_SCALE)?;
    Ok(())
}

fn background_session(client: &KuduClient, buffer_ops: usize) -> Result<Session> {
    Ok(client.new_session_with(
        SessionOptions::default()
            .flush_mode(FlushMode::AutoFlushBackground)
            .mutation_buffer_max_ops(buffer_ops),
    )?)
}

/// How a load went.
#[derive(Debug, Clone, Serialize)]
pub struct LoadStats {
    pub rows: u64,
    pub sessions: usize,
    pub seconds: f64,
    pub rows_per_s: f64,
}

/// Inserts keys `start..end` with `sessions` concurrent background-flush
/// sessions (each takes an interleaved share of 10 000-row chunks).
pub async fn load(
    client: &KuduClient,
    table: &KuduTable,
    start: i64,
    end: i64,
    sessions: usize,
) -> Result<LoadStats> {
    const CHUNK: i64 = 10_000;
    let started = Instant::now();
    let sessions = sessions.max(1);
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..sessions {
        let client = client.clone();
        let table = table.clone();
        tasks.spawn(async move {
            let mut session = background_session(&client, 5_000)?;
            let mut chunk_start = start + k as i64 * CHUNK;
            while chunk_start < end {
                for id in chunk_start..(chunk_start + CHUNK).min(end) {
                    let mut row = table.new_row();
                    fill_row(&mut row, id, 0)?;
                    session.apply(Operation::insert(&table, row)).await?;
                }
                chunk_start += sessions as i64 * CHUNK;
            }
            session.flush().await?;
            session.close().await?;
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("loader task")??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let rows = (end - start).max(0) as u64;
    Ok(LoadStats {
        rows,
        sessions,
        seconds,
        rows_per_s: rows as f64 / seconds.max(1e-9),
    })
}

/// What the paced writer did.
#[derive(Debug, Clone, Serialize)]
pub struct ChurnStats {
    pub seconds: f64,
    pub target_rows_per_s: f64,
    pub achieved_rows_per_s: f64,
    pub inserts: u64,
    pub updates: u64,
    pub deletes: u64,
    /// Next unused key after the run.
    pub next_id: i64,
    /// Hybrid time of the last write the client saw acknowledged.
    pub last_write_ht: u64,
}

/// Share of each operation in the paced writer's mix (percent).
pub const MIX_INSERT: u32 = 40;
pub const MIX_UPDATE: u32 = 40;
pub const MIX_DELETE: u32 = 20;

/// A paced writer's rate over time: `rate` operations per second, twice
/// that during `burst` (its start after the writer started, its length):
/// a bulk load.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub rate: f64,
    pub burst: Option<(Duration, Duration)>,
}

impl Pace {
    /// `rate` throughout.
    pub fn steady(rate: f64) -> Pace {
        Pace { rate, burst: None }
    }

    /// Operations due `t` after the writer started.
    fn due(&self, t: Duration) -> u64 {
        let extra = self.burst.map_or(Duration::ZERO, |(from, len)| {
            t.saturating_sub(from).min(len)
        });
        (self.rate * (t + extra).as_secs_f64()) as u64
    }
}

/// Applies `pace` operations per second for `duration`: new keys are
/// inserted from `next_id` up, updates (UPDATE_IGNORE, every column) and
/// deletes (DELETE_IGNORE) hit random keys below the current next id.
pub async fn churn(
    client: &KuduClient,
    table: &KuduTable,
    pace: Pace,
    duration: Duration,
    mut next_id: i64,
    seed: u64,
) -> Result<ChurnStats> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut session = background_session(client, 1_000)?;
    let (mut inserts, mut updates, mut deletes) = (0u64, 0u64, 0u64);
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut done = 0u64;
    let mut version = 1u64;
    loop {
        tick.tick().await;
        let elapsed = started.elapsed();
        if elapsed >= duration {
            break;
        }
        let due = pace.due(elapsed);
        while done < due {
            let pick = rng.gen_range(0..100);
            let op = if pick < MIX_INSERT || next_id == 0 {
                let mut row = table.new_row();
                fill_row(&mut row, next_id, 0)?;
                next_id += 1;
                inserts += 1;
                Operation::insert(table, row)
            } else if pick < MIX_INSERT + MIX_UPDATE {
                let mut row = table.new_row();
                version += 1;
                fill_row(&mut row, rng.gen_range(0..next_id), version)?;
                updates += 1;
                Operation::update_ignore(table, row)
            } else {
                let mut row = table.new_row();
                row.set_i64("id", rng.gen_range(0..next_id))?;
                deletes += 1;
                Operation::delete_ignore(table, row)
            };
            session.apply(op).await?;
            done += 1;
        }
    }
    session.flush().await?;
    session.close().await?;
    let seconds = started.elapsed().as_secs_f64();
    let last_write_ht = match client.last_propagated_timestamp() {
        Some(ts) => ts.raw(),
        None => client.server_clock().await?.raw(),
    };
    Ok(ChurnStats {
        seconds,
        target_rows_per_s: pace.rate,
        achieved_rows_per_s: done as f64 / seconds.max(1e-9),
        inserts,
        updates,
        deletes,
        next_id,
        last_write_ht,
    })
}

/// Row count and an order-independent hash of every cell of every row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fingerprint {
    pub rows: u64,
    pub sum: u64,
    pub xor: u64,
}

/// Reads `table` (at `snapshot` if given, else the latest data), one task
/// per tablet, and fingerprints it. `key_only` just counts rows.
pub async fn fingerprint(
    client: &KuduClient,
    table: &str,
    snapshot: Option<HybridTime>,
    key_only: bool,
) -> Result<Fingerprint> {
    let t = client.open_table(table).await?;
    let mut spec = ScanSpec::new();
    if key_only {
        spec = spec.projection(&["id"]);
    }
    if let Some(ts) = snapshot {
        spec = spec.snapshot(ts);
    }
    let splits = client.scan_splits(&t, &spec).await?;
    let mut tasks = tokio::task::JoinSet::new();
    for split in splits {
        let client = client.clone();
        tasks.spawn(async move {
            let mut scanner = client.scanner_for_split(&split).await?;
            let mut fp = Fingerprint {
                rows: 0,
                sum: 0,
                xor: 0,
            };
            while let Some(batch) = scanner.next_batch().await? {
                fp.rows += batch.num_rows() as u64;
                if key_only {
                    continue;
                }
                let ncols = batch.schema().columns().len();
                for view in batch.rows() {
                    let mut h = 0x51_7C_C1_B7_27_22_0A_95u64;
                    for c in 0..ncols {
                        h = mix(h ^ cell_hash(view.get(c)?));
                    }
                    fp.sum = fp.sum.wrapping_add(h);
                    fp.xor ^= h.rotate_left(17);
                }
            }
            anyhow::Ok(fp)
        });
    }
    let mut total = Fingerprint {
        rows: 0,
        sum: 0,
        xor: 0,
    };
    while let Some(r) = tasks.join_next().await {
        let fp = r.context("scan task")??;
        total.rows += fp.rows;
        total.sum = total.sum.wrapping_add(fp.sum);
        total.xor ^= fp.xor;
    }
    Ok(total)
}

fn cell_hash(v: kudu_client::schema::ValueRef<'_>) -> u64 {
    use kudu_client::schema::ValueRef as V;
    let bytes = |b: &[u8]| {
        let mut h = 0xCBF2_9CE4_8422_2325u64;
        for chunk in b.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            h = mix(h ^ u64::from_le_bytes(w));
        }
        mix(h ^ b.len() as u64)
    };
    match v {
        V::Null => 0x6E75_6C6C,
        V::Bool(b) => mix(1 + u64::from(b)),
        V::Int8(x) => mix(x as u64),
        V::Int16(x) => mix(x as u64),
        V::Int32(x) => mix(x as u64),
        V::Int64(x) | V::UnixtimeMicros(x) => mix(x as u64),
        V::Float(x) => mix(u64::from(x.to_bits())),
        V::Double(x) => mix(x.to_bits()),
        V::Decimal(x) => mix(x as u64 ^ mix((x >> 64) as u64)),
        V::String(s) => bytes(s.as_bytes()),
        V::Binary(b) => bytes(b),
        V::Date(x) => mix(x as u64),
        // A cell type newer than the bench: hashed by its text.
        other => bytes(format!("{other:?}").as_bytes()),
    }
}

/// Counts the rows of `table` (latest data); errors if it is not `expected`.
pub async fn expect_rows(client: &KuduClient, table: &str, expected: u64) -> Result<u64> {
    let fp = fingerprint(client, table, None, true).await?;
    if fp.rows != expected {
        bail!("table {table} holds {} rows, expected {expected}", fp.rows);
    }
    Ok(fp.rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_valid_and_has_every_type() {
        let v: serde_json::Value =
            serde_json::from_str(&table_json_with("t", TABLETS)).expect("json");
        let types: Vec<&str> = v["schema"]["columns"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c["column_type"].as_str().expect("type"))
            .collect();
        assert_eq!(
            types,
            [
                "INT64",
                "INT32",
                "INT64",
                "DOUBLE",
                "STRING",
                "BOOL",
                "UNIXTIME_MICROS",
                "DECIMAL"
            ]
        );
        assert_eq!(v["partition"]["hash_partitions"][0]["num_buckets"], 6);
    }
}
