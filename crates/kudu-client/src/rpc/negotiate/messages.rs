//! Negotiation messages on the wire: each one an ordinary frame with call
//! id -33 (the connection context: -3), written and read before the
//! connection carries calls.

use bytes::BytesMut;
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::super::frame::{self, ResponseFrame};
use super::{negotiation_error, NEGOTIATION_CALL_ID};
use crate::error::{Error, Result, RpcErrorCode};
use crate::pb::rpc::{ErrorStatusPb, NegotiatePb, RequestHeader};

pub(super) fn encode_frame(call_id: i32, body: &impl Message, out: &mut BytesMut, addr: &str) -> Result<()> {
    let header = RequestHeader {
        call_id,
        ..Default::default()
    };
    frame::encode_message(&header, body, out).map_err(|e| Error::Protocol {
        addr: addr.to_owned(),
        message: e.to_string(),
    })
}

pub(super) async fn send_negotiate<T>(io: &mut T, msg: &NegotiatePb, addr: &str) -> Result<()>
where
    T: AsyncWrite + Unpin,
{
    let mut out = BytesMut::new();
    encode_frame(NEGOTIATION_CALL_ID, msg, &mut out, addr)?;
    write_all(io, &out, addr).await
}

pub(super) async fn write_all<T: AsyncWrite + Unpin>(io: &mut T, bytes: &[u8], addr: &str) -> Result<()> {
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
pub(super) async fn recv_negotiate<T>(io: &mut T, rbuf: &mut BytesMut, addr: &str) -> Result<NegotiatePb>
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
