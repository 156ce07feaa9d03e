//! The lease table against a real Kudu cluster: the engine's `StateStore`
//! contract (exactly one of racing creators wins, read-after-write,
//! segment-aware listing, idempotent delete, atomic replace), created on
//! first use; a table that is not a lease table and a record too large for
//! a cell are refused with the reason; the engine's lease protocol runs
//! over it (one claim wins, a renewal after a takeover fails).

use ferry_engine::checkpoint::{StateKey, StateStore, StoreError};
use ferry_engine::config::JobConfig;
use ferry_engine::lease::Lease;
use ferry_kudu::lease_table::{LeaseTable, MAX_OBJECT_BYTES};
use kudu_client::TableBuilder;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_table_keeps_the_state_store_contract_and_the_lease() {
    // The sink cluster the sink_table tests share (the lease table takes
    // its default replication factor).
    let (_clusters, _, client) = tokio::task::block_in_place(crate::sink_table::clusters);
    let store: Arc<dyn StateStore> = Arc::new(LeaseTable::new(client.clone(), "ferry_ha"));
    ferry_engine::checkpoint::conformance::run_small_objects(
        store.clone(),
        StateKey::parse("conformance").expect("key"),
    )
    .await;
    client
        .open_table("ferry_ha")
        .await
        .expect("created on first use");

    // Too large for a Kudu cell: refused with the size, nothing written.
    let big = StateKey::parse("big").expect("key");
    let err = store
        .put_if_absent(&big, vec![0u8; MAX_OBJECT_BYTES + 1].into())
        .await
        .expect_err("too large");
    assert!(
        err.to_string().contains("more than a lease table holds"),
        "{err}"
    );
    assert_eq!(store.get(&big).await.expect("get"), None);

    // The lease protocol over it: the first claim wins generation 1, a
    // second instance's claim on the newest record wins 2, and a claim
    // racing for that same object loses.
    let cfg = JobConfig::from_named_pairs([
        ("job.sourceMasterAddresses", "a:7051"),
        ("job.sinkMasterAddresses", "b:7051"),
        ("job.tableName", "t"),
        ("job.checkpointsDirectory", "/chk"),
        ("high-availability.type", "lease"),
        ("high-availability.lease-duration", "600 ms"),
        ("high-availability.renew-interval", "200 ms"),
    ])
    .expect("config");
    let job = cfg.ha_job_id();
    let a = Lease::named(store.clone(), "kudu:ferry_ha", &job, &cfg.ha, "a");
    let b = Lease::named(store.clone(), "kudu:ferry_ha", &job, &cfg.ha, "b");
    assert_eq!(a.location(), format!("kudu:ferry_ha/{job}/_lease"));
    let held_a = a
        .claim(None)
        .await
        .expect("claim")
        .expect("first claim wins");
    assert_eq!(held_a.generation, 1);
    let seen = b.newest().await.expect("read").expect("a record");
    assert_eq!((seen.generation, seen.owner.as_str()), (1, "a"));
    let held_b = b
        .claim(Some(&seen))
        .await
        .expect("claim")
        .expect("takeover");
    assert_eq!(held_b.generation, 2);
    assert!(
        a.claim(Some(&seen)).await.expect("claim").is_none(),
        "a claim racing for the same object loses"
    );

    // A table of that name that is not a lease table is refused, untouched.
    let foreign = TableBuilder::new("not_ha", ferry_fixtures::small_schema()).num_replicas(1);
    client.create_table(&foreign).await.expect("create");
    let store = LeaseTable::new(client, "not_ha");
    let err = store
        .get(&StateKey::parse("x").expect("key"))
        .await
        .expect_err("refused");
    assert!(matches!(err, StoreError::Open { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("kudu:not_ha") && text.contains("high-availability.storageDir"),
        "{text}"
    );
}
