//! The two configuration files of a test KDC: `krb5.conf` (what every
//! client and Kudu daemon reads through `KRB5_CONFIG`) and `kdc.conf` (what
//! `krb5kdc`, `kdb5_util` and `kadmin.local` read through
//! `KRB5_KDC_PROFILE`), plus the checks on realm and principal names.
//!
//! Both files must be understood by two generations of MIT krb5: Debian
//! 12's 1.20 (kinit, the KDC, ferry's libgssapi) and the 1.15-era copy the
//! Kudu binaries bundle. Hence no `includedir`, only AES-SHA1 enctypes
//! (1.15 predates the SHA-2 ones), and durations in plain seconds.

use crate::{Error, Result};
use std::path::Path;

/// The enctypes of every key in a test realm, strongest first.
pub const ENCTYPES: &str = "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96";

/// `krb5.conf` for clients and servers of `realm`, KDC at
/// `127.0.0.1:<port>`.
pub(super) fn krb5_conf(realm: &str, port: u16, ticket_secs: u64, renew_secs: u64) -> String {
    format!(
        "# Written by ferry-testkit; clients use it through KRB5_CONFIG.\n\
         [libdefaults]\n\
         \x20 default_realm = {realm}\n\
         \x20 dns_lookup_kdc = false\n\
         \x20 dns_lookup_realm = false\n\
         \x20 rdns = false\n\
         \x20 dns_canonicalize_hostname = false\n\
         \x20 # A Kudu daemon checks its acceptor credentials under the host's\n\
         \x20 # name, but is dialled (and keyed) as kudu/<loopback ip>; Kudu's\n\
         \x20 # own MiniKdc sets this for the same reason.\n\
         \x20 ignore_acceptor_hostname = true\n\
         \x20 # TCP only: the KDC's replies never get truncated.\n\
         \x20 udp_preference_limit = 1\n\
         \x20 # A client does not silently adopt the KDC's clock, so a skewed\n\
         \x20 # KDC (Kdc::builder().clock_offset) fails as in production.\n\
         \x20 kdc_timesync = 0\n\
         \x20 ticket_lifetime = {ticket_secs}s\n\
         \x20 renew_lifetime = {renew_secs}s\n\
         \x20 forwardable = true\n\
         \x20 permitted_enctypes = {ENCTYPES}\n\
         \x20 default_tkt_enctypes = {ENCTYPES}\n\
         \x20 default_tgs_enctypes = {ENCTYPES}\n\
         \n\
         [realms]\n\
         \x20 {realm} = {{\n\
         \x20   kdc = 127.0.0.1:{port}\n\
         \x20 }}\n"
    )
}

/// `kdc.conf` for `krb5kdc` and the admin tools: database, stash and log
/// under `root`, listening on `127.0.0.1:<port>` (TCP and UDP).
pub(super) fn kdc_conf(
    realm: &str,
    root: &Path,
    port: u16,
    ticket_secs: u64,
    renew_secs: u64,
) -> String {
    let key_salts: Vec<String> = ENCTYPES
        .split_whitespace()
        .map(|e| format!("{e}:normal"))
        .collect();
    format!(
        "# Written by ferry-testkit; the KDC tools use it through KRB5_KDC_PROFILE.\n\
         [kdcdefaults]\n\
         \x20 kdc_ports = {port}\n\
         \x20 kdc_tcp_ports = {port}\n\
         \n\
         [realms]\n\
         \x20 {realm} = {{\n\
         \x20   database_name = {db}\n\
         \x20   key_stash_file = {stash}\n\
         \x20   acl_file = {acl}\n\
         \x20   kdc_listen = 127.0.0.1:{port}\n\
         \x20   kdc_tcp_listen = 127.0.0.1:{port}\n\
         \x20   max_life = {ticket_secs}s\n\
         \x20   max_renewable_life = {renew_secs}s\n\
         \x20   master_key_type = aes256-cts-hmac-sha1-96\n\
         \x20   supported_enctypes = {salts}\n\
         \x20   # Pre-authentication (an encrypted timestamp) makes the KDC\n\
         \x20   # check the client's clock, as Active Directory and most\n\
         \x20   # production realms do.\n\
         \x20   default_principal_flags = +preauth\n\
         \x20 }}\n\
         \n\
         [logging]\n\
         \x20 kdc = FILE:{log}\n\
         \x20 admin_server = FILE:{log}\n\
         \x20 default = FILE:{log}\n",
        db = root.join("principal").display(),
        stash = root.join("stash").display(),
        acl = root.join("kadm5.acl").display(),
        log = root.join("kdc.log").display(),
        salts = key_salts.join(" "),
    )
}

/// Checks a realm name: 1-64 characters of `[A-Z0-9.-]`.
pub(super) fn validate_realm(realm: &str) -> Result<String> {
    let ok = !realm.is_empty()
        && realm.len() <= 64
        && realm
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '.' || c == '-');
    if ok {
        Ok(realm.to_string())
    } else {
        Err(Error::Invalid(format!(
            "realm '{realm}' must be 1-64 characters of [A-Z0-9.-]"
        )))
    }
}

/// The full name `primary[/instance]@REALM` of `name`, which may carry the
/// realm already (then it must be `realm`). Names are 1-128 characters of
/// `[A-Za-z0-9._-]` with at most one `/`: enough for `kudu/127.0.0.1` or
/// `ferry-source`, and nothing `kadmin.local -q` would parse differently.
pub(super) fn full_principal(name: &str, realm: &str) -> Result<String> {
    let (base, given_realm) = match name.split_once('@') {
        Some((base, r)) => (base, Some(r)),
        None => (name, None),
    };
    if let Some(r) = given_realm {
        if r != realm {
            return Err(Error::Invalid(format!(
                "principal '{name}' is not in this KDC's realm {realm}"
            )));
        }
    }
    let parts: Vec<&str> = base.split('/').collect();
    let ok = base.len() <= 128
        && parts.len() <= 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
        });
    if ok {
        Ok(format!("{base}@{realm}"))
    } else {
        Err(Error::Invalid(format!(
            "principal '{name}' must be primary[/instance][@REALM] of [A-Za-z0-9._-]"
        )))
    }
}

/// The keytab file name of a full principal: `kudu/127.0.0.1@R` →
/// `kudu+127.0.0.1.keytab` (`+` cannot occur in a name, so no two
/// principals share a file).
pub(super) fn keytab_file_name(full: &str) -> String {
    let base = full.split('@').next().unwrap_or(full);
    format!("{}.keytab", base.replace('/', "+"))
}

/// Checks a password for `kadmin.local -q`, which splits its command at
/// white space and knows no quoting.
pub(super) fn validate_password(password: &str) -> Result<()> {
    let ok = !password.is_empty()
        && password.len() <= 128
        && password
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '"' && c != '\'' && c != '\\');
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(
            "a test password must be 1-128 printable ASCII characters without spaces, quotes or backslashes"
                .into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_are_completed_and_checked() {
        let r = "FERRY.TEST";
        assert_eq!(full_principal("ferry", r).expect("ok"), "ferry@FERRY.TEST");
        assert_eq!(
            full_principal("kudu/127.0.0.1@FERRY.TEST", r).expect("ok"),
            "kudu/127.0.0.1@FERRY.TEST"
        );
        assert!(full_principal("kudu/a@OTHER.TEST", r).is_err());
        assert!(full_principal("a b", r).is_err());
        assert!(full_principal("a/b/c", r).is_err());
        assert!(full_principal("/x", r).is_err());
        assert!(full_principal("", r).is_err());
        assert_eq!(
            keytab_file_name("kudu/127.0.0.1@FERRY.TEST"),
            "kudu+127.0.0.1.keytab"
        );
        assert!(validate_realm("FERRY.TEST").is_ok());
        assert!(validate_realm("ferry.test").is_err());
        assert!(validate_password("s3cret!").is_ok());
        assert!(validate_password("two words").is_err());
    }

    #[test]
    fn configs_carry_port_realm_and_lifetimes() {
        let krb5 = krb5_conf("R.TEST", 4321, 120, 600);
        assert!(krb5.contains("kdc = 127.0.0.1:4321"));
        assert!(krb5.contains("default_realm = R.TEST"));
        assert!(krb5.contains("ticket_lifetime = 120s"));
        assert!(!krb5.contains("includedir"));
        let kdc = kdc_conf("R.TEST", Path::new("/k"), 4321, 120, 600);
        assert!(kdc.contains("max_life = 120s"));
        assert!(kdc.contains("max_renewable_life = 600s"));
        assert!(kdc.contains(
            "supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal"
        ));
        assert!(kdc.contains("database_name = /k/principal"));
    }
}
