//! The workers of one sharded job: `ferry run` processes started with the
//! same keys, each watched through its own `GET /ferry/shards` (which
//! carries state and lag only for the shards that worker runs) and its
//! stdout (`shard k: RTO: …` after each takeover).

use crate::ferry::{Ferry, FerryOptions};
use crate::monitor::Monitor;
use crate::procs::proc_memory;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One shard as a worker's `GET /ferry/shards` shows it (the fields the
/// bench reads).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardView {
    pub index: u32,
    pub generation: u64,
    pub here: bool,
    pub state: Option<String>,
    pub lag_ms: Option<u64>,
    #[serde(default)]
    pub tables: Vec<TableView>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableView {
    pub name: String,
    pub lag_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct Board {
    shards: Vec<ShardView>,
}

/// A shard as the worker running it reports it, with when it was read.
#[derive(Debug, Clone)]
pub struct Running {
    pub worker: usize,
    pub view: ShardView,
    /// Epoch ms just before the read (at most the worker's own clock).
    pub read_ms: u64,
}

impl Running {
    fn is_running(&self) -> bool {
        self.view.state.as_deref() == Some("RUNNING")
    }

    /// Every table of the shard past its snapshot.
    fn snapshot_done(&self) -> bool {
        self.is_running()
            && !self.view.tables.is_empty()
            && self.view.tables.iter().all(|t| t.lag_ms.is_some())
    }

    /// Every table's last window ends after `ms` (epoch ms).
    fn ends_after(&self, ms: u64) -> bool {
        self.snapshot_done()
            && self.view.tables.iter().all(|t| {
                t.lag_ms
                    .is_some_and(|lag| self.read_ms.saturating_sub(lag) > ms)
            })
    }
}

/// One worker process and where its REST API listens.
pub struct Worker {
    pub name: String,
    pub ferry: Ferry,
    pub rest: String,
}

/// The live workers of one job.
pub struct Group {
    pub workers: Vec<Worker>,
    pub shards: u32,
    pub started: Instant,
}

/// GETs `path` of the REST API at `rest`.
async fn board(rest: &str) -> Result<Vec<ShardView>> {
    let body = crate::kudu::http_get(rest, "/ferry/shards").await?;
    Ok(serde_json::from_str::<Board>(&body)?.shards)
}

fn now_ms() -> u64 {
    ferry_engine::time::now_ms()
}

impl Group {
    /// Starts one worker per entry of `options` (each with its own log and
    /// REST port, the same job keys), one right after the other.
    pub fn start(options: Vec<FerryOptions>, shards: u32, monitor: &Monitor) -> Result<Group> {
        let started = Instant::now();
        let mut workers = Vec::new();
        for (i, mut o) in options.into_iter().enumerate() {
            let port = ferry_fixtures::free_port();
            o.rest_port = Some(port);
            let ferry = Ferry::start(&o, monitor)?;
            workers.push(Worker {
                name: format!("worker-{i}"),
                ferry,
                rest: format!("127.0.0.1:{port}"),
            });
        }
        Ok(Group {
            workers,
            shards,
            started,
        })
    }

    pub fn commands(&self) -> Vec<String> {
        self.workers
            .iter()
            .map(|w| w.ferry.command.clone())
            .collect()
    }

    fn check_alive(&self) -> Result<()> {
        for w in &self.workers {
            if !w.ferry.alive() {
                bail!(
                    "{} exited (log {}): {}",
                    w.name,
                    w.ferry.log.display(),
                    w.ferry.error_lines().join("\n")
                );
            }
        }
        Ok(())
    }

    /// The shards each live worker runs itself; a worker that does not
    /// answer (yet) shows none.
    pub async fn running(&self) -> Vec<Running> {
        let mut out = Vec::new();
        for (i, w) in self.workers.iter().enumerate() {
            let read_ms = now_ms();
            if let Ok(shards) = board(&w.rest).await {
                out.extend(shards.into_iter().filter(|s| s.here).map(|view| Running {
                    worker: i,
                    view,
                    read_ms,
                }));
            }
        }
        out
    }

    /// Polls until `done` holds for every shard (each run by some worker)
    /// and every table of `tables` appears in some shard; returns when.
    async fn wait_every_shard(
        &self,
        tables: &[String],
        done: impl Fn(&Running) -> bool,
        within: Duration,
        what: &str,
    ) -> Result<Instant> {
        let deadline = Instant::now() + within;
        loop {
            let running = self.running().await;
            let ok: BTreeSet<u32> = running
                .iter()
                .filter(|r| done(r))
                .map(|r| r.view.index)
                .collect();
            let seen: BTreeSet<&str> = running
                .iter()
                .flat_map(|r| r.view.tables.iter().map(|t| t.name.as_str()))
                .collect();
            if ok.len() == self.shards as usize && tables.iter().all(|t| seen.contains(t.as_str()))
            {
                return Ok(Instant::now());
            }
            self.check_alive()?;
            if Instant::now() > deadline {
                bail!("{what}: not within {within:?} (shards done: {ok:?})");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until every shard runs and every table of every shard is past
    /// its snapshot.
    pub async fn wait_snapshots(&self, tables: &[String], within: Duration) -> Result<Instant> {
        self.wait_every_shard(tables, Running::snapshot_done, within, "every snapshot")
            .await
    }

    /// Waits until every shard's tables have a window ending after `ms`.
    pub async fn wait_caught_up(
        &self,
        tables: &[String],
        ms: u64,
        within: Duration,
    ) -> Result<Instant> {
        self.wait_every_shard(tables, |r| r.ends_after(ms), within, "catching up")
            .await
    }

    /// User + system CPU seconds of the live workers.
    pub fn cpu_s(&self) -> f64 {
        self.workers.iter().map(|w| w.ferry.cpu_s()).sum()
    }

    /// VmRSS of each live worker (MiB) and the highest VmHWM.
    pub fn memory(&self) -> (Vec<f64>, f64) {
        let m: Vec<(f64, f64)> = self
            .workers
            .iter()
            .filter_map(|w| proc_memory(w.ferry.pid()))
            .collect();
        (
            m.iter().map(|x| x.0).collect(),
            m.iter().map(|x| x.1).fold(0.0, f64::max),
        )
    }

    /// Every takeover line the live workers printed, oldest first.
    pub fn rto_lines(&self) -> Vec<(Instant, usize, String)> {
        let mut all: Vec<(Instant, usize, String)> = self
            .workers
            .iter()
            .enumerate()
            .flat_map(|(i, w)| {
                w.ferry
                    .rto_lines()
                    .into_iter()
                    .map(move |(at, l)| (at, i, l))
            })
            .collect();
        all.sort_by_key(|x| x.0);
        all
    }

    /// Samples every running shard's lag every 500 ms until the handle is
    /// finished.
    pub fn sample_lag(&self) -> LagSampler {
        let rests: Vec<String> = self.workers.iter().map(|w| w.rest.clone()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                for rest in &rests {
                    if let Ok(shards) = board(rest).await {
                        samples.extend(
                            shards
                                .iter()
                                .filter(|s| s.here)
                                .filter_map(|s| Some((s.index, s.lag_ms?))),
                        );
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            samples
        });
        LagSampler { stop, task }
    }

    /// Kills every worker (the job is not used again).
    pub async fn kill_all(self) {
        for w in self.workers {
            let _ = w.ferry.kill().await;
        }
    }
}

/// A running lag sampler.
pub struct LagSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(u32, u64)>>,
}

impl LagSampler {
    /// Stops sampling; every (shard, lag ms) sample.
    pub async fn finish(self) -> Vec<(u32, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

/// One shard's takeover as its new worker printed it.
#[derive(Debug, Clone, Serialize)]
pub struct ShardTakeover {
    pub shard: u32,
    /// `lease silent` (its holder died) or `lease released` (handed over).
    pub kind: String,
    /// ferry's own figure: from the last renewal of the previous holder
    /// seen to the first window completed.
    pub rto_ms: u64,
    /// From the kill to the line being read (`None` for hand-overs at the
    /// start).
    pub after_kill_ms: Option<u64>,
    pub line: String,
}

/// `shard 3: RTO: 5234 ms (lease silent 5001 ms, claim 3 ms, …)`.
pub fn parse_rto(line: &str) -> Option<(u32, String, u64)> {
    let (head, rest) = line.split_once(": RTO: ")?;
    let shard = head.trim().strip_prefix("shard ")?.trim().parse().ok()?;
    let (ms, breakdown) = rest.split_once(" ms")?;
    let kind = if breakdown.contains("lease released") {
        "lease released"
    } else if breakdown.contains("lease silent") {
        "lease silent"
    } else {
        "first claim"
    };
    Some((shard, kind.to_string(), ms.trim().parse().ok()?))
}

/// The takeover lines of `lines` read at or after `since`.
pub fn takeovers_since(
    lines: &[(Instant, usize, String)],
    since: Instant,
    killed: Option<Instant>,
) -> Vec<ShardTakeover> {
    lines
        .iter()
        .filter(|(at, _, _)| *at >= since)
        .filter_map(|(at, _, l)| {
            let (shard, kind, rto_ms) = parse_rto(l)?;
            Some(ShardTakeover {
                shard,
                kind,
                rto_ms,
                after_kill_ms: killed.map(|k| at.saturating_duration_since(k).as_millis() as u64),
                line: l.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_takeover_lines() {
        assert_eq!(
            parse_rto("shard 3: RTO: 5234 ms (lease silent 5001 ms, claim 3 ms, find 20 ms, first window completed 210 ms)"),
            Some((3, "lease silent".to_string(), 5234))
        );
        assert_eq!(
            parse_rto("shard 11: RTO: 812 ms (lease released 2 ms, claim 1 ms)"),
            Some((11, "lease released".to_string(), 812))
        );
        assert_eq!(parse_rto("RTO: 5100 ms (lease silent 5000 ms)"), None);
        assert_eq!(parse_rto("shard x: RTO: 1 ms"), None);
    }

    #[test]
    fn reads_the_board() {
        let body = r#"{"clusterId":"c","count":2,"worker":null,"workers":[],
            "shards":[{"index":0,"jobId":"j","owner":"h/1","restUrl":null,"generation":2,"released":false,
                       "here":true,"state":"RUNNING","lagMs":900,"tables":[{"name":"t","lagMs":900}]},
                      {"index":1,"jobId":"k","owner":null,"restUrl":null,"generation":0,"released":false,
                       "here":false,"state":null,"lagMs":null,"tables":[]}]}"#;
        let b: Board = serde_json::from_str(body).expect("board");
        let r = Running {
            worker: 0,
            view: b.shards[0].clone(),
            read_ms: 10_000,
        };
        assert!(r.snapshot_done());
        assert!(r.ends_after(9_000));
        assert!(!r.ends_after(9_100));
        assert!(!b.shards[1].here);
    }
}
