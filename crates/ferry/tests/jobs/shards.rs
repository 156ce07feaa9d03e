//! A job cut into shards (issue 32, "what a shard is"): three `ferry run`
//! processes, one per shard (`job.shard`), replicate six tables, one of
//! them split by hash bucket (`job.shardTabletsOver`), under a mixed
//! writer; each table is written by exactly the shards that own it, the
//! sink equals the source cell by cell, and a shard's savepoint restored
//! with another `job.shards` is refused before anything is written.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ferry_engine::identity::TableId;
use ferry_engine::shard::ShardSpec;
use ferry_fixtures::live::{compare_all, create_varied_tables, load_rows, wait_caught_up};
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::{Workload, WorkloadOptions};
use ferry_kudu::shard::ShardTablets;
use kudu_client::scan::ScanSpec;
use kudu_client::{KuduClient, TableBuilder};

/// Bound on waiting for a job to catch up (a hang, not a timing check).
const CATCH_UP: Duration = Duration::from_secs(120);
const SHARDS: u32 = 3;
/// The split table has 6 buckets: more than this.
const TABLETS_OVER: &str = "4";
const BIG: &str = "sh_big";
const ROWS: i64 = 300;

struct Env {
    clusters: std::sync::Arc<(ferry_testkit::MiniCluster, ferry_testkit::MiniCluster)>,
    source: KuduClient,
    sink: KuduClient,
    dir: tempfile::TempDir,
}

impl Env {
    fn start(&self, shards: u32, shard: u32) -> FerryProcess {
        crate::ferry()
            .args(self.args(shards, shard, &[]))
            .free_ports()
            .start()
    }

    /// `ferry run`'s arguments for shard `shard` of `shards`, then `more`.
    fn args(&self, shards: u32, shard: u32, more: &[&str]) -> Vec<String> {
        let chk = self.dir.path().join("chk");
        let mut args: Vec<String> = [
            "run",
            "--job.sourceMasterAddresses",
            &self.clusters.0.master_addrs_joined(),
            "--job.sinkMasterAddresses",
            &self.clusters.1.master_addrs_joined(),
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &chk.to_string_lossy(),
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.checkpointingIntervalMillis",
            "500",
            "--job.tableDiscoveryIntervalSeconds",
            "1",
            "--job.tablePattern",
            "sh_.*",
            "--job.name",
            "sharded",
            "--job.shards",
            &shards.to_string(),
            "--job.shardTabletsOver",
            TABLETS_OVER,
            "--job.shard",
            &shard.to_string(),
            "-p",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(more.iter().map(|s| s.to_string()));
        args
    }
}

/// Which tables each shard replicates, by the rule every shard applies
/// alone: the owner of a whole table, every owner of a split table's
/// buckets.
async fn expected_tables(source: &KuduClient, names: &[String]) -> Vec<BTreeSet<String>> {
    let mut out = vec![BTreeSet::new(); SHARDS as usize];
    for name in names {
        let table = source.open_table(name).await.expect("open");
        for k in 0..SHARDS {
            let shard = shard_tablets(k);
            let owns = if name == BIG {
                assert!(shard.is_split(&table), "{BIG} is split");
                shard.owns_any(&table)
            } else {
                assert!(!shard.is_split(&table), "{name} is not split");
                ShardSpec::table_owner(SHARDS, &TableId::new(table.id())) == k
            };
            if owns {
                out[k as usize].insert(name.clone());
            }
        }
    }
    out
}

fn shard_tablets(k: u32) -> ShardTablets {
    ShardTablets {
        spec: ShardSpec::new(k, SHARDS).expect("shard"),
        tablets_over: TABLETS_OVER.parse().expect("number"),
    }
}

/// The rows of the split table in each shard's tablets, counted per tablet
/// on the source.
async fn big_rows_per_shard(source: &KuduClient) -> Vec<u64> {
    let table = source.open_table(BIG).await.expect("open");
    let splits = source
        .scan_splits(&table, &ScanSpec::new())
        .await
        .expect("splits");
    let mut rows = vec![0u64; SHARDS as usize];
    for split in &splits {
        let owners: Vec<u32> = (0..SHARDS)
            .filter(|k| shard_tablets(*k).owns_tablet(&table, split.partition_key_start()))
            .collect();
        assert_eq!(owners.len(), 1, "one owner per tablet: {owners:?}");
        let mut scanner = source.scanner_for_split(split).await.expect("scanner");
        while let Some(batch) = scanner.next_batch().await.expect("batch") {
            rows[owners[0] as usize] += batch.len() as u64;
        }
    }
    rows
}

/// The position records on the sink: key → the job that wrote it.
async fn positions(sink: &KuduClient) -> BTreeMap<String, String> {
    let table = sink.open_table("ferry_positions").await.expect("positions");
    let mut scanner = sink.scan_builder(&table).build().expect("scanner");
    let mut out = BTreeMap::new();
    while let Some(batch) = scanner.next_batch().await.expect("batch") {
        for row in batch.rows() {
            out.insert(
                row.get_str("sink_table").expect("key").to_string(),
                format!(
                    "{} {}",
                    row.get_str("job_id").expect("job"),
                    row.get_i64("window_end").expect("end")
                ),
            );
        }
    }
    out
}

fn live_tables(p: &FerryProcess) -> Vec<(String, u64)> {
    p.live()["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| {
            (
                t["tableName"].as_str().unwrap_or("").to_string(),
                t["rowsUpserted"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_divide_six_tables_one_split_by_bucket() {
    let clusters = tokio::task::block_in_place(crate::two_clusters);
    let env = Env {
        source: KuduClient::new(&clusters.0.master_addrs()).expect("source client"),
        sink: KuduClient::new(&clusters.1.master_addrs()).expect("sink client"),
        clusters,
        dir: tempfile::tempdir().expect("tmp"),
    };
    let mut names = create_varied_tables(&env.source, "sh_", 5).await;
    let big = TableBuilder::new(BIG, ferry_fixtures::small_schema())
        .add_hash_partitions(&["id"], 6, 0)
        .num_replicas(1);
    env.source
        .create_table(&big)
        .await
        .expect("create the split table");
    names.push(BIG.to_string());
    for n in &names {
        load_rows(&env.source, n, 0..ROWS).await;
    }
    let expected = expected_tables(&env.source, &names).await;
    let big_rows = big_rows_per_shard(&env.source).await;
    assert_eq!(big_rows.iter().sum::<u64>(), ROWS as u64);

    let mut shards: Vec<FerryProcess> = (0..SHARDS).map(|k| env.start(SHARDS, k)).collect();
    for (k, p) in shards.iter().enumerate() {
        let mine: Vec<String> = expected[k].iter().cloned().collect();
        wait_caught_up(&env.source, p.metrics(), &mine, CATCH_UP).await;
    }
    // Each shard replicates exactly its tables; of the split table, the
    // snapshot wrote exactly the rows of its buckets.
    for (k, p) in shards.iter().enumerate() {
        let live = live_tables(p);
        let tables: BTreeSet<String> = live.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(tables, expected[k], "shard {k}'s tables");
        let big_written = live.iter().find(|(n, _)| n == BIG).map_or(0, |(_, r)| *r);
        assert_eq!(big_written, big_rows[k], "shard {k}'s rows of {BIG}");
    }

    // A mixed writer on the split table and two whole ones.
    let writers: Vec<Workload> = [BIG, "sh_00", "sh_01"]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            Workload::start_with(
                env.source.clone(),
                n,
                WorkloadOptions {
                    ops_per_sec: 150,
                    seed: i as u64,
                    first_id: 10_000,
                    key_floor: 0,
                },
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(5)).await;
    for w in writers {
        let stats = w.stop().await;
        assert!(stats.applied > 0, "{stats:?}");
    }
    for (k, p) in shards.iter_mut().enumerate() {
        let mine: Vec<String> = expected[k].iter().cloned().collect();
        wait_caught_up(&env.source, p.metrics(), &mine, CATCH_UP).await;
        p.assert_running(&format!("shard {k} under the writer"));
    }
    let pairs: Vec<(String, String)> = names.iter().map(|n| (n.clone(), n.clone())).collect();
    let bad = compare_all(&env.source, &env.sink, &pairs).await;
    assert!(bad.is_empty(), "tables differ: {bad:?}");

    // The sink positions say who writes what: a whole table's record is
    // its owner's; the split table has one record per shard with buckets.
    let jobs: Vec<String> = shards.iter().map(|p| p.job_id()).collect();
    let recorded = positions(&env.sink).await;
    for (k, tables) in expected.iter().enumerate() {
        for t in tables {
            let key = match t.as_str() {
                BIG => format!("{BIG}#shard-{k}"),
                _ => t.clone(),
            };
            let record = recorded
                .get(&key)
                .unwrap_or_else(|| panic!("no position {key}: {recorded:?}"));
            assert!(
                record.starts_with(&jobs[k]),
                "{key} written by shard {k}: {record}"
            );
        }
    }
    assert!(
        !recorded.contains_key(BIG),
        "no whole-table record of a split table: {recorded:?}"
    );

    // Shard 1's savepoint with another shard count: refused, nothing written.
    let sp = shards[1].stop_with_savepoint(&env.dir.path().join("sp"));
    let of_shard_1 = |all: BTreeMap<String, String>| -> BTreeMap<String, String> {
        all.into_iter()
            .filter(|(_, r)| r.starts_with(&jobs[1]))
            .collect()
    };
    let before = of_shard_1(positions(&env.sink).await);
    assert!(!before.is_empty(), "shard 1 has positions");
    let chk_entries = || {
        std::fs::read_dir(env.dir.path().join("chk"))
            .expect("chk")
            .count()
    };
    let jobs_before = chk_entries();
    let four = crate::ferry()
        .args(env.args(4, 1, &["-s", &sp]))
        .free_ports()
        .output();
    let err = String::from_utf8_lossy(&four.stderr).to_string();
    assert_eq!(
        four.status.code(),
        Some(1),
        "refused: {:?}\n{err}",
        four.status
    );
    for part in [
        "shard 1 of 3 (job.shards = 3",
        "shard 1 of 4 (job.shards = 4",
        "fixed when a job is created",
    ] {
        assert!(err.contains(part), "the message says {part:?}: {err}");
    }
    assert_eq!(
        of_shard_1(positions(&env.sink).await),
        before,
        "no position was written"
    );
    assert_eq!(
        chk_entries(),
        jobs_before,
        "no checkpoint directory was made"
    );
    // The others went on all along.
    for k in [0, 2] {
        shards[k].assert_running(&format!("shard {k} after shard 1 stopped"));
    }
    for k in [0, 2] {
        shards[k].sigterm();
        shards[k].wait_exit(Duration::from_secs(60));
    }
}
