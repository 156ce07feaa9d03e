//! The Kudu features a source table needs on the sink, and the check that
//! the sink cluster's tablet servers have them before any row is written.
//!
//! Why up front: an old sink refuses such a table's rows one by one
//! mid-copy, or — worse — an old master may drop a column attribute it
//! does not know (protobuf skips unknown fields) and create a plain
//! column, so the copy silently loses its semantics. Asking the servers'
//! releases once (one master RPC, only for tables that need a feature)
//! turns either into one message before the copy starts.

use kudu_client::{ClusterReleases, Feature, KuduClient, Schema};

use super::{Side, SinkTableError};

/// The features a sink must have to take the rows of a table with
/// `source_schema`. Every feature-dependent shape of a table is listed
/// here and nowhere else.
pub fn required_features(source_schema: &Schema) -> Vec<Feature> {
    let mut needed = Vec::new();
    if source_schema.columns().iter().any(|c| c.is_immutable()) {
        needed.push(Feature::ImmutableColumns);
    }
    if source_schema.auto_incrementing_index().is_some() {
        needed.push(Feature::NonUniquePrimaryKeys);
        // The sink's writes: each row is an UPSERT_IGNORE naming its hidden
        // id, which must move the sink tablet's counter past it
        // (docs/semantics.md, "Tables with a non-unique primary key").
        needed.push(Feature::UpsertAutoIncrementingId);
    }
    needed
}

/// What in `schema` makes it need `feature`, for messages.
fn needed_by(feature: Feature, schema: &Schema) -> String {
    let cols = |pick: fn(&kudu_client::ColumnSchema) -> bool| {
        schema
            .columns()
            .iter()
            .filter(|c| pick(c))
            .map(|c| format!("'{}'", c.name()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match feature {
        Feature::ImmutableColumns => {
            format!("immutable column(s) {}", cols(|c| c.is_immutable()))
        }
        Feature::NonUniquePrimaryKeys | Feature::UpsertAutoIncrementingId => format!(
            "a non-unique primary key (auto-incrementing column {})",
            cols(|c| c.is_auto_incrementing())
        ),
        _ => "its schema".to_owned(),
    }
}

/// The sink cluster lacks a feature the source table needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sink table '{sink}' cannot take the rows of source table '{source_table}', which has {needed_by}: {explanation}; upgrade the sink cluster's tablet servers to Kudu {} or newer (the DR side first), or replicate to a cluster that runs it", feature.since())]
pub struct MissingFeature {
    /// The sink table.
    pub sink: String,
    /// The source table.
    pub source_table: String,
    /// The feature the sink lacks.
    pub feature: Feature,
    /// What in the source table needs it.
    pub needed_by: String,
    /// The feature, the release it needs and each lacking server with the
    /// release it reported ([`ClusterReleases::explain_missing`]).
    pub explanation: String,
}

/// The first of `required` that the sink servers in `releases` lack, as
/// a [`SinkTableError::MissingFeature`]; `Ok` when they have them all. No
/// registered tablet server is [`SinkTableError::NoTabletServers`], which
/// a retry may cure (a sink cluster starting up), so the question is asked
/// again before anything is written.
pub fn check_releases(
    source_table: &str,
    source_schema: &Schema,
    sink_table: &str,
    required: &[Feature],
    releases: &ClusterReleases,
) -> Result<(), SinkTableError> {
    if required.is_empty() {
        return Ok(());
    }
    if releases.tablet_servers.is_empty() {
        return Err(SinkTableError::NoTabletServers {
            sink: sink_table.to_owned(),
        });
    }
    for &feature in required {
        if let Some(explanation) = releases.explain_missing(feature) {
            return Err(SinkTableError::MissingFeature(MissingFeature {
                sink: sink_table.to_owned(),
                source_table: source_table.to_owned(),
                feature,
                needed_by: needed_by(feature, source_schema),
                explanation,
            }));
        }
    }
    Ok(())
}

/// Refuses a sink cluster whose tablet servers lack a feature that source
/// table `source_table` (with `source_schema`) needs; asks the sink's
/// master only when the table needs one.
pub async fn check_sink_features(
    sink: &KuduClient,
    source_table: &str,
    source_schema: &Schema,
    sink_table: &str,
) -> Result<(), SinkTableError> {
    let required = required_features(source_schema);
    if required.is_empty() {
        return Ok(());
    }
    let releases = sink.cluster_releases().await.map_err(SinkTableError::kudu(
        Side::Sink,
        "listing the tablet servers' releases",
    ))?;
    check_releases(
        source_table,
        source_schema,
        sink_table,
        &required,
        &releases,
    )?;
    tracing::debug!(source = source_table, sink = sink_table, ?required, oldest = ?releases.oldest(), "the sink has every feature the source table needs");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudu_client::{ColumnSchema, DataType, ServerRelease};

    fn col(name: &str, t: DataType) -> kudu_client::schema::ColumnSchemaBuilder {
        ColumnSchema::builder(name, t)
    }

    fn plain() -> Schema {
        Schema::new(vec![
            col("id", DataType::Int64).key(true).build().unwrap(),
            col("v", DataType::String).nullable(true).build().unwrap(),
        ])
        .unwrap()
    }

    fn with_immutable() -> Schema {
        Schema::new(vec![
            col("id", DataType::Int64).key(true).build().unwrap(),
            col("imm", DataType::String)
                .nullable(true)
                .immutable(true)
                .build()
                .unwrap(),
            col("v", DataType::Int64).nullable(true).build().unwrap(),
        ])
        .unwrap()
    }

    /// A non-unique key `k` with the hidden id, and an immutable column.
    fn non_unique_with_immutable() -> Schema {
        Schema::new(vec![
            col("k", DataType::Int32).key(true).build().unwrap(),
            col("auto_incrementing_id", DataType::Int64)
                .key(true)
                .auto_incrementing(true)
                .build()
                .unwrap(),
            col("imm", DataType::Int64)
                .nullable(true)
                .immutable(true)
                .build()
                .unwrap(),
        ])
        .unwrap()
    }

    fn cluster(servers: &[(&str, &str)]) -> ClusterReleases {
        ClusterReleases::new(
            servers
                .iter()
                .map(|(addr, v)| ServerRelease::new(*addr, *addr, *v))
                .collect(),
        )
    }

    fn check(schema: &Schema, releases: &ClusterReleases) -> Result<(), MissingFeature> {
        match check_releases(
            "orders",
            schema,
            "orders_copy",
            &required_features(schema),
            releases,
        ) {
            Ok(()) => Ok(()),
            Err(SinkTableError::MissingFeature(m)) => Err(m),
            Err(e) => panic!("not a missing feature: {e}"),
        }
    }

    #[test]
    fn required_features_follow_the_schema() {
        assert!(required_features(&plain()).is_empty());
        assert_eq!(
            required_features(&with_immutable()),
            [Feature::ImmutableColumns]
        );
        assert_eq!(
            required_features(&non_unique_with_immutable()),
            [
                Feature::ImmutableColumns,
                Feature::NonUniquePrimaryKeys,
                Feature::UpsertAutoIncrementingId
            ]
        );
        // A 1.17 sink is enough for every one of them: it stores explicit
        // ids and counts past them (the version-pair tests prove it on real
        // servers).
        for f in required_features(&non_unique_with_immutable()) {
            assert_eq!(f.since(), kudu_client::KuduRelease::new(1, 17, 0), "{f}");
        }
    }

    #[test]
    fn a_sink_with_the_features_passes() {
        for version in ["kudu 1.17.0 (rev a)", "kudu 1.17.1 (rev b)", "kudu 1.18.1"] {
            let sink = cluster(&[("t1:7050", version), ("t2:7050", "kudu 1.18.1")]);
            assert_eq!(check(&non_unique_with_immutable(), &sink), Ok(()));
        }
        // A plain table needs nothing, whatever the servers run.
        let old = cluster(&[("t1:7050", "kudu 1.15.0"), ("t2:7050", "")]);
        assert_eq!(check(&plain(), &old), Ok(()));
    }

    #[test]
    fn an_old_sink_is_refused_naming_feature_release_and_servers() {
        let sink = cluster(&[
            ("t1:7050", "kudu 1.18.1 (rev x)"),
            ("t2:7050", "kudu 1.16.0 (rev y)"),
        ]);
        let err = check(&with_immutable(), &sink).unwrap_err();
        assert_eq!(err.feature, Feature::ImmutableColumns);
        let text = err.to_string();
        for part in [
            "sink table 'orders_copy'",
            "source table 'orders'",
            "immutable column(s) 'imm'",
            "immutable columns needs Kudu 1.17.0 or newer",
            "t2:7050 runs 1.16.0",
            "upgrade the sink cluster's tablet servers to Kudu 1.17.0",
        ] {
            assert!(text.contains(part), "no {part:?} in: {text}");
        }
        assert!(!text.contains("t1:7050"), "a server that has it: {text}");

        // The first missing feature is named; the key's column too.
        let old = cluster(&[("t1:7050", "kudu 1.16.0")]);
        let err = check(&non_unique_with_immutable(), &old).unwrap_err();
        assert_eq!(err.feature, Feature::ImmutableColumns);
        let only_key = Schema::new(non_unique_with_immutable().columns()[..2].to_vec()).unwrap();
        let err = check(&only_key, &old).unwrap_err();
        assert_eq!(err.feature, Feature::NonUniquePrimaryKeys);
        assert!(
            err.to_string()
                .contains("auto-incrementing column 'auto_incrementing_id'"),
            "{err}"
        );
    }

    #[test]
    fn a_server_without_a_release_is_refused_saying_so() {
        let sink = cluster(&[("t1:7050", "kudu 1.18.1"), ("t2:7050", "")]);
        let err = check(&with_immutable(), &sink).unwrap_err();
        assert!(
            err.to_string()
                .contains("t2:7050 did not report its release"),
            "{err}"
        );
        // The refusal is final: running again changes nothing.
        assert!(!SinkTableError::MissingFeature(err).is_retryable());
    }

    #[test]
    fn no_registered_server_is_asked_again() {
        let required = required_features(&with_immutable());
        let err = check_releases(
            "orders",
            &with_immutable(),
            "orders_copy",
            &required,
            &cluster(&[]),
        )
        .unwrap_err();
        assert!(
            matches!(err, SinkTableError::NoTabletServers { .. }),
            "{err}"
        );
        assert!(err.is_retryable(), "{err}");
        assert!(err.to_string().contains("orders_copy"), "{err}");
        // A table that needs nothing does not ask.
        assert!(check_releases("orders", &plain(), "orders_copy", &[], &cluster(&[])).is_ok());
    }
}
