//! Securing the REST API and web page: TLS (Flink's `security.ssl.rest.*`
//! keys, with PEM files instead of Java keystores), mutual TLS
//! (`security.ssl.rest.authentication-enabled`) and ferry's bearer token
//! (`security.rest.token-file`), for both sides: the server's rustls
//! configuration and token, and the CLI's client configuration (the
//! server's token check is `server::rest::token`).
//!
//! Secrets never leave this module in text: errors name the key and the
//! file, never a file's contents; the token prints as `***`; PEM parse
//! errors (which can quote a line of the file) are replaced by a fixed
//! description.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::HeaderValue;
use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// `security.ssl.rest.enabled` (Flink).
pub const KEY_ENABLED: &str = crate::process_opts::SSL_REST_ENABLED.name();
/// `security.ssl.rest.keystore` (Flink; here a PEM file).
pub const KEY_KEYSTORE: &str = crate::process_opts::SSL_REST_KEYSTORE.name();
/// `security.ssl.rest.private-key` (ferry): the key, if not in the keystore file.
pub const KEY_PRIVATE_KEY: &str = crate::process_opts::SSL_REST_PRIVATE_KEY.name();
/// `security.ssl.rest.truststore` (Flink; here PEM CA certificates).
pub const KEY_TRUSTSTORE: &str = crate::process_opts::SSL_REST_TRUSTSTORE.name();
/// `security.ssl.rest.authentication-enabled` (Flink): mutual TLS.
pub const KEY_AUTHENTICATION: &str = crate::process_opts::SSL_REST_AUTHENTICATION.name();
/// `security.rest.token-file` (ferry): the bearer token.
pub const KEY_TOKEN_FILE: &str = crate::process_opts::REST_TOKEN_FILE.name();

/// Shortest token accepted: a guessable token is no protection.
pub const MIN_TOKEN_LEN: usize = 16;

/// The REST security keys as given (paths, switches). Loading and checking
/// the files is [`RestSecurity::server`] / [`client_tls`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestSecurity {
    /// `security.ssl.rest.enabled`.
    pub ssl_enabled: bool,
    /// `security.ssl.rest.keystore`: certificate chain (and key) PEM.
    pub keystore: Option<PathBuf>,
    /// `security.ssl.rest.private-key`: key PEM (default: in the keystore).
    pub private_key: Option<PathBuf>,
    /// `security.ssl.rest.truststore`: CA certificates PEM.
    pub truststore: Option<PathBuf>,
    /// `security.ssl.rest.authentication-enabled`: client certificates required.
    pub authentication_enabled: bool,
    /// `security.rest.token-file`.
    pub token_file: Option<PathBuf>,
}

/// A bad security setting: the key, the file (never its contents) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}{}: {reason}", .path.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default())]
pub struct SecurityError {
    /// The key whose file is at fault.
    pub key: &'static str,
    /// The file, if one was named.
    pub path: Option<PathBuf>,
    /// What is wrong.
    pub reason: String,
}

impl SecurityError {
    fn new(key: &'static str, path: Option<&Path>, reason: impl Into<String>) -> Self {
        SecurityError {
            key,
            path: path.map(Path::to_path_buf),
            reason: reason.into(),
        }
    }
}

/// What the server enforces, loaded from the files.
#[derive(Clone, Default)]
pub struct ServerSecurity {
    /// TLS (and client certificate verification) when enabled.
    pub tls: Option<Arc<ServerConfig>>,
    /// The bearer token every request must carry.
    pub token: Option<Token>,
}

impl std::fmt::Debug for ServerSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSecurity")
            .field("tls", &self.tls.is_some())
            .field("token", &self.token)
            .finish()
    }
}

impl RestSecurity {
    /// Checks the keys together and loads the files as the REST server
    /// would (also done at parse time, so a bad file is a usage error).
    /// `rest_address` is where the REST API listens: a token without TLS
    /// is refused unless that is a loopback address.
    pub fn server(&self, rest_address: &str) -> Result<ServerSecurity, SecurityError> {
        self.check_combinations()?;
        // Files are checked whether or not TLS is on: a missing file is an
        // error either way (the same keys configure the CLI).
        let identity = match &self.keystore {
            Some(path) => Some(load_identity(path, self.private_key.as_deref())?),
            None => None,
        };
        let roots = match &self.truststore {
            Some(path) => Some(load_roots(KEY_TRUSTSTORE, path)?),
            None => None,
        };
        let token = match &self.token_file {
            Some(path) => Some(Token::read(path)?),
            None => None,
        };
        if token.is_some() && !self.ssl_enabled && !is_loopback(rest_address) {
            return Err(SecurityError::new(
                KEY_TOKEN_FILE,
                self.token_file.as_deref(),
                format!(
                    "a bearer token would cross the network in clear text: rest.address is \
                     {rest_address}; set {KEY_ENABLED}=true (with {KEY_KEYSTORE}), or listen on \
                     loopback (e.g. behind a TLS-terminating proxy on the same host)"
                ),
            ));
        }
        let tls = if self.ssl_enabled {
            let (chain, key) = identity.ok_or_else(|| {
                SecurityError::new(KEY_KEYSTORE, None, format!("must be set when {KEY_ENABLED} is true: a PEM file with the server's certificate chain and private key"))
            })?;
            let builder = ServerConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| SecurityError::new(KEY_ENABLED, None, e.to_string()))?;
            let builder = if self.authentication_enabled {
                let roots = roots.ok_or_else(|| {
                    SecurityError::new(
                        KEY_TRUSTSTORE,
                        None,
                        format!("must be set when {KEY_AUTHENTICATION} is true"),
                    )
                })?;
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .build()
                .map_err(|e| {
                    SecurityError::new(
                        KEY_TRUSTSTORE,
                        self.truststore.as_deref(),
                        format!("cannot verify client certificates with it: {e}"),
                    )
                })?;
                builder.with_client_cert_verifier(verifier)
            } else {
                builder.with_no_client_auth()
            };
            let mut config = builder
                .with_single_cert(chain, key)
                .map_err(|e| key_error(self, e))?;
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Some(Arc::new(config))
        } else {
            None
        };
        Ok(ServerSecurity { tls, token })
    }

    fn check_combinations(&self) -> Result<(), SecurityError> {
        if self.private_key.is_some() && self.keystore.is_none() {
            return Err(SecurityError::new(
                KEY_PRIVATE_KEY,
                self.private_key.as_deref(),
                format!("needs {KEY_KEYSTORE} (the certificate chain the key belongs to)"),
            ));
        }
        if self.ssl_enabled && self.keystore.is_none() {
            return Err(SecurityError::new(
                KEY_KEYSTORE,
                None,
                format!("must be set when {KEY_ENABLED} is true: a PEM file with the server's certificate chain and private key"),
            ));
        }
        if self.authentication_enabled && !self.ssl_enabled {
            return Err(SecurityError::new(
                KEY_AUTHENTICATION,
                None,
                format!("client certificates need TLS: set {KEY_ENABLED}=true"),
            ));
        }
        if self.authentication_enabled && self.truststore.is_none() {
            return Err(SecurityError::new(
                KEY_TRUSTSTORE,
                None,
                format!(
                    "must be set when {KEY_AUTHENTICATION} is true: a PEM file with the CA \
                     certificate(s) client certificates must be signed by"
                ),
            ));
        }
        Ok(())
    }

    /// The keys that have no effect on a server with TLS off (logged as a
    /// warning at start).
    pub fn unused_without_tls(&self) -> Vec<&'static str> {
        if self.ssl_enabled {
            return Vec::new();
        }
        let mut keys = Vec::new();
        if self.keystore.is_some() {
            keys.push(KEY_KEYSTORE);
        }
        if self.truststore.is_some() {
            keys.push(KEY_TRUSTSTORE);
        }
        keys
    }
}

fn key_error(sec: &RestSecurity, e: rustls::Error) -> SecurityError {
    let (key, path) = match &sec.private_key {
        Some(p) => (KEY_PRIVATE_KEY, p.as_path()),
        None => (
            KEY_KEYSTORE,
            sec.keystore.as_deref().unwrap_or(Path::new("")),
        ),
    };
    let reason = match e {
        rustls::Error::InconsistentKeys(_) => {
            "the private key does not belong to the first certificate of the keystore".to_string()
        }
        _ => "the private key is not usable (an RSA, ECDSA or Ed25519 key in PKCS#8, PKCS#1 or SEC1 PEM)".to_string(),
    };
    SecurityError::new(key, Some(path), reason)
}

/// The crypto provider ferry uses for the REST API: ring, like the Kudu
/// client (named explicitly: the object-store client links aws-lc-rs too,
/// so there is no single process default).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Whether `host` (a listen address or a URL's host) is loopback.
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim().trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

// ---------------------------------------------------------------------------
// PEM files

/// Reads `path` for `key` as PEM sections; a JKS, PKCS#12 or other binary
/// file is refused with a message saying PEM is expected.
fn read_pem(key: &'static str, path: &Path) -> Result<Vec<(SectionKind, Vec<u8>)>, SecurityError> {
    let bytes = std::fs::read(path).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "the file does not exist".to_string(),
            std::io::ErrorKind::PermissionDenied => {
                "the file is not readable by ferry's user".to_string()
            }
            _ => format!("cannot read the file: {e}"),
        };
        SecurityError::new(key, Some(path), why)
    })?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        let what = if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) {
            "this is a Java KeyStore (JKS) file"
        } else if bytes.first() == Some(&0x30) {
            "this is a binary (DER or PKCS#12) file"
        } else if bytes.is_empty() {
            "the file is empty"
        } else {
            "this is not a PEM file"
        };
        return Err(SecurityError::new(
            key,
            Some(path),
            format!(
                "{what}; ferry expects PEM (-----BEGIN CERTIFICATE----- / -----BEGIN PRIVATE KEY----- \
                 blocks); convert with `keytool -importkeystore -deststoretype PKCS12` and \
                 `openssl pkcs12 -nodes`"
            ),
        ));
    }
    if contains(&bytes, b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || contains(&bytes, b"Proc-Type: 4,ENCRYPTED")
    {
        return Err(SecurityError::new(
            key,
            Some(path),
            "the private key is encrypted; ferry reads unencrypted PEM keys (decrypt with \
             `openssl pkey -in KEY -out KEY.pem`) and relies on the file's permissions",
        ));
    }
    let mut sections = Vec::new();
    for item in <(SectionKind, Vec<u8>)>::pem_slice_iter(&bytes) {
        // The parser's own error can quote a line of the file: not shown.
        let section = item.map_err(|_| {
            SecurityError::new(
                key,
                Some(path),
                "is not valid PEM (a BEGIN line without its END line, or a damaged base64 body)",
            )
        })?;
        sections.push(section);
    }
    Ok(sections)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn certs_of(sections: &[(SectionKind, Vec<u8>)]) -> Vec<CertificateDer<'static>> {
    sections
        .iter()
        .filter(|(kind, _)| *kind == SectionKind::Certificate)
        .map(|(_, der)| CertificateDer::from(der.clone()))
        .collect()
}

fn key_of(sections: &[(SectionKind, Vec<u8>)]) -> Vec<PrivateKeyDer<'static>> {
    sections
        .iter()
        .filter_map(|(kind, der)| {
            let der = der.clone();
            Some(match kind {
                SectionKind::PrivateKey => PrivateKeyDer::Pkcs8(der.into()),
                SectionKind::RsaPrivateKey => PrivateKeyDer::Pkcs1(der.into()),
                SectionKind::EcPrivateKey => PrivateKeyDer::Sec1(der.into()),
                _ => return None,
            })
        })
        .collect()
}

/// A keystore: the certificate chain (leaf first) from `keystore` and the
/// private key from `private_key`, or from `keystore` too.
fn load_identity(
    keystore: &Path,
    private_key: Option<&Path>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), SecurityError> {
    let sections = read_pem(KEY_KEYSTORE, keystore)?;
    let chain = certs_of(&sections);
    if chain.is_empty() {
        return Err(SecurityError::new(
            KEY_KEYSTORE,
            Some(keystore),
            "holds no certificate (expected the certificate chain, leaf first, and the private key, as PEM)",
        ));
    }
    let (key_name, key_path, mut keys) = match private_key {
        Some(path) => (
            KEY_PRIVATE_KEY,
            path,
            key_of(&read_pem(KEY_PRIVATE_KEY, path)?),
        ),
        None => (KEY_KEYSTORE, keystore, key_of(&sections)),
    };
    match keys.len() {
        1 => Ok((chain, keys.remove(0))),
        0 if private_key.is_none() => Err(SecurityError::new(
            key_name,
            Some(key_path),
            format!("holds no private key (put it in the same file, or name its file with {KEY_PRIVATE_KEY})"),
        )),
        0 => Err(SecurityError::new(
            key_name,
            Some(key_path),
            "holds no private key (-----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or EC PRIVATE KEY)",
        )),
        _ => Err(SecurityError::new(
            key_name,
            Some(key_path),
            "holds more than one private key",
        )),
    }
}

/// The CA certificates of a truststore.
fn load_roots(key: &'static str, path: &Path) -> Result<RootCertStore, SecurityError> {
    let certs = certs_of(&read_pem(key, path)?);
    if certs.is_empty() {
        return Err(SecurityError::new(
            key,
            Some(path),
            "holds no certificate (expected the CA certificate(s) as PEM)",
        ));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| {
            SecurityError::new(
                key,
                Some(path),
                format!("a certificate is not usable as a CA: {e}"),
            )
        })?;
    }
    Ok(roots)
}

/// The system's CA bundle, for an https:// REST address without a
/// truststore: `SSL_CERT_FILE`, else the usual bundle paths.
fn system_roots() -> Option<(PathBuf, RootCertStore)> {
    let candidates = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            [
                "/etc/ssl/certs/ca-certificates.crt",
                "/etc/pki/tls/certs/ca-bundle.crt",
                "/etc/ssl/cert.pem",
            ]
            .into_iter()
            .map(PathBuf::from),
        );
    for path in candidates {
        if let Ok(sections) = read_pem(KEY_TRUSTSTORE, &path) {
            let mut roots = RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(certs_of(&sections));
            if added > 0 {
                return Some((path, roots));
            }
        }
    }
    None
}

/// The client side: trust `truststore`'s CAs (else the system's), present
/// `keystore`'s certificate when given (mutual TLS).
pub fn client_tls(
    truststore: Option<&Path>,
    keystore: Option<&Path>,
    private_key: Option<&Path>,
) -> Result<ClientConfig, SecurityError> {
    if private_key.is_some() && keystore.is_none() {
        return Err(SecurityError::new(
            KEY_PRIVATE_KEY,
            private_key,
            format!("needs {KEY_KEYSTORE} (the client certificate the key belongs to)"),
        ));
    }
    let roots =
        match truststore {
            Some(path) => load_roots(KEY_TRUSTSTORE, path)?,
            None => match system_roots() {
                Some((_, roots)) => roots,
                None => return Err(SecurityError::new(
                    KEY_TRUSTSTORE,
                    None,
                    "must be set for https:// (no system CA bundle found): a PEM file with the CA \
                     certificate that signed the server's certificate",
                )),
            },
        };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| SecurityError::new(KEY_ENABLED, None, e.to_string()))?
        .with_root_certificates(roots);
    match keystore {
        Some(path) => {
            let (chain, key) = load_identity(path, private_key)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                key_error(
                    &RestSecurity {
                        keystore: Some(path.to_path_buf()),
                        private_key: private_key.map(Path::to_path_buf),
                        ..Default::default()
                    },
                    e,
                )
            })
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

// ---------------------------------------------------------------------------
// Bearer token

/// A bearer token (`security.rest.token-file`): prints as `***`, compared
/// in constant time. The header is built once, when the token is read.
#[derive(Clone)]
pub struct Token(Arc<str>, HeaderValue);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Token {
    /// Reads the token file: surrounding whitespace (a trailing newline)
    /// is dropped; the token must be one line of visible ASCII, at least
    /// [`MIN_TOKEN_LEN`] characters.
    pub fn read(path: &Path) -> Result<Token, SecurityError> {
        let fail = |reason: &str| SecurityError::new(KEY_TOKEN_FILE, Some(path), reason);
        let bytes = std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => fail("the file does not exist"),
            std::io::ErrorKind::PermissionDenied => {
                fail("the file is not readable by ferry's user")
            }
            _ => SecurityError::new(
                KEY_TOKEN_FILE,
                Some(path),
                format!("cannot read the file: {e}"),
            ),
        })?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| fail("the token must be visible ASCII characters (it is not text)"))?
            .trim();
        if text.is_empty() {
            return Err(fail("the file is empty"));
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(fail(
                "the token must be one line of visible ASCII characters (no spaces)",
            ));
        }
        if text.len() < MIN_TOKEN_LEN {
            return Err(SecurityError::new(
                KEY_TOKEN_FILE,
                Some(path),
                format!(
                    "the token is shorter than {MIN_TOKEN_LEN} characters; make one with \
                     `openssl rand -hex 32`"
                ),
            ));
        }
        let mut header = HeaderValue::from_str(&format!("Bearer {text}"))
            .map_err(|_| fail("the token must be visible ASCII characters"))?;
        header.set_sensitive(true);
        Ok(Token(Arc::from(text), header))
    }

    /// Whether `presented` is this token (constant time in its content).
    pub fn matches(&self, presented: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(self.0.as_bytes().ct_eq(presented))
    }

    /// `Bearer <token>`, marked sensitive (never logged by hyper).
    pub fn header_value(&self) -> HeaderValue {
        self.1.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    // Not a real key: a PEM block is enough for the parser's checks.
    const FAKE_KEY: &str =
        "-----BEGIN PRIVATE KEY-----\nAAAAAAAAAAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----\n";
    const FAKE_CERT: &str =
        "-----BEGIN CERTIFICATE-----\nAAAAAAAAAAAAAAAAAAAAAAAA\n-----END CERTIFICATE-----\n";

    #[test]
    fn missing_jks_and_non_pem_files_name_the_key_and_path() {
        let dir = tempfile::tempdir().unwrap();
        let sec = |keystore: PathBuf| RestSecurity {
            ssl_enabled: true,
            keystore: Some(keystore),
            ..Default::default()
        };
        let missing = dir.path().join("nope.pem");
        let e = sec(missing.clone()).server("127.0.0.1").unwrap_err();
        assert_eq!(e.key, KEY_KEYSTORE);
        let text = e.to_string();
        assert!(
            text.contains("nope.pem") && text.contains("does not exist"),
            "{text}"
        );

        let jks = write(
            dir.path(),
            "server.jks",
            &[0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2, 1, 2],
        );
        let text = sec(jks).server("127.0.0.1").unwrap_err().to_string();
        assert!(text.starts_with(KEY_KEYSTORE), "{text}");
        assert!(
            text.contains("Java KeyStore") && text.contains("PEM"),
            "{text}"
        );

        let p12 = write(dir.path(), "server.p12", &[0x30, 0x82, 0x0a, 0x01, 0x02]);
        let text = sec(p12).server("127.0.0.1").unwrap_err().to_string();
        assert!(text.contains("PKCS#12") && text.contains("PEM"), "{text}");

        let ts = write(dir.path(), "ca.jks", &[0xFE, 0xED, 0xFE, 0xED, 9]);
        let e = client_tls(Some(&ts), None, None).unwrap_err();
        assert_eq!(e.key, KEY_TRUSTSTORE);
        assert!(e.to_string().contains("ca.jks"), "{e}");
    }

    #[test]
    fn key_without_cert_and_cert_without_key_are_refused_without_showing_them() {
        let dir = tempfile::tempdir().unwrap();
        let key_only = write(dir.path(), "key.pem", FAKE_KEY.as_bytes());
        let e = RestSecurity {
            ssl_enabled: true,
            keystore: Some(key_only),
            ..Default::default()
        }
        .server("127.0.0.1")
        .unwrap_err();
        assert!(e.to_string().contains("holds no certificate"), "{e}");
        assert!(!e.to_string().contains("AAAAAAAA"), "{e}");

        let cert_only = write(dir.path(), "cert.pem", FAKE_CERT.as_bytes());
        let e = RestSecurity {
            ssl_enabled: true,
            keystore: Some(cert_only.clone()),
            ..Default::default()
        }
        .server("127.0.0.1")
        .unwrap_err();
        assert!(e.to_string().contains("holds no private key"), "{e}");

        // A separate key file without a keystore.
        let e = RestSecurity {
            private_key: Some(dir.path().join("key.pem")),
            ..Default::default()
        }
        .server("127.0.0.1")
        .unwrap_err();
        assert_eq!(e.key, KEY_PRIVATE_KEY);

        // A damaged key: rustls refuses it; the message does not quote it.
        let e = RestSecurity {
            ssl_enabled: true,
            keystore: Some(cert_only),
            private_key: Some(dir.path().join("key.pem")),
            ..Default::default()
        }
        .server("127.0.0.1")
        .unwrap_err();
        assert_eq!(e.key, KEY_PRIVATE_KEY, "{e}");
        assert!(!e.to_string().contains("AAAAAAAA"), "{e}");

        let enc = write(
            dir.path(),
            "enc.pem",
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        );
        let e = RestSecurity {
            ssl_enabled: true,
            keystore: Some(dir.path().join("cert.pem")),
            private_key: Some(enc),
            ..Default::default()
        }
        .server("127.0.0.1")
        .unwrap_err();
        assert!(e.to_string().contains("encrypted"), "{e}");

        let broken = write(
            dir.path(),
            "broken.pem",
            b"-----BEGIN CERTIFICATE-----\nSECRETLINE\n",
        );
        let e = client_tls(Some(&broken), None, None).unwrap_err();
        assert!(e.to_string().contains("not valid PEM"), "{e}");
        assert!(!e.to_string().contains("SECRETLINE"), "{e}");
    }

    #[test]
    fn combinations() {
        let e = RestSecurity {
            ssl_enabled: true,
            ..Default::default()
        }
        .server("127.0.0.1")
        .unwrap_err();
        assert_eq!(e.key, KEY_KEYSTORE);
        let e = RestSecurity {
            authentication_enabled: true,
            ..Default::default()
        }
        .server("127.0.0.1")
        .unwrap_err();
        assert_eq!(e.key, KEY_AUTHENTICATION);
        let e = RestSecurity {
            ssl_enabled: true,
            keystore: Some("/nonexistent".into()),
            authentication_enabled: true,
            ..Default::default()
        }
        .server("127.0.0.1")
        .unwrap_err();
        assert_eq!(e.key, KEY_TRUSTSTORE);
    }

    #[test]
    fn token_file_rules() {
        let dir = tempfile::tempdir().unwrap();
        let good = write(dir.path(), "t", b"0123456789abcdef0123\n");
        let t = Token::read(&good).unwrap();
        assert!(t.matches(b"0123456789abcdef0123"));
        assert!(!t.matches(b"0123456789abcdef012"));
        assert!(!t.matches(b"0123456789abcdef0124"));
        assert_eq!(format!("{t:?}"), "Token(***)");
        assert!(t.header_value().is_sensitive());
        for (content, why) in [
            (&b""[..], "empty"),
            (b"short\n", "shorter"),
            (b"0123456789 abcdef0123", "visible ASCII"),
        ] {
            let p = write(dir.path(), "bad", content);
            let e = Token::read(&p).unwrap_err();
            assert!(e.to_string().contains(why), "{e}");
            assert!(e.to_string().starts_with(KEY_TOKEN_FILE), "{e}");
        }
        let e = Token::read(&dir.path().join("missing")).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");

        // A token without TLS: fine on loopback, refused on a network address.
        let sec = RestSecurity {
            token_file: Some(good),
            ..Default::default()
        };
        assert!(sec.server("127.0.0.1").unwrap().token.is_some());
        assert!(sec.server("localhost").is_ok());
        assert!(sec.server("::1").is_ok());
        let e = sec.server("0.0.0.0").unwrap_err();
        assert!(e.to_string().contains("clear text"), "{e}");
        assert!(!e.to_string().contains("0123456789abcdef"), "{e}");
    }
}
