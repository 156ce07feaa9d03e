//! The Kubernetes deploy kit (`deploy/kubernetes/base`) applied to a real
//! API server by server-side apply with strict field validation, in the
//! order its kustomization lists the files: a field the API does not know,
//! a wrong type or a missing required field fails here, as it would in a
//! user's cluster. The Prometheus operator's kinds (ServiceMonitor,
//! PrometheusRule) are installed first as open-schema CRDs: the server then
//! checks their envelope, not the operator's schema.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferry_testkit::kube::Identity;
use ferry_testkit::KubeServer;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{Discovery, Scope};
use serde::Deserialize;

/// Where the base is applied (its RoleBinding names this namespace).
const NAMESPACE: &str = "default";

const MONITORING_CRDS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prometheusrules.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PrometheusRule, plural: prometheusrules, singular: prometheusrule, listKind: PrometheusRuleList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

fn base() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/base")
}

fn documents(text: &str, origin: &str) -> Vec<DynamicObject> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| {
            DynamicObject::deserialize(doc)
                .unwrap_or_else(|e| panic!("{origin}: not an object: {e}"))
        })
        .collect()
}

async fn admin_client(kube: &KubeServer) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let file = kube::config::Kubeconfig::read_from(kube.kubeconfig(Identity::Admin)).unwrap();
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Server-side applies `obj`; the server's refusal as an error.
async fn apply(
    client: &kube::Client,
    discovery: &Discovery,
    obj: &DynamicObject,
) -> Result<(), String> {
    let types = obj.types.as_ref().ok_or("no apiVersion/kind")?;
    let gvk = GroupVersionKind::try_from(types).map_err(|e| e.to_string())?;
    let (resource, caps) = discovery
        .resolve_gvk(&gvk)
        .ok_or_else(|| format!("the API server has no {gvk:?}"))?;
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => Api::namespaced_with(client.clone(), NAMESPACE, &resource),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let name = obj.metadata.name.as_deref().ok_or("no metadata.name")?;
    let params = PatchParams::apply("ferry-deploy-kit-test")
        .force()
        .validation_strict();
    api.patch(name, &params, &Patch::Apply(obj))
        .await
        .map(|_| ())
        .map_err(|e| format!("{} {name}: {e}", types.kind))
}

/// Discovery once `kinds` are all served (CRDs take a moment).
async fn discovery_with(client: &kube::Client, kinds: &[&str]) -> Discovery {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = Discovery::new(client.clone()).run().await.unwrap();
        let served = kinds.iter().all(|k| {
            d.groups()
                .flat_map(|g| g.recommended_resources())
                .any(|(r, _)| r.kind == *k)
        });
        if served {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "the API server never served {kinds:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

pub(crate) async fn applies(kube: &KubeServer) {
    let client = admin_client(kube).await;
    let discovery = discovery_with(&client, &["CustomResourceDefinition"]).await;
    for crd in documents(MONITORING_CRDS, "the monitoring CRDs") {
        apply(&client, &discovery, &crd).await.unwrap();
    }
    let discovery = discovery_with(&client, &["ServiceMonitor", "PrometheusRule"]).await;

    let kustomization: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(base().join("kustomization.yaml")).unwrap())
            .unwrap();
    let files: Vec<String> = kustomization["resources"]
        .as_sequence()
        .expect("resources")
        .iter()
        .map(|f| f.as_str().expect("a file name").to_string())
        .collect();
    assert!(files.len() >= 10, "{files:?}");
    let mut applied = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(base().join(file)).unwrap();
        for obj in documents(&text, file) {
            apply(&client, &discovery, &obj)
                .await
                .unwrap_or_else(|e| panic!("{file}: the API server refused it: {e}"));
            applied.push(file.clone());
        }
    }
    assert!(
        applied.iter().any(|f| f.contains("statefulset")),
        "{applied:?}"
    );

    // The check can fail: a field the StatefulSet API does not know is
    // refused under strict validation.
    let text = std::fs::read_to_string(base().join("statefulset.yaml")).unwrap();
    let mut wrong = documents(&text, "statefulset.yaml").remove(0);
    wrong.data["spec"]["replicaz"] = serde_json::json!(2);
    let err = apply(&client, &discovery, &wrong)
        .await
        .expect_err("an unknown field is refused");
    assert!(err.contains("replicaz"), "{err}");
}
