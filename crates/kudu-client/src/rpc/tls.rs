//! TLS for KRPC connections, on rustls.
//!
//! Kudu does not run TLS directly on the socket at first: the handshake is
//! tunnelled inside negotiation messages (`NegotiatePB.tls_handshake`), and
//! only once it is done do raw TLS records flow on the socket. So this
//! module has two halves:
//!
//! - `Handshake` drives a rustls client through in-memory buffers: bytes
//!   from the server's negotiation messages go in, bytes for the next
//!   negotiation message come out. `negotiate.rs` moves them.
//! - [`TlsStream`] then wraps the socket with the finished rustls session
//!   for everything after the handshake. (tokio-rustls cannot adopt a
//!   session whose handshake someone else drove, hence our own small
//!   stream type.)
//!
//! With SASL authentication the client does not verify the server's
//! certificate, exactly like Kudu's own clients (the Java client trusts
//! all, the C++ one uses VERIFY_NONE): the server's identity is not what
//! SASL PLAIN relies on. The verifier here still checks the handshake
//! signatures, so the peer must hold the key of the certificate it shows.
//!
//! With token authentication the certificate *is* verified, against the
//! cluster's CA certificates from the leader master (see
//! `security::token`): the chain and validity, not the host name. Kudu
//! issues server certificates for the host's name while clients often
//! address servers by IP, and Kudu's own clients do not check the name
//! either.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{ready, Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Plaintext bytes offered to rustls per read: a few TLS records.
const READ_CHUNK: usize = 64 * 1024;

/// The shared client configuration: ring crypto, TLS 1.2 and 1.3, no client
/// certificate, any server certificate accepted (see the module docs).
pub(crate) fn client_config() -> Result<Arc<ClientConfig>, rustls::Error> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, rustls::Error>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let verifier = Arc::new(AcceptAnyServerCert {
                provider: provider.clone(),
            });
            let config = ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

/// A configuration that verifies server certificates against `ca_certs`
/// (DER), ignoring only the host name (see the module docs).
pub(crate) fn verifying_config(ca_certs: &[Vec<u8>]) -> Result<Arc<ClientConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(crate::security::token::root_store(ca_certs)?);
    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| rustls::Error::General(format!("cluster CA certificates: {e}")))?;
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly { inner }))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Verifies the chain to the cluster's CA; a name mismatch alone is fine.
#[derive(Debug)]
struct ChainOnly {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The verifier checks the chain before the name, so a name error
        // means the chain itself verified.
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The name rustls is told the server has. It only affects SNI (never sent
/// for IP addresses) because certificates are not verified.
pub(crate) fn server_name(addr: &str) -> ServerName<'static> {
    let host = match addr.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    };
    ServerName::try_from(host.to_owned()).unwrap_or_else(|_| {
        // Any name will do: it is never checked against the certificate.
        ServerName::IpAddress(std::net::IpAddr::from([127, 0, 0, 1]).into())
    })
}

/// Accepts any server certificate but checks handshake signatures.
#[derive(Debug)]
struct AcceptAnyServerCert {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A TLS client handshake driven through memory buffers.
pub(crate) struct Handshake {
    conn: ClientConnection,
}

impl Handshake {
    /// Starts a handshake; [`Handshake::take_output`] then yields the
    /// ClientHello.
    pub(crate) fn new(addr: &str) -> Result<Self, rustls::Error> {
        Self::with_config(addr, client_config()?)
    }

    /// A handshake with a given configuration (a verifying one for tokens).
    pub(crate) fn with_config(addr: &str, config: Arc<ClientConfig>) -> Result<Self, rustls::Error> {
        let conn = ClientConnection::new(config, server_name(addr))?;
        Ok(Handshake { conn })
    }

    /// The server's certificate (DER), once the handshake is done.
    pub(crate) fn peer_certificate(&self) -> Option<Vec<u8>> {
        self.conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec())
    }

    /// Feeds bytes the server sent (one `tls_handshake` payload).
    pub(crate) fn feed(&mut self, mut data: &[u8]) -> Result<(), rustls::Error> {
        feed(&mut self.conn, &mut data)
    }

    /// Everything the engine wants to send now (possibly nothing).
    pub(crate) fn take_output(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        while self.conn.wants_write() {
            // Writing into a Vec cannot fail.
            if self.conn.write_tls(&mut out).is_err() {
                break;
            }
        }
        out
    }

    /// Whether the handshake has completed.
    pub(crate) fn is_done(&self) -> bool {
        !self.conn.is_handshaking()
    }

    /// The negotiated protocol version and cipher suite, for logs.
    pub(crate) fn describe(&self) -> String {
        describe(&self.conn)
    }

    /// Wraps `io` with the finished session. `leftover` is ciphertext
    /// already read off the socket past the last handshake message; it is
    /// handed to the session first so no record is lost.
    pub(crate) fn into_stream<S>(
        mut self,
        io: S,
        mut leftover: &[u8],
    ) -> Result<TlsStream<S>, rustls::Error> {
        feed(&mut self.conn, &mut leftover)?;
        Ok(TlsStream {
            io,
            conn: self.conn,
            shutting_down: false,
        })
    }
}

/// E.g. `TLSv1_3 TLS13_AES_128_GCM_SHA256`.
fn describe(conn: &ClientConnection) -> String {
    let version = conn
        .protocol_version()
        .map_or_else(|| "unknown version".to_owned(), |v| format!("{v:?}"));
    match conn.negotiated_cipher_suite() {
        Some(suite) => format!("{version} {:?}", suite.suite()),
        None => version,
    }
}

/// Pushes all of `data` through the session (rustls takes at most one
/// buffer's worth per `read_tls`, so loop).
fn feed(conn: &mut ClientConnection, data: &mut &[u8]) -> Result<(), rustls::Error> {
    while !data.is_empty() {
        conn.read_tls(data)
            .map_err(|e| rustls::Error::General(format!("TLS input rejected: {e}")))?;
        conn.process_new_packets()?;
    }
    Ok(())
}

/// A socket carrying TLS records after a tunnelled handshake.
///
/// Reading only reads the socket and writing only writes it, so the two
/// halves of a `tokio::io::split` never steal each other's wakeups.
pub struct TlsStream<S> {
    io: S,
    conn: ClientConnection,
    shutting_down: bool,
}

impl<S> TlsStream<S> {
    /// The protocol version and cipher suite in use, for humans.
    pub fn describe(&self) -> String {
        describe(&self.conn)
    }
}

impl<S> std::fmt::Debug for TlsStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("protocol", &self.conn.protocol_version())
            .finish_non_exhaustive()
    }
}

/// Adapts an async socket to the blocking `Read`/`Write` rustls expects,
/// turning `Pending` into `WouldBlock`.
struct SyncIo<'a, 'b, S> {
    io: &'a mut S,
    cx: &'a mut Context<'b>,
}

impl<S: AsyncRead + Unpin> Read for SyncIo<'_, '_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.io).poll_read(self.cx, &mut rb) {
            Poll::Ready(Ok(())) => Ok(rb.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl<S: AsyncWrite + Unpin> Write for SyncIo<'_, '_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match Pin::new(&mut *self.io).poll_flush(self.cx) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl<S: AsyncWrite + Unpin> TlsStream<S> {
    /// Writes queued ciphertext to the socket.
    fn poll_write_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.conn.wants_write() {
            let mut io = SyncIo {
                io: &mut self.io,
                cx,
            };
            match self.conn.write_tls(&mut io) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            // The caller may offer megabytes of spare capacity (a whole scan
            // frame); zero-filling all of it on every call cost 10 % of the
            // CPU. A TLS record holds at most 16 KiB of plaintext.
            let want = buf.remaining().min(READ_CHUNK);
            match this.conn.reader().read(buf.initialize_unfilled_to(want)) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Includes UnexpectedEof: the peer closed without close_notify.
                Err(e) => return Poll::Ready(Err(e)),
            }
            let mut io = SyncIo {
                io: &mut this.io,
                cx,
            };
            match this.conn.read_tls(&mut io) {
                // 0 tells rustls about EOF; the next `reader().read` reports it.
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
            if let Err(e) = this.conn.process_new_packets() {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // Drain earlier ciphertext first so buffered data stays bounded.
        ready!(this.poll_write_tls(cx))?;
        let n = this.conn.writer().write(buf)?;
        // Start sending now; poll_flush finishes if the socket is full.
        if let Poll::Ready(Err(e)) = this.poll_write_tls(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.writer().flush()?;
        ready!(this.poll_write_tls(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.shutting_down {
            this.conn.send_close_notify();
            this.shutting_down = true;
        }
        ready!(this.poll_write_tls(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
