//! The counters a write session keeps: [`SessionMetrics`] and what the
//! tablet servers report, [`ServerWriteMetrics`].

#[cfg(doc)]
use super::Session;

/// Counters of one session, read with [`Session::metrics`]. "Written"
/// counts operations the server accepted (for `*_IGNORE` operations that
/// includes the ignored ones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionMetrics {
    /// Operations accepted by `apply`.
    pub ops_applied: u64,
    /// INSERTs written.
    pub inserts: u64,
    /// INSERT_IGNOREs written.
    pub insert_ignores: u64,
    /// UPSERTs written.
    pub upserts: u64,
    /// UPSERT_IGNOREs written.
    pub upsert_ignores: u64,
    /// UPDATEs written.
    pub updates: u64,
    /// UPDATE_IGNOREs written.
    pub update_ignores: u64,
    /// DELETEs written.
    pub deletes: u64,
    /// DELETE_IGNOREs written.
    pub delete_ignores: u64,
    /// Operations that failed (row errors, including rows of failed
    /// requests and non-covered rows).
    pub row_errors: u64,
    /// Encoded row bytes of answered write requests.
    pub bytes_written: u64,
    /// Write requests answered by a tablet server.
    pub batches_written: u64,
    /// Write RPC attempts, retries included.
    pub write_attempts: u64,
    /// Write requests given up after retries.
    pub batches_failed: u64,
    /// What the tablet servers reported (`resource_metrics`, Kudu 1.17+),
    /// summed over all answers.
    pub server: ServerWriteMetrics,
}

impl SessionMetrics {
    /// Operations written, all types.
    pub fn ops_written(&self) -> u64 {
        self.inserts
            + self.insert_ignores
            + self.upserts
            + self.upsert_ignores
            + self.updates
            + self.update_ignores
            + self.deletes
            + self.delete_ignores
    }

    /// Operations applied but not answered yet.
    pub fn ops_pending(&self) -> u64 {
        self.ops_applied
            .saturating_sub(self.ops_written() + self.row_errors)
    }
}

/// The write `resource_metrics` tablet servers report, summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerWriteMetrics {
    /// Rows inserted.
    pub successful_inserts: u64,
    /// INSERT_IGNOREs that found the key present.
    pub insert_ignore_errors: u64,
    /// Rows upserted.
    pub successful_upserts: u64,
    /// UPSERT_IGNOREs that hit an immutable column.
    pub upsert_ignore_errors: u64,
    /// Rows updated.
    pub successful_updates: u64,
    /// UPDATE_IGNOREs that found no row.
    pub update_ignore_errors: u64,
    /// Rows deleted.
    pub successful_deletes: u64,
    /// DELETE_IGNOREs that found no row.
    pub delete_ignore_errors: u64,
    /// Time spent in commit wait (COMMIT_WAIT mode), microseconds.
    pub commit_wait_micros: u64,
}
