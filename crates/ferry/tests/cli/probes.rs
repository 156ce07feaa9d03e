//! The probes the Kubernetes kit uses (`GET /healthz`, `GET /readyz`)
//! against real processes: the `ferry run` holding the job's lease is
//! Ready; a second one waiting for the lease is alive but not Ready (so a
//! liveness probe leaves it alone and the Service skips it); once the
//! active is killed, the second takes over, opens what was busy while it
//! waited, and becomes Ready.

use ferry_fixtures::free_port;
use ferry_fixtures::process::FerryProcess;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{KuduClient, TableBuilder};
use std::time::{Duration, Instant};

/// Polls `GET /readyz` of `ferry` until it answers `code` (at most 60 s);
/// returns the body.
fn wait_readyz(ferry: &mut FerryProcess, code: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        ferry.assert_running("while polling /readyz");
        if let Some((c, body)) = ferry.try_http("GET", "/readyz") {
            if c == code {
                return body;
            }
        }
        assert!(Instant::now() < deadline, "/readyz never answered {code}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_holder_is_ready_and_a_waiting_instance_only_alive() {
    let c = crate::cluster();
    let masters = c.master_addrs_joined();
    let client = KuduClient::new(&c.master_addrs()).expect("client");
    client
        .create_table(
            &TableBuilder::new("probes_src", ferry_fixtures::small_schema())
                .add_hash_partitions(&["id"], 2, 0)
                .num_replicas(1),
        )
        .await
        .expect("create");
    let table = client.open_table("probes_src").await.expect("open");
    let options = SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground);
    let mut session = client.new_session_with(options).expect("session");
    for id in 0..100 {
        let mut row = table.new_row();
        row.set_i64("id", id).expect("id");
        row.set_str("v", "v").expect("v");
        session
            .apply(Operation::upsert(&table, row))
            .await
            .expect("apply");
    }
    session.close().await.expect("flush");

    let dir = tempfile::tempdir().expect("tmp");
    let chk = dir.path().join("chk").to_string_lossy().into_owned();
    let ha = dir.path().join("ha").to_string_lossy().into_owned();
    let job = |metrics_port: u16| {
        crate::ferry()
            .args([
                "run",
                "--job.sourceMasterAddresses",
                &masters,
                "--job.sinkMasterAddresses",
                &masters,
                "--job.tableName",
                "probes_src",
                "--job.tableSuffix",
                "_copy",
                "--job.createTable",
                "--job.checkpointsDirectory",
                &chk,
                "--job.discoveryIntervalSeconds",
                "1",
                "--job.checkpointingIntervalMillis",
                "500",
                "--high-availability.type",
                "lease",
                "--high-availability.storageDir",
                &ha,
                "--high-availability.lease-duration",
                "3 s",
            ])
            .rest_port(free_port())
            .metrics_port(metrics_port)
    };

    let mut active = job(free_port()).start();
    assert_eq!(wait_readyz(&mut active, 200), r#"{"status":"ready"}"#);
    let (code, body) = active.http("GET", "/healthz", None);
    assert_eq!((code, body.as_str()), (200, r#"{"status":"ok"}"#));

    // The second instance waits for the lease: alive, not ready, no job.
    // It shares the active's metrics port, as two pods' containers could
    // not but two processes on one host can: busy while it waits.
    let mut waiting = job(active.metrics()).spawn();
    waiting.wait_rest(Duration::from_secs(30));
    let (code, body) = waiting.http("GET", "/healthz", None);
    assert_eq!((code, body.as_str()), (200, r#"{"status":"ok"}"#));
    let (code, body) = waiting.http("GET", "/readyz", None);
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("waiting for the lease"), "{body}");
    assert_eq!(waiting.try_job_id(), None, "{}", waiting.output_text());

    // The active dies: the waiting one takes over on the REST port it
    // already serves, opens the metrics port the active released, and is
    // ready.
    active.kill9();
    wait_readyz(&mut waiting, 200);
    assert_eq!(waiting.try_job_id(), Some(active.job_id()));
    let metrics = waiting.metrics_text();
    assert!(metrics.contains("flink_jobmanager_job_uptime"), "{metrics}");
    waiting.kill9();
}
