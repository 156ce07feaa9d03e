//! Kerberos: credentials from a keytab or a ticket cache, and the SASL
//! GSSAPI mechanism (RFC 4752) as Kudu servers run it, on the system's
//! MIT GSSAPI library (`libgssapi_krb5`, through the `libgssapi` crate).
//!
//! **Credentials.** With a keytab, [`Kerberos`] acquires initiator
//! credentials through `gss_acquire_cred_from` with the keytab as the
//! *client keytab* and a private in-memory ticket cache: MIT's GSSAPI then
//! logs in from the keytab by itself whenever the ticket cache is empty,
//! expired or past its refresh time (half the ticket's lifetime), so a
//! job that runs for months never holds an expired ticket. Without a
//! keytab the credentials come from a ticket cache (`KRB5CCNAME` or the
//! default one), which something else (`kinit -R`, k5start) keeps fresh.
//! Every new connection asks for the credentials again, and a connection
//! refused because a ticket expired is retried once with credentials
//! acquired from scratch.
//!
//! **SASL GSSAPI.** The security context is established with mutual
//! authentication against `<service>@<host>` (`kudu/<host>@REALM`). Then
//! the server offers its security layers in a wrapped 4-byte message and
//! the client picks one: Kudu clients always ask for integrity protection
//! (the server wraps its channel bindings and the client wraps the server's
//! nonce with it), confidentiality being TLS's job. Wrapped messages after
//! the handshake carry a 4-byte big-endian length, as Cyrus SASL's
//! `sasl_encode` writes them.
//!
//! GSSAPI calls that may talk to the KDC block, so callers run
//! `Kerberos::start` and `SaslGssapi::respond` on a blocking thread.

use std::ffi::CString;
use std::os::raw::c_void;
use std::path::PathBuf;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use libgssapi::context::{ClientCtx, CtxFlags, SecurityContext};
use libgssapi::credential::Cred;
use libgssapi::error::{Error as GssError, MajorFlags};
use libgssapi::name::Name;
use libgssapi::oid::{GSS_MECH_KRB5, GSS_NT_HOSTBASED_SERVICE};
use libgssapi_sys::{
    gss_OID_desc, gss_acquire_cred_from, gss_buffer_desc, gss_cred_id_t, gss_import_name,
    gss_key_value_element_desc, gss_key_value_set_desc, gss_name_t, gss_release_name, OM_uint32,
    GSS_C_INITIATE, GSS_S_COMPLETE,
};

/// SASL GSSAPI security layers (RFC 4752 §3.3).
const LAYER_NONE: u8 = 1;
const LAYER_INTEGRITY: u8 = 2;
const LAYER_CONFIDENTIALITY: u8 = 4;
/// The largest wrapped message we accept, announced to the server.
const MAX_BUFFER: u32 = 1 << 20;

/// How to log in to Kerberos.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KerberosOptions {
    /// The client principal, e.g. `etl@EXAMPLE.COM`. `None`: the ticket
    /// cache's (or the keytab's first) principal.
    pub principal: Option<String>,
    /// A keytab to log in from (and to log in again from before tickets
    /// expire). `None`: use a ticket cache.
    pub keytab: Option<PathBuf>,
    /// A ticket cache name (`FILE:/tmp/krb5cc_1000`, ...). `None`: a
    /// private in-memory cache with a keytab, else `KRB5CCNAME` or the
    /// system default.
    pub ticket_cache: Option<String>,
    /// The servers' service name: Kudu daemons run as `kudu/<host>`.
    pub service_name: String,
}

impl Default for KerberosOptions {
    fn default() -> Self {
        KerberosOptions {
            principal: None,
            keytab: None,
            ticket_cache: None,
            service_name: "kudu".to_owned(),
        }
    }
}

impl KerberosOptions {
    /// Logs in as `principal` (e.g. `etl@EXAMPLE.COM`).
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Logs in from the keytab at `path`, again before tickets expire.
    pub fn keytab(mut self, path: impl Into<PathBuf>) -> Self {
        self.keytab = Some(path.into());
        self
    }

    /// Uses the ticket cache `name` (`FILE:/tmp/krb5cc_1000`, ...).
    pub fn ticket_cache(mut self, name: impl Into<String>) -> Self {
        self.ticket_cache = Some(name.into());
        self
    }

    /// The servers' Kerberos service name (default `kudu`).
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = name.into();
        self
    }
}

/// A failed Kerberos step, with GSSAPI's explanation. The text is taken on
/// the thread that made the call: MIT keeps its detailed messages ("Client
/// not found in Kerberos database", "Clock skew too great") per thread.
#[derive(Debug, Clone)]
pub(crate) struct KerberosError {
    pub(crate) message: String,
}

impl KerberosError {
    fn gss(what: impl std::fmt::Display, e: GssError) -> Self {
        let mut text = e.to_string().trim().to_owned();
        if e.major.contains(MajorFlags::GSS_S_CREDENTIALS_EXPIRED) && !text.contains("expired") {
            // Lets the connection retry with credentials acquired anew.
            text.push_str(" (credentials expired)");
        }
        KerberosError {
            message: format!("{what}: {text}"),
        }
    }

    fn protocol(message: impl Into<String>) -> Self {
        KerberosError {
            message: message.into(),
        }
    }
}

impl std::fmt::Display for KerberosError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A Kerberos login shared by every connection of a client.
#[derive(Debug)]
pub struct Kerberos {
    opts: KerberosOptions,
    /// The in-memory ticket cache used with a keytab (one per login, so
    /// two clusters' principals never share tickets).
    memory_cache: String,
    cred: Mutex<Option<Cred>>,
}

impl Kerberos {
    /// A login with `opts`; nothing is contacted until a connection needs it.
    pub fn new(opts: KerberosOptions) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let memory_cache = format!(
            "MEMORY:kudu-client-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        Kerberos {
            opts,
            memory_cache,
            cred: Mutex::new(None),
        }
    }

    /// The options this login was made with.
    pub fn options(&self) -> &KerberosOptions {
        &self.opts
    }

    /// Who we log in as, for messages.
    pub(crate) fn describe(&self) -> String {
        let who = self
            .opts
            .principal
            .as_deref()
            .unwrap_or("the default principal");
        match &self.opts.keytab {
            Some(k) => format!("{who} (keytab {})", k.display()),
            None => format!("{who} (ticket cache)"),
        }
    }

    /// Starts SASL GSSAPI with the server at `host`: the security context's
    /// first token (blocking: may fetch tickets from the KDC). `fresh`
    /// drops cached credentials first.
    pub(crate) fn start(
        &self,
        host: &str,
        fresh: bool,
    ) -> Result<(SaslGssapi, Vec<u8>), KerberosError> {
        let cred = self.credentials(fresh)?;
        let target = format!("{}@{host}", self.opts.service_name);
        let name = Name::new(target.as_bytes(), Some(GSS_NT_HOSTBASED_SERVICE))
            .map_err(|e| KerberosError::gss(format_args!("bad service name '{target}'"), e))?;
        let flags = CtxFlags::GSS_C_MUTUAL_FLAG
            | CtxFlags::GSS_C_SEQUENCE_FLAG
            | CtxFlags::GSS_C_INTEG_FLAG
            | CtxFlags::GSS_C_CONF_FLAG;
        let mut ctx = ClientCtx::new(Some(cred), name, flags, Some(GSS_MECH_KRB5));
        let first = ctx
            .step(None, None)
            .map_err(|e| {
                KerberosError::gss(
                    format_args!(
                        "cannot get a Kerberos service ticket for {target} as {}",
                        self.describe()
                    ),
                    e,
                )
            })?
            .map(|b| b.to_vec())
            .unwrap_or_default();
        Ok((
            SaslGssapi {
                ctx,
                layer: None,
                target,
            },
            first,
        ))
    }

    fn credentials(&self, fresh: bool) -> Result<Cred, KerberosError> {
        let mut cached = self
            .cred
            .lock()
            .map_err(|_| KerberosError::protocol("Kerberos credential lock poisoned"))?;
        if fresh {
            *cached = None;
        }
        if let Some(c) = cached.as_ref() {
            return Ok(c.clone());
        }
        let cache = match (&self.opts.ticket_cache, &self.opts.keytab) {
            (Some(c), _) => Some(c.as_str()),
            (None, Some(_)) => Some(self.memory_cache.as_str()),
            (None, None) => None,
        };
        if let Some(k) = &self.opts.keytab {
            // GSSAPI's own message for a missing keytab is only "No
            // Kerberos credentials available"; name the file instead.
            if let Err(e) = std::fs::metadata(k) {
                return Err(KerberosError::protocol(format!(
                    "cannot read keytab {}: {e}",
                    k.display()
                )));
            }
        }
        let keytab = self
            .opts
            .keytab
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned());
        let cred =
            acquire(self.opts.principal.as_deref(), keytab.as_deref(), cache).map_err(|e| {
                let no_cred = e.major.contains(MajorFlags::GSS_S_NO_CRED);
                let mut err =
                    KerberosError::gss(format_args!("cannot log in as {}", self.describe()), e);
                // GSSAPI only says "no credentials" when the keytab lacks
                // the principal's keys; say where to look.
                if let (Some(k), true) = (&keytab, no_cred) {
                    err.message.push_str(&format!(
                        "; does the keytab hold keys for this principal? (klist -kt {k})"
                    ));
                }
                err
            })?;
        *cached = Some(cred.clone());
        Ok(cred)
    }
}

/// The client side of one SASL GSSAPI exchange.
pub(crate) struct SaslGssapi {
    ctx: ClientCtx,
    /// The security layer chosen, once negotiated.
    layer: Option<u8>,
    target: String,
}

impl std::fmt::Debug for SaslGssapi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslGssapi")
            .field("target", &self.target)
            .field("layer", &self.layer)
            .finish_non_exhaustive()
    }
}

impl SaslGssapi {
    /// Answers one SASL_CHALLENGE token (blocking while the context is
    /// being established).
    pub(crate) fn respond(&mut self, challenge: &[u8]) -> Result<Vec<u8>, KerberosError> {
        if !self.ctx.is_complete() {
            let out = self.ctx.step(Some(challenge), None).map_err(|e| {
                KerberosError::gss(
                    format_args!("mutual authentication with {} failed", self.target),
                    e,
                )
            })?;
            // Once complete with nothing to say, the answer is empty: the
            // server then offers its security layers.
            return Ok(out.map(|b| b.to_vec()).unwrap_or_default());
        }
        let offer = self.ctx.unwrap(challenge).map_err(|e| {
            KerberosError::gss("cannot unwrap the server's security layer offer", e)
        })?;
        let layer = choose_layer(&offer)?;
        let mut answer = Vec::with_capacity(4);
        answer.push(layer);
        answer.extend_from_slice(&MAX_BUFFER.to_be_bytes()[1..]);
        let wrapped = self
            .ctx
            .wrap(false, &answer)
            .map_err(|e| KerberosError::gss("cannot wrap the security layer choice", e))?;
        self.layer = Some(layer);
        Ok(wrapped.to_vec())
    }

    /// Undoes the server's `sasl_encode` (length prefix + wrap).
    pub(crate) fn decode(&mut self, data: &[u8]) -> Result<Vec<u8>, KerberosError> {
        match self.layer {
            Some(LAYER_INTEGRITY) | Some(LAYER_CONFIDENTIALITY) => {
                let body = strip_length(data)?;
                let plain = self
                    .ctx
                    .unwrap(body)
                    .map_err(|e| KerberosError::gss("cannot unwrap a server message", e))?;
                Ok(plain.to_vec())
            }
            _ => Ok(data.to_vec()),
        }
    }

    /// `sasl_encode`: wrap with the chosen layer, then a length prefix.
    pub(crate) fn encode(&mut self, data: &[u8]) -> Result<Vec<u8>, KerberosError> {
        let encrypt = match self.layer {
            Some(LAYER_INTEGRITY) => false,
            Some(LAYER_CONFIDENTIALITY) => true,
            _ => return Ok(data.to_vec()),
        };
        let wrapped = self
            .ctx
            .wrap(encrypt, data)
            .map_err(|e| KerberosError::gss("cannot wrap a message for the server", e))?;
        let len = u32::try_from(wrapped.len())
            .map_err(|_| KerberosError::protocol("wrapped message too long"))?;
        let mut out = Vec::with_capacity(4 + wrapped.len());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&wrapped);
        Ok(out)
    }
}

/// Integrity if offered (what Kudu's clients ask for; TLS encrypts), else
/// confidentiality, else none.
fn choose_layer(offer: &[u8]) -> Result<u8, KerberosError> {
    if offer.len() != 4 {
        return Err(KerberosError::protocol(format!(
            "the server's security layer offer has {} bytes, not 4",
            offer.len()
        )));
    }
    let layers = offer[0];
    [LAYER_INTEGRITY, LAYER_CONFIDENTIALITY, LAYER_NONE]
        .into_iter()
        .find(|l| layers & l != 0)
        .ok_or_else(|| {
            KerberosError::protocol(format!("the server offers no security layer ({layers:#x})"))
        })
}

fn strip_length(data: &[u8]) -> Result<&[u8], KerberosError> {
    let (len, body) = data
        .split_first_chunk::<4>()
        .ok_or_else(|| KerberosError::protocol("wrapped message shorter than its length"))?;
    if u32::from_be_bytes(*len) as usize != body.len() {
        return Err(KerberosError::protocol(
            "wrapped message length does not match its prefix",
        ));
    }
    Ok(body)
}

/// `gss_acquire_cred_from` for initiating, with the client keytab and
/// ticket cache given explicitly (the `libgssapi` crate wraps only
/// `gss_acquire_cred`, which reads both from process-wide settings; two
/// clusters with two principals need two).
// Long on purpose: the C strings, OID, name and key/value store the call
// points into must all live in this one frame (see the SAFETY notes).
fn acquire(
    principal: Option<&str>,
    client_keytab: Option<&str>,
    ccache: Option<&str>,
) -> Result<Cred, GssError> {
    let fail = |major: OM_uint32, minor: OM_uint32| GssError {
        major: MajorFlags::from_bits_retain(major),
        minor,
    };
    // The strings must outlive the call; CString::new only fails on an
    // interior NUL, which no keytab path or cache name has.
    let bad = || fail(libgssapi_sys::_GSS_S_BAD_NAME, 0);
    let keys = [
        client_keytab
            .map(|k| Ok::<_, GssError>((c"client_keytab", CString::new(k).map_err(|_| bad())?)))
            .transpose()?,
        ccache
            .map(|c| Ok::<_, GssError>((c"ccache", CString::new(c).map_err(|_| bad())?)))
            .transpose()?,
    ];
    let mut elements: Vec<gss_key_value_element_desc> = keys
        .iter()
        .flatten()
        .map(|(k, v)| gss_key_value_element_desc {
            key: k.as_ptr(),
            value: v.as_ptr(),
        })
        .collect();
    let store = gss_key_value_set_desc {
        count: elements.len() as OM_uint32,
        elements: elements.as_mut_ptr(),
    };
    // 1.2.840.113554.1.2.2.1, GSS_KRB5_NT_PRINCIPAL_NAME.
    let mut principal_oid_bytes = *b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01";
    let mut principal_oid = gss_OID_desc {
        length: principal_oid_bytes.len() as OM_uint32,
        elements: principal_oid_bytes.as_mut_ptr().cast::<c_void>(),
    };
    let mut minor: OM_uint32 = 0;
    let mut name: gss_name_t = ptr::null_mut();
    if let Some(p) = principal {
        let mut buf = gss_buffer_desc {
            length: p.len(),
            value: p.as_ptr() as *mut c_void,
        };
        // SAFETY: `buf` points at `p`'s bytes for the call's duration (GSSAPI
        // copies them, never writes through it), `principal_oid` and its
        // bytes live on this stack frame, and `name` is an out-parameter
        // that is either left null or set to a name we release below.
        let major = unsafe { gss_import_name(&mut minor, &mut buf, &mut principal_oid, &mut name) };
        if major != GSS_S_COMPLETE {
            return Err(fail(major, minor));
        }
    }
    let mut cred: gss_cred_id_t = ptr::null_mut();
    // SAFETY: `name` is null (default principal) or the name imported
    // above; `store` points at `elements`, whose key/value pointers point
    // into `keys`' CStrings, all alive until after the call; a null OID
    // set means the default mechanisms; `cred` is an out-parameter that
    // the call sets only on success; the two trailing out-parameters may
    // be null (not wanted).
    let major = unsafe {
        gss_acquire_cred_from(
            &mut minor,
            name,
            0xffff_ffff, // GSS_C_INDEFINITE: as long as the tickets allow
            ptr::null_mut(),
            GSS_C_INITIATE as i32,
            &store,
            &mut cred,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    if !name.is_null() {
        let mut release_minor: OM_uint32 = 0;
        // SAFETY: `name` came from gss_import_name above and is released
        // exactly once; GSSAPI sets it back to null.
        unsafe { gss_release_name(&mut release_minor, &mut name) };
    }
    if major != GSS_S_COMPLETE {
        return Err(fail(major, minor));
    }
    // SAFETY: on success `cred` is a credential handle that nothing else
    // owns; `Cred` releases it once, when its last clone drops.
    Ok(unsafe { Cred::from_c(cred) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrity_is_preferred_then_confidentiality_then_none() {
        assert_eq!(choose_layer(&[7, 0, 16, 0]).ok(), Some(LAYER_INTEGRITY));
        assert_eq!(
            choose_layer(&[4, 0, 16, 0]).ok(),
            Some(LAYER_CONFIDENTIALITY)
        );
        assert_eq!(choose_layer(&[1, 0, 0, 0]).ok(), Some(LAYER_NONE));
        assert!(choose_layer(&[0, 0, 0, 0]).is_err());
        assert!(choose_layer(&[2, 0, 0]).is_err());
    }

    #[test]
    fn length_prefixes_must_match() {
        assert_eq!(strip_length(&[0, 0, 0, 2, 9, 9]).ok(), Some(&[9u8, 9][..]));
        assert!(strip_length(&[0, 0, 0, 3, 9, 9]).is_err());
        assert!(strip_length(&[0, 0]).is_err());
    }

    #[test]
    fn a_missing_keytab_is_named_without_contacting_a_kdc() {
        let k = Kerberos::new(KerberosOptions {
            principal: Some("client@NOWHERE.TEST".into()),
            keytab: Some("/nonexistent/client.keytab".into()),
            ..Default::default()
        });
        let err = k.start("127.0.0.1", false).err().map(|e| e.message);
        let err = err.unwrap_or_default();
        assert!(err.contains("/nonexistent/client.keytab"), "{err}");
    }

    /// Exercises the raw `gss_acquire_cred_from` call (principal import,
    /// key-value store, release) without a KDC: acquiring from a ticket
    /// cache that holds nothing fails cleanly with GSSAPI's own error.
    #[test]
    fn acquiring_from_an_empty_cache_fails_cleanly() {
        let dir = std::env::temp_dir().join(format!("kc-krb-{}", std::process::id()));
        let cache = format!("FILE:{}", dir.join("none").display());
        let err = acquire(Some("client@NOWHERE.TEST"), None, Some(&cache));
        assert!(err.is_err());
        let err = acquire(None, None, Some(&cache));
        assert!(err.is_err());
    }
}
