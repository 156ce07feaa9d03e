//! Connects to a cluster and prints what it is: the leader master's clock,
//! each tablet server with its Kudu release, which table features every
//! server has, and the tables.
//!
//! ```text
//! cargo run -p kudu-client --example connect -- MASTERS
//! ```
//!
//! `MASTERS` is `host:port[,host:port...]` (port 7051 if left out).

use kudu_client::{Feature, KuduClient};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [masters] = args.as_slice() else {
        eprintln!("usage: connect MASTERS");
        std::process::exit(2);
    };
    if let Err(e) = run(masters).await {
        eprintln!("connect: {e}");
        std::process::exit(1);
    }
}

async fn run(masters: &str) -> kudu_client::Result<()> {
    // Nothing is contacted until the first call.
    let client = KuduClient::new(&[masters])?;
    println!("cluster clock: {}", client.server_clock().await?);

    for ts in client.list_tablet_servers().await? {
        println!(
            "tablet server {} at {}: {}",
            ts.uuid,
            ts.rpc_addresses.join(","),
            ts.software_version
        );
    }
    let releases = client.cluster_releases().await?;
    for feature in Feature::ALL {
        match releases.explain_missing(feature) {
            None => println!("supported: {feature}"),
            Some(why) => println!("missing: {why}"),
        }
    }

    for t in client.list_tables("").await? {
        let rows = t.live_row_count.map_or("?".into(), |n| n.to_string());
        println!("table {} ({} rows)", t.name, rows);
    }
    Ok(())
}
