//! Reads the table `create_table` made: a snapshot scan of some columns,
//! with predicates the tablet servers evaluate, as a stream of batches.
//!
//! ```text
//! cargo run -p kudu-client --example scan -- MASTERS TABLE [MIN_ID]
//! ```
//!
//! Prints the rows with `id >= MIN_ID` (default 0) whose `name` is set,
//! and the snapshot time they were read at.

use futures::TryStreamExt;
use kudu_client::scan::{ComparisonOp, Predicate};
use kudu_client::{Decimal, KuduClient};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (masters, table, min_id) = match args.as_slice() {
        [m, t] => (m, t, 0),
        [m, t, n] => match n.parse::<i64>() {
            Ok(n) => (m, t, n),
            Err(_) => usage(),
        },
        _ => usage(),
    };
    if let Err(e) = run(masters, table, min_id).await {
        eprintln!("scan: {e}");
        std::process::exit(1);
    }
}

fn usage() -> ! {
    eprintln!("usage: scan MASTERS TABLE [MIN_ID]");
    std::process::exit(2)
}

async fn run(masters: &str, name: &str, min_id: i64) -> kudu_client::Result<()> {
    let client = KuduClient::new(&[masters])?;
    let table = client.open_table(name).await?;
    // One snapshot for every tablet: a consistent read of the whole table.
    let at = client.server_clock().await?;
    let mut scanner = client
        .scan_builder(&table)
        .projection(&["id", "name", "amount"])
        .predicate(Predicate::comparison(
            "id",
            ComparisonOp::GreaterEqual,
            min_id,
        ))
        .predicate(Predicate::is_not_null("name"))
        .snapshot(at)
        .build()?;

    let amount = table.schema().column_by_name("amount");
    let (precision, scale) = amount.map_or((18, 2), |c| (c.precision(), c.scale()));
    let mut rows = 0u64;
    // A Scanner is a Stream of RowBatch (or call next_batch()).
    while let Some(batch) = scanner.try_next().await? {
        for row in batch.rows() {
            // DECIMAL cells are unscaled integers; Decimal renders them.
            let amount = match row.is_null("amount")? {
                true => "NULL".to_owned(),
                false => Decimal::new(row.get_decimal("amount")?, precision, scale)?.to_string(),
            };
            println!("{} {} {amount}", row.get_i64("id")?, row.get_str("name")?);
            rows += 1;
        }
    }
    println!("# {rows} rows at {at}");
    Ok(())
}
