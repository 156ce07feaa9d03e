//! The test KDC against real `krb5kdc` and `kinit`, and a Kerberized Kudu
//! cluster against real Kudu daemons: principals, keytabs, failures a
//! client must tell apart (wrong keytab, unknown principal, KDC down,
//! clock skew), authentication that is really required, and nothing left
//! behind.

use ferry_testkit::kdc::is_clock_skew;
use ferry_testkit::process::processes_under;
use ferry_testkit::{DaemonKind, Kdc, KuduBinaries, MiniCluster};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `klist` of a cache: (principal, ticket lifetime in seconds).
fn klist(kdc: &Kdc, ccache: &Path) -> String {
    let out = Command::new(ferry_testkit::kdc::tool("klist").expect("klist"))
        .env("KRB5_CONFIG", kdc.krb5_conf())
        .arg("-c")
        .arg(format!("FILE:{}", ccache.display()))
        .output()
        .expect("run klist");
    assert!(out.status.success(), "klist: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn principals_keytabs_and_failures_kinit_must_tell_apart() {
    let mut kdc = Kdc::builder()
        .ticket_lifetime(Duration::from_secs(120))
        .renew_lifetime(Duration::from_secs(600))
        .start()
        .expect("KDC starts");
    let root = kdc.info().root.clone();
    let scratch = root.join("scratch");
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    assert_eq!(kdc.realm(), "FERRY.TEST");
    assert!(kdc.krb5_conf().is_file());
    assert_eq!(
        kdc.env(),
        vec![(
            "KRB5_CONFIG".to_string(),
            kdc.krb5_conf().display().to_string()
        )]
    );

    // A principal, its keytab, and a ticket of the configured lifetime.
    let keytab = kdc.add_principal("ferry-source").expect("principal");
    assert_eq!(
        kdc.add_principal("ferry-source@FERRY.TEST")
            .expect("idempotent"),
        keytab
    );
    let cc = scratch.join("cc");
    kdc.kinit("ferry-source", &keytab, &cc).expect("kinit");
    let list = klist(&kdc, &cc);
    assert!(
        list.contains("Default principal: ferry-source@FERRY.TEST"),
        "{list}"
    );
    assert!(list.contains("krbtgt/FERRY.TEST@FERRY.TEST"), "{list}");
    assert!(list.contains("renew until"), "renewable: {list}");
    // Password principals work too.
    kdc.add_principal_with_password("alice", "s3cret!")
        .expect("password principal");
    kdc.kinit_with_password("alice", "s3cret!", &scratch.join("alice"))
        .expect("kinit with password");
    let wrong = kdc
        .kinit_with_password("alice", "wrong", &scratch.join("alice2"))
        .expect_err("wrong password");
    assert!(
        wrong.to_string().contains("Password incorrect")
            || wrong.to_string().contains("Preauthentication failed"),
        "{wrong}"
    );

    // Someone else's keytab: no keys for this principal.
    kdc.add_principal("ferry-sink").expect("second principal");
    let e = kdc
        .kinit("ferry-sink", &keytab, &scratch.join("cc2"))
        .expect_err("wrong keytab");
    assert!(e.to_string().contains("no suitable keys"), "{e}");
    // A principal that was removed (a revoked account).
    let gone = kdc.add_principal("gone").expect("principal");
    let kept = scratch.join("gone.keytab");
    std::fs::copy(&gone, &kept).expect("keep keytab");
    kdc.remove_principal("gone").expect("remove");
    let e = kdc
        .kinit("gone", &kept, &scratch.join("cc3"))
        .expect_err("unknown principal");
    assert!(
        e.to_string().contains("not found in Kerberos database"),
        "{e}"
    );
    assert!(kdc.add_principal("bad principal").is_err());

    // KDC down: nobody to ask. Back up: same port, same principals.
    let address = kdc.address();
    kdc.stop().expect("stop");
    assert!(!kdc.is_running());
    let e = kdc
        .kinit("ferry-source", &keytab, &scratch.join("cc4"))
        .expect_err("KDC down");
    assert!(e.to_string().contains("Cannot contact any KDC"), "{e}");
    kdc.start_again().expect("start again");
    assert_eq!(kdc.address(), address);
    kdc.kinit("ferry-source", &keytab, &scratch.join("cc5"))
        .expect("kinit after restart");

    // Found again by name, as the CLI does; the attached handle does not
    // tear it down.
    let attached = Kdc::attach(kdc.name()).expect("attach");
    assert_eq!(attached.address(), address);
    assert!(attached.is_running());
    drop(attached);
    assert!(kdc.is_running());

    drop(kdc);
    assert!(processes_under(&root).is_empty(), "krb5kdc left running");
    assert!(!root.exists(), "KDC folder left behind");
}

#[test]
fn a_kdc_with_a_skewed_clock_is_refused_with_clock_skew() {
    // 10 minutes ahead: twice krb5's 5-minute tolerance.
    let kdc = Kdc::builder()
        .clock_offset(600)
        .start()
        .expect("skewed KDC starts");
    let keytab = kdc.add_principal("ferry-source").expect("principal");
    let e = kdc
        .kinit(
            "ferry-source",
            &keytab,
            &kdc.info().root.join("scratch.krb5cc"),
        )
        .expect_err("clock skew");
    assert!(is_clock_skew(&e), "{e}");
    let root = kdc.info().root.clone();
    drop(kdc);
    assert!(processes_under(&root).is_empty(), "krb5kdc left running");
}

#[test]
fn a_kerberized_cluster_requires_tickets() {
    // Declared first, dropped last: the cluster's daemons need the KDC
    // until they are gone.
    let mut kdc = Kdc::builder()
        .ticket_lifetime(Duration::from_secs(120))
        .start()
        .expect("KDC starts");
    let started = Instant::now();
    let mut cluster = MiniCluster::builder()
        .masters(1)
        .tservers(1)
        .kerberos(&kdc)
        .start()
        .expect("Kerberized cluster starts");
    eprintln!("Kerberized cluster up in {:?}", started.elapsed());
    let masters = cluster.master_addrs_joined();
    let master = &cluster.info().masters[0];
    assert!(
        master
            .args
            .contains(&"--rpc_authentication=required".to_string()),
        "{:?}",
        master.args
    );
    let krb = cluster.kerberos().expect("Kerberos info").clone();
    assert_eq!(krb.principal, "kudu/testkit@FERRY.TEST");

    // The kit's own calls authenticate (as kudu/testkit).
    let out = cluster
        .kudu_ok(&["table", "list", &masters])
        .expect("kudu table list with the kit's ticket");
    assert!(out.trim().is_empty(), "no tables yet: {out}");
    let ts = cluster.tserver_status().expect("tserver list");
    assert_eq!(ts.iter().filter(|t| t.live).count(), 1);

    // The same call without a ticket is refused.
    let no_ticket = |ccache: String| {
        KuduBinaries::get()
            .expect("binaries")
            .command()
            .env("KRB5_CONFIG", &krb.krb5_conf)
            .env("KRB5CCNAME", ccache)
            .args(["table", "list", &masters, "-timeout_ms=5000"])
            .output()
            .expect("run kudu")
    };
    let missing = cluster.root().join("no-such-ccache");
    for out in [
        no_ticket(format!("FILE:{}", missing.display())),
        no_ticket(String::new()),
    ] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "kudu without a ticket succeeded");
        assert!(
            stderr.contains("Not authorized") || stderr.contains("authentication"),
            "{stderr}"
        );
    }

    // A client principal for ferry, with a ticket of its own.
    let (principal, keytab) = cluster
        .client_principal("ferry-source")
        .expect("client principal");
    assert_eq!(principal, "ferry-source@FERRY.TEST");
    let cc = cluster.root().join("ferry.krb5cc");
    kdc.kinit(&principal, &keytab, &cc).expect("kinit ferry");
    let out = KuduBinaries::get()
        .expect("binaries")
        .command()
        .env("KRB5_CONFIG", &krb.krb5_conf)
        .env("KRB5CCNAME", format!("FILE:{}", cc.display()))
        .args(["table", "list", &masters])
        .output()
        .expect("run kudu");
    assert!(out.status.success(), "as ferry-source: {out:?}");

    // A restarted daemon logs in again with the same principal and
    // environment.
    cluster
        .restart(DaemonKind::TabletServer, 0)
        .expect("tserver restarts");
    cluster
        .wait_for(Duration::from_secs(30), "ts-0 live again", |c| {
            Ok(c.tserver_status()?.iter().filter(|t| t.live).count() == 1)
        })
        .expect("ts-0 registers again");

    // KDC down: the kit keeps working from its cached tickets.
    kdc.stop().expect("KDC stops");
    cluster
        .kudu_ok(&["table", "list", &masters])
        .expect("kit CLI with the KDC down");
    kdc.start_again().expect("KDC back");
    let env = cluster.kerberos_env().expect("kerberos env");
    assert!(
        env.iter()
            .any(|(k, v)| k == "KRB5CCNAME" && v.starts_with("FILE:")),
        "{env:?}"
    );

    let root = cluster.root().to_path_buf();
    drop(cluster);
    assert!(processes_under(&root).is_empty(), "daemons left running");
    assert!(!root.exists());
}
