//! Sink table preparation for `ferry run`: open it, or create it from the
//! source when `job.createTable` is set.

use anyhow::{bail, Context, Result};
use ferry_engine::config::JobConfig;
use kudu_client::{KuduClient, KuduTable};

/// Opens (or creates) the sink table.
pub async fn prepare(source: &KuduClient, sink: &KuduClient, cfg: &JobConfig) -> Result<KuduTable> {
    let name = cfg.sink_table_name();
    source
        .open_table(&cfg.table_name)
        .await
        .with_context(|| format!("source table '{}'", cfg.table_name))?;
    if !sink.table_exists(&name).await.context("listing sink tables")? {
        bail!("sink table '{name}' does not exist; create it or pass --job.createTable true");
    }
    sink.open_table(&name).await.with_context(|| format!("sink table '{name}'"))
}
