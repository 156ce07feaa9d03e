//! The one error type of the client. Variants are what a caller acts on;
//! wrapped I/O, TLS and protobuf errors only appear as `source`.

use std::time::Duration;

/// Result alias used throughout the client.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a client call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket error while talking to `addr`.
    #[error("I/O error talking to {addr}: {source}")]
    Io {
        /// The server address.
        addr: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The connection to `addr` closed while a call was in flight.
    #[error("connection to {addr} closed: {reason}")]
    ConnectionClosed {
        /// The server address.
        addr: String,
        /// Why it closed, as far as known.
        reason: String,
    },
    /// Connection negotiation (SASL / TLS) with `addr` failed.
    #[error("negotiation with {addr} failed: {message}")]
    Negotiation {
        /// The server address.
        addr: String,
        /// What went wrong.
        message: String,
    },
    /// The peer sent bytes that do not decode as the protocol says.
    #[error("malformed message from {addr}: {message}")]
    Protocol {
        /// The server address.
        addr: String,
        /// What did not decode.
        message: String,
    },
    /// An RPC-level error (`ErrorStatusPB`) from `addr` for `method`.
    #[error("RPC {method} to {addr} failed with {code}: {message}")]
    Rpc {
        /// The server address.
        addr: String,
        /// The method called, `Service.Method`.
        method: String,
        /// The RPC error code.
        code: RpcErrorCode,
        /// The server's message.
        message: String,
    },
    /// An application-level error status returned by a master or tserver.
    #[error("{context}: {status}")]
    Status {
        /// What the client was doing.
        context: String,
        /// The server's status.
        status: KuduStatus,
    },
    /// A master that is not the leader answered a leader-only call.
    #[error("master {addr} is not the leader")]
    NotLeaderMaster {
        /// The master's address.
        addr: String,
    },
    /// A tablet replica that is not the leader answered a leader-only call.
    #[error("replica of tablet {tablet_id} on {addr} is not the leader")]
    NotLeaderReplica {
        /// The tablet.
        tablet_id: String,
        /// The tablet server's address.
        addr: String,
    },
    /// The tablet is not (or no longer) hosted at `addr`.
    #[error("tablet {tablet_id} not found on {addr}")]
    TabletNotFound {
        /// The tablet.
        tablet_id: String,
        /// Where it was looked for.
        addr: String,
    },
    /// The server-side scanner expired or was closed.
    #[error("scanner expired on {addr}")]
    ScannerExpired {
        /// The tablet server's address.
        addr: String,
    },
    /// No master answered as leader (an election may be running).
    #[error("no leader master among {masters}: {details}")]
    NoLeaderMaster {
        /// The masters asked.
        masters: String,
        /// What each answered.
        details: String,
    },
    /// The server is overloaded and asked us to back off.
    #[error("server {addr} is busy: {message}")]
    ServiceUnavailable {
        /// The server address.
        addr: String,
        /// The server's message.
        message: String,
    },
    /// No table with this name (or id) exists.
    #[error("table '{0}' not found")]
    TableNotFound(String),
    /// A row's partition key falls in a range no tablet covers.
    #[error("no tablet covers partition key {partition_key:?} of table '{table}'")]
    NonCoveredRange {
        /// The table.
        table: String,
        /// The row's encoded partition key.
        partition_key: Vec<u8>,
    },
    /// A snapshot/diff scan asked for history the tablets no longer keep.
    #[error("snapshot too old: {message} (raise --tablet_history_max_age_sec on the tablet servers or start from a newer timestamp)")]
    SnapshotTooOld {
        /// The server's message.
        message: String,
    },
    /// Some rows of a write flush failed; each carries its key and status.
    #[error("{} row(s) failed to apply; first: {}", .0.len(), .0.first().map(|e| e.to_string()).unwrap_or_default())]
    RowErrors(Vec<RowError>),
    /// The operation did not finish before its deadline.
    #[error(
        "{operation} timed out after {attempts} attempt(s) in {elapsed:?}; last error: {last}"
    )]
    TimedOut {
        /// The operation that ran out of time.
        operation: String,
        /// How many attempts were made.
        attempts: u32,
        /// Time spent.
        elapsed: Duration,
        /// The last cause, as text.
        last: String,
    },
    /// Invalid argument supplied by the caller (bad schema, wrong type, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A server does not support a feature this call needs.
    #[error("unsupported by the server: {0}")]
    Unsupported(String),
    /// A table's partitioning cannot be described as a create request: its
    /// tablets do not match its partition schema, or a range bound cannot be
    /// written as a row.
    #[error("cannot describe the partitioning of table '{table}': {reason}")]
    Partitioning {
        /// The table.
        table: String,
        /// What does not fit.
        reason: String,
    },
    /// Authenticating to `addr` failed: Kerberos could not log in or get
    /// a ticket (unknown principal, unreadable keytab, clock skew, KDC
    /// unreachable), or the server refused the credentials. Retrying with
    /// the same credentials does not help.
    #[error("authentication with {addr} failed: {message}")]
    Authentication {
        /// The server address.
        addr: String,
        /// The cause, as Kerberos or the server put it.
        message: String,
    },
    /// TLS configuration or handshake failure.
    #[error("TLS error with {addr}: {message}")]
    Tls {
        /// The server address.
        addr: String,
        /// What went wrong.
        message: String,
    },
}

/// What to do about a failed attempt of a call, within that call's
/// deadline: the client's one retry rule, given by [`Error::retry_action`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetryAction {
    /// The routing was stale (not the leader, tablet moved, scanner gone):
    /// look up the tablet location or the leader master again and retry at
    /// once.
    RefreshAndRetry,
    /// The server is busy or could not be reached: back off, then retry.
    BackoffAndRetry,
    /// Retrying within the same deadline cannot help.
    Fail,
}

impl Error {
    /// How the client's retry loops treat this error while the call's
    /// deadline lasts. A [`TimedOut`](Error::TimedOut) is `Fail`: the
    /// deadline is spent (see [`is_transient`](Error::is_transient) for a
    /// caller with a fresh deadline).
    pub fn retry_action(&self) -> RetryAction {
        match self {
            Error::NotLeaderMaster { .. }
            | Error::NotLeaderReplica { .. }
            | Error::TabletNotFound { .. }
            | Error::ScannerExpired { .. } => RetryAction::RefreshAndRetry,
            Error::Io { .. }
            | Error::ConnectionClosed { .. }
            | Error::NoLeaderMaster { .. }
            | Error::ServiceUnavailable { .. } => RetryAction::BackoffAndRetry,
            Error::Rpc { code, .. } if code.is_retryable() => RetryAction::BackoffAndRetry,
            Error::Status { status, .. } if status.code == StatusCode::ServiceUnavailable => {
                RetryAction::BackoffAndRetry
            }
            Error::Rpc { .. }
            | Error::Status { .. }
            | Error::Negotiation { .. }
            | Error::Protocol { .. }
            | Error::TableNotFound(_)
            | Error::NonCoveredRange { .. }
            | Error::SnapshotTooOld { .. }
            | Error::RowErrors(_)
            | Error::TimedOut { .. }
            | Error::InvalidArgument(_)
            | Error::Unsupported(_)
            | Error::Partitioning { .. }
            | Error::Authentication { .. }
            | Error::Tls { .. } => RetryAction::Fail,
        }
    }

    /// Whether a whole new attempt, with a fresh deadline, may succeed: for
    /// callers above the client's own retries (a job re-reading a split, a
    /// scan reopening a tablet). A timeout is transient; a snapshot older
    /// than the history kept, a missing table, a bad argument or refused
    /// rows are not.
    ///
    /// Refused rows are transient only when every row failed for a
    /// transient reason (the batch timed out or its server was
    /// unavailable): a row the server judged invalid stays invalid.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::TimedOut { .. } => true,
            Error::Status { status, .. } => status.code.is_transient(),
            Error::RowErrors(rows) => {
                !rows.is_empty() && rows.iter().all(|r| r.status.code.is_transient())
            }
            other => other.retry_action() != RetryAction::Fail,
        }
    }

    /// Whether the server that returned this error should not be asked
    /// again for the same tablet or as leader: it does not host the
    /// tablet, did not answer in time, or dropped the connection.
    pub fn server_unusable(&self) -> bool {
        match self {
            Error::TabletNotFound { .. }
            | Error::Io { .. }
            | Error::ConnectionClosed { .. }
            | Error::TimedOut { .. } => true,
            Error::Rpc { code, .. } => code.is_fatal(),
            _ => false,
        }
    }
}

/// RPC-level error codes (`RpcErrorCodePB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RpcErrorCode {
    /// An application error (the body carries the details).
    Application,
    /// The service has no such method.
    NoSuchMethod,
    /// The server has no such service.
    NoSuchService,
    /// The server's queue is full.
    ServerTooBusy,
    /// The request could not be parsed.
    InvalidRequest,
    /// The request expired before it was handled.
    RequestStale,
    /// The server cannot serve the call now.
    Unavailable,
    /// Unknown fatal error (the connection closes).
    FatalUnknown,
    /// The server is shutting down.
    FatalServerShuttingDown,
    /// The request header was malformed.
    FatalInvalidRpcHeader,
    /// The request could not be deserialized.
    FatalDeserializingRequest,
    /// The protocol versions do not match.
    FatalVersionMismatch,
    /// The caller is not authorized.
    FatalUnauthorized,
    /// The authentication token was refused.
    FatalInvalidAuthenticationToken,
    /// The authorization token was refused (expired or unknown).
    InvalidAuthorizationToken,
    /// The JSON web token was refused.
    FatalInvalidJwt,
    /// A code this client does not know.
    Other(i32),
}

impl RpcErrorCode {
    /// Maps the wire value.
    pub fn from_i32(v: i32) -> Self {
        match v {
            1 => Self::Application,
            2 => Self::NoSuchMethod,
            3 => Self::NoSuchService,
            4 => Self::ServerTooBusy,
            5 => Self::InvalidRequest,
            6 => Self::RequestStale,
            7 => Self::Unavailable,
            10 => Self::FatalUnknown,
            11 => Self::FatalServerShuttingDown,
            12 => Self::FatalInvalidRpcHeader,
            13 => Self::FatalDeserializingRequest,
            14 => Self::FatalVersionMismatch,
            15 => Self::FatalUnauthorized,
            16 => Self::FatalInvalidAuthenticationToken,
            17 => Self::InvalidAuthorizationToken,
            18 => Self::FatalInvalidJwt,
            other => Self::Other(other),
        }
    }

    /// Busy / unavailable / shutting down are worth another try.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Self::ServerTooBusy | Self::Unavailable | Self::FatalServerShuttingDown
        )
    }

    /// Fatal codes mean the server closes the connection.
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            Self::FatalUnknown
                | Self::FatalServerShuttingDown
                | Self::FatalInvalidRpcHeader
                | Self::FatalDeserializingRequest
                | Self::FatalVersionMismatch
                | Self::FatalUnauthorized
                | Self::FatalInvalidAuthenticationToken
                | Self::FatalInvalidJwt
        )
    }
}

impl std::fmt::Display for RpcErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Other(v) => write!(f, "RPC error code {v}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Kudu's application status codes (`AppStatusPB.ErrorCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StatusCode {
    /// Success.
    Ok,
    /// Something does not exist.
    NotFound,
    /// Data is corrupt.
    Corruption,
    /// Not supported.
    NotSupported,
    /// An argument is invalid.
    InvalidArgument,
    /// An I/O error.
    IoError,
    /// Something already exists.
    AlreadyPresent,
    /// A runtime error.
    RuntimeError,
    /// A network error.
    NetworkError,
    /// The operation does not fit the current state.
    IllegalState,
    /// Not authorized.
    NotAuthorized,
    /// The operation was aborted.
    Aborted,
    /// An error on a remote server.
    RemoteError,
    /// The service is unavailable (busy or starting).
    ServiceUnavailable,
    /// The operation timed out.
    TimedOut,
    /// Not initialized.
    Uninitialized,
    /// A configuration error.
    ConfigurationError,
    /// Incomplete.
    Incomplete,
    /// End of file.
    EndOfFile,
    /// Cancelled.
    Cancelled,
    /// The value is immutable.
    Immutable,
    /// An unknown error.
    UnknownError,
    /// A code this client does not know.
    Other(i32),
}

impl StatusCode {
    /// Whether an operation that ended with this status may succeed when
    /// tried again later: the server was unreachable, busy, or the attempt
    /// ran out of time or was aborted (e.g. by a leader change).
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            StatusCode::TimedOut
                | StatusCode::ServiceUnavailable
                | StatusCode::NetworkError
                | StatusCode::Aborted
        )
    }

    /// Maps the wire value of `AppStatusPB.code`.
    pub fn from_i32(v: i32) -> Self {
        match v {
            0 => Self::Ok,
            1 => Self::NotFound,
            2 => Self::Corruption,
            3 => Self::NotSupported,
            4 => Self::InvalidArgument,
            5 => Self::IoError,
            6 => Self::AlreadyPresent,
            7 => Self::RuntimeError,
            8 => Self::NetworkError,
            9 => Self::IllegalState,
            10 => Self::NotAuthorized,
            11 => Self::Aborted,
            12 => Self::RemoteError,
            13 => Self::ServiceUnavailable,
            14 => Self::TimedOut,
            15 => Self::Uninitialized,
            16 => Self::ConfigurationError,
            17 => Self::Incomplete,
            18 => Self::EndOfFile,
            19 => Self::Cancelled,
            20 => Self::Immutable,
            999 => Self::UnknownError,
            other => Self::Other(other),
        }
    }
}

/// An application-level status: code, message and optional POSIX errno.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KuduStatus {
    /// The status code.
    pub code: StatusCode,
    /// The server's message.
    pub message: String,
    /// The POSIX errno behind it, if any.
    pub posix_code: Option<i32>,
}

impl KuduStatus {
    /// A status with `code` and `message` (no errno).
    pub fn new(code: StatusCode, message: impl Into<String>) -> Self {
        KuduStatus {
            code,
            message: message.into(),
            posix_code: None,
        }
    }
}

impl std::fmt::Display for KuduStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)?;
        if let Some(errno) = self.posix_code {
            write!(f, " (errno {errno})")?;
        }
        Ok(())
    }
}

/// One row of a write that the server refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RowError {
    /// The operation kind, e.g. "INSERT".
    pub operation: String,
    /// The row's primary key, rendered for humans (`(col=value, ...)`).
    pub key: String,
    /// Why the server refused it.
    pub status: KuduStatus,
}

impl RowError {
    /// The refusal of an `operation` (e.g. "INSERT") on the row whose key
    /// renders as `key`.
    pub fn new(operation: impl Into<String>, key: impl Into<String>, status: KuduStatus) -> Self {
        RowError {
            operation: operation.into(),
            key: key.into(),
            status,
        }
    }
}

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.operation, self.key, self.status)
    }
}

#[cfg(test)]
mod tests;
