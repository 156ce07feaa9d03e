//! [`ZooKeeperLease`] against a real ZooKeeper server that requires
//! Kerberos (SASL GSSAPI) of every session, with principals of a real MIT
//! KDC (ferry-testkit): the lease-backend conformance suite over SASL
//! sessions, `creator` ACLs naming the principal alone, and the refusals (no login, a principal the keytab lacks) that write
//! nothing.
//!
//! One test: the ZooKeeper login points this process's GSSAPI defaults at
//! one keytab (`KRB5CCNAME`, `KRB5_CLIENT_KTNAME`), like `KRB5_CONFIG` they
//! are process-wide.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use ferry_engine::config::ZooKeeperConfig;
use ferry_engine::lease::{conformance, LeaseBackend};
use ferry_testkit::{Kdc, ZooKeeperServer};
use ferry_zk::ZooKeeperLease;

mod common;
use common::{job, record};

fn settings(quorum: &str, extra: &[(&str, &str)]) -> ZooKeeperConfig {
    let timeouts = common::Timeouts {
        connect: "5 s",
        session: "4 s",
    };
    common::settings(quorum, timeouts, extra)
}

/// The settings of a SASL session as `principal` from `keytab`, with
/// `creator` ACLs.
fn sasl_settings(quorum: &str, principal: &str, keytab: &Path) -> ZooKeeperConfig {
    let keytab = keytab.to_str().expect("utf-8 path");
    let config = settings(
        quorum,
        &[
            ("security.kerberos.login.principal", principal),
            ("security.kerberos.login.keytab", keytab),
            ("security.kerberos.login.contexts", "Client"),
            ("high-availability.zookeeper.client.acl", "creator"),
        ],
    );
    assert!(config.sasl.is_some(), "SASL configured");
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kerberized_quorum_serves_the_lease_to_its_principal_alone() {
    let kdc = Kdc::builder().start().expect("kdc");
    std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
    let keytab = kdc.add_principal("ferry").expect("ferry keytab");
    let principal = kdc.principal("ferry").expect("principal");
    let zk =
        ZooKeeperServer::start_kerberized(&format!("zk-sasl-{}", std::process::id()), &kdc, false)
            .expect("server");
    let quorum = zk.connect_string();

    // Without a login the quorum closes the session: said at once, not
    // after retries, and nothing is written.
    let plain = ZooKeeperLease::new(settings(&quorum, &[]), "orders", &job()).expect("lease");
    let err = plain.write_next(&record(1, 1)).await.expect_err("refused");
    let text = chain(&err);
    assert!(
        text.contains("requires authentication (SASL) and this session has none"),
        "{text}"
    );
    assert!(text.contains("security.kerberos.login.contexts"), "{text}");

    // A principal the keytab has no keys for: named, with where to look.
    let wrong = kdc.principal("nobody").expect("principal");
    let lease = ZooKeeperLease::new(sasl_settings(&quorum, &wrong, &keytab), "orders", &job())
        .expect("lease");
    let err = lease.write_next(&record(1, 1)).await.expect_err("refused");
    let text = chain(&err);
    assert!(
        text.contains(&format!("cannot log in to Kerberos as {wrong} from keytab")),
        "{text}"
    );
    assert!(text.contains("klist -kt"), "{text}");

    // The lease-backend contract over SASL sessions (one per handle).
    let handle = || -> Arc<dyn LeaseBackend> {
        Arc::new(
            ZooKeeperLease::new(
                sasl_settings(&quorum, &principal, &keytab),
                "orders",
                &job(),
            )
            .expect("lease"),
        )
    };
    conformance::run(handle(), (0..3).map(|_| handle()).collect()).await;

    // The znodes are the principal's alone (`creator`: its SASL id); the
    // ferry-level test (crates/ferry/tests/security) shows another
    // principal's ferry cannot read or write them.
    let raw = zookeeper_client::Client::connector()
        .with_sasl(zookeeper_client::SaslOptions::gssapi())
        .connect(&quorum)
        .await
        .expect("a SASL client with this process's login");
    let dir = format!("/flink/orders/{}/lease", job());
    let newest = handle().newest().await.expect("read").expect("a record");
    for path in [dir.clone(), format!("{dir}/seq-{:020}", newest.seq)] {
        let (acls, _) = raw.get_acl(&path).await.expect("acl");
        let ids: Vec<_> = acls
            .iter()
            .map(|a| {
                (
                    a.auth_id().scheme().to_string(),
                    a.auth_id().id().to_string(),
                )
            })
            .collect();
        assert_eq!(ids, [("sasl".to_string(), principal.clone())], "{path}");
    }
}

/// The error and its causes, one per line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
