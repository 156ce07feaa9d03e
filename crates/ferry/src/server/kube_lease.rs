//! `high-availability.type kubernetes`: the job's lease in a Kubernetes
//! Lease object (`ferry-kube`), named from the cluster id and the job id,
//! in `kubernetes.namespace`, reached with `kubernetes.config.file`,
//! `KUBECONFIG` or the pod's service account.

use ferry_engine::config::JobConfig;
use ferry_engine::lease::LeaseBackend;
use ferry_kube::{lease_name, KubeLease, KubeSettings};
use std::sync::Arc;

/// The Kubernetes lease backend of `cfg`'s HA job.
pub fn backend(cfg: &JobConfig) -> Arc<dyn LeaseBackend> {
    let k = &cfg.ha.kubernetes;
    let cluster_id = cfg.ha.cluster_id.as_deref().unwrap_or(&cfg.job_name);
    Arc::new(KubeLease::new(KubeSettings {
        namespace: k.namespace.clone(),
        config_file: k.config_file.clone(),
        lease_name: lease_name(cluster_id, &cfg.ha_job_id().to_string()),
        lease_duration: k.lease_duration,
        // One call may take a retry period: a frozen API server must not
        // hold a renewal (or a standby's read) longer.
        call_timeout: k.retry_period,
    }))
}
