//! Authentication tokens: after a client authenticates to the leader
//! master with Kerberos over TLS, `ConnectToMaster` returns a signed
//! token (valid 7 days by default) and the cluster's CA certificates.
//! Connections to tablet servers then offer the token instead of
//! Kerberos, and verify the server's certificate against those CA
//! certificates (the token is a bearer credential: it must only go to a
//! server the cluster vouches for). Masters always get Kerberos, so a
//! fresh token can be fetched from them.
//!
//! A token close to expiry is not offered (the connection falls back to
//! Kerberos), and a refresh is due once a quarter of its validity is left;
//! the master proxy then asks the leader again. A server that rejects a
//! token (`FATAL_INVALID_AUTHENTICATION_TOKEN`, e.g. after the masters'
//! signing keys rotated) gets it dropped, and the connection is retried
//! with Kerberos.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::Message;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use crate::pb::security::{SignedTokenPb, TokenPb};

/// Tokens this close to expiry are not offered any more.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// Fewest seconds between two token refreshes.
const REFRESH_INTERVAL: Duration = Duration::from_secs(60);

/// A token ready to offer, with the TLS configuration that verifies the
/// servers it may be offered to.
#[derive(Debug, Clone)]
pub(crate) struct TokenCredentials {
    pub(crate) token: SignedTokenPb,
    pub(crate) tls: Arc<ClientConfig>,
}

#[derive(Debug)]
struct Held {
    creds: TokenCredentials,
    received: SystemTime,
    expires: SystemTime,
}

/// The token of one client, shared by all its connections (opaque: the
/// client fills and uses it).
#[derive(Debug)]
pub(crate) struct TokenStore {
    masters: HashSet<String>,
    held: RwLock<Option<Held>>,
    last_refresh: Mutex<Option<Instant>>,
}

impl TokenStore {
    /// A store for a client of the masters at `masters` (never offered
    /// tokens).
    pub(crate) fn new(masters: &[String]) -> Self {
        TokenStore {
            masters: masters.iter().cloned().collect(),
            held: RwLock::new(None),
            last_refresh: Mutex::new(None),
        }
    }

    /// Keeps the token and CA certificates of a `ConnectToMaster` answer.
    /// Answers without either (followers, non-TLS connections) change
    /// nothing.
    pub(crate) fn update(&self, token: Option<&SignedTokenPb>, ca_certs: &[Vec<u8>]) {
        let (Some(token), false) = (token, ca_certs.is_empty()) else {
            return;
        };
        let expires = match token
            .token_data
            .as_deref()
            .and_then(|d| TokenPb::decode(d).ok())
            .and_then(|t| t.expire_unix_epoch_seconds)
            .and_then(|s| u64::try_from(s).ok())
        {
            Some(s) => UNIX_EPOCH + Duration::from_secs(s),
            None => {
                tracing::warn!("the master's authentication token has no expiry; not using it");
                return;
            }
        };
        let tls = match crate::rpc::tls::verifying_config(ca_certs) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "the cluster's CA certificates are unusable; not using tokens");
                return;
            }
        };
        let held = Held {
            creds: TokenCredentials {
                token: token.clone(),
                tls,
            },
            received: SystemTime::now(),
            expires,
        };
        tracing::debug!(
            valid_for = ?expires.duration_since(SystemTime::now()).unwrap_or_default(),
            "received an authentication token"
        );
        if let Ok(mut h) = self.held.write() {
            *h = Some(held);
        }
    }

    /// The token to offer `addr`, if any: none for masters, none when the
    /// token is about to expire.
    pub(crate) fn for_server(&self, addr: &str) -> Option<TokenCredentials> {
        if self.masters.contains(addr) {
            return None;
        }
        let held = self.held.read().ok()?;
        let h = held.as_ref()?;
        (SystemTime::now() + EXPIRY_MARGIN < h.expires).then(|| h.creds.clone())
    }

    /// [`refresh_due`](Self::refresh_due), at most once a minute: masters
    /// that issue no token (no TLS) are not asked on every call.
    pub(crate) fn take_refresh_due(&self) -> bool {
        if !self.refresh_due() {
            return false;
        }
        let Ok(mut last) = self.last_refresh.lock() else {
            return false;
        };
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < REFRESH_INTERVAL) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// Whether a new token should be fetched: none yet, or less than a
    /// quarter of its validity left.
    pub(crate) fn refresh_due(&self) -> bool {
        let Ok(held) = self.held.read() else {
            return false;
        };
        match held.as_ref() {
            None => true,
            Some(h) => {
                let validity = h.expires.duration_since(h.received).unwrap_or_default();
                SystemTime::now() + validity / 4 >= h.expires
            }
        }
    }

    /// Forgets the current token after a server rejected it.
    pub(crate) fn invalidate_current(&self) {
        if let Ok(mut held) = self.held.write() {
            *held = None;
        }
    }

    /// Forgets `token` after a server rejected it (unless a newer one
    /// replaced it meanwhile).
    #[cfg(test)]
    fn invalidate(&self, token: &SignedTokenPb) {
        if let Ok(mut held) = self.held.write() {
            if held.as_ref().is_some_and(|h| &h.creds.token == token) {
                *held = None;
            }
        }
    }
}

/// The CA certificates as a rustls root store.
pub(crate) fn root_store(ca_certs: &[Vec<u8>]) -> Result<RootCertStore, rustls::Error> {
    let mut roots = RootCertStore::empty();
    for der in ca_certs {
        roots
            .add(CertificateDer::from(der.clone()))
            .map_err(|e| rustls::Error::General(format!("cluster CA certificate: {e}")))?;
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(expires_in: i64) -> SignedTokenPb {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        SignedTokenPb {
            token_data: Some(
                TokenPb {
                    expire_unix_epoch_seconds: Some(now + expires_in),
                }
                .encode_to_vec(),
            ),
            signature: Some(vec![1, 2, 3]),
            signing_key_seq_num: Some(1),
        }
    }

    fn held(store: &TokenStore, t: SignedTokenPb, received_ago: Duration) {
        let expires = t
            .token_data
            .as_deref()
            .and_then(|d| TokenPb::decode(d).ok())
            .and_then(|p| p.expire_unix_epoch_seconds)
            .map(|s| UNIX_EPOCH + Duration::from_secs(s as u64))
            .unwrap_or(UNIX_EPOCH);
        let tls = crate::rpc::tls::client_config().expect("config");
        *store.held.write().expect("lock") = Some(Held {
            creds: TokenCredentials { token: t, tls },
            received: SystemTime::now() - received_ago,
            expires,
        });
    }

    #[test]
    fn masters_never_get_the_token() {
        let store = TokenStore::new(&["m:7051".to_owned()]);
        held(&store, token(3600), Duration::ZERO);
        assert!(store.for_server("m:7051").is_none());
        assert!(store.for_server("t:7050").is_some());
    }

    #[test]
    fn tokens_about_to_expire_are_not_offered_and_are_due_for_refresh() {
        let store = TokenStore::new(&[]);
        assert!(store.refresh_due(), "no token yet");
        held(&store, token(3600), Duration::from_secs(60));
        assert!(!store.refresh_due());
        assert!(store.for_server("t:7050").is_some());
        // 100 s of a 400 s validity left: a quarter, refresh due.
        held(&store, token(100), Duration::from_secs(300));
        assert!(store.refresh_due());
        assert!(store.for_server("t:7050").is_some());
        held(&store, token(10), Duration::from_secs(300));
        assert!(
            store.for_server("t:7050").is_none(),
            "inside the expiry margin"
        );
    }

    #[test]
    fn a_rejected_token_is_dropped_but_not_a_newer_one() {
        let store = TokenStore::new(&[]);
        let old = token(3600);
        let new = token(7200);
        held(&store, new.clone(), Duration::ZERO);
        store.invalidate(&old);
        assert!(store.for_server("t:7050").is_some());
        store.invalidate(&new);
        assert!(store.for_server("t:7050").is_none());
    }

    #[test]
    fn answers_without_token_or_ca_change_nothing() {
        let store = TokenStore::new(&[]);
        store.update(Some(&token(3600)), &[]);
        store.update(None, &[vec![1]]);
        assert!(store.for_server("t:7050").is_none());
    }
}
