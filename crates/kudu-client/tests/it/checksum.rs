//! Server-side checksums against a real Kudu cluster (ferry-testkit):
//!
//! - `ScanBuilder::checksum` (the tablet servers' Checksum RPC) equals the
//!   sum of `RowView::checksum` over the same snapshot scan, for an
//!   every-type table with NULLs, DECIMALs, BINARY and a composite key,
//!   hash + range partitioned with a non-covered range: whole table,
//!   several projections, per tablet, within key bounds, row-wise and
//!   columnar;
//! - a past snapshot excludes later writes, and "now" reports its time;
//! - the server's `checksum` answer is a running sum (previous_checksum
//!   included), shown on the wire;
//! - `RowView::encoded_primary_key` orders like the key and works as a scan
//!   bound; `scan_splits` with key bounds and a split size gives cut points
//!   inside the bounds whose checksums add up to the range's.
//!
//! The tests share one cluster while they run; each uses its own table.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_fixtures::{key, Shared};
use ferry_testkit::{DaemonKind, MiniCluster};
use futures::TryStreamExt;
use kudu_client::pb::tserver::tablet_server_service::Checksum as ChecksumRpc;
use kudu_client::pb::tserver::{ChecksumRequestPb, ContinueChecksumRequestPb, NewScanRequestPb};
use kudu_client::rpc::CallOptions;
use kudu_client::scan::{Checksum, ScanBuilder, ScanSpec};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{DataType, Error, HybridTime, KuduClient, KuduTable, Row, Schema, TableBuilder};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

static CLUSTER: Shared<MiniCluster> = Shared::new();

/// The every-type schema with a second key column `k2` STRING.
fn schema() -> Schema {
    ferry_fixtures::all_types_schema_with(vec![key("k2", DataType::String)], Vec::new())
}

/// Key `(id, k2)` of the test rows: `k2` holds a NUL byte for odd ids so
/// the composite key encoding's escaping is exercised.
fn k2(id: i64) -> String {
    if id % 2 == 0 {
        format!("k{}", id % 7)
    } else {
        format!("a\u{0}{}", id % 5)
    }
}

fn key_row(schema: &Schema, id: i64) -> Row {
    let mut r = Row::new(schema);
    r.set_i64("id", id).unwrap().set_str("k2", &k2(id)).unwrap();
    r
}

/// A full row for `id`: every value column random, ~20 % NULL.
fn full_row(schema: &Schema, id: i64, rng: &mut StdRng) -> Row {
    let mut r = key_row(schema, id);
    for c in ferry_fixtures::all_types_value_columns() {
        let n = c.name();
        if rng.gen_bool(0.2) {
            r.set_null(n).unwrap();
            continue;
        }
        match c.data_type() {
            DataType::Bool => r.set_bool(n, rng.gen()),
            DataType::Int8 => r.set_i8(n, rng.gen()),
            DataType::Int16 => r.set_i16(n, rng.gen()),
            DataType::Int32 => r.set_i32(n, rng.gen()),
            DataType::Int64 => r.set_i64(n, rng.gen()),
            DataType::Float => r.set_f32(n, rng.gen::<f32>() * 1e6 - 5e5),
            DataType::Double => r.set_f64(n, rng.gen::<f64>() * 1e12 - 5e11),
            DataType::String => r.set_str(n, &"żółw\u{0}x".repeat(rng.gen_range(0..4))),
            DataType::Varchar => r.set_str(n, &"é".repeat(rng.gen_range(0..=5))),
            DataType::Binary => r.set_binary(n, &rng.gen::<[u8; 11]>()[..rng.gen_range(0..11)]),
            DataType::UnixtimeMicros => r.set_timestamp_micros(n, rng.gen()),
            DataType::Date => r.set_date(n, rng.gen_range(-719_162..=2_932_896)),
            t if t.is_decimal() => {
                let limit = 10i128.pow(u32::from(c.precision()));
                r.set_decimal(n, rng.gen_range(-limit + 1..limit), c.scale())
            }
            t => panic!("no generator for {t}"),
        }
        .unwrap();
    }
    r
}

/// HASH(id) 3 × RANGE(id) [0, 1000), [1000, 2000), [3000, 4000): nine
/// tablets and a non-covered range; rows at ids 0..2000 and 3000..3200,
/// written in `waves` key-ordered parts a flush apart (so each tablet
/// gets several rowsets with disjoint keys).
async fn loaded(name: &str, waves: usize) -> (Arc<MiniCluster>, KuduClient, KuduTable) {
    let cluster = tokio::task::block_in_place(|| {
        CLUSTER.get(|| {
            MiniCluster::builder()
                .tservers(3)
                // Memory stores flush within a second or two: the scans
                // read flushed rowsets, deltas and memory alike.
                .tserver_flag("--flush_threshold_secs=1")
                // SplitKeyRange cuts at rowset bounds: keep rowsets apart.
                .tserver_flag("--enable_rowset_compaction=false")
                .start()
                .expect("cluster")
        })
    });
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let table = load_table(&client, name, waves).await;
    (cluster, client, table)
}

/// Creates and fills the table of [`loaded`] with `client`.
async fn load_table(client: &KuduClient, name: &str, waves: usize) -> KuduTable {
    let s = schema();
    let range = |lo: i64, hi: i64| {
        let (mut a, mut b) = (Row::new(&s), Row::new(&s));
        a.set_i64("id", lo).unwrap();
        b.set_i64("id", hi).unwrap();
        (a, b)
    };
    let mut tb = TableBuilder::new(name, s.clone())
        .add_hash_partitions(&["id"], 3, 0)
        .set_range_partition_columns(&["id"])
        .num_replicas(3);
    for (lo, hi) in [(0, 1000), (1000, 2000), (3000, 4000)] {
        let (a, b) = range(lo, hi);
        tb = tb.add_range_partition(a, b);
    }
    client.create_table(&tb).await.expect("create");
    let table = client.open_table(name).await.expect("open");
    // Rows must be built on the opened table's schema.
    let s = table.schema().clone();
    let mut rng = StdRng::seed_from_u64(12);
    let ids: Vec<i64> = (0..2000).chain(3000..3200).collect();
    for (n, wave) in ids.chunks(ids.len().div_ceil(waves)).enumerate() {
        if n > 0 {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        let ops = wave
            .iter()
            .map(|&id| Operation::insert(&table, full_row(&s, id, &mut rng)))
            .collect();
        write(client, ops).await;
    }
    table
}

async fn write(client: &KuduClient, ops: Vec<Operation>) {
    let mut session = client
        .new_session_with(
            SessionOptions::default()
                .flush_mode(FlushMode::ManualFlush)
                .mutation_buffer_max_ops(100_000)
                .mutation_buffer_max_bytes(64 << 20),
        )
        .expect("session");
    for op in ops {
        session.apply(op).await.expect("apply");
    }
    session.flush().await.expect("flush");
    session.close().await.expect("close");
}

/// A snapshot time after everything this client wrote.
async fn now(client: &KuduClient) -> HybridTime {
    let clock = client.server_clock().await.expect("clock");
    let seen = client
        .last_propagated_timestamp()
        .map_or(0, HybridTime::raw);
    clock.max(HybridTime::from_raw(seen + 1))
}

/// The client-side checksum of a snapshot scan: the sum of the rows'
/// `RowView::checksum`.
async fn streamed(b: ScanBuilder) -> Checksum {
    let mut scanner = b.build().expect("scanner");
    let mut c = Checksum::default();
    while let Some(batch) = scanner.try_next().await.expect("batch") {
        for row in batch.rows() {
            c.add_row(row.checksum());
        }
    }
    c.snapshot = scanner.snapshot_timestamp();
    c
}

/// Server and client checksums of the same scan, asserted equal.
async fn both(b: ScanBuilder) -> Checksum {
    let server = b.clone().checksum().await.expect("server checksum");
    let rowwise = streamed(b.clone()).await;
    let columnar = streamed(b.columnar(true)).await;
    assert_eq!(server.sum, rowwise.sum, "server vs row-wise client sum");
    assert_eq!(server.rows, rowwise.rows, "server vs row-wise client rows");
    assert_eq!(columnar, rowwise, "columnar vs row-wise");
    server
}

#[test]
fn server_checksums_equal_client_row_checksums() {
    ferry_fixtures::runtime().block_on(async {
        let (_c, client, table) = loaded("ck_types", 1).await;
        let t = now(&client).await;
        let scan = || client.scan_builder(&table).snapshot(t);

        let whole = both(scan()).await;
        assert_eq!(whole.rows, 2200);
        assert_eq!(whole.snapshot, Some(t));
        assert_ne!(whole.sum, 0);

        // Other projections: the sum covers exactly the projected columns.
        let keyed = both(scan().projection(&["id", "k2", "s", "dec38", "b", "bin"])).await;
        let unkeyed = both(scan().projection(&["dt", "f", "vc", "dec9", "dec18"])).await;
        assert_eq!((keyed.rows, unkeyed.rows), (2200, 2200));
        assert_ne!(keyed.sum, whole.sum);
        assert_ne!(unkeyed.sum, keyed.sum);

        // Per tablet: nine splits whose checksums add up to the whole.
        let splits = client
            .scan_splits(&table, &ScanSpec::new().snapshot(t))
            .await
            .expect("splits");
        assert_eq!(splits.len(), 9);
        let mut sum = Checksum::default();
        for sp in &splits {
            let part = both(client.scan_builder(&table).with_spec(sp.scan_spec())).await;
            assert!(part.rows > 0, "tablet {} is empty", sp.tablet_id());
            sum.add(&part);
        }
        assert_eq!((sum.sum, sum.rows), (whole.sum, whole.rows));

        // Key bounds: [(500, ""), (3100, "")) holds ids 500..2000 and
        // 3000..3100.
        let s = table.schema();
        let (mut lo, mut hi) = (Row::new(s), Row::new(s));
        lo.set_i64("id", 500).unwrap().set_str("k2", "").unwrap();
        hi.set_i64("id", 3100).unwrap().set_str("k2", "").unwrap();
        let bounded = both(scan().lower_bound(&lo).exclusive_upper_bound(&hi)).await;
        assert_eq!(bounded.rows, 1500 + 100);

        // A predicate that matches nothing still names a snapshot.
        let none = scan()
            .predicate(kudu_client::scan::Predicate::comparison(
                "id",
                kudu_client::scan::ComparisonOp::Greater,
                i64::MAX - 1,
            ))
            .checksum()
            .await
            .expect("empty checksum");
        assert_eq!((none.sum, none.rows), (0, 0));
    });
}

#[test]
fn past_snapshots_exclude_later_writes() {
    ferry_fixtures::runtime().block_on(async {
        let (_c, client, table) = loaded("ck_past", 1).await;
        let t1 = now(&client).await;
        let at_t1 = both(client.scan_builder(&table).snapshot(t1)).await;

        let s = table.schema().clone();
        let mut rng = StdRng::seed_from_u64(99);
        let mut ops: Vec<Operation> = (0..10)
            .map(|id| Operation::upsert(&table, full_row(&s, id * 100, &mut rng)))
            .collect();
        ops.extend((0..5).map(|id| Operation::delete(&table, key_row(&s, 1500 + id))));
        ops.extend((0..7).map(|id| Operation::insert(&table, full_row(&s, 3500 + id, &mut rng))));
        write(&client, ops).await;

        let again = client
            .scan_builder(&table)
            .snapshot(t1)
            .checksum()
            .await
            .expect("checksum at t1");
        assert_eq!(
            again, at_t1,
            "a snapshot in the past must not see later writes"
        );

        let latest = client
            .scan_builder(&table)
            .snapshot_now()
            .checksum()
            .await
            .expect("checksum now");
        let t2 = latest.snapshot.expect("snapshot_now reports its time");
        assert!(t2 > t1);
        assert_eq!(latest.rows, at_t1.rows - 5 + 7);
        assert_ne!(latest.sum, at_t1.sum);
        let client_t2 = both(client.scan_builder(&table).snapshot(t2)).await;
        assert_eq!(client_t2, latest);

        // READ_LATEST and diff scans cannot be checksummed.
        for b in [
            client.scan_builder(&table),
            client.scan_builder(&table).diff(t1, t2),
            client.scan_builder(&table).snapshot(t1).limit(3),
        ] {
            let err = b.checksum().await.expect_err("refused");
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        }
    });
}

/// On the wire: a checksum opened with `batch_size_bytes = 0` reduces no
/// row; the continue call with `previous_checksum = P` answers `P` plus
/// the tablet's sum, and `rows_checksummed` counts that call's rows only.
#[test]
fn the_servers_checksum_answer_is_a_running_sum() {
    ferry_fixtures::runtime().block_on(async {
        let (_c, client, table) = loaded("ck_wire", 1).await;
        let t = now(&client).await;
        let split = client
            .scan_splits(&table, &ScanSpec::new().snapshot(t).projection(&["id"]))
            .await
            .expect("splits")
            .remove(0);
        let tablet_sum = client
            .scan_builder(&table)
            .with_spec(split.scan_spec())
            .checksum()
            .await
            .expect("tablet checksum");
        assert!(tablet_sum.rows > 0);

        let deadline = Instant::now() + Duration::from_secs(30);
        let lookup = kudu_client::internals::locate_with_retry(
            &client,
            &table,
            split.partition_key_start(),
            deadline,
        )
        .await
        .expect("locate");
        let kudu_client::meta::Lookup::Tablet(tablet) = lookup else {
            panic!("no tablet at the split's start");
        };
        let addr = tablet.replicas[0].addr.clone();
        let pool =
            kudu_client::rpc::ConnectionPool::new(kudu_client::rpc::ConnectOptions::default());
        let opts = CallOptions::with_timeout(Duration::from_secs(30));
        let open = ChecksumRequestPb {
            new_request: Some(NewScanRequestPb {
                tablet_id: tablet.tablet_id.as_bytes().to_vec(),
                projected_columns: vec![kudu_client::pb::ColumnSchemaPb {
                    name: "id".into(),
                    r#type: kudu_client::pb::DataType::Int64 as i32,
                    ..Default::default()
                }],
                read_mode: Some(kudu_client::pb::ReadMode::ReadAtSnapshot as i32),
                snap_timestamp: Some(t.raw()),
                ..Default::default()
            }),
            batch_size_bytes: Some(0),
            ..Default::default()
        };
        let first = pool
            .call::<ChecksumRpc>(&addr, &open, &opts)
            .await
            .expect("open")
            .body;
        assert!(first.error.is_none(), "{:?}", first.error);
        assert_eq!(first.rows_checksummed.unwrap_or(0), 0, "{first:?}");
        assert_eq!(first.has_more_results, Some(true), "{first:?}");
        let previous = 0x1234_5678_9abc_u64;
        let mut resp = pool
            .call::<ChecksumRpc>(
                &addr,
                &ChecksumRequestPb {
                    continue_request: Some(ContinueChecksumRequestPb {
                        scanner_id: first.scanner_id.clone().expect("scanner id"),
                        previous_checksum: previous,
                    }),
                    call_seq_id: Some(1),
                    ..Default::default()
                },
                &opts,
            )
            .await
            .expect("continue")
            .body;
        assert!(resp.error.is_none(), "{:?}", resp.error);
        let mut rows = resp.rows_checksummed.unwrap_or(0);
        let mut seq = 2;
        while resp.has_more_results == Some(true) {
            let running = resp.checksum.expect("checksum");
            resp = pool
                .call::<ChecksumRpc>(
                    &addr,
                    &ChecksumRequestPb {
                        continue_request: Some(ContinueChecksumRequestPb {
                            scanner_id: first.scanner_id.clone().expect("scanner id"),
                            previous_checksum: running,
                        }),
                        call_seq_id: Some(seq),
                        ..Default::default()
                    },
                    &opts,
                )
                .await
                .expect("continue")
                .body;
            rows += resp.rows_checksummed.unwrap_or(0);
            seq += 1;
        }
        assert_eq!(rows as u64, tablet_sum.rows);
        assert_eq!(
            resp.checksum,
            Some(previous.wrapping_add(tablet_sum.sum)),
            "the answer is previous_checksum plus this tablet's rows"
        );
    });
}

#[test]
fn encoded_primary_keys_order_like_the_key_and_bound_scans() {
    ferry_fixtures::runtime().block_on(async {
        let (_c, client, table) = loaded("ck_keys", 1).await;
        let t = now(&client).await;
        let mut scanner = client
            .scan_builder(&table)
            .snapshot(t)
            .projection(&["s", "k2", "id"])
            .build()
            .unwrap();
        let mut by_key: BTreeMap<Vec<u8>, (i64, String)> = BTreeMap::new();
        while let Some(batch) = scanner.try_next().await.unwrap() {
            for row in batch.rows() {
                let k = row.encoded_primary_key().unwrap();
                let id = row.get_i64("id").unwrap();
                let k2 = row.get_str("k2").unwrap().to_owned();
                assert_eq!(
                    k,
                    kudu_client::internals::encode_primary_key(&key_row(table.schema(), id))
                        .unwrap()
                );
                by_key.insert(k, (id, k2));
            }
        }
        assert_eq!(by_key.len(), 2200);
        let mut sorted: Vec<(i64, String)> = by_key.values().cloned().collect();
        sorted.sort();
        assert_eq!(by_key.values().cloned().collect::<Vec<_>>(), sorted);

        // An encoded key is a scan bound: [key of id 1999, ∞) holds 1999
        // and the 200 rows past the gap.
        let (k1999, _) = by_key.iter().find(|(_, v)| v.0 == 1999).unwrap();
        let tail = client
            .scan_builder(&table)
            .snapshot(t)
            .lower_bound_key(k1999.clone())
            .checksum()
            .await
            .unwrap();
        assert_eq!(tail.rows, 201);

        // Without every key column in the projection there is no key.
        let batch = client
            .scan_builder(&table)
            .snapshot(t)
            .projection(&["id", "s"])
            .build()
            .unwrap()
            .try_next()
            .await
            .unwrap()
            .expect("a batch");
        let err = batch.row(0).encoded_primary_key().unwrap_err();
        assert!(err.to_string().contains("'k2'"), "{err}");
    });
}

/// `scan_splits` with key bounds and a split size (SplitKeyRange) gives
/// key ranges inside the bounds that cover the range once: their
/// checksums add up to the bounded checksum.
#[test]
fn sized_splits_within_key_bounds_cut_the_range() {
    ferry_fixtures::runtime().block_on(async {
        let (_c, client, table) = loaded("ck_splits", 4).await;
        let t = now(&client).await;
        let s = table.schema();
        let lo = kudu_client::internals::encode_primary_key(&key_row(s, 200)).unwrap();
        let hi = kudu_client::internals::encode_primary_key(&key_row(s, 1800)).unwrap();
        let spec = ScanSpec::new()
            .snapshot(t)
            .lower_bound_key(lo.clone())
            .exclusive_upper_bound_key(hi.clone());
        let bounded = client
            .scan_builder(&table)
            .with_spec(spec.clone())
            .checksum()
            .await
            .unwrap();
        assert_eq!(bounded.rows, 1600);
        let per_tablet = client.scan_splits(&table, &spec).await.unwrap().len();
        let deadline = Instant::now() + Duration::from_secs(60);
        let sized = loop {
            let sized = client
                .scan_splits(&table, &spec.clone().split_size_bytes(1024))
                .await
                .unwrap();
            if sized.len() > per_tablet || Instant::now() > deadline {
                break sized;
            }
            // SplitKeyRange cuts flushed data only: wait for the flushes.
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(sized.len() > per_tablet, "{} sized splits", sized.len());
        let mut sum = Checksum::default();
        for sp in &sized {
            let (l, u) = (sp.lower_bound_key(), sp.upper_bound_key());
            assert!(l.is_some_and(|l| l >= lo.as_slice()), "{l:?}");
            assert!(u.is_some_and(|u| u <= hi.as_slice()), "{u:?}");
            let part = client
                .scan_builder(&table)
                .with_spec(sp.scan_spec())
                .checksum()
                .await
                .unwrap();
            sum.add(&part);
        }
        assert_eq!((sum.sum, sum.rows), (bounded.sum, bounded.rows));
    });
}

/// A dead tablet server (RF 3) costs nothing but retries: the checksum
/// opens each tablet at another replica and still covers every row once.
#[test]
fn a_dead_tablet_server_is_routed_around() {
    let mut cluster = MiniCluster::builder().tservers(3).start().expect("cluster");
    let rt = ferry_fixtures::runtime();
    let client = KuduClient::new(&cluster.master_addrs()).expect("client");
    let (table, t, before) = rt.block_on(async {
        let table = load_table(&client, "ck_dead", 1).await;
        let t = now(&client).await;
        let before = both(client.scan_builder(&table).snapshot(t)).await;
        (table, t, before)
    });
    cluster.kill(DaemonKind::TabletServer, 0).expect("kill");
    let after = rt.block_on(async {
        client
            .scan_builder(&table)
            .snapshot(t)
            .timeout(Duration::from_secs(60))
            .checksum()
            .await
            .expect("checksum with a tablet server down")
    });
    assert_eq!(after, before);
}

/// A checksum before the ancient history mark fails like a scan:
/// `Error::SnapshotTooOld` (what `ferry verify` reports as history too old).
#[test]
fn a_snapshot_older_than_history_is_snapshot_too_old() {
    let cluster = MiniCluster::builder()
        .tservers(1)
        .tserver_flag("--tablet_history_max_age_sec=1")
        .start()
        .expect("cluster");
    ferry_fixtures::runtime().block_on(async {
        let client = KuduClient::new(&cluster.master_addrs()).expect("client");
        let s = schema();
        let mut lo = Row::new(&s);
        lo.set_i64("id", 0).unwrap();
        let mut hi = Row::new(&s);
        hi.set_i64("id", 100).unwrap();
        let tb = TableBuilder::new("ck_old", s.clone())
            .set_range_partition_columns(&["id"])
            .add_range_partition(lo, hi)
            .num_replicas(1);
        client.create_table(&tb).await.expect("create");
        let table = client.open_table("ck_old").await.expect("open");
        let mut rng = StdRng::seed_from_u64(3);
        let rows = (0..50)
            .map(|id| Operation::insert(&table, full_row(table.schema(), id, &mut rng)))
            .collect();
        write(&client, rows).await;
        let old = now(&client).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let err = client
            .scan_builder(&table)
            .snapshot(old)
            .checksum()
            .await
            .expect_err("too old");
        assert!(matches!(err, Error::SnapshotTooOld { .. }), "{err:?}");
        let fresh = client
            .scan_builder(&table)
            .snapshot_now()
            .checksum()
            .await
            .expect("a fresh snapshot");
        assert_eq!(fresh.rows, 50);
    });
}
