//! The KRPC frame codec: pure functions from bytes to frames and back.
//!
//! Nothing here touches a socket. [`decode`] looks at a buffer the caller
//! filled and either takes one whole frame off its front, says it needs more
//! bytes (`Ok(None)`), or says the bytes can never become a frame
//! (`Err(FrameError)`). [`encode`] appends a frame to a buffer. The same
//! codec serves both directions (client requests, server responses), which
//! lets the tests round-trip every frame and lets a test server reuse it.
//!
//! # Layout
//!
//! After the 7-byte connection preamble ([`PREAMBLE`]), every frame in both
//! directions is:
//!
//! ```text
//! +----------------+-----------+-------------+-----------+----------------------------------+
//! | N: u32 BE      | H: varint | header      | M: varint | main region (M bytes)            |
//! | bytes to follow|           | (H bytes)   |           | body | sidecar 0 | sidecar 1 | .. |
//! +----------------+-----------+-------------+-----------+----------------------------------+
//!                  |<------------------------- N bytes ------------------------------------>|
//! ```
//!
//! The header is a `RequestHeader` (client to server) or `ResponseHeader`
//! (server to client). The body is the request/response protobuf (or
//! `ErrorStatusPB`, `NegotiatePB`, `ConnectionContextPB`). If the header
//! lists `sidecar_offsets`, offset *i* is where sidecar *i* starts inside the
//! main region; the body is everything before the first offset and each
//! sidecar runs to the next offset (the last one to the end of the region).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

use crate::pb::rpc::{RequestHeader, ResponseHeader};

/// The bytes a client sends once, right after connecting: magic `hrpc`,
/// protocol version 9, service class 0, auth protocol 0.
pub const PREAMBLE: [u8; 7] = *b"hrpc\x09\x00\x00";

/// Largest frame [`decode`] accepts. Servers cap messages at 50 MiB by
/// default (`--rpc_max_message_size`); leave some room above that.
pub const DEFAULT_MAX_FRAME_LEN: usize = 64 * 1024 * 1024;

/// Why a buffer can never become a frame. Either way the connection is
/// unusable: the byte stream has lost its framing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length prefix (or a frame being encoded) exceeds the limit.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLong {
        /// The frame's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The bytes inside the length prefix do not follow the layout.
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// The part of a frame header the codec needs: where the sidecars are.
pub trait FrameHeader: Message + Default + Clone {
    /// Offsets of the sidecars within the main region.
    fn sidecar_offsets(&self) -> &[u32];
    /// Replaces the sidecar offsets (used by [`encode`]).
    fn set_sidecar_offsets(&mut self, offsets: Vec<u32>);
}

impl FrameHeader for RequestHeader {
    fn sidecar_offsets(&self) -> &[u32] {
        &self.sidecar_offsets
    }
    fn set_sidecar_offsets(&mut self, offsets: Vec<u32>) {
        self.sidecar_offsets = offsets;
    }
}

impl FrameHeader for ResponseHeader {
    fn sidecar_offsets(&self) -> &[u32] {
        &self.sidecar_offsets
    }
    fn set_sidecar_offsets(&mut self, offsets: Vec<u32>) {
        self.sidecar_offsets = offsets;
    }
}

/// One decoded (or to-be-encoded) frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame<H> {
    /// The decoded header.
    pub header: H,
    /// The body protobuf, still encoded.
    pub body: Bytes,
    /// The sidecars, in order. Slices of the received buffer, not copies.
    pub sidecars: Vec<Bytes>,
}

/// A client-to-server frame.
pub type RequestFrame = Frame<RequestHeader>;
/// A server-to-client frame.
pub type ResponseFrame = Frame<ResponseHeader>;

impl<H> Frame<H> {
    /// A frame without sidecars.
    pub fn new(header: H, body: impl Into<Bytes>) -> Self {
        Frame {
            header,
            body: body.into(),
            sidecars: Vec::new(),
        }
    }
}

/// Takes one frame off the front of `buf`, with [`DEFAULT_MAX_FRAME_LEN`].
///
/// Returns `Ok(None)` when `buf` does not yet hold a whole frame (nothing is
/// consumed), `Err` when it never will.
pub fn decode<H: FrameHeader>(buf: &mut BytesMut) -> Result<Option<Frame<H>>, FrameError> {
    decode_with_limit(buf, DEFAULT_MAX_FRAME_LEN)
}

/// Like [`decode`] with an explicit limit on the length prefix.
pub fn decode_with_limit<H: FrameHeader>(
    buf: &mut BytesMut,
    max_len: usize,
) -> Result<Option<Frame<H>>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    // Refuse before buffering: a corrupt prefix must not make us allocate.
    if len > max_len {
        return Err(FrameError::TooLong { len, max: max_len });
    }
    if buf.len() < 4 + len {
        buf.reserve(4 + len - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    let mut frame = buf.split_to(len).freeze();

    let header_len = read_len(&mut frame, "header length")?;
    if header_len > frame.len() {
        return Err(malformed(format!(
            "header length {header_len} exceeds the {} bytes left in the frame",
            frame.len()
        )));
    }
    let header_bytes = frame.split_to(header_len);
    let header =
        H::decode(header_bytes).map_err(|e| malformed(format!("undecodable header: {e}")))?;

    let main_len = read_len(&mut frame, "body length")?;
    if main_len != frame.len() {
        return Err(malformed(format!(
            "body length {main_len} does not match the {} bytes left in the frame",
            frame.len()
        )));
    }
    let (body, sidecars) = split_sidecars(frame, header.sidecar_offsets())?;
    Ok(Some(Frame {
        header,
        body,
        sidecars,
    }))
}

/// Appends `frame` to `dst`. The header's `sidecar_offsets` are set from
/// `frame.sidecars`, so callers never compute them. Fails (writing nothing)
/// only if the frame would exceed [`DEFAULT_MAX_FRAME_LEN`].
pub fn encode<H: FrameHeader>(frame: &Frame<H>, dst: &mut BytesMut) -> Result<(), FrameError> {
    let mut offsets = Vec::with_capacity(frame.sidecars.len());
    let mut main_len = frame.body.len();
    for s in &frame.sidecars {
        offsets.push(u32::try_from(main_len).map_err(|_| FrameError::TooLong {
            len: main_len,
            max: DEFAULT_MAX_FRAME_LEN,
        })?);
        main_len += s.len();
    }
    // Only clone the header when its offsets would be wrong as given.
    let fixed;
    let header = if frame.header.sidecar_offsets() == offsets.as_slice() {
        &frame.header
    } else {
        let mut h = frame.header.clone();
        h.set_sidecar_offsets(offsets);
        fixed = h;
        &fixed
    };

    let header_len = header.encoded_len();
    let total = prost::length_delimiter_len(header_len)
        + header_len
        + prost::length_delimiter_len(main_len)
        + main_len;
    if total > DEFAULT_MAX_FRAME_LEN {
        return Err(FrameError::TooLong {
            len: total,
            max: DEFAULT_MAX_FRAME_LEN,
        });
    }
    dst.reserve(4 + total);
    // `total` fits in u32: it is at most DEFAULT_MAX_FRAME_LEN.
    dst.put_u32(total as u32);
    prost::encoding::encode_varint(header_len as u64, dst);
    header
        .encode(dst)
        .map_err(|e| malformed(format!("header encoding: {e}")))?;
    prost::encoding::encode_varint(main_len as u64, dst);
    dst.put_slice(&frame.body);
    for s in &frame.sidecars {
        dst.put_slice(s);
    }
    Ok(())
}

/// Encodes a frame whose body is a protobuf message and has no sidecars.
pub fn encode_message<H: FrameHeader>(
    header: &H,
    body: &impl Message,
    dst: &mut BytesMut,
) -> Result<(), FrameError> {
    let frame = Frame::new(header.clone(), body.encode_to_vec());
    encode(&frame, dst)
}

fn read_len(frame: &mut Bytes, what: &str) -> Result<usize, FrameError> {
    let v = prost::encoding::decode_varint(frame)
        .map_err(|_| malformed(format!("truncated or invalid {what} varint")))?;
    usize::try_from(v).map_err(|_| malformed(format!("{what} {v} out of range")))
}

/// Cuts the main region into body and sidecars.
fn split_sidecars(mut main: Bytes, offsets: &[u32]) -> Result<(Bytes, Vec<Bytes>), FrameError> {
    if offsets.is_empty() {
        return Ok((main, Vec::new()));
    }
    let total = main.len();
    let mut starts = Vec::with_capacity(offsets.len());
    let mut prev = 0usize;
    for (i, &off) in offsets.iter().enumerate() {
        let off = off as usize;
        if off < prev || off > total {
            return Err(malformed(format!(
                "sidecar {i} offset {off} is out of order or past the {total}-byte body region"
            )));
        }
        starts.push(off);
        prev = off;
    }
    // Split from the back so each `split_off` leaves the earlier part in `main`.
    let mut sidecars = Vec::with_capacity(starts.len());
    for &start in starts.iter().rev() {
        sidecars.push(main.split_off(start));
    }
    sidecars.reverse();
    Ok((main, sidecars))
}

fn malformed(msg: String) -> FrameError {
    FrameError::Malformed(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::rpc::{
        authentication_type_pb, negotiate_pb, AuthenticationTypePb, ConnectionContextPb,
        NegotiatePb, RemoteMethodPb, RpcFeatureFlag, UserInformationPb,
    };

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '|')
            .collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn req_header(call_id: i32) -> RequestHeader {
        RequestHeader {
            call_id,
            ..Default::default()
        }
    }

    fn encoded(header: &RequestHeader, body: &impl Message) -> Vec<u8> {
        let mut buf = BytesMut::new();
        encode_message(header, body, &mut buf).unwrap();
        buf.to_vec()
    }

    // The four dumps of docs/kudu-protocol.md#negotiation (user "alice").

    #[test]
    fn negotiate_frame_matches_reference_bytes() {
        let body = NegotiatePb {
            supported_features: vec![RpcFeatureFlag::ApplicationFeatureFlags as i32],
            step: negotiate_pb::NegotiateStep::Negotiate as i32,
            sasl_mechanisms: vec![negotiate_pb::SaslMechanism {
                mechanism: "PLAIN".into(),
            }],
            authn_types: vec![AuthenticationTypePb {
                r#type: Some(authentication_type_pb::Type::Sasl(
                    authentication_type_pb::Sasl {},
                )),
            }],
            ..Default::default()
        };
        let want = hex("00 00 00 1e | 0b | 18 df ff ff ff ff ff ff ff ff 01 | 11 |
                        08 01  10 01  22 07 12 05 50 4c 41 49 4e  3a 02 0a 00");
        assert_eq!(encoded(&req_header(-33), &body), want);
    }

    #[test]
    fn sasl_initiate_frame_matches_reference_bytes() {
        let body = NegotiatePb {
            step: negotiate_pb::NegotiateStep::SaslInitiate as i32,
            token: Some(b"\0alice\0".to_vec()),
            sasl_mechanisms: vec![negotiate_pb::SaslMechanism {
                mechanism: "PLAIN".into(),
            }],
            ..Default::default()
        };
        let want = hex("00 00 00 21 | 0b | 18 df ff ff ff ff ff ff ff ff 01 | 14 |
                        10 02  1a 07 00 61 6c 69 63 65 00  22 07 12 05 50 4c 41 49 4e");
        assert_eq!(encoded(&req_header(-33), &body), want);
    }

    #[test]
    fn sasl_success_step_zero_is_encoded() {
        // `step` is required: SASL_SUCCESS (= 0) must still be on the wire.
        let body = NegotiatePb {
            step: negotiate_pb::NegotiateStep::SaslSuccess as i32,
            ..Default::default()
        };
        assert_eq!(body.encode_to_vec(), vec![0x10, 0x00]);
    }

    #[test]
    fn connection_context_frame_matches_reference_bytes() {
        let body = ConnectionContextPb {
            deprecated_user_info: Some(UserInformationPb {
                effective_user: None,
                real_user: "alice".into(),
            }),
            encoded_nonce: None,
        };
        let want = hex("00 00 00 16 | 0b | 18 fd ff ff ff ff ff ff ff ff 01 | 09 |
                        12 07 12 05 61 6c 69 63 65");
        assert_eq!(encoded(&req_header(-3), &body), want);
    }

    #[test]
    fn connect_to_master_frame_matches_reference_bytes() {
        let header = RequestHeader {
            call_id: 0,
            remote_method: Some(RemoteMethodPb {
                service_name: "kudu.master.MasterService".into(),
                method_name: "ConnectToMaster".into(),
            }),
            timeout_millis: Some(10_000),
            required_feature_flags: vec![3],
            ..Default::default()
        };
        let mut want = hex("00 00 00 37 | 35 | 18 00  32 2c 0a 19");
        want.extend_from_slice(b"kudu.master.MasterService");
        want.extend(hex("12 0f"));
        want.extend_from_slice(b"ConnectToMaster");
        want.extend(hex("50 90 4e  58 03 | 00"));
        let body = crate::pb::master::ConnectToMasterRequestPb {};
        assert_eq!(encoded(&header, &body), want);
    }

    fn sample_response() -> ResponseFrame {
        Frame {
            header: ResponseHeader {
                call_id: 7,
                is_error: Some(false),
                sidecar_offsets: vec![],
            },
            body: Bytes::from_static(b"\x08\x01body"),
            sidecars: vec![
                Bytes::from_static(b"rows-sidecar"),
                Bytes::new(),
                Bytes::from_static(b"indirect"),
            ],
        }
    }

    fn encode_vec<H: FrameHeader>(f: &Frame<H>) -> Vec<u8> {
        let mut b = BytesMut::new();
        encode(f, &mut b).unwrap();
        b.to_vec()
    }

    #[test]
    fn round_trip_with_sidecars() {
        let frame = sample_response();
        let mut buf = BytesMut::from(&encode_vec(&frame)[..]);
        let got: ResponseFrame = decode(&mut buf).unwrap().unwrap();
        assert!(buf.is_empty());
        assert_eq!(got.header.call_id, 7);
        assert_eq!(got.header.sidecar_offsets, vec![6, 18, 18]);
        assert_eq!(got.body, frame.body);
        assert_eq!(got.sidecars, frame.sidecars);
        // Re-encoding the decoded frame gives the same bytes.
        assert_eq!(encode_vec(&got), encode_vec(&frame));
    }

    #[test]
    fn round_trip_request_without_sidecars_and_empty_body() {
        let frame = Frame::new(req_header(0), Bytes::new());
        let mut buf = BytesMut::from(&encode_vec(&frame)[..]);
        let got: RequestFrame = decode(&mut buf).unwrap().unwrap();
        assert_eq!(got, frame);
    }

    #[test]
    fn every_split_point_needs_more_bytes_then_decodes() {
        let bytes = encode_vec(&sample_response());
        for cut in 0..bytes.len() {
            let mut buf = BytesMut::from(&bytes[..cut]);
            assert_eq!(
                decode::<ResponseHeader>(&mut buf).unwrap(),
                None,
                "cut at {cut}"
            );
            assert_eq!(buf.len(), cut, "nothing consumed at cut {cut}");
            buf.extend_from_slice(&bytes[cut..]);
            let got: ResponseFrame = decode(&mut buf).unwrap().unwrap();
            assert_eq!(got.sidecars.len(), 3);
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn back_to_back_frames_decode_in_order() {
        let mut bytes = encode_vec(&sample_response());
        let mut second = sample_response();
        second.header.call_id = 8;
        second.sidecars.clear();
        bytes.extend(encode_vec(&second));
        let mut buf = BytesMut::from(&bytes[..]);
        let a: ResponseFrame = decode(&mut buf).unwrap().unwrap();
        let b: ResponseFrame = decode(&mut buf).unwrap().unwrap();
        assert_eq!((a.header.call_id, b.header.call_id), (7, 8));
        assert!(b.sidecars.is_empty());
        assert_eq!(decode::<ResponseHeader>(&mut buf).unwrap(), None);
    }

    #[test]
    fn oversize_length_is_rejected_before_buffering() {
        let mut buf = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]);
        assert!(matches!(
            decode::<ResponseHeader>(&mut buf),
            Err(FrameError::TooLong {
                len: 0x7fff_ffff,
                ..
            })
        ));
        let mut buf = BytesMut::from(&encode_vec(&sample_response())[..]);
        assert!(matches!(
            decode_with_limit::<ResponseHeader>(&mut buf, 10),
            Err(FrameError::TooLong { max: 10, .. })
        ));
    }

    /// Builds a frame by hand so the header can lie about the sidecars.
    fn raw_frame(header: &ResponseHeader, main: &[u8]) -> BytesMut {
        let h = header.encode_to_vec();
        let mut inner = Vec::new();
        prost::encoding::encode_varint(h.len() as u64, &mut inner);
        inner.extend(&h);
        prost::encoding::encode_varint(main.len() as u64, &mut inner);
        inner.extend(main);
        let mut buf = BytesMut::new();
        buf.put_u32(inner.len() as u32);
        buf.put_slice(&inner);
        buf
    }

    #[test]
    fn bad_sidecar_offsets_are_malformed() {
        let main = b"0123456789";
        for offsets in [vec![11], vec![4, 2], vec![0, 11]] {
            let header = ResponseHeader {
                call_id: 1,
                is_error: None,
                sidecar_offsets: offsets.clone(),
            };
            let mut buf = raw_frame(&header, main);
            assert!(
                matches!(
                    decode::<ResponseHeader>(&mut buf),
                    Err(FrameError::Malformed(_))
                ),
                "offsets {offsets:?}"
            );
        }
        // Offsets at the very start and end are legal (empty body / sidecar).
        let header = ResponseHeader {
            call_id: 1,
            is_error: None,
            sidecar_offsets: vec![0, 10],
        };
        let got: ResponseFrame = decode(&mut raw_frame(&header, main)).unwrap().unwrap();
        assert!(got.body.is_empty());
        assert_eq!(got.sidecars, vec![Bytes::from_static(main), Bytes::new()]);
    }

    #[test]
    fn inconsistent_lengths_are_malformed() {
        let good = encode_vec(&sample_response());
        // Header length pointing past the end of the frame.
        let mut bad = good.clone();
        bad[4] = 0x7f;
        assert!(matches!(
            decode::<ResponseHeader>(&mut BytesMut::from(&bad[..])),
            Err(FrameError::Malformed(_))
        ));
        // Trailing garbage inside the length prefix.
        let mut bad = good.clone();
        bad.push(0);
        let n = (bad.len() - 4) as u32;
        bad[..4].copy_from_slice(&n.to_be_bytes());
        assert!(matches!(
            decode::<ResponseHeader>(&mut BytesMut::from(&bad[..])),
            Err(FrameError::Malformed(_))
        ));
        // An empty frame has no header length at all.
        assert!(matches!(
            decode::<ResponseHeader>(&mut BytesMut::from(&[0, 0, 0, 0][..])),
            Err(FrameError::Malformed(_))
        ));
        // A header that is not a protobuf.
        let mut buf = BytesMut::new();
        buf.put_u32(4);
        buf.put_slice(&[2, 0xff, 0xff, 0]);
        assert!(matches!(
            decode::<ResponseHeader>(&mut buf),
            Err(FrameError::Malformed(_))
        ));
    }
}
