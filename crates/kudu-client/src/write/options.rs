//! What a write session is configured with: [`FlushMode`],
//! [`ExternalConsistencyMode`] and [`SessionOptions`].

use std::time::Duration;

use crate::error::{Error, Result};

#[cfg(doc)]
use super::Session;

/// Buffers the background flusher sends concurrently while it fills the
/// next one.
pub const BUFFERS_IN_FLIGHT: usize = 2;

/// When buffered operations are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FlushMode {
    /// Each `apply` sends its operation and waits for the answer (default).
    #[default]
    AutoFlushSync,
    /// A background task sends buffers by size or interval; `apply` waits
    /// only when the buffers are full.
    AutoFlushBackground,
    /// Operations are buffered until `flush`; a full buffer is an error.
    ManualFlush,
}

/// `ExternalConsistencyMode` of writes
/// (docs/kudu-protocol.md#external-consistency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ExternalConsistencyMode {
    /// The client sends the largest timestamp it has seen and remembers the
    /// write's timestamp (default).
    #[default]
    ClientPropagated,
    /// The server waits out its clock error before acknowledging; needs
    /// well-synchronised clocks.
    CommitWait,
}

impl ExternalConsistencyMode {
    /// The wire value (`CLIENT_PROPAGATED` = 1, `COMMIT_WAIT` = 2).
    pub(crate) fn to_pb(self) -> i32 {
        match self {
            ExternalConsistencyMode::ClientPropagated => 1,
            ExternalConsistencyMode::CommitWait => 2,
        }
    }
}

/// Settings of a [`Session`]. Defaults follow the Java client where it has
/// one.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub(crate) flush_mode: FlushMode,
    pub(crate) max_ops: usize,
    pub(crate) max_bytes: usize,
    pub(crate) flush_interval: Duration,
    pub(crate) max_batches_in_flight: usize,
    pub(crate) max_batch_bytes: usize,
    pub(crate) timeout: Option<Duration>,
    pub(crate) consistency: ExternalConsistencyMode,
    pub(crate) grow_to: Option<usize>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            flush_mode: FlushMode::AutoFlushSync,
            max_ops: 1000,
            max_bytes: 7 * 1024 * 1024,
            flush_interval: Duration::from_secs(1),
            max_batches_in_flight: 32,
            max_batch_bytes: 7 * 1024 * 1024,
            timeout: None,
            consistency: ExternalConsistencyMode::ClientPropagated,
            grow_to: None,
        }
    }
}

impl SessionOptions {
    /// The flush mode (default [`FlushMode::AutoFlushSync`]).
    pub fn flush_mode(mut self, mode: FlushMode) -> Self {
        self.flush_mode = mode;
        self
    }

    /// Operations a buffer holds before it is sent (background) or further
    /// applies fail (manual). Default 1000. In background mode also the
    /// capacity of the channel into the flusher.
    pub fn mutation_buffer_max_ops(mut self, n: usize) -> Self {
        self.max_ops = n;
        self
    }

    /// Encoded bytes a buffer holds before it is sent or further applies
    /// fail. Default 7 MiB.
    pub fn mutation_buffer_max_bytes(mut self, n: usize) -> Self {
        self.max_bytes = n;
        self
    }

    /// Background mode: the longest an operation waits in a buffer before
    /// the buffer is sent. Default 1 s.
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        self.flush_interval = interval;
        self
    }

    /// Write requests of this session in flight at once, over all tablets.
    /// Default 32.
    pub fn max_batches_in_flight(mut self, n: usize) -> Self {
        self.max_batches_in_flight = n;
        self
    }

    /// Cap on the encoded rows of one write request (the server refuses
    /// RPCs over 50 MiB). Default 7 MiB; a single larger row is sent alone.
    pub fn max_batch_bytes(mut self, n: usize) -> Self {
        self.max_batch_bytes = n;
        self
    }

    /// Bound on one write request, from its first attempt to its final
    /// answer (and on the tablet lookups of a flush). Default: the client's
    /// operation timeout.
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Background mode: when a buffer reaches `mutation_buffer_max_ops` (or
    /// its interval) while [`BUFFERS_IN_FLIGHT`] buffers are still being
    /// sent, keep filling it until it holds `grow_to` encoded bytes (never
    /// past `mutation_buffer_max_bytes`) rather than stopping `apply`; it is
    /// sent as soon as a send finishes. The op count then says when a
    /// buffer *may* go, and the server's speed how large it gets: one
    /// request per tablet per round trip instead of one per `max_ops`.
    /// `None` (the default) is the Java client's behaviour.
    pub fn adaptive_batching(mut self, grow_to: Option<usize>) -> Self {
        self.grow_to = grow_to;
        self
    }

    /// External consistency mode (default client-propagated).
    pub fn external_consistency_mode(mut self, mode: ExternalConsistencyMode) -> Self {
        self.consistency = mode;
        self
    }

    /// The size `Session::apply_rows` and `Session::apply_batch` cut their
    /// requests at in background mode: the adaptive growth limit when set,
    /// else `mutation_buffer_max_bytes`, never past `max_batch_bytes`.
    pub fn rows_request_bytes(&self) -> usize {
        self.grow_to
            .unwrap_or(self.max_bytes)
            .min(self.max_batch_bytes)
            .max(1)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: &str| {
            Err(Error::InvalidArgument(format!(
                "session option {what} must be positive"
            )))
        };
        if self.max_ops == 0 {
            return bad("mutation_buffer_max_ops");
        }
        if self.max_bytes == 0 {
            return bad("mutation_buffer_max_bytes");
        }
        if self.max_batches_in_flight == 0 {
            return bad("max_batches_in_flight");
        }
        if self.max_batch_bytes == 0 {
            return bad("max_batch_bytes");
        }
        if self.flush_interval.is_zero() {
            return bad("flush_interval");
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return bad("operation_timeout");
        }
        Ok(())
    }
}

/// Requests of whole batches (`apply_rows`, `apply_batch` in background
/// mode) the session may have encoded and not yet answered, on top of the
/// one being filled per tablet: one being sent and one ready (a tablet's
/// requests go one after the other anyway).
const STREAMED_REQUESTS_WAITING: usize = BUFFERS_IN_FLIGHT;

/// A session's options resolved once, when the session is made: what every
/// call reads instead of deriving it again.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) flush_mode: FlushMode,
    pub(crate) max_ops: usize,
    pub(crate) max_bytes: usize,
    pub(crate) flush_interval: Duration,
    pub(crate) grow_to: Option<usize>,
    /// Bound on one request's attempts (the client's operation timeout
    /// unless the options set one).
    pub(crate) timeout: Duration,
    pub(crate) consistency: ExternalConsistencyMode,
    pub(crate) max_batches_in_flight: usize,
    /// How requests are cut from a buffer of single operations.
    pub(crate) buffered: RequestSize,
    /// How requests are cut from a whole batch in background mode.
    pub(crate) streamed: RequestSize,
    /// Encoded bytes of whole batches that may wait unanswered.
    pub(crate) streamed_budget: usize,
}

impl Settings {
    /// `options` (validated by the caller, or the defaults) with the
    /// client's operation timeout as the default.
    pub(crate) fn new(options: &SessionOptions, client_timeout: Duration) -> Settings {
        let streamed_bytes = options.rows_request_bytes();
        Settings {
            flush_mode: options.flush_mode,
            max_ops: options.max_ops,
            max_bytes: options.max_bytes,
            flush_interval: options.flush_interval,
            grow_to: options.grow_to,
            timeout: options.timeout.unwrap_or(client_timeout),
            consistency: options.consistency,
            max_batches_in_flight: options.max_batches_in_flight,
            buffered: RequestSize::capped(options.max_batch_bytes),
            streamed: RequestSize {
                bytes: streamed_bytes,
                min_rows: options.max_ops,
                max_bytes: options.max_batch_bytes,
            },
            // A larger request (min_rows) takes the whole budget.
            streamed_budget: streamed_bytes
                .saturating_mul(STREAMED_REQUESTS_WAITING)
                .min(tokio::sync::Semaphore::MAX_PERMITS),
        }
    }
}

/// When a request being filled for a tablet is sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestSize {
    /// Due once it holds this many encoded bytes ...
    pub(crate) bytes: usize,
    /// ... and this many rows;
    pub(crate) min_rows: usize,
    /// never more than this many bytes (a single larger row goes alone).
    pub(crate) max_bytes: usize,
}

impl RequestSize {
    /// Only the cap: a request grows until the next row would pass it.
    pub(crate) fn capped(max_bytes: usize) -> RequestSize {
        RequestSize {
            bytes: usize::MAX,
            min_rows: usize::MAX,
            max_bytes,
        }
    }

    /// Whether a request of `bytes` encoded bytes and `rows` rows is due.
    pub(crate) fn due(&self, bytes: usize, rows: usize) -> bool {
        bytes >= self.max_bytes || (bytes >= self.bytes && rows >= self.min_rows)
    }
}
