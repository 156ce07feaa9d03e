//! Encoding of a `_metadata` file: a checksummed envelope around a JSON
//! [`JobState`].
//!
//! ```text
//! offset   size  field
//! 0        8     magic "FERRYCKP"
//! 8        4     format version, u32 big-endian
//! 12       8     payload length N, u64 big-endian
//! 20       N     payload: UTF-8 JSON of JobState
//! 20+N     4     CRC32C of bytes [0, 20+N), u32 big-endian
//! ```
//!
//! The envelope (magic, version, length, CRC32C trailer) is the same for
//! every format version; only the payload may change. That lets a reader
//! verify the checksum *before* looking at the version, so a torn or
//! bit-flipped file is always reported as corrupt, and "unsupported version"
//! means a whole file written by a newer ferry — a case where silently
//! falling back to an older checkpoint would be wrong.
//!
//! The payload is JSON so an operator can inspect a checkpoint with
//! `tail -c +21 _metadata | head -c -4 | jq .`.

use super::state::{JobState, StateInvariant, FORMAT_VERSION};

/// The first bytes of every `_metadata` file ferry writes.
pub const MAGIC: [u8; 8] = *b"FERRYCKP";
/// Magic + version + payload length.
pub const HEADER_LEN: usize = 20;
/// The CRC32C trailer.
pub const TRAILER_LEN: usize = 4;

/// Why a `_metadata` file cannot be decoded (or a state encoded).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// Shorter than its header or its declared length: a torn or partial write.
    #[error("truncated: {len} bytes, expected {expected} (torn or partial write)")]
    Truncated {
        /// Actual size.
        len: u64,
        /// Size the header promises (or the header size).
        expected: u64,
    },
    /// Does not start with [`MAGIC`]: not a ferry checkpoint file.
    #[error("not a ferry checkpoint file: starts with 0x{found} instead of \"FERRYCKP\"")]
    BadMagic {
        /// The first bytes, in hex.
        found: String,
    },
    /// Longer than its declared length.
    #[error("{} unexpected bytes after the checksum (file is {len} bytes, header says {expected})", .len - .expected)]
    TrailingBytes {
        /// Actual size.
        len: u64,
        /// Size the header promises.
        expected: u64,
    },
    /// The checksum does not match the content: the file is corrupt.
    #[error(
        "checksum mismatch: stored {stored:#010x}, computed {computed:#010x} (file is corrupt)"
    )]
    ChecksumMismatch {
        /// CRC32C stored in the trailer.
        stored: u32,
        /// CRC32C of the content.
        computed: u32,
    },
    /// An intact file in a format version this build does not know.
    #[error("format version {found} is not supported (this build reads version {supported}); it was probably written by a newer ferry")]
    UnsupportedVersion {
        /// Version in the header.
        found: u32,
        /// Version this build handles.
        supported: u32,
    },
    /// The checksum matched but the payload is not a valid state document.
    #[error("payload is not a valid job state: {reason}")]
    InvalidPayload {
        /// The JSON error.
        reason: String,
    },
    /// The state breaks an invariant (see [`JobState::validate`]).
    #[error("job state is inconsistent: {reason}")]
    InvalidState {
        /// Which invariant.
        reason: StateInvariant,
    },
    /// The state could not be serialized.
    #[error("cannot encode job state: {reason}")]
    Encode {
        /// The serializer's message.
        reason: String,
    },
}

impl MetadataError {
    /// Whether the file is damaged or not a usable state (as opposed to an
    /// intact file from a newer format, or a failure to encode).
    pub fn is_corruption(&self) -> bool {
        !matches!(
            self,
            MetadataError::UnsupportedVersion { .. } | MetadataError::Encode { .. }
        )
    }
}

/// Encodes a state as a complete `_metadata` file. The state must pass
/// [`JobState::validate`].
pub fn encode(state: &JobState) -> Result<Vec<u8>, MetadataError> {
    state
        .validate()
        .map_err(|reason| MetadataError::InvalidState { reason })?;
    let payload = serde_json::to_vec(state).map_err(|e| MetadataError::Encode {
        reason: e.to_string(),
    })?;
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len() + TRAILER_LEN);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    out.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// Decodes a `_metadata` file, checking in order: magic, size, checksum,
/// version, payload, state invariants.
pub fn decode(bytes: &[u8]) -> Result<JobState, MetadataError> {
    let len = bytes.len() as u64;
    let magic_len = bytes.len().min(MAGIC.len());
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(MetadataError::BadMagic {
            found: super::state::to_hex(&bytes[..magic_len]),
        });
    }
    let Some((header, rest)) = bytes.split_first_chunk::<HEADER_LEN>() else {
        return Err(MetadataError::Truncated {
            len,
            expected: HEADER_LEN as u64,
        });
    };
    let version = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
    let mut declared = [0u8; 8];
    declared.copy_from_slice(&header[12..20]);
    let payload_len = u64::from_be_bytes(declared);
    // Saturating: a corrupt length near u64::MAX must not wrap around.
    let expected = payload_len.saturating_add((HEADER_LEN + TRAILER_LEN) as u64);
    if len < expected {
        return Err(MetadataError::Truncated { len, expected });
    }
    if len > expected {
        return Err(MetadataError::TrailingBytes { len, expected });
    }
    // len == expected, so the payload length fits in usize.
    let body_len = bytes.len() - TRAILER_LEN;
    let (body, trailer) = bytes.split_at(body_len);
    let stored = u32::from_be_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(MetadataError::ChecksumMismatch { stored, computed });
    }
    if version != FORMAT_VERSION {
        return Err(MetadataError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let payload = &rest[..rest.len() - TRAILER_LEN];
    let state: JobState =
        serde_json::from_slice(payload).map_err(|e| MetadataError::InvalidPayload {
            reason: e.to_string(),
        })?;
    if state.format_version != version {
        return Err(MetadataError::InvalidState {
            reason: StateInvariant::HeaderVersion {
                payload: state.format_version,
                header: version,
            },
        });
    }
    state
        .validate()
        .map_err(|reason| MetadataError::InvalidState { reason })?;
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::state::{JobId, SnapshotKind, SplitState, WindowState};
    use crate::time::SourceTime;

    fn sample() -> JobState {
        let mut state = JobState::new(
            JobId::from_bytes([0x5a; 16]),
            SnapshotKind::Checkpoint,
            12,
            "orders",
            vec!["s1:7051".into(), "s2:7051".into()],
            vec!["k1:7051".into()],
        );
        state.created_at_ms = 1_700_000_000_000;
        state.last_end_timestamp = Some(SourceTime::from_raw(7_000_000_000_000_000_000));
        state.window = Some(WindowState {
            start_timestamp: Some(SourceTime::from_raw(7_000_000_000_000_000_000)),
            end_timestamp: SourceTime::from_raw(7_000_000_000_000_004_096),
        });
        state.unassigned = vec![SplitState {
            split_id: "u1".into(),
            descriptor: vec![1, 2, 3],
            resume_key: None,
        }];
        state.pending = vec![SplitState {
            split_id: "p1".into(),
            descriptor: vec![9; 40],
            resume_key: Some(vec![0, 0, 0, 42]),
        }];
        state
    }

    /// Re-seals a file after editing its header or payload, so a test can
    /// reach the checks that come after the checksum.
    fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
        let body = bytes.len() - TRAILER_LEN;
        let crc = crc32c::crc32c(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    #[test]
    fn round_trip_and_exact_layout() {
        let state = sample();
        let bytes = encode(&state).expect("encode");
        assert_eq!(&bytes[..8], b"FERRYCKP");
        assert_eq!(&bytes[8..12], &[0, 0, 0, 1]);
        let n = u64::from_be_bytes(bytes[12..20].try_into().expect("8 bytes"));
        assert_eq!(bytes.len() as u64, 20 + n + 4);
        let payload = std::str::from_utf8(&bytes[20..bytes.len() - 4]).expect("UTF-8 JSON");
        assert!(payload.starts_with("{\"format_version\":1,"), "{payload}");
        // u64 hybrid times survive exactly.
        assert!(payload.contains("7000000000000004096"), "{payload}");
        assert_eq!(decode(&bytes), Ok(state));
    }

    #[test]
    fn every_truncation_is_detected() {
        let bytes = encode(&sample()).expect("encode");
        for cut in 0..bytes.len() {
            match decode(&bytes[..cut]) {
                Err(MetadataError::Truncated { len, .. }) => assert_eq!(len, cut as u64),
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let bytes = encode(&sample()).expect("encode");
        for i in 0..bytes.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut damaged = bytes.clone();
                damaged[i] ^= mask;
                let err = decode(&damaged).expect_err("damage must be detected");
                assert!(err.is_corruption(), "byte {i} mask {mask:#x}: {err:?}");
                let expected_kind = match i {
                    0..=7 => matches!(err, MetadataError::BadMagic { .. }),
                    12..=19 => matches!(
                        err,
                        MetadataError::Truncated { .. } | MetadataError::TrailingBytes { .. }
                    ),
                    // Version, payload and trailer are covered by the checksum.
                    _ => matches!(err, MetadataError::ChecksumMismatch { .. }),
                };
                assert!(expected_kind, "byte {i} mask {mask:#x}: {err:?}");
            }
        }
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut bytes = encode(&sample()).expect("encode");
        bytes.push(0);
        assert!(matches!(
            decode(&bytes),
            Err(MetadataError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn foreign_files_are_not_checkpoints() {
        let err = decode(b"{\"not\":\"ours\"}").unwrap_err();
        assert!(matches!(err, MetadataError::BadMagic { .. }));
        assert!(
            err.to_string().contains("not a ferry checkpoint file"),
            "{err}"
        );
        assert!(matches!(
            decode(b"FERRX"),
            Err(MetadataError::BadMagic { .. })
        ));
    }

    #[test]
    fn unknown_version_of_an_intact_file() {
        let mut bytes = encode(&sample()).expect("encode");
        bytes[8..12].copy_from_slice(&2u32.to_be_bytes());
        let err = decode(&reseal(bytes)).unwrap_err();
        assert_eq!(
            err,
            MetadataError::UnsupportedVersion {
                found: 2,
                supported: 1
            }
        );
        assert!(!err.is_corruption());
        assert!(err.to_string().contains("newer ferry"), "{err}");
    }

    #[test]
    fn huge_declared_length_does_not_overflow() {
        let mut bytes = encode(&sample()).expect("encode");
        bytes[12..20].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(matches!(
            decode(&bytes),
            Err(MetadataError::Truncated { .. })
        ));
    }

    fn with_payload(payload: &[u8]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
        bytes.extend_from_slice(&(payload.len() as u64).to_be_bytes());
        bytes.extend_from_slice(payload);
        bytes.extend_from_slice(&[0; 4]);
        reseal(bytes)
    }

    #[test]
    fn intact_envelope_with_bad_payload() {
        let err = decode(&with_payload(b"not json")).unwrap_err();
        assert!(
            matches!(err, MetadataError::InvalidPayload { .. }),
            "{err:?}"
        );

        // Unknown fields are refused: a payload change must bump the version.
        let mut json = serde_json::to_value(sample()).expect("to json");
        json["surprise"] = serde_json::Value::Bool(true);
        let err = decode(&with_payload(json.to_string().as_bytes())).unwrap_err();
        assert!(err.to_string().contains("surprise"), "{err}");

        let mut json = serde_json::to_value(sample()).expect("to json");
        json["format_version"] = 2.into();
        let err = decode(&with_payload(json.to_string().as_bytes())).unwrap_err();
        assert!(matches!(err, MetadataError::InvalidState { .. }), "{err:?}");

        let mut bad = sample();
        bad.unassigned[0].split_id = "p1".into();
        let json = serde_json::to_vec(&bad).expect("to json");
        let err = decode(&with_payload(&json)).unwrap_err();
        assert!(err.to_string().contains("appears twice"), "{err}");
        assert!(matches!(
            encode(&bad),
            Err(MetadataError::InvalidState { .. })
        ));
    }
}
