//! `ferry-testkit kube …`: a real Kubernetes API server with its etcd on
//! loopback, for Kubernetes HA by hand and in scripts.

use clap::Subcommand;
use ferry_testkit::kube::{self, Identity};
use ferry_testkit::KubeServer;
use std::process::ExitCode;

#[derive(Subcommand)]
pub(crate) enum KubeCommand {
    /// Build etcd and kube-apiserver with `go build` once (cached in
    /// ~/.cache/ferry/kube-<version>).
    Install,
    /// Start etcd and an API server in the background; print shell
    /// assignments `KUBECONFIG=…` (the `ferry` identity; use with `eval`).
    Up {
        /// Server name ([A-Za-z0-9_-], unique among running servers).
        #[arg(long, default_value = "kube")]
        name: String,
    },
    /// Print a server's assignments again (and whether it runs).
    Status {
        /// Server name.
        #[arg(long, default_value = "kube")]
        name: String,
    },
    /// Kill the API server (etcd keeps the objects): an outage.
    Stop {
        /// Server name.
        #[arg(long, default_value = "kube")]
        name: String,
    },
    /// Start a stopped API server (and etcd) again on the same port.
    Start {
        /// Server name.
        #[arg(long, default_value = "kube")]
        name: String,
    },
    /// Stop a server and remove its data.
    Down {
        /// Server name.
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Every server started with `kube up`.
        #[arg(long)]
        all: bool,
    },
}

/// `kube install|up|status|stop|start|down`.
pub(crate) fn kube(command: KubeCommand) -> ferry_testkit::Result<ExitCode> {
    let print = |server: &KubeServer| {
        let info = server.info();
        println!("FERRY_KUBE_NAME={}", info.name);
        println!("FERRY_KUBE_SERVER={}", info.server_url());
        println!("FERRY_KUBE_NAMESPACE={}", kube::NAMESPACE);
        println!(
            "FERRY_KUBE_ADMIN_KUBECONFIG={}",
            server.kubeconfig(Identity::Admin).display()
        );
        println!(
            "KUBECONFIG={}",
            server.kubeconfig(Identity::Ferry).display()
        );
    };
    match command {
        KubeCommand::Install => {
            let (dir, built) = kube::install()?;
            let what = if built { "built" } else { "cached" };
            println!("{} ({what})", dir.display());
        }
        KubeCommand::Up { name } => {
            let server = KubeServer::start_detached(&name)?;
            print(&server);
            server.detach();
        }
        KubeCommand::Status { name } => {
            let server = KubeServer::attach(&name)?;
            print(&server);
            println!("FERRY_KUBE_RUNNING={}", server.is_running());
        }
        KubeCommand::Stop { name } => KubeServer::attach(&name)?.stop_api()?,
        KubeCommand::Start { name } => {
            let server = KubeServer::attach(&name)?;
            server.restart()?;
            server.detach();
        }
        KubeCommand::Down { name, all } => {
            let names = if all {
                KubeServer::list_names()
            } else {
                name.into_iter().collect()
            };
            for name in names {
                let server = KubeServer::attach(&name)?;
                // A test's own server dies with the test.
                if all && !server.info().detached && server.is_running() {
                    println!("{name} skipped: owned by a running test");
                    continue;
                }
                server.destroy()?;
                println!("{name} down");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
