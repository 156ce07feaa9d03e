//! `ferry stop --drain` through the CLI and the REST API against real Kudu:
//! while a writer keeps changing the source, the job process ends with a
//! savepoint that holds no split in progress, and the sink equals the
//! source as of the savepoint's last window end.

use ferry_engine::checkpoint::{CheckpointStore, StorageLocation};
use ferry_fixtures::{read_all, read_at};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{HybridTime, KuduClient, TableBuilder};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_with_drain_ends_between_windows() {
    // The cluster the binary's tests share: tables of their own.
    let cluster = tokio::task::block_in_place(crate::cluster);
    let masters = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let schema = ferry_fixtures::small_schema();
    let b = TableBuilder::new("d", schema)
        .add_hash_partitions(&["id"], 2, 0)
        .num_replicas(1);
    client.create_table(&b).await.expect("create");
    let table = client.open_table("d").await.expect("open");

    // A writer keeps changing rows for the whole test.
    let running = Arc::new(AtomicBool::new(true));
    let writer = {
        let (client, table, running) = (client.clone(), table.clone(), running.clone());
        tokio::spawn(async move {
            let mut s = client
                .new_session_with(
                    SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground),
                )
                .expect("session");
            let mut n: i64 = 0;
            while running.load(Ordering::Relaxed) {
                for _ in 0..10 {
                    let mut r = table.new_row();
                    r.set_i64("id", n % 700).expect("id");
                    r.set_str("v", &format!("value {n}")).expect("v");
                    s.apply(Operation::upsert(&table, r)).await.expect("apply");
                    n += 1;
                }
                s.flush().await.expect("flush");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            n
        })
    };

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk");
    let mut ferry = crate::ferry()
        .args([
            "run",
            "--job.sourceMasterAddresses",
            &masters,
            "--job.sinkMasterAddresses",
            &masters,
            "--job.tableName",
            "d",
            "--job.tableSuffix",
            "_copy",
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &chk.to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "300",
        ])
        .free_ports()
        .start();
    let id = ferry.job_id();
    tokio::time::sleep(Duration::from_secs(3)).await;

    let sp = dir.path().join("sp").to_string_lossy().into_owned();
    let jm = ferry.jobmanager();
    let stopped = tokio::task::spawn_blocking(move || {
        crate::ferry()
            .args(["stop", "-m", &jm, "--drain", "-p", &sp, &id])
            .output()
    })
    .await
    .expect("join");
    let o = String::from_utf8_lossy(&stopped.stdout).into_owned();
    let e = String::from_utf8_lossy(&stopped.stderr).into_owned();
    assert!(stopped.status.success(), "{o}{e}");
    let path = o
        .lines()
        .find_map(|l| l.strip_prefix("Savepoint completed. Path: "))
        .unwrap_or_else(|| panic!("no path in {o}"))
        .to_string();
    let status = ferry.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");

    let store = CheckpointStore::open_local(
        &StorageLocation::local(&chk).expect("location"),
        NonZeroUsize::MIN,
    );
    let state = store.load(&path).await.expect("load savepoint").state;
    assert!(
        state.window.is_none() && state.unassigned.is_empty() && state.pending.is_empty(),
        "the savepoint holds a window in progress: {state:?}"
    );
    let end = state.last_end_timestamp.expect("a completed window");
    let expected = read_at(&client, "d", Some(HybridTime::from_raw(end.raw()))).await;
    let copied = read_all(&client, "d_copy").await;
    assert!(!expected.is_empty());
    assert!(
        expected == copied,
        "sink ({} rows) != source as of the last window end ({} rows)",
        copied.len(),
        expected.len()
    );
    running.store(false, Ordering::Relaxed);
    let written = writer.await.expect("writer");
    assert!(written > 100, "the writer kept writing ({written} rows)");
}
