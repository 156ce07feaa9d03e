//! The Kubernetes lease backend against a real `kube-apiserver` with its
//! etcd (ferry-testkit): the engine's LeaseBackend conformance suite (one
//! winner per position among racing handles, as separate pods would race),
//! the Lease object's fields, the errors a user meets, and the deploy kit's
//! manifests applied to the server (`deploy_kit`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use ferry_engine::lease::{LeaseBackend, LeaseError, LeaseRecord};
use ferry_kube::{KubeLease, KubeSettings, SEQ_ANNOTATION};
use ferry_testkit::kube::{Identity, NAMESPACE};
use ferry_testkit::KubeServer;

#[path = "api_server/deploy_kit.rs"]
mod deploy_kit;

fn settings(kube: &KubeServer, identity: Identity, name: &str) -> KubeSettings {
    KubeSettings {
        namespace: NAMESPACE.to_string(),
        config_file: Some(kube.kubeconfig(identity)),
        lease_name: name.to_string(),
        lease_duration: Duration::from_secs(15),
        call_timeout: Duration::from_secs(5),
    }
}

fn handle(kube: &KubeServer, identity: Identity, name: &str) -> Arc<dyn LeaseBackend> {
    Arc::new(KubeLease::new(settings(kube, identity, name)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_real_api_server() {
    let kube = tokio::task::block_in_place(|| {
        KubeServer::start(&format!("kube-lease-{}", std::process::id()))
            .expect("kube-apiserver and etcd (`ferry-testkit kube install`, or scripts/test)")
    });

    // The protocol's requirements, with the RBAC-bound identity.
    let racers = (0..4)
        .map(|_| handle(&kube, Identity::Ferry, "ferry-conf"))
        .collect();
    ferry_engine::lease::conformance::run(handle(&kube, Identity::Ferry, "ferry-conf"), racers)
        .await;

    // The object holds the record where `kubectl get lease` shows it.
    let (code, body) = kube
        .request(
            "GET",
            &format!("/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/ferry-conf"),
        )
        .expect("GET");
    assert_eq!(code, 200, "{body}");
    let lease: serde_json::Value = serde_json::from_str(&body).expect("json");
    let newest = handle(&kube, Identity::Ferry, "ferry-conf")
        .newest()
        .await
        .expect("read")
        .expect("a record");
    let spec = &lease["spec"];
    assert_eq!(spec["holderIdentity"], newest.owner.as_str());
    assert_eq!(spec["leaseTransitions"], newest.generation);
    assert_eq!(spec["leaseDurationSeconds"], 15);
    assert!(spec["renewTime"].is_string(), "{spec}");
    assert_eq!(
        lease["metadata"]["annotations"][SEQ_ANNOTATION],
        newest.seq.to_string()
    );

    // Missing RBAC permission: named once, with verb, resource, namespace
    // and identity; nothing written.
    let reader = handle(&kube, Identity::Reader, "ferry-rbac");
    assert_eq!(reader.newest().await.expect("get is allowed"), None);
    let record = LeaseRecord {
        seq: 1,
        generation: 1,
        owner: "pod-0/1".to_string(),
        at_ms: 1,
        ..LeaseRecord::default()
    };
    let err = reader.write_next(&record).await.expect_err("forbidden");
    let text = chain(&err);
    assert_eq!(
        text,
        format!(
            "cannot create the lease at 'kubernetes:{NAMESPACE}/ferry-rbac': missing RBAC \
             permission: user \"ferry-reader\" may not create leases (coordination.k8s.io) in \
             namespace '{NAMESPACE}'; grant get, create and update on leases there (docs/dr.md, \
             Kubernetes HA)"
        )
    );
    assert!(matches!(err, LeaseError::Service { op: "create", .. }));
    assert_eq!(
        handle(&kube, Identity::Admin, "ferry-rbac")
            .newest()
            .await
            .expect("read"),
        None,
        "nothing written"
    );

    // A stopped API server is named, not waited for forever.
    kube.stop_api().expect("stop");
    let started = std::time::Instant::now();
    let err = handle(&kube, Identity::Ferry, "ferry-conf")
        .newest()
        .await
        .expect_err("down");
    assert!(
        chain(&err).contains(&format!(
            "the Kubernetes API server at {} is unreachable",
            kube.server_url()
        )),
        "{}",
        chain(&err)
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    tokio::task::block_in_place(|| kube.restart_api()).expect("restart");
    assert_eq!(
        handle(&kube, Identity::Ferry, "ferry-conf")
            .newest()
            .await
            .expect("read after the restart"),
        Some(newest),
        "etcd kept the Lease"
    );

    deploy_kit::applies(&kube).await;
}

/// The error and its sources, as `anyhow` prints them with `{:#}`.
fn chain(err: &dyn std::error::Error) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(e) = source {
        parts.push(e.to_string());
        source = e.source();
    }
    parts.join(": ")
}
