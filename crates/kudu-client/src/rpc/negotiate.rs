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
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::frame::PREAMBLE;
use super::tls::{Handshake, TlsStream};
#[cfg(feature = "kerberos")]
use crate::security::kerberos::Kerberos;
use crate::security::token::{TokenCredentials, TokenStore};
use crate::error::{Error, Result};
use crate::pb::rpc::authentication_type_pb::{self, Type as AuthnType};
use crate::pb::rpc::negotiate_pb::{NegotiateStep, SaslMechanism};
use crate::pb::rpc::{
    AuthenticationTypePb, ConnectionContextPb, NegotiatePb,
    RpcFeatureFlag, UserInformationPb,
};

#[cfg(feature = "kerberos")]
mod gssapi;
mod messages;
mod user;

use messages::{encode_frame, recv_negotiate, send_negotiate, write_all};

/// Call id of every negotiation frame.
const NEGOTIATION_CALL_ID: i32 = -33;
/// Call id of the connection context frame.
const CONNECTION_CONTEXT_CALL_ID: i32 = -3;

/// Whether to encrypt the connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
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

/// What negotiation needs to know: build it from `default()` and the
/// setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NegotiateOptions {
    /// SASL PLAIN user name (default: the OS user the process runs as, as
    /// Kudu's own clients send).
    pub user: String,
    /// Whether to encrypt.
    pub tls: TlsPolicy,
    /// A Kerberos login: authenticate with SASL GSSAPI wherever the server
    /// offers it (PLAIN otherwise). `None`: SASL PLAIN as `user`.
    #[cfg(feature = "kerberos")]
    pub kerberos: Option<Arc<Kerberos>>,
    /// The client's authentication tokens, set by
    /// [`KuduClient`](crate::KuduClient) itself when it logs in with
    /// Kerberos.
    pub(crate) tokens: Option<Arc<TokenStore>>,
}

impl Default for NegotiateOptions {
    fn default() -> Self {
        NegotiateOptions {
            user: user::os_user(),
            tls: TlsPolicy::default(),
            #[cfg(feature = "kerberos")]
            kerberos: None,
            tokens: None,
        }
    }
}

impl NegotiateOptions {
    /// Sends `user` as the SASL PLAIN user name.
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = user.into();
        self
    }

    /// Encrypts connections as `tls` says.
    pub fn tls(mut self, tls: TlsPolicy) -> Self {
        self.tls = tls;
        self
    }

    /// Whether connections authenticate with Kerberos.
    pub(crate) fn uses_kerberos(&self) -> bool {
        #[cfg(feature = "kerberos")]
        return self.kerberos.is_some();
        #[cfg(not(feature = "kerberos"))]
        false
    }
}

/// What one connect attempt may use; a second attempt changes these.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Attempt {
    /// Do not offer the authentication token (a server refused it).
    pub(crate) no_token: bool,
    /// Acquire Kerberos credentials again (a ticket expired).
    pub(crate) fresh_credentials: bool,
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
pub async fn negotiate<S>(io: S, addr: &str, opts: &NegotiateOptions) -> Result<Negotiated<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    negotiate_attempt(io, addr, opts, Attempt::default()).await
}

/// How the client authenticates on one connection.
enum Authn {
    Plain,
    #[cfg(feature = "kerberos")]
    Gssapi(Arc<Kerberos>),
    Token(TokenCredentials),
}

/// [`negotiate`] with what this attempt may use.
// Long on purpose: the steps run in protocol order on one stream, each a
// few lines; split up, the order would be spread over several functions.
pub(crate) async fn negotiate_attempt<S>(
    mut io: S,
    addr: &str,
    opts: &NegotiateOptions,
    attempt: Attempt,
) -> Result<Negotiated<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut rbuf = BytesMut::with_capacity(4096);
    let token = match (&opts.tokens, attempt.no_token) {
        (Some(store), false) => store.for_server(addr),
        _ => None,
    };

    // Steps 1 and 2: preamble and NEGOTIATE go out in one write.
    let offer_tls = opts.tls != TlsPolicy::Disabled;
    let mut features = vec![RpcFeatureFlag::ApplicationFeatureFlags as i32];
    if offer_tls {
        // TLS_AUTHENTICATION_ONLY is never offered: loopback connections
        // get encrypted too, which keeps one code path.
        features.push(RpcFeatureFlag::Tls as i32);
    }
    let mut authn_types = vec![AuthenticationTypePb {
        r#type: Some(AuthnType::Sasl(authentication_type_pb::Sasl {})),
    }];
    if token.is_some() && offer_tls {
        authn_types.push(AuthenticationTypePb {
            r#type: Some(AuthnType::Token(authentication_type_pb::Token {})),
        });
    }
    let mut mechanisms = vec![mechanism("PLAIN")];
    if opts.uses_kerberos() {
        mechanisms.insert(0, mechanism("GSSAPI"));
    }
    let hello = NegotiatePb {
        supported_features: features,
        step: NegotiateStep::Negotiate as i32,
        sasl_mechanisms: mechanisms,
        authn_types,
        ..Default::default()
    };
    let mut out = BytesMut::from(&PREAMBLE[..]);
    encode_frame(NEGOTIATION_CALL_ID, &hello, &mut out, addr)?;
    write_all(&mut io, &out, addr).await?;

    let answer = recv_negotiate(&mut io, &mut rbuf, addr).await?;
    expect_step(&answer, NegotiateStep::Negotiate, addr)?;
    let authn = choose_authn(&answer, opts, token, addr)?;
    let server_tls = answer
        .supported_features
        .contains(&(RpcFeatureFlag::Tls as i32));
    let must_tls = opts.tls == TlsPolicy::Required || matches!(authn, Authn::Token(_));
    if must_tls && !server_tls {
        return Err(Error::Tls {
            addr: addr.to_owned(),
            message: "TLS is required but the server does not offer it \
                      (is --rpc_encryption=disabled on the server?)"
                .into(),
        });
    }

    // Step 3: the tunnelled TLS handshake, then wrap the socket. A token
    // only goes to a server whose certificate the cluster's CA signed.
    #[cfg_attr(not(feature = "kerberos"), allow(unused_variables))]
    let (mut stream, mut rbuf, peer_cert) = if offer_tls && server_tls {
        let hs = match &authn {
            Authn::Token(t) => Handshake::with_config(addr, t.tls.clone()),
            _ => Handshake::new(addr),
        }
        .map_err(|e| tls_error(addr, e))?;
        let hs = tls_handshake(&mut io, &mut rbuf, hs, addr).await?;
        // Kerberos checks the server's channel bindings against it.
        let cert = hs.peer_certificate();
        let tls = hs.into_stream(io, &rbuf).map_err(|e| tls_error(addr, e))?;
        (
            RpcStream::Tls(Box::new(tls)),
            BytesMut::with_capacity(4096),
            cert,
        )
    } else {
        (RpcStream::Plain(io), rbuf, None)
    };

    // Step 4: authentication.
    let encoded_nonce = match authn {
        Authn::Plain => {
            // RFC 4616: authzid \0 authcid \0 password.
            let mut token = Vec::with_capacity(opts.user.len() + 2);
            token.push(0);
            token.extend_from_slice(opts.user.as_bytes());
            token.push(0);
            let initiate = NegotiatePb {
                step: NegotiateStep::SaslInitiate as i32,
                token: Some(token),
                sasl_mechanisms: vec![mechanism("PLAIN")],
                ..Default::default()
            };
            send_negotiate(&mut stream, &initiate, addr).await?;
            let reply = recv_negotiate(&mut stream, &mut rbuf, addr).await?;
            expect_step(&reply, NegotiateStep::SaslSuccess, addr)?;
            None
        }
        #[cfg(feature = "kerberos")]
        Authn::Gssapi(krb) => {
            gssapi::authenticate(
                &mut stream,
                &mut rbuf,
                addr,
                krb,
                peer_cert,
                attempt.fresh_credentials,
            )
            .await?
        }
        Authn::Token(t) => {
            let exchange = NegotiatePb {
                step: NegotiateStep::TokenExchange as i32,
                authn_token: Some(t.token),
                ..Default::default()
            };
            send_negotiate(&mut stream, &exchange, addr).await?;
            let reply = recv_negotiate(&mut stream, &mut rbuf, addr).await?;
            expect_step(&reply, NegotiateStep::TokenExchange, addr)?;
            None
        }
    };

    // Step 5: connection context; no reply comes, calls may follow at once.
    let context = ConnectionContextPb {
        deprecated_user_info: Some(UserInformationPb {
            effective_user: None,
            real_user: opts.user.clone(),
        }),
        encoded_nonce,
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
async fn tls_handshake<S>(
    io: &mut S,
    rbuf: &mut BytesMut,
    mut hs: Handshake,
    addr: &str,
) -> Result<Handshake>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
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

fn mechanism(name: &str) -> SaslMechanism {
    SaslMechanism {
        mechanism: name.into(),
    }
}

/// What the server chose: the token if we offered one and it took it,
/// else SASL with GSSAPI when both sides have it, else PLAIN.
fn choose_authn(
    answer: &NegotiatePb,
    opts: &NegotiateOptions,
    token: Option<TokenCredentials>,
    addr: &str,
) -> Result<Authn> {
    let chose = |want: fn(&AuthnType) -> bool| {
        answer
            .authn_types
            .iter()
            .any(|t| t.r#type.as_ref().is_some_and(want))
    };
    if let Some(token) = token {
        if chose(|t| matches!(t, AuthnType::Token(_))) {
            return Ok(Authn::Token(token));
        }
    }
    // No authn_types at all: a pre-1.3 server, which means SASL.
    if !answer.authn_types.is_empty() && !chose(|t| matches!(t, AuthnType::Sasl(_))) {
        return Err(negotiation_error(
            addr,
            format!(
                "server chose an authentication type the client did not offer: {:?}",
                answer.authn_types
            ),
        ));
    }
    let offers = |name: &str| {
        answer
            .sasl_mechanisms
            .iter()
            .any(|m| m.mechanism.eq_ignore_ascii_case(name))
    };
    #[cfg(feature = "kerberos")]
    if let Some(krb) = &opts.kerberos {
        if offers("GSSAPI") {
            return Ok(Authn::Gssapi(krb.clone()));
        }
    }
    if offers("PLAIN") {
        return Ok(Authn::Plain);
    }
    let offered: Vec<&str> = answer
        .sasl_mechanisms
        .iter()
        .map(|m| m.mechanism.as_str())
        .collect();
    let hint = if opts.uses_kerberos() {
        ""
    } else if cfg!(feature = "kerberos") {
        "; the cluster requires Kerberos: configure a principal and keytab"
    } else {
        "; the cluster requires Kerberos, which this build of the client lacks \
         (feature `kerberos`)"
    };
    Err(Error::Authentication {
        addr: addr.to_owned(),
        message: format!(
            "the server accepts none of the SASL mechanisms offered (it offers {offered:?}){hint}"
        ),
    })
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
