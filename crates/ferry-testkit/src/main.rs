//! `ferry-testkit`: real Kudu clusters on loopback for humans, demos and
//! scripts.
//!
//! ```text
//! ferry-testkit up --name demo --tservers 3     # prints "demo 127.a.b.1:7051"
//! ferry-testkit status demo
//! ferry-testkit kudu -- table list 127.a.b.1:7051
//! ferry-testkit down demo | ferry-testkit down --all
//! ferry-testkit up --name new --kudu-version 1.18.1  # default 1.17.1
//! ferry-testkit install                         # fetch the Kudu binaries (1.17.1, 1.18.1) once
//! ferry-testkit netns up                        # prints "ferry-nsN 10.200.x.y"
//! ip netns exec ferry-nsN ferry run ...         # clusters stay reachable inside
//! ferry-testkit netns partition ferry-nsN 127.a.b.0/24 | heal ferry-nsN
//! ferry-testkit netns down ferry-nsN | ferry-testkit netns down --all
//! eval "$(ferry-testkit s3 up --name dr --bucket state)"  # FERRY_S3_ENDPOINT=... lines
//! ferry-testkit s3 bucket --name dr other-bucket
//! ferry-testkit s3 stop --name dr | ferry-testkit s3 start --name dr  # same port, same data
//! ferry-testkit s3 down --name dr | ferry-testkit s3 down --all
//! eval "$(ferry-testkit kafka up --name events)"  # FERRY_KAFKA_BOOTSTRAP=127.0.0.1:<port>
//! ferry-testkit kafka down --name events | ferry-testkit kafka down --all
//! eval "$(ferry-testkit zookeeper up --name ha)"  # FERRY_ZOOKEEPER_QUORUM=127.0.0.1:<port>
//! ferry-testkit zookeeper stop --name ha | ferry-testkit zookeeper start --name ha  # same port, same data
//! ferry-testkit zookeeper down --name ha | ferry-testkit zookeeper down --all
//! eval "$(ferry-testkit zookeeper up --name kha --kdc krb)"  # SASL (Kerberos) required
//! eval "$(ferry-testkit kdc up --name krb)"       # FERRY_KDC_KRB5_CONFIG=..., FERRY_KDC_REALM=...
//! ferry-testkit kdc add-principal --name krb ferry-source   # prints the keytab's path
//! ferry-testkit up --name secure --kerberos krb   # a cluster requiring Kerberos
//! ferry-testkit kudu --cluster secure -- table list 127.a.b.1:7051  # with the kit's ticket
//! ferry-testkit kdc stop --name krb | ferry-testkit kdc start --name krb  # a KDC outage
//! ferry-testkit kdc down --name krb | ferry-testkit kdc down --all
//! ferry-testkit kube install                      # go build etcd + kube-apiserver once
//! eval "$(ferry-testkit kube up --name ha)"       # KUBECONFIG=... (RBAC identity `ferry`)
//! ferry-testkit kube stop --name ha | ferry-testkit kube start --name ha  # an API server outage
//! ferry-testkit kube down --name ha | ferry-testkit kube down --all
//! ```

mod server_cli;

use clap::{Parser, Subcommand};
use ferry_testkit::binaries::Provenance;
use ferry_testkit::fault::NetNs;
use ferry_testkit::process::alive;
use ferry_testkit::{Kdc, KuduBinaries, KuduVersion, MiniCluster};
use server_cli::{KdcCommand, KubeCommand, S3Command, ServerCommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ferry-testkit",
    version,
    about = "Real Kudu clusters on loopback for tests, demos and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a cluster in the background and print `NAME MASTER_ADDRESSES`.
    Up {
        /// Cluster name ([A-Za-z0-9_-], unique among running clusters).
        #[arg(long)]
        name: String,
        /// Number of masters: 1 or 3.
        #[arg(long, default_value_t = 1, value_parser = parse_masters)]
        masters: usize,
        /// Number of tablet servers.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=200))]
        tservers: u16,
        /// Extra flag for every master (repeatable), e.g. --master-flag=--rpc_encryption=required.
        #[arg(long = "master-flag", allow_hyphen_values = true)]
        master_flags: Vec<String>,
        /// Extra flag for every tablet server (repeatable).
        #[arg(long = "tserver-flag", allow_hyphen_values = true)]
        tserver_flags: Vec<String>,
        /// Require Kerberos (and encryption) on every RPC, with principals
        /// from this running KDC (`ferry-testkit kdc up --name NAME`).
        #[arg(long)]
        kerberos: Option<String>,
        /// The Kudu release to run (1.17.1 or 1.18.1; default 1.17.1, or
        /// FERRY_KUDU_VERSION).
        #[arg(long = "kudu-version", value_parser = parse_version)]
        kudu_version: Option<KuduVersion>,
    },
    /// Show the daemons of one cluster (or of every cluster).
    Status {
        /// Cluster name; all clusters if omitted.
        name: Option<String>,
    },
    /// Stop a cluster (kill its daemons, remove its folder).
    Down {
        /// Cluster name.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Stop every cluster started with `up` (and clear leftovers of
        /// finished tests; clusters of running tests are left alone).
        #[arg(long)]
        all: bool,
    },
    /// Fetch and unpack the Kudu binaries of every release the kit runs
    /// (once; later runs reuse the cache).
    Install {
        /// Only this release.
        #[arg(long = "kudu-version", value_parser = parse_version)]
        kudu_version: Option<KuduVersion>,
    },
    /// Network namespaces for partition experiments (needs root).
    Netns {
        #[command(subcommand)]
        command: NetnsCommand,
    },
    /// A real S3-compatible server (s3s-fs) on loopback, for state on
    /// object stores.
    S3 {
        #[command(subcommand)]
        command: S3Command,
    },
    /// A real Apache Kafka 4.x broker (KRaft, one node) on loopback, for
    /// the Kafka connectors.
    Kafka {
        #[command(subcommand)]
        command: ServerCommand,
    },
    /// A real Apache ZooKeeper 3.9 server (standalone) on loopback, for
    /// ZooKeeper HA.
    #[command(name = "zookeeper")]
    ZooKeeper {
        #[command(subcommand)]
        command: ServerCommand,
    },
    /// A real MIT Kerberos KDC on loopback, for Kerberized clusters.
    Kdc {
        #[command(subcommand)]
        command: KdcCommand,
    },
    /// A real Kubernetes API server with its etcd on loopback, for
    /// Kubernetes HA.
    Kube {
        #[command(subcommand)]
        command: KubeCommand,
    },
    /// Run the bundled `kudu` CLI with the right environment.
    Kudu {
        /// Run as the kit's superuser of this (Kerberized) cluster, with a
        /// fresh ticket.
        #[arg(long)]
        cluster: Option<String>,
        /// Arguments for `kudu`, after `--`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum NetnsCommand {
    /// Create a namespace linked to this one (clusters' 127.a.b.c addresses
    /// reachable inside) and print `NAME ADDRESS_INSIDE`.
    Up,
    /// Drop the namespace's traffic to CIDR (e.g. a cluster's 127.a.b.0/24).
    Partition {
        /// Namespace name (`ferry-ns<n>`).
        name: String,
        /// IPv4 network, e.g. 127.31.7.0/24.
        cidr: String,
    },
    /// Remove every partition of the namespace.
    Heal {
        /// Namespace name.
        name: String,
    },
    /// Remove a namespace (processes inside are killed), or every namespace
    /// of the kit with no process inside.
    Down {
        /// Namespace name.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Every `ferry-ns*` namespace in which nothing runs.
        #[arg(long)]
        all: bool,
    },
}

fn parse_masters(s: &str) -> Result<usize, String> {
    match s {
        "1" => Ok(1),
        "3" => Ok(3),
        other => Err(format!("'{other}' masters: a cluster has 1 or 3 masters")),
    }
}

fn main() -> ExitCode {
    // `ferry-testkit status | head` closes the pipe early: die quietly as
    // shell tools do instead of panicking in println!.
    // SAFETY: resetting a signal disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferry-testkit: {e}");
            // Bad input (a name, a CIDR) is the user's to fix: exit 2.
            match e {
                ferry_testkit::Error::Invalid(_) => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

fn run(command: Command) -> ferry_testkit::Result<ExitCode> {
    match command {
        Command::Up {
            name,
            masters,
            tservers,
            master_flags,
            tserver_flags,
            kerberos,
            kudu_version,
        } => up(
            UpArgs {
                name,
                masters,
                tservers,
                master_flags,
                tserver_flags,
                kerberos,
            },
            kudu_version,
        ),
        Command::Status { name } => status(name),
        Command::Down { name, all } => down(name, all),
        Command::Install { kudu_version } => install(kudu_version),
        Command::Kudu { cluster, args } => kudu(cluster, &args),
        Command::Netns { command } => netns(command),
        Command::S3 { command } => server_cli::s3(command),
        Command::Kafka { command } => server_cli::kafka(command),
        Command::ZooKeeper { command } => server_cli::zookeeper(command),
        Command::Kdc { command } => server_cli::kdc(command),
        Command::Kube { command } => server_cli::kube(command),
    }
}

fn netns(command: NetnsCommand) -> ferry_testkit::Result<ExitCode> {
    match command {
        NetnsCommand::Up => {
            let ns = NetNs::create()?;
            let inside = ns.addr_inside();
            println!("{} {inside}", ns.detach());
        }
        NetnsCommand::Partition { name, cidr } => NetNs::attach(&name)?.partition(&cidr)?,
        NetnsCommand::Heal { name } => NetNs::attach(&name)?.heal()?,
        NetnsCommand::Down { name, all } => {
            let names = if all {
                NetNs::list_names()
            } else {
                name.into_iter().collect()
            };
            for name in names {
                let ns = NetNs::attach(&name)?;
                // A test's namespace has its process inside; leave it be.
                if all && !ns.pids().is_empty() {
                    println!("{name} skipped: processes running inside");
                    continue;
                }
                ns.destroy()?;
                println!("{name} down");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `up`: starts a detached cluster and prints its name and master addresses.
/// `up`'s cluster shape.
struct UpArgs {
    name: String,
    masters: usize,
    tservers: u16,
    master_flags: Vec<String>,
    tserver_flags: Vec<String>,
    kerberos: Option<String>,
}

fn up(args: UpArgs, version: Option<KuduVersion>) -> ferry_testkit::Result<ExitCode> {
    let UpArgs {
        name,
        masters,
        tservers,
        master_flags,
        tserver_flags,
        kerberos,
    } = args;
    let mut builder = MiniCluster::builder()
        .name(name)
        .masters(masters)
        .tservers(usize::from(tservers))
        .detached(true);
    if let Some(v) = version {
        builder = builder.version(v);
    }
    for f in master_flags {
        builder = builder.master_flag(f);
    }
    for f in tserver_flags {
        builder = builder.tserver_flag(f);
    }
    if let Some(kdc_name) = kerberos {
        let kdc = Kdc::attach(&kdc_name)?;
        if !kdc.is_running() {
            return Err(ferry_testkit::Error::Invalid(format!(
                "KDC '{kdc_name}' is not running; `ferry-testkit kdc start --name {kdc_name}` first"
            )));
        }
        builder = builder.kerberos(&kdc);
    }
    let info = builder.start()?.detach();
    println!("{} {}", info.name, info.master_addrs_joined());
    Ok(ExitCode::SUCCESS)
}

/// `status`: each daemon's address and state, and what the leader master sees.
fn status(name: Option<String>) -> ferry_testkit::Result<ExitCode> {
    let names = match name {
        Some(n) => vec![n],
        None => MiniCluster::list_names(),
    };
    for name in names {
        let c = MiniCluster::attach(&name)?;
        let info = c.info();
        println!(
            "{} {} (Kudu {}, {})",
            info.name,
            info.master_addrs_joined(),
            info.version,
            info.root.display()
        );
        for d in info.masters.iter().chain(info.tservers.iter()) {
            let state = match d.pid {
                Some(pid) if alive(pid) => format!("running (pid {pid})"),
                _ => "down".to_string(),
            };
            println!(
                "  {:<10} {:<22} http {:<22} {state}",
                d.id, d.rpc_addr, d.http_addr
            );
        }
        match c.tserver_status() {
            Ok(ts) => {
                let live = ts.iter().filter(|t| t.live).count();
                println!(
                    "  leader master sees {live}/{} tablet servers live",
                    ts.len()
                );
            }
            Err(e) => println!("  leader master unreachable: {e}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `down`: tears down one cluster, or every detached (or dead) one.
fn down(name: Option<String>, all: bool) -> ferry_testkit::Result<ExitCode> {
    let names = if all {
        MiniCluster::list_names()
    } else {
        name.into_iter().collect()
    };
    for name in names {
        let c = MiniCluster::attach(&name)?;
        // A test's own cluster dies with the test; `--all` must not
        // pull it from under a test that is still running.
        if all && !c.info().detached && !c.pids().is_empty() {
            println!("{name} skipped: owned by a running test");
            continue;
        }
        c.destroy()?;
        println!("{name} down");
    }
    Ok(ExitCode::SUCCESS)
}

/// `install`: makes sure the Kudu binaries are present and says where.
fn install(only: Option<KuduVersion>) -> ferry_testkit::Result<ExitCode> {
    let versions = match only {
        Some(v) => vec![v],
        None => KuduVersion::ALL.to_vec(),
    };
    for version in versions {
        let bins = KuduBinaries::ensure_version(version)?;
        let how = match bins.provenance() {
            Provenance::Cached => "cached, not downloaded again",
            Provenance::Installed => "downloaded and installed",
            Provenance::Override => "from FERRY_KUDU_HOME",
        };
        println!(
            "Kudu {version} binaries at {} ({how})",
            bins.prefix().display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_version(s: &str) -> Result<KuduVersion, String> {
    s.parse().map_err(|e: ferry_testkit::Error| e.to_string())
}

/// `kudu`: runs the bundled `kudu` CLI and passes on its exit code; with
/// `--cluster`, as that cluster's kit superuser (Kerberos).
fn kudu(cluster: Option<String>, args: &[String]) -> ferry_testkit::Result<ExitCode> {
    let (env, bins) = match cluster {
        Some(name) => {
            let c = MiniCluster::attach(&name)?;
            (c.kerberos_env()?, KuduBinaries::of(c.version())?)
        }
        None => (Vec::new(), KuduBinaries::get()?),
    };
    let status = bins
        .command()
        .envs(env)
        .args(args)
        .status()
        .map_err(|e| ferry_testkit::Error::Binaries(format!("running kudu: {e}")))?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}
