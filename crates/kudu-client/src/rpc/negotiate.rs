//! Connection negotiation: a one-shot step that turns a freshly connected
//! socket into a stream ready for RPC calls.
//!
//! [`negotiate`] walks the steps of KRPC negotiation
//! (docs/kudu-protocol.md#negotiation, apache/kudu `docs/design-docs/rpc.md`,
//! "Negotiation"):
//!
//! 1. **Preamble**: `hrpc`, version 9, two zero bytes.
//! 2. **NEGOTIATE**: both sides list their features (`TLS` if we may use it)
//!    and authentication types; the server picks one (we only offer SASL).
//! 3. **TLS handshake**, only when both sides list `TLS`: the TLS records
//!    travel inside `NegotiatePB.tls_handshake` until the handshake is done,
//!    after which every byte on the socket is TLS.
//! 4. **SASL PLAIN**: `SASL_INITIATE` with `\0user\0` (empty password); the
//!    server answers `SASL_SUCCESS`.
//! 5. **Connection context** (call id -3), which the server never answers.
//!
//! Every negotiation message is an ordinary frame with call id -33. The
//! caller bounds the whole walk with a timeout (servers allow 3 s).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::frame::{self, ResponseFrame, PREAMBLE};
use super::tls::{Handshake, TlsStream};
use crate::error::{Error, Result, RpcErrorCode};
use crate::pb::rpc::authentication_type_pb::{self, Type as AuthnType};
use crate::pb::rpc::negotiate_pb::{NegotiateStep, SaslMechanism};
use crate::pb::rpc::{
    AuthenticationTypePb, ConnectionContextPb, ErrorStatusPb, NegotiatePb, RequestHeader,
    RpcFeatureFlag, UserInformationPb,
};

/// Call id of every negotiation frame.
const NEGOTIATION_CALL_ID: i32 = -33;
/// Call id of the connection context frame.
const CONNECTION_CONTEXT_CALL_ID: i32 = -3;

/// Whether to encrypt the connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsPolicy {
    /// Never offer TLS. Servers with `--rpc_encryption=required` refuse.
    Disabled,
    /// Offer TLS and use it whenever the server offers it too (the default,
    /// like Kudu's own clients).
    #[default]
    Optional,
    /// Fail unless the connection ends up encrypted.
    Required,
}

/// What negotiation needs to know.
#[derive(Debug, Clone)]
pub struct NegotiateOptions {
    /// SASL PLAIN user name.
    pub user: String,
    /// Whether to encrypt.
    pub tls: TlsPolicy,
}

impl Default for NegotiateOptions {
    fn default() -> Self {
        NegotiateOptions {
            user: default_user(),
            tls: TlsPolicy::default(),
        }
    }
}

/// The OS user (`$USER`), or `ferry` when unset. SASL PLAIN servers accept
/// any name; it shows up in their logs and scanner ownership.
pub fn default_user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "ferry".to_owned())
}

/// A negotiated stream: plaintext or TLS over the original socket.
#[derive(Debug)]
pub enum RpcStream<S> {
    /// The server or the policy did not want TLS.
    Plain(S),
    /// Every byte is a TLS record.
    Tls(Box<TlsStream<S>>),
}

impl<S> RpcStream<S> {
    /// Whether the stream is encrypted.
    pub fn is_tls(&self) -> bool {
        matches!(self, RpcStream::Tls(_))
    }

    /// TLS version and cipher suite, if encrypted.
    pub fn tls_description(&self) -> Option<String> {
        match self {
            RpcStream::Plain(_) => None,
            RpcStream::Tls(t) => Some(t.describe()),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RpcStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            RpcStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            RpcStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RpcStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            RpcStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            RpcStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            RpcStream::Plain(s) => Pin::new(s).poll_flush(cx),
            RpcStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            RpcStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            RpcStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The result of a successful negotiation.
#[derive(Debug)]
pub struct Negotiated<S> {
    /// The stream to run calls on.
    pub stream: RpcStream<S>,
    /// Bytes already read past the end of negotiation (normally empty);
    /// the connection's reader must start with them.
    pub read_buf: BytesMut,
    /// Connection features the server advertised (`RpcFeatureFlag`s).
    pub server_features: Vec<i32>,
}

/// Negotiates a KRPC connection over `io`, a freshly connected socket to
/// `addr` (used in errors and as the TLS server name).
// Long on purpose: the steps run in protocol order on one stream, each a
// few lines; split up, the order would be spread over several functions.
pub async fn negotiate<S>(mut io: S, addr: &str, opts: &NegotiateOptions) -> Result<Negotiated<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut rbuf = BytesMut::with_capacity(4096);

    // Steps 1 and 2: preamble and NEGOTIATE go out in one write.
    let offer_tls = opts.tls != TlsPolicy::Disabled;
    let mut features = vec![RpcFeatureFlag::ApplicationFeatureFlags as i32];
    if offer_tls {
        // TLS_AUTHENTICATION_ONLY is never offered: loopback connections
        // get encrypted too, which keeps one code path.
        features.push(RpcFeatureFlag::Tls as i32);
    }
    let hello = NegotiatePb {
        supported_features: features,
        step: NegotiateStep::Negotiate as i32,
        sasl_mechanisms: vec![plain_mechanism()],
        authn_types: vec![AuthenticationTypePb {
            r#type: Some(AuthnType::Sasl(authentication_type_pb::Sasl {})),
        }],
        ..Default::default()
    };
    let mut out = BytesMut::from(&PREAMBLE[..]);
    encode_frame(NEGOTIATION_CALL_ID, &hello, &mut out, addr)?;
    write_all(&mut io, &out, addr).await?;

    let answer = recv_negotiate(&mut io, &mut rbuf, addr).await?;
    expect_step(&answer, NegotiateStep::Negotiate, addr)?;
    check_authn_choice(&answer, addr)?;
    let server_tls = answer
        .supported_features
        .contains(&(RpcFeatureFlag::Tls as i32));
    if opts.tls == TlsPolicy::Required && !server_tls {
        return Err(Error::Tls {
            addr: addr.to_owned(),
            message: "TLS is required but the server does not offer it \
                      (is --rpc_encryption=disabled on the server?)"
                .into(),
        });
    }

    // Step 3: the tunnelled TLS handshake, then wrap the socket.
    let (mut stream, mut rbuf) = if offer_tls && server_tls {
        let hs = tls_handshake(&mut io, &mut rbuf, addr).await?;
        let tls = hs.into_stream(io, &rbuf).map_err(|e| tls_error(addr, e))?;
        (RpcStream::Tls(Box::new(tls)), BytesMut::with_capacity(4096))
    } else {
        (RpcStream::Plain(io), rbuf)
    };

    // Step 4: SASL PLAIN (RFC 4616: authzid \0 authcid \0 password).
    let mut token = Vec::with_capacity(opts.user.len() + 2);
    token.push(0);
    token.extend_from_slice(opts.user.as_bytes());
    token.push(0);
    let initiate = NegotiatePb {
        step: NegotiateStep::SaslInitiate as i32,
        token: Some(token),
        sasl_mechanisms: vec![plain_mechanism()],
        ..Default::default()
    };
    send_negotiate(&mut stream, &initiate, addr).await?;
    let reply = recv_negotiate(&mut stream, &mut rbuf, addr).await?;
    expect_step(&reply, NegotiateStep::SaslSuccess, addr)?;

    // Step 5: connection context; no reply comes, calls may follow at once.
    let context = ConnectionContextPb {
        deprecated_user_info: Some(UserInformationPb {
            effective_user: None,
            real_user: opts.user.clone(),
        }),
        encoded_nonce: None,
    };
    let mut out = BytesMut::new();
    encode_frame(CONNECTION_CONTEXT_CALL_ID, &context, &mut out, addr)?;
    write_all(&mut stream, &out, addr).await?;

    tracing::debug!(addr, tls = stream.is_tls(), "negotiated connection");
    Ok(Negotiated {
        stream,
        read_buf: rbuf,
        server_features: answer.supported_features,
    })
}

/// Runs the TLS handshake inside TLS_HANDSHAKE negotiation messages.
async fn tls_handshake<S>(io: &mut S, rbuf: &mut BytesMut, addr: &str) -> Result<Handshake>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut hs = Handshake::new(addr).map_err(|e| tls_error(addr, e))?;
    // The client speaks first: ClientHello.
    let mut out = hs.take_output();
    loop {
        send_negotiate(io, &tls_message(out), addr).await?;
        let reply = recv_negotiate(io, rbuf, addr).await?;
        expect_step(&reply, NegotiateStep::TlsHandshake, addr)?;
        let data = reply.tls_handshake.unwrap_or_default();
        if data.is_empty() {
            return Err(negotiation_error(
                addr,
                "server sent a TLS_HANDSHAKE message without TLS data",
            ));
        }
        hs.feed(&data).map_err(|e| tls_error(addr, e))?;
        out = hs.take_output();
        if hs.is_done() {
            // TLS 1.3: our Finished is still to go. Send it and do not wait
            // for an answer; the server has nothing more to say until SASL.
            // (TLS 1.2 ends with the server's Finished: nothing left here.)
            if !out.is_empty() {
                send_negotiate(io, &tls_message(out), addr).await?;
            }
            tracing::debug!(addr, tls = %hs.describe(), "TLS handshake done");
            return Ok(hs);
        }
        if out.is_empty() {
            // The server answered a whole flight; rustls wanting more
            // without having anything to say means the exchange is stuck.
            return Err(tls_error(
                addr,
                "handshake stalled: server data did not complete a TLS flight",
            ));
        }
    }
}

fn tls_message(data: Vec<u8>) -> NegotiatePb {
    NegotiatePb {
        step: NegotiateStep::TlsHandshake as i32,
        tls_handshake: Some(data),
        ..Default::default()
    }
}

fn plain_mechanism() -> SaslMechanism {
    SaslMechanism {
        mechanism: "PLAIN".into(),
    }
}

/// We offered only SASL; the server must pick it and offer PLAIN.
fn check_authn_choice(answer: &NegotiatePb, addr: &str) -> Result<()> {
    // No authn_types at all: a pre-1.3 server, which means SASL.
    let sasl = answer.authn_types.is_empty()
        || answer
            .authn_types
            .iter()
            .any(|t| matches!(t.r#type, Some(AuthnType::Sasl(_))));
    if !sasl {
        return Err(negotiation_error(
            addr,
            format!(
                "server chose an authentication type ferry did not offer: {:?}",
                answer.authn_types
            ),
        ));
    }
    if !answer
        .sasl_mechanisms
        .iter()
        .any(|m| m.mechanism.eq_ignore_ascii_case("PLAIN"))
    {
        let offered: Vec<&str> = answer
            .sasl_mechanisms
            .iter()
            .map(|m| m.mechanism.as_str())
            .collect();
        return Err(negotiation_error(
            addr,
            format!(
                "server does not accept SASL PLAIN (it offers {offered:?}); \
                 Kerberos-only clusters are not supported"
            ),
        ));
    }
    Ok(())
}

fn expect_step(msg: &NegotiatePb, want: NegotiateStep, addr: &str) -> Result<()> {
    if msg.step == want as i32 {
        return Ok(());
    }
    let got = NegotiateStep::try_from(msg.step)
        .map(|s| s.as_str_name().to_owned())
        .unwrap_or_else(|_| format!("unknown step {}", msg.step));
    Err(negotiation_error(
        addr,
        format!("expected {} from the server, got {got}", want.as_str_name()),
    ))
}

fn encode_frame(call_id: i32, body: &impl Message, out: &mut BytesMut, addr: &str) -> Result<()> {
    let header = RequestHeader {
        call_id,
        ..Default::default()
    };
    frame::encode_message(&header, body, out).map_err(|e| Error::Protocol {
        addr: addr.to_owned(),
        message: e.to_string(),
    })
}

async fn send_negotiate<T>(io: &mut T, msg: &NegotiatePb, addr: &str) -> Result<()>
where
    T: AsyncWrite + Unpin,
{
    let mut out = BytesMut::new();
    encode_frame(NEGOTIATION_CALL_ID, msg, &mut out, addr)?;
    write_all(io, &out, addr).await
}

async fn write_all<T: AsyncWrite + Unpin>(io: &mut T, bytes: &[u8], addr: &str) -> Result<()> {
    let res = async {
        io.write_all(bytes).await?;
        io.flush().await
    }
    .await;
    res.map_err(|source| Error::Io {
        addr: addr.to_owned(),
        source,
    })
}

/// Reads the next negotiation answer; an `ErrorStatusPB` becomes
/// [`Error::Rpc`] so its code (e.g. FATAL_UNAUTHORIZED) is kept.
async fn recv_negotiate<T>(io: &mut T, rbuf: &mut BytesMut, addr: &str) -> Result<NegotiatePb>
where
    T: AsyncRead + Unpin,
{
    let frame = recv_frame(io, rbuf, addr).await?;
    if frame.header.call_id != NEGOTIATION_CALL_ID {
        return Err(Error::Protocol {
            addr: addr.to_owned(),
            message: format!(
                "negotiation answer has call id {} instead of {NEGOTIATION_CALL_ID}",
                frame.header.call_id
            ),
        });
    }
    let protocol = |e: prost::DecodeError| Error::Protocol {
        addr: addr.to_owned(),
        message: format!("undecodable negotiation answer: {e}"),
    };
    if frame.header.is_error() {
        let status = ErrorStatusPb::decode(frame.body).map_err(protocol)?;
        return Err(Error::Rpc {
            addr: addr.to_owned(),
            method: "connection negotiation".into(),
            code: RpcErrorCode::from_i32(status.code.unwrap_or(0)),
            message: status.message,
        });
    }
    NegotiatePb::decode(frame.body).map_err(protocol)
}

async fn recv_frame<T>(io: &mut T, rbuf: &mut BytesMut, addr: &str) -> Result<ResponseFrame>
where
    T: AsyncRead + Unpin,
{
    loop {
        let decoded = frame::decode(rbuf).map_err(|e| Error::Protocol {
            addr: addr.to_owned(),
            message: e.to_string(),
        })?;
        if let Some(frame) = decoded {
            return Ok(frame);
        }
        let n = io.read_buf(rbuf).await.map_err(|source| Error::Io {
            addr: addr.to_owned(),
            source,
        })?;
        if n == 0 {
            return Err(negotiation_error(
                addr,
                "server closed the connection during negotiation (an address outside \
                 the server's --trusted_subnets, or a server requiring TLS, can cause this)",
            ));
        }
    }
}

fn negotiation_error(addr: &str, message: impl Into<String>) -> Error {
    Error::Negotiation {
        addr: addr.to_owned(),
        message: message.into(),
    }
}

fn tls_error(addr: &str, e: impl std::fmt::Display) -> Error {
    Error::Tls {
        addr: addr.to_owned(),
        message: e.to_string(),
    }
}
