//! Security with real processes: replication between Kerberized clusters
//! (a real MIT KDC) and the REST API over mutual TLS or with a bearer
//! token.

// Test code: a failed unwrap is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod kerberos;
mod rest_security;
mod zookeeper_sasl;

use std::sync::Arc;
use std::time::Duration;

use ferry_fixtures::process::FerryCommand;
use ferry_fixtures::Shared;
use ferry_testkit::Kdc;

/// `ferry` (the binary of this crate) with `FERRY_LOG=warn`.
fn ferry() -> FerryCommand {
    FerryCommand::new(env!("CARGO_BIN_EXE_ferry"))
}

/// One KDC for the tests of this binary, with 2-minute tickets (the
/// renewal test needs them; the others do not mind). The in-process test
/// clients find it through KRB5_CONFIG, which is process-wide, so the
/// tests cannot each have their own.
static KDC: Shared<Kdc> = Shared::new();

fn kdc() -> Arc<Kdc> {
    KDC.get(|| {
        let kdc = Kdc::builder()
            .ticket_lifetime(Duration::from_secs(120))
            .renew_lifetime(Duration::from_secs(120))
            .start()
            .expect("kdc");
        std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
        kdc
    })
}
