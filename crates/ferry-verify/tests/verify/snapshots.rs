//! Each side is read at its own hybrid time: writers running on both
//! tables while the verification runs cause no false difference.

use std::time::Duration;

use ferry_fixtures::small_schema;
use ferry_fixtures::workload::Workload;
use ferry_verify::{At, Method, VerifyOptions};
use kudu_client::write::Operation;

use crate::common::{clusters, create_sink, create_source, options, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_cause_no_difference_at_fixed_times() {
    let (_c, src, dst) = clusters();
    create_source(&src, "busy", small_schema(), 1_000).await;
    create_sink(&dst, "busy_copy", small_schema()).await;
    for (client, name) in [(&src, "busy"), (&dst, "busy_copy")] {
        let table = client.open_table(name).await.unwrap();
        let mut session = client.new_session();
        for id in 0..2_000i64 {
            let mut r = table.new_row();
            r.set_i64("id", id)
                .unwrap()
                .set_str("v", &format!("v{id}"))
                .unwrap();
            session.apply(Operation::insert(&table, r)).await.unwrap();
        }
        session.flush().await.unwrap();
    }
    let (at_source, at_sink) = (
        src.server_clock().await.unwrap(),
        dst.server_clock().await.unwrap(),
    );
    // Different random writes on each side from now on, old keys included.
    let writers = [
        Workload::start(src.clone(), "busy", 400, 1),
        Workload::start(dst.clone(), "busy_copy", 400, 2),
    ];
    tokio::time::sleep(Duration::from_secs(1)).await;
    for method in [Method::Server, Method::Client] {
        let opts = options(&src, "busy", At::Time(at_source), &dst, "busy_copy");
        let report = run(
            VerifyOptions {
                sink: ferry_verify::Side {
                    at: At::Time(at_sink),
                    ..opts.sink.clone()
                },
                ..opts
            },
            method,
        )
        .await;
        assert!(report.equal, "{report}");
        assert_eq!(report.rows_compared, 2_000);
    }
    // The writers did change the tables: now they differ.
    let mut applied = 0;
    for w in writers {
        applied += w.stop().await.applied;
    }
    assert!(applied > 0);
    let report = run(
        options(&src, "busy", At::Now, &dst, "busy_copy"),
        Method::Server,
    )
    .await;
    assert!(!report.equal, "{report}");
}
