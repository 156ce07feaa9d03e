//! [`InFlight`]: the sends a background session has started and not yet
//! seen answered, and the outcomes of those that were, until a `flush()`
//! takes them. Each send runs as its own task; its outcome is kept even if
//! the `flush()` waiting for it is dropped.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::runtime::Handle;
use tokio::sync::Notify;

use crate::error::Error;
use crate::write::outcome::FlushOutcome;

/// Sends running and outcomes not taken yet.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    state: Mutex<State>,
    /// Woken when the last running send finishes.
    idle: Notify,
}

#[derive(Debug, Default)]
struct State {
    running: usize,
    done: FlushOutcome,
}

impl InFlight {
    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent under a panic (counters and a merge).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `send` as a task on `runtime`; its outcome is kept for
    /// [`settle`](Self::settle).
    pub(crate) fn spawn(
        self: &Arc<Self>,
        runtime: &Handle,
        send: impl Future<Output = FlushOutcome> + Send + 'static,
    ) {
        self.state().running += 1;
        let finish = Finish {
            inflight: self.clone(),
            outcome: None,
        };
        runtime.spawn(async move {
            finish.with(send.await);
        });
    }

    /// Keeps an outcome that needs no send (rows that failed before any
    /// request).
    pub(crate) fn deposit(&self, outcome: FlushOutcome) {
        self.state().done.merge(outcome);
    }

    /// Waits until no send is running, then takes every outcome kept.
    pub(crate) async fn settle(&self) -> FlushOutcome {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            {
                let mut state = self.state();
                if state.running == 0 {
                    return std::mem::take(&mut state.done);
                }
            }
            idle.await;
        }
    }
}

/// Records a send's end, whether it finished or its task was dropped (a
/// panic, a runtime shutting down).
struct Finish {
    inflight: Arc<InFlight>,
    outcome: Option<FlushOutcome>,
}

impl Finish {
    /// The send finished with `outcome`.
    fn with(mut self, outcome: FlushOutcome) {
        self.outcome = Some(outcome);
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        let outcome = self.outcome.take().unwrap_or_else(|| FlushOutcome {
            row_errors: Vec::new(),
            causes: vec![Error::InvalidArgument(
                "a write task ended before its answer (its runtime shut down?); the outcome of its rows is unknown"
                    .into(),
            )],
        });
        let mut state = self.inflight.state();
        state.done.merge(outcome);
        state.running = state.running.saturating_sub(1);
        if state.running == 0 {
            self.inflight.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{KuduStatus, RowError, StatusCode};
    use std::time::Duration;

    fn failed_row(key: &str) -> FlushOutcome {
        FlushOutcome {
            row_errors: vec![RowError {
                operation: "INSERT".into(),
                key: key.into(),
                status: KuduStatus {
                    code: StatusCode::AlreadyPresent,
                    message: "present".into(),
                    posix_code: None,
                },
            }],
            causes: Vec::new(),
        }
    }

    #[tokio::test]
    async fn settle_waits_for_every_send_and_keeps_outcomes_of_a_dropped_wait() {
        let inflight = Arc::new(InFlight::default());
        let rt = Handle::current();
        inflight.deposit(failed_row("(k=0)"));
        for (k, ms) in [(1, 60), (2, 10)] {
            inflight.spawn(&rt, async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                failed_row(&format!("(k={k})"))
            });
        }
        // A flush() that gives up early loses nothing.
        let early = tokio::time::timeout(Duration::from_millis(5), inflight.settle()).await;
        assert!(early.is_err());
        let outcome = inflight.settle().await;
        let mut keys: Vec<_> = outcome.row_errors.iter().map(|e| e.key.clone()).collect();
        keys.sort();
        assert_eq!(keys, ["(k=0)", "(k=1)", "(k=2)"]);
        assert!(inflight.settle().await.row_errors.is_empty());
    }

    #[tokio::test]
    async fn a_send_whose_task_dies_is_reported_not_waited_for_forever() {
        let inflight = Arc::new(InFlight::default());
        inflight.spawn(&Handle::current(), async {
            panic!("send task panics");
        });
        let outcome = tokio::time::timeout(Duration::from_secs(5), inflight.settle())
            .await
            .expect("settles");
        assert_eq!(outcome.causes.len(), 1);
        assert!(outcome.causes[0]
            .to_string()
            .contains("outcome of its rows is unknown"));
    }
}
