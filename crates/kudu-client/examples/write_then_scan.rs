//! Writes a row of every column type into a throwaway table with a
//! background-flush session, reads the rows back with a scanner, prints
//! them, and drops the table.
//!
//! ```text
//! cargo run -p kudu-client --example write_then_scan -- MASTERS [REPLICAS]
//! ```
//!
//! `REPLICAS` defaults to 1 (a one-server test cluster).

use std::time::Duration;

use kudu_client::schema::ColumnSchemaBuilder;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, KuduClient, Schema, TableBuilder};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn schema() -> Result<Schema, BoxError> {
    let col = |name: &str, t: DataType| ColumnSchema::builder(name, t).nullable(true);
    Ok(Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()?,
        col("b", DataType::Bool).build()?,
        col("i8", DataType::Int8).build()?,
        col("i16", DataType::Int16).build()?,
        col("i32", DataType::Int32).build()?,
        col("f", DataType::Float).build()?,
        col("d", DataType::Double).build()?,
        ColumnSchemaBuilder::decimal("dec", 38, 4)
            .nullable(true)
            .build()?,
        col("s", DataType::String).build()?,
        col("bin", DataType::Binary).build()?,
        ColumnSchemaBuilder::varchar("vc", 8)
            .nullable(true)
            .build()?,
        col("ts", DataType::UnixtimeMicros).build()?,
        col("dt", DataType::Date).build()?,
    ])?)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (masters, replicas) = match args.as_slice() {
        [m] => (m, 1),
        [m, r] => (m, r.parse::<i32>()?),
        _ => {
            eprintln!("usage: write_then_scan MASTERS [REPLICAS]");
            std::process::exit(2);
        }
    };

    let client = KuduClient::new(&[masters.as_str()])?;
    let name = format!("write_then_scan_{}", std::process::id());
    client
        .create_table(
            &TableBuilder::new(&name, schema()?)
                .add_hash_partitions(&["id"], 3, 0)
                .num_replicas(replicas),
        )
        .await?;
    let table = client.open_table(&name).await?;

    let mut session = client.new_session_with(
        SessionOptions::default()
            .flush_mode(FlushMode::AutoFlushBackground)
            .flush_interval(Duration::from_millis(200)),
    )?;
    for i in 0..5i64 {
        let mut row = table.new_row();
        row.set_i64("id", i)?
            .set_bool("b", i % 2 == 0)?
            .set_i8("i8", -(i as i8))?
            .set_i16("i16", 1000 + i as i16)?
            .set_i32("i32", -70000 * i as i32)?
            .set_f32("f", 1.5 * i as f32)?
            .set_f64("d", -0.25 * i as f64)?
            .set_decimal("dec", 123_456_789 * i128::from(i), 4)?
            .set_str("s", &format!("row {i}"))?
            .set_binary("bin", &[0, 1, 2, i as u8])?
            .set_str("vc", "héllo")?
            .set_timestamp_micros("ts", 1_700_000_000_000_000 + i)?
            .set_date("dt", 19_000 + i as i32)?;
        if i == 4 {
            row.set_null("s")?.set_null("dec")?;
        }
        session.apply(Operation::insert(&table, row)).await?;
    }
    session.close().await?;
    println!("session metrics: {:?}", session.metrics());

    // Read back what was written (READ_LATEST; rows come by tablet).
    let mut scanner = client.scan_builder(&table).build()?;
    let mut rows = Vec::new();
    while let Some(batch) = scanner.next_batch().await? {
        for row in batch.rows() {
            rows.push((row.get_i64("id")?, row.to_values()?));
        }
    }
    rows.sort_by_key(|(id, _)| *id);
    for (_, r) in &rows {
        let cells: Vec<String> = r.iter().map(ToString::to_string).collect();
        println!("{}", cells.join(" | "));
    }
    client.delete_table(&name).await?;
    if rows.len() != 5 {
        return Err(format!("read {} rows back, wrote 5", rows.len()).into());
    }
    Ok(())
}
