//! [`follow`]: apply the source's schema changes to the sink table.

use super::*;

/// Brings sink table `sink_name` (id `sink_id` when known) in line with
/// the source schema `now`, given the one applied last. Returns whether
/// the sink changed.
pub async fn follow(
    client: &KuduClient,
    sink_name: &str,
    sink_id: Option<&str>,
    applied: Option<&SchemaRecord>,
    now: &SchemaRecord,
    rename_with_suffix: Option<&str>,
) -> Result<bool, EngineError> {
    let _ = (client, sink_name, sink_id, applied, now, rename_with_suffix);
    Ok(false)
}
