//! The background flusher of an AUTO_FLUSH_BACKGROUND [`Session`]: one
//! task per session that fills a buffer from the session's channel, starts
//! a flush when the buffer is due (operations, bytes, interval, adaptive
//! growth), keeps at most [`BUFFERS_IN_FLIGHT`] buffers being sent, sends
//! the requests `apply_rows` encoded as they come, and answers each
//! `flush()` with the outcome of everything applied before it.
//!
//! [`Session`]: crate::write::Session

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::error::Error;
use crate::write::batcher::Dispatcher;
use crate::write::buffered::BufferedOp;
use crate::write::copy::Encoded;
use crate::write::options::{SessionOptions, BUFFERS_IN_FLIGHT};
use crate::write::outcome::FlushOutcome;

/// Messages to the background flusher. Flush requests travel on the same
/// channel as operations, so a flush covers exactly what was applied before
/// it.
pub(super) enum Msg {
    Op(BufferedOp),
    /// A request encoded by `apply_rows`, or rows it could not encode.
    Encoded(Encoded),
    Flush(oneshot::Sender<FlushOutcome>),
}

/// The background flusher: one task per session.
pub(super) struct Flusher {
    rx: mpsc::Receiver<Msg>,
    dispatcher: Dispatcher,
    max_ops: usize,
    max_bytes: usize,
    interval: Duration,
    grow_to: Option<usize>,
    buffer: Vec<BufferedOp>,
    bytes: usize,
    /// When the current buffer is due (set by its first operation).
    due_at: Option<tokio::time::Instant>,
    timer_fired: bool,
    /// Buffers being sent: task id → flush sequence number.
    inflight: JoinSet<FlushOutcome>,
    task_seq: HashMap<tokio::task::Id, u64>,
    next_seq: u64,
    /// Sequence numbers of flushes not finished yet.
    outstanding: BTreeSet<u64>,
    /// Finished flushes whose outcome no flush() call has taken yet.
    finished: BTreeMap<u64, FlushOutcome>,
    /// flush() calls waiting for the current buffer to be started.
    requested: Vec<oneshot::Sender<FlushOutcome>>,
    /// flush() calls waiting for every flush up to a sequence number.
    waiters: Vec<(Option<u64>, oneshot::Sender<FlushOutcome>)>,
    input_open: bool,
}

impl Flusher {
    pub(super) fn new(rx: mpsc::Receiver<Msg>, dispatcher: Dispatcher, o: &SessionOptions) -> Self {
        Flusher {
            rx,
            dispatcher,
            max_ops: o.max_ops,
            max_bytes: o.max_bytes,
            interval: o.flush_interval,
            grow_to: o.grow_to,
            buffer: Vec::new(),
            bytes: 0,
            due_at: None,
            timer_fired: false,
            inflight: JoinSet::new(),
            task_seq: HashMap::new(),
            next_seq: 0,
            outstanding: BTreeSet::new(),
            finished: BTreeMap::new(),
            requested: Vec::new(),
            waiters: Vec::new(),
            input_open: true,
        }
    }

    fn due(&self) -> bool {
        self.buffer.len() >= self.max_ops || self.timer_fired || self.must_go()
    }

    /// Due, and may not take more operations even with adaptive batching.
    fn must_go(&self) -> bool {
        self.bytes >= self.max_bytes || !self.requested.is_empty() || !self.input_open
    }

    pub(super) async fn run(mut self) -> FlushOutcome {
        loop {
            let due = self.due();
            if due && self.inflight.len() < BUFFERS_IN_FLIGHT {
                self.start_flush().await;
            }
            self.answer_waiters();
            if !self.input_open && self.buffer.is_empty() && self.inflight.is_empty() {
                break;
            }
            // While a due buffer cannot be started, take nothing more (or,
            // adaptively, nothing past its growth limit): the channel fills
            // up and `apply` waits.
            let accepting = self.input_open
                && !self.must_go()
                && (!self.due() || self.grow_to.is_some_and(|limit| self.bytes < limit));
            let timer = self
                .due_at
                .unwrap_or_else(|| tokio::time::Instant::now() + self.interval);
            let timer_armed = self.due_at.is_some() && !self.timer_fired;
            tokio::select! {
                joined = self.inflight.join_next_with_id(), if !self.inflight.is_empty() => {
                    self.on_finished(joined);
                }
                msg = self.rx.recv(), if accepting => match msg {
                    Some(Msg::Op(op)) => {
                        if self.buffer.is_empty() {
                            self.due_at = Some(tokio::time::Instant::now() + self.interval);
                        }
                        self.bytes += op.size;
                        self.buffer.push(op);
                    }
                    Some(Msg::Encoded(encoded)) => self.start_encoded(encoded).await,
                    Some(Msg::Flush(reply)) => self.requested.push(reply),
                    None => self.input_open = false,
                },
                _ = tokio::time::sleep_until(timer), if timer_armed => {
                    self.timer_fired = true;
                }
            }
        }
        // Closing: whatever no flush() call took.
        let mut rest = FlushOutcome::default();
        for (_, o) in std::mem::take(&mut self.finished) {
            rest.merge(o);
        }
        if !rest.row_errors.is_empty() {
            tracing::warn!(rows = rest.row_errors.len(), first = %rest.row_errors[0], "write session closed with unreported row errors");
        }
        rest
    }

    /// Routes the current buffer and starts sending it; registers pending
    /// flush() calls against it.
    async fn start_flush(&mut self) {
        self.start_buffer().await;
        let upto = self.next_seq.checked_sub(1);
        for reply in self.requested.drain(..) {
            self.waiters.push((upto, reply));
        }
    }

    /// Routes the current buffer, if any, and starts sending it.
    async fn start_buffer(&mut self) {
        // The next buffer likely fills as far as this one did.
        let next = Vec::with_capacity(self.buffer.len());
        let ops = std::mem::replace(&mut self.buffer, next);
        self.bytes = 0;
        self.due_at = None;
        self.timer_fired = false;
        if !ops.is_empty() {
            let routed = self.dispatcher.route(ops).await;
            let send = self.dispatcher.dispatch(routed);
            self.launch(send);
        }
    }

    /// Starts a request from `apply_rows` at once, after the operations
    /// applied before it (the session's byte budget, not
    /// [`BUFFERS_IN_FLIGHT`], bounds these).
    async fn start_encoded(&mut self, encoded: Encoded) {
        self.start_buffer().await;
        match encoded {
            Encoded::Chunk(chunk) => {
                let send = self.dispatcher.dispatch_chunk(chunk);
                self.launch(send);
            }
            Encoded::Failed(outcome) => self.launch(async move { outcome }),
        }
    }

    fn launch(&mut self, send: impl std::future::Future<Output = FlushOutcome> + Send + 'static) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let handle = self.inflight.spawn(send);
        self.task_seq.insert(handle.id(), seq);
        self.outstanding.insert(seq);
    }

    fn on_finished(
        &mut self,
        joined: Option<Result<(tokio::task::Id, FlushOutcome), tokio::task::JoinError>>,
    ) {
        let (id, outcome) = match joined {
            Some(Ok((id, outcome))) => (id, outcome),
            Some(Err(e)) => {
                let id = e.id();
                let outcome = FlushOutcome {
                    row_errors: Vec::new(),
                    causes: vec![Error::InvalidArgument(format!(
                        "a write flush task failed ({e}); the outcome of its rows is unknown"
                    ))],
                };
                (id, outcome)
            }
            None => return,
        };
        if let Some(seq) = self.task_seq.remove(&id) {
            self.outstanding.remove(&seq);
            self.finished.insert(seq, outcome);
        }
    }

    /// Answers each flush() whose flushes have all finished, with the
    /// outcomes of every flush up to its own.
    fn answer_waiters(&mut self) {
        let oldest_running = self.outstanding.first().copied();
        let mut i = 0;
        while i < self.waiters.len() {
            let upto = self.waiters[i].0;
            let ready = match (upto, oldest_running) {
                (None, _) | (_, None) => true,
                (Some(u), Some(r)) => r > u,
            };
            if !ready {
                i += 1;
                continue;
            }
            let (_, reply) = self.waiters.swap_remove(i);
            let mut outcome = FlushOutcome::default();
            if let Some(u) = upto {
                let later = self.finished.split_off(&(u + 1));
                for (_, o) in std::mem::replace(&mut self.finished, later) {
                    outcome.merge(o);
                }
            }
            // A caller that stopped waiting: keep its rows for the next
            // flush() rather than dropping them.
            if let Err(outcome) = reply.send(outcome) {
                self.finished
                    .entry(upto.unwrap_or(0))
                    .or_default()
                    .merge(outcome);
            }
        }
    }
}
