//! Crate-private operations the crate's own protocol tests call directly
//! (only with the `unstable-internals` feature; no stability promise).

use std::time::Instant;

use crate::meta::Lookup;
use crate::schema::SchemaPbOptions;
use crate::{pb, KuduClient, KuduTable, Result, Row, Schema};

/// The tablet covering `key` of `table`, retried until `deadline`.
pub async fn locate_with_retry(
    client: &KuduClient,
    table: &KuduTable,
    key: &[u8],
    deadline: Instant,
) -> Result<Lookup> {
    client.locate_with_retry(table, key, deadline).await
}

/// Drops a tablet from the client's location cache.
pub fn invalidate_tablet(client: &KuduClient, table_id: &str, tablet_id: &str) {
    client.invalidate_tablet(table_id, tablet_id)
}

/// `schema` as a write request carries it.
pub fn write_schema_pb(schema: &Schema) -> Result<pb::SchemaPb> {
    schema.to_pb(SchemaPbOptions::WRITE)
}

/// Encodes operations as a `RowOperationsPB`.
pub fn encode_row_operations(
    schema: &Schema,
    ops: &[(crate::write::OpType, &Row)],
) -> Result<pb::RowOperationsPb> {
    crate::row_ops::encode(schema, ops)
}

/// The encoded primary key of `row` (what scan bounds and resume keys use).
pub fn encode_primary_key(row: &Row) -> Result<Vec<u8>> {
    crate::partition::key::encode_primary_key(row)
}
