//! Prints the rows of a Kudu table that changed in a time window, using a
//! diff scan (what incremental replication is built on).
//!
//! ```text
//! cargo run -p kudu-client --example diff_scan -- MASTERS TABLE START [END]
//! ```
//!
//! `START` and `END` are raw hybrid timestamps, or `-N` for "N seconds
//! before the cluster's clock now". `END` defaults to now. Each changed row
//! is printed as `+ (values)` for an insert or update (values as of `END`)
//! or `- key` for a delete. The last line gives `END`, the timestamp to use
//! as the next window's `START`.

use futures::TryStreamExt;
use kudu_client::{HybridTime, KuduClient, Value};
use std::time::Duration;

fn usage() -> ! {
    eprintln!(
        "usage: diff_scan MASTERS TABLE START [END]   (timestamps: raw, or -SECONDS from now)"
    );
    std::process::exit(2)
}

fn parse_time(arg: &str, now: HybridTime) -> HybridTime {
    match arg.strip_prefix('-') {
        Some(secs) => match secs.parse::<u64>() {
            Ok(s) => now.saturating_sub(Duration::from_secs(s)),
            Err(_) => usage(),
        },
        None => arg
            .parse::<u64>()
            .map(HybridTime::from_raw)
            .unwrap_or_else(|_| usage()),
    }
}

fn render(values: &[Value]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("diff_scan: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 || args.len() > 4 {
        usage();
    }
    let client = KuduClient::new(&[args[0].as_str()])?;
    let table = client.open_table(&args[1]).await?;
    let now = client.server_clock().await?;
    let start = parse_time(&args[2], now);
    let end = args.get(3).map_or(now, |a| parse_time(a, now));

    let mut scanner = client.scan_builder(&table).diff(start, end).build()?;
    let keys = table.schema().num_key_columns();
    let (mut upserts, mut deletes) = (0u64, 0u64);
    while let Some(batch) = scanner.try_next().await? {
        for row in batch.rows() {
            let mut values = row.to_values()?;
            values.pop(); // the IS_DELETED virtual column
            if row.is_deleted() {
                deletes += 1;
                // Only the key columns are meaningful for a deleted row.
                println!("- ({})", render(&values[..keys]));
            } else {
                upserts += 1;
                println!("+ ({})", render(&values));
            }
        }
    }
    println!(
        "# {upserts} inserted/updated, {deletes} deleted in [{}, {}); next start: {}",
        start.raw(),
        end.raw(),
        end.raw()
    );
    Ok(())
}
