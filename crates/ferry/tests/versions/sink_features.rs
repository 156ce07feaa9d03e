//! The up-front check of what the sink's servers run, against real
//! servers of each pair: a source table with an immutable column (a
//! 1.17 feature) gets its sink table on every pair, immutable too; asked
//! for a 1.18 feature, a 1.17.1 sink is refused with its servers'
//! addresses and release, a 1.18.1 sink is not. (Which features a table
//! needs, and the refusals real servers cannot show — a 1.16 server, a
//! server without a release — are unit tests of `ferry-kudu`.)

use ferry_kudu::sink_table::features::check_releases;
use ferry_kudu::sink_table::{
    prepare_sink_table, SinkTableAction, SinkTableError, SinkTableOptions,
};
use ferry_testkit::KuduVersion;
use kudu_client::{ColumnSchema, DataType, Feature, TableBuilder};

use crate::pair_job::{for_each_pair, SINK_SUFFIX};

#[test]
fn the_sink_servers_releases_decide_before_anything_is_written() {
    for_each_pair(|env| async move {
        let label = env.pair.label();
        let t = env.pair.table("feat");
        let sink_table = format!("{t}{SINK_SUFFIX}");
        let schema =
            ferry_fixtures::small_schema_with(vec![ColumnSchema::builder("imm", DataType::Int64)
                .nullable(true)
                .immutable(true)
                .build()
                .expect("imm")]);
        let b = TableBuilder::new(&t, schema.clone())
            .add_hash_partitions(&["id"], 2, 0)
            .num_replicas(1);
        env.source.create_table(&b).await.expect("create");
        let opts = SinkTableOptions {
            sink_table_name: sink_table.clone(),
            create_table: true,
            restore_owner: false,
            follow_schema: true,
        };
        let plan = prepare_sink_table(&env.source, &env.sink, &t, &opts)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(plan.action, SinkTableAction::Created, "{label}");
        let imm: &ColumnSchema = plan
            .table
            .schema()
            .column_by_name("imm")
            .expect("imm on the sink");
        assert!(imm.is_immutable(), "{label}: {imm:?}");

        // The same decision for a feature of 1.18, with the releases the
        // real sink servers report.
        let releases = env.sink.cluster_releases().await.expect("releases");
        let verdict = check_releases(
            &t,
            &schema,
            &sink_table,
            &[Feature::TabletPrometheusMetrics],
            &releases,
        );
        match (env.pair.sink, verdict) {
            (KuduVersion::V1_18_1, Ok(())) => {}
            (KuduVersion::V1_17_1, Err(SinkTableError::MissingFeature(m))) => {
                let text = m.to_string();
                let server = &releases.tablet_servers[0].address;
                for part in [
                    "tablet metrics in /metrics_prometheus needs Kudu 1.18.0 or newer",
                    &format!("{server} runs 1.17.1"),
                    &format!("sink table '{sink_table}'"),
                ] {
                    assert!(text.contains(part), "{label}: no {part:?} in: {text}");
                }
            }
            (sink, verdict) => panic!("{label}: a {sink} sink: {verdict:?}"),
        }
    });
}
