//! Every object name of the on-disk layout, built in one place.
//!
//! The layout is Flink's, so operational scripts written for the reference
//! job keep working:
//!
//! ```text
//! <checkpoints-dir>/<job-id>/chk-<N>/_metadata
//! <savepoint-dir>/savepoint-<first 6 hex of job id>-<12 random hex>/_metadata
//! ```
//!
//! A directory without `_metadata` is an incomplete checkpoint or savepoint.
//! Pure code: no I/O.

use super::key::StateKey;
use super::state::{to_hex, JobId};

/// Name of the file that completes a checkpoint or savepoint directory.
pub const METADATA_FILE: &str = "_metadata";
const CHECKPOINT_PREFIX: &str = "chk-";
const SAVEPOINT_PREFIX: &str = "savepoint-";

/// Builds and parses object keys under one checkpoints directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointPaths {
    root: StateKey,
}

impl CheckpointPaths {
    /// Paths under `root`, the key of `job.checkpointsDirectory`.
    pub fn new(root: StateKey) -> Self {
        CheckpointPaths { root }
    }

    /// The checkpoints directory itself.
    pub fn root(&self) -> &StateKey {
        &self.root
    }

    /// `<root>/<job-id>`: every checkpoint of one job.
    pub fn job_dir(&self, job: &JobId) -> StateKey {
        self.root.join_valid(&job.to_string())
    }

    /// `<root>/<job-id>/chk-<n>`.
    pub fn checkpoint_dir(&self, job: &JobId, n: u64) -> StateKey {
        self.job_dir(job).join_valid(&checkpoint_dir_name(n))
    }

    /// `<root>/<job-id>/chk-<n>/_metadata`.
    pub fn checkpoint_metadata(&self, job: &JobId, n: u64) -> StateKey {
        metadata_key(&self.checkpoint_dir(job, n))
    }

    /// For a key inside a job's directory, the checkpoint number and the
    /// rest of the key, when the key is `<job-dir>/chk-<N>/...`. Other keys
    /// (Flink's `shared/`, `taskowned/`, stray files) give `None`.
    pub fn parse_checkpoint_key<'k>(
        &self,
        job: &JobId,
        key: &'k StateKey,
    ) -> Option<(u64, Vec<&'k str>)> {
        let rest = key.strip_prefix(&self.job_dir(job))?;
        let (dir, inside) = rest.split_first()?;
        let n = parse_checkpoint_dir_name(dir)?;
        Some((n, inside.to_vec()))
    }
}

/// `chk-<n>`.
pub fn checkpoint_dir_name(n: u64) -> String {
    format!("{CHECKPOINT_PREFIX}{n}")
}

/// The number in `chk-<n>`. Only the canonical form is accepted (no sign,
/// no leading zeros) so two directories never map to the same number.
pub fn parse_checkpoint_dir_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(CHECKPOINT_PREFIX)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

/// `savepoint-<first 6 hex of job id>-<12 hex of random>`.
pub fn savepoint_dir_name(job: &JobId, random: [u8; 6]) -> String {
    format!("{SAVEPOINT_PREFIX}{}-{}", job.short(), to_hex(&random))
}

/// Whether `name` looks like a savepoint directory name.
pub fn is_savepoint_dir_name(name: &str) -> bool {
    name.strip_prefix(SAVEPOINT_PREFIX)
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(job, random)| {
            job.len() == 6
                && random.len() == 12
                && job
                    .bytes()
                    .chain(random.bytes())
                    .all(|b| b.is_ascii_hexdigit())
        })
}

/// `<dir>/savepoint-<job6>-<rand12>`.
pub fn savepoint_dir(savepoint_root: &StateKey, job: &JobId, random: [u8; 6]) -> StateKey {
    savepoint_root.join_valid(&savepoint_dir_name(job, random))
}

/// `<dir>/_metadata`.
pub fn metadata_key(dir: &StateKey) -> StateKey {
    dir.join_valid(METADATA_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobId {
        "0123456789abcdef0123456789abcdef"
            .parse()
            .expect("valid id")
    }

    #[test]
    fn checkpoint_names() {
        let paths = CheckpointPaths::new(StateKey::parse("var/ckpt").expect("valid"));
        assert_eq!(
            paths.job_dir(&job()).as_str(),
            "var/ckpt/0123456789abcdef0123456789abcdef"
        );
        assert_eq!(
            paths.checkpoint_metadata(&job(), 17).as_str(),
            "var/ckpt/0123456789abcdef0123456789abcdef/chk-17/_metadata"
        );
        let key = paths.checkpoint_metadata(&job(), 17);
        assert_eq!(
            paths.parse_checkpoint_key(&job(), &key),
            Some((17, vec!["_metadata"]))
        );
        let shared = paths.job_dir(&job()).join_valid("shared").join_valid("x");
        assert_eq!(paths.parse_checkpoint_key(&job(), &shared), None);
        let other_job: JobId = "ffffffffffffffffffffffffffffffff".parse().expect("valid");
        assert_eq!(paths.parse_checkpoint_key(&other_job, &key), None);
        // A root-level checkpoints directory works too.
        let at_root = CheckpointPaths::new(StateKey::root());
        assert_eq!(
            at_root.checkpoint_dir(&job(), 1).as_str(),
            "0123456789abcdef0123456789abcdef/chk-1"
        );
    }

    #[test]
    fn checkpoint_dir_names_are_canonical() {
        assert_eq!(parse_checkpoint_dir_name("chk-0"), Some(0));
        assert_eq!(parse_checkpoint_dir_name("chk-42"), Some(42));
        assert_eq!(
            parse_checkpoint_dir_name(&checkpoint_dir_name(u64::MAX)),
            Some(u64::MAX)
        );
        for bad in [
            "chk-",
            "chk-007",
            "chk--1",
            "chk-+1",
            "chk-1a",
            "chk-18446744073709551616",
            "shared",
            "CHK-1",
        ] {
            assert_eq!(parse_checkpoint_dir_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn savepoint_names() {
        let name = savepoint_dir_name(&job(), [0xde, 0xad, 0xbe, 0xef, 0x00, 0x01]);
        assert_eq!(name, "savepoint-012345-deadbeef0001");
        assert!(is_savepoint_dir_name(&name));
        assert!(!is_savepoint_dir_name("savepoint-012345-dead"));
        assert!(!is_savepoint_dir_name("chk-1"));
        let dir = savepoint_dir(&StateKey::parse("sp").expect("valid"), &job(), [0; 6]);
        assert_eq!(
            metadata_key(&dir).as_str(),
            "sp/savepoint-012345-000000000000/_metadata"
        );
    }
}
