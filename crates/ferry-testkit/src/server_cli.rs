//! `ferry-testkit s3|kafka|zookeeper|kdc|kube …`: the kit's servers by
//! name. Each prints shell assignments (`FERRY_<KIND>_…=…`, for `eval`)
//! and shares `status`, `stop` (an outage: port and data kept), `start`
//! (the same port and data again) and `down` through [`Managed`].

use clap::Subcommand;
use ferry_testkit::kube::{self, Identity};
use ferry_testkit::{KafkaBroker, Kdc, KubeServer, S3Server, ZooKeeperServer};
use std::process::ExitCode;
use std::time::Duration;

type Result<T> = ferry_testkit::Result<T>;

/// A server the CLI manages by name.
pub(crate) trait Managed: Sized {
    /// The prefix of its assignments (`FERRY_KAFKA`).
    const PREFIX: &'static str;
    fn attach(name: &str) -> Result<Self>;
    fn names() -> Vec<String>;
    /// Its assignments (full names), in the order they print.
    fn assignments(&self) -> Vec<(String, String)>;
    fn running(&self) -> bool;
    /// Started by a test (it dies with the test), not by `up`.
    fn test_owned(&self) -> bool;
    /// Kills the server process; port and data are kept.
    fn kill(self) -> Result<()>;
    /// Starts a stopped server again and leaves it running.
    fn start_again(self) -> Result<()>;
    fn destroy(self) -> Result<()>;
}

fn print<S: Managed>(server: &S) {
    for (key, value) in server.assignments() {
        println!("{key}={value}");
    }
}

fn status<S: Managed>(name: &str) -> Result<()> {
    let server = S::attach(name)?;
    print(&server);
    println!("{}_RUNNING={}", S::PREFIX, server.running());
    Ok(())
}

fn down<S: Managed>(name: Option<String>, all: bool) -> Result<()> {
    let names = if all {
        S::names()
    } else {
        name.into_iter().collect()
    };
    for name in names {
        let server = S::attach(&name)?;
        // A test's own server dies with the test.
        if all && server.test_owned() && server.running() {
            println!("{name} skipped: owned by a running test");
            continue;
        }
        server.destroy()?;
        println!("{name} down");
    }
    Ok(())
}

/// The commands every server shares.
#[derive(Subcommand)]
pub(crate) enum Common {
    /// Print a server's assignments again (and whether it runs).
    Status {
        /// Server name.
        #[arg(long)]
        name: String,
    },
    /// Kill the server process (an outage); ports and data are kept.
    Stop {
        /// Server name.
        #[arg(long)]
        name: String,
    },
    /// Start a stopped server again on the same ports with the same data.
    Start {
        /// Server name.
        #[arg(long)]
        name: String,
    },
    /// Stop a server and remove its data.
    Down {
        /// Server name.
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Every server of this kind started with `up`.
        #[arg(long)]
        all: bool,
    },
}

fn common<S: Managed>(command: Common) -> Result<ExitCode> {
    match command {
        Common::Status { name } => status::<S>(&name)?,
        Common::Stop { name } => S::attach(&name)?.kill()?,
        Common::Start { name } => S::attach(&name)?.start_again()?,
        Common::Down { name, all } => down::<S>(name, all)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `kafka …` and `zookeeper …`: `up` and the common commands.
#[derive(Subcommand)]
pub(crate) enum ServerCommand {
    /// Start a server in the background; print shell assignments
    /// (`FERRY_KAFKA_BOOTSTRAP=…`, `FERRY_ZOOKEEPER_QUORUM=…`; use with `eval`).
    Up {
        /// Server name ([A-Za-z0-9_-], unique among running servers).
        #[arg(long)]
        name: String,
        /// ZooKeeper only: require Kerberos (SASL GSSAPI) of every client,
        /// with a principal of this KDC (`ferry-testkit kdc up`).
        #[arg(long)]
        kdc: Option<String>,
    },
    #[command(flatten)]
    Common(Common),
}

/// `kafka up|status|stop|start|down`.
pub(crate) fn kafka(command: ServerCommand) -> Result<ExitCode> {
    match command {
        ServerCommand::Up { kdc: Some(_), .. } => Err(ferry_testkit::Error::Invalid(
            "--kdc is for `zookeeper up`; a Kerberized Kafka broker is not in the kit".into(),
        )),
        ServerCommand::Up { name, kdc: None } => {
            up(KafkaBroker::start_detached(&name)?, KafkaBroker::detach)
        }
        ServerCommand::Common(c) => common::<KafkaBroker>(c),
    }
}

/// `zookeeper up [--kdc]|status|stop|start|down`.
pub(crate) fn zookeeper(command: ServerCommand) -> Result<ExitCode> {
    match command {
        ServerCommand::Up { name, kdc } => {
            let server = match kdc {
                Some(kdc) => ZooKeeperServer::start_kerberized(&name, &Kdc::attach(&kdc)?, true)?,
                None => ZooKeeperServer::start_detached(&name)?,
            };
            up(server, ZooKeeperServer::detach)
        }
        ServerCommand::Common(c) => common::<ZooKeeperServer>(c),
    }
}

/// Prints a server just started and leaves it running.
fn up<S: Managed, I>(server: S, detach: impl FnOnce(S) -> I) -> Result<ExitCode> {
    print(&server);
    detach(server);
    Ok(ExitCode::SUCCESS)
}

#[derive(Subcommand)]
pub(crate) enum S3Command {
    /// Start a server in the background; print shell assignments
    /// `FERRY_S3_ENDPOINT=…`, `FERRY_S3_ACCESS_KEY=…`, `FERRY_S3_SECRET_KEY=…`
    /// (use with `eval`).
    Up {
        /// Server name ([A-Za-z0-9_-], unique among running servers).
        #[arg(long)]
        name: String,
        /// Create this bucket (repeatable).
        #[arg(long)]
        bucket: Vec<String>,
    },
    /// Create a bucket on a running server.
    Bucket {
        /// Server name.
        #[arg(long)]
        name: String,
        /// Bucket name ([a-z0-9.-], 3-63 characters).
        bucket: String,
    },
    #[command(flatten)]
    Common(Common),
}

/// `s3 up|bucket|status|stop|start|down`.
pub(crate) fn s3(command: S3Command) -> Result<ExitCode> {
    match command {
        S3Command::Up { name, bucket } => {
            for b in &bucket {
                ferry_testkit::s3::validate_bucket(b)?;
            }
            let server = S3Server::start_detached(&name)?;
            for b in &bucket {
                server.create_bucket(b)?;
            }
            up(server, S3Server::detach)
        }
        S3Command::Bucket { name, bucket } => {
            S3Server::attach(&name)?.create_bucket(&bucket)?;
            Ok(ExitCode::SUCCESS)
        }
        S3Command::Common(c) => common::<S3Server>(c),
    }
}

#[derive(Subcommand)]
pub(crate) enum KdcCommand {
    /// Start a KDC in the background; print shell assignments
    /// `FERRY_KDC_KRB5_CONFIG=…`, `FERRY_KDC_REALM=…` (use with `eval`).
    Up {
        /// KDC name ([A-Za-z0-9_-], unique among running KDCs).
        #[arg(long, default_value = "kdc")]
        name: String,
        /// Realm ([A-Z0-9.-]).
        #[arg(long, default_value = ferry_testkit::kdc::DEFAULT_REALM)]
        realm: String,
        /// Longest ticket, in seconds (at least 60).
        #[arg(long, default_value_t = 24 * 3600)]
        ticket_lifetime: u64,
        /// Longest renewal, in seconds (at least the ticket lifetime).
        #[arg(long, default_value_t = 7 * 24 * 3600)]
        renew_lifetime: u64,
        /// Run the KDC's clock this many seconds off (libfaketime); beyond
        /// 300, clients get "Clock skew too great".
        #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
        clock_offset: i64,
    },
    /// Create a principal (idempotent) and print its keytab's path.
    AddPrincipal {
        /// KDC name.
        #[arg(long, default_value = "kdc")]
        name: String,
        /// Principal, `primary[/instance][@REALM]`, e.g. ferry-source.
        principal: String,
    },
    #[command(flatten)]
    Common(Common),
}

/// `kdc up|add-principal|status|stop|start|down`.
pub(crate) fn kdc(command: KdcCommand) -> Result<ExitCode> {
    match command {
        KdcCommand::Up {
            name,
            realm,
            ticket_lifetime,
            renew_lifetime,
            clock_offset,
        } => {
            let kdc = Kdc::builder()
                .name(name)
                .realm(realm)
                .ticket_lifetime(Duration::from_secs(ticket_lifetime))
                .renew_lifetime(Duration::from_secs(renew_lifetime))
                .clock_offset(clock_offset)
                .detached(true)
                .start()?;
            up(kdc, Kdc::detach)
        }
        KdcCommand::AddPrincipal { name, principal } => {
            let keytab = Kdc::attach(&name)?.add_principal(&principal)?;
            println!("{}", keytab.display());
            Ok(ExitCode::SUCCESS)
        }
        KdcCommand::Common(c) => common::<Kdc>(c),
    }
}

#[derive(Subcommand)]
pub(crate) enum KubeCommand {
    /// Build etcd and kube-apiserver with `go build` once (cached in
    /// ~/.cache/ferry/kube-<version>).
    Install,
    /// Start etcd and an API server in the background; print shell
    /// assignments `KUBECONFIG=…` (the `ferry` identity; use with `eval`).
    /// `stop` kills the API server only (etcd keeps the objects).
    Up {
        /// Server name ([A-Za-z0-9_-], unique among running servers).
        #[arg(long)]
        name: String,
    },
    #[command(flatten)]
    Common(Common),
}

/// `kube install|up|status|stop|start|down`.
pub(crate) fn kube(command: KubeCommand) -> Result<ExitCode> {
    match command {
        KubeCommand::Install => {
            let (dir, built) = kube::install()?;
            let what = if built { "built" } else { "cached" };
            println!("{} ({what})", dir.display());
            Ok(ExitCode::SUCCESS)
        }
        KubeCommand::Up { name } => up(KubeServer::start_detached(&name)?, KubeServer::detach),
        KubeCommand::Common(c) => common::<KubeServer>(c),
    }
}

/// A server whose process is killed with `stop` and started again with
/// `$restart`: everything of [`Managed`] but its assignments.
macro_rules! managed {
    ($server:ty, $prefix:literal, $restart:ident, |$s:ident| $assignments:block) => {
        impl Managed for $server {
            const PREFIX: &'static str = $prefix;
            fn attach(name: &str) -> Result<Self> {
                <$server>::attach(name)
            }
            fn names() -> Vec<String> {
                <$server>::list_names()
            }
            fn assignments(&self) -> Vec<(String, String)> {
                let $s = self;
                $assignments
            }
            fn running(&self) -> bool {
                self.is_running()
            }
            fn test_owned(&self) -> bool {
                !self.info().detached
            }
            fn kill(mut self) -> Result<()> {
                self.stop()
            }
            fn start_again(mut self) -> Result<()> {
                <$server>::$restart(&mut self)?;
                self.detach();
                Ok(())
            }
            fn destroy(self) -> Result<()> {
                <$server>::destroy(self)
            }
        }
    };
}

managed!(S3Server, "FERRY_S3", restart, |s| {
    let info = s.info();
    assignments(
        "FERRY_S3",
        [
            ("NAME", info.name.clone()),
            ("ENDPOINT", info.endpoint()),
            ("ACCESS_KEY", info.access_key.clone()),
            ("SECRET_KEY", info.secret_key.clone()),
            ("DATA", info.data_dir().display().to_string()),
        ],
    )
});

managed!(KafkaBroker, "FERRY_KAFKA", restart, |s| {
    let info = s.info();
    assignments(
        "FERRY_KAFKA",
        [("NAME", info.name.clone()), ("BOOTSTRAP", info.bootstrap())],
    )
});

managed!(ZooKeeperServer, "FERRY_ZOOKEEPER", restart, |s| {
    let info = s.info();
    let mut out = assignments(
        "FERRY_ZOOKEEPER",
        [
            ("NAME", info.name.clone()),
            ("QUORUM", info.connect_string()),
        ],
    );
    if let Some(kerberos) = &info.kerberos {
        out.push((
            format!("{}_PRINCIPAL", "FERRY_ZOOKEEPER"),
            kerberos.principal.clone(),
        ));
    }
    out
});

managed!(Kdc, "FERRY_KDC", start_again, |s| {
    let info = s.info();
    assignments(
        "FERRY_KDC",
        [
            ("NAME", info.name.clone()),
            ("REALM", info.realm.clone()),
            ("KRB5_CONFIG", info.krb5_conf().display().to_string()),
            ("ADDRESS", info.address()),
            ("KEYTABS", info.keytab_dir().display().to_string()),
        ],
    )
});

impl Managed for KubeServer {
    const PREFIX: &'static str = "FERRY_KUBE";
    fn attach(name: &str) -> Result<Self> {
        KubeServer::attach(name)
    }
    fn names() -> Vec<String> {
        KubeServer::list_names()
    }
    fn assignments(&self) -> Vec<(String, String)> {
        let info = self.info();
        let mut out = assignments(
            Self::PREFIX,
            [
                ("NAME", info.name.clone()),
                ("SERVER", info.server_url()),
                ("NAMESPACE", kube::NAMESPACE.to_string()),
                (
                    "ADMIN_KUBECONFIG",
                    self.kubeconfig(Identity::Admin).display().to_string(),
                ),
            ],
        );
        out.push((
            "KUBECONFIG".into(),
            self.kubeconfig(Identity::Ferry).display().to_string(),
        ));
        out
    }
    fn running(&self) -> bool {
        self.is_running()
    }
    fn test_owned(&self) -> bool {
        !self.info().detached
    }
    /// The API server only: etcd keeps the objects.
    fn kill(self) -> Result<()> {
        self.stop_api()
    }
    fn start_again(self) -> Result<()> {
        self.restart()?;
        self.detach();
        Ok(())
    }
    fn destroy(self) -> Result<()> {
        KubeServer::destroy(self)
    }
}

fn assignments<const N: usize>(prefix: &str, pairs: [(&str, String); N]) -> Vec<(String, String)> {
    pairs
        .into_iter()
        .map(|(key, value)| (format!("{prefix}_{key}"), value))
        .collect()
}
