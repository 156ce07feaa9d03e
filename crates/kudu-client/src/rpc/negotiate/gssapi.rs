//! Step 4 of negotiation with Kerberos: the SASL GSSAPI exchange
//! (`SASL_INITIATE`, `SASL_CHALLENGE`/`SASL_RESPONSE` rounds, then
//! `SASL_SUCCESS`), the channel-binding check and the nonce. The mechanism
//! itself lives in `security::kerberos`; this moves its tokens in
//! negotiation messages, running the GSSAPI calls on a blocking thread.

use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{expect_step, mechanism, recv_negotiate, send_negotiate};
use crate::error::{Error, Result};
use crate::pb::rpc::negotiate_pb::NegotiateStep;
use crate::pb::rpc::NegotiatePb;
use crate::security::channel_binding;
use crate::security::kerberos::{Kerberos, KerberosError, SaslGssapi};

/// Authenticates with Kerberos; returns the encoded nonce for the
/// connection context, if the server sent one. `peer_cert` is the TLS
/// server certificate (DER) when the connection is encrypted: the server's
/// channel bindings must match it.
pub(super) async fn authenticate<T>(
    stream: &mut T,
    rbuf: &mut BytesMut,
    addr: &str,
    krb: Arc<Kerberos>,
    peer_cert: Option<Vec<u8>>,
    fresh_credentials: bool,
) -> Result<Option<Vec<u8>>>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let host = host_of(addr).to_owned();
    let (mut mech, first) =
        blocking(addr, move || krb.start(&host, fresh_credentials)).await?;
    let initiate = NegotiatePb {
        step: NegotiateStep::SaslInitiate as i32,
        token: Some(first),
        sasl_mechanisms: vec![mechanism("GSSAPI")],
        ..Default::default()
    };
    send_negotiate(stream, &initiate, addr).await?;
    loop {
        let msg = recv_negotiate(stream, rbuf, addr).await?;
        if msg.step == NegotiateStep::SaslChallenge as i32 {
            let challenge = msg.token.unwrap_or_default();
            let (m, answer) = blocking(addr, move || {
                let r = mech.respond(&challenge);
                Ok((mech, r))
            })
            .await?;
            mech = m;
            let response = NegotiatePb {
                step: NegotiateStep::SaslResponse as i32,
                token: Some(answer.map_err(|e| auth_error(addr, e))?),
                ..Default::default()
            };
            send_negotiate(stream, &response, addr).await?;
            continue;
        }
        expect_step(&msg, NegotiateStep::SaslSuccess, addr)?;
        if let Some(cert) = &peer_cert {
            check_channel_bindings(&mut mech, cert, msg.channel_bindings.as_deref(), addr)?;
        }
        return match msg.nonce {
            Some(nonce) => Ok(Some(mech.encode(&nonce).map_err(|e| auth_error(addr, e))?)),
            None => Ok(None),
        };
    }
}

/// The server proves it is the TLS peer: its integrity-protected
/// `tls-server-end-point` hash must equal ours.
fn check_channel_bindings(
    mech: &mut SaslGssapi,
    cert: &[u8],
    received: Option<&[u8]>,
    addr: &str,
) -> Result<()> {
    let received = received.ok_or_else(|| Error::Authentication {
        addr: addr.to_owned(),
        message: "the server sent no channel bindings over TLS".into(),
    })?;
    let received = mech.decode(received).map_err(|e| auth_error(addr, e))?;
    let expected = channel_binding::server_end_point(cert).ok_or_else(|| Error::Authentication {
        addr: addr.to_owned(),
        message: "the server certificate's signature algorithm defines no channel binding".into(),
    })?;
    if received != expected {
        tracing::warn!(
            addr,
            "channel bindings do not match: a man in the middle may be relaying this connection"
        );
        return Err(Error::Authentication {
            addr: addr.to_owned(),
            message: "channel bindings do not match the TLS certificate".into(),
        });
    }
    Ok(())
}

/// Runs a GSSAPI call off the async threads.
async fn blocking<R, F>(addr: &str, f: F) -> Result<R>
where
    F: FnOnce() -> Result<R, KerberosError> + Send + 'static,
    R: Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(|e| auth_error(addr, e)),
        Err(e) => Err(Error::Authentication {
            addr: addr.to_owned(),
            message: format!("the Kerberos task failed: {e}"),
        }),
    }
}

fn auth_error(addr: &str, e: KerberosError) -> Error {
    Error::Authentication {
        addr: addr.to_owned(),
        message: e.message,
    }
}

/// `host` of `host:port` (IPv6 brackets removed): the service principal's
/// instance, `kudu/<host>`.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn service_host_is_the_address_without_port() {
        assert_eq!(host_of("127.0.0.1:7051"), "127.0.0.1");
        assert_eq!(host_of("kudu-m1.example.com:7051"), "kudu-m1.example.com");
        assert_eq!(host_of("[::1]:7051"), "::1");
        assert_eq!(host_of("host"), "host");
    }
}
