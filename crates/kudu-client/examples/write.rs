//! Writes rows to the table `create_table` made: upserts with a
//! background-flushing session, then deletes every tenth row, and prints
//! what the session did. Rows the servers refuse come back from `flush`
//! as `Error::RowErrors`, each naming its row's key.
//!
//! ```text
//! cargo run -p kudu-client --example write -- MASTERS TABLE [ROWS]
//! ```

use std::time::Duration;

use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{Error, KuduClient};

/// 2024-01-01T00:00:00Z in microseconds (inside the table's first range).
const START_MICROS: i64 = 1_704_067_200_000_000;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (masters, table, rows) = match args.as_slice() {
        [m, t] => (m, t, 1000),
        [m, t, n] => match n.parse::<i64>() {
            Ok(n) if n > 0 => (m, t, n),
            _ => usage(),
        },
        _ => usage(),
    };
    if let Err(e) = run(masters, table, rows).await {
        eprintln!("write: {e}");
        std::process::exit(1);
    }
}

fn usage() -> ! {
    eprintln!("usage: write MASTERS TABLE [ROWS]");
    std::process::exit(2)
}

async fn run(masters: &str, name: &str, rows: i64) -> kudu_client::Result<()> {
    let client = KuduClient::new(&[masters])?;
    let table = client.open_table(name).await?;
    let mut session = client.new_session_with(
        SessionOptions::default()
            .flush_mode(FlushMode::AutoFlushBackground)
            .flush_interval(Duration::from_millis(100)),
    )?;

    for id in 0..rows {
        let mut row = table.new_row();
        row.set_i64("id", id)?
            .set_timestamp_micros("at", START_MICROS + id * 1_000_000)?
            .set_str("name", &format!("customer {id}"))?
            // 12.34 as DECIMAL(18, 2): the unscaled value and the scale.
            .set_decimal("amount", 1234 + i128::from(id), 2)?;
        session.apply(Operation::upsert(&table, row)).await?;
    }
    for id in (0..rows).step_by(10) {
        // A delete names the row by its whole primary key.
        let mut key = table.new_row();
        key.set_i64("id", id)?
            .set_timestamp_micros("at", START_MICROS + id * 1_000_000)?;
        session.apply(Operation::delete(&table, key)).await?;
    }
    match session.close().await {
        Ok(()) => {}
        Err(Error::RowErrors(errors)) => {
            for e in &errors {
                eprintln!("refused: {e}");
            }
        }
        Err(e) => return Err(e),
    }
    let m = session.metrics();
    println!(
        "{} operations written in {} requests ({} bytes), {} refused",
        m.ops_written(),
        m.batches_written,
        m.bytes_written,
        m.row_errors
    );
    Ok(())
}
