//! The planned cutover on every version pair, and the failback it
//! implies: `ferry run` copies an every-type table under a writer; `ferry
//! cutover` drains, verifies equal with RPO 0 and prints the reverse job;
//! the reverse job (new primary → old source: 1.18.1 → 1.17.1 on the
//! upgrade pair, the direction a failback takes while only the DR side is
//! upgraded) starts without a snapshot and carries inserts, updates and
//! deletes made on the new primary back, cell by cell.

use std::time::{Duration, Instant};

use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::process::output_text;
use ferry_fixtures::workload::Workload;
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::KuduClient;
use serde_json::Value;

use crate::pair_job::{create_every_type_table, for_each_pair, PairEnv, CATCH_UP, SINK_SUFFIX};

/// Waits until the job has completed `n` windows.
async fn windows(env: &PairEnv, ferry: &ferry_fixtures::process::FerryProcess, n: u64) -> Value {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let live = ferry.live();
        if live["totals"]["windows_completed"].as_u64().unwrap_or(0) >= n {
            return live;
        }
        assert!(
            Instant::now() < deadline,
            "{}: not {n} windows: {live}",
            env.pair.label()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Inserts 30 rows, updates 10 and deletes 5 of `keys` in `table`.
async fn write_on_new_primary(client: &KuduClient, table: &str, keys: &[i64]) {
    let t = client.open_table(table).await.expect("open");
    let mut s = client
        .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
        .expect("session");
    for n in 0..30 {
        let mut r = t.new_row();
        r.set_i64("id", 60_000_000 + n).unwrap();
        r.set_str("s", &format!("new on the new primary {n}"))
            .unwrap();
        r.set_decimal("dec18", i128::from(n) * 10_001, 4).unwrap();
        s.apply(Operation::insert(&t, r)).await.unwrap();
    }
    for k in &keys[..10] {
        let mut r = t.new_row();
        r.set_i64("id", *k).unwrap();
        r.set_str("s", "updated on the new primary").unwrap();
        r.set_null("dt").unwrap();
        s.apply(Operation::update(&t, r)).await.unwrap();
    }
    for k in &keys[10..15] {
        let mut r = t.new_row();
        r.set_i64("id", *k).unwrap();
        s.apply(Operation::delete(&t, r)).await.unwrap();
    }
    s.flush().await.expect("write on the new primary");
}

#[test]
fn planned_cutover_and_failback_on_every_pair() {
    for_each_pair(|env| async move {
        let label = env.pair.label();
        let t = env.pair.table("dr");
        let copy = format!("{t}{SINK_SUFFIX}");
        create_every_type_table(&env.source, &t, 3).await;
        let writer = Workload::start(env.source.clone(), &t, 200, 33);
        tokio::time::sleep(Duration::from_millis(800)).await;
        let mut forward = env.start(&t, &["--metrics.kudu.pollIntervalMillis", "500"]);
        let id = forward.job_id();
        windows(&env, &forward, 3).await;
        let stats = writer.stop().await;
        assert_eq!(stats.failed, 0, "{label}: {stats:?}");

        // The applications stopped writing: cut over.
        let dir = env.dir.path();
        let mut args: Vec<String> = [
            "cutover",
            "--jobmanager",
            &forward.jobmanager(),
            "--job-id",
            &id,
            "--savepointPath",
            &dir.join("sp").to_string_lossy(),
            "--report",
            &dir.join("cutover.json").to_string_lossy(),
            "--quiet-period",
            "1",
            "--drain-timeout",
            "60",
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(env.run_options(&t));
        let o = tokio::task::spawn_blocking(move || crate::ferry().args(&args).output())
            .await
            .expect("join");
        assert_eq!(o.status.code(), Some(0), "{label}: {}", output_text(&o));
        let stdout = String::from_utf8_lossy(&o.stdout);
        let line = stdout
            .lines()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("{label}: no JSON in {stdout}"));
        let r: Value = serde_json::from_str(line).expect("json");
        assert_eq!(
            (&r["equal"], &r["drained"], &r["rpoMs"]),
            (&Value::Bool(true), &Value::Bool(true), &Value::from(0)),
            "{label}: {r}"
        );
        let status = forward.wait_exit(Duration::from_secs(30));
        assert!(
            status.success(),
            "{label}: the forward job ended with {status}"
        );

        // Failback: the printed reverse job, new primary → old source.
        let command = r["reverseCommand"].as_str().expect("reverseCommand");
        let reverse_args: Vec<&str> = command
            .strip_prefix("ferry run ")
            .unwrap_or_else(|| panic!("{label}: {command}"))
            .split(' ')
            .collect();
        let reverse = crate::ferry()
            .arg("run")
            .args(&reverse_args)
            .free_ports()
            .start();
        let keys: Vec<i64> = ferry_fixtures::read_all(&env.sink, &copy)
            .await
            .into_keys()
            .collect();
        assert!(keys.len() > 50, "{label}: {} rows", keys.len());
        write_on_new_primary(&env.sink, &copy, &keys).await;
        let deadline = Instant::now() + CATCH_UP;
        loop {
            let diff = compare_tables(&env.sink, &env.source, &copy, &t).await;
            if diff.is_equal() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{label}: the old source never caught up with the new primary: {diff}\nreverse job: {}\n{command}",
                reverse.live()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let back = ferry_fixtures::read_all(&env.source, &t).await;
        assert!(
            back.contains_key(&60_000_029),
            "{label}: an insert came back"
        );
        assert!(!back.contains_key(&keys[10]), "{label}: a delete came back");
        let live = windows(&env, &reverse, 1).await;
        assert_eq!(live["totals"]["snapshot_windows"], 0, "{label}: {live}");
        drop(reverse);
    });
}
