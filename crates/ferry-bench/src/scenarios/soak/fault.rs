//! The soak's faults (issue 17's list): what each does, how long it is
//! held, and the record of one fault from injecting it until ferry has
//! recovered.

use super::{unix_ms, Comparison, Soak};
use crate::report::f1;
use anyhow::{anyhow, bail, Result};
use ferry_testkit::DaemonKind;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use serde::Serialize;
use std::time::{Duration, Instant};

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Every sink tablet server frozen (SIGSTOP), then thawed (SIGCONT).
    SinkHang,
    /// The whole sink cluster stopped, then started again on the same addresses.
    SinkOutage,
    /// One source tablet server killed (SIGKILL), then started again.
    SourceTserverRestart,
    /// The source's leader master killed until another one leads, then started again.
    MasterLeaderChange,
    /// ferry's traffic to the sink dropped (nftables in ferry's network namespace).
    Partition,
    /// The filesystem holding ferry's checkpoints remounted read-only.
    CheckpointUnwritable,
    /// ferry killed with SIGKILL and started from its newest complete checkpoint.
    FerryKill,
}

impl FaultKind {
    pub const ALL: [FaultKind; 7] = [
        FaultKind::SinkHang,
        FaultKind::SinkOutage,
        FaultKind::SourceTserverRestart,
        FaultKind::MasterLeaderChange,
        FaultKind::Partition,
        FaultKind::CheckpointUnwritable,
        FaultKind::FerryKill,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::SinkHang => "sink-hang",
            FaultKind::SinkOutage => "sink-outage",
            FaultKind::SourceTserverRestart => "source-tserver-restart",
            FaultKind::MasterLeaderChange => "master-leader-change",
            FaultKind::Partition => "partition",
            FaultKind::CheckpointUnwritable => "checkpoint-unwritable",
            FaultKind::FerryKill => "ferry-kill",
        }
    }
}

/// Every kind once, in random order: drawing from such bags keeps the mix
/// even over a run while the order stays random.
pub fn shuffled(kinds: &[FaultKind], rng: &mut StdRng) -> Vec<FaultKind> {
    let mut bag = kinds.to_vec();
    bag.shuffle(rng);
    bag
}

/// One fault, from injecting it until ferry had recovered, and the
/// comparison at the quiet point after it.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    pub n: usize,
    pub kind: FaultKind,
    /// What exactly was done (which daemon, for how long).
    pub detail: String,
    /// Seconds since the soak started.
    pub start_s: f64,
    /// Wall clock when it started (Unix seconds).
    pub start_unix_s: f64,
    /// From injecting the fault until it was healed.
    pub duration_s: f64,
    /// From the heal until ferry's lastEndTimestamp passed it; `None`: not
    /// within the recovery timeout.
    pub recover_s: Option<f64>,
    /// Largest lag sampled from the start of the fault until recovery.
    pub max_lag_s: Option<f64>,
    /// `job restarting` lines ferry logged meanwhile (its restart strategy).
    pub engine_restarts: usize,
    /// Change of `flink_jobmanager_job_numRestarts` meanwhile, when the
    /// same ferry process served it before and after.
    pub num_restarts_metric: Option<f64>,
    /// ferry processes that ended on their own meanwhile.
    pub ferry_exits: usize,
    pub comparison: Option<Comparison>,
}

impl FaultRecord {
    /// The progress line printed after each fault.
    pub fn one_line(&self) -> String {
        format!(
            "fault {} {} ({}): held {} s, recovered {}, max lag {} s, {} restart(s), {} exit(s), {}",
            self.n,
            self.kind.name(),
            self.detail,
            f1(self.duration_s),
            self.recover_s
                .map_or("NOT within the timeout".into(), |s| format!(
                    "after {} s",
                    f1(s)
                )),
            self.max_lag_s.map_or("-".into(), f1),
            self.engine_restarts,
            self.ferry_exits,
            match self.comparison.as_ref().and_then(|c| c.equal) {
                Some(true) => "sink == source".to_string(),
                Some(false) => "SINK != SOURCE".to_string(),
                None => "not compared".to_string(),
            }
        )
    }
}

impl Soak<'_> {
    /// Injects `kind`, holds and heals it, and waits until ferry recovers.
    pub(super) async fn fault(
        &mut self,
        n: usize,
        kind: FaultKind,
        every: Duration,
    ) -> Result<FaultRecord> {
        let start_s = self.elapsed_s();
        let start_unix_s = unix_ms() / 1000.0;
        let restarts_before = self.restart_lines();
        let metric_before = self.num_restarts().await;
        let exits_before = self.exits.len();
        println!("  fault {n} at {start_s:.0} s: {} ...", kind.name());
        self.current_fault = Some(kind);
        let injected = Instant::now();
        let detail = self.inject_and_heal(kind, every).await?;
        let duration_s = injected.elapsed().as_secs_f64();
        let recover_s = self.wait_end_past(unix_ms()).await?;
        self.current_fault = None;
        let metric_after = self.num_restarts().await;
        let num_restarts_metric = match (metric_before, metric_after) {
            (Some((g0, v0)), Some((g1, v1))) if g0 == g1 => Some(v1 - v0),
            _ => None,
        };
        Ok(FaultRecord {
            n,
            kind,
            detail,
            start_s,
            start_unix_s,
            duration_s,
            recover_s,
            max_lag_s: self.max_lag_s(start_s, self.elapsed_s()),
            engine_restarts: self.restart_lines().saturating_sub(restarts_before),
            num_restarts_metric,
            ferry_exits: self.exits.len() - exits_before,
            comparison: None,
        })
    }

    /// How long a hang, partition or unwritable spell lasts: a quarter to
    /// half the fault interval, at least 5 s.
    fn hold(&mut self, every: Duration) -> Duration {
        let k = every.as_secs();
        Duration::from_secs(self.rng.gen_range((k / 4).max(5)..=(k / 2).max(6)))
    }

    async fn inject_and_heal(&mut self, kind: FaultKind, every: Duration) -> Result<String> {
        let k = every.as_secs();
        match kind {
            FaultKind::SinkHang => {
                let hold = self.hold(every);
                let n = self.dst.tserver_rpc.len();
                tokio::task::block_in_place(|| {
                    self.dst.cluster.pause_all(DaemonKind::TabletServer)
                })
                .map_err(|e| anyhow!("pausing the sink tablet servers: {e}"))?;
                self.idle(hold).await?;
                tokio::task::block_in_place(|| {
                    self.dst.cluster.resume_all(DaemonKind::TabletServer)
                })
                .map_err(|e| anyhow!("resuming the sink tablet servers: {e}"))?;
                Ok(format!(
                    "{n} sink tablet servers stopped for {} s",
                    hold.as_secs()
                ))
            }
            FaultKind::SinkOutage => {
                let hold = Duration::from_secs(self.rng.gen_range((k / 6).max(3)..=(k / 3).max(4)));
                let n = self.dst.tserver_rpc.len();
                let stopping = Instant::now();
                tokio::task::block_in_place(|| self.dst.cluster.stop_all())
                    .map_err(|e| anyhow!("stopping the sink cluster: {e}"))?;
                let stop_s = stopping.elapsed().as_secs_f64();
                self.idle(hold).await?;
                let starting = Instant::now();
                tokio::task::block_in_place(|| self.dst.cluster.start_all())
                    .map_err(|e| anyhow!("starting the sink cluster again: {e}"))?;
                self.ctx.monitor.track(self.dst.cluster.pids());
                Ok(format!(
                    "sink master + {n} tablet servers stopped (took {stop_s:.1} s), down {} s, started in {:.1} s",
                    hold.as_secs(),
                    starting.elapsed().as_secs_f64()
                ))
            }
            FaultKind::SourceTserverRestart => {
                let i = self.rng.gen_range(0..self.src.tserver_rpc.len());
                let down = Duration::from_secs(self.rng.gen_range(3..=(k / 6).max(4)));
                tokio::task::block_in_place(|| self.src.cluster.kill(DaemonKind::TabletServer, i))
                    .map_err(|e| anyhow!("killing source ts-{i}: {e}"))?;
                self.idle(down).await?;
                tokio::task::block_in_place(|| self.src.cluster.start(DaemonKind::TabletServer, i))
                    .map_err(|e| anyhow!("starting source ts-{i} again: {e}"))?;
                self.ctx.monitor.track(self.src.cluster.pids());
                Ok(format!("source ts-{i} killed, down {} s", down.as_secs()))
            }
            FaultKind::MasterLeaderChange => self.master_leader_change().await,
            FaultKind::Partition => {
                let hold = self.hold(every);
                let subnet = self.dst.cluster.subnet();
                let Some(ns) = &self.ns else {
                    bail!("partition fault without a network namespace");
                };
                ns.partition(&subnet)
                    .map_err(|e| anyhow!("partitioning {subnet}: {e}"))?;
                self.idle(hold).await?;
                if let Some(ns) = &self.ns {
                    ns.heal()
                        .map_err(|e| anyhow!("healing the partition: {e}"))?;
                }
                Ok(format!(
                    "ferry's traffic to the sink ({subnet}) dropped for {} s",
                    hold.as_secs()
                ))
            }
            FaultKind::CheckpointUnwritable => {
                let hold = self.hold(every);
                let Some(fs) = &self.fs else {
                    bail!("checkpoint fault without a small filesystem");
                };
                fs.make_unwritable()
                    .map_err(|e| anyhow!("remounting the checkpoints read-only: {e}"))?;
                self.idle(hold).await?;
                if let Some(fs) = &self.fs {
                    fs.make_writable()
                        .map_err(|e| anyhow!("remounting the checkpoints read-write: {e}"))?;
                }
                Ok(format!(
                    "checkpoint directory read-only for {} s",
                    hold.as_secs()
                ))
            }
            FaultKind::FerryKill => {
                let down = Duration::from_millis(self.rng.gen_range(0..=3000));
                let Some(ferry) = self.ferry.take() else {
                    bail!("no ferry running to kill");
                };
                self.closed_restart_lines += ferry.restart_lines().len();
                let job = ferry.job_id();
                ferry.kill().await?;
                self.idle(down).await?;
                self.start_ferry(job).await?;
                let from = self
                    .opts
                    .resume
                    .as_deref()
                    .and_then(|r| r.trim_end_matches('/').rsplit('/').next())
                    .unwrap_or("scratch (no checkpoint yet)")
                    .to_string();
                Ok(format!(
                    "kill -9, restarted after {:.1} s from {from}",
                    down.as_secs_f64()
                ))
            }
        }
    }

    /// Kills the source's leader master, waits until another one leads,
    /// then starts the old one again.
    async fn master_leader_change(&mut self) -> Result<String> {
        let old = self.leader_master(None).await?;
        tokio::task::block_in_place(|| self.src.cluster.kill(DaemonKind::Master, old))
            .map_err(|e| anyhow!("killing source master-{old}: {e}"))?;
        let killed = Instant::now();
        let new = self.leader_master(Some(old)).await;
        let took = killed.elapsed().as_secs_f64();
        let extra = Duration::from_secs(self.rng.gen_range(0..=5));
        self.idle(extra).await?;
        tokio::task::block_in_place(|| self.src.cluster.start(DaemonKind::Master, old))
            .map_err(|e| anyhow!("starting source master-{old} again: {e}"))?;
        self.ctx.monitor.track(self.src.cluster.pids());
        Ok(match new {
            Ok(new) => format!(
                "leader master-{old} killed; master-{new} led after {took:.1} s; master-{old} back after {:.1} s",
                killed.elapsed().as_secs_f64()
            ),
            Err(e) => format!("leader master-{old} killed; {e}"),
        })
    }

    /// The source's leader master (one that is not `not`), asked every
    /// second for up to 60 s.
    async fn leader_master(&mut self, not: Option<usize>) -> Result<usize> {
        let started = Instant::now();
        loop {
            let last = match tokio::task::block_in_place(|| self.src.cluster.leader_master()) {
                Ok(l) if Some(l) != not => return Ok(l),
                Ok(l) => format!("master-{l} still reported as leader"),
                Err(e) => e.to_string(),
            };
            if started.elapsed() > Duration::from_secs(60) {
                bail!("no new leader master within 60 s ({last})");
            }
            self.idle(Duration::from_secs(1)).await?;
        }
    }
}
