//! `ferry_verify::rewind` against a real cluster: a table changed after a
//! time T (updates, deletes, inserts, an immutable cell) is rewound to T
//! and then equals itself read at T; a dry run counts without writing; a
//! rerun writes nothing; a T older than the table's history is refused,
//! naming --tablet_history_max_age_sec and a fresh copy.

use ferry_fixtures::{read_all, read_at};
use ferry_verify::rewind::{rewind, RewindError, RewindOptions};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, HybridTime, KuduClient, KuduTable, TableBuilder};
use std::time::Duration;

async fn table(client: &KuduClient, name: &str, history_s: Option<u32>) -> KuduTable {
    let imm = ColumnSchema::builder("imm", DataType::Int64)
        .nullable(true)
        .immutable(true)
        .build()
        .expect("immutable column");
    let mut b = TableBuilder::new(name, ferry_fixtures::small_schema_with(vec![imm]))
        .add_hash_partitions(&["id"], 3, 0)
        .num_replicas(1);
    if let Some(s) = history_s {
        b = b.extra_config("kudu.table.history_max_age_sec", s.to_string());
    }
    client.create_table(&b).await.expect("create");
    client.open_table(name).await.expect("open")
}

/// A row's new cells: `v`, and `imm` when it is set (Kudu refuses an
/// upsert naming an immutable cell of an existing row).
type Cells = Option<(String, Option<i64>)>;

/// Applies (id, v, imm) upserts, or deletes for `None`.
async fn write(client: &KuduClient, table: &KuduTable, ops: Vec<(i64, Cells)>) {
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground))
        .expect("session");
    for (id, v) in ops {
        let mut r = table.new_row();
        r.set_i64("id", id).expect("id");
        let op = match v {
            Some((v, imm)) => {
                r.set_str("v", &v).expect("v");
                if let Some(imm) = imm {
                    r.set_i64("imm", imm).expect("imm");
                }
                Operation::upsert(table, r)
            }
            None => Operation::delete(table, r),
        };
        s.apply(op).await.expect("apply");
    }
    s.flush().await.expect("flush");
}

/// The cluster's time after every write this client saw.
async fn now(client: &KuduClient) -> HybridTime {
    let clock = client.server_clock().await.expect("clock");
    let seen = client
        .last_propagated_timestamp()
        .map_or(0, |t| t.raw() + 1);
    clock.max(HybridTime::from_raw(seen))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_is_rewound_to_an_earlier_time_and_a_rerun_writes_nothing() {
    let clusters = crate::verify_clusters();
    let client = KuduClient::new(&clusters.1.master_addrs()).expect("client");
    let t = table(&client, "rewound", None).await;
    write(
        &client,
        &t,
        (0..300)
            .map(|id| (id, Some((format!("v{id}"), Some(id)))))
            .collect(),
    )
    .await;
    let at = now(&client).await;
    let then = read_at(&client, "rewound", Some(at)).await;
    // After T: 40 values updated, 10 immutable cells changed (the rewind
    // recreates those rows), 30 rows deleted, 25 new.
    let mut changes: Vec<(i64, Cells)> = Vec::new();
    changes.extend((0..40).map(|id| (id, Some((format!("changed {id}"), None)))));
    changes.extend((100..130).map(|id| (id, None)));
    changes.extend((1000..1025).map(|id| (id, Some(("new".to_string(), Some(0))))));
    write(&client, &t, changes).await;
    // An immutable cell changes only by deleting and inserting the row.
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushSync))
        .expect("session");
    for id in 40..50 {
        let mut k = t.new_row();
        k.set_i64("id", id).unwrap();
        s.apply(Operation::delete(&t, k)).await.unwrap();
        let mut r = t.new_row();
        r.set_i64("id", id).unwrap();
        r.set_str("v", &format!("v{id}")).unwrap();
        r.set_i64("imm", -id).unwrap();
        s.apply(Operation::insert(&t, r)).await.unwrap();
    }
    s.flush().await.expect("flush");
    let changed = read_all(&client, "rewound").await;
    assert_ne!(changed, then);

    let mut dry = RewindOptions::new(client.clone(), "rewound", at);
    dry.dry_run = true;
    let report = rewind(dry.clone()).await.expect("dry run");
    assert_eq!((report.rewritten, report.deleted), (80, 25), "{report:?}");
    assert_eq!(
        read_all(&client, "rewound").await,
        changed,
        "a dry run wrote"
    );
    assert!(report.headroom_ms > 6 * 24 * 3_600_000, "{report:?}");

    let report = rewind(RewindOptions::new(client.clone(), "rewound", at))
        .await
        .expect("rewind");
    assert_eq!((report.rewritten, report.deleted), (80, 25), "{report:?}");
    assert!(report.equal_after, "{report:?}");
    assert_eq!(read_all(&client, "rewound").await, then);

    // Idempotent: the rerun finds nothing to write.
    let again = rewind(RewindOptions::new(client.clone(), "rewound", at))
        .await
        .expect("rerun");
    assert_eq!((again.rewritten, again.deleted), (0, 0), "{again:?}");
    assert_eq!(read_all(&client, "rewound").await, then);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_older_than_the_history_is_refused_naming_a_fresh_copy() {
    let clusters = crate::verify_clusters();
    let client = KuduClient::new(&clusters.1.master_addrs()).expect("client");
    let t = table(&client, "rewound_short", Some(1)).await;
    write(&client, &t, vec![(1, Some(("a".into(), Some(1))))]).await;
    let at = now(&client).await;
    write(&client, &t, vec![(1, Some(("b".into(), None)))]).await;
    // Past the table's one-second history.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let err = rewind(RewindOptions::new(client.clone(), "rewound_short", at))
        .await
        .expect_err("refused");
    assert!(matches!(err, RewindError::HistoryExpired { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("--tablet_history_max_age_sec"), "{text}");
    assert!(text.contains("afresh"), "{text}");
    assert!(err.is_usage());
    // Nothing was written.
    let rows = read_all(&client, "rewound_short").await;
    assert_eq!(rows.len(), 1);
}
