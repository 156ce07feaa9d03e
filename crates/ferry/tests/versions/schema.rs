//! Schema following on every version pair: while a writer runs and
//! `ferry run` replicates an every-type table, a nullable column is
//! added, a NOT NULL column with a default is added, a column is dropped
//! and one is renamed on the source, each followed on the sink before the
//! next; at the end the sink's schema equals the source's attribute by
//! attribute and the rows are equal cell by cell.

use std::time::Duration;

use ferry_fixtures::live::schema_differences;
use ferry_fixtures::nullable;
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use kudu_client::{AlterTableBuilder, ColumnSchema, DataType, Value};

use crate::pair_job::{create_every_type_table, for_each_pair, SINK_SUFFIX};

#[test]
fn add_drop_and_rename_are_followed_on_every_pair() {
    for_each_pair(|env| async move {
        let label = env.pair.label();
        let t = env.pair.table("sch");
        create_every_type_table(&env.source, &t, 2).await;
        let writer = |first_id: i64, seed: u64| {
            Workload::start_with(
                env.source.clone(),
                &t,
                WorkloadOptions {
                    ops_per_sec: 150,
                    seed,
                    first_id,
                    key_floor: 0,
                },
            )
        };
        let mut w = writer(0, 40);
        tokio::time::sleep(Duration::from_millis(800)).await;
        let mut ferry = env.start(&t, &[]);

        let changes: Vec<(&str, AlterTableBuilder)> = vec![
            (
                "adding a nullable column",
                AlterTableBuilder::new().add_column(nullable("note", DataType::String)),
            ),
            (
                "adding a NOT NULL column with a default",
                AlterTableBuilder::new().add_column(
                    ColumnSchema::builder("level", DataType::Int64)
                        .nullable(false)
                        .default_value(Value::Int64(7))
                        .build()
                        .expect("level"),
                ),
            ),
            (
                "dropping a column",
                AlterTableBuilder::new().drop_column("f"),
            ),
            (
                "renaming a column",
                AlterTableBuilder::new().rename_column("s", "s_renamed"),
            ),
        ];
        for (seed, (what, change)) in (41..).zip(changes) {
            tokio::time::sleep(Duration::from_millis(1000)).await;
            let table = env.source.open_table(&t).await.expect("open");
            env.source
                .alter_table(&table, &change)
                .await
                .unwrap_or_else(|e| panic!("{label}: {what}: {e}"));
            // The old writer's handle knows the old columns.
            let stats = w.stop().await;
            assert!(stats.applied > 0, "{label}: before {what}: {stats:?}");
            w = writer(stats.next_id, seed);
            // Each change reaches the sink in a window of its own.
            env.wait_caught_up(&mut ferry, &t).await;
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let stats = w.stop().await;
        assert!(stats.applied > 0, "{label}: {stats:?}");
        env.wait_caught_up(&mut ferry, &t).await;

        let sink_table = format!("{t}{SINK_SUFFIX}");
        let schema = schema_differences(&env.source, &env.sink, &t, &sink_table).await;
        assert!(
            schema.is_empty(),
            "{label}: sink schema != source schema:\n{}",
            schema.join("\n")
        );
        let columns: Vec<String> = env
            .sink
            .open_table(&sink_table)
            .await
            .expect("open sink")
            .schema()
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        for (name, present) in [
            ("note", true),
            ("level", true),
            ("f", false),
            ("s", false),
            ("s_renamed", true),
        ] {
            assert_eq!(
                columns.contains(&name.to_string()),
                present,
                "{label}: {name} in {columns:?}"
            );
        }
        env.assert_equal(&t, "four schema changes").await;
    });
}
