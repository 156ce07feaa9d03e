//! A job of several tables with in-memory connectors (no Kudu): every
//! table gets its own window chain and its state in the one checkpoint;
//! discovery adds, renames and retires tables; a table whose schema change
//! is refused is paused while the others go on; a restored table that was
//! dropped and created again under its name is refused.

use super::tests::Numbers;
use super::*;
use crate::checkpoint::{MemoryStateStore, SplitState, TableState, WindowState};
use crate::connector::{CapabilityFuture, SchemaFollower};
use crate::connector::{
    ReadBatch, SchemaRecord, SinkWriter, SplitReader, TableRef, Tables, WriteStats,
};
use crate::error::{ConnectorError, Domain, EngineError};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The source cluster's tables, changed by the tests.
#[derive(Default)]
struct Catalog {
    tables: Mutex<Vec<TableRef>>,
    /// Schema version of every table (bumped to make a schema change).
    schema_version: AtomicU64,
    /// Rows written per table id.
    written: Mutex<std::collections::BTreeMap<String, u64>>,
    /// Tables whose sink refuses any schema change.
    refuse: Mutex<Vec<String>>,
}

impl Catalog {
    fn with(names: &[&str]) -> Arc<Self> {
        let c = Catalog::default();
        if let Ok(mut t) = c.tables.lock() {
            for n in names {
                t.push(TableRef {
                    id: format!("id-{n}").into(),
                    name: (*n).to_owned(),
                });
            }
        }
        Arc::new(c)
    }

    fn written(&self, id: &str) -> u64 {
        self.written
            .lock()
            .map(|w| w.get(id).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

struct FakeTables(Arc<Catalog>);

impl Tables for FakeTables {
    type Source = FakeSource;
    type Sink = FakeSink;

    async fn discover(&self, known: &[TableRef]) -> Result<Vec<TableRef>, EngineError> {
        let tables = self.0.tables.lock().map(|t| t.clone()).unwrap_or_default();
        // Known tables are followed by id; the "selection" here is all.
        let _ = known;
        Ok(tables)
    }

    fn connect(&self, table: &TableRef) -> Result<(FakeSource, FakeSink), EngineError> {
        Ok((
            FakeSource {
                clock: AtomicU64::new(100),
                catalog: self.0.clone(),
            },
            FakeSink {
                id: table.id.as_str().to_owned(),
                catalog: self.0.clone(),
            },
        ))
    }
}

/// One split per window, one batch of two numbers.
struct FakeSource {
    clock: AtomicU64,
    catalog: Arc<Catalog>,
}

impl Source for FakeSource {
    type Batch = Numbers;
    type Reader = FakeReader;

    const NAME: &'static str = "TestSource";

    const CLOCK: crate::time::SourceClock = crate::time::SourceClock::EPOCH_MILLIS;

    async fn now(&self) -> Result<crate::time::SourceTime, EngineError> {
        Ok(crate::time::SourceTime::from_raw(
            self.clock.fetch_add(10, Ordering::SeqCst) + 10,
        ))
    }

    async fn plan(
        &self,
        window: WindowState,
        _cursor: Option<&serde_json::Value>,
    ) -> Result<crate::connector::WindowPlan, EngineError> {
        Ok(crate::connector::WindowPlan::of(vec![SplitState {
            split_id: format!("s-{}", window.end_timestamp).into(),
            descriptor: vec![1],
            resume_key: None,
        }]))
    }

    async fn open(&self, _split: &SplitState) -> Result<FakeReader, EngineError> {
        Ok(FakeReader { done: false })
    }

    async fn schema(&self) -> Result<Option<SchemaRecord>, EngineError> {
        let v = self.catalog.schema_version.load(Ordering::SeqCst);
        Ok(Some(SchemaRecord(serde_json::json!({ "version": v }))))
    }
}

struct FakeReader {
    done: bool,
}

impl SplitReader for FakeReader {
    type Batch = Numbers;

    async fn next(&mut self) -> Result<Option<ReadBatch<Numbers>>, EngineError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(None);
        }
        Ok(Some(ReadBatch {
            rows: Numbers(vec![1, 2]),
            resume_key: Some(vec![1]),
        }))
    }
}

struct FakeSink {
    id: String,
    catalog: Arc<Catalog>,
}

struct FakeWriter {
    id: String,
    catalog: Arc<Catalog>,
}

impl Sink<Numbers> for FakeSink {
    type Writer = FakeWriter;

    async fn writer(&self) -> Result<FakeWriter, EngineError> {
        Ok(FakeWriter {
            id: self.id.clone(),
            catalog: self.catalog.clone(),
        })
    }

    fn schema_follower(&self) -> Option<&dyn SchemaFollower> {
        Some(self)
    }
}

impl SchemaFollower for FakeSink {
    fn follow_schema<'a>(
        &'a self,
        applied: Option<&'a SchemaRecord>,
        _now: &'a SchemaRecord,
    ) -> CapabilityFuture<'a, ()> {
        let refused = self
            .catalog
            .refuse
            .lock()
            .map(|r| r.contains(&self.id))
            .unwrap_or(false);
        let result = if applied.is_some() && refused {
            Err(ConnectorError::new(
                Domain::Sink,
                "SchemaChange",
                format!("column 'c' of table {} changed type", self.id),
            )
            .table(self.id.clone())
            .table_fault()
            .into())
        } else {
            Ok(())
        };
        Box::pin(async move { result })
    }
}

impl SinkWriter<Numbers> for FakeWriter {
    async fn write(&mut self, batch: &Numbers) -> Result<WriteStats, EngineError> {
        if let Ok(mut w) = self.catalog.written.lock() {
            *w.entry(self.id.clone()).or_default() += batch.0.len() as u64;
        }
        Ok(WriteStats {
            upserts: batch.0.len() as u64,
            ..WriteStats::default()
        })
    }
}

fn config(names: &str) -> JobConfig {
    let pairs = [
        ("job.sourceMasterAddresses", "a:7051"),
        ("job.sinkMasterAddresses", "b:7051"),
        ("job.tableName", names),
        ("job.checkpointsDirectory", "/mem/chk"),
        ("job.discoveryIntervalSeconds", "1"),
        ("job.checkpointingIntervalMillis", "100"),
    ];
    let mut c = JobConfig::from_named_pairs(pairs).expect("config");
    c.table_discovery_interval = Duration::from_millis(200);
    c
}

fn store(memory: &Arc<MemoryStateStore>, config: &JobConfig) -> CheckpointStore {
    CheckpointStore::new(
        memory.clone(),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    )
}

/// Waits until `done` holds for the job's tables (at most 10 s).
async fn until(
    job: &JobHandle,
    what: &str,
    done: impl Fn(&[crate::status::TableSnapshot]) -> bool,
) {
    for _ in 0..1000 {
        if done(&job.tables()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}: {:?}", job.tables());
}

fn windows(tables: &[crate::status::TableSnapshot], name: &str) -> u64 {
    tables
        .iter()
        .find(|t| t.table_name == name)
        .map_or(0, |t| t.windows_completed)
}

#[tokio::test]
async fn every_table_has_its_chain_and_its_state_in_the_one_checkpoint() {
    let catalog = Catalog::with(&["a", "b", "c"]);
    let config = config("a,b,c");
    let memory = Arc::new(MemoryStateStore::new());
    let job = Job::start_tables(
        &config,
        None,
        FakeTables(catalog.clone()),
        store(&memory, &config),
        JobOptions::new(1),
    )
    .await
    .expect("starts");
    until(&job, "two windows of every table", |t| {
        t.len() == 3 && ["a", "b", "c"].iter().all(|n| windows(t, n) >= 2)
    })
    .await;
    // One pipeline served all three tables.
    for id in ["id-a", "id-b", "id-c"] {
        assert!(catalog.written(id) >= 4, "{id}: {}", catalog.written(id));
    }
    let path = job
        .savepoint(Some(StorageLocation::parse("/mem/sp").expect("dir")))
        .await
        .expect("savepoint");
    let state = store(&memory, &config)
        .load(&path)
        .await
        .expect("load")
        .state;
    let ids: Vec<_> = state.tables.iter().map(|t| t.table_id.as_str()).collect();
    assert_eq!(ids, ["id-a", "id-b", "id-c"]);
    assert!(state.tables.iter().all(|t| t.last_end_timestamp.is_some()));
    assert!(state.tables.iter().all(|t| t.schema.is_some()));
    // The job-wide end is the smallest table end.
    let min = state
        .tables
        .iter()
        .filter_map(|t| t.last_end_timestamp)
        .min();
    assert_eq!(state.last_end_timestamp, min);
    job.cancel().await;
}

#[tokio::test]
async fn discovery_adds_new_tables_follows_renames_and_retires_dropped_ones() {
    let catalog = Catalog::with(&["a", "b"]);
    let config = config("a,b");
    let memory = Arc::new(MemoryStateStore::new());
    let job = Job::start_tables(
        &config,
        None,
        FakeTables(catalog.clone()),
        store(&memory, &config),
        JobOptions::new(2),
    )
    .await
    .expect("starts");
    until(&job, "both tables' snapshots", |t| {
        windows(t, "a") >= 1 && windows(t, "b") >= 1
    })
    .await;
    if let Ok(mut t) = catalog.tables.lock() {
        t.retain(|t| t.name != "b");
        t[0].name = "a2".into();
        t.push(TableRef {
            id: "id-new".into(),
            name: "new".into(),
        });
    }
    until(
        &job,
        "the rename, the new table's windows and b retired",
        |t| {
            let names: Vec<_> = t.iter().map(|t| t.table_name.as_str()).collect();
            names == ["a2", "new"] && windows(t, "new") >= 2
        },
    )
    .await;
    let a2 = job
        .tables()
        .into_iter()
        .find(|t| t.table_name == "a2")
        .expect("a2");
    assert_eq!(a2.table_id, "id-a".into(), "followed by id");
    let checkpoint = job.checkpoint().await.expect("checkpoint");
    let state = store(&memory, &config)
        .latest_complete(&job.job_id())
        .await
        .expect("latest")
        .checkpoint
        .expect("some")
        .state;
    assert_eq!(state.checkpoint_id, checkpoint);
    let names: Vec<_> = state.tables.iter().map(|t| t.table_name.as_str()).collect();
    assert_eq!(names, ["a2", "new"]);
    job.cancel().await;
}

#[tokio::test]
async fn a_refused_schema_change_pauses_its_table_and_the_others_go_on() {
    let catalog = Catalog::with(&["a", "b"]);
    if let Ok(mut r) = catalog.refuse.lock() {
        r.push("id-b".into());
    }
    let config = config("a,b");
    let memory = Arc::new(MemoryStateStore::new());
    let job = Job::start_tables(
        &config,
        None,
        FakeTables(catalog.clone()),
        store(&memory, &config),
        JobOptions::new(1),
    )
    .await
    .expect("starts");
    until(&job, "both tables' snapshots", |t| {
        windows(t, "a") >= 1 && windows(t, "b") >= 1
    })
    .await;
    catalog.schema_version.fetch_add(1, Ordering::SeqCst);
    until(&job, "b paused", |t| {
        t.iter().any(|t| t.table_name == "b" && t.paused.is_some())
    })
    .await;
    let b_windows = windows(&job.tables(), "b");
    let a_windows = windows(&job.tables(), "a");
    until(&job, "a going on", |t| windows(t, "a") >= a_windows + 2).await;
    assert_eq!(windows(&job.tables(), "b"), b_windows, "b opens no window");
    assert_eq!(job.status(), JobStatus::Running);
    let tables = job.tables();
    let paused = tables
        .iter()
        .find(|t| t.table_name == "b")
        .and_then(|t| t.paused.clone())
        .expect("paused");
    assert!(paused.contains("column 'c'"), "{paused}");
    // a's schema change was followed and counted.
    assert!(tables
        .iter()
        .any(|t| t.table_name == "a" && t.schema_changes == 1));
    job.cancel().await;
}

#[tokio::test]
async fn a_table_dropped_and_created_again_under_its_name_is_refused_on_restore() {
    let catalog = Catalog::with(&["a"]);
    if let Ok(mut t) = catalog.tables.lock() {
        t[0].id = "id-recreated".into();
    }
    let config = config("a");
    let memory = Arc::new(MemoryStateStore::new());
    let mut state = crate::checkpoint::JobState::new(
        crate::checkpoint::JobId::random(),
        crate::checkpoint::SnapshotKind::Savepoint,
        3,
        "a",
        vec![],
        vec![],
    );
    state.set_tables(vec![TableState {
        last_end_timestamp: Some(crate::time::SourceTime::from_raw(50)),
        ..TableState::new("id-a", "a")
    }]);
    let point = RestorePoint {
        location: "/mem/sp/savepoint-x".into(),
        state,
    };
    let job = Job::start_tables(
        &config,
        Some(point),
        FakeTables(catalog),
        store(&memory, &config),
        JobOptions::new(1),
    )
    .await
    .expect("starts");
    let JobStatus::Failed { error } = job.wait().await else {
        panic!("not refused");
    };
    assert!(
        error.contains("table 'a' (id id-a)") && error.contains("now has id id-recreated"),
        "{error}"
    );
}
