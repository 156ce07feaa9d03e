//! The Kudu features a source table needs on the sink.

use kudu_client::{Feature, Schema};

/// The features a sink must have to take the rows of a table with
/// `source_schema`. Every feature-dependent shape of a table is listed
/// here and nowhere else.
pub fn required_features(source_schema: &Schema) -> Vec<Feature> {
    let mut needed = Vec::new();
    if source_schema.auto_incrementing_index().is_some() {
        // The table itself, and the sink's writes: each row is an
        // UPSERT_IGNORE naming its hidden id, which must move the sink
        // tablet's counter past it (docs/semantics.md, "Non-unique
        // primary keys").
        needed.push(Feature::NonUniquePrimaryKeys);
        needed.push(Feature::UpsertAutoIncrementingId);
    }
    needed
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudu_client::{ColumnSchema, DataType, KuduRelease};

    #[test]
    fn a_non_unique_key_needs_explicit_ids_which_every_release_with_it_has() {
        let key = ColumnSchema::builder("k", DataType::Int32).key(true);
        let unique = Schema::new(vec![key.clone().build().unwrap()]).unwrap();
        assert_eq!(required_features(&unique), vec![]);
        let non_unique = Schema::new(vec![
            key.build().unwrap(),
            ColumnSchema::builder("auto_incrementing_id", DataType::Int64)
                .key(true)
                .auto_incrementing(true)
                .build()
                .unwrap(),
        ])
        .unwrap();
        let needed = required_features(&non_unique);
        assert_eq!(
            needed,
            vec![
                Feature::NonUniquePrimaryKeys,
                Feature::UpsertAutoIncrementingId
            ]
        );
        // A 1.17 sink is enough: it stores explicit ids and counts past
        // them (the version-pair tests prove it on real servers).
        for f in needed {
            assert_eq!(f.since(), KuduRelease::new(1, 17, 0), "{f}");
        }
    }
}
