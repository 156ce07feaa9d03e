//! One ZooKeeper session, kept alive across server outages: connecting
//! (with `client.connection-timeout`, `client.retry-wait` and
//! `client.max-retry-attempts`), bounding each call by the connection
//! timeout, and replacing a session the server expired or closed. With
//! SASL every connection authenticates with GSSAPI, its credentials
//! refreshed first ([`Login`]).

use std::future::Future;
use std::time::Duration;

use ferry_engine::config::ZooKeeperConfig;
use tokio::sync::Mutex;
use zookeeper_client::{Client, SaslOptions, SessionState};

use crate::kerberos::Login;
use crate::ZkError;

/// A lazily connected client that replaces its session when it ends.
#[derive(Debug)]
pub(crate) struct Session {
    config: ZooKeeperConfig,
    login: Option<Login>,
    client: Mutex<Option<Client>>,
}

impl Session {
    pub(crate) fn new(config: ZooKeeperConfig) -> Self {
        Session {
            login: config.sasl.as_ref().map(Login::new),
            config,
            client: Mutex::new(None),
        }
    }

    pub(crate) fn config(&self) -> &ZooKeeperConfig {
        &self.config
    }

    /// The session's client, connecting (again) when there is none or the
    /// last one ended (expired, closed, refused authentication).
    pub(crate) async fn client(&self) -> Result<Client, ZkError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref() {
            if !ended(client.state()) {
                return Ok(client.clone());
            }
            tracing::info!(state = ?client.state(), quorum = %self.config.quorum, "ZooKeeper session ended; starting a new one");
            *slot = None;
        }
        let client = self.connect().await?;
        *slot = Some(client.clone());
        Ok(client)
    }

    async fn connect(&self) -> Result<Client, ZkError> {
        self.refresh_login().await?;
        let attempts = self.config.max_retry_attempts.saturating_add(1);
        let mut last = None;
        for attempt in 1..=attempts {
            if attempt > 1 {
                tokio::time::sleep(self.config.retry_wait).await;
            }
            let mut connector = Client::connector()
                .with_session_timeout(self.config.session_timeout)
                .with_connection_timeout(self.config.connection_timeout)
                // A refused connection fails the attempt at once; the
                // retries here are the pauses between attempts.
                .with_fail_eagerly();
            if let Some(sasl) = &self.config.sasl {
                let gssapi = SaslOptions::gssapi().with_username(sasl.service_name.clone());
                connector = connector.with_sasl(gssapi);
            }
            let timeout = self.config.connection_timeout;
            match tokio::time::timeout(timeout, connector.connect(&self.config.quorum)).await {
                Ok(Ok(client)) => return Ok(client),
                // Authentication does not succeed by trying again.
                Ok(Err(zookeeper_client::Error::AuthFailed)) => {
                    return Err(match &self.config.sasl {
                        None => ZkError::AuthenticationRequired,
                        Some(sasl) => ZkError::AuthenticationRefused {
                            principal: sasl.principal.clone(),
                        },
                    })
                }
                Ok(Err(e)) => last = Some(ConnectFailure::Refused(e)),
                Err(_) => last = Some(ConnectFailure::TimedOut(timeout)),
            }
        }
        Err(ZkError::Connect {
            attempts,
            source: last.unwrap_or(ConnectFailure::TimedOut(Duration::ZERO)),
        })
    }

    /// Makes sure the login's ticket is there and fresh (on a blocking
    /// thread: it may talk to the KDC).
    async fn refresh_login(&self) -> Result<(), ZkError> {
        let Some(login) = self.login.clone() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || login.refresh())
            .await
            .map_err(|e| ZkError::LoginTask(e.to_string()))?
    }

    /// Runs one request, bounded by the connection timeout; a request that
    /// finds the session ended drops it so the next call starts a new one.
    pub(crate) async fn call<T, F>(&self, request: impl FnOnce(Client) -> F) -> Result<T, ZkError>
    where
        F: Future<Output = Result<T, zookeeper_client::Error>>,
    {
        let client = self.client().await?;
        let timeout = self.config.connection_timeout;
        match tokio::time::timeout(timeout, request(client)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                if matches!(
                    e,
                    zookeeper_client::Error::SessionExpired | zookeeper_client::Error::ClientClosed
                ) {
                    self.client.lock().await.take();
                }
                Err(ZkError::Request(e))
            }
            Err(_) => Err(ZkError::NoAnswer(timeout)),
        }
    }
}

fn ended(state: SessionState) -> bool {
    matches!(
        state,
        SessionState::Expired | SessionState::Closed | SessionState::AuthFailed
    )
}

/// Why the last attempt to connect failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectFailure {
    /// The client gave up (no server reachable, session refused).
    #[error(transparent)]
    Refused(zookeeper_client::Error),
    /// No session within the connection timeout.
    #[error("no session within {0:?}")]
    TimedOut(Duration),
}
