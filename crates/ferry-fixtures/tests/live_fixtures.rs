//! The live-table fixtures against a real cluster: every shape of
//! [`create_varied_table`] can be created and loaded, two tables made the
//! same way compare equal (schema attributes and rows), and a column
//! added, a default changed or a row changed on one of them is reported.

use ferry_fixtures::live::{
    compare_all, create_varied_tables, load_rows, prom_label_values, prom_sample,
    schema_differences, SHAPES,
};
use ferry_testkit::MiniCluster;
use kudu_client::{AlterTableBuilder, ColumnSchema, DataType, KuduClient};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn varied_tables_compare_equal_and_differences_are_found() {
    let cluster = MiniCluster::builder().tservers(3).start().expect("cluster");
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let a = create_varied_tables(&client, "a_", SHAPES).await;
    let b = create_varied_tables(&client, "b_", SHAPES).await;
    for n in a.iter().chain(&b) {
        load_rows(&client, n, -50..150).await;
    }
    let pairs: Vec<(String, String)> = a.iter().cloned().zip(b.iter().cloned()).collect();
    assert!(compare_all(&client, &client, &pairs).await.is_empty());
    for (x, y) in &pairs {
        let d = schema_differences(&client, &client, x, y).await;
        assert!(d.is_empty(), "{x} vs {y}: {d:?}");
    }

    // A column only one side has, a default that differs, a changed row.
    let t = client.open_table("b_00").await.expect("open");
    let extra = ColumnSchema::builder("extra", DataType::Int32)
        .nullable(false)
        .default_value(3i32)
        .build()
        .expect("extra");
    client
        .alter_table(&t, &AlterTableBuilder::new().add_column(extra.clone()))
        .await
        .expect("alter b_00");
    let d = schema_differences(&client, &client, "a_00", "b_00").await;
    assert!(
        d.iter().any(|s| s.contains("extra")),
        "a column only the sink has: {d:?}"
    );
    let t = client.open_table("a_00").await.expect("open");
    let other_default = ColumnSchema::builder("extra", DataType::Int32)
        .nullable(false)
        .default_value(4i32)
        .build()
        .expect("extra");
    client
        .alter_table(&t, &AlterTableBuilder::new().add_column(other_default))
        .await
        .expect("alter a_00");
    let d = schema_differences(&client, &client, "a_00", "b_00").await;
    assert!(
        d.len() == 1 && d[0].contains("column `extra`") && d[0].contains("default"),
        "a default that differs: {d:?}"
    );
    load_rows(&client, "a_01", 150..151).await;
    let bad = compare_all(&client, &client, &pairs).await;
    let names: Vec<&str> = bad.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a_00", "a_01"], "the two tables that differ");
}

#[test]
fn prometheus_samples_by_label() {
    let text = "# HELP ferry_table_lag_seconds lag\n\
        # TYPE ferry_table_lag_seconds gauge\n\
        ferry_table_lag_seconds{job_id=\"j\",table_name=\"t1\"} 1.5\n\
        ferry_table_lag_seconds{job_id=\"j\",table_name=\"t2\"} 0\n\
        ferry_table_lag_seconds_total{table_name=\"t3\"} 9\n\
        ferry_lag_seconds 4\n";
    assert_eq!(
        prom_sample(text, "ferry_table_lag_seconds", "table_name", "t1"),
        Some(1.5)
    );
    assert_eq!(
        prom_sample(text, "ferry_table_lag_seconds", "table_name", "t3"),
        None
    );
    assert_eq!(
        prom_label_values(text, "ferry_table_lag_seconds", "table_name"),
        ["t1", "t2"]
    );
}
