//! AUTO_FLUSH_BACKGROUND: what a background session shares with its
//! flusher task ([`Background`]).
//!
//! `apply` puts an operation in the session's [`OpBuffer`] (no channel, no
//! task switch) and waits only while the buffer is due and may not grow.
//! The flusher task sends the buffer when it holds
//! `mutation_buffer_max_ops` operations or `mutation_buffer_max_bytes`
//! bytes, or `flush_interval` after its first operation — as soon as fewer
//! than [`BUFFERS_IN_FLIGHT`] buffers are being sent; with adaptive
//! batching a due buffer keeps taking operations up to its growth limit
//! meanwhile. A whole batch (`apply_rows`, `apply_batch`) goes through the
//! request builder in the caller's task, each request sent as soon as it is
//! sealed, within the session's byte budget.
//!
//! Whoever turns operations into requests — the flusher with a buffer, a
//! caller with a batch, `flush()` — holds the session's *lane* meanwhile
//! and takes the buffer first, so requests are sealed, and take their
//! turns per tablet, in apply order. Every send is a task tracked by
//! [`InFlight`]; `flush()` sends the buffer and waits for all of them.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{oneshot, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::error::Result;
use crate::scan::RowBatch;
use crate::write::buffer::{BufferedOp, OpBuffer};
use crate::write::copy::{feed_rows, AppliedRows, RowCopy};
use crate::write::inflight::InFlight;
use crate::write::options::{Settings, BUFFERS_IN_FLIGHT};
use crate::write::outcome::FlushOutcome;
use crate::write::request::{feed_ops, Outlet, RequestBuilder};
use crate::write::send::SendCtx;

/// The state a background session and its flusher task share.
#[derive(Debug)]
pub(crate) struct Background {
    ctx: Arc<SendCtx>,
    settings: Settings,
    runtime: Handle,
    buffer: Mutex<OpBuffer>,
    /// Held while operations become requests (see the module docs).
    lane: tokio::sync::Mutex<()>,
    /// Buffers being sent ([`BUFFERS_IN_FLIGHT`]).
    slots: Arc<Semaphore>,
    /// Encoded bytes of whole batches not answered yet.
    budget: Arc<Semaphore>,
    inflight: Arc<InFlight>,
    /// Wakes the flusher: a buffer started or became due.
    wake: Notify,
    /// Wakes `apply` calls waiting for a due buffer to be taken.
    taken: Notify,
}

/// The flusher task of a [`Background`] session and how to stop it.
#[derive(Debug)]
pub(crate) struct Flusher {
    /// Sending (or dropping) it stops the task, which sends what is left.
    pub(crate) stop: oneshot::Sender<()>,
    /// Ends with the outcomes no `flush()` took.
    pub(crate) task: JoinHandle<FlushOutcome>,
}

impl Background {
    /// The shared state, and its flusher task started on `runtime`.
    pub(crate) fn start(
        ctx: Arc<SendCtx>,
        settings: Settings,
        runtime: Handle,
    ) -> (Arc<Self>, Flusher) {
        let budget = Semaphore::new(settings.streamed_budget);
        let background = Arc::new(Background {
            ctx,
            settings,
            runtime: runtime.clone(),
            buffer: Mutex::new(OpBuffer::default()),
            lane: tokio::sync::Mutex::new(()),
            slots: Arc::new(Semaphore::new(BUFFERS_IN_FLIGHT)),
            budget: Arc::new(budget),
            inflight: Arc::new(InFlight::default()),
            wake: Notify::new(),
            taken: Notify::new(),
        });
        let (stop, stopped) = oneshot::channel();
        let task = runtime.spawn(background.clone().run(stopped));
        (background, Flusher { stop, task })
    }

    fn buffer(&self) -> MutexGuard<'_, OpBuffer> {
        // A buffer stays consistent under a panic (a Vec and counters).
        self.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Buffers `op`, waiting while the buffer is due and may not grow.
    pub(crate) async fn apply(&self, op: BufferedOp) {
        loop {
            let taken = self.taken.notified();
            tokio::pin!(taken);
            taken.as_mut().enable();
            {
                let mut buffer = self.buffer();
                if buffer.accepts(&self.settings) {
                    let first = buffer.len() == 0;
                    buffer.push(op, &self.settings);
                    let due = buffer.due(&self.settings);
                    drop(buffer);
                    if first || due {
                        self.wake.notify_one();
                    }
                    return;
                }
            }
            self.wake.notify_one();
            taken.await;
        }
    }

    /// Sends `ops` after everything buffered, as requests cut at the
    /// session's request size, each sent as soon as it is sealed.
    pub(crate) async fn apply_batch(&self, ops: Vec<BufferedOp>) {
        let lane = self.lane.lock().await;
        self.send_buffer(&lane, None).await;
        let expected = ops.iter().map(|op| op.size).sum();
        let builder = self.builder(expected);
        let mut outlet = self.streamed();
        let failed = feed_ops(builder, ops, &mut outlet).await;
        self.inflight.deposit(self.ctx.counted(failed));
    }

    /// Sends the rows of `batch` through `copy` after everything buffered
    /// (see [`Session::apply_rows`](crate::write::Session::apply_rows)).
    pub(crate) async fn apply_rows(&self, copy: &RowCopy, batch: &RowBatch) -> Result<AppliedRows> {
        let lane = self.lane.lock().await;
        self.send_buffer(&lane, None).await;
        let builder = self.builder(batch.byte_size());
        let mut outlet = self.streamed();
        let (applied, failed) = feed_rows(builder, copy, batch, &mut outlet).await?;
        self.inflight.deposit(self.ctx.counted(failed));
        Ok(applied)
    }

    /// Sends the buffer, waits for every send, and returns what failed
    /// since the previous flush.
    pub(crate) async fn flush(&self) -> Result<()> {
        {
            let lane = self.lane.lock().await;
            self.send_buffer(&lane, None).await;
        }
        self.inflight.settle().await.into_result()
    }

    fn builder(&self, expected: usize) -> RequestBuilder {
        let deadline = self.ctx.deadline();
        RequestBuilder::new(
            self.ctx.client(),
            self.settings.streamed,
            expected,
            deadline,
        )
    }

    fn streamed(&self) -> Outlet {
        Outlet::Send {
            ctx: self.ctx.clone(),
            budget: self.budget.clone(),
            total: self.settings.streamed_budget,
            inflight: self.inflight.clone(),
            runtime: self.runtime.clone(),
        }
    }

    /// Takes the buffer and starts sending it as one flush (holding `slot`
    /// until it is answered). The caller holds the lane.
    async fn send_buffer(
        &self,
        _lane: &tokio::sync::MutexGuard<'_, ()>,
        slot: Option<OwnedSemaphorePermit>,
    ) {
        let ops = self.buffer().take();
        self.taken.notify_waiters();
        if ops.is_empty() {
            return;
        }
        let expected = ops.iter().map(|op| op.size).sum();
        let deadline = self.ctx.deadline();
        let builder = RequestBuilder::new(
            self.ctx.client(),
            self.settings.buffered,
            expected,
            deadline,
        );
        let mut outlet = Outlet::Keep(Vec::new());
        let failed = feed_ops(builder, ops, &mut outlet).await;
        let sends = self.ctx.dispatch_all(outlet.into_kept(), failed);
        self.inflight.spawn(&self.runtime, async move {
            let outcome = sends.await;
            drop(slot);
            outcome
        });
    }

    /// The flusher task: sends the buffer when it is due and a slot is
    /// free; when stopped (the session closed or dropped), sends what is
    /// left and waits for every send.
    async fn run(self: Arc<Self>, mut stop: oneshot::Receiver<()>) -> FlushOutcome {
        loop {
            let (due, due_at) = {
                let buffer = self.buffer();
                (buffer.due(&self.settings), buffer.due_at())
            };
            if due {
                tokio::select! {
                    slot = self.slots.clone().acquire_owned() => {
                        let lane = self.lane.lock().await;
                        self.send_buffer(&lane, slot.ok()).await;
                    }
                    _ = &mut stop => break,
                }
                continue;
            }
            let timer =
                due_at.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep_until(timer), if due_at.is_some() => self.buffer().fire_timer(),
                _ = &mut stop => break,
            }
        }
        {
            let lane = self.lane.lock().await;
            self.send_buffer(&lane, None).await;
        }
        let rest = self.inflight.settle().await;
        if let Some(first) = rest.row_errors.first() {
            tracing::warn!(rows = rest.row_errors.len(), %first, "write session closed with unreported row errors");
        }
        rest
    }
}
