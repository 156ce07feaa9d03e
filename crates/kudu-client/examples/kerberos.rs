//! Connects to a Kerberized cluster (`--rpc_authentication=required`) as
//! a principal from a keytab, and lists its tables. The login is renewed
//! from the keytab for as long as the client lives; tablet servers are
//! reached with the masters' authentication tokens over verified TLS.
//!
//! ```text
//! cargo run -p kudu-client --features kerberos --example kerberos -- \
//!     MASTERS PRINCIPAL KEYTAB [SERVICE]
//! ```
//!
//! `SERVICE` is the servers' Kerberos service name (default `kudu`, the
//! `kudu/<host>` principals Kudu daemons run as). Needs the `kerberos`
//! feature (MIT `libgssapi_krb5`).

use kudu_client::{Kerberos, KerberosOptions, KuduClient};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (masters, principal, keytab, service) = match args.as_slice() {
        [m, p, k] => (m, p, k, "kudu"),
        [m, p, k, s] => (m, p, k, s.as_str()),
        _ => {
            eprintln!("usage: kerberos MASTERS PRINCIPAL KEYTAB [SERVICE]");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(masters, principal, keytab, service).await {
        eprintln!("kerberos: {e}");
        std::process::exit(1);
    }
}

async fn run(
    masters: &str,
    principal: &str,
    keytab: &str,
    service: &str,
) -> kudu_client::Result<()> {
    let login = KerberosOptions::default()
        .principal(principal)
        .keytab(keytab)
        .service_name(service);
    let client = KuduClient::builder(&[masters])
        .kerberos(Kerberos::new(login))
        .build()?;
    for t in client.list_tables("").await? {
        println!("{}", t.name);
    }
    println!("# authenticated to {masters} as {principal}");
    Ok(())
}
