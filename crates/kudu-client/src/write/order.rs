//! Write order per tablet: [`TabletChains`] hands out one [`Turn`] per
//! request, and a request is sent only once every earlier request of its
//! tablet has finished. Turns are handed out synchronously, in the order
//! requests are sealed, so the order cannot depend on how the spawned send
//! tasks get scheduled.

use std::collections::HashMap;

use tokio::sync::oneshot;

/// The newest turn of every tablet with a request not finished yet.
#[derive(Debug, Default)]
pub(crate) struct TabletChains {
    /// tablet id → "previous turn finished" signal of the newest turn.
    last: HashMap<String, oneshot::Receiver<()>>,
}

impl TabletChains {
    /// The next turn for `tablet`.
    pub(crate) fn enqueue(&mut self, tablet: &str) -> Turn {
        // Forget tablets whose newest turn has finished.
        self.last
            .retain(|_, rx| matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty)));
        let (done, rx) = oneshot::channel();
        let previous = self.last.insert(tablet.to_owned(), rx);
        Turn {
            previous,
            _done: done,
        }
    }
}

/// One request's place in its tablet's chain; dropping it lets the next go.
#[derive(Debug)]
pub(crate) struct Turn {
    previous: Option<oneshot::Receiver<()>>,
    _done: oneshot::Sender<()>,
}

impl Turn {
    /// Waits until every earlier turn of the tablet has finished.
    pub(crate) async fn wait(&mut self) {
        if let Some(previous) = self.previous.take() {
            // Err only means the sender is gone: that turn is over.
            let _ = previous.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    #[tokio::test]
    async fn turns_of_one_tablet_run_in_dispatch_order() {
        let mut chains = TabletChains::default();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // The first turn of tablet "t" is the slowest; "u" is independent.
        for (name, tablet, delay_ms) in [
            ("t1", "t", 60),
            ("t2", "t", 0),
            ("u1", "u", 20),
            ("t3", "t", 10),
        ] {
            let mut turn = chains.enqueue(tablet);
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                turn.wait().await;
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                order.lock().unwrap().push(name);
                drop(turn);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec!["u1", "t1", "t2", "t3"]);
        // Finished chains are forgotten.
        chains.enqueue("v");
        assert_eq!(chains.last.len(), 1);
    }
}
