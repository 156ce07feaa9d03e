//! The sharded drill (issue 32, item 2), against two real Kudu clusters
//! and the real `ferry` binary: one job of 12 tables cut into 6 shards
//! (one table split by tablets), run by worker processes that share the
//! shards through worker slots and shard leases (`high-availability.type
//! lease` in its default place, a table on the sink cluster), under a
//! mixed writer:
//!
//! 1. three workers start and share the six shards;
//! 2. one is killed with SIGKILL: its slot and shard leases lapse, the
//!    other two take its shards, each from the shard's newest state;
//! 3. a fourth worker joins: the others hand shards over (savepoint, then
//!    an immediate release of the shard lease);
//! 4. one is stopped with SIGTERM: it stops its shards with savepoints,
//!    releases them and its slot, and exits 0;
//!
//! then the sink equals the source cell by cell, table by table (an
//! independent reader), no shard was ever run by two workers at once —
//! every shard's checkpoints, in the order they were taken, come from one
//! generation at a time, each generation's after the previous one's, and
//! the shard's lease ends at its newest generation — and the takeover
//! time of each shard moved by a death or a hand-over is printed.
//!
//! The same workers on the other coordination servers (a real ZooKeeper,
//! a real Kubernetes API server): two workers of four shards, one killed
//! with SIGKILL, the other takes its shards; the same evidence.

use ferry_engine::checkpoint::{
    decode_metadata, CheckpointStore, JobId, JobState, StorageLocation,
};
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::free_port;
use ferry_fixtures::process::FerryProcess;
use ferry_fixtures::workload::Workload;
use kudu_client::{KuduClient, TableBuilder};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rows per second of each of the writers.
const OPS_PER_SEC: u32 = 60;

/// What a drill runs: its tables (`<prefix>_t<i>`), shards, cluster id and
/// coordination (the HA keys, and the environment each worker gets).
struct Plan {
    prefix: &'static str,
    tables: usize,
    shards: u32,
    ha: Vec<String>,
    env: Vec<(String, String)>,
    /// The coordination server, held so it stays up while the drill runs.
    _server: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl Plan {
    /// The `lease` type in its default place (a table on the sink cluster).
    fn lease(prefix: &'static str, tables: usize, shards: u32) -> Plan {
        let mut ha: Vec<String> = crate::ha_kit::LEASE_KEYS.map(String::from).to_vec();
        ha.extend(["--high-availability.cluster-id".into(), cluster(prefix)]);
        Plan {
            prefix,
            tables,
            shards,
            ha,
            env: Vec::new(),
            _server: None,
        }
    }

    /// ZooKeeper HA on the shared server.
    fn zookeeper(prefix: &'static str, tables: usize, shards: u32) -> Plan {
        let zk = tokio::task::block_in_place(crate::zookeeper_ha::shared_zookeeper);
        Plan {
            ha: crate::zookeeper_ha::zk_args(&zk.connect_string(), &cluster(prefix)),
            _server: Some(zk),
            ..Plan::lease(prefix, tables, shards)
        }
    }

    /// Kubernetes HA on the shared API server, workers as pods of the
    /// ferry service account.
    fn kubernetes(prefix: &'static str, tables: usize, shards: u32) -> Plan {
        let kube = tokio::task::block_in_place(crate::kube_ha::kube);
        let mut ha: Vec<String> = crate::kube_ha::kube_args();
        ha.extend(["--high-availability.cluster-id".into(), cluster(prefix)]);
        let config = kube.kubeconfig(ferry_testkit::kube::Identity::Ferry);
        Plan {
            ha,
            env: vec![("KUBECONFIG".into(), config.to_string_lossy().into_owned())],
            _server: Some(kube),
            ..Plan::lease(prefix, tables, shards)
        }
    }

    fn cluster(&self) -> String {
        cluster(self.prefix)
    }
}

fn cluster(prefix: &str) -> String {
    format!("{prefix}-drill")
}

struct Drill {
    /// Held so the shared clusters stay up while the drill runs.
    _clusters: std::sync::Arc<(ferry_testkit::MiniCluster, ferry_testkit::MiniCluster)>,
    source: KuduClient,
    sink: KuduClient,
    tables: Vec<String>,
    dir: tempfile::TempDir,
    args: Vec<String>,
    plan: Plan,
}

impl Drill {
    async fn new(plan: Plan) -> Drill {
        let clusters = tokio::task::block_in_place(crate::standby_clusters);
        let (src, dst) = (&clusters.0, &clusters.1);
        let source = KuduClient::new(&src.master_addrs()).expect("client");
        let sink = KuduClient::new(&dst.master_addrs()).expect("client");
        let mut tables = Vec::new();
        for i in 0..plan.tables {
            let name = format!("{}_t{i:02}", plan.prefix);
            // Table 0 is big: 8 hash buckets, split over the shards.
            let buckets = if i == 0 { 8 } else { 2 };
            let b = TableBuilder::new(&name, ferry_fixtures::all_types_schema())
                .add_hash_partitions(&["id"], buckets, 0)
                .num_replicas(1);
            source.create_table(&b).await.expect("create");
            tables.push(name);
        }
        let dir = tempfile::tempdir().expect("tmp");
        let chk = dir.path().join("chk").to_string_lossy().to_string();
        let sp = dir.path().join("sp").to_string_lossy().to_string();
        let pattern = format!("{}_t.*", plan.prefix);
        let shards = plan.shards.to_string();
        let mut args: Vec<String> = [
            "--job.sourceMasterAddresses",
            &src.master_addrs_joined(),
            "--job.sinkMasterAddresses",
            &dst.master_addrs_joined(),
            "--job.tablePattern",
            &pattern,
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &chk,
            "--job.checkpointsRetained",
            "1000",
            "--job.checkpointingIntervalMillis",
            "500",
            "--job.discoveryIntervalSeconds",
            "1",
            "--job.shards",
            &shards,
            "--job.shardTabletsOver",
            "4",
            "--savepointPath",
            &sp,
            "-p",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(plan.ha.iter().cloned());
        Drill {
            _clusters: clusters.clone(),
            source,
            sink,
            tables,
            dir,
            args,
            plan,
        }
    }

    fn worker(&self, name: &str) -> FerryProcess {
        let mut ferry = crate::ferry().arg("run").args(&self.args);
        for (k, v) in &self.plan.env {
            ferry = ferry.env(k, v);
        }
        ferry
            .env("POD_NAME", name)
            .rest_port(free_port())
            .log_level("info")
            .stderr_file(&self.dir.path().join(format!("{name}.err")))
            .spawn()
    }

    fn chk(&self) -> PathBuf {
        self.dir.path().join("chk")
    }

    fn shard_job(&self, k: u32) -> JobId {
        ferry_engine::config::ha_job_id(&format!("{}-shard-{k}", self.plan.cluster()))
    }

    async fn clock(&self) -> u64 {
        self.source.server_clock().await.expect("clock").raw()
    }

    /// Waits until every shard has a complete checkpoint whose window end
    /// passed `ts`, taken by a generation above `above[k]`; returns each
    /// shard's generation then.
    async fn all_caught_up(&self, ts: u64, above: &[u64], within: Duration) -> Vec<u64> {
        let store = CheckpointStore::open_local(
            &StorageLocation::local(&self.chk()).expect("loc"),
            NonZeroUsize::new(1000).expect("n"),
        );
        let deadline = Instant::now() + within;
        loop {
            let mut generations = Vec::new();
            for k in 0..self.plan.shards {
                let latest = store
                    .latest_complete(&self.shard_job(k))
                    .await
                    .expect("list");
                match latest.checkpoint {
                    Some(c)
                        if c.state.generation > above[k as usize]
                            && c.state.last_end_timestamp.is_some_and(|t| t.raw() > ts) =>
                    {
                        generations.push(c.state.generation)
                    }
                    _ => break,
                }
            }
            if generations.len() == self.plan.shards as usize {
                return generations;
            }
            assert!(
                Instant::now() < deadline,
                "shard {} never caught up (above generation {above:?})",
                generations.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every valid checkpoint of shard `k`, by checkpoint id.
    fn checkpoints(&self, k: u32) -> Vec<JobState> {
        let dir = self.chk().join(self.shard_job(k).to_string());
        let mut states = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("shard dir").flatten() {
            if let Ok(bytes) = std::fs::read(entry.path().join("_metadata")) {
                states.push(decode_metadata(&bytes).expect("valid checkpoint"));
            }
        }
        states.sort_by_key(|s| s.checkpoint_id);
        states
    }

    /// Fencing evidence: shard `k`'s checkpoints come from one generation
    /// at a time, generations only growing, each one's first checkpoint
    /// written after the previous one's last.
    fn assert_one_writer_at_a_time(&self, k: u32) -> Vec<u64> {
        let states = self.checkpoints(k);
        let mut generations: Vec<u64> = Vec::new();
        let mut last_of_previous = 0u64;
        let mut previous: Option<&JobState> = None;
        for s in &states {
            if let Some(p) = previous {
                assert!(
                    s.generation >= p.generation,
                    "shard {k}: chk-{} of generation {} after chk-{} of generation {}",
                    s.checkpoint_id,
                    s.generation,
                    p.checkpoint_id,
                    p.generation
                );
                if s.generation > p.generation {
                    last_of_previous = p.created_at_ms;
                    assert!(
                        s.created_at_ms >= last_of_previous,
                        "shard {k}: generation {} wrote chk-{} before generation {}'s last",
                        s.generation,
                        s.checkpoint_id,
                        p.generation
                    );
                }
            }
            if generations.last() != Some(&s.generation) {
                generations.push(s.generation);
            }
            previous = Some(s);
        }
        let _ = last_of_previous;
        generations
    }
}

/// Each `shard k: RTO: …` line a worker printed.
fn takeovers(worker: &FerryProcess) -> Vec<String> {
    worker
        .stdout_lines()
        .into_iter()
        .filter(|l| l.contains(": RTO: "))
        .collect()
}

/// Stderr lines of the slot view (`live slots … running shards …`).
fn views(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("running shards"))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_workers_share_six_shards_through_kill_join_and_stop() {
    let started = Instant::now();
    let d = Drill::new(Plan::lease("shards", 12, 6)).await;
    let writers: Vec<Workload> = [0usize, 3, 7]
        .iter()
        .map(|&i| Workload::start(d.source.clone(), &d.tables[i], OPS_PER_SEC, 40 + i as u64))
        .collect();
    let mut a = d.worker("a");
    let mut b = d.worker("b");
    let mut c = d.worker("c");
    let t0 = d.clock().await;
    let first = d.all_caught_up(t0, &[0; 6], Duration::from_secs(180)).await;
    eprintln!(
        "drill: 3 workers ran every shard after {:?}",
        started.elapsed()
    );
    for w in [&a, &b, &c] {
        let view = views(w.stderr_path());
        assert!(
            view.last().is_some_and(|l| !l.ends_with("[]")),
            "a worker with no shards:\n{}",
            w.output_text()
        );
    }

    // 1. kill -9: the other two take the dead worker's shards.
    a.kill9();
    let killed = Instant::now();
    let t1 = d.clock().await;
    let after_kill = d.all_caught_up(t1, &[0; 6], Duration::from_secs(120)).await;
    let moved: Vec<u32> = (0..d.plan.shards)
        .filter(|&k| after_kill[k as usize] > first[k as usize])
        .collect();
    assert!(
        !moved.is_empty(),
        "a killed worker's shards were taken over"
    );
    eprintln!(
        "drill: after the kill, shards {moved:?} ran elsewhere within {:?}",
        killed.elapsed()
    );

    // 2. A fourth worker joins: it is handed shards.
    let mut e = d.worker("e");
    let t2 = d.clock().await;
    let joined = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ![&b, &c]
        .iter()
        .any(|w| w.stderr_text().contains("handing over"))
    {
        assert!(
            Instant::now() < deadline,
            "nobody handed a shard over:\n{}",
            e.output_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after_join = d.all_caught_up(t2, &[0; 6], Duration::from_secs(120)).await;
    assert!(
        views(e.stderr_path()).iter().any(|l| !l.ends_with("[]")),
        "the new worker runs shards:\n{}",
        e.output_text()
    );
    eprintln!(
        "drill: the joined worker runs its shards within {:?}",
        joined.elapsed()
    );

    // 3. SIGTERM: savepoints, releases, exit 0.
    b.sigterm();
    let status = tokio::task::block_in_place(|| b.wait_exit(Duration::from_secs(60)));
    assert!(status.success(), "{status}:\n{}", b.output_text());
    let err = b.stderr_text();
    assert!(err.contains("released generation"), "{err}");
    let t3 = d.clock().await;
    d.all_caught_up(t3, &[0; 6], Duration::from_secs(120)).await;

    for w in writers {
        let stats = w.stop().await;
        assert!(stats.applied > 100, "changes flowed: {stats:?}");
    }
    let stopped = d.clock().await;
    d.all_caught_up(stopped, &[0; 6], Duration::from_secs(120))
        .await;
    for t in &d.tables {
        let diff = compare_tables(&d.source, &d.sink, t, t).await;
        assert!(diff.is_equal(), "{t}: {diff}");
    }
    // Any worker's view: every shard run by a live worker, its lease at
    // the generation that wrote its newest checkpoint.
    let view =
        tokio::task::block_in_place(|| ferry_fixtures::http::get_json(c.rest(), "/ferry/shards"));
    let live_urls = [c.rest(), e.rest()].map(|p| format!(":{p}"));
    for k in 0..d.plan.shards {
        let generations = d.assert_one_writer_at_a_time(k);
        eprintln!("drill: shard {k}: generations in checkpoint order {generations:?}");
        let shard = &view["shards"][k as usize];
        assert_eq!(
            shard["generation"].as_u64(),
            generations.last().copied(),
            "shard {k}'s lease: {shard}"
        );
        let url = shard["restUrl"].as_str().unwrap_or_default();
        assert!(
            live_urls.iter().any(|p| url.ends_with(p.as_str())),
            "shard {k} is run by a live worker: {shard}"
        );
    }
    let list = crate::ferry()
        .args(["list", "--jobmanager", &format!("127.0.0.1:{}", e.rest())])
        .output();
    let text = String::from_utf8_lossy(&list.stdout).to_string();
    for k in 0..d.plan.shards {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("shard {k} : ")) && l.contains("RUNNING")),
            "ferry list shows shard {k} running:\n{text}"
        );
    }
    let mut lines = Vec::new();
    for w in [&b, &c, &e] {
        lines.extend(takeovers(w));
    }
    assert!(!lines.is_empty(), "takeover times are printed");
    for l in &lines {
        eprintln!("drill: takeover {l}");
    }
    let _ = after_join;
    eprintln!("drill: took {:?}", started.elapsed());
    c.sigterm();
    e.sigterm();
    for w in [&mut c, &mut e] {
        tokio::task::block_in_place(|| w.wait_exit(Duration::from_secs(60)));
    }
}

/// Two workers of four shards (five tables, one split) on `plan`'s
/// coordination server, under a writer: one is killed with SIGKILL, the
/// other takes its shards from their newest states; sink == source, one
/// writer per shard at a time, takeover times printed.
async fn two_workers_through_a_kill(plan: Plan) {
    let started = Instant::now();
    let d = Drill::new(plan).await;
    let writers: Vec<Workload> = [0usize, 2]
        .iter()
        .map(|&i| Workload::start(d.source.clone(), &d.tables[i], OPS_PER_SEC, 60 + i as u64))
        .collect();
    let mut a = d.worker("worker-a");
    let mut b = d.worker("worker-b");
    let shards = d.plan.shards as usize;
    let t0 = d.clock().await;
    let first = d
        .all_caught_up(t0, &vec![0; shards], Duration::from_secs(180))
        .await;
    for w in [&a, &b] {
        let view = views(w.stderr_path());
        assert!(
            view.last().is_some_and(|l| !l.ends_with("[]")),
            "each worker runs shards:\n{}",
            w.output_text()
        );
    }
    a.kill9();
    let t1 = d.clock().await;
    // The dead worker wrote nothing after t1: its shards passing t1 ran
    // elsewhere.
    let after = d
        .all_caught_up(t1, &vec![0; shards], Duration::from_secs(120))
        .await;
    assert!(
        after.iter().zip(&first).any(|(now, before)| now > before),
        "the killed worker's shards were taken over: {first:?} -> {after:?}"
    );
    for w in writers {
        let stats = w.stop().await;
        assert!(stats.applied > 100, "changes flowed: {stats:?}");
    }
    let stopped = d.clock().await;
    d.all_caught_up(stopped, &vec![0; shards], Duration::from_secs(120))
        .await;
    for t in &d.tables {
        let diff = compare_tables(&d.source, &d.sink, t, t).await;
        assert!(diff.is_equal(), "{t}: {diff}");
    }
    for k in 0..d.plan.shards {
        let generations = d.assert_one_writer_at_a_time(k);
        eprintln!("drill: shard {k}: generations in checkpoint order {generations:?}");
    }
    let lines = takeovers(&b);
    assert!(
        !lines.is_empty(),
        "takeover times are printed:\n{}",
        b.output_text()
    );
    for l in &lines {
        eprintln!("drill: takeover {l}");
    }
    b.sigterm();
    let status = tokio::task::block_in_place(|| b.wait_exit(Duration::from_secs(60)));
    assert!(status.success(), "{status}:\n{}", b.output_text());
    eprintln!("drill: took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_on_zookeeper_take_over_a_killed_workers_shards() {
    two_workers_through_a_kill(Plan::zookeeper("zkshards", 5, 4)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_on_kubernetes_take_over_a_killed_workers_shards() {
    let _turn = crate::kube_ha::TURN.lock().await;
    two_workers_through_a_kill(Plan::kubernetes("kubeshards", 5, 4)).await;
}
