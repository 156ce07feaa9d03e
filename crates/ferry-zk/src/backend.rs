//! [`ZooKeeperLease`]: the lease records of one job in znodes (see the
//! crate docs for the layout and why a write is atomic).

use std::sync::atomic::{AtomicBool, Ordering};

use ferry_engine::checkpoint::JobId;
use ferry_engine::config::{ZooKeeperAcl, ZooKeeperConfig};
use ferry_engine::lease::{LeaseBackend, LeaseError, LeaseFuture, LeaseRecord};
use zookeeper_client::{Acls, CreateMode, CreateOptions, MultiWriteError};

use crate::session::Session;
use crate::ZkError;

/// Prefix of a record's znode name.
const SEQ_PREFIX: &str = "seq-";
/// Tries when the newest record vanishes between listing and reading it
/// (retention), or a write races another.
const ATTEMPTS: usize = 8;
/// How often (in positions) retention lists the lease to delete leftovers.
const SWEEP_EVERY: u64 = 64;

/// The lease of one job on a ZooKeeper quorum.
#[derive(Debug)]
pub struct ZooKeeperLease {
    session: Session,
    /// `<root>/<cluster-id>/<job-id>/lease`.
    dir: String,
    /// Whether `dir` is known to exist (created once per process).
    dir_made: AtomicBool,
}

impl ZooKeeperLease {
    /// The lease of `job` (of HA cluster `cluster_id`) with `config`'s
    /// quorum, root and client settings. Refuses a cluster id that is not
    /// one znode name.
    pub fn new(
        config: ZooKeeperConfig,
        cluster_id: &str,
        job: &JobId,
    ) -> Result<Self, InvalidClusterId> {
        let bad = cluster_id.is_empty()
            || cluster_id.contains('/')
            || cluster_id == "."
            || cluster_id == ".."
            || cluster_id.chars().any(char::is_control);
        if bad {
            return Err(InvalidClusterId(cluster_id.to_string()));
        }
        let dir = config.lease_path(cluster_id, job);
        Ok(ZooKeeperLease {
            session: Session::new(config),
            dir,
            dir_made: AtomicBool::new(false),
        })
    }

    /// The lease znode (`/flink/<cluster-id>/<job-id>/lease`).
    pub fn dir(&self) -> &str {
        &self.dir
    }

    fn seq_path(&self, seq: u64) -> String {
        format!("{}/{SEQ_PREFIX}{seq:020}", self.dir)
    }

    fn url(&self, path: &str) -> String {
        format!("zookeeper://{}{path}", self.session.config().quorum)
    }

    fn service(&self, op: &'static str, path: &str) -> impl FnOnce(ZkError) -> LeaseError {
        let path = self.url(path);
        move |source| LeaseError::Service {
            op,
            path,
            source: Box::new(source),
        }
    }

    fn options(&self) -> CreateOptions<'static> {
        let acls = match self.session.config().acl {
            ZooKeeperAcl::Open => Acls::anyone_all(),
            ZooKeeperAcl::Creator => Acls::creator_all(),
        };
        CreateMode::Persistent.with_acls(acls)
    }

    /// Creates the lease znode (and its parents) with position 0.
    async fn make_dir(&self) -> Result<(), ZkError> {
        if self.dir_made.load(Ordering::Relaxed) {
            return Ok(());
        }
        let parent = self.dir.rsplit_once('/').map_or("", |(p, _)| p).to_string();
        let options = self.options();
        let made = self
            .session
            .call(|c| async move {
                if !parent.is_empty() {
                    c.mkdir(&parent, &options).await?;
                }
                match c.create(&self.dir, b"0", &options).await {
                    Ok(_) | Err(zookeeper_client::Error::NodeExists) => Ok(()),
                    Err(e) => Err(e),
                }
            })
            .await;
        match made {
            Err(ZkError::Request(zookeeper_client::Error::InvalidAcl)) => {
                Err(ZkError::CreatorNeedsAuthentication)
            }
            Err(e) => Err(e),
            Ok(()) => {
                self.dir_made.store(true, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// The record at `seq`, if its znode exists.
    async fn read(&self, seq: u64) -> Result<Option<LeaseRecord>, LeaseError> {
        let path = self.seq_path(seq);
        let data = self
            .session
            .call(|c| {
                let path = path.clone();
                async move {
                    match c.get_data(&path).await {
                        Ok((data, _)) => Ok(Some(data)),
                        Err(zookeeper_client::Error::NoNode) => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            })
            .await
            .map_err(self.service("read", &path))?;
        let Some(data) = data else { return Ok(None) };
        LeaseRecord::from_json(seq, &data)
            .map(Some)
            .map_err(|e| LeaseError::Damaged {
                path: self.url(&path),
                reason: e.to_string(),
            })
    }

    /// The positions of the records present, ascending (none if the lease
    /// znode does not exist yet).
    async fn positions(&self) -> Result<Vec<u64>, LeaseError> {
        let dir = self.dir.clone();
        let names = self
            .session
            .call(|c| async move {
                match c.list_children(&dir).await {
                    Ok(names) => Ok(names),
                    Err(zookeeper_client::Error::NoNode) => Ok(Vec::new()),
                    Err(e) => Err(e),
                }
            })
            .await
            .map_err(self.service("list", &self.dir))?;
        let mut seqs: Vec<u64> = names
            .iter()
            .filter_map(|n| n.strip_prefix(SEQ_PREFIX)?.parse().ok())
            .collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    async fn newest_record(&self) -> Result<Option<LeaseRecord>, LeaseError> {
        for _ in 0..ATTEMPTS {
            let Some(&seq) = self.positions().await?.last() else {
                return Ok(None);
            };
            if let Some(record) = self.read(seq).await? {
                return Ok(Some(record));
            }
            // Deleted since the listing (retention): list again.
        }
        Err(LeaseError::Damaged {
            path: self.url(&self.dir),
            reason: format!("its newest record vanished {ATTEMPTS} times in a row"),
        })
    }

    /// The record holding `seq` or, if retention removed it, the newest.
    async fn winner(&self, seq: u64) -> Result<Option<LeaseRecord>, LeaseError> {
        if let Some(record) = self.read(seq).await? {
            return Ok(Some(record));
        }
        match self.newest_record().await? {
            Some(record) => Ok(Some(record)),
            None => Err(LeaseError::Damaged {
                path: self.url(&self.seq_path(seq)),
                reason: "its position was taken, yet the lease holds no record".to_string(),
            }),
        }
    }

    async fn write(&self, record: &LeaseRecord) -> Result<Option<LeaseRecord>, LeaseError> {
        let path = self.seq_path(record.seq);
        let data = record.to_json().map_err(|e| LeaseError::Damaged {
            path: self.url(&path),
            reason: e.to_string(),
        })?;
        for _ in 0..ATTEMPTS {
            let Some((newest, version)) = self.newest_position().await? else {
                // Not created yet (or the server lost its data): make it.
                self.dir_made.store(false, Ordering::Relaxed);
                self.make_dir()
                    .await
                    .map_err(self.service("create", &self.dir))?;
                continue;
            };
            if newest >= record.seq {
                return self.winner(record.seq).await;
            }
            let options = self.options();
            let (dir, seq_path, data) = (self.dir.clone(), path.clone(), data.clone());
            let position = record.seq.to_string();
            let written = self
                .session
                .call(|c| async move {
                    let mut multi = c.new_multi_writer();
                    multi.add_set_data(&dir, position.as_bytes(), Some(version))?;
                    multi.add_create(&seq_path, &data, &options)?;
                    match multi.commit().await {
                        Ok(_) => Ok(true),
                        // Another write moved the position first.
                        Err(MultiWriteError::OperationFailed {
                            source:
                                zookeeper_client::Error::BadVersion
                                | zookeeper_client::Error::NodeExists
                                | zookeeper_client::Error::NoNode,
                            ..
                        }) => Ok(false),
                        Err(e) => Err(e.into()),
                    }
                })
                .await
                .map_err(self.service("write", &path))?;
            if written {
                return Ok(None);
            }
        }
        Err(LeaseError::Damaged {
            path: self.url(&path),
            reason: format!("{ATTEMPTS} writes in a row lost a race without a winner"),
        })
    }

    /// The position the lease znode records and its version; `None`
    /// while the znode does not exist.
    async fn newest_position(&self) -> Result<Option<(u64, i32)>, LeaseError> {
        let dir = self.dir.clone();
        let read = self
            .session
            .call(|c| async move {
                match c.get_data(&dir).await {
                    Ok(found) => Ok(Some(found)),
                    Err(zookeeper_client::Error::NoNode) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await
            .map_err(self.service("read", &self.dir))?;
        let Some((data, stat)) = read else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&data);
        let newest = text
            .trim()
            .parse::<u64>()
            .map_err(|_| LeaseError::Damaged {
                path: self.url(&self.dir),
                reason: format!("its data '{text}' is not a position"),
            })?;
        Ok(Some((newest, stat.version)))
    }

    /// Deletes the record just below `seq` (one per renewal), and every
    /// [`SWEEP_EVERY`] positions all older ones (left by failed deletes).
    async fn forget(&self, seq: u64) -> Result<(), LeaseError> {
        let old: Vec<u64> = if seq.is_multiple_of(SWEEP_EVERY) {
            self.positions()
                .await?
                .into_iter()
                .filter(|s| *s < seq)
                .collect()
        } else {
            seq.checked_sub(1).filter(|s| *s > 0).into_iter().collect()
        };
        for old in old {
            let path = self.seq_path(old);
            let p = path.clone();
            self.session
                .call(|c| async move {
                    match c.delete(&p, None).await {
                        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                        Err(e) => Err(e),
                    }
                })
                .await
                .map_err(self.service("delete", &path))?;
        }
        Ok(())
    }
}

impl LeaseBackend for ZooKeeperLease {
    fn location(&self) -> String {
        self.url(&self.dir)
    }

    fn newest(&self) -> LeaseFuture<'_, Option<LeaseRecord>> {
        Box::pin(self.newest_record())
    }

    fn write_next<'a>(&'a self, record: &'a LeaseRecord) -> LeaseFuture<'a, Option<LeaseRecord>> {
        Box::pin(self.write(record))
    }

    fn forget_before(&self, seq: u64) -> LeaseFuture<'_, ()> {
        Box::pin(self.forget(seq))
    }
}

/// `high-availability.cluster-id` cannot name one znode.
#[derive(Debug, thiserror::Error)]
#[error(
    "high-availability.cluster-id '{0}' cannot be a ZooKeeper znode name \
     (no '/', not empty, '.' or '..')"
)]
pub struct InvalidClusterId(pub String);
