//! Protocol tests of [`CheckpointStore`], each run on the local filesystem
//! (temp dirs) and on the in-memory store: writing, restoring the latest
//! complete checkpoint past crash debris and damage, retention, savepoints
//! and restore pointers.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::time::SourceTime;

/// One backend under test, with a way to plant raw files (crash debris,
/// damage) behind the store's back.
enum Backend {
    Memory(Arc<MemoryStateStore>),
    Local(tempfile::TempDir),
}

impl Backend {
    fn all() -> Vec<Backend> {
        vec![
            Backend::Memory(Arc::new(MemoryStateStore::new())),
            Backend::Local(tempfile::tempdir().expect("tempdir")),
        ]
    }

    fn name(&self) -> &'static str {
        match self {
            Backend::Memory(_) => "memory",
            Backend::Local(_) => "local",
        }
    }

    /// A directory under this backend's root.
    fn dir(&self, name: &str) -> StorageLocation {
        match self {
            Backend::Memory(_) => StorageLocation::Local(PathBuf::from("/mem").join(name)),
            Backend::Local(tmp) => StorageLocation::local(&tmp.path().join(name)).expect("path"),
        }
    }

    fn checkpoints(&self, retained: usize) -> CheckpointStore {
        let store: Arc<dyn StateStore> = match self {
            Backend::Memory(m) => m.clone(),
            Backend::Local(_) => Arc::new(ObjectStateStore::local()),
        };
        CheckpointStore::new(
            store,
            &self.dir("ckpt"),
            NonZeroUsize::new(retained).expect("retained > 0"),
        )
    }

    /// Writes raw bytes at `key`, overwriting, like a crash or a disk fault.
    fn plant(&self, key: &StateKey, bytes: &[u8]) {
        match self {
            Backend::Memory(m) => m.overwrite(key, bytes.to_vec()),
            Backend::Local(_) => {
                let path = StorageLocation::local_from_key(key);
                let path = path.as_local_path().expect("local");
                std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
                std::fs::write(path, bytes).expect("write");
            }
        }
    }

    fn read(&self, key: &StateKey) -> Vec<u8> {
        match self {
            Backend::Memory(m) => {
                let store: &dyn StateStore = m.as_ref();
                futures::executor::block_on(store.get(key))
                    .expect("get")
                    .expect("present")
                    .to_vec()
            }
            Backend::Local(_) => {
                let path = StorageLocation::local_from_key(key);
                std::fs::read(path.as_local_path().expect("local")).expect("read")
            }
        }
    }
}

fn job() -> JobId {
    "c0ffee00112233445566778899aabbcc"
        .parse()
        .expect("valid id")
}

fn checkpoint_state(n: u64) -> JobState {
    let mut state = JobState::new(
        job(),
        SnapshotKind::Checkpoint,
        n,
        "orders",
        vec!["src:7051".into()],
        vec!["sink:7051".into()],
    );
    // Fixed time so written and expected states compare equal.
    state.created_at_ms = 1_700_000_000_000 + n;
    // Distinguishable states: checkpoint n finished window n.
    state.last_end_timestamp = Some(SourceTime::from_raw(1000 * n));
    state.window = Some(WindowState {
        start_timestamp: Some(SourceTime::from_raw(1000 * n)),
        end_timestamp: SourceTime::from_raw(1000 * n + 500),
    });
    state.pending = vec![SplitState {
        split_id: format!("split-{n}").into(),
        descriptor: vec![n as u8; 32],
        resume_key: Some(vec![0, n as u8]),
    }];
    state
}

fn savepoint_state() -> JobState {
    let mut state = checkpoint_state(9);
    state.kind = SnapshotKind::Savepoint;
    state
}

async fn write(store: &CheckpointStore, n: u64) -> WrittenCheckpoint {
    store
        .write_checkpoint(&job(), n, &checkpoint_state(n))
        .await
        .expect("write checkpoint")
}

async fn latest_id(store: &CheckpointStore) -> Option<u64> {
    store
        .latest_complete(&job())
        .await
        .expect("latest")
        .checkpoint
        .map(|c| c.id)
}

/// The `chk-<N>` numbers present (complete or not), via the store.
async fn chk_dirs(store: &CheckpointStore) -> Vec<u64> {
    let mut ids: Vec<u64> = store
        .store()
        .list(&store.paths().job_dir(&job()))
        .await
        .expect("list")
        .iter()
        .filter_map(|k| {
            store
                .paths()
                .parse_checkpoint_key(&job(), k)
                .map(|(n, _)| n)
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

#[tokio::test]
async fn write_then_restore_latest() {
    for backend in Backend::all() {
        let store = backend.checkpoints(3);
        assert_eq!(latest_id(&store).await, None, "{}", backend.name());
        assert_eq!(store.next_checkpoint_id(&job()).await.expect("next"), 1);

        let written = write(&store, 1).await;
        assert_eq!(written.id, 1);
        assert_eq!(
            written.location,
            StorageLocation::local_from_key(&store.paths().checkpoint_dir(&job(), 1))
        );
        assert!(written
            .location
            .to_string()
            .ends_with("/ckpt/c0ffee00112233445566778899aabbcc/chk-1"));
        write(&store, 2).await;

        let latest = store.latest_complete(&job()).await.expect("latest");
        let chosen = latest.checkpoint.expect("a checkpoint");
        assert_eq!(chosen.id, 2, "{}", backend.name());
        assert_eq!(chosen.state, checkpoint_state(2));
        assert!(latest.skipped.is_empty());
        assert_eq!(store.next_checkpoint_id(&job()).await.expect("next"), 3);

        // Another job's directory is separate.
        let other: JobId = "00000000000000000000000000000001".parse().expect("valid");
        assert!(store
            .latest_complete(&other)
            .await
            .expect("latest")
            .checkpoint
            .is_none());
    }
}

#[tokio::test]
async fn metadata_is_never_overwritten() {
    for backend in Backend::all() {
        let store = backend.checkpoints(3);
        write(&store, 1).await;
        let mut different = checkpoint_state(1);
        different.table_name = "other".into();
        let err = store
            .write_checkpoint(&job(), 1, &different)
            .await
            .unwrap_err();
        assert!(
            matches!(err, CheckpointError::AlreadyExists { .. }),
            "{}: {err:?}",
            backend.name()
        );
        assert!(err.to_string().contains("chk-1/_metadata"), "{err}");
        let latest = store.latest_complete(&job()).await.expect("latest");
        assert_eq!(
            latest.checkpoint.expect("present").state,
            checkpoint_state(1)
        );
    }
}

#[tokio::test]
async fn mismatched_state_is_refused() {
    let backend = Backend::Memory(Arc::new(MemoryStateStore::new()));
    let store = backend.checkpoints(3);
    let other: JobId = "ffffffffffffffffffffffffffffffff".parse().expect("valid");
    let err = store
        .write_checkpoint(&other, 1, &checkpoint_state(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("belongs to job"), "{err}");
    let err = store
        .write_checkpoint(&job(), 2, &checkpoint_state(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is checkpoint 1, not 2"), "{err}");
    let err = store
        .write_checkpoint(&job(), 9, &savepoint_state())
        .await
        .unwrap_err();
    assert!(
        matches!(err, CheckpointError::StateMismatch { .. }),
        "{err:?}"
    );
    let err = store
        .write_savepoint(&backend.dir("sp"), &checkpoint_state(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a savepoint"), "{err}");
    let mut broken = checkpoint_state(3);
    broken.window = None;
    let err = store
        .write_checkpoint(&job(), 3, &broken)
        .await
        .unwrap_err();
    assert!(
        matches!(err, CheckpointError::InvalidMetadata { .. }),
        "{err:?}"
    );
    assert_eq!(latest_id(&store).await, None);
}

#[tokio::test]
async fn truncated_metadata_falls_back_to_previous() {
    for backend in Backend::all() {
        let store = backend.checkpoints(5);
        write(&store, 1).await;
        write(&store, 2).await;
        let meta = store.paths().checkpoint_metadata(&job(), 2);
        let whole = backend.read(&meta);
        // A torn write at every possible length, one at a time.
        for cut in (0..whole.len()).step_by(7).chain([whole.len() - 1]) {
            backend.plant(&meta, &whole[..cut]);
            let latest = store.latest_complete(&job()).await.expect("latest");
            assert_eq!(latest.checkpoint.map(|c| c.id), Some(1), "cut {cut}");
            assert_eq!(latest.skipped.len(), 1);
            assert_eq!(latest.skipped[0].id, 2);
            assert!(
                matches!(
                    latest.skipped[0].reason,
                    SkipReason::Invalid(MetadataError::Truncated { .. })
                ),
                "{}: cut {cut}: {:?}",
                backend.name(),
                latest.skipped[0].reason
            );
        }
        // Loading the torn one directly names the file and the problem.
        backend.plant(&meta, &whole[..whole.len() / 2]);
        let pointer = StorageLocation::local_from_key(&meta).to_string();
        let err = store.load(&pointer).await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&pointer), "{msg}");
        assert!(msg.contains("truncated"), "{msg}");
    }
}

#[tokio::test]
async fn flipped_byte_is_detected() {
    for backend in Backend::all() {
        let store = backend.checkpoints(5);
        write(&store, 1).await;
        write(&store, 2).await;
        let meta = store.paths().checkpoint_metadata(&job(), 2);
        let mut damaged = backend.read(&meta);
        let middle = damaged.len() / 2;
        damaged[middle] ^= 0x20;
        backend.plant(&meta, &damaged);
        let latest = store.latest_complete(&job()).await.expect("latest");
        assert_eq!(
            latest.checkpoint.map(|c| c.id),
            Some(1),
            "{}",
            backend.name()
        );
        assert!(matches!(
            latest.skipped[0].reason,
            SkipReason::Invalid(MetadataError::ChecksumMismatch { .. })
        ));
        let err = store
            .load(&StorageLocation::local_from_key(&meta).to_string())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
    }
}

#[tokio::test]
async fn checkpoint_dir_without_metadata_is_ignored() {
    for backend in Backend::all() {
        let store = backend.checkpoints(5);
        write(&store, 1).await;
        // A crash after writing some other file of chk-2 but before _metadata.
        let dir = store.paths().checkpoint_dir(&job(), 2);
        backend.plant(&dir.child("state-0").expect("valid"), b"partial");
        let latest = store.latest_complete(&job()).await.expect("latest");
        assert_eq!(
            latest.checkpoint.map(|c| c.id),
            Some(1),
            "{}",
            backend.name()
        );
        assert_eq!(latest.skipped[0].id, 2);
        assert_eq!(latest.skipped[0].reason, SkipReason::MissingMetadata);
        // The next checkpoint number skips past the debris.
        assert_eq!(store.next_checkpoint_id(&job()).await.expect("next"), 3);
        // Pointing a restore at it is refused.
        let err = store
            .load(&StorageLocation::local_from_key(&dir).to_string())
            .await
            .unwrap_err();
        assert!(matches!(err, CheckpointError::Incomplete { .. }), "{err:?}");
        assert!(err.to_string().contains("has no _metadata"), "{err}");
    }
}

#[tokio::test]
async fn staging_file_left_by_a_crashed_local_write_is_ignored() {
    // object_store stages `_metadata#<n>` and hard-links it into place; a
    // crash before the link leaves only the staging file.
    let backend = Backend::Local(tempfile::tempdir().expect("tempdir"));
    let store = backend.checkpoints(3);
    write(&store, 1).await;
    let staged = StorageLocation::local_from_key(&store.paths().checkpoint_dir(&job(), 2));
    let staged_path = staged.as_local_path().expect("local").join("_metadata#1");
    std::fs::create_dir_all(staged_path.parent().expect("parent")).expect("mkdir");
    let half = encode_metadata(&checkpoint_state(2)).expect("encode");
    std::fs::write(&staged_path, &half[..half.len() / 2]).expect("write");
    assert_eq!(latest_id(&store).await, Some(1));
    // Checkpoint 2 can still be written afterwards.
    write(&store, 2).await;
    assert_eq!(latest_id(&store).await, Some(2));
}

#[tokio::test]
async fn unknown_version_is_an_error_not_a_fallback() {
    for backend in Backend::all() {
        let store = backend.checkpoints(5);
        write(&store, 1).await;
        write(&store, 2).await;
        let meta = store.paths().checkpoint_metadata(&job(), 2);
        let mut future = backend.read(&meta);
        future[8..12].copy_from_slice(&2u32.to_be_bytes());
        let body = future.len() - TRAILER_LEN;
        let crc = crc32c::crc32c(&future[..body]);
        future[body..].copy_from_slice(&crc.to_be_bytes());
        backend.plant(&meta, &future);

        let err = store.latest_complete(&job()).await.unwrap_err();
        assert!(
            matches!(
                err,
                CheckpointError::InvalidMetadata {
                    error: MetadataError::UnsupportedVersion { found: 2, .. },
                    ..
                }
            ),
            "{}: {err:?}",
            backend.name()
        );
        let msg = err.to_string();
        assert!(msg.contains("chk-2/_metadata"), "{msg}");
        assert!(msg.contains("format version 2 is not supported"), "{msg}");
        let err = store
            .load(&StorageLocation::local_from_key(&meta).to_string())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("newer ferry"), "{err}");
    }
}

#[tokio::test]
async fn checkpoint_copied_from_another_job_is_not_chosen() {
    let backend = Backend::Memory(Arc::new(MemoryStateStore::new()));
    let store = backend.checkpoints(5);
    write(&store, 1).await;
    // chk-2 holds a valid state, but of checkpoint 7.
    let bytes = encode_metadata(&checkpoint_state(7)).expect("encode");
    backend.plant(&store.paths().checkpoint_metadata(&job(), 2), &bytes);
    let latest = store.latest_complete(&job()).await.expect("latest");
    assert_eq!(latest.checkpoint.map(|c| c.id), Some(1));
    assert!(matches!(
        &latest.skipped[0].reason,
        SkipReason::Invalid(MetadataError::InvalidState { reason }) if reason.to_string().contains("found as chk-2")
    ));
}

#[tokio::test]
async fn retention_keeps_exactly_n() {
    for backend in Backend::all() {
        let store = backend.checkpoints(3);
        for n in 1..=7 {
            let written = write(&store, n).await;
            let expected_kept: Vec<u64> = (n.saturating_sub(2).max(1)..=n).rev().collect();
            assert_eq!(
                written.retention.kept,
                expected_kept,
                "{} after {n}",
                backend.name()
            );
            assert!(
                written.retention.errors.is_empty(),
                "{:?}",
                written.retention
            );
            assert_eq!(
                chk_dirs(&store).await,
                (n.saturating_sub(2).max(1)..=n).collect::<Vec<_>>()
            );
        }
        assert_eq!(chk_dirs(&store).await, [5, 6, 7]);
        assert_eq!(latest_id(&store).await, Some(7));
        if let Backend::Local(tmp) = &backend {
            // No empty chk-<N> shells left behind on disk.
            let job_dir = tmp.path().join("ckpt").join(job().to_string());
            let mut names: Vec<String> = std::fs::read_dir(&job_dir)
                .expect("read_dir")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            assert_eq!(names, ["chk-5", "chk-6", "chk-7"]);
        }
    }
}

#[tokio::test]
async fn retention_with_one_retained_keeps_only_the_new_one() {
    let backend = Backend::Memory(Arc::new(MemoryStateStore::new()));
    let store = backend.checkpoints(1);
    write(&store, 1).await;
    let written = write(&store, 2).await;
    assert_eq!(written.retention.kept, [2]);
    assert_eq!(written.retention.deleted, [1]);
    assert_eq!(chk_dirs(&store).await, [2]);
}

#[tokio::test]
async fn retention_counts_only_valid_checkpoints() {
    for backend in Backend::all() {
        let store = backend.checkpoints(3);
        for n in 1..=3 {
            write(&store, n).await;
        }
        // chk-3 gets damaged and chk-4 is crash debris.
        let meta3 = store.paths().checkpoint_metadata(&job(), 3);
        let torn = backend.read(&meta3);
        backend.plant(&meta3, &torn[..10]);
        backend.plant(
            &store
                .paths()
                .checkpoint_dir(&job(), 4)
                .child("state-0")
                .expect("valid"),
            b"x",
        );
        let written = write(&store, 5).await;
        assert_eq!(written.retention.kept, [5, 2, 1], "{}", backend.name());
        assert_eq!(written.retention.deleted, [4, 3]);
        assert_eq!(chk_dirs(&store).await, [1, 2, 5]);
    }
}

#[tokio::test]
async fn retention_never_deletes_the_new_checkpoint_or_newer_ones() {
    let backend = Backend::Memory(Arc::new(MemoryStateStore::new()));
    let store = backend.checkpoints(2);
    // chk-10 exists before 1 and 2 are written (e.g. left by another run).
    for n in [10, 1, 2] {
        write(&store, n).await;
    }
    // Writing 3: 10 is newer than the new checkpoint and not ours to judge.
    let written = write(&store, 3).await;
    assert_eq!(written.retention.kept, [3, 2]);
    assert_eq!(written.retention.deleted, [1]);
    assert_eq!(chk_dirs(&store).await, [2, 3, 10]);
}

#[tokio::test]
async fn savepoints_use_flink_names_and_survive_retention() {
    for backend in Backend::all() {
        let store = backend.checkpoints(1);
        // One savepoint in its own directory, one inside the checkpoints dir.
        let sp_dir = backend.dir("savepoints");
        let first = store
            .write_savepoint(&sp_dir, &savepoint_state())
            .await
            .expect("savepoint");
        let second = store
            .write_savepoint(&backend.dir("ckpt"), &savepoint_state())
            .await
            .expect("savepoint");
        assert_ne!(first, second);
        for sp in [&first, &second] {
            let key = sp.key();
            let name = key.file_name().expect("name");
            assert!(is_savepoint_dir_name(name), "{name}");
            assert!(name.starts_with("savepoint-c0ffee-"), "{name}");
        }
        assert_eq!(first.key().parent(), Some(sp_dir.key()));

        for n in 1..=4 {
            write(&store, n).await;
        }
        for sp in [&first, &second] {
            let loaded = store.load(&sp.to_string()).await.expect("load savepoint");
            assert_eq!(loaded.state, savepoint_state(), "{}", backend.name());
            assert_eq!(&loaded.location, sp);
        }
        assert_eq!(chk_dirs(&store).await, [4]);
    }
}

#[tokio::test]
async fn load_accepts_directory_metadata_file_and_uri() {
    for backend in Backend::all() {
        let store = backend.checkpoints(3);
        let written = write(&store, 4).await;
        let dir = written.location.to_string();
        let uri = written.location.to_uri();
        for pointer in [
            dir.clone(),
            format!("{dir}/"),
            format!("{dir}/_metadata"),
            uri.clone(),
            format!("{uri}/_metadata"),
        ] {
            let loaded = store
                .load(&pointer)
                .await
                .unwrap_or_else(|e| panic!("{pointer}: {e}"));
            assert_eq!(loaded.state, checkpoint_state(4), "{pointer}");
            assert_eq!(loaded.location, written.location, "{pointer}");
        }
    }
}

#[tokio::test]
async fn load_explains_bad_pointers() {
    for backend in Backend::all() {
        let store = backend.checkpoints(3);
        write(&store, 1).await;
        write(&store, 2).await;

        let missing = backend.dir("nothing-here").to_string();
        let err = store.load(&missing).await.unwrap_err();
        assert!(matches!(err, CheckpointError::NotFound { .. }), "{err:?}");
        assert!(err.to_string().contains(&missing), "{err}");

        let job_dir = StorageLocation::local_from_key(&store.paths().job_dir(&job())).to_string();
        let err = store.load(&job_dir).await.unwrap_err();
        assert!(
            matches!(err, CheckpointError::InvalidPointer { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("chk-2"), "{err}");

        // An incomplete savepoint directory.
        let sp = savepoint_dir(&backend.dir("sp").key(), &job(), [1; 6]);
        backend.plant(&sp.child("state-0").expect("valid"), b"x");
        let err = store
            .load(&StorageLocation::local_from_key(&sp).to_string())
            .await
            .unwrap_err();
        assert!(matches!(err, CheckpointError::Incomplete { .. }), "{err:?}");

        // Unrelated directories and the root are not walked, just refused.
        for pointer in ["/", &backend.dir("ckpt").to_string()] {
            let err = store.load(pointer).await.unwrap_err();
            assert!(
                matches!(err, CheckpointError::NotFound { .. }),
                "{pointer}: {err:?}"
            );
        }

        // A regular file that is not `_metadata`.
        let stray = store
            .paths()
            .checkpoint_dir(&job(), 1)
            .child("notes")
            .expect("valid");
        backend.plant(&stray, b"x");
        let err = store
            .load(&StorageLocation::local_from_key(&stray).to_string())
            .await
            .unwrap_err();
        assert!(
            matches!(err, CheckpointError::NotFound { .. }),
            "{}: {err:?}",
            backend.name()
        );

        let err = store.load("hdfs://nn/sp").await.unwrap_err();
        assert!(
            err.to_string().contains("'hdfs' scheme is not supported"),
            "{err}"
        );

        // A foreign file named _metadata.
        let foreign = store.paths().checkpoint_metadata(&job(), 3);
        backend.plant(&foreign, b"{\"not\": \"ours\"}");
        let err = store
            .load(&StorageLocation::local_from_key(&foreign).to_string())
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("not a ferry checkpoint file"),
            "{err}"
        );
        assert!(!err.is_retryable());
    }
}

#[tokio::test]
async fn relative_pointer_resolves_against_current_dir() {
    // Parsing only: the pointer becomes absolute before any I/O.
    let loc = StorageLocation::parse("some/rel/dir").expect("valid");
    let cwd = std::env::current_dir().expect("cwd");
    assert_eq!(
        loc.as_local_path(),
        Some(cwd.join("some/rel/dir").as_path())
    );
}

#[tokio::test]
async fn open_local_writes_real_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir =
        StorageLocation::parse(&format!("file://{}", tmp.path().join("c").display())).expect("uri");
    let store = CheckpointStore::open_local(&dir, NonZeroUsize::MIN);
    write(&store, 1).await;
    let file = tmp
        .path()
        .join("c")
        .join(job().to_string())
        .join("chk-1")
        .join("_metadata");
    let bytes = std::fs::read(&file).expect("file exists");
    assert_eq!(&bytes[..8], b"FERRYCKP");
    assert_eq!(
        decode_metadata(&bytes).expect("decode"),
        checkpoint_state(1)
    );
}

/// Resolves `s3://` locations to one memory store and local ones to
/// another: two stores, told apart by the resolver alone.
#[derive(Debug, Default)]
struct TwoStores {
    disk: Arc<MemoryStateStore>,
    bucket: Arc<MemoryStateStore>,
}

impl StoreResolver for TwoStores {
    fn open(&self, location: &StorageLocation) -> Result<Arc<dyn StateStore>, StoreError> {
        Ok(match location {
            StorageLocation::Object(o) if o.bucket == "bkt" => self.bucket.clone(),
            StorageLocation::Object(_) => {
                return Err(StoreError::Open {
                    location: location.to_uri(),
                    reason: "unknown bucket".into(),
                })
            }
            _ => self.disk.clone(),
        })
    }
}

#[tokio::test]
async fn checkpoints_on_an_object_store_come_back_as_uris() {
    let resolver = Arc::new(TwoStores::default());
    let dir = StorageLocation::parse("s3://bkt/ferry/ckpt").expect("valid");
    let store = CheckpointStore::open(
        &dir,
        NonZeroUsize::new(2).expect("non-zero"),
        resolver.clone(),
    )
    .expect("open");
    assert_eq!(store.checkpoints_dir(), &dir);
    let written = write(&store, 1).await;
    assert_eq!(
        written.location.to_string(),
        format!("s3://bkt/ferry/ckpt/{}/chk-1", job())
    );
    assert_eq!(resolver.bucket.len(), 1);
    assert!(resolver.disk.is_empty());
    let latest = store.latest_complete(&job()).await.expect("latest");
    assert_eq!(
        latest.checkpoint.expect("checkpoint").location,
        written.location
    );
    // A pointer printed by ferry loads back from the same bucket.
    let loaded = store
        .load(&written.location.to_string())
        .await
        .expect("load");
    assert_eq!(loaded.location, written.location);
    assert_eq!(loaded.state, checkpoint_state(1));
}

#[tokio::test]
async fn savepoints_and_pointers_in_other_stores_go_through_the_resolver() {
    let resolver = Arc::new(TwoStores::default());
    let store = CheckpointStore::open(
        &StorageLocation::parse("/var/ckpt").expect("valid"),
        NonZeroUsize::new(1).expect("non-zero"),
        resolver.clone(),
    )
    .expect("open");
    // Checkpoints on "disk", savepoint into the bucket.
    let target = StorageLocation::parse("s3://bkt/sp").expect("valid");
    let sp = store
        .write_savepoint(&target, &savepoint_state())
        .await
        .expect("savepoint");
    assert!(
        sp.to_string().starts_with("s3://bkt/sp/savepoint-c0ffee-"),
        "{sp}"
    );
    assert_eq!(resolver.bucket.len(), 1);
    assert!(resolver.disk.is_empty());
    let loaded = store.load(&sp.to_uri()).await.expect("load");
    assert_eq!(loaded.location, sp);
    assert_eq!(loaded.state, savepoint_state());
    // A savepoint on "disk" is read from disk, not the bucket.
    let local_sp = store
        .write_savepoint(
            &StorageLocation::parse("/var/sp").expect("valid"),
            &savepoint_state(),
        )
        .await
        .expect("savepoint");
    assert_eq!(resolver.disk.len(), 1);
    assert_eq!(
        store
            .load(&local_sp.to_string())
            .await
            .expect("load")
            .location,
        local_sp
    );
    // A missing savepoint in the bucket is named by its URI.
    let missing = format!("{}-missing", sp.to_uri());
    let err = store.load(&missing).await.unwrap_err();
    assert!(err.to_string().contains("s3://bkt/sp/"), "{err}");
    // A store the resolver cannot open is an error naming the location.
    let err = store
        .write_savepoint(
            &StorageLocation::parse("s3://nope/sp").expect("valid"),
            &savepoint_state(),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("s3://nope/sp") && err.to_string().contains("unknown bucket"),
        "{err}"
    );
}

#[tokio::test]
async fn local_resolver_refuses_object_stores_with_a_clear_error() {
    let dir = StorageLocation::parse("s3://bkt/ckpt").expect("valid");
    let err = CheckpointStore::open(
        &dir,
        NonZeroUsize::new(1).expect("non-zero"),
        Arc::new(LocalResolver),
    )
    .unwrap_err();
    assert!(err.to_string().contains("s3://bkt/ckpt"), "{err}");
    // open_local keeps compiling callers working and fails on use instead.
    let store = CheckpointStore::open_local(&dir, NonZeroUsize::new(1).expect("non-zero"));
    let err = store.latest_complete(&job()).await.unwrap_err();
    assert!(err.to_string().contains("only local paths"), "{err}");
}
