//! TLS channel bindings of type `tls-server-end-point` (RFC 5929 §4): a
//! hash of the server's certificate, which Kudu servers send back
//! integrity-protected at the end of Kerberos authentication. A client that
//! computes the same hash from the certificate its own TLS session saw
//! knows that the server it authenticated with Kerberos is the one at the
//! other end of the TLS channel (no man in the middle between the two).

use ring::digest;

/// `sha256WithRSAEncryption` and friends: the hash an RSA, ECDSA or DSA
/// signature algorithm uses, by its OID's DER bytes.
const SIGNATURE_HASHES: &[(&[u8], &digest::Algorithm)] = &[
    // 1.2.840.113549.1.1.{4,5,11,12,13}: RSA with MD5, SHA-1, SHA-256/384/512
    (b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x04", &digest::SHA256),
    (b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x05", &digest::SHA256),
    (b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0b", &digest::SHA256),
    (b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0c", &digest::SHA384),
    (b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0d", &digest::SHA512),
    // 1.2.840.10045.4.1 and 4.3.{2,3,4}: ECDSA with SHA-1, SHA-256/384/512
    (b"\x2a\x86\x48\xce\x3d\x04\x01", &digest::SHA256),
    (b"\x2a\x86\x48\xce\x3d\x04\x03\x02", &digest::SHA256),
    (b"\x2a\x86\x48\xce\x3d\x04\x03\x03", &digest::SHA384),
    (b"\x2a\x86\x48\xce\x3d\x04\x03\x04", &digest::SHA512),
];

/// The `tls-server-end-point` binding of a DER certificate: its hash with
/// the signature's own hash function, SHA-256 in place of MD5 or SHA-1.
/// `None` for a certificate whose signature algorithm names no single
/// known hash (RFC 5929 leaves the binding undefined then).
pub(crate) fn server_end_point(cert_der: &[u8]) -> Option<Vec<u8>> {
    let oid = signature_algorithm_oid(cert_der)?;
    let (_, alg) = SIGNATURE_HASHES.iter().find(|(o, _)| *o == oid)?;
    Some(digest::digest(alg, cert_der).as_ref().to_vec())
}

/// `Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm
/// AlgorithmIdentifier, signatureValue }`; `AlgorithmIdentifier ::=
/// SEQUENCE { algorithm OBJECT IDENTIFIER, parameters ANY OPTIONAL }`.
fn signature_algorithm_oid(cert: &[u8]) -> Option<&[u8]> {
    let (tag, body, _) = der_element(cert)?;
    if tag != 0x30 {
        return None;
    }
    let (_, _, after_tbs) = der_element(body)?;
    let (tag, alg_id, _) = der_element(after_tbs)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, oid, _) = der_element(alg_id)?;
    (tag == 0x06).then_some(oid)
}

/// Splits one DER element off `data`: (tag, contents, rest).
fn der_element(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = data.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal certificate-shaped DER: SEQUENCE { SEQUENCE {} (tbs),
    /// SEQUENCE { OID }, BIT STRING }.
    fn fake_cert(oid: &[u8]) -> Vec<u8> {
        let mut alg = vec![0x06, oid.len() as u8];
        alg.extend_from_slice(oid);
        let mut body = vec![0x30, 0x00, 0x30, alg.len() as u8];
        body.extend_from_slice(&alg);
        body.extend_from_slice(&[0x03, 0x01, 0x00]);
        let mut cert = vec![0x30, body.len() as u8];
        cert.extend_from_slice(&body);
        cert
    }

    #[test]
    fn sha256_rsa_certificates_bind_with_sha256() {
        let cert = fake_cert(b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0b");
        let want = digest::digest(&digest::SHA256, &cert);
        assert_eq!(server_end_point(&cert).as_deref(), Some(want.as_ref()));
    }

    #[test]
    fn sha1_and_sha512_follow_rfc_5929() {
        let sha1 = fake_cert(b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x05");
        assert_eq!(server_end_point(&sha1).map(|h| h.len()), Some(32));
        let sha512 = fake_cert(b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0d");
        assert_eq!(server_end_point(&sha512).map(|h| h.len()), Some(64));
    }

    #[test]
    fn unknown_algorithms_and_garbage_have_no_binding() {
        assert_eq!(server_end_point(&fake_cert(b"\x2b\x65\x70")), None); // Ed25519
        assert_eq!(server_end_point(b"\x30\x05\x01"), None);
        assert_eq!(server_end_point(b""), None);
    }

    #[test]
    fn long_form_lengths_parse() {
        let mut data = vec![0x04, 0x81, 0x80];
        data.extend(std::iter::repeat_n(7u8, 0x80));
        let (tag, body, rest) = der_element(&data).expect("element");
        assert_eq!((tag, body.len(), rest.len()), (0x04, 0x80, 0));
    }
}
