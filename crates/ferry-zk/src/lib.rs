//! ferry's HA lease on Apache ZooKeeper (`high-availability.type
//! zookeeper`): a [`LeaseBackend`](ferry_engine::lease::LeaseBackend) that
//! keeps the lease records of one job as persistent znodes
//!
//! ```text
//! <high-availability.zookeeper.path.root>/<cluster-id>/<job-id>/lease        data: newest position
//! <high-availability.zookeeper.path.root>/<cluster-id>/<job-id>/lease/seq-<k> data: the record (JSON)
//! ```
//!
//! - [`ZooKeeperLease`]: the backend. A write at position k is one
//!   ZooKeeper transaction (`multi`): set the lease znode's data to k at
//!   the version read with it (its data named a position below k), and
//!   create `seq-<k>`. Racing writers for one position (or a writer behind
//!   a later one) fail the version check, so exactly one wins and the
//!   others read the winner. The lease protocol, its generations and the
//!   fence stay in the engine ([`ferry_engine::lease`]).
//! - `session`: one ZooKeeper session with Flink's client keys
//!   (`high-availability.zookeeper.client.*`), replaced when the server
//!   expires it.
//!
//! The records are persistent, not ephemeral: the lease outlives a
//! holder's session (a paused holder is fenced by the generation its
//! successor wrote, not by ZooKeeper deleting its node), so a session
//! expiry never hands the job to two writers.
//!
//! - `kerberos`: with `security.kerberos.login.contexts Client`, the
//!   session authenticates with SASL GSSAPI as the keytab login (and
//!   `client.acl creator` makes the znodes `sasl:<principal>`'s alone).

mod backend;
mod kerberos;
mod session;

pub use backend::ZooKeeperLease;
pub use session::ConnectFailure;

use std::path::PathBuf;
use std::time::Duration;

/// A failed ZooKeeper call (the source of a
/// [`LeaseError::Service`](ferry_engine::lease::LeaseError)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZkError {
    /// No session could be established.
    #[error("no ZooKeeper server of the quorum gave a session ({attempts} attempts)")]
    Connect {
        /// Attempts made (1 + `client.max-retry-attempts`).
        attempts: u32,
        /// Why the last one failed.
        #[source]
        source: ConnectFailure,
    },
    /// A request got no answer within the connection timeout.
    #[error("ZooKeeper did not answer within {0:?}")]
    NoAnswer(Duration),
    /// ZooKeeper answered with an error.
    #[error(transparent)]
    Request(zookeeper_client::Error),
    /// `client.acl creator` on a session without an authenticated identity.
    #[error(
        "ZooKeeper refused the ACL 'creator': the session has no authenticated identity \
         (give ferry a Kerberos login for ZooKeeper with security.kerberos.login.contexts \
         Client, or set high-availability.zookeeper.client.acl to open)"
    )]
    CreatorNeedsAuthentication,
    /// The quorum closed a session that did not authenticate.
    #[error(
        "the ZooKeeper quorum requires authentication (SASL) and this session has none: give \
         ferry a Kerberos login for ZooKeeper (security.kerberos.login.principal, \
         security.kerberos.login.keytab, security.kerberos.login.contexts Client; docs/security.md)"
    )]
    AuthenticationRequired,
    /// The quorum refused the SASL authentication of `principal`.
    #[error("the ZooKeeper quorum refused the Kerberos (SASL) authentication of {principal}")]
    AuthenticationRefused {
        /// The principal ferry authenticated as.
        principal: String,
    },
    /// The keytab of the ZooKeeper login cannot be read.
    #[error("cannot read the keytab {} of the ZooKeeper login", keytab.display())]
    Keytab {
        /// `security.kerberos.login.keytab`.
        keytab: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No Kerberos credentials for the ZooKeeper login.
    #[error("cannot log in to Kerberos as {principal} from {from} for ZooKeeper")]
    Login {
        /// `security.kerberos.login.principal`.
        principal: String,
        /// The keytab or ticket cache, with a hint.
        from: String,
        /// GSSAPI's error.
        #[source]
        source: libgssapi::error::Error,
    },
    /// The blocking login task died (panicked or was cancelled).
    #[error("the ZooKeeper Kerberos login task failed: {0}")]
    LoginTask(String),
    /// A second keytab login for ZooKeeper in one process.
    #[error(
        "this process already authenticates to ZooKeeper as {held}; one process has one \
         ZooKeeper login (asked for {asked}: run that job in its own process)"
    )]
    SecondLogin {
        /// The login in use.
        held: String,
        /// The login asked for.
        asked: String,
    },
}
