//! Kubernetes HA for ferry (`high-availability.type kubernetes`): the
//! lease records of a job kept in one `coordination.k8s.io/v1` Lease
//! object, written by compare-and-swap on its `resourceVersion`
//! ([`KubeLease`]). The lease protocol itself (generations, renewal,
//! claims, fencing) is the engine's (`ferry_engine::lease`); this crate
//! only stores its records, atomically. Credentials come from a kubeconfig
//! (`kubernetes.config.file`, `KUBECONFIG`, `~/.kube/config`) or the pod's
//! service account; RBAC must allow get, create and update on `leases` in
//! the namespace (docs/dr.md, Kubernetes HA).

mod backend;
mod error;
mod lease;

pub use error::KubeError;
pub use lease::{lease_name, Failed, KubeLease, KubeSettings, JOB_ANNOTATION, SEQ_ANNOTATION};
