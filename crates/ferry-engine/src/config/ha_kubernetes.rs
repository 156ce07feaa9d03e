//! The keys of `high-availability.type kubernetes` (Flink's names): where
//! the Lease object lives and how the lease is timed. The protocol's
//! timing comes from them (see [`KubernetesHa`]); the Lease itself is
//! written by the `ferry-kube` crate.

use std::path::PathBuf;
use std::time::Duration;

use super::error::ConfigError;
use super::map::Config;
use super::option::{ConfigOption, ValueError};
use super::parse::format_duration;
use super::section::Section;
use super::spec::{KeyOrigin::Flink, ValueKind};

crate::config_section! {
    /// The Kubernetes HA keys.
    pub static KUBERNETES_HA_KEYS = Section::job("Kubernetes high availability");
    /// `kubernetes.namespace`.
    pub const KUBE_NAMESPACE: ConfigOption<String> = ConfigOption::text("kubernetes.namespace")
        .origin(Flink)
        .default_value("default")
        .doc("With high-availability.type kubernetes: the namespace of the job's Lease object (coordination.k8s.io/v1, named ferry-<cluster-id>-<job id>). ferry's identity needs get, create and update on leases there (docs/dr.md, Kubernetes HA).");
    /// `kubernetes.config.file`.
    pub const KUBE_CONFIG_FILE: ConfigOption<PathBuf> = ConfigOption::new("kubernetes.config.file", ValueKind::Text, path, print_path)
        .origin(Flink)
        .derived("KUBECONFIG, else ~/.kube/config, else the pod's service account")
        .blank_means_default()
        .doc("With high-availability.type kubernetes: the kubeconfig to reach the API server with (its current context).");
    /// `high-availability.kubernetes.leader-election.lease-duration`.
    pub const KUBE_LEASE_DURATION: ConfigOption<Duration> = ConfigOption::duration("high-availability.kubernetes.leader-election.lease-duration")
        .origin(Flink)
        .default_value("15 s")
        .doc("With high-availability.type kubernetes: a standby takes over after the Lease went this long without a renewal (it replaces high-availability.lease-duration).");
    /// `high-availability.kubernetes.leader-election.renew-deadline`.
    pub const KUBE_RENEW_DEADLINE: ConfigOption<Duration> = ConfigOption::duration("high-availability.kubernetes.leader-election.renew-deadline")
        .origin(Flink)
        .default_value("15 s")
        .doc("With high-availability.type kubernetes: the active stops writing when its last renewal is this old, and never later than four fifths of the lease duration (at most the lease duration).");
    /// `high-availability.kubernetes.leader-election.retry-period`.
    pub const KUBE_RETRY_PERIOD: ConfigOption<Duration> = ConfigOption::duration("high-availability.kubernetes.leader-election.retry-period")
        .origin(Flink)
        .default_value("5 s")
        .doc("With high-availability.type kubernetes: how often the active renews the Lease and a standby reads it (at most a third of the lease duration).");
}

fn path(value: &str) -> Result<PathBuf, ValueError> {
    Ok(PathBuf::from(value.trim()))
}

#[allow(clippy::ptr_arg)] // the printer of a `PathBuf` key
fn print_path(path: &PathBuf) -> String {
    path.display().to_string()
}

/// The validated Kubernetes HA settings. How they map onto the lease
/// protocol: lease-duration is the protocol's lease duration, retry-period
/// its renew interval, and renew-deadline bounds how long the active
/// writes after its last renewal (the fence closes at
/// `min(renew-deadline, 4/5 × lease-duration)`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KubernetesHa {
    /// `kubernetes.namespace`.
    pub namespace: String,
    /// `kubernetes.config.file`, if given.
    pub config_file: Option<PathBuf>,
    /// `…leader-election.lease-duration`.
    pub lease_duration: Duration,
    /// `…leader-election.renew-deadline`.
    pub renew_deadline: Duration,
    /// `…leader-election.retry-period`.
    pub retry_period: Duration,
}

impl KubernetesHa {
    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        let namespace = keys.get(&KUBE_NAMESPACE)?.trim().to_string();
        let config_file = keys.get_optional(&KUBE_CONFIG_FILE)?;
        let lease_duration = keys.get(&KUBE_LEASE_DURATION)?;
        let renew_deadline = keys.get(&KUBE_RENEW_DEADLINE)?;
        let retry_period = keys.get(&KUBE_RETRY_PERIOD)?;
        let text = |key| keys.text(key).unwrap_or_default().to_string();
        if !is_dns_label(&namespace) {
            return Err(ConfigError::OutOfRange {
                key: KUBE_NAMESPACE.name(),
                value: namespace,
                expected: "a Kubernetes namespace name: 1-63 of [a-z0-9-], starting and ending with a letter or digit".to_string(),
            });
        }
        if lease_duration < Duration::from_secs(1) {
            return Err(ConfigError::OutOfRange {
                key: KUBE_LEASE_DURATION.name(),
                value: text(&KUBE_LEASE_DURATION),
                expected: "must be at least 1 s (the Lease counts whole seconds)".to_string(),
            });
        }
        if retry_period.is_zero() || retry_period * 3 > lease_duration {
            return Err(ConfigError::OutOfRange {
                key: KUBE_RETRY_PERIOD.name(),
                value: text(&KUBE_RETRY_PERIOD),
                expected: format!(
                    "must be greater than 0 and at most a third of the lease duration ({})",
                    format_duration(lease_duration)
                ),
            });
        }
        if renew_deadline <= retry_period || renew_deadline > lease_duration {
            return Err(ConfigError::OutOfRange {
                key: KUBE_RENEW_DEADLINE.name(),
                value: text(&KUBE_RENEW_DEADLINE),
                expected: format!(
                    "must be longer than the retry period ({}) and at most the lease duration ({})",
                    format_duration(retry_period),
                    format_duration(lease_duration)
                ),
            });
        }
        Ok(KubernetesHa {
            namespace,
            config_file,
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }
}

fn is_dns_label(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&name.len())
        && name.chars().all(|c| alnum(c) || c == '-')
        && name.starts_with(alnum)
        && name.ends_with(alnum)
}
