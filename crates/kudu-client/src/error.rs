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
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The connection to `addr` closed while a call was in flight.
    #[error("connection to {addr} closed: {reason}")]
    ConnectionClosed { addr: String, reason: String },
    /// Connection negotiation (SASL / TLS) with `addr` failed.
    #[error("negotiation with {addr} failed: {message}")]
    Negotiation { addr: String, message: String },
    /// The peer sent bytes that do not decode as the protocol says.
    #[error("malformed message from {addr}: {message}")]
    Protocol { addr: String, message: String },
    /// An RPC-level error (`ErrorStatusPB`) from `addr` for `method`.
    #[error("RPC {method} to {addr} failed with {code}: {message}")]
    Rpc {
        addr: String,
        method: String,
        code: RpcErrorCode,
        message: String,
    },
    /// An application-level error status returned by a master or tserver.
    #[error("{context}: {status}")]
    Status { context: String, status: KuduStatus },
    /// A master that is not the leader answered a leader-only call.
    #[error("master {addr} is not the leader")]
    NotLeaderMaster { addr: String },
    /// A tablet replica that is not the leader answered a leader-only call.
    #[error("replica of tablet {tablet_id} on {addr} is not the leader")]
    NotLeaderReplica { tablet_id: String, addr: String },
    /// The tablet is not (or no longer) hosted at `addr`.
    #[error("tablet {tablet_id} not found on {addr}")]
    TabletNotFound { tablet_id: String, addr: String },
    /// The server-side scanner expired or was closed.
    #[error("scanner expired on {addr}")]
    ScannerExpired { addr: String },
    /// No master answered as leader (an election may be running).
    #[error("no leader master among {masters}: {details}")]
    NoLeaderMaster { masters: String, details: String },
    /// The server is overloaded and asked us to back off.
    #[error("server {addr} is busy: {message}")]
    ServiceUnavailable { addr: String, message: String },
    /// No table with this name (or id) exists.
    #[error("table '{0}' not found")]
    TableNotFound(String),
    /// A row's partition key falls in a range no tablet covers.
    #[error("no tablet covers partition key {partition_key:?} of table '{table}'")]
    NonCoveredRange {
        table: String,
        partition_key: Vec<u8>,
    },
    /// A snapshot/diff scan asked for history the tablets no longer keep.
    #[error("snapshot too old: {message} (raise --tablet_history_max_age_sec on the tablet servers or start from a newer timestamp)")]
    SnapshotTooOld { message: String },
    /// Some rows of a write flush failed; each carries its key and status.
    #[error("{} row(s) failed to apply; first: {}", .0.len(), .0.first().map(|e| e.to_string()).unwrap_or_default())]
    RowErrors(Vec<RowError>),
    /// The operation did not finish before its deadline.
    #[error(
        "{operation} timed out after {attempts} attempt(s) in {elapsed:?}; last error: {last}"
    )]
    TimedOut {
        operation: String,
        attempts: u32,
        elapsed: Duration,
        last: String,
    },
    /// Invalid argument supplied by the caller (bad schema, wrong type, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A server does not support a feature this call needs.
    #[error("unsupported by the server: {0}")]
    Unsupported(String),
    /// TLS configuration or handshake failure.
    #[error("TLS error with {addr}: {message}")]
    Tls { addr: String, message: String },
}

impl Error {
    /// Whether retrying the same call (after refreshing locations or
    /// backing off) may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Io { .. }
            | Error::ConnectionClosed { .. }
            | Error::NotLeaderMaster { .. }
            | Error::NotLeaderReplica { .. }
            | Error::TabletNotFound { .. }
            | Error::NoLeaderMaster { .. }
            | Error::ServiceUnavailable { .. } => true,
            Error::Rpc { code, .. } => code.is_retryable(),
            Error::Status { status, .. } => status.code == StatusCode::ServiceUnavailable,
            _ => false,
        }
    }
}

/// RPC-level error codes (`RpcErrorCodePB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RpcErrorCode {
    Application,
    NoSuchMethod,
    NoSuchService,
    ServerTooBusy,
    InvalidRequest,
    RequestStale,
    Unavailable,
    FatalUnknown,
    FatalServerShuttingDown,
    FatalInvalidRpcHeader,
    FatalDeserializingRequest,
    FatalVersionMismatch,
    FatalUnauthorized,
    FatalInvalidAuthenticationToken,
    InvalidAuthorizationToken,
    FatalInvalidJwt,
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
    Ok,
    NotFound,
    Corruption,
    NotSupported,
    InvalidArgument,
    IoError,
    AlreadyPresent,
    RuntimeError,
    NetworkError,
    IllegalState,
    NotAuthorized,
    Aborted,
    RemoteError,
    ServiceUnavailable,
    TimedOut,
    Uninitialized,
    ConfigurationError,
    Incomplete,
    EndOfFile,
    Cancelled,
    Immutable,
    UnknownError,
    Other(i32),
}

impl StatusCode {
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
pub struct KuduStatus {
    pub code: StatusCode,
    pub message: String,
    pub posix_code: Option<i32>,
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
pub struct RowError {
    /// The operation kind, e.g. "INSERT".
    pub operation: String,
    /// The row's primary key, rendered for humans (`(col=value, ...)`).
    pub key: String,
    pub status: KuduStatus,
}

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.operation, self.key, self.status)
    }
}
