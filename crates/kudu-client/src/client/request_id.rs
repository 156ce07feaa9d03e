//! Exactly-once request ids: every logical write gets a sequence number
//! from its client, kept across its retries
//! (docs/kudu-protocol.md#request-header-and-request-ids).

use std::collections::BTreeSet;

use super::KuduClient;
use crate::pb;

impl KuduClient {
    /// Starts a logical write with a fresh exactly-once request id. Its
    /// retries reuse the id and only bump `attempt_no`; dropping the guard
    /// marks the write complete.
    pub(crate) fn track_request(&self) -> TrackedRequest {
        let seq = match self.inner.requests.lock() {
            Ok(mut t) => t.start(),
            Err(poisoned) => poisoned.into_inner().start(),
        };
        TrackedRequest {
            client: self.clone(),
            seq,
        }
    }

    /// The lowest sequence number of any write still unanswered.
    fn first_incomplete(&self, fallback: i64) -> i64 {
        let t = self
            .inner
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        t.outstanding
            .first()
            .copied()
            .unwrap_or(fallback)
            .min(fallback)
    }
}

/// Exactly-once request ids of this client still in flight.
///
/// A request carries `first_incomplete_seq_no`, below which the server may
/// drop cached responses. It must be the lowest sequence number of *any*
/// write of this client still unanswered — not the request's own — or a
/// retry of an older request that was applied but whose answer was lost
/// would find no cached response and be applied a second time. Numbers are
/// allocated and registered under one lock, so no request announces a
/// watermark above a number handed out but not yet registered.
#[derive(Debug, Default)]
pub(super) struct RequestTracker {
    next_seq: i64,
    outstanding: BTreeSet<i64>,
}

impl RequestTracker {
    fn start(&mut self) -> i64 {
        self.next_seq += 1;
        self.outstanding.insert(self.next_seq);
        self.next_seq
    }
}

/// One logical write's request id; unregistered when dropped.
#[derive(Debug)]
pub(crate) struct TrackedRequest {
    client: KuduClient,
    seq: i64,
}

impl TrackedRequest {
    /// The id to send on attempt `attempt` (1-based).
    pub(crate) fn for_attempt(&self, attempt: u32) -> pb::rpc::RequestIdPb {
        pb::rpc::RequestIdPb {
            client_id: self.client.inner.client_id.clone(),
            seq_no: self.seq,
            first_incomplete_seq_no: self.client.first_incomplete(self.seq),
            attempt_no: i64::from(attempt.max(1)),
        }
    }

    /// The sequence number.
    #[cfg(test)]
    pub(crate) fn seq_no(&self) -> i64 {
        self.seq
    }
}

impl Drop for TrackedRequest {
    fn drop(&mut self) {
        let mut t = self
            .client
            .inner
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        t.outstanding.remove(&self.seq);
    }
}
