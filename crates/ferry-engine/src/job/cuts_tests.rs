//! Consistent cuts and continuous verify with in-memory connectors: with
//! a sink that publishes cuts, the tables' windows open together at one
//! end (though their sources' clocks and their speeds differ), and each
//! cut is published when every table holds exactly the windows up to its
//! source instant, before any row of a later window; with
//! `job.verifyInterval`, the tables take turns at the verifier, each at
//! its own cut.

use super::tests::Numbers;
use super::*;
use crate::checkpoint::{MemoryStateStore, SplitState, WindowState};
use crate::connector::{CapabilityFuture, SinkCuts, SinkPositions};
use crate::connector::{ReadBatch, SinkWriter, SplitReader, TableRef, Tables, WriteStats};
use crate::error::EngineError;
use crate::sink_position::{Cut, SinkPosition};
use crate::time::{SinkTime, SourceClock, SourceTime};
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Row ends written, per sink table.
type Held = BTreeMap<String, Vec<u64>>;

/// What reached the sink cluster: rows per table (their window's end),
/// and each cut with what every table held when it was published.
#[derive(Default)]
struct Cluster {
    rows: Mutex<Held>,
    cuts: Mutex<Vec<(Cut, Held)>>,
    clock: AtomicU64,
}

/// One split per window yielding one row, its window's end; the table
/// named "slow" takes 30 ms per row.
struct Src {
    clock: AtomicU64,
    slow: bool,
}

impl Source for Src {
    type Batch = Numbers;
    type Reader = Reader;

    const NAME: &'static str = "TestSource";

    const CLOCK: SourceClock = SourceClock::EPOCH_MILLIS;

    async fn now(&self) -> Result<SourceTime, EngineError> {
        Ok(SourceTime::from_raw(
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
            descriptor: window.end_timestamp.raw().to_be_bytes().to_vec(),
            resume_key: None,
        }]))
    }

    async fn open(&self, split: &SplitState) -> Result<Reader, EngineError> {
        let end = split
            .descriptor
            .as_slice()
            .try_into()
            .map(u64::from_be_bytes);
        Ok(Reader {
            end: end.ok(),
            slow: self.slow,
        })
    }
}

struct Reader {
    end: Option<u64>,
    slow: bool,
}

impl SplitReader for Reader {
    type Batch = Numbers;

    async fn next(&mut self) -> Result<Option<ReadBatch<Numbers>>, EngineError> {
        if self.slow && self.end.is_some() {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        Ok(self.end.take().map(|end| ReadBatch {
            rows: Numbers(vec![end as u32]),
            resume_key: Some(vec![1]),
        }))
    }
}

#[derive(Clone)]
struct Snk {
    table: String,
    cluster: Arc<Cluster>,
}

impl Sink<Numbers> for Snk {
    type Writer = Snk;

    async fn writer(&self) -> Result<Snk, EngineError> {
        Ok(self.clone())
    }

    fn name(&self) -> String {
        format!("{}_copy", self.table)
    }

    fn positions(&self) -> Option<&dyn SinkPositions> {
        Some(self)
    }

    fn cuts(&self) -> Option<&dyn SinkCuts> {
        Some(self)
    }
}

impl SinkWriter<Numbers> for Snk {
    async fn write(&mut self, batch: &Numbers) -> Result<WriteStats, EngineError> {
        let mut rows = self.cluster.rows.lock().expect("lock");
        let table = rows.entry(self.name()).or_default();
        table.extend(batch.0.iter().map(|&e| u64::from(e)));
        Ok(WriteStats::default())
    }
}

impl SinkPositions for Snk {
    fn record_position<'a>(&'a self, _p: &'a SinkPosition) -> CapabilityFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }

    fn read_position(&self) -> CapabilityFuture<'_, Option<SinkPosition>> {
        Box::pin(async { Ok(None) })
    }

    fn sink_time(&self) -> CapabilityFuture<'_, Option<SinkTime>> {
        let t = 1_000 + self.cluster.clock.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Ok(Some(SinkTime::from_raw(t))) })
    }
}

impl SinkCuts for Snk {
    fn record_cut<'a>(&'a self, cut: &'a Cut) -> CapabilityFuture<'a, ()> {
        let held = self.cluster.rows.lock().expect("lock").clone();
        self.cluster
            .cuts
            .lock()
            .expect("lock")
            .push((cut.clone(), held));
        Box::pin(async { Ok(()) })
    }
}

/// Tables "fast" (source clock from 100) and "slow" (from 5 000).
struct Two(Arc<Cluster>);

impl Tables for Two {
    type Source = Src;
    type Sink = Snk;

    async fn discover(&self, _known: &[TableRef]) -> Result<Vec<TableRef>, EngineError> {
        Ok(["fast", "slow"]
            .iter()
            .map(|n| TableRef {
                id: format!("id-{n}").into(),
                name: (*n).to_owned(),
            })
            .collect())
    }

    fn connect(&self, table: &TableRef) -> Result<(Src, Snk), EngineError> {
        let slow = table.name == "slow";
        let source = Src {
            clock: AtomicU64::new(if slow { 5_000 } else { 100 }),
            slow,
        };
        let sink = Snk {
            table: table.name.clone(),
            cluster: self.0.clone(),
        };
        Ok((source, sink))
    }
}

#[tokio::test]
async fn every_cut_is_one_instant_every_table_holds_exactly() {
    let cluster = Arc::new(Cluster::default());
    let config = JobConfig::from_named_pairs([
        ("job.sourceMasterAddresses", "a:7051"),
        ("job.sinkMasterAddresses", "b:7051"),
        ("job.tableName", "fast,slow"),
        ("job.checkpointsDirectory", "/mem/chk"),
        ("job.discoveryIntervalSeconds", "1"),
        ("job.checkpointingIntervalMillis", "50"),
    ])
    .expect("config");
    let store = CheckpointStore::new(
        Arc::new(MemoryStateStore::new()),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let job = Job::start_tables(
        &config,
        None,
        Two(cluster.clone()),
        store,
        JobOptions::new(2),
    )
    .await
    .expect("starts");
    // A table copying its snapshot takes no part in the cuts; once both
    // are past their snapshots, every cut names both.
    let both = |cuts: &[(Cut, Held)]| {
        cuts.iter()
            .filter(|(c, _)| c.tables == ["fast_copy", "slow_copy"])
            .count()
    };
    for _ in 0..500 {
        if both(&cluster.cuts.lock().expect("lock")) >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    job.cancel().await;
    let cuts = cluster.cuts.lock().expect("lock").clone();
    assert!(both(&cuts) >= 3, "{} cuts of both tables", both(&cuts));
    let mut last = None;
    let mut joined = false;
    for (cut, held) in &cuts {
        if cut.tables == ["fast_copy", "slow_copy"] {
            joined = true;
            assert_eq!(held["fast_copy"], held["slow_copy"], "one window chain");
        } else {
            assert!(!joined, "a table left the cuts: {:?}", cut.tables);
            assert_eq!(cut.tables, ["fast_copy"]);
        }
        assert!(last < Some(cut.source_time), "cuts go forward");
        last = Some(cut.source_time);
        // Each table the cut names holds every window up to the instant,
        // none after.
        let s = cut.source_time.raw();
        for table in &cut.tables {
            let rows = &held[table];
            assert_eq!(rows.iter().max(), Some(&s), "{table} at {s}: {rows:?}");
        }
    }
}

/// Records every request; finds `differences` in each.
#[derive(Default)]
struct Recorder {
    requests: Mutex<Vec<crate::verify::VerifyRequest>>,
}

impl crate::verify::Verifier for Recorder {
    fn verify<'a>(
        &'a self,
        request: &'a crate::verify::VerifyRequest,
    ) -> CapabilityFuture<'a, crate::verify::VerifyOutcome> {
        self.requests.lock().expect("lock").push(request.clone());
        Box::pin(async {
            Ok(crate::verify::VerifyOutcome {
                rows_compared: 10,
                differences: 1,
                repaired: 1,
            })
        })
    }
}

#[tokio::test]
async fn continuous_verify_takes_turns_each_table_at_its_own_cut() {
    let cluster = Arc::new(Cluster::default());
    let config = JobConfig::from_named_pairs([
        ("job.sourceMasterAddresses", "a:7051"),
        ("job.sinkMasterAddresses", "b:7051"),
        ("job.tableName", "fast,slow"),
        ("job.checkpointsDirectory", "/mem/chk"),
        ("job.discoveryIntervalSeconds", "1"),
        ("job.checkpointingIntervalMillis", "50"),
        ("job.verifyInterval", "400 ms"),
        ("job.verifyRepair", "true"),
    ])
    .expect("config");
    let store = CheckpointStore::new(
        Arc::new(MemoryStateStore::new()),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let recorder = Arc::new(Recorder::default());
    let options = JobOptions::new(2).verifier(recorder.clone());
    let job = Job::start_tables(&config, None, Two(cluster.clone()), store, options)
        .await
        .expect("starts");
    // Until the tables were verified at two cuts (a window a second).
    for _ in 0..500 {
        let requests = recorder.requests.lock().expect("lock").clone();
        let first = requests.first().map(|r| r.source_time);
        if requests.len() >= 4 && requests.iter().any(|r| Some(r.source_time) != first) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tables = job.tables();
    job.cancel().await;
    let requests = recorder.requests.lock().expect("lock").clone();
    assert!(requests.len() >= 4, "{requests:?}");
    // The tables take turns, each with its sink name and repair asked.
    let names: Vec<&str> = requests.iter().map(|r| r.source_table.as_str()).collect();
    assert!(names.windows(2).all(|w| w[0] != w[1]), "{names:?}");
    assert!(requests
        .iter()
        .all(|r| r.repair && r.sink_table == format!("{}_copy", r.source_table)));
    // Each at a cut the sink gave: a source end and the sink time taken
    // when the window after it opened (sink times come from 1000 on).
    assert!(requests.iter().all(|r| r.sink_time.raw() >= 1_000));
    let mut ends: Vec<u64> = requests.iter().map(|r| r.source_time.raw()).collect();
    ends.dedup();
    assert!(ends.len() >= 2, "cuts move on: {requests:?}");
    // The outcome is counted per table.
    assert!(
        tables
            .iter()
            .all(|t| t.verify.runs >= 1 && t.verify.repaired_total >= 1),
        "{tables:?}"
    );
}
