//! Continuous verify (`job.verifyInterval`): the running job checks its
//! tables against their sources, one table at a time, each at a recent
//! cut of its own — the source at the table's last window end, the sink
//! at that end's sink time (docs/semantics.md, "The sink time") — so a
//! window written meanwhile causes no false difference. Every table is
//! verified once per interval: the tables take turns, one every
//! interval / tables; the work of one verification is the verifier's to
//! bound (`job.verifyBudgetRanges`: key ranges checksummed at once).
//!
//! The engine knows no cluster: the binary hands it a [`Verifier`] (for
//! Kudu, `ferry-verify`'s tablet-server checksums) through
//! [`crate::JobOptions::verifier`].

use crate::connector::CapabilityFuture;
use crate::time::{SinkTime, SourceTime};
use std::fmt;
use std::sync::Arc;

/// One verification asked of a [`Verifier`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyRequest {
    /// The source table.
    pub source_table: String,
    /// Its sink table.
    pub sink_table: String,
    /// The source is read at this time.
    pub source_time: SourceTime,
    /// The sink is read at this time: it held exactly the source as of
    /// `source_time` then.
    pub sink_time: SinkTime,
    /// Repair what differs (`job.verifyRepair`), from rows no older than
    /// any the job may have written since (a repair must never undo a
    /// newer replicated change).
    pub repair: bool,
}

/// What one verification found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyOutcome {
    /// Source rows compared.
    pub rows_compared: u64,
    /// Rows that differed at the cut (missing, extra or differing).
    pub differences: u64,
    /// Rows the repair wrote or deleted on the sink.
    pub repaired: u64,
}

/// Verifies one table against its source at a cut (the binary's, e.g.
/// `ferry-verify` for Kudu).
pub trait Verifier: Send + Sync + 'static {
    /// Verifies `request`'s tables; an error is logged and counted, and
    /// the table is tried again at its next turn.
    fn verify<'a>(&'a self, request: &'a VerifyRequest) -> CapabilityFuture<'a, VerifyOutcome>;
}

/// A [`Verifier`] as [`crate::JobOptions`] holds it.
#[derive(Clone)]
pub struct VerifierHandle(pub Arc<dyn Verifier>);

impl fmt::Debug for VerifierHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("VerifierHandle")
    }
}
