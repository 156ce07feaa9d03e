//! The `rpc` tracing span every call runs in: its fields (service, method,
//! server, table, tablet, attempt) on a real cluster for the master's
//! catalog calls, writes and scans; and the attempt number counting up
//! when a call is retried (a scripted master that is busy once, since a
//! real one will not be on demand).
//!
//! Each test installs its subscriber on its own thread only and runs a
//! current-thread runtime there, so the other tests of this binary (on
//! other threads) neither see it nor feed it.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kudu_client::pb::consensus::raft_peer_pb::Role;
use kudu_client::pb::master::{ConnectToMasterResponsePb, ListTablesResponsePb};
use kudu_client::pb::rpc::error_status_pb::RpcErrorCodePb;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, KuduClient, Schema, TableBuilder};
use prost::Message;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

use crate::rpc::{listener, MockConn};

type Fields = BTreeMap<String, String>;

/// Records the fields of every `rpc` span created.
#[derive(Clone, Default)]
struct RpcSpans(Arc<Mutex<Vec<Fields>>>);

impl<S: Subscriber> Layer<S> for RpcSpans {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() != "rpc" || attrs.metadata().target() != "kudu_client::rpc" {
            return;
        }
        let mut fields = Collect::default();
        attrs.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
}

impl RpcSpans {
    /// The spans of `method`, in the order they were created.
    fn of(&self, method: &str) -> Vec<Fields> {
        let spans = self.0.lock().unwrap();
        spans
            .iter()
            .filter(|f| f.get("method").map(String::as_str) == Some(method))
            .cloned()
            .collect()
    }
}

#[derive(Default)]
struct Collect(Fields);

impl Visit for Collect {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// Runs `f` on a current-thread runtime with `spans` capturing this
/// thread's spans at debug level.
fn with_spans<F: std::future::Future>(spans: &RpcSpans, f: F) -> F::Output {
    let subscriber = tracing_subscriber::registry().with(
        spans
            .clone()
            .with_filter(tracing_subscriber::filter::LevelFilter::DEBUG),
    );
    let _guard = tracing::subscriber::set_default(subscriber);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn field<'a>(f: &'a Fields, name: &str) -> Option<&'a str> {
    f.get(name).map(String::as_str)
}

#[test]
fn catalog_write_and_scan_calls_run_in_spans_naming_table_tablet_and_server() {
    let cluster = crate::shared::one_tserver();
    let master = cluster.master_addrs()[0].clone();
    let tserver = cluster.tserver_addrs()[0].clone();
    let name = format!("spans_{}", std::process::id());
    let spans = RpcSpans::default();
    let tablets = with_spans(&spans, async {
        let client = KuduClient::new(&[master.as_str()]).unwrap();
        let schema = Schema::new(vec![
            ColumnSchema::builder("id", DataType::Int64)
                .key(true)
                .build()
                .unwrap(),
            ColumnSchema::builder("v", DataType::String)
                .nullable(true)
                .build()
                .unwrap(),
        ])
        .unwrap();
        client
            .create_table(
                &TableBuilder::new(&name, schema)
                    .add_hash_partitions(&["id"], 2, 0)
                    .num_replicas(1),
            )
            .await
            .unwrap();
        let table = client.open_table(&name).await.unwrap();
        let mut session = client
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
            .unwrap();
        for id in 0..20 {
            let mut row = table.new_row();
            row.set_i64("id", id).unwrap().set_str("v", "x").unwrap();
            session.apply(Operation::insert(&table, row)).await.unwrap();
        }
        session.flush().await.unwrap();
        let mut scanner = client.scan_builder(&table).build().unwrap();
        let mut rows = 0;
        while let Some(batch) = scanner.next_batch().await.unwrap() {
            rows += batch.rows().count();
        }
        assert_eq!(rows, 20);
        let deadline = Instant::now() + Duration::from_secs(30);
        let tablets = client
            .tablets_in_range(&table, &[], &[], deadline)
            .await
            .unwrap();
        client.delete_table(&name).await.unwrap();
        tablets
            .iter()
            .map(|t| t.tablet_id.clone())
            .collect::<Vec<_>>()
    });
    assert_eq!(tablets.len(), 2);

    let connect = spans.of("ConnectToMaster");
    assert!(!connect.is_empty(), "no ConnectToMaster span");
    assert_eq!(field(&connect[0], "server"), Some(master.as_str()));
    assert_eq!(
        field(&connect[0], "service"),
        Some("kudu.master.MasterService")
    );
    assert_eq!(field(&connect[0], "attempt"), Some("1"));
    assert_eq!(field(&connect[0], "table"), None);

    for method in [
        "CreateTable",
        "GetTableSchema",
        "GetTableLocations",
        "DeleteTable",
    ] {
        let calls = spans.of(method);
        assert!(!calls.is_empty(), "no {method} span");
        for c in &calls {
            assert_eq!(field(c, "table"), Some(name.as_str()), "{method}");
            assert_eq!(field(c, "server"), Some(master.as_str()), "{method}");
            assert_eq!(field(c, "tablet"), None, "{method}");
            assert_attempt(c, method);
        }
    }

    // Every tablet gets a write and a scan.
    for method in ["Write", "Scan"] {
        let calls = spans.of(method);
        let mut seen: Vec<&str> = calls.iter().filter_map(|c| field(c, "tablet")).collect();
        seen.sort();
        seen.dedup();
        let mut expected: Vec<&str> = tablets.iter().map(String::as_str).collect();
        expected.sort();
        assert_eq!(seen, expected, "{method}: {calls:?}");
        for c in &calls {
            assert_eq!(field(c, "table"), Some(name.as_str()), "{method}");
            assert_eq!(field(c, "server"), Some(tserver.as_str()), "{method}");
            assert_eq!(
                field(c, "service"),
                Some("kudu.tserver.TabletServerService"),
                "{method}"
            );
            assert_attempt(c, method);
        }
    }
}

/// A span's attempt is a number from 1 (a call retried on a busy shared
/// cluster counts up).
fn assert_attempt(c: &Fields, method: &str) {
    let n: u32 = field(c, "attempt")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{method}: no attempt in {c:?}"));
    assert!(n >= 1, "{method}: {c:?}");
}

#[test]
fn a_retried_master_call_counts_its_attempts() {
    let spans = RpcSpans::default();
    let (addr, list_calls) = with_spans(&spans, async {
        let (l, addr) = listener().await;
        let server = tokio::spawn(async move {
            let mut c = MockConn::accept(&l, Duration::ZERO).await;
            let mut list_calls = 0;
            while let Some(req) = c.recv().await {
                let call_id = req.header.call_id;
                let method = req.header.remote_method.map(|m| m.method_name);
                match method.as_deref() {
                    Some("ConnectToMaster") => {
                        let leader = ConnectToMasterResponsePb {
                            role: Some(Role::Leader as i32),
                            ..Default::default()
                        };
                        c.reply(call_id, leader.encode_to_vec(), vec![]).await;
                    }
                    Some("ListTables") => {
                        list_calls += 1;
                        if list_calls == 1 {
                            c.reply_error(call_id, RpcErrorCodePb::ErrorServerTooBusy, "busy")
                                .await;
                        } else {
                            let none = ListTablesResponsePb::default();
                            c.reply(call_id, none.encode_to_vec(), vec![]).await;
                            return list_calls;
                        }
                    }
                    other => panic!("unexpected call {other:?}"),
                }
            }
            list_calls
        });
        let client = KuduClient::new(&[addr.as_str()]).unwrap();
        let tables = client.list_tables("").await.unwrap();
        assert!(tables.is_empty());
        (addr, server.await.unwrap())
    });
    assert_eq!(list_calls, 2);
    let list = spans.of("ListTables");
    let attempts: Vec<Option<&str>> = list.iter().map(|c| field(c, "attempt")).collect();
    assert_eq!(attempts, [Some("1"), Some("2")], "{list:?}");
    for c in &list {
        assert_eq!(field(c, "server"), Some(addr.as_str()));
        assert_eq!(field(c, "table"), None);
    }
    // The busy answer sent the client looking for the leader again, as
    // part of the second attempt.
    let connect = spans.of("ConnectToMaster");
    let attempts: Vec<Option<&str>> = connect.iter().map(|c| field(c, "attempt")).collect();
    assert_eq!(attempts, [Some("1"), Some("2")], "{connect:?}");
}
