//! The Kerberos login of a ZooKeeper session that authenticates with SASL
//! GSSAPI (`zookeeper.sasl.*`, `security.kerberos.login.*`).
//!
//! The ZooKeeper client's GSSAPI mechanism takes the process's *default*
//! credentials (it cannot be handed a credential), so with a keytab this
//! process's defaults are pointed at the login, once, before the first
//! session: `KRB5CCNAME` names a private in-memory ticket cache
//! (`MEMORY:ferry-zk-<pid>`, never a file another process could read) and
//! `KRB5_CLIENT_KTNAME` the keytab. Before every connection
//! [`Login::refresh`] acquires the principal's initiator credentials:
//! MIT's GSSAPI logs in from the client keytab into that cache when it is
//! empty, expired or past its refresh time (half the ticket's lifetime),
//! so every new connection (the only time ZooKeeper authenticates) has a
//! valid ticket however long the job runs. Without a keytab the tickets
//! come from the ticket cache (`KRB5CCNAME` or the default one), which
//! something else (`kinit -R`, k5start) keeps fresh.
//!
//! The Kudu clients are not affected: with a keytab they keep their own
//! in-memory caches (`kudu_client::Kerberos`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ferry_engine::config::ZooKeeperSasl;
use libgssapi::credential::{Cred, CredUsage};
use libgssapi::error::MajorFlags;
use libgssapi::name::Name;
use libgssapi::oid::{OidSet, GSS_MECH_KRB5, GSS_NT_KRB5_PRINCIPAL};

use crate::ZkError;

/// The keytab this process's GSSAPI defaults point at.
static PROCESS_KEYTAB: OnceLock<PathBuf> = OnceLock::new();
/// The principal whose ticket the default cache holds (set by the first
/// login that succeeds: a wrong principal claims nothing).
static PROCESS_PRINCIPAL: OnceLock<String> = OnceLock::new();

/// The Kerberos login of one ZooKeeper lease.
#[derive(Debug, Clone)]
pub(crate) struct Login {
    principal: String,
    keytab: Option<PathBuf>,
}

impl Login {
    pub(crate) fn new(sasl: &ZooKeeperSasl) -> Self {
        Login {
            principal: sasl.principal.clone(),
            keytab: sasl.keytab.clone(),
        }
    }

    /// Acquires the principal's credentials (logging in from the keytab
    /// when the ticket is missing or due), so the session's GSSAPI finds
    /// them. Blocking: may talk to the KDC.
    pub(crate) fn refresh(&self) -> Result<(), ZkError> {
        if let Some(keytab) = &self.keytab {
            // GSSAPI would only say "no credentials"; name the file.
            if let Err(e) = std::fs::File::open(keytab) {
                return Err(ZkError::Keytab {
                    keytab: keytab.clone(),
                    source: e,
                });
            }
            point_defaults_at(keytab)?;
            self.same_principal()?;
        }
        let failed = |source: libgssapi::error::Error| {
            let no_cred = source.major.contains(MajorFlags::GSS_S_NO_CRED);
            ZkError::Login {
                principal: self.principal.clone(),
                from: match (&self.keytab, no_cred) {
                    (Some(k), true) => format!(
                        "keytab {} (does it hold keys for this principal? klist -kt {})",
                        k.display(),
                        k.display()
                    ),
                    (Some(k), false) => format!("keytab {}", k.display()),
                    (None, _) => "the ticket cache (KRB5CCNAME)".to_string(),
                },
                source,
            }
        };
        let name =
            Name::new(self.principal.as_bytes(), Some(GSS_NT_KRB5_PRINCIPAL)).map_err(failed)?;
        let mechs = OidSet::singleton(GSS_MECH_KRB5).map_err(failed)?;
        Cred::acquire(Some(&name), None, CredUsage::Initiate, Some(&mechs)).map_err(failed)?;
        if self.keytab.is_some() {
            PROCESS_PRINCIPAL.get_or_init(|| self.principal.clone());
            self.same_principal()?;
        }
        Ok(())
    }

    /// The default cache holds one principal's tickets: a second one
    /// would authenticate as the first.
    fn same_principal(&self) -> Result<(), ZkError> {
        match PROCESS_PRINCIPAL.get() {
            Some(held) if *held != self.principal => Err(ZkError::SecondLogin {
                held: held.clone(),
                asked: self.principal.clone(),
            }),
            _ => Ok(()),
        }
    }
}

/// Points this process's GSSAPI defaults at the keytab (once; another
/// keytab in the same process is refused: the defaults are process-wide).
fn point_defaults_at(keytab: &Path) -> Result<(), ZkError> {
    let held = PROCESS_KEYTAB.get_or_init(|| {
        // Set once per process, before its first ZooKeeper session. In
        // `ferry run` / `standby` / `failover` that comes before any Kudu
        // client (whose GSSAPI reads the environment from other threads)
        // exists; in `ferry server` a later job's may race one getenv.
        std::env::set_var(
            "KRB5CCNAME",
            format!("MEMORY:ferry-zk-{}", std::process::id()),
        );
        std::env::set_var("KRB5_CLIENT_KTNAME", format!("FILE:{}", keytab.display()));
        keytab.to_path_buf()
    });
    if held != keytab {
        return Err(ZkError::SecondLogin {
            held: format!("keytab {}", held.display()),
            asked: format!("keytab {}", keytab.display()),
        });
    }
    Ok(())
}
