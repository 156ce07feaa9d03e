//! `ferry run` between two Kerberized clusters (a real MIT KDC; Kudu
//! daemons with `--rpc_authentication=required --rpc_encryption=required`),
//! the source read as one principal and the sink written as another, each
//! from its own keytab: snapshot, continuous changes, stop with a
//! savepoint and resume from it, sink == source; and a job that outlives
//! three 2-minute tickets and several authentication tokens.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::kdc;
use ferry_fixtures::live::{load_rows, wait_caught_up};
use ferry_fixtures::process::FerryProcess;
use ferry_testkit::{Kdc, MiniCluster};
use kudu_client::write::{Operation, SessionOptions};
use kudu_client::{Kerberos, KerberosOptions, KuduClient, TableBuilder};
use std::sync::Arc;

const TABLE: &str = "krb_orders";

struct Setup {
    kdc: Arc<Kdc>,
    source: MiniCluster,
    sink: MiniCluster,
    /// (principal, keytab) ferry reads the source as.
    reader: (String, PathBuf),
    /// (principal, keytab) ferry writes the sink as.
    writer: (String, PathBuf),
}

fn setup(kdc: Arc<Kdc>, sink_master_flags: &[&str]) -> Setup {
    let start = |name: &str, flags: &[&str]| {
        let mut b = MiniCluster::builder().masters(1).tservers(1).kerberos(&kdc);
        for f in flags {
            b = b.master_flag(*f);
        }
        b.start().unwrap_or_else(|e| panic!("{name} cluster: {e}"))
    };
    let source = start("source", &[]);
    let sink = start("sink", sink_master_flags);
    let reader = source
        .client_principal("ferry-reader")
        .expect("reader principal");
    let writer = sink
        .client_principal("ferry-writer")
        .expect("writer principal");
    Setup {
        kdc,
        source,
        sink,
        reader,
        writer,
    }
}

/// A test client logged in as the cluster's test-kit user.
fn client(c: &MiniCluster, who: &(String, PathBuf)) -> KuduClient {
    KuduClient::builder(&c.master_addrs())
        .kerberos(Kerberos::new(
            KerberosOptions::default()
                .principal(who.0.clone())
                .keytab(who.1.clone()),
        ))
        .build()
        .expect("client")
}

fn job_args(s: &Setup, dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--job.sourceMasterAddresses",
        &s.source.master_addrs_joined(),
        "--job.sinkMasterAddresses",
        &s.sink.master_addrs_joined(),
        "--job.tableName",
        TABLE,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        &dir.join("chk").to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "2",
        "--job.checkpointingIntervalMillis",
        "500",
        "--metrics.kudu.pollIntervalMillis",
        "0",
        "--reader.kerberosPrincipal",
        &s.reader.0,
        "--reader.kerberosKeytab",
        &s.reader.1.to_string_lossy(),
        "--writer.kerberosPrincipal",
        &s.writer.0,
        "--writer.kerberosKeytab",
        &s.writer.1.to_string_lossy(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

async fn create_source_table(c: &KuduClient) {
    c.create_table(
        &TableBuilder::new(TABLE, ferry_fixtures::small_schema())
            .add_hash_partitions(&["id"], 3, 0)
            .num_replicas(1),
    )
    .await
    .expect("create source table");
}

async fn delete_rows(c: &KuduClient, ids: impl Iterator<Item = i64>) {
    let table = c.open_table(TABLE).await.expect("open");
    let mut s = c
        .new_session_with(SessionOptions::default())
        .expect("session");
    for id in ids {
        let mut key = table.new_row();
        key.set_i64("id", id).expect("id");
        s.apply(Operation::delete(&table, key))
            .await
            .expect("delete");
    }
    s.flush().await.expect("flush deletes");
}

/// `ferry run` of the job with `env`, started.
fn start(args: Vec<String>, env: &[(&str, &str)]) -> FerryProcess {
    crate::ferry()
        .arg("run")
        .args(args)
        .envs(env)
        .free_ports()
        .start()
}

async fn assert_equal(source: &KuduClient, sink: &KuduClient, when: &str) {
    let diff = ferry_fixtures::compare::compare_tables(source, sink, TABLE, TABLE).await;
    assert!(
        diff.is_equal(),
        "{when}: sink differs from source: {diff:?}"
    );
}

/// Secrets that must never reach a log: the keytabs' bytes.
fn assert_no_keytab_bytes(text: &str, keytabs: &[&Path]) {
    for k in keytabs {
        let bytes = std::fs::read(k).expect("keytab");
        // Any 16-byte run of the key material would do; check the tail.
        let tail = &bytes[bytes.len().saturating_sub(16)..];
        assert!(
            !text.as_bytes().windows(tail.len()).any(|w| w == tail),
            "keytab bytes of {} in the output",
            k.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_between_kerberized_clusters_with_two_principals_and_a_savepoint() {
    let s = tokio::task::block_in_place(|| setup(kdc(), &[]));
    let krb5_conf = s.kdc.krb5_conf().display().to_string();
    let env = [("KRB5_CONFIG", krb5_conf.as_str())];
    let source = client(&s.source, &s.reader);
    let sink = client(&s.sink, &s.writer);
    create_source_table(&source).await;
    load_rows(&source, TABLE, 0..3000).await;

    let dir = tempfile::tempdir().expect("tmp");
    let mut ferry = start(job_args(&s, dir.path(), &[]), &env);
    wait_caught_up(
        &source,
        ferry.metrics(),
        &[TABLE.to_owned()],
        Duration::from_secs(120),
    )
    .await;
    assert_equal(&source, &sink, "after the snapshot").await;

    load_rows(&source, TABLE, 2500..4000).await;
    delete_rows(&source, 0..500).await;
    wait_caught_up(
        &source,
        ferry.metrics(),
        &[TABLE.to_owned()],
        Duration::from_secs(60),
    )
    .await;
    assert_equal(&source, &sink, "after continuous changes").await;

    let savepoint = ferry.stop_with_savepoint(&dir.path().join("savepoints"));
    load_rows(&source, TABLE, 4000..4500).await;
    delete_rows(&source, 500..700).await;
    let resumed = start(job_args(&s, dir.path(), &["-s", &savepoint]), &env);
    wait_caught_up(
        &source,
        resumed.metrics(),
        &[TABLE.to_owned()],
        Duration::from_secs(60),
    )
    .await;
    assert_equal(&source, &sink, "after resuming from the savepoint").await;

    let output = format!("{}{}", ferry.stderr_text(), resumed.stderr_text());
    assert_no_keytab_bytes(&output, &[&s.reader.1, &s.writer.1]);
}

/// Tickets live 2 minutes and the sink's authentication tokens 100 s;
/// the job runs 6 minutes with changes every few seconds, the sink's
/// tablet server restarting after 200 s (new connections past the first
/// token) and the source's master after 260 s (a new Kerberos login past
/// two ticket lifetimes), without failing once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_minutes_on_two_minute_tickets() {
    let mut s =
        tokio::task::block_in_place(|| setup(kdc(), &["--authn_token_validity_seconds=100"]));
    let krb5_conf = s.kdc.krb5_conf().display().to_string();
    let env = [("KRB5_CONFIG", krb5_conf.as_str())];
    let source = client(&s.source, &s.reader);
    let sink = client(&s.sink, &s.writer);
    create_source_table(&source).await;
    load_rows(&source, TABLE, 0..1000).await;

    let dir = tempfile::tempdir().expect("tmp");
    let mut ferry = start(job_args(&s, dir.path(), &[]), &env);
    let started = Instant::now();
    let mut next = 1000i64;
    let mut restarted = false;
    let mut master_restarted = false;
    while started.elapsed() < Duration::from_secs(360) {
        load_rows(&source, TABLE, next..next + 50).await;
        delete_rows(&source, (next - 1000)..(next - 990)).await;
        next += 50;
        if !restarted && started.elapsed() > Duration::from_secs(200) {
            // The sink's tablet server comes back: ferry's writer connects
            // anew, past its first token's expiry.
            tokio::task::block_in_place(|| {
                s.sink.restart(ferry_testkit::DaemonKind::TabletServer, 0)
            })
            .expect("restart sink tablet server");
            restarted = true;
        }
        if !master_restarted && started.elapsed() > Duration::from_secs(260) {
            // A new master connection two ticket lifetimes in: only a
            // ticket renewed from the keytab authenticates it.
            tokio::task::block_in_place(|| s.source.restart(ferry_testkit::DaemonKind::Master, 0))
                .expect("restart source master");
            master_restarted = true;
        }
        ferry.assert_running("on two-minute tickets");
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    wait_caught_up(
        &source,
        ferry.metrics(),
        &[TABLE.to_owned()],
        Duration::from_secs(120),
    )
    .await;
    assert_equal(&source, &sink, "after six minutes").await;
    let log = ferry.stderr_text();
    for bad in ["uthentication", "Kerberos", "xpired", "restarting"] {
        assert!(!log.contains(bad), "'{bad}' in ferry's log:\n{log}");
    }
    ferry.kill9();
}

/// Runs `ferry run` against one Kerberized cluster (source and sink, told
/// apart by the table suffix) until it exits: (exit code, stderr).
fn run_until_exit(
    c: &MiniCluster,
    krb5_conf: &Path,
    dir: &Path,
    login: &[&str],
    extra_env: &[(&str, String)],
) -> (i32, String) {
    let out = crate::ferry()
        .args([
            "run",
            "--job.sourceMasterAddresses",
            &c.master_addrs_joined(),
            "--job.sinkMasterAddresses",
            &c.master_addrs_joined(),
            "--job.tableName",
            TABLE,
            "--job.createTable",
            "true",
            "--job.checkpointsDirectory",
            &dir.join("chk").to_string_lossy(),
            "--metrics.kudu.pollIntervalMillis",
            "0",
            "--rest.port",
            "0",
            "--metrics.port",
            "0",
        ])
        .args(login)
        .env("KRB5_CONFIG", krb5_conf.to_string_lossy())
        .envs(
            &extra_env
                .iter()
                .map(|(k, v)| (*k, v.as_str()))
                .collect::<Vec<_>>(),
        )
        .output();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// What is wrong, [principal, keytab], extra environment, exit code, the
/// cause the output must name.
type LoginCase<'a> = (&'a str, Vec<String>, Vec<(&'a str, String)>, i32, &'a str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_failures_stop_the_job_naming_their_cause() {
    let kdc = tokio::task::block_in_place(kdc);
    let c = tokio::task::block_in_place(|| {
        MiniCluster::builder()
            .masters(1)
            .tservers(1)
            .kerberos(&kdc)
            .start()
    })
    .expect("cluster");
    let (good, good_keytab) = c.client_principal("ferry-good").expect("principal");
    let (other, _) = c.client_principal("ferry-other").expect("principal");
    // A keytab whose principal the KDC no longer knows.
    let dir = tempfile::tempdir().expect("tmp");
    let (gone, kit_keytab) = c.client_principal("ferry-gone").expect("principal");
    let gone_keytab = dir.path().join("gone.keytab");
    std::fs::copy(&kit_keytab, &gone_keytab).expect("keep the keytab");
    kdc.remove_principal("ferry-gone")
        .expect("remove principal");
    create_source_table(&client(&c, &(good.clone(), good_keytab.clone()))).await;
    let keytab = good_keytab.to_string_lossy().into_owned();
    let no_env: &[(&str, String)] = &[];

    let cases: Vec<LoginCase> = vec![
        (
            "unknown principal",
            vec![gone.clone(), gone_keytab.to_string_lossy().into_owned()],
            Vec::new(),
            1,
            "not found in Kerberos database",
        ),
        (
            "a keytab of another principal",
            vec![other.clone(), keytab.clone()],
            Vec::new(),
            1,
            "klist -kt",
        ),
        (
            "a keytab that does not exist",
            vec![good.clone(), "/nonexistent/ferry.keytab".into()],
            Vec::new(),
            2,
            "security.kerberos.login.keytab",
        ),
        (
            "ferry's clock an hour ahead",
            vec![good.clone(), keytab.clone()],
            vec![
                (
                    "LD_PRELOAD",
                    ferry_testkit::kdc::libfaketime()
                        .expect("libfaketime")
                        .display()
                        .to_string(),
                ),
                ("FAKETIME", "+1h".to_owned()),
            ],
            1,
            "Clock skew too great",
        ),
    ];
    for (what, login, env, code, cause) in cases {
        let args = [
            "--security.kerberos.login.principal",
            &login[0],
            "--security.kerberos.login.keytab",
            &login[1],
        ];
        let (got, out) = tokio::task::block_in_place(|| {
            run_until_exit(&c, &kdc.krb5_conf(), dir.path(), &args, &env)
        });
        assert_eq!(got, code, "{what}: exit code; output:\n{out}");
        assert!(out.contains(cause), "{what}: '{cause}' not in:\n{out}");
        assert!(!out.contains("panicked"), "{what}: {out}");
        assert_no_keytab_bytes(&out, &[&good_keytab]);
    }

    // KDC unreachable: the shared KDC keeps serving the other tests, so
    // this ferry gets a krb5.conf whose KDC address nothing listens on.
    let conf = std::fs::read_to_string(kdc.krb5_conf()).expect("krb5.conf");
    let dead = format!("kdc = 127.0.0.1:{}", ferry_fixtures::free_port());
    let conf: String = conf
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("kdc = 127.0.0.1:") {
                dead.clone()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dead_conf = dir.path().join("krb5-dead-kdc.conf");
    std::fs::write(&dead_conf, conf).expect("write krb5.conf");
    let args = [
        "--security.kerberos.login.principal",
        good.as_str(),
        "--security.kerberos.login.keytab",
        keytab.as_str(),
    ];
    let (got, out) =
        tokio::task::block_in_place(|| run_until_exit(&c, &dead_conf, dir.path(), &args, no_env));
    assert_eq!(got, 1, "KDC down: exit code; output:\n{out}");
    assert!(out.contains("Cannot contact any KDC"), "KDC down: {out}");
    assert_no_keytab_bytes(&out, &[&good_keytab]);
}
