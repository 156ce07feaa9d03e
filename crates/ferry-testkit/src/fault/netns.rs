//! [`NetNs`]: a network namespace joined to the root namespace by a veth
//! pair, in which a process (ferry) can run and have its traffic dropped.
//!
//! Clusters listen on `127.a.b.c` of the root namespace. A new namespace has
//! its own loopback, so inside it 127/8 is re-routed: only `127.0.0.1`
//! stays local, the rest goes over the veth to the root namespace, which
//! accepts loopback destinations from outside thanks to `route_localnet`
//! (and `rp_filter=0`, since such packets look spoofed). A partition is an
//! nftables drop rule on the namespace's output hook: silent, so the
//! process inside sees timeouts rather than refused connections, as with a
//! real network failure.

use super::run;
use crate::{io_err, Error, Result};
use std::process::Command;

/// Namespace names are `ferry-ns<slot>`; slot k owns 10.200.0.0/16's k-th /30.
const PREFIX: &str = "ferry-ns";
const SLOTS: u32 = 16_384;
/// The nftables table holding a namespace's partition rules.
const NFT_TABLE: &str = "ferryfault";

/// A network namespace with a veth link to the root namespace. Dropping it
/// kills what still runs inside, deletes the link and the namespace.
#[derive(Debug)]
pub struct NetNs {
    slot: u32,
    owned: bool,
}

impl NetNs {
    /// Creates a namespace with a free name and subnet (parallel tests and
    /// processes do not collide: `ip netns add` of an existing name fails,
    /// and the next slot is tried).
    pub fn create() -> Result<NetNs> {
        enable_localnet_root()?;
        let seed = std::process::id().wrapping_mul(2_654_435_761)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
        let mut last = String::from("no slot tried");
        for i in 0..64u32 {
            let slot = seed.wrapping_add(i.wrapping_mul(7919)) % SLOTS;
            let name = name_of(slot);
            if std::path::Path::new("/run/netns").join(&name).exists() {
                continue;
            }
            if let Err(e) = run("ip", &["netns", "add", &name]) {
                last = e.to_string();
                continue;
            }
            let ns = NetNs { slot, owned: true };
            match ns.wire() {
                Ok(()) => return Ok(ns),
                // Drop removes the half-made namespace.
                Err(e) => last = e.to_string(),
            }
        }
        Err(Error::Fault(format!(
            "no network namespace could be set up: {last}"
        )))
    }

    /// A handle on an existing namespace made by [`NetNs::create`] (e.g.
    /// by `ferry-testkit netns up`); it does not remove it on drop.
    pub fn attach(name: &str) -> Result<NetNs> {
        let slot = name
            .strip_prefix(PREFIX)
            .and_then(|k| k.parse::<u32>().ok())
            .filter(|k| *k < SLOTS)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "'{name}' is not a namespace of the kit ({PREFIX}<n>)"
                ))
            })?;
        if !std::path::Path::new("/run/netns").join(name).exists() {
            return Err(Error::Invalid(format!("no network namespace '{name}'")));
        }
        Ok(NetNs { slot, owned: false })
    }

    /// Names of the kit's namespaces that exist now.
    pub fn list_names() -> Vec<String> {
        let Ok(entries) = std::fs::read_dir("/run/netns") else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(PREFIX))
            .collect();
        names.sort();
        names
    }

    /// The namespace's name (for `ip netns exec`).
    pub fn name(&self) -> String {
        name_of(self.slot)
    }

    /// The root namespace's end of the link.
    pub fn host_addr(&self) -> std::net::Ipv4Addr {
        self.addr(1)
    }

    /// The namespace's own address (what its processes connect from, and
    /// where a listener inside on 0.0.0.0 is reachable from the root).
    pub fn addr_inside(&self) -> std::net::Ipv4Addr {
        self.addr(2)
    }

    /// A command that runs `program` inside the namespace. `ip netns exec`
    /// execs the program, so the child's pid is the program's.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name()]).arg(program);
        cmd
    }

    /// Drops every packet from the namespace to `cidr` (e.g. a cluster's
    /// `127.a.b.0/24`) until [`NetNs::heal`]. Cumulative.
    pub fn partition(&self, cidr: &str) -> Result<()> {
        let net: ipnet_check::Cidr = cidr.parse()?;
        let script = format!(
            "add table inet {NFT_TABLE}\n\
             add chain inet {NFT_TABLE} out {{ type filter hook output priority 0; policy accept; }}\n\
             add rule inet {NFT_TABLE} out ip daddr {net} drop\n"
        );
        self.nft(&script)
    }

    /// Removes every partition rule.
    pub fn heal(&self) -> Result<()> {
        // Adding first makes the delete succeed when nothing was partitioned.
        self.nft(&format!(
            "add table inet {NFT_TABLE}\ndelete table inet {NFT_TABLE}\n"
        ))
    }

    /// Pids of the processes running inside the namespace.
    pub fn pids(&self) -> Vec<u32> {
        run("ip", &["netns", "pids", &self.name()])
            .map(|out| {
                out.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Leaves the namespace in place past this handle.
    pub fn detach(mut self) -> String {
        self.owned = false;
        self.name()
    }

    /// Kills what runs inside, removes the link and the namespace.
    pub fn destroy(mut self) -> Result<()> {
        self.owned = false;
        self.teardown()
    }

    fn teardown(&self) -> Result<()> {
        for pid in self.pids() {
            let _ = crate::process::signal(pid, libc::SIGKILL);
        }
        // The veth dies with the namespace, but only once no process holds
        // the namespace any more; deleting it directly does not wait.
        let _ = run("ip", &["link", "del", &self.veth_host()]);
        run("ip", &["netns", "del", &self.name()]).map(|_| ())
    }

    fn nft(&self, script: &str) -> Result<()> {
        super::run_with_input(
            "ip",
            &["netns", "exec", &self.name(), "nft", "-f", "-"],
            Some(script),
        )
        .map(|_| ())
    }

    fn addr(&self, host: u32) -> std::net::Ipv4Addr {
        let base = (10u32 << 24) | (200 << 16) | (self.slot * 4);
        std::net::Ipv4Addr::from(base + host)
    }

    fn veth_host(&self) -> String {
        format!("fv{}h", self.slot)
    }

    fn veth_inside(&self) -> String {
        format!("fv{}n", self.slot)
    }

    /// Links, addresses, loopback routing and sysctls.
    fn wire(&self) -> Result<()> {
        let name = self.name();
        let (vh, vn) = (self.veth_host(), self.veth_inside());
        let (host, inside) = (self.host_addr(), self.addr_inside());
        // A veth left by a killed test in the same slot.
        let _ = run("ip", &["link", "del", &vh]);
        run(
            "ip",
            &["link", "add", &vh, "type", "veth", "peer", "name", &vn],
        )?;
        run("ip", &["link", "set", &vn, "netns", &name])?;
        run("ip", &["addr", "add", &format!("{host}/30"), "dev", &vh])?;
        set_sysctl_root(&format!("net/ipv4/conf/{vh}/route_localnet"), "1")?;
        set_sysctl_root(&format!("net/ipv4/conf/{vh}/rp_filter"), "0")?;
        run("ip", &["link", "set", &vh, "up"])?;
        let inside_cmds: [&[&str]; 6] = [
            &["addr", "add", &format!("{inside}/30"), "dev", &vn],
            &["link", "set", &vn, "up"],
            &["link", "set", "lo", "up"],
            &["route", "del", "127.0.0.0/8", "dev", "lo", "table", "local"],
            &[
                "route",
                "replace",
                "local",
                "127.0.0.1/32",
                "dev",
                "lo",
                "table",
                "local",
            ],
            &[
                "route",
                "add",
                "127.0.0.0/8",
                "via",
                &host.to_string(),
                "src",
                &inside.to_string(),
            ],
        ];
        // Sysctls inside: a shell is the one tool sure to be there.
        let sysctl = format!(
            "for f in all {vn}; do echo 1 > /proc/sys/net/ipv4/conf/$f/route_localnet; \
             echo 0 > /proc/sys/net/ipv4/conf/$f/rp_filter; done"
        );
        run("ip", &["netns", "exec", &name, "sh", "-c", &sysctl])?;
        for args in inside_cmds {
            let mut full = vec!["-n", name.as_str()];
            full.extend_from_slice(args);
            run("ip", &full)?;
        }
        Ok(())
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if let Err(e) = self.teardown() {
            eprintln!("ferry-testkit: removing namespace {}: {e}", self.name());
        }
    }
}

fn name_of(slot: u32) -> String {
    format!("{PREFIX}{slot}")
}

/// The root namespace accepts 127/8 destinations arriving over a veth
/// (global settings: rp_filter's effective value is the max of `all` and
/// the interface's).
fn enable_localnet_root() -> Result<()> {
    set_sysctl_root("net/ipv4/conf/all/route_localnet", "1")?;
    set_sysctl_root("net/ipv4/conf/all/rp_filter", "0")
}

fn set_sysctl_root(key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{key}");
    std::fs::write(&path, value).map_err(io_err(format!("setting {path} to {value}")))
}

/// Checks a CIDR before it reaches nft, so a typo is an error naming it.
mod ipnet_check {
    use crate::Error;
    use std::fmt;
    use std::net::Ipv4Addr;

    pub struct Cidr(Ipv4Addr, u8);

    impl std::str::FromStr for Cidr {
        type Err = Error;
        fn from_str(s: &str) -> Result<Self, Error> {
            let bad = || Error::Invalid(format!("'{s}' is not an IPv4 CIDR like 127.1.2.0/24"));
            let (ip, len) = s.split_once('/').unwrap_or((s, "32"));
            let ip: Ipv4Addr = ip.parse().map_err(|_| bad())?;
            let len: u8 = len.parse().ok().filter(|l| *l <= 32).ok_or_else(bad)?;
            Ok(Cidr(ip, len))
        }
    }

    impl fmt::Display for Cidr {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}/{}", self.0, self.1)
        }
    }
}
