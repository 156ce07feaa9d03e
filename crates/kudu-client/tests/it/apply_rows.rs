//! `Session::apply_rows` against a real Kudu 1.17 cluster: scan batches of
//! one table written whole into another with a different partitioning —
//! snapshot rows as upserts, a diff scan's deleted rows as deletes —
//! in background mode (rows encoded straight into many small requests)
//! and in sync mode (one operation per row). The copy must equal the
//! source; a row with no tablet fails alone and is named by its key.

use std::collections::BTreeMap;

use ferry_fixtures::runtime;
use kudu_client::error::StatusCode;
use kudu_client::scan::RowBatch;
use kudu_client::write::{FlushMode, OpType, Operation, RowCopy, SessionOptions};
use kudu_client::{
    ColumnSchema, DataType, Error, HybridTime, KuduClient, KuduTable, Schema, TableBuilder,
};

fn schema() -> Schema {
    Schema::new(vec![
        ColumnSchema::builder("id", DataType::Int64)
            .key(true)
            .build()
            .expect("id"),
        ColumnSchema::builder("s", DataType::String)
            .nullable(true)
            .build()
            .expect("s"),
        ColumnSchema::builder("d", DataType::Double)
            .nullable(true)
            .build()
            .expect("d"),
    ])
    .expect("schema")
}

type Rows = BTreeMap<i64, (Option<String>, Option<f64>)>;

async fn read_all(client: &KuduClient, table: &KuduTable) -> Rows {
    let mut out = Rows::new();
    for b in scan(client, table, None).await {
        for r in b.rows() {
            let s = (!r.is_null("s").expect("s")).then(|| r.get_str("s").expect("s").to_owned());
            let d = (!r.is_null("d").expect("d")).then(|| r.get_f64("d").expect("d"));
            out.insert(r.get_i64("id").expect("id"), (s, d));
        }
    }
    out
}

async fn scan(
    client: &KuduClient,
    table: &KuduTable,
    diff: Option<(HybridTime, HybridTime)>,
) -> Vec<RowBatch> {
    let mut b = client.scan_builder(table).batch_size_bytes(16 * 1024);
    if let Some((s, e)) = diff {
        b = b.diff(s, e);
    }
    let mut scanner = b.build().expect("scanner");
    let mut out = Vec::new();
    while let Some(batch) = scanner.next_batch().await.expect("batch") {
        out.push(batch);
    }
    out
}

async fn now(client: &KuduClient) -> HybridTime {
    let clock = client.server_clock().await.expect("server clock");
    let seen = client
        .last_propagated_timestamp()
        .map_or(0, HybridTime::raw);
    clock.max(HybridTime::from_raw(seen + 1))
}

fn value(id: i64, round: i64) -> (Option<String>, Option<f64>) {
    let s =
        (id % 7 != 0).then(|| format!("row {id} round {round} {}", "x".repeat((id % 50) as usize)));
    let d = (id % 5 != 0).then_some(id as f64 * 0.5 + round as f64);
    (s, d)
}

async fn upsert(client: &KuduClient, t: &KuduTable, ids: impl Iterator<Item = i64>, round: i64) {
    let mut session = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for id in ids {
        let (s, d) = value(id, round);
        let mut r = t.new_row();
        r.set_i64("id", id).expect("id");
        match s {
            Some(s) => r.set_str("s", &s).expect("s"),
            None => r.set_null("s").expect("s"),
        };
        match d {
            Some(d) => r.set_f64("d", d).expect("d"),
            None => r.set_null("d").expect("d"),
        };
        session.apply(Operation::upsert(t, r)).await.expect("apply");
    }
    session.close().await.expect("close");
}

#[test]
fn scan_batches_copy_whole_and_exact() {
    let cluster = crate::shared::one_tserver();
    let rt = runtime();
    rt.block_on(async {
        let client = KuduClient::new(&cluster.master_addrs()).expect("client");
        let src_builder = TableBuilder::new("src", schema())
            .add_hash_partitions(&["id"], 3, 0)
            .num_replicas(1);
        client.create_table(&src_builder).await.expect("create src");
        // Range [0, 1000) and [2000, 4000), each with 2 hash buckets: ids
        // 1000..2000 have no tablet.
        let mut dst_builder = TableBuilder::new("dst", schema())
            .add_hash_partitions(&["id"], 2, 7)
            .set_range_partition_columns(&["id"])
            .num_replicas(1);
        for (lo, hi) in [(0i64, 1000i64), (2000, 4000)] {
            let mut lower = schema().new_row();
            lower.set_i64("id", lo).expect("lo");
            let mut upper = schema().new_row();
            upper.set_i64("id", hi).expect("hi");
            dst_builder = dst_builder.add_range_partition(lower, upper);
        }
        client.create_table(&dst_builder).await.expect("create dst");
        let src = client.open_table("src").await.expect("src");
        let dst = client.open_table("dst").await.expect("dst");

        upsert(&client, &src, 0..3000, 0).await;
        let t0 = now(&client).await;

        let batches = scan(&client, &src, None).await;
        assert!(batches.len() > 3, "small scan batches: {}", batches.len());
        let projection = batches[0].schema().clone();
        let copy = RowCopy::new(
            &dst,
            &projection,
            &[(0, 0), (1, 1), (2, 2)],
            OpType::UpsertIgnore,
            OpType::DeleteIgnore,
        )
        .expect("copy");
        // 4 KiB requests: each batch becomes several requests per tablet.
        let mut session = client
            .new_session_with(
                SessionOptions::default()
                    .flush_mode(FlushMode::AutoFlushBackground)
                    .max_batch_bytes(4096),
            )
            .expect("session");
        let mut live = 0;
        for b in &batches {
            let applied = session.apply_rows(&copy, b).await.expect("apply_rows");
            assert_eq!(applied.deleted, 0);
            live += applied.live;
        }
        assert_eq!(live, 3000);
        let err = session
            .flush()
            .await
            .expect_err("ids 1000..2000 have no tablet");
        let Error::RowErrors(errors) = err else {
            panic!("expected row errors, got {err:?}");
        };
        assert_eq!(errors.len(), 1000, "{:?}", &errors[..3]);
        assert!(errors
            .iter()
            .all(|e| e.status.code == StatusCode::NotFound && e.operation == "UPSERT_IGNORE"));
        assert!(
            errors.iter().any(|e| e.key == "(id=1500)"),
            "{:?}",
            &errors[..3]
        );
        let m = session.metrics();
        assert!(m.batches_written >= 20, "many small requests: {m:?}");

        let want = |src: &Rows| -> Rows {
            src.iter()
                .filter(|(id, _)| !(1000..2000).contains(*id))
                .map(|(k, v)| (*k, v.clone()))
                .collect()
        };
        let source = read_all(&client, &src).await;
        assert_eq!(source.len(), 3000);
        assert_eq!(read_all(&client, &dst).await, want(&source));

        // Changes: deletes, updates, new rows; then the diff scan's batches.
        let mut writer = client.new_session();
        for id in (0..3000).step_by(3) {
            let mut r = src.new_row();
            r.set_i64("id", id).expect("id");
            writer
                .apply(Operation::delete(&src, r))
                .await
                .expect("delete");
        }
        upsert(&client, &src, (1..3000).step_by(3).chain(3000..3100), 1).await;
        let t1 = now(&client).await;
        let diff = scan(&client, &src, Some((t0, t1))).await;
        let diff_copy = RowCopy::new(
            &dst,
            diff[0].schema(),
            &[(0, 0), (1, 1), (2, 2)],
            OpType::UpsertIgnore,
            OpType::DeleteIgnore,
        )
        .expect("diff copy");
        let (mut live, mut deleted) = (0, 0);
        for b in &diff {
            let applied = session.apply_rows(&diff_copy, b).await.expect("diff rows");
            live += applied.live;
            deleted += applied.deleted;
        }
        assert_eq!((live, deleted), (1000 + 100, 1000));
        // Rows for 1000..2000 fail again (no tablet); nothing else does.
        let Err(Error::RowErrors(errors)) = session.flush().await else {
            panic!("expected row errors");
        };
        assert!(
            errors.iter().all(|e| e.status.code == StatusCode::NotFound),
            "{errors:?}"
        );
        session.close().await.expect("close");
        let source = read_all(&client, &src).await;
        assert_eq!(read_all(&client, &dst).await, want(&source));

        // Sync mode: one operation per row, same result.
        client
            .create_table(
                &TableBuilder::new("dst_sync", schema())
                    .add_hash_partitions(&["id"], 2, 0)
                    .num_replicas(1),
            )
            .await
            .expect("create dst_sync");
        let dst_sync = client.open_table("dst_sync").await.expect("dst_sync");
        let copy = RowCopy::new(
            &dst_sync,
            &projection,
            &[(0, 0), (1, 1), (2, 2)],
            OpType::Upsert,
            OpType::Delete,
        )
        .expect("copy");
        let mut sync = client.new_session();
        let batches = scan(&client, &src, None).await;
        for b in &batches {
            sync.apply_rows(&copy, b).await.expect("sync apply_rows");
        }
        assert_eq!(read_all(&client, &dst_sync).await, source);

        // A batch of another projection is refused, naming both.
        let err = sync
            .apply_rows(&diff_copy, &batches[0])
            .await
            .expect_err("projection");
        assert!(
            err.to_string()
                .contains("applied through a copy of projection"),
            "{err}"
        );
    });
}
