use super::*;

fn status(code: StatusCode) -> Error {
    Error::Status {
        context: "call".into(),
        status: KuduStatus {
            code,
            message: "m".into(),
            posix_code: None,
        },
    }
}

fn rpc(code: RpcErrorCode) -> Error {
    Error::Rpc {
        addr: "a".into(),
        method: "M".into(),
        code,
        message: "m".into(),
    }
}

/// Every variant (and the codes that decide within one) with its action
/// in a retry loop, whether a fresh attempt may succeed, and whether the
/// server that said so should be avoided.
#[test]
fn each_error_maps_to_one_action() {
    use RetryAction::{BackoffAndRetry as Backoff, Fail, RefreshAndRetry as Refresh};
    let a = || "ts:7050".to_owned();
    let mut cases: Vec<(Error, RetryAction, bool, bool)> = vec![
        (
            Error::Io {
                addr: a(),
                source: std::io::ErrorKind::ConnectionRefused.into(),
            },
            Backoff,
            true,
            true,
        ),
        (
            Error::ConnectionClosed {
                addr: a(),
                reason: "reset".into(),
            },
            Backoff,
            true,
            true,
        ),
        (
            Error::Negotiation {
                addr: a(),
                message: "m".into(),
            },
            Fail,
            false,
            false,
        ),
        (
            Error::Protocol {
                addr: a(),
                message: "m".into(),
            },
            Fail,
            false,
            false,
        ),
        (rpc(RpcErrorCode::ServerTooBusy), Backoff, true, false),
        (rpc(RpcErrorCode::Unavailable), Backoff, true, false),
        (
            rpc(RpcErrorCode::FatalServerShuttingDown),
            Backoff,
            true,
            true,
        ),
        (rpc(RpcErrorCode::FatalUnauthorized), Fail, false, true),
        (rpc(RpcErrorCode::NoSuchMethod), Fail, false, false),
        (rpc(RpcErrorCode::Application), Fail, false, false),
        (status(StatusCode::ServiceUnavailable), Backoff, true, false),
        (status(StatusCode::NotFound), Fail, false, false),
        (status(StatusCode::TimedOut), Fail, true, false),
        (Error::NotLeaderMaster { addr: a() }, Refresh, true, false),
        (
            Error::NotLeaderReplica {
                tablet_id: "t".into(),
                addr: a(),
            },
            Refresh,
            true,
            false,
        ),
        (
            Error::TabletNotFound {
                tablet_id: "t".into(),
                addr: a(),
            },
            Refresh,
            true,
            true,
        ),
        (Error::ScannerExpired { addr: a() }, Refresh, true, false),
        (
            Error::NoLeaderMaster {
                masters: "m".into(),
                details: "d".into(),
            },
            Backoff,
            true,
            false,
        ),
        (
            Error::ServiceUnavailable {
                addr: a(),
                message: "busy".into(),
            },
            Backoff,
            true,
            false,
        ),
        (Error::TableNotFound("t".into()), Fail, false, false),
        (
            Error::NonCoveredRange {
                table: "t".into(),
                partition_key: vec![],
            },
            Fail,
            false,
            false,
        ),
        (
            Error::SnapshotTooOld {
                message: "m".into(),
            },
            Fail,
            false,
            false,
        ),
        (Error::RowErrors(Vec::new()), Fail, false, false),
        (
            Error::TimedOut {
                operation: "o".into(),
                attempts: 1,
                elapsed: Duration::ZERO,
                last: "l".into(),
            },
            Fail,
            true,
            true,
        ),
        (Error::InvalidArgument("x".into()), Fail, false, false),
        (Error::Unsupported("x".into()), Fail, false, false),
        (
            Error::Partitioning {
                table: "t".into(),
                reason: "r".into(),
            },
            Fail,
            false,
            false,
        ),
        (
            Error::Tls {
                addr: a(),
                message: "m".into(),
            },
            Fail,
            false,
            false,
        ),
    ];
    let row = |code| RowError {
        operation: "UPSERT_IGNORE".into(),
        key: "(id=1)".into(),
        status: KuduStatus {
            code,
            message: "m".into(),
            posix_code: None,
        },
    };
    let timed_out = Error::RowErrors(vec![
        row(StatusCode::TimedOut),
        row(StatusCode::NetworkError),
    ]);
    let mixed = Error::RowErrors(vec![
        row(StatusCode::TimedOut),
        row(StatusCode::InvalidArgument),
    ]);
    cases.push((timed_out, Fail, true, false));
    cases.push((mixed, Fail, false, false));
    for (err, action, transient, unusable) in cases {
        assert_eq!(err.retry_action(), action, "{err:?}");
        assert_eq!(err.is_transient(), transient, "{err:?}");
        assert_eq!(err.server_unusable(), unusable, "{err:?}");
    }
}
