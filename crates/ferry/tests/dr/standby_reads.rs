//! Consistent reads on the standby (issue 33, item 3), with the real
//! binary and real clusters: a job of three tables replicates under a
//! writer on each; while it runs, the newest cut of `job.cutsTable` is
//! read (the reader API task B uses) and every table of the job is
//! snapshot-scanned on the sink at the cut's sink time: each equals its
//! source read at the cut's source time, cell by cell (an independent
//! reader, `ferry_fixtures::compare`). Cuts are published every window:
//! several distinct ones in a few seconds, older ones found by
//! `at_or_before`.

use ferry_fixtures::compare::compare_tables_at;
use ferry_fixtures::workload::Workload;
use ferry_kudu::cuts::{CutRecord, CutsTable};
use kudu_client::{KuduClient, TableBuilder};
use std::time::{Duration, Instant};

const TABLES: [&str; 3] = ["reads_a", "reads_b", "reads_c"];
const CUTS: &str = "reads_cuts";

async fn newest(cuts: &CutsTable, job: &str, after: Option<&CutRecord>) -> CutRecord {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cut = cuts.newest(job).await.expect("read the cuts");
        // Tables still copying their snapshots take no part in a cut: wait
        // for the cuts of all three.
        if let Some(cut) = cut.filter(|c| {
            c.tables.len() == TABLES.len() && after.is_none_or(|a| c.source_time > a.source_time)
        }) {
            return cut;
        }
        assert!(Instant::now() < deadline, "no new cut after {after:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_at_the_newest_cut_equals_its_source_at_that_instant() {
    let cl = tokio::task::block_in_place(crate::standby_clusters);
    let (a, b) = (cl.0.master_addrs_joined(), cl.1.master_addrs_joined());
    let source = KuduClient::new(&cl.0.master_addrs()).expect("client");
    let sink = KuduClient::new(&cl.1.master_addrs()).expect("client");
    let mut writers = Vec::new();
    for (i, t) in TABLES.iter().enumerate() {
        let builder = TableBuilder::new(*t, ferry_fixtures::small_schema())
            .add_hash_partitions(&["id"], 2, 0)
            .num_replicas(1);
        source.create_table(&builder).await.expect("create");
        writers.push(Workload::start(source.clone(), t, 150, 40 + i as u64));
    }
    let dir = tempfile::tempdir().expect("tmp");
    let job = crate::ferry()
        .args(["run", "--job.sourceMasterAddresses", &a])
        .args(["--job.sinkMasterAddresses", &b])
        .args(["--job.tableName", &TABLES.join(",")])
        .args(["--job.checkpointsDirectory", &dir.path().to_string_lossy()])
        .args(["--job.createTable", "true", "--job.cutsTable", CUTS])
        .args(["--job.discoveryIntervalSeconds", "1"])
        .args(["--job.checkpointingIntervalMillis", "300"])
        .free_ports()
        .start();
    let id = job.job_id();

    let deadline = Instant::now() + Duration::from_secs(60);
    let cuts = loop {
        if let Some(c) = CutsTable::open(&sink, CUTS).await.expect("open") {
            break c;
        }
        assert!(Instant::now() < deadline, "no cuts table");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut seen: Vec<CutRecord> = Vec::new();
    for round in 0..3 {
        let cut = newest(&cuts, &id, seen.last()).await;
        let mut listed = cut.tables.clone();
        listed.sort();
        assert_eq!(listed, TABLES, "round {round}: {cut:?}");
        for t in TABLES {
            let diff = compare_tables_at(
                &source,
                &sink,
                (t, Some(cut.source_time.raw())),
                (t, Some(cut.sink_time.raw())),
            )
            .await;
            assert!(diff.is_equal(), "round {round}, {t} at {cut:?}: {diff}");
            assert!(
                diff.source_rows > 0,
                "round {round}, {t}: nothing written yet"
            );
        }
        seen.push(cut);
    }
    // Every window publishes one; an earlier instant finds its own cut.
    let first = &seen[0];
    let found = cuts
        .at_or_before(&id, first.source_time)
        .await
        .expect("read")
        .expect("the first cut");
    assert_eq!(&found, first);
    let all = cuts.all(&id).await.expect("read");
    assert!(all.len() >= 3, "{all:?}");
    assert!(all.windows(2).all(|w| w[0].source_time < w[1].source_time));

    for w in writers {
        w.stop().await;
    }
    drop(job);
}
