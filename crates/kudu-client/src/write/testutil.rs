//! What the write module's unit tests share.

use std::collections::BTreeMap;

use crate::partition::PartitionSchema;
use crate::schema::{ColumnSchema, DataType, Schema};
use crate::table::KuduTable;

/// Table `t`: k INT32 key, v INT32 NULL, s STRING NULL; 4 hash buckets.
pub(crate) fn table() -> KuduTable {
    let schema = Schema::new(vec![
        ColumnSchema::builder("k", DataType::Int32)
            .key(true)
            .build()
            .unwrap(),
        ColumnSchema::builder("v", DataType::Int32)
            .nullable(true)
            .build()
            .unwrap(),
        ColumnSchema::builder("s", DataType::String)
            .nullable(true)
            .build()
            .unwrap(),
    ])
    .unwrap();
    let ps = PartitionSchema::builder(&schema)
        .add_hash_partitions(&["k"], 4, 0)
        .build()
        .unwrap();
    KuduTable::new(
        "t".into(),
        "id".into(),
        schema,
        ps,
        1,
        None,
        None,
        BTreeMap::new(),
        None,
    )
}
