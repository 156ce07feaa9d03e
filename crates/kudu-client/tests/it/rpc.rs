//! Tests of the RPC layer.
//!
//! - Against real Kudu 1.17 daemons from `ferry-testkit`: negotiation
//!   (plain and TLS), typed calls to the master, tablet server and generic
//!   services, RPC-level errors, and a cluster that requires encryption.
//! - Against a tiny in-process KRPC server built on the public frame codec,
//!   for what real servers will not do on demand: answers out of order,
//!   dropping a connection with calls in flight, never answering, slow
//!   negotiation (to check that concurrent callers share one connect).
//! - Bad addresses fail in bounded time, naming the address.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferry_fixtures::runtime;
use kudu_client::pb::master::master_service::{ConnectToMaster, Ping};
use kudu_client::pb::master::{ConnectToMasterRequestPb, PingRequestPb};
use kudu_client::pb::rpc::authentication_type_pb::{self, Type as AuthnType};
use kudu_client::pb::rpc::negotiate_pb::{NegotiateStep, SaslMechanism};
use kudu_client::pb::rpc::{
    error_status_pb::RpcErrorCodePb, AuthenticationTypePb, ErrorStatusPb, NegotiatePb,
    RequestHeader, RequestIdPb, ResponseHeader, RpcFeatureFlag,
};
use kudu_client::pb::server::generic_service::ServerClock;
use kudu_client::pb::server::ServerClockRequestPb;
use kudu_client::pb::tserver::tablet_server_service::Ping as TsPing;
use kudu_client::pb::{consensus::raft_peer_pb::Role, tserver};
use kudu_client::rpc::frame::{self, Frame, RequestFrame};
use kudu_client::rpc::{
    CallOptions, ConnectOptions, Connection, ConnectionPool, NegotiateOptions, TlsPolicy,
};
use kudu_client::{error::RpcErrorCode, Error, RetryAction};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn opts(tls: TlsPolicy) -> ConnectOptions {
    ConnectOptions {
        negotiate: NegotiateOptions::default().tls(tls),
        ..Default::default()
    }
}

fn secs(n: u64) -> CallOptions {
    CallOptions::with_timeout(Duration::from_secs(n))
}

// ---------------------------------------------------------------------------
// Real Kudu servers.

#[test]
fn master_and_tserver_calls_on_a_default_cluster() {
    let cluster = crate::shared::one_tserver();
    let master = cluster.master_addrs()[0].clone();
    let tserver = cluster.tserver_addrs()[0].clone();

    runtime().block_on(async {
        // Default policy: TLS is offered, and a default server has a cert.
        let pool = ConnectionPool::new(ConnectOptions::default());
        let conn = pool.get(&master).await.expect("connect to master");
        assert!(
            conn.is_tls(),
            "default servers offer TLS; it should be used"
        );

        // ConnectToMaster with its feature flag (as the Java client does).
        let resp = pool
            .call::<ConnectToMaster>(
                &master,
                &ConnectToMasterRequestPb {},
                &secs(10).require_feature(3),
            )
            .await
            .expect("ConnectToMaster");
        assert!(resp.body.error.is_none(), "{:?}", resp.body.error);
        assert_eq!(resp.body.role, Some(Role::Leader as i32));
        assert!(!resp.body.master_addrs.is_empty());
        // Over TLS with PLAIN the leader hands out an authn token and CA.
        assert!(resp.body.authn_token.is_some());
        assert!(!resp.body.ca_cert_der.is_empty());

        pool.call::<Ping>(&master, &PingRequestPb {}, &secs(10))
            .await
            .expect("master Ping");
        pool.call::<TsPing>(&tserver, &tserver::PingRequestPb {}, &secs(10))
            .await
            .expect("tserver Ping");
        let clock = pool
            .call::<ServerClock>(&tserver, &ServerClockRequestPb {}, &secs(10))
            .await
            .expect("ServerClock");
        let ts = clock.body.timestamp.expect("timestamp");
        let now_micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_micros() as u64;
        let server_micros = ts >> 12;
        assert!(server_micros.abs_diff(now_micros) < 60_000_000, "{ts}");

        // All of that used one connection per server.
        let again = pool.get(&master).await.expect("cached");
        assert!(again.ptr_eq(&conn));

        // An unknown feature flag: the server says which one.
        let err = pool
            .call::<Ping>(&master, &PingRequestPb {}, &secs(10).require_feature(9999))
            .await
            .expect_err("unknown feature");
        match &err {
            Error::Rpc {
                code,
                message,
                addr,
                ..
            } => {
                assert_eq!(*code, RpcErrorCode::InvalidRequest);
                assert!(message.contains("9999"), "{message}");
                assert_eq!(addr, &master);
            }
            other => panic!("unexpected {other:?}"),
        }
        // An unknown method.
        let err = conn
            .call_raw(
                "kudu.master.MasterService",
                "NoSuchCall",
                &PingRequestPb {},
                &secs(10),
            )
            .await
            .expect_err("unknown method");
        assert!(
            matches!(
                err,
                Error::Rpc {
                    code: RpcErrorCode::NoSuchMethod,
                    ..
                }
            ),
            "{err:?}"
        );
        // The connection survives RPC-level errors.
        assert!(!conn.is_closed());
        conn.call::<Ping>(&PingRequestPb {}, &secs(10))
            .await
            .expect("Ping after errors");

        // Plaintext works against a server with the default `optional`.
        let plain = Connection::connect(&master, &opts(TlsPolicy::Disabled))
            .await
            .expect("plain connect");
        assert!(!plain.is_tls());
        let resp = plain
            .call::<ConnectToMaster>(&ConnectToMasterRequestPb {}, &secs(10))
            .await
            .expect("plain ConnectToMaster");
        assert_eq!(resp.body.role, Some(Role::Leader as i32));
        // (No assertion on authn_token here: servers count loopback
        // connections as confidential even in plaintext.)
    });
}

#[test]
fn cluster_requiring_encryption() {
    let cluster = ferry_testkit::MiniCluster::builder()
        .masters(1)
        .tservers(1)
        .master_flag("--rpc_encryption=required")
        .tserver_flag("--rpc_encryption=required")
        .start()
        .expect("cluster");
    let master = cluster.master_addrs()[0].clone();
    let tserver = cluster.tserver_addrs()[0].clone();

    runtime().block_on(async {
        let pool = ConnectionPool::new(opts(TlsPolicy::Required));
        let conn = pool.get(&master).await.expect("TLS connect to master");
        let tls = conn.tls_description().expect("encrypted");
        // Kudu 1.17 binaries use OpenSSL 1.1.1: TLS 1.3, where the client's
        // Finished goes out without waiting for an answer.
        assert!(tls.starts_with("TLSv1_3"), "{tls}");
        let resp = conn
            .call::<ConnectToMaster>(&ConnectToMasterRequestPb {}, &secs(10).require_feature(3))
            .await
            .expect("ConnectToMaster over TLS");
        assert_eq!(resp.body.role, Some(Role::Leader as i32));
        assert!(resp.body.authn_token.is_some());

        // Many calls in flight on one TLS connection.
        let calls = (0..50).map(|_| {
            let conn = conn.clone();
            async move { conn.call::<Ping>(&PingRequestPb {}, &secs(10)).await }
        });
        for r in futures::future::join_all(calls).await {
            r.expect("concurrent Ping over TLS");
        }
        // A request far larger than one TLS record (the server skips the
        // unknown field), while small calls share the connection.
        let big = tserver::ScannerKeepAliveRequestPb {
            scanner_id: vec![0x5a; 4 << 20],
        };
        let long = secs(30);
        let (big, small) = tokio::join!(
            conn.call_raw("kudu.master.MasterService", "Ping", &big, &long),
            conn.call::<Ping>(&PingRequestPb {}, &long),
        );
        big.expect("4 MiB request over TLS");
        small.expect("Ping next to it");

        let ts = pool.get(&tserver).await.expect("TLS connect to tserver");
        assert!(ts.is_tls());
        ts.call::<TsPing>(&tserver::PingRequestPb {}, &secs(10))
            .await
            .expect("tserver Ping over TLS");

        // A client that will not encrypt is refused during negotiation.
        let err = Connection::connect(&master, &opts(TlsPolicy::Disabled))
            .await
            .expect_err("plaintext must be refused");
        assert!(err.to_string().contains(&master), "{err}");
        assert!(
            matches!(
                err,
                Error::Rpc {
                    code: RpcErrorCode::FatalUnauthorized,
                    ..
                }
            ),
            "{err:?}"
        );
    });
}

#[test]
fn cluster_limited_to_tls12() {
    // TLS 1.2 ends the tunnelled handshake with the server's Finished.
    let cluster = ferry_testkit::MiniCluster::builder()
        .masters(1)
        .tservers(1)
        .master_flag("--rpc_encryption=required")
        .master_flag("--rpc_tls_excluded_protocols=TLSv1.3")
        .start()
        .expect("cluster");
    let master = cluster.master_addrs()[0].clone();
    runtime().block_on(async {
        let conn = Connection::connect(&master, &opts(TlsPolicy::Required))
            .await
            .expect("TLS 1.2 connect");
        let tls = conn.tls_description().expect("encrypted");
        assert!(tls.starts_with("TLSv1_2"), "{tls}");
        let resp = conn
            .call::<ConnectToMaster>(&ConnectToMasterRequestPb {}, &secs(10))
            .await
            .expect("ConnectToMaster over TLS 1.2");
        assert_eq!(resp.body.role, Some(Role::Leader as i32));
    });
}

// ---------------------------------------------------------------------------
// Bad addresses.

#[test]
fn bad_addresses_fail_fast_and_name_the_address() {
    runtime().block_on(async {
        let quick = ConnectOptions {
            connect_timeout: Duration::from_millis(500),
            ..Default::default()
        };

        // Nothing listens: refused at once.
        let closed_port = {
            let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            l.local_addr().expect("addr").to_string()
        };
        let started = std::time::Instant::now();
        let err = Connection::connect(&closed_port, &quick)
            .await
            .expect_err("refused");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
        assert!(err.to_string().contains(&closed_port), "{err}");
        assert_eq!(err.retry_action(), RetryAction::BackoffAndRetry);

        // Something listens but never negotiates: bounded by the timeout.
        let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let silent_addr = silent.local_addr().expect("addr").to_string();
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = silent.accept().await {
                held.push(s);
            }
        });
        let started = std::time::Instant::now();
        let err = Connection::connect(&silent_addr, &quick)
            .await
            .expect_err("silent");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(400) && took < Duration::from_secs(3),
            "{took:?}"
        );
        assert!(err.to_string().contains(&silent_addr), "{err}");
        hold.abort();

        // A name that does not resolve.
        let started = std::time::Instant::now();
        let err = Connection::connect("no-such-host.invalid:7051", &quick)
            .await
            .expect_err("unresolvable");
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(
            err.to_string().contains("no-such-host.invalid:7051"),
            "{err}"
        );

        // Through the pool: the failed entry is gone afterwards.
        let pool = ConnectionPool::new(quick);
        pool.get(&closed_port).await.expect_err("refused");
        assert!(!pool.contains(&closed_port));
    });
}

// ---------------------------------------------------------------------------
// A minimal in-process KRPC server (the `spans` tests use it too).

/// The server side of one negotiated connection.
pub(crate) struct MockConn {
    stream: TcpStream,
    buf: BytesMut,
}

impl MockConn {
    /// Accepts one connection and negotiates it (plaintext, SASL PLAIN),
    /// waiting `delay` before answering NEGOTIATE.
    pub(crate) async fn accept(listener: &TcpListener, delay: Duration) -> MockConn {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut preamble = [0u8; 7];
        stream.read_exact(&mut preamble).await.expect("preamble");
        assert_eq!(&preamble, &frame::PREAMBLE);
        let mut conn = MockConn {
            stream,
            buf: BytesMut::new(),
        };

        let hello = conn.recv_negotiate().await;
        assert_eq!(hello.step, NegotiateStep::Negotiate as i32);
        tokio::time::sleep(delay).await;
        conn.send_negotiate(NegotiatePb {
            supported_features: vec![RpcFeatureFlag::ApplicationFeatureFlags as i32],
            step: NegotiateStep::Negotiate as i32,
            sasl_mechanisms: vec![SaslMechanism {
                mechanism: "PLAIN".into(),
            }],
            authn_types: vec![AuthenticationTypePb {
                r#type: Some(AuthnType::Sasl(authentication_type_pb::Sasl {})),
            }],
            ..Default::default()
        })
        .await;
        let init = conn.recv_negotiate().await;
        assert_eq!(init.step, NegotiateStep::SaslInitiate as i32);
        let token = init.token.expect("token");
        assert_eq!(token.first(), Some(&0));
        assert_eq!(token.last(), Some(&0));
        conn.send_negotiate(NegotiatePb {
            step: NegotiateStep::SaslSuccess as i32,
            ..Default::default()
        })
        .await;
        let context = conn.recv().await.expect("connection context");
        assert_eq!(context.header.call_id, -3);
        conn
    }

    pub(crate) async fn recv(&mut self) -> Option<RequestFrame> {
        loop {
            if let Some(f) = frame::decode::<RequestHeader>(&mut self.buf).expect("frame") {
                return Some(f);
            }
            if self.stream.read_buf(&mut self.buf).await.ok()? == 0 {
                return None;
            }
        }
    }

    async fn recv_negotiate(&mut self) -> NegotiatePb {
        let f = self.recv().await.expect("negotiation frame");
        assert_eq!(f.header.call_id, -33);
        assert!(f.header.remote_method.is_none());
        NegotiatePb::decode(f.body).expect("NegotiatePB")
    }

    async fn send_frame(&mut self, f: Frame<ResponseHeader>) {
        let mut out = BytesMut::new();
        frame::encode(&f, &mut out).expect("encode");
        self.stream.write_all(&out).await.expect("write");
    }

    async fn send_negotiate(&mut self, msg: NegotiatePb) {
        self.send_frame(Frame::new(response_header(-33, false), msg.encode_to_vec()))
            .await;
    }

    pub(crate) async fn reply(
        &mut self,
        call_id: i32,
        body: impl Into<Bytes>,
        sidecars: Vec<Bytes>,
    ) {
        let mut f = Frame::new(response_header(call_id, false), body.into());
        f.sidecars = sidecars;
        self.send_frame(f).await;
    }

    pub(crate) async fn reply_error(&mut self, call_id: i32, code: RpcErrorCodePb, message: &str) {
        let status = ErrorStatusPb {
            message: message.into(),
            code: Some(code as i32),
            unsupported_feature_flags: vec![],
        };
        self.send_frame(Frame::new(
            response_header(call_id, true),
            status.encode_to_vec(),
        ))
        .await;
    }
}

fn response_header(call_id: i32, is_error: bool) -> ResponseHeader {
    ResponseHeader {
        call_id,
        is_error: is_error.then_some(true),
        sidecar_offsets: vec![],
    }
}

pub(crate) async fn listener() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    (l, addr)
}

/// The mock server's "method" is any name; the body is echoed back.
async fn echo_call(conn: &Connection, method: &str, payload: &[u8]) -> kudu_client::Result<Bytes> {
    let req = tserver::ScannerKeepAliveRequestPb {
        scanner_id: payload.to_vec(),
    };
    conn.call_raw("test.Echo", method, &req, &secs(10))
        .await
        .map(|r| r.body)
}

#[test]
fn responses_out_of_order_with_sidecars_and_header_fields() {
    runtime().block_on(async {
        let (l, addr) = listener().await;
        let server = tokio::spawn(async move {
            let mut c = MockConn::accept(&l, Duration::ZERO).await;
            let mut reqs = Vec::new();
            for _ in 0..3 {
                reqs.push(c.recv().await.expect("request"));
            }
            // Answer in reverse order; each answer echoes the body and
            // carries two sidecars naming the call.
            for r in reqs.iter().rev() {
                let id = r.header.call_id;
                let side = Bytes::from(format!("side-{id}"));
                c.reply(id, r.body.clone(), vec![side, Bytes::new()]).await;
            }
            reqs.into_iter().map(|r| r.header).collect::<Vec<_>>()
        });

        let conn = Connection::connect(&addr, &opts(TlsPolicy::Optional))
            .await
            .expect("connect");
        assert!(!conn.is_tls(), "the mock server does not offer TLS");
        let request_id = RequestIdPb {
            client_id: "client-1".into(),
            seq_no: 5,
            first_incomplete_seq_no: 5,
            attempt_no: 1,
        };
        let call_opts = secs(10).require_feature(7).request_id(request_id.clone());
        let calls = (0..3u8).map(|i| {
            let conn = conn.clone();
            let call_opts = call_opts.clone();
            async move {
                let req = tserver::ScannerKeepAliveRequestPb {
                    scanner_id: vec![i],
                };
                let r = conn
                    .call_raw("test.Echo", "M", &req, &call_opts)
                    .await
                    .expect("call");
                let echoed = tserver::ScannerKeepAliveRequestPb::decode(r.body).expect("body");
                (i, echoed.scanner_id, r.sidecars)
            }
        });
        for (i, echoed, sidecars) in futures::future::join_all(calls).await {
            assert_eq!(echoed, vec![i], "each caller gets its own answer");
            assert_eq!(sidecars.len(), 2);
            assert!(sidecars[0].starts_with(b"side-"));
            assert!(sidecars[1].is_empty());
        }
        let headers = server.await.expect("server");
        let mut ids: Vec<i32> = headers.iter().map(|h| h.call_id).collect();
        ids.sort();
        assert_eq!(ids, vec![0, 1, 2], "call ids start at 0 and increase");
        for h in &headers {
            let m = h.remote_method.as_ref().expect("remote method");
            assert_eq!(
                (m.service_name.as_str(), m.method_name.as_str()),
                ("test.Echo", "M")
            );
            let t = h.timeout_millis.expect("timeout sent");
            assert!(t > 9_000 && t <= 10_000, "{t}");
            assert_eq!(h.required_feature_flags, vec![7]);
            assert_eq!(h.request_id.as_ref(), Some(&request_id));
        }
    });
}

#[test]
fn error_status_becomes_rpc_error_and_connection_survives() {
    runtime().block_on(async {
        let (l, addr) = listener().await;
        tokio::spawn(async move {
            let mut c = MockConn::accept(&l, Duration::ZERO).await;
            let r = c.recv().await.expect("first");
            c.reply_error(
                r.header.call_id,
                RpcErrorCodePb::ErrorServerTooBusy,
                "queue full",
            )
            .await;
            let r = c.recv().await.expect("second");
            c.reply(r.header.call_id, r.body, vec![]).await;
            let _ = c.recv().await;
        });
        let conn = Connection::connect(&addr, &ConnectOptions::default())
            .await
            .expect("connect");
        let err = echo_call(&conn, "Busy", b"x").await.expect_err("busy");
        match &err {
            Error::Rpc {
                addr: a,
                method,
                code,
                message,
            } => {
                assert_eq!(a, &addr);
                assert_eq!(method, "test.Echo.Busy");
                assert_eq!(*code, RpcErrorCode::ServerTooBusy);
                assert_eq!(message, "queue full");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(err.retry_action(), RetryAction::BackoffAndRetry);
        echo_call(&conn, "Ok", b"y").await.expect("second call");
    });
}

#[test]
fn in_flight_calls_all_fail_with_the_same_error_when_the_server_goes_away() {
    runtime().block_on(async {
        let (l, addr) = listener().await;
        tokio::spawn(async move {
            let mut c = MockConn::accept(&l, Duration::ZERO).await;
            for _ in 0..3 {
                c.recv().await.expect("request");
            }
            // Drop the socket with three calls unanswered.
        });
        let conn = Connection::connect(&addr, &ConnectOptions::default())
            .await
            .expect("connect");
        let calls = (0..3).map(|_| echo_call(&conn, "M", b""));
        let results = futures::future::join_all(calls).await;
        let reasons: Vec<String> = results
            .into_iter()
            .map(|r| match r {
                Err(Error::ConnectionClosed { addr: a, reason }) => {
                    assert_eq!(a, addr);
                    reason
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert!(reasons.iter().all(|r| r == &reasons[0]), "{reasons:?}");
        tokio::time::timeout(Duration::from_secs(5), conn.closed())
            .await
            .expect("closed signal");
        assert!(conn.is_closed());
        assert_eq!(conn.close_reason().as_deref(), Some(reasons[0].as_str()));
        // Later calls fail at once.
        let err = echo_call(&conn, "M", b"").await.expect_err("closed");
        assert!(matches!(err, Error::ConnectionClosed { .. }), "{err:?}");
        assert_eq!(err.retry_action(), RetryAction::BackoffAndRetry);
    });
}

#[test]
fn deadline_fails_one_call_and_keeps_the_connection() {
    runtime().block_on(async {
        let (l, addr) = listener().await;
        tokio::spawn(async move {
            let mut c = MockConn::accept(&l, Duration::ZERO).await;
            let slow = c.recv().await.expect("slow");
            let fast = c.recv().await.expect("fast");
            c.reply(fast.header.call_id, fast.body, vec![]).await;
            // Answer the first call only after its caller gave up.
            tokio::time::sleep(Duration::from_millis(500)).await;
            c.reply(slow.header.call_id, slow.body, vec![]).await;
            let third = c.recv().await.expect("third");
            c.reply(third.header.call_id, third.body, vec![]).await;
            let _ = c.recv().await;
        });
        let conn = Connection::connect(&addr, &ConnectOptions::default())
            .await
            .expect("connect");
        let req = tserver::ScannerKeepAliveRequestPb {
            scanner_id: b"slow".to_vec(),
        };
        let short = CallOptions::with_timeout(Duration::from_millis(200));
        let slow = conn.call_raw("test.Echo", "Slow", &req, &short);
        let fast = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            echo_call(&conn, "Fast", b"fast").await
        };
        let (slow, fast) = tokio::join!(slow, fast);
        let err = slow.expect_err("deadline");
        match &err {
            Error::TimedOut { operation, .. } => {
                assert!(operation.contains("test.Echo.Slow") && operation.contains(&addr))
            }
            other => panic!("unexpected {other:?}"),
        }
        fast.expect("fast call");
        // The late answer to the abandoned call is ignored.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!conn.is_closed());
        echo_call(&conn, "Third", b"3").await.expect("third call");
    });
}

#[test]
fn pool_shares_one_connect_and_survives_caller_timeouts() {
    runtime().block_on(async {
        let (l, addr) = listener().await;
        let accepts = Arc::new(AtomicUsize::new(0));
        let counted = accepts.clone();
        tokio::spawn(async move {
            loop {
                // Slow negotiation: callers pile up on the pending connect.
                let mut c = MockConn::accept(&l, Duration::from_millis(400)).await;
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    while let Some(r) = c.recv().await {
                        if r.header
                            .remote_method
                            .as_ref()
                            .map(|m| m.method_name.as_str())
                            == Some("Close")
                        {
                            return; // drops the socket
                        }
                        c.reply(r.header.call_id, r.body, vec![]).await;
                    }
                });
            }
        });
        let pool = ConnectionPool::new(ConnectOptions::default());

        // A caller with a short deadline gives up while connecting...
        let err = pool
            .call::<Ping>(
                &addr,
                &PingRequestPb {},
                &CallOptions::with_timeout(Duration::from_millis(100)),
            )
            .await
            .expect_err("deadline while connecting");
        assert!(matches!(err, Error::TimedOut { .. }), "{err:?}");
        assert!(pool.contains(&addr), "the connect keeps going");

        // ...and twenty concurrent callers share that same connect.
        let gets = (0..20).map(|_| pool.get(&addr));
        let conns: Vec<Connection> = futures::future::join_all(gets)
            .await
            .into_iter()
            .map(|r| r.expect("get"))
            .collect();
        assert!(conns.iter().all(|c| c.ptr_eq(&conns[0])));
        assert_eq!(settled_count(&accepts, 1).await, 1);
        echo_call(&conns[0], "M", b"x").await.expect("call");

        // When the connection dies, the pool forgets it and reconnects.
        let first = conns[0].clone();
        drop(conns);
        let _ = echo_call(&first, "Close", b"").await;
        tokio::time::timeout(Duration::from_secs(5), first.closed())
            .await
            .expect("closed");
        for _ in 0..50 {
            if !pool.contains(&addr) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!pool.contains(&addr), "closed connection evicted");
        let second = pool.get(&addr).await.expect("reconnect");
        assert!(!second.ptr_eq(&first));
        assert_eq!(settled_count(&accepts, 2).await, 2);
        echo_call(&second, "M", b"y")
            .await
            .expect("call on new connection");
    });
}

/// The counter once it reaches `at_least` (or after 2 s). The mock counts a
/// connection after its side of the handshake returns, which can be just
/// after the client's side finished.
async fn settled_count(counter: &AtomicUsize, at_least: usize) -> usize {
    for _ in 0..200 {
        if counter.load(Ordering::SeqCst) >= at_least {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    counter.load(Ordering::SeqCst)
}

/// A server that answers NEGOTIATE with `answer` and then hangs up.
async fn refusing_server(answer: Frame<ResponseHeader>) -> String {
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        let (mut stream, _) = l.accept().await.expect("accept");
        let mut preamble = [0u8; 7];
        stream.read_exact(&mut preamble).await.expect("preamble");
        let mut buf = BytesMut::new();
        loop {
            if let Some(f) = frame::decode::<RequestHeader>(&mut buf).expect("frame") {
                assert_eq!(f.header.call_id, -33);
                break;
            }
            stream.read_buf(&mut buf).await.expect("read");
        }
        let mut out = BytesMut::new();
        frame::encode(&answer, &mut out).expect("encode");
        stream.write_all(&out).await.expect("write");
    });
    addr
}

#[test]
fn negotiation_refusals_are_clear_errors() {
    runtime().block_on(async {
        // The server refuses outright (e.g. encryption required).
        let status = ErrorStatusPb {
            message: "client does not support required TLS encryption".into(),
            code: Some(RpcErrorCodePb::FatalUnauthorized as i32),
            unsupported_feature_flags: vec![],
        };
        let addr = refusing_server(Frame::new(
            response_header(-33, true),
            status.encode_to_vec(),
        ))
        .await;
        let err = Connection::connect(&addr, &ConnectOptions::default())
            .await
            .expect_err("refused");
        assert!(
            matches!(&err, Error::Rpc { code: RpcErrorCode::FatalUnauthorized, addr: a, .. } if a == &addr),
            "{err:?}"
        );
        assert!(err.to_string().contains("required TLS"), "{err}");

        // A Kerberos-only server: no PLAIN on offer.
        let answer = NegotiatePb {
            step: NegotiateStep::Negotiate as i32,
            sasl_mechanisms: vec![SaslMechanism {
                mechanism: "GSSAPI".into(),
            }],
            ..Default::default()
        };
        let addr =
            refusing_server(Frame::new(response_header(-33, false), answer.encode_to_vec())).await;
        let err = Connection::connect(&addr, &ConnectOptions::default())
            .await
            .expect_err("no PLAIN");
        assert!(matches!(&err, Error::Authentication { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&addr) && text.contains("GSSAPI") && text.contains("Kerberos"),
            "{text}"
        );

        // TLS required by us, not offered by the server.
        let answer = NegotiatePb {
            step: NegotiateStep::Negotiate as i32,
            sasl_mechanisms: vec![SaslMechanism {
                mechanism: "PLAIN".into(),
            }],
            ..Default::default()
        };
        let addr =
            refusing_server(Frame::new(response_header(-33, false), answer.encode_to_vec())).await;
        let err = Connection::connect(&addr, &opts(TlsPolicy::Required))
            .await
            .expect_err("no TLS");
        assert!(matches!(&err, Error::Tls { addr: a, .. } if a == &addr), "{err:?}");
    });
}
