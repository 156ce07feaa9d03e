//! Creates a table: a key, a few typed columns, hash partitions on the key
//! and range partitions by time, with the replication factor given.
//!
//! ```text
//! cargo run -p kudu-client --example create_table -- MASTERS TABLE [REPLICAS]
//! ```
//!
//! The other examples (`write`, `scan`, `diff_scan`, `alter_table`) work
//! on the table this one creates. `REPLICAS` defaults to 1 (a one-server
//! test cluster); production clusters use 3.

use kudu_client::schema::ColumnSchemaBuilder;
use kudu_client::{ColumnSchema, DataType, KuduClient, Row, Schema, TableBuilder};

/// One day in microseconds.
const DAY_MICROS: i64 = 86_400_000_000;
/// 2024-01-01T00:00:00Z in microseconds.
const START_MICROS: i64 = 1_704_067_200_000_000;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (masters, table, replicas) = match args.as_slice() {
        [m, t] => (m, t, 1),
        [m, t, r] => match r.parse::<i32>() {
            Ok(r) if r > 0 => (m, t, r),
            _ => usage(),
        },
        _ => usage(),
    };
    if let Err(e) = run(masters, table, replicas).await {
        eprintln!("create_table: {e}");
        std::process::exit(1);
    }
}

fn usage() -> ! {
    eprintln!("usage: create_table MASTERS TABLE [REPLICAS]");
    std::process::exit(2)
}

async fn run(masters: &str, name: &str, replicas: i32) -> kudu_client::Result<()> {
    let client = KuduClient::new(&[masters])?;
    let schema = Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()?,
        ColumnSchema::builder("at", DataType::UnixtimeMicros)
            .key(true)
            .build()?,
        ColumnSchema::builder("name", DataType::String)
            .nullable(true)
            .comment("who")
            .build()?,
        ColumnSchemaBuilder::decimal("amount", 18, 2)
            .nullable(true)
            .build()?,
    ])?;

    // Four hash buckets on id, times two ranges of 30 days on `at`.
    let mut builder = TableBuilder::new(name, schema)
        .add_hash_partitions(&["id"], 4, 0)
        .set_range_partition_columns(&["at"])
        .num_replicas(replicas)
        .comment("created by the create_table example");
    for month in 0..2 {
        let mut lower = Row::new(builder.schema());
        lower.set_timestamp_micros("at", START_MICROS + month * 30 * DAY_MICROS)?;
        let mut upper = Row::new(builder.schema());
        upper.set_timestamp_micros("at", START_MICROS + (month + 1) * 30 * DAY_MICROS)?;
        builder = builder.add_range_partition(lower, upper);
    }
    let id = client.create_table(&builder).await?;
    println!("created table {name} (id {id})");

    let table = client.open_table(name).await?;
    println!("schema: {}", table.schema());
    for range in client.range_partitions(&table).await? {
        println!("range: {range:?}");
    }
    Ok(())
}
