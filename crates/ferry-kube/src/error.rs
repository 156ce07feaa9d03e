//! What can go wrong talking to the API server, each cause said once.

use std::path::PathBuf;

/// A failed call to the Kubernetes API server (or a failure to find one).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KubeError {
    /// Neither the kubeconfig nor the in-cluster service account gave a
    /// configuration.
    #[error(
        "no Kubernetes credentials: no kubeconfig (kubernetes.config.file, KUBECONFIG or \
         ~/.kube/config) and not in a pod with a service account"
    )]
    NoCredentials(#[source] kube::config::InferConfigError),
    /// `kubernetes.config.file` could not be read or used.
    #[error("cannot use the kubeconfig '{path}'")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The client could not be built from the configuration (TLS settings).
    #[error("cannot build a Kubernetes client")]
    Client(#[source] kube::Error),
    /// No answer from the API server (refused, timed out, TLS failed).
    #[error("the Kubernetes API server at {server} is unreachable")]
    Unreachable {
        /// Its URL.
        server: String,
        /// The transport's error.
        #[source]
        source: kube::Error,
    },
    /// 401: the credentials were not accepted.
    #[error("the Kubernetes API server at {server} did not accept the credentials: {message}")]
    Unauthorized {
        /// Its URL.
        server: String,
        /// The server's message.
        message: String,
    },
    /// 403: RBAC does not allow the call.
    #[error(
        "missing RBAC permission: {identity} may not {verb} leases (coordination.k8s.io) in \
         namespace '{namespace}'; grant get, create and update on leases there (docs/dr.md, Kubernetes HA)"
    )]
    Forbidden {
        /// The API verb refused (`get`, `create`, `update`).
        verb: &'static str,
        /// The namespace.
        namespace: String,
        /// Who asked, as the server named it (`user "ferry"`,
        /// `service account ferry/ferry`).
        identity: String,
    },
    /// Any other answer the server refused the call with.
    #[error("the Kubernetes API server refused to {verb} the Lease: {code} {reason}: {message}")]
    Refused {
        /// The API verb.
        verb: &'static str,
        /// HTTP status code.
        code: u16,
        /// The server's reason (`NotFound`, `Invalid`, …).
        reason: String,
        /// The server's message.
        message: String,
    },
    /// The Lease object does not hold what ferry writes.
    #[error("the Lease holds no valid {what}: {value:?}")]
    Damaged {
        /// Which field.
        what: &'static str,
        /// What it holds.
        value: String,
    },
}

impl KubeError {
    /// Sorts a client error from a call of `verb` in `namespace`.
    pub(crate) fn from_call(
        source: kube::Error,
        verb: &'static str,
        namespace: &str,
        server: &str,
    ) -> KubeError {
        match source {
            kube::Error::Api(status) => match status.code {
                401 => KubeError::Unauthorized {
                    server: server.to_string(),
                    message: status.message,
                },
                403 => KubeError::Forbidden {
                    verb,
                    namespace: namespace.to_string(),
                    identity: identity_in(&status.message),
                },
                code => KubeError::Refused {
                    verb,
                    code,
                    reason: status.reason,
                    message: status.message,
                },
            },
            source => KubeError::Unreachable {
                server: server.to_string(),
                source,
            },
        }
    }
}

/// Who the server says asked, from its 403 message (`User "ferry" cannot
/// …`); service accounts are named as such.
fn identity_in(message: &str) -> String {
    let quoted = message
        .split_once("User \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(user, _)| user);
    match quoted {
        Some(user) => match user.strip_prefix("system:serviceaccount:") {
            Some(sa) => format!("service account {}", sa.replacen(':', "/", 1)),
            None => format!("user \"{user}\""),
        },
        None => "this identity".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_taken_from_the_servers_message() {
        let msg = r#"leases.coordination.k8s.io "x" is forbidden: User "ferry-reader" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "ferry""#;
        assert_eq!(identity_in(msg), "user \"ferry-reader\"");
        let sa = r#"... User "system:serviceaccount:prod:ferry" cannot update ..."#;
        assert_eq!(identity_in(sa), "service account prod/ferry");
        assert_eq!(identity_in("forbidden"), "this identity");
        let err = KubeError::Forbidden {
            verb: "create",
            namespace: "ferry".into(),
            identity: identity_in(msg),
        };
        assert_eq!(
            err.to_string(),
            "missing RBAC permission: user \"ferry-reader\" may not create leases \
             (coordination.k8s.io) in namespace 'ferry'; grant get, create and update on \
             leases there (docs/dr.md, Kubernetes HA)"
        );
    }
}
