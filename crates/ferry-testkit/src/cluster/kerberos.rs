//! Kerberized clusters ([`ClusterBuilder::kerberos`](super::ClusterBuilder::kerberos)):
//! each daemon's principal, keytab, flags and environment, and the kit's own
//! credentials for the `kudu` CLI.
//!
//! As in Kudu's ExternalMiniCluster, a daemon at `127.a.b.c` logs in as
//! `kudu/127.a.b.c@REALM` from `<daemon dir>/kudu.keytab` and runs with
//! `--rpc_authentication=required --rpc_encryption=required`, `KRB5_CONFIG`
//! = the KDC's `krb5.conf` and a private `KRB5CCNAME`. Clients name the
//! service `kudu/<the address they dialled>`, which is why addresses, not
//! host names, are in the principals.
//!
//! The kit's CLI calls run as `kudu/testkit@REALM`: Kudu maps a principal
//! to its first component, `kudu`, which is the daemons' own (service)
//! user, and the service user is a superuser when `--superuser_acl` is
//! unset. Before each call the kit runs `kinit` into `<root>/krb5cc` (a few
//! milliseconds), so tickets as short as a test's 2 minutes never expire
//! under it; while the KDC is down it keeps using that cache as long as it
//! holds an unexpired ticket.

use super::{ClusterInfo, Daemon, MiniCluster};
use crate::kdc::{self, Kdc, KdcInfo};
use crate::{io_err, Error, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The kit's own principal in every Kerberized cluster (short name `kudu`:
/// a superuser, see the module docs).
pub const TESTKIT_PRINCIPAL: &str = "kudu/testkit";

/// How a Kerberized cluster authenticates (in `cluster.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KerberosInfo {
    /// The KDC's name (`<home>/kdc/<name>`).
    pub kdc_name: String,
    pub realm: String,
    /// The KDC's `krb5.conf` (`KRB5_CONFIG` of daemons and clients).
    pub krb5_conf: PathBuf,
    /// The kit's principal, `kudu/testkit@REALM`.
    pub principal: String,
    /// Its keytab, `<root>/testkit.keytab`.
    pub keytab: PathBuf,
    /// Its credential cache, `<root>/krb5cc`.
    pub ccache: PathBuf,
}

impl KerberosInfo {
    pub(super) fn new(kdc: &KdcInfo, root: &Path) -> KerberosInfo {
        KerberosInfo {
            kdc_name: kdc.name.clone(),
            realm: kdc.realm.clone(),
            krb5_conf: kdc.krb5_conf(),
            principal: format!("{TESTKIT_PRINCIPAL}@{}", kdc.realm),
            keytab: root.join("testkit.keytab"),
            ccache: root.join("krb5cc"),
        }
    }

    /// The service principal of the daemon at `ip`.
    pub fn daemon_principal(&self, ip: Ipv4Addr) -> String {
        format!("kudu/{ip}@{}", self.realm)
    }

    /// The flags that make a daemon at `ip` (folder `dir`) Kerberized.
    pub(super) fn daemon_flags(&self, ip: Ipv4Addr, dir: &Path) -> Vec<String> {
        vec![
            "--rpc_authentication=required".into(),
            "--rpc_encryption=required".into(),
            format!("--keytab_file={}", daemon_keytab(dir).display()),
            format!("--principal={}", self.daemon_principal(ip)),
        ]
    }

    /// The environment of a daemon in `dir`. (Kudu itself then switches
    /// to an in-memory cache, `MEMORY:kudu`; the private file is what it
    /// would use otherwise, never another daemon's or the user's.)
    pub(super) fn daemon_env(&self, dir: &Path) -> Vec<(String, String)> {
        vec![
            ("KRB5_CONFIG".into(), self.krb5_conf.display().to_string()),
            (
                "KRB5CCNAME".into(),
                format!("FILE:{}", dir.join("krb5cc").display()),
            ),
        ]
    }
}

/// Where a daemon's keytab is copied.
fn daemon_keytab(dir: &Path) -> PathBuf {
    dir.join("kudu.keytab")
}

/// Creates every daemon's principal and the kit's in the KDC and copies
/// their keytabs into the cluster's folders (which thus hold all they need;
/// the copies keep kadmin's 0600, which Kudu insists on).
pub(super) fn provision(kdc: &KdcInfo, info: &ClusterInfo) -> Result<()> {
    let Some(krb) = &info.kerberos else {
        return Ok(());
    };
    let kdc = Kdc::from_info(kdc.clone());
    for d in info.daemons() {
        let ip = daemon_ip(d)?;
        let keytab = kdc.add_principal(&krb.daemon_principal(ip))?;
        fs::create_dir_all(&d.dir).map_err(io_err(format!("creating {}", d.dir.display())))?;
        copy(&keytab, &daemon_keytab(&d.dir))?;
    }
    let keytab = kdc.add_principal(&krb.principal)?;
    copy(&keytab, &krb.keytab)
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to).map(|_| ()).map_err(io_err(format!(
        "copying {} to {}",
        from.display(),
        to.display()
    )))
}

fn daemon_ip(d: &Daemon) -> Result<Ipv4Addr> {
    d.rpc_addr
        .split(':')
        .next()
        .and_then(|ip| ip.parse().ok())
        .ok_or_else(|| Error::Invalid(format!("{}: bad address {}", d.id, d.rpc_addr)))
}

impl MiniCluster {
    /// How the cluster authenticates, if it is Kerberized.
    pub fn kerberos(&self) -> Option<&KerberosInfo> {
        self.info.kerberos.as_ref()
    }

    /// The environment a client process needs to act as the kit's
    /// superuser (`kudu/testkit`): `KRB5_CONFIG` and `KRB5CCNAME` with a
    /// fresh ticket (kinit on every call). Empty for a cluster without
    /// Kerberos, so `cmd.envs(cluster.kerberos_env()?)` fits both.
    pub fn kerberos_env(&self) -> Result<Vec<(String, String)>> {
        let Some(krb) = &self.info.kerberos else {
            return Ok(Vec::new());
        };
        refresh_ticket(krb)?;
        Ok(vec![
            ("KRB5_CONFIG".into(), krb.krb5_conf.display().to_string()),
            (
                "KRB5CCNAME".into(),
                format!("FILE:{}", krb.ccache.display()),
            ),
        ])
    }

    /// Creates principal `name` (e.g. `ferry-source`) in the cluster's KDC
    /// and returns its full name and keytab, for a client such as ferry.
    /// Users other than `kudu` are ordinary users (`--user_acl=*`).
    pub fn client_principal(&self, name: &str) -> Result<(String, PathBuf)> {
        let krb = self.info.kerberos.as_ref().ok_or_else(|| {
            Error::Invalid(format!(
                "cluster '{}' does not use Kerberos",
                self.info.name
            ))
        })?;
        let kdc = Kdc::attach(&krb.kdc_name)?;
        let keytab = kdc.add_principal(name)?;
        Ok((kdc.principal(name)?, keytab))
    }
}

/// `kinit` into a file beside the cache, then a rename over it: a CLI that
/// reads the cache meanwhile sees the old or the new one, never half of
/// one. If the KDC does not answer, a cache that still holds an unexpired
/// ticket is good enough.
fn refresh_ticket(krb: &KerberosInfo) -> Result<()> {
    static N: AtomicU32 = AtomicU32::new(0);
    let tmp = krb.ccache.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    match kdc::kinit(&krb.krb5_conf, &krb.principal, &krb.keytab, &tmp) {
        Ok(()) => fs::rename(&tmp, &krb.ccache)
            .map_err(io_err(format!("writing {}", krb.ccache.display()))),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            if kdc::has_valid_ticket(&krb.krb5_conf, &krb.ccache) {
                Ok(())
            } else {
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemons_get_their_own_principal_keytab_and_cache() {
        let kdc = KdcInfo {
            name: "krb".into(),
            root: PathBuf::from("/k/krb"),
            realm: "R.TEST".into(),
            port: 88,
            ticket_lifetime_secs: 120,
            renew_lifetime_secs: 600,
            clock_offset_secs: 0,
            detached: false,
            pid: None,
        };
        let krb = KerberosInfo::new(&kdc, Path::new("/c"));
        assert_eq!(krb.principal, "kudu/testkit@R.TEST");
        assert_eq!(krb.krb5_conf, PathBuf::from("/k/krb/krb5.conf"));
        let ip = Ipv4Addr::new(127, 1, 2, 11);
        let dir = Path::new("/c/ts-0");
        assert_eq!(
            krb.daemon_flags(ip, dir),
            [
                "--rpc_authentication=required",
                "--rpc_encryption=required",
                "--keytab_file=/c/ts-0/kudu.keytab",
                "--principal=kudu/127.1.2.11@R.TEST",
            ]
        );
        assert_eq!(
            krb.daemon_env(dir),
            [
                ("KRB5_CONFIG".to_string(), "/k/krb/krb5.conf".to_string()),
                ("KRB5CCNAME".to_string(), "FILE:/c/ts-0/krb5cc".to_string()),
            ]
        );
    }
}
