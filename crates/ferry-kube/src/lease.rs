//! [`KubeLease`]: the lease records of one job in one
//! `coordination.k8s.io/v1` Lease object. The object holds the newest
//! record only: `spec.holderIdentity` = its owner, `spec.leaseTransitions`
//! = its generation, `spec.renewTime` = when it was written,
//! `spec.leaseDurationSeconds` = the lease duration, and the record's
//! sequence position in the annotation [`SEQ_ANNOTATION`] (its job in
//! [`JOB_ANNOTATION`]). Writing the
//! next position is a compare-and-swap on the object's `resourceVersion`
//! (create when there is none), so of racing writers exactly one wins.

use std::path::PathBuf;
use std::time::Duration;

use ferry_engine::lease::LeaseRecord;
use k8s_openapi::api::coordination::v1::{Lease as LeaseObject, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::OnceCell;

use crate::error::KubeError;

/// The annotation holding the record's sequence position.
pub const SEQ_ANNOTATION: &str = "ferry.apache-kudu.io/seq";
/// The annotation holding what the writer's job replicates
/// ([`LeaseRecord::job`]).
pub const JOB_ANNOTATION: &str = "ferry.apache-kudu.io/job";
/// Attempts of one write before the race is reported as lost to a
/// writer of a lower position (each attempt re-reads).
const WRITE_ATTEMPTS: usize = 8;

/// How to reach the API server and which Lease to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeSettings {
    /// `kubernetes.namespace`.
    pub namespace: String,
    /// `kubernetes.config.file`; `None`: `KUBECONFIG`, `~/.kube/config`,
    /// else the pod's service account.
    pub config_file: Option<PathBuf>,
    /// The Lease object's name ([`lease_name`]).
    pub lease_name: String,
    /// Written to `spec.leaseDurationSeconds` (for `kubectl` readers; the
    /// protocol measures silence on its own clock).
    pub lease_duration: Duration,
    /// Longest wait for one API call: a frozen server must not hold a
    /// renewal past its deadline.
    pub call_timeout: Duration,
}

/// A job's lease in a Kubernetes Lease object.
pub struct KubeLease {
    settings: KubeSettings,
    api: OnceCell<(Api<LeaseObject>, String)>,
}

impl std::fmt::Debug for KubeLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeLease")
            .field("lease", &self.location())
            .finish()
    }
}

/// A failed lease operation: what was tried, and why.
#[derive(Debug)]
pub struct Failed {
    /// `read`, `create` or `update`.
    pub op: &'static str,
    /// The cause.
    pub error: KubeError,
}

impl KubeLease {
    /// The lease described by `settings`; nothing is contacted until the
    /// first call.
    pub fn new(settings: KubeSettings) -> Self {
        KubeLease {
            settings,
            api: OnceCell::new(),
        }
    }

    /// `kubernetes:<namespace>/<lease name>`.
    pub fn location(&self) -> String {
        format!(
            "kubernetes:{}/{}",
            self.settings.namespace, self.settings.lease_name
        )
    }

    async fn api(&self) -> Result<&(Api<LeaseObject>, String), KubeError> {
        self.api.get_or_try_init(|| self.connect()).await
    }

    async fn connect(&self) -> Result<(Api<LeaseObject>, String), KubeError> {
        let mut config = match &self.settings.config_file {
            Some(path) => {
                let failed = |source| KubeError::Kubeconfig {
                    path: path.clone(),
                    source,
                };
                let file = kube::config::Kubeconfig::read_from(path).map_err(failed)?;
                kube::Config::from_custom_kubeconfig(file, &Default::default())
                    .await
                    .map_err(failed)?
            }
            None => kube::Config::infer()
                .await
                .map_err(KubeError::NoCredentials)?,
        };
        let timeout = Some(self.settings.call_timeout);
        config.connect_timeout = timeout;
        config.read_timeout = timeout;
        config.write_timeout = timeout;
        // Times each response from its request, not from the pooled
        // connection's last use.
        config.reset_reader_on_write = true;
        let server = config.cluster_url.to_string();
        // Two rustls backends are linked (ring here, aws-lc-rs by another
        // dependency): rustls then needs the process default named. Fails
        // only if one is set already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = kube::Client::try_from(config).map_err(KubeError::Client)?;
        let api = Api::namespaced(client, &self.settings.namespace);
        Ok((api, server.trim_end_matches('/').to_string()))
    }

    fn failed(
        &self,
        op: &'static str,
        verb: &'static str,
        server: &str,
    ) -> impl FnOnce(kube::Error) -> Failed + '_ {
        let namespace = self.settings.namespace.clone();
        let server = server.to_string();
        move |e| Failed {
            op,
            error: KubeError::from_call(e, verb, &namespace, &server),
        }
    }

    /// The record the Lease holds, if the Lease exists.
    pub async fn newest(&self) -> Result<Option<LeaseRecord>, Failed> {
        Ok(self.read().await?.map(|(record, _)| record))
    }

    /// The record and the object it came from.
    async fn read(&self) -> Result<Option<(LeaseRecord, LeaseObject)>, Failed> {
        let (api, server) = self
            .api()
            .await
            .map_err(|error| Failed { op: "read", error })?;
        let object = api
            .get_opt(&self.settings.lease_name)
            .await
            .map_err(self.failed("read", "get", server))?;
        match object {
            None => Ok(None),
            Some(object) => {
                let record = record_of(&object).map_err(|error| Failed { op: "read", error })?;
                Ok(Some((record, object)))
            }
        }
    }

    /// Writes `record` at its position unless that position (or a later
    /// one) is taken: `Ok(None)` when this call wrote it, else the record
    /// holding it.
    pub async fn write_next(&self, record: &LeaseRecord) -> Result<Option<LeaseRecord>, Failed> {
        let (api, server) = self
            .api()
            .await
            .map_err(|error| Failed { op: "write", error })?;
        let pp = PostParams::default();
        let mut last = None;
        for _ in 0..WRITE_ATTEMPTS {
            let current = self.read().await?;
            let written = match current {
                Some((held, _)) if held.seq >= record.seq => return Ok(Some(held)),
                Some((held, mut object)) => {
                    last = Some(held);
                    object.spec = Some(self.spec(record, object.spec.take()));
                    set_record_meta(&mut object.metadata, record);
                    // `object` carries the resourceVersion read: the server
                    // refuses the update if anyone wrote since.
                    api.replace(&self.settings.lease_name, &pp, &object)
                        .await
                        .map_err(self.failed("update", "update", server))
                }
                None => {
                    let mut metadata = ObjectMeta {
                        name: Some(self.settings.lease_name.clone()),
                        ..ObjectMeta::default()
                    };
                    set_record_meta(&mut metadata, record);
                    let object = LeaseObject {
                        metadata,
                        spec: Some(self.spec(record, None)),
                    };
                    api.create(&pp, &object)
                        .await
                        .map_err(self.failed("create", "create", server))
                }
            };
            match written {
                Ok(_) => return Ok(None),
                // 409: Conflict (stale resourceVersion) or AlreadyExists:
                // someone wrote first; read who.
                Err(Failed {
                    error: KubeError::Refused { code: 409, .. },
                    ..
                }) => continue,
                Err(failed) => return Err(failed),
            }
        }
        // Writers kept winning positions below ours; report the newest.
        match last {
            Some(held) => Ok(Some(held)),
            None => Err(Failed {
                op: "write",
                error: KubeError::Damaged {
                    what: "winner after repeated conflicts",
                    value: self.location(),
                },
            }),
        }
    }

    fn spec(&self, record: &LeaseRecord, old: Option<LeaseSpec>) -> LeaseSpec {
        let old = old.unwrap_or_default();
        let at = Timestamp::from_millisecond(i64::try_from(record.at_ms).unwrap_or(i64::MAX))
            .ok()
            .map(MicroTime);
        let same_holder = old.lease_transitions == i32::try_from(record.generation).ok();
        LeaseSpec {
            holder_identity: Some(record.owner.clone()),
            lease_transitions: Some(i32::try_from(record.generation).unwrap_or(i32::MAX)),
            lease_duration_seconds: Some(
                i32::try_from(self.settings.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            // acquireTime: when this generation first wrote.
            acquire_time: if same_holder {
                old.acquire_time
            } else {
                at.clone()
            },
            renew_time: at,
            ..old
        }
    }
}

/// The record's sequence position and job, in the object's annotations.
fn set_record_meta(metadata: &mut ObjectMeta, record: &LeaseRecord) {
    let annotations = metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(SEQ_ANNOTATION.to_string(), record.seq.to_string());
    if record.job.is_empty() {
        annotations.remove(JOB_ANNOTATION);
    } else {
        annotations.insert(JOB_ANNOTATION.to_string(), record.job.clone());
    }
}

/// The record a Lease object holds.
fn record_of(object: &LeaseObject) -> Result<LeaseRecord, KubeError> {
    let seq_text = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SEQ_ANNOTATION));
    let seq = seq_text
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| KubeError::Damaged {
            what: "annotation ferry.apache-kudu.io/seq (is the Lease used by something else?)",
            value: seq_text.cloned().unwrap_or_default(),
        })?;
    let spec = object.spec.clone().unwrap_or_default();
    let generation = spec
        .lease_transitions
        .and_then(|g| u64::try_from(g).ok())
        .ok_or_else(|| KubeError::Damaged {
            what: "spec.leaseTransitions",
            value: format!("{:?}", spec.lease_transitions),
        })?;
    let at_ms = spec
        .renew_time
        .and_then(|t| u64::try_from(t.0.as_millisecond()).ok())
        .unwrap_or(0);
    Ok(LeaseRecord {
        seq,
        generation,
        owner: spec.holder_identity.unwrap_or_default(),
        at_ms,
        job: object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(JOB_ANNOTATION))
            .cloned()
            .unwrap_or_default(),
    })
}

/// The Lease object's name for a job: `ferry-<cluster id>-<job id>`,
/// lower-cased, with anything outside `[a-z0-9-]` made a `-`, within
/// the 63 characters a name may use everywhere (DNS-1123 label).
pub fn lease_name(cluster_id: &str, job_id: &str) -> String {
    let mut clean = String::new();
    for c in cluster_id.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        // No runs of '-'.
        if !(c == '-' && clean.ends_with('-')) {
            clean.push(c);
        }
    }
    let job: String = job_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .collect();
    let job = job.to_lowercase();
    // "ferry-" + cluster + "-" + job <= 63.
    let room = 63 - "ferry-".len() - 1 - job.len();
    let cluster: String = clean.trim_matches('-').chars().take(room).collect();
    let cluster = cluster.trim_end_matches('-');
    if cluster.is_empty() {
        format!("ferry-{job}")
    } else {
        format!("ferry-{cluster}-{job}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_dns_labels() {
        assert_eq!(
            lease_name("Orders_DR", "00112233445566778899aabbccddeeff"),
            "ferry-orders-dr-001122334455"
        );
        assert_eq!(lease_name("--", "ab"), "ferry-ab");
        let long = lease_name(&"x".repeat(300), "0123456789abcdef");
        assert_eq!(long.len(), 63, "{long}");
        assert!(long.ends_with("-0123456789ab"));
        let odd = lease_name("a..b//ü-", "ff");
        assert_eq!(odd, "ferry-a-b-ff");
    }

    #[test]
    fn a_record_round_trips_through_the_object() {
        let lease = KubeLease::new(KubeSettings {
            namespace: "ns".into(),
            config_file: None,
            lease_name: "ferry-x".into(),
            lease_duration: Duration::from_secs(15),
            call_timeout: Duration::from_secs(5),
        });
        let record = LeaseRecord {
            seq: 7,
            generation: 3,
            owner: "pod-1/42".into(),
            at_ms: 1_700_000_000_123,
            job: "kudu a:7051 -> kudu b:7051, tables t".into(),
        };
        let mut metadata = ObjectMeta::default();
        set_record_meta(&mut metadata, &record);
        let object = LeaseObject {
            metadata,
            spec: Some(lease.spec(&record, None)),
        };
        assert_eq!(record_of(&object).expect("valid"), record);
        let spec = object.spec.clone().expect("spec");
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.acquire_time, spec.renew_time);
        // A renewal by the same generation keeps acquireTime.
        let renewed = LeaseRecord {
            seq: 8,
            at_ms: record.at_ms + 5000,
            ..record.clone()
        };
        let next = lease.spec(&renewed, object.spec.clone());
        assert_eq!(next.acquire_time, spec.acquire_time);
        assert_ne!(next.renew_time, spec.renew_time);
        // A Lease written by something else is named, not misread.
        let foreign = LeaseObject {
            metadata: ObjectMeta::default(),
            spec: object.spec,
        };
        let err = record_of(&foreign).expect_err("no seq");
        assert!(err.to_string().contains(SEQ_ANNOTATION), "{err}");
    }
}
