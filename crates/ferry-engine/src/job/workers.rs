//! The job's pipelines as the coordinator holds them: which wait for a
//! split, the table whose turn it is to hand one out, the stop signal and
//! the events they report. None exist while the job restarts.

use crate::connector::{Sink, Source};
use crate::lease::Fence;
use crate::metrics::JobMetrics;
use crate::pipeline::{spawn_worker, CommitGate, PipelineEvent, Worker};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// The pipelines and which of them wait for a split. A restart drops
/// them all (and with them their events) and spawns new ones, so no event
/// of a pipeline from before the restart reaches the restored state.
pub(super) struct Workers<S, K> {
    pub(super) list: Vec<Worker<S, K>>,
    /// Indexes of idle workers (popped from the end).
    pub(super) idle: Vec<usize>,
    /// Where the round-robin hand-out over the tables continues.
    pub(super) next_table: usize,
    /// Tells running pipelines to stop after their current batch.
    stop: watch::Sender<bool>,
    /// What the pipelines report.
    pub(super) events: mpsc::UnboundedReceiver<PipelineEvent>,
    /// Without pipelines, keeps `events` open (and silent).
    _no_events: Option<mpsc::UnboundedSender<PipelineEvent>>,
}

impl<S, K> Workers<S, K> {
    /// No pipelines (before the tables are ready, and while a restart
    /// waits).
    pub(super) fn none() -> Self {
        let (tx, events) = mpsc::unbounded_channel();
        Workers {
            list: Vec::new(),
            idle: Vec::new(),
            next_table: 0,
            stop: watch::channel(false).0,
            events,
            _no_events: Some(tx),
        }
    }

    /// Whether the pipelines were started.
    pub(super) fn started(&self) -> bool {
        !self.list.is_empty()
    }

    /// Whether no pipeline is working on a split.
    pub(super) fn all_idle(&self) -> bool {
        self.idle.len() == self.list.len()
    }

    /// Makes every pipeline stop after its current batch.
    pub(super) fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

impl<S: Source, K: Sink<S::Batch>> Workers<S, K> {
    /// Starts `parallelism` (at least one) pipelines, all idle; dropping
    /// the result aborts them.
    pub(super) fn start(
        parallelism: usize,
        metrics: &Arc<JobMetrics>,
        fence: &Fence,
        gate: &CommitGate,
    ) -> Self {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(false);
        let list: Vec<Worker<S, K>> = (0..parallelism.max(1))
            .map(|i| {
                spawn_worker(
                    i,
                    events_tx.clone(),
                    stop_rx.clone(),
                    metrics.clone(),
                    fence.clone(),
                    gate.clone(),
                )
            })
            .collect();
        let idle = (0..list.len()).rev().collect();
        Workers {
            list,
            idle,
            next_table: 0,
            stop,
            events,
            _no_events: None,
        }
    }
}

impl<S, K> Drop for Workers<S, K> {
    fn drop(&mut self) {
        for w in &self.list {
            w.task.abort();
        }
    }
}
