//! `reader.prefetching`: how a split's scan batches are fetched.
//!
//! Without prefetching a scan request is sent when the reader asks for the
//! next batch. With it, a task owns the scanner and sends the next request
//! as soon as the previous batch is taken, so the tablet server produces
//! batch k+1 while batch k is handed on to the writer: one more scan batch
//! in flight (and in memory) per pipeline, the Java client's prefetching.

use kudu_client::scan::RowBatch;
use kudu_client::scan::Scanner;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A batch and the encoded key of its last row (where the split resumes).
pub(crate) type Fetched = Option<(RowBatch, Option<Vec<u8>>)>;

/// The batches of one split, fetched on demand or prefetched.
pub(crate) enum ScanBatches {
    /// A request per call of [`ScanBatches::next`].
    OnDemand(Scanner),
    /// A task keeps the next request in flight.
    Prefetched {
        batches: mpsc::Receiver<Result<Fetched, kudu_client::Error>>,
        task: JoinHandle<()>,
    },
}

impl ScanBatches {
    /// Batches of `scanner`; with `prefetching`, spawns the task that
    /// fetches ahead (it must be called inside a Tokio runtime).
    pub(crate) fn new(mut scanner: Scanner, prefetching: bool) -> Self {
        if !prefetching {
            return ScanBatches::OnDemand(scanner);
        }
        // Capacity one, and a slot reserved before each request: at most
        // one fetched batch waits, and the next request starts as soon as
        // it is taken.
        let (tx, rx) = mpsc::channel(1);
        let task = tokio::spawn(async move {
            while let Ok(slot) = tx.reserve().await {
                let fetched = fetch(&mut scanner).await;
                let more = matches!(fetched, Ok(Some(_)));
                slot.send(fetched);
                if !more {
                    return;
                }
            }
        });
        ScanBatches::Prefetched { batches: rx, task }
    }

    /// The next batch, `None` at the end of the split.
    pub(crate) async fn next(&mut self) -> Result<Fetched, kudu_client::Error> {
        match self {
            ScanBatches::OnDemand(scanner) => fetch(scanner).await,
            // The task ends only after sending the end or an error, so a
            // closed channel is a split already finished.
            ScanBatches::Prefetched { batches, .. } => batches.recv().await.unwrap_or(Ok(None)),
        }
    }
}

impl Drop for ScanBatches {
    fn drop(&mut self) {
        if let ScanBatches::Prefetched { task, .. } = self {
            // Dropping the scanner with the task closes its server-side scanner.
            task.abort();
        }
    }
}

async fn fetch(scanner: &mut Scanner) -> Result<Fetched, kudu_client::Error> {
    let batch = scanner.next_batch().await?;
    Ok(batch.map(|rows| (rows, scanner.last_primary_key().map(<[u8]>::to_vec))))
}
