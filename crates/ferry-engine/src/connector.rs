//! The small traits connectors implement; the engine owns the control loop
//! (assigning splits, checkpoints, retries, stop/savepoint) once.
//!
//! A [`Source`] plans the splits of a window and opens a [`SplitReader`]
//! for one split; the reader yields batches with the resume key of their
//! last row. A [`Sink`] makes [`SinkWriter`]s that apply a batch and return
//! only when it is durably written, so "progress" can follow the flush.

use crate::checkpoint::{SplitState, WindowState};
use crate::error::EngineError;
use kudu_client::scan::RowBatch;
use std::future::Future;

/// A batch read from a split: rows (with IS_DELETED for diff windows) and
/// the encoded primary key of the last row, where the split resumes.
#[derive(Debug)]
pub struct ReadBatch {
    pub rows: RowBatch,
    pub resume_key: Option<Vec<u8>>,
}

/// What one written batch did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteStats {
    pub upserts: u64,
    pub deletes: u64,
    pub bytes: u64,
}

/// Where changes come from.
pub trait Source: Send + Sync + 'static {
    /// Reader of one split.
    type Reader: SplitReader;

    /// The source cluster's clock now (hybrid time): window ends come from
    /// here, never from the local clock.
    fn now(&self) -> impl Future<Output = Result<u64, EngineError>> + Send;

    /// The splits covering `window` (snapshot or diff).
    fn plan(
        &self,
        window: WindowState,
    ) -> impl Future<Output = Result<Vec<SplitState>, EngineError>> + Send;

    /// Opens `split`, continuing after its resume key if it has one.
    fn open(
        &self,
        split: &SplitState,
    ) -> impl Future<Output = Result<Self::Reader, EngineError>> + Send;
}

/// Streams the batches of one split.
pub trait SplitReader: Send + 'static {
    /// The next batch, or `None` when the split is done.
    fn next(&mut self) -> impl Future<Output = Result<Option<ReadBatch>, EngineError>> + Send;
}

/// Where changes go.
pub trait Sink: Send + Sync + 'static {
    /// One pipeline's writer.
    type Writer: SinkWriter;

    /// A new writer.
    fn writer(&self) -> impl Future<Output = Result<Self::Writer, EngineError>> + Send;
}

/// Applies batches to the sink.
pub trait SinkWriter: Send + 'static {
    /// Applies every row of `batch` (upsert live rows, delete deleted ones)
    /// and returns once all of them are durably written.
    fn write(
        &mut self,
        batch: &RowBatch,
    ) -> impl Future<Output = Result<WriteStats, EngineError>> + Send;
}
