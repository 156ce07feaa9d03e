//! Kerberos against a real MIT KDC and a Kerberized cluster
//! (`--rpc_authentication=required`, `--rpc_encryption=required`): SASL
//! GSSAPI with channel bindings and the nonce to the master, the master's
//! authentication token to the tablet server (proved by stopping the KDC
//! before the first tablet-server connection), and the login failures an
//! operator meets, each with its cause in the message.

use std::time::Duration;

use ferry_testkit::{Kdc, MiniCluster};
use kudu_client::write::{Operation, SessionOptions};
use kudu_client::{Error, Kerberos, KerberosOptions, KuduClient, TableBuilder};

fn client(c: &MiniCluster, principal: &str, keytab: &std::path::Path) -> KuduClient {
    KuduClient::builder(&c.master_addrs())
        .admin_timeout(Duration::from_secs(30))
        .operation_timeout(Duration::from_secs(30))
        .kerberos(Kerberos::new(
            KerberosOptions::default()
                .principal(principal)
                .keytab(keytab),
        ))
        .build()
        .expect("client")
}

fn auth_message(e: Error) -> String {
    match e {
        Error::Authentication { message, .. } => message,
        other => panic!("expected an authentication error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kerberos_then_tokens_and_clear_login_errors() {
    let mut kdc = tokio::task::block_in_place(|| Kdc::builder().start()).expect("kdc");
    // The client library reads the realm and KDC from KRB5_CONFIG. This
    // file's only test sets it before any GSSAPI call.
    std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
    let c = tokio::task::block_in_place(|| {
        MiniCluster::builder()
            .masters(1)
            .tservers(1)
            .kerberos(&kdc)
            .start()
    })
    .expect("kerberized cluster");
    let (principal, keytab) =
        tokio::task::block_in_place(|| c.client_principal("kc-test")).expect("principal");

    // SASL PLAIN is refused, and the error says what is missing.
    let plain = KuduClient::builder(&c.master_addrs())
        .admin_timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let msg = auth_message(plain.list_tables("").await.expect_err("plain refused"));
    assert!(msg.contains("Kerberos"), "{msg}");

    // Kerberos: DDL on the master, writes and scans on the tablet server.
    let k = client(&c, &principal, &keytab);
    k.create_table(
        &TableBuilder::new("krb", ferry_fixtures::small_schema())
            .add_hash_partitions(&["id"], 2, 0)
            .num_replicas(1),
    )
    .await
    .expect("create over Kerberos");
    let table = k.open_table("krb").await.expect("open");
    let mut session = k
        .new_session_with(SessionOptions::default())
        .expect("session");
    for id in 0..50i64 {
        let mut row = table.new_row();
        row.set_i64("id", id).expect("id");
        session
            .apply(Operation::upsert(&table, row))
            .await
            .expect("apply");
    }
    session.flush().await.expect("flush");
    assert_eq!(ferry_fixtures::read_all(&k, "krb").await.len(), 50);

    // A new client talks to the master (Kerberos; it gets a token), then
    // the KDC goes away: its first tablet-server connection can only
    // authenticate with the token, verified against the cluster's CA.
    let t = client(&c, &principal, &keytab);
    let table = t
        .open_table("krb")
        .await
        .expect("open before the KDC stops");
    tokio::task::block_in_place(|| kdc.stop()).expect("stop kdc");
    let mut session = t
        .new_session_with(SessionOptions::default())
        .expect("session");
    let mut row = table.new_row();
    row.set_i64("id", 1000).expect("id");
    session
        .apply(Operation::upsert(&table, row))
        .await
        .expect("apply");
    session
        .flush()
        .await
        .expect("a token authenticates to the tablet server without the KDC");

    // KDC down: a client that has no ticket yet names the cause.
    let down = client(&c, &principal, &keytab);
    let msg = auth_message(down.list_tables("").await.expect_err("kdc down"));
    assert!(msg.to_lowercase().contains("kdc"), "{msg}");
    tokio::task::block_in_place(|| kdc.start_again()).expect("kdc again");

    // An unknown principal, and a keytab that belongs to someone else.
    let unknown = client(&c, &format!("nobody@{}", kdc.realm()), &keytab);
    let msg = auth_message(
        unknown
            .list_tables("")
            .await
            .expect_err("unknown principal"),
    );
    assert!(msg.contains("nobody@"), "{msg}");
    let (other, _) = tokio::task::block_in_place(|| c.client_principal("kc-other")).expect("other");
    let wrong = client(&c, &other, &keytab);
    let msg = auth_message(wrong.list_tables("").await.expect_err("wrong keytab"));
    assert!(msg.contains("kc-other@"), "{msg}");
}
