//! The Kubernetes API server of the kit: it starts with RBAC and the
//! identities it promises, keeps its objects across an API server restart,
//! freezes and thaws, and leaves nothing running behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ferry_testkit::kube::{Identity, NAMESPACE};
use ferry_testkit::process::processes_under;
use ferry_testkit::KubeServer;

#[test]
fn an_api_server_with_rbac_identities() {
    let kube = KubeServer::start(&format!("kit-{}", std::process::id()))
        .expect("kube-apiserver and etcd (`ferry-testkit kube install`)");
    let root = kube.root();
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases");
    let (code, body) = kube.request("GET", &leases).expect("list as admin");
    assert_eq!(code, 200, "{body}");
    // The kubeconfigs name the server, the namespace and each token.
    for identity in Identity::ALL {
        let text = std::fs::read_to_string(kube.kubeconfig(identity)).expect("kubeconfig");
        assert!(text.contains(&kube.server_url()), "{text}");
        assert!(text.contains(&format!("namespace: {NAMESPACE}")), "{text}");
        assert!(
            text.contains(&format!("name: {}", identity.user())),
            "{text}"
        );
    }
    // RBAC: the bindings exist, the reader's role allows get only.
    let (code, body) = kube
        .request(
            "GET",
            &format!(
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles/ferry-lease-read"
            ),
        )
        .expect("role");
    assert_eq!(code, 200, "{body}");
    let role: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(role["rules"][0]["verbs"], serde_json::json!(["get"]));

    // An API server outage keeps etcd's objects.
    kube.stop_api().expect("stop");
    assert!(kube.request("GET", "/readyz").is_err(), "stopped");
    kube.restart_api().expect("restart");
    let (code, _) = kube
        .request(
            "GET",
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles/ferry-lease"),
        )
        .expect("role after restart");
    assert_eq!(code, 200);

    // Frozen: requests time out instead of being refused; thawed: served.
    kube.pause_api().expect("SIGSTOP");
    assert!(kube.request("GET", "/readyz").is_err(), "frozen");
    kube.resume_api().expect("SIGCONT");
    assert_eq!(kube.request("GET", "/readyz").expect("thawed").0, 200);

    drop(kube);
    assert!(processes_under(&root).is_empty(), "nothing left running");
    assert!(!root.exists(), "folder removed");
}
