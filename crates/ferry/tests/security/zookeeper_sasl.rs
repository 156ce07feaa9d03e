//! `high-availability.type zookeeper` against a ZooKeeper quorum that
//! requires Kerberos (SASL GSSAPI) of every session (ferry-testkit's
//! Kerberos mode, the binary's shared MIT KDC) and two Kerberized Kudu
//! clusters:
//!
//! - without a ZooKeeper login, `ferry run` is refused (exit 1) naming the
//!   cause and how to give one, having written nothing;
//! - with `security.kerberos.login.contexts Client` it takes the lease as
//!   the keytab login and replicates;
//! - with `high-availability.zookeeper.client.acl creator`, a ferry of the
//!   same job logged in as another principal can neither read nor claim
//!   the lease: it is refused (exit 1, "not authorized") and never holds a
//!   generation, while the first keeps running and replicating.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::kdc;
use ferry_fixtures::compare::compare_tables;
use ferry_fixtures::live::{load_rows, wait_caught_up};
use ferry_fixtures::process::FerryProcess;
use ferry_testkit::{MiniCluster, ZooKeeperServer};
use kudu_client::{Kerberos, KerberosOptions, KuduClient, TableBuilder};

const TABLE: &str = "zk_sasl_orders";

/// The job's arguments: both clusters read and written as `kudu_login`,
/// HA on `quorum`.
fn job_args(
    source: &MiniCluster,
    sink: &MiniCluster,
    kudu_login: &(String, PathBuf),
    quorum: &str,
    dir: &Path,
    extra: &[&str],
) -> Vec<String> {
    let keytab = kudu_login.1.to_string_lossy();
    let chk = dir.join("chk");
    let mut args: Vec<String> = [
        "--job.sourceMasterAddresses",
        &source.master_addrs_joined(),
        "--job.sinkMasterAddresses",
        &sink.master_addrs_joined(),
        "--job.tableName",
        TABLE,
        "--job.createTable",
        "true",
        "--job.checkpointsDirectory",
        &chk.to_string_lossy(),
        "--job.discoveryIntervalSeconds",
        "1",
        "--job.checkpointingIntervalMillis",
        "500",
        "--metrics.kudu.pollIntervalMillis",
        "0",
        "--reader.kerberosPrincipal",
        &kudu_login.0,
        "--reader.kerberosKeytab",
        &keytab,
        "--writer.kerberosPrincipal",
        &kudu_login.0,
        "--writer.kerberosKeytab",
        &keytab,
        "--high-availability.type",
        "zookeeper",
        "--high-availability.zookeeper.quorum",
        quorum,
        "--high-availability.cluster-id",
        "zk-sasl",
        "--high-availability.zookeeper.client.acl",
        "creator",
        "--high-availability.lease-duration",
        "3s",
        "--high-availability.renew-interval",
        "1s",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// The ZooKeeper login: `principal` from `keytab`, given to ZooKeeper.
fn zk_login(principal: &str, keytab: &Path) -> Vec<String> {
    [
        "--security.kerberos.login.principal",
        principal,
        "--security.kerberos.login.keytab",
        &keytab.to_string_lossy(),
        "--security.kerberos.login.contexts",
        "Client",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect()
}

/// `ferry run` with `args`; `refused`: it is expected to exit before it
/// runs a job.
fn run(args: &[String], krb5_conf: &str, refused: bool) -> FerryProcess {
    let command = crate::ferry()
        .arg("run")
        .args(args)
        .env("KRB5_CONFIG", krb5_conf)
        .env_remove("KRB5CCNAME")
        .log_level("info")
        .free_ports();
    if refused {
        command.spawn()
    } else {
        command.start()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kerberized_zookeeper_gives_the_lease_to_the_keytab_login_alone() {
    let kdc = kdc();
    let krb5_conf = kdc.krb5_conf().display().to_string();
    let (source, sink, zk) = tokio::task::block_in_place(|| {
        let cluster = || {
            MiniCluster::builder()
                .masters(1)
                .tservers(1)
                .kerberos(&kdc)
                .start()
                .expect("Kerberized cluster")
        };
        let (source, sink) = (cluster(), cluster());
        let zk = ZooKeeperServer::start_kerberized(
            &format!("sec-zk-{}", std::process::id()),
            &kdc,
            false,
        )
        .expect("Kerberized ZooKeeper");
        (source, sink, zk)
    });
    let quorum = zk.connect_string();
    let kudu_login = source.client_principal("ferry-kudu").expect("principal");
    let ha = (
        kdc.principal("ferry-ha").expect("principal"),
        kdc.add_principal("ferry-ha").expect("keytab"),
    );
    let intruder = (
        kdc.principal("ferry-other").expect("principal"),
        kdc.add_principal("ferry-other").expect("keytab"),
    );
    let client = |cluster: &MiniCluster| {
        KuduClient::builder(&cluster.master_addrs())
            .kerberos(Kerberos::new(
                KerberosOptions::default()
                    .principal(kudu_login.0.clone())
                    .keytab(kudu_login.1.clone()),
            ))
            .build()
            .expect("client")
    };
    let (client, sink_client) = (client(&source), client(&sink));
    client
        .create_table(
            &TableBuilder::new(TABLE, ferry_fixtures::small_schema())
                .add_hash_partitions(&["id"], 2, 0)
                .num_replicas(1),
        )
        .await
        .expect("create source table");
    load_rows(&client, TABLE, 0..500).await;
    let dir = tempfile::tempdir().expect("tmp");

    // No ZooKeeper login: the quorum closes the session; said, nothing
    // written.
    let no_login = job_args(&source, &sink, &kudu_login, &quorum, dir.path(), &[]);
    let mut plain = run(&no_login, &krb5_conf, true);
    let status = tokio::task::block_in_place(|| plain.wait_exit(Duration::from_secs(60)));
    let err = plain.stderr_text();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("requires authentication (SASL) and this session has none"),
        "{err}"
    );
    assert!(err.contains("security.kerberos.login.contexts"), "{err}");
    assert!(!err.contains("holding generation"), "{err}");
    assert_eq!(files_under(&dir.path().join("chk")), 0, "nothing written");

    // The keytab login given to ZooKeeper: it holds the lease and runs.
    let login = zk_login(&ha.0, &ha.1);
    let args = job_args(&source, &sink, &kudu_login, &quorum, dir.path(), &[]);
    let mut active = run(&[args.clone(), login].concat(), &krb5_conf, false);
    active.wait_stderr("holding generation 1 of the lease", Duration::from_secs(60));
    wait_caught_up(
        &client,
        active.metrics(),
        &[TABLE.to_owned()],
        Duration::from_secs(120),
    )
    .await;
    let diff = compare_tables(&client, &sink_client, TABLE, TABLE).await;
    assert!(diff.is_equal(), "sink differs from source: {diff:?}");

    // Another principal of the realm, same job: the creator-only znodes
    // refuse it; it never holds a generation.
    let other = zk_login(&intruder.0, &intruder.1);
    let mut second = run(&[args, other].concat(), &krb5_conf, true);
    let status = tokio::task::block_in_place(|| second.wait_exit(Duration::from_secs(60)));
    let err = second.stderr_text();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("not authorized"), "{err}");
    assert!(!err.contains("holding generation"), "{err}");
    active.assert_running("after another principal tried the lease");
    let active_err = active.stderr_text();
    assert!(!active_err.contains("lease lost"), "{active_err}");
    load_rows(&client, TABLE, 500..700).await;
    wait_caught_up(
        &client,
        active.metrics(),
        &[TABLE.to_owned()],
        Duration::from_secs(60),
    )
    .await;
    let diff = compare_tables(&client, &sink_client, TABLE, TABLE).await;
    assert!(diff.is_equal(), "sink differs from source: {diff:?}");
    active.kill9();
}

/// How many files there are under `dir` (0 if it does not exist).
fn files_under(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                files_under(&path)
            } else {
                1
            }
        })
        .sum()
}
