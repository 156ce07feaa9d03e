//! Sink table preparation for `ferry run`: open it and check it can receive
//! the source rows, or create it as a copy of the source when
//! `job.createTable` is set.

use anyhow::Result;
use ferry_engine::config::JobConfig;
use ferry_engine::sink_table::{prepare_sink_table, SinkTableAction, SinkTableOptions};
use kudu_client::{KuduClient, KuduTable};

/// Opens (or creates) the sink table.
pub async fn prepare(source: &KuduClient, sink: &KuduClient, cfg: &JobConfig) -> Result<KuduTable> {
    let opts = SinkTableOptions {
        sink_table_name: cfg.sink_table_name(),
        create_table: cfg.create_table,
        restore_owner: cfg.restore_owner,
    };
    let plan = prepare_sink_table(source, sink, &cfg.table_name, &opts).await?;
    match plan.action {
        SinkTableAction::Created => {
            tracing::info!(table = %opts.sink_table_name, "created the sink table as a copy of the source")
        }
        _ => tracing::info!(table = %opts.sink_table_name, "sink table found and compatible"),
    }
    Ok(plan.table)
}
