//! The identities of a [`super::KubeServer`]: static bearer tokens, the
//! service-account signing key, one kubeconfig per identity, and the RBAC
//! Roles the kit binds them to. Requests to the API server go through
//! `curl` (the kit links no HTTP client).

use super::{KubeInfo, NAMESPACE};
use crate::s3::random_bytes;
use crate::{io_err, Error, Result};
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Who a kubeconfig authenticates as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// `ferry-admin`, in `system:masters`: may do anything.
    Admin,
    /// `ferry`: get/create/update on `leases` in [`NAMESPACE`] (the RBAC a
    /// deployment grants ferry's service account).
    Ferry,
    /// `ferry-reader`: get on `leases` only — a missing RBAC permission.
    Reader,
}

impl Identity {
    /// Every identity, in [`KubeInfo::tokens`] order.
    pub const ALL: [Identity; 3] = [Identity::Admin, Identity::Ferry, Identity::Reader];

    /// The user name the API server sees.
    pub fn user(self) -> &'static str {
        match self {
            Identity::Admin => "ferry-admin",
            Identity::Ferry => "ferry",
            Identity::Reader => "ferry-reader",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Fresh random tokens, one per identity.
pub(super) fn new_tokens() -> Result<[String; 3]> {
    let token =
        || -> Result<String> { Ok(random_bytes()?.iter().map(|b| format!("{b:02x}")).collect()) };
    Ok([token()?, token()?, token()?])
}

/// `tokens.csv` and the service-account signing key (`sa.key`, P-256).
pub(super) fn write_credentials(info: &KubeInfo) -> Result<()> {
    let mut csv = String::new();
    for identity in Identity::ALL {
        let groups = if identity == Identity::Admin {
            ",\"system:masters\""
        } else {
            ""
        };
        let user = identity.user();
        csv.push_str(&format!(
            "{},{user},{user}{groups}\n",
            info.tokens[identity.index()]
        ));
    }
    let path = info.root.join("tokens.csv");
    fs::write(&path, csv).map_err(io_err(format!("writing {}", path.display())))?;
    let key = info.root.join("sa.key");
    let out = Command::new("openssl")
        .args([
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
        ])
        .arg(&key)
        .output()
        .map_err(|e| {
            Error::Binaries(format!("cannot run openssl (apt-get install openssl): {e}"))
        })?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "openssl could not make the service-account key: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

fn ca_path(info: &KubeInfo) -> PathBuf {
    info.root.join("certs").join("ca.crt")
}

/// Whether `certs/ca.crt` exists, cutting it from the certificate the API
/// server generated for itself (serving certificate, then its CA) once
/// that appears.
pub(super) fn ca_ready(info: &KubeInfo) -> Result<bool> {
    let ca = ca_path(info);
    if ca.is_file() {
        return Ok(true);
    }
    let Ok(served) = fs::read_to_string(info.root.join("certs").join("apiserver.crt")) else {
        return Ok(false);
    };
    let marker = "-----BEGIN CERTIFICATE-----";
    let Some(last) = served.rfind(marker) else {
        return Ok(false);
    };
    fs::write(&ca, &served[last..]).map_err(io_err(format!("writing {}", ca.display())))?;
    Ok(true)
}

/// Where `identity`'s kubeconfig is.
pub(super) fn kubeconfig_path(info: &KubeInfo, identity: Identity) -> PathBuf {
    info.root.join(format!("kubeconfig-{}", identity.user()))
}

/// One kubeconfig per identity, namespace [`NAMESPACE`].
pub(super) fn write_kubeconfigs(info: &KubeInfo) -> Result<()> {
    for identity in Identity::ALL {
        let user = identity.user();
        let text = format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: ferry-testkit\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
             users:\n\
             - name: {user}\n  user:\n    token: {token}\n\
             contexts:\n\
             - name: {user}\n  context:\n    cluster: ferry-testkit\n    user: {user}\n    namespace: {NAMESPACE}\n\
             current-context: {user}\n",
            server = info.server_url(),
            ca = ca_path(info).display(),
            token = info.tokens[identity.index()],
        );
        let path = kubeconfig_path(info, identity);
        fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))?;
    }
    Ok(())
}

/// Whether `/readyz` answers ok.
pub(super) fn ready(info: &KubeInfo) -> bool {
    matches!(request(info, "GET", "/readyz", None), Ok((200, _)))
}

/// Sends one request as the admin; returns the status and body.
pub(super) fn request(
    info: &KubeInfo,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<(u16, String)> {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "-X", method])
        .arg("--cacert")
        .arg(ca_path(info))
        .arg("-H")
        .arg(format!(
            "Authorization: Bearer {}",
            info.tokens[Identity::Admin.index()]
        ))
        .args(["-w", "\n%{http_code}"])
        .stdin(Stdio::null());
    if let Some(body) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(body.to_string());
    }
    cmd.arg(format!("{}{path}", info.server_url()));
    let out = cmd
        .output()
        .map_err(|e| Error::Binaries(format!("cannot run curl (apt-get install curl): {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
    match code.trim().parse::<u16>() {
        Ok(code) if code > 0 => Ok((code, body.to_string())),
        _ => Err(Error::NotReady(format!(
            "{method} {path}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// Creates [`NAMESPACE`], the Roles `ferry-lease` (get/create/update) and
/// `ferry-lease-read` (get), and binds `ferry` and `ferry-reader` to them.
pub(super) fn grant_roles(info: &KubeInfo) -> Result<()> {
    let ns = NAMESPACE;
    let create = |path: &str, body: serde_json::Value| -> Result<()> {
        match request(info, "POST", path, Some(&body))? {
            (200..=201 | 409, _) => Ok(()),
            (code, text) => Err(Error::NotReady(format!("POST {path}: {code} {text}"))),
        }
    };
    create(
        "/api/v1/namespaces",
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )?;
    let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}");
    for (role, verbs, identity) in [
        (
            "ferry-lease",
            vec!["get", "create", "update"],
            Identity::Ferry,
        ),
        ("ferry-lease-read", vec!["get"], Identity::Reader),
    ] {
        create(
            &format!("{rbac}/roles"),
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": role, "namespace": ns},
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": verbs}],
            }),
        )?;
        create(
            &format!("{rbac}/rolebindings"),
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": role, "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": identity.user()}],
            }),
        )?;
    }
    Ok(())
}
