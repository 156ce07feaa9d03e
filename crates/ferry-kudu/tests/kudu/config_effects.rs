//! Keys that change how the Kudu connectors read and write, each shown on a
//! real cluster: `reader.prefetching` keeps the next scan batch in flight,
//! `writer.flushMode=MANUAL_FLUSH` sends `writer.maxBufferSize` rows per
//! write request, flushed by the sink itself.

use std::time::Duration;

use ferry_engine::checkpoint::WindowState;
use ferry_engine::config::JobConfig;
use ferry_engine::connector::{Sink, SinkWriter, Source, SplitReader};
use ferry_kudu::sink_table::SinkTableOptions;
use ferry_kudu::{KuduSink, KuduSource};
use ferry_testkit::{DaemonKind, MiniCluster};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, KuduTable, TableBuilder};

const ROWS: i64 = 3000;

fn config(masters: &str, extra: &[(&str, &str)]) -> JobConfig {
    let mut pairs = vec![
        ("job.sourceMasterAddresses", masters),
        ("job.sinkMasterAddresses", masters),
        ("job.tableName", "src"),
        (
            "job.checkpointsDirectory",
            "/tmp/ferry-config-effects-unused",
        ),
    ];
    pairs.extend_from_slice(extra);
    JobConfig::from_named_pairs(pairs).expect("valid config")
}

/// `id INT64` key and a 100-byte `v`, one tablet, one replica.
async fn create_table(client: &KuduClient, name: &str) -> KuduTable {
    let schema = ferry_fixtures::small_schema();
    client
        .create_table(&TableBuilder::new(name, schema).num_replicas(1))
        .await
        .expect("create table");
    client.open_table(name).await.expect("open table")
}

async fn fill(client: &KuduClient, table: &KuduTable) {
    let options = SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground);
    let mut session = client.new_session_with(options).expect("session");
    for id in 0..ROWS {
        let mut row = table.new_row();
        row.set_i64("id", id).expect("id");
        row.set_str("v", &"x".repeat(100)).expect("v");
        session
            .apply(Operation::upsert(table, row))
            .await
            .expect("apply");
    }
    session.close().await.expect("flush");
}

/// The reader of the table's only split, as of now.
async fn open_split(source: &KuduSource) -> <KuduSource as Source>::Reader {
    let window = WindowState {
        start_timestamp: None,
        end_timestamp: source.now().await.expect("now"),
    };
    let splits = source.plan(window, None).await.expect("plan").splits;
    assert_eq!(splits.len(), 1, "one tablet, one split");
    source.open(&splits[0]).await.expect("open")
}

async fn count_rest(reader: &mut <KuduSource as Source>::Reader) -> usize {
    let mut rows = 0;
    while let Some(batch) = reader.next().await.expect("read") {
        rows += batch.rows.len();
    }
    rows
}

/// With prefetching the next batch is fetched while the caller holds the
/// previous one: it arrives even though the tablet server is frozen by the
/// time it is asked for. Without, asking waits for the server. Either way
/// the split reads to its end with every row exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetching_keeps_the_next_scan_batch_in_flight() {
    let mut cluster = MiniCluster::builder().tservers(1).start().expect("cluster");
    let masters = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let table = create_table(&client, "src").await;
    fill(&client, &table).await;

    for prefetching in [true, false] {
        let cfg = config(
            &masters,
            &[
                ("reader.prefetching", &prefetching.to_string()),
                ("reader.batchSizeBytes", "16384"),
            ],
        );
        assert_eq!(cfg.reader.prefetching, prefetching);
        let source = KuduSource::new(client.clone(), "src", cfg.reader.clone());
        let mut reader = open_split(&source).await;
        let first = reader.next().await.expect("read").expect("a first batch");
        let mut rows = first.rows.len();
        assert!(rows < ROWS as usize / 4, "many batches: {rows}");
        // Time for a prefetch to come back, then freeze the server.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        cluster
            .pause(DaemonKind::TabletServer, 0)
            .expect("pause tserver");
        let second = tokio::time::timeout(Duration::from_secs(3), reader.next()).await;
        cluster
            .resume(DaemonKind::TabletServer, 0)
            .expect("resume tserver");
        match second {
            Ok(batch) => {
                let what = match &batch {
                    Ok(Some(b)) => format!("a batch of {} rows", b.rows.len()),
                    Ok(None) => "the end of the split".to_string(),
                    Err(e) => format!("an error ({e})"),
                };
                assert!(
                    prefetching,
                    "{what} from a frozen server without prefetching"
                );
                rows += batch.expect("read").expect("a second batch").rows.len();
            }
            Err(_) => assert!(!prefetching, "the prefetched batch did not arrive"),
        }
        rows += count_rest(&mut reader).await;
        assert_eq!(rows, ROWS as usize, "prefetching={prefetching}");
    }
}

/// MANUAL_FLUSH: the sink flushes every `writer.maxBufferSize` rows and at
/// the end of a batch, so a 3000-row batch becomes exactly 30 requests of
/// 100 rows, even with a 1 ms flush interval (which would make a background
/// session send whatever it holds every millisecond).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_flush_sends_max_buffer_size_rows_per_request() {
    let cluster = MiniCluster::builder().tservers(1).start().expect("cluster");
    let masters = cluster.master_addrs_joined();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let src = create_table(&client, "src").await;
    fill(&client, &src).await;
    create_table(&client, "dst").await;

    let cfg = config(
        &masters,
        &[
            ("writer.flushMode", "MANUAL_FLUSH"),
            ("writer.maxBufferSize", "100"),
            ("writer.flushInterval", "1"),
        ],
    );
    let source = KuduSource::new(client.clone(), "src", cfg.reader.clone());
    let mut reader = open_split(&source).await;
    // Not prepared: the writer opens the existing sink table by name.
    let options = SinkTableOptions {
        sink_table_name: "dst".into(),
        create_table: false,
        restore_owner: false,
        follow_schema: false,
    };
    let sink = KuduSink::new(
        client.clone(),
        client.clone(),
        "src",
        options,
        cfg.writer.clone(),
    );
    let mut writer = sink.writer().await.expect("writer");
    let (mut expected_requests, mut rows) = (0, 0);
    while let Some(batch) = reader.next().await.expect("read") {
        let n = batch.rows.len() as u64;
        let stats = writer.write(&batch.rows).await.expect("write");
        assert_eq!(stats.upserts, n);
        expected_requests += n.div_ceil(100);
        rows += n;
    }
    assert_eq!(rows, ROWS as u64);
    let metrics = writer.session_metrics();
    assert_eq!(metrics.ops_written(), ROWS as u64);
    assert_eq!(metrics.row_errors, 0);
    assert_eq!(
        metrics.batches_written, expected_requests,
        "one request per 100 rows: {metrics:?}"
    );

    let copy = KuduSource::new(client.clone(), "dst", cfg.reader.clone());
    let mut reader = open_split(&copy).await;
    assert_eq!(count_rest(&mut reader).await, ROWS as usize);
}
