//! The `ferry` command line as clap types: the verbs and the flags of the
//! client verbs. The verbs that take `ferry run`'s keys parse their own
//! arguments (`run_args`, `failover::parse`, ...).

use super::usage_error;
use crate::client::{Rest, RestClientOptions};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// `ferry` and its verbs.
#[derive(Parser)]
#[command(
    name = "ferry",
    version,
    about = "Continuous replication and disaster recovery for Apache Kudu"
)]
pub struct Cli {
    #[command(subcommand)]
    /// The verb.
    pub command: Command,
}

/// `--jobmanager` and the REST API's security keys, shared by the client
/// verbs.
#[derive(clap::Args, Debug)]
pub struct Target {
    /// Address of the ferry process's REST API (https://HOST:PORT for TLS).
    #[arg(
        short = 'm',
        long = "jobmanager",
        default_value = "127.0.0.1:8081",
        env = "FERRY_JOBMANAGER"
    )]
    pub jobmanager: String,
    /// A secured REST API, with the server's key names:
    /// security.ssl.rest.truststore=CA.pem, security.ssl.rest.keystore=CLIENT.pem
    /// (+ security.ssl.rest.private-key=KEY.pem), security.rest.token-file=FILE,
    /// security.ssl.rest.enabled=true; each also as FERRY_SECURITY_SSL_REST_TRUSTSTORE …
    /// (see docs/security.md).
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub security: Vec<String>,
}

impl Target {
    /// The REST client; a bad option or file is a usage error (exit 2).
    pub fn rest(&self, verb: &str) -> Result<Rest, ExitCode> {
        RestClientOptions::from_dynamic(&self.security)
            .and_then(|o| Rest::new(&self.jobmanager, &o))
            .map_err(|e| usage_error(&e, &format!("ferry {verb} --help")))
    }
}

/// `ferry throttle`'s limits: each given one replaces the job's (or with
/// `--table`, the table's own); byte rates take units (64mb).
#[derive(clap::Args, Debug, Default)]
pub struct ThrottleFlags {
    /// Change this table's own limits (applied on top of the job's).
    #[arg(long)]
    pub table: Option<String>,
    /// Rows/s read in snapshot windows.
    #[arg(long)]
    pub read_snapshot_rows: Option<u64>,
    /// Bytes/s read in snapshot windows.
    #[arg(long, value_parser = parse_size)]
    pub read_snapshot_bytes: Option<u64>,
    /// Rows/s read in diff windows.
    #[arg(long)]
    pub read_diff_rows: Option<u64>,
    /// Bytes/s read in diff windows.
    #[arg(long, value_parser = parse_size)]
    pub read_diff_bytes: Option<u64>,
    /// Rows/s written in snapshot windows.
    #[arg(long)]
    pub write_snapshot_rows: Option<u64>,
    /// Bytes/s written in snapshot windows.
    #[arg(long, value_parser = parse_size)]
    pub write_snapshot_bytes: Option<u64>,
    /// Rows/s written in diff windows.
    #[arg(long)]
    pub write_diff_rows: Option<u64>,
    /// Bytes/s written in diff windows.
    #[arg(long, value_parser = parse_size)]
    pub write_diff_bytes: Option<u64>,
}

fn parse_size(text: &str) -> Result<u64, String> {
    ferry_engine::config::values::size_or_zero(text).map_err(|e| e.to_string())
}

impl ThrottleFlags {
    /// The change the flags ask for; `None` when they give no limit (then
    /// the limits are only shown).
    pub fn request(&self) -> Option<crate::api::throttle::ThrottleRequest> {
        use ferry_engine::throttle::{LimitsUpdate, RateUpdate, WindowUpdate};
        let rate = |rows, bytes| RateUpdate {
            rows_per_second: rows,
            bytes_per_second: bytes,
        };
        let update = LimitsUpdate {
            read: WindowUpdate {
                snapshot: rate(self.read_snapshot_rows, self.read_snapshot_bytes),
                diff: rate(self.read_diff_rows, self.read_diff_bytes),
            },
            write: WindowUpdate {
                snapshot: rate(self.write_snapshot_rows, self.write_snapshot_bytes),
                diff: rate(self.write_diff_rows, self.write_diff_bytes),
            },
        };
        (update != LimitsUpdate::default()).then(|| crate::api::throttle::ThrottleRequest {
            table: self.table.clone(),
            update,
        })
    }
}

/// The verbs.
// A doc comment on a clap field is its --help text: the fields are
// documented there (and by the verbs that parse their own arguments).
#[allow(missing_docs)]
#[derive(Subcommand)]
pub enum Command {
    /// Run a replication job (see `ferry run --help` for every key).
    #[command(disable_help_flag = true)]
    Run {
        /// `--job.* / --reader.* / --writer.*` keys and process flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Start a session-mode process that runs jobs submitted with
    /// `ferry run --jobmanager HOST:PORT` (options: --rest.address,
    /// --rest.port, --metrics.address, --metrics.port, -Dkey=value,
    /// --config FILE).
    #[command(disable_help_flag = true)]
    Server {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// List jobs (running and scheduled by default), like `flink list`.
    List {
        #[command(flatten)]
        target: Target,
        /// Show only running jobs.
        #[arg(short = 'r', long)]
        running: bool,
        /// Show only scheduled jobs.
        #[arg(short = 's', long)]
        scheduled: bool,
        /// Show all jobs, including finished ones.
        #[arg(short = 'a', long)]
        all: bool,
    },
    /// Trigger a savepoint, like `flink savepoint JOB_ID [DIR]`.
    Savepoint {
        #[command(flatten)]
        target: Target,
        /// Return after triggering; print the trigger id.
        #[arg(short = 'd', long)]
        detached: bool,
        job_id: String,
        /// Target directory (default: the job's --savepointPath).
        dir: Option<String>,
    },
    /// Stop a job with a savepoint, like `flink stop --savepointPath DIR JOB_ID`.
    Stop {
        #[command(flatten)]
        target: Target,
        /// Savepoint directory (default: the job's --savepointPath).
        #[arg(short = 'p', long = "savepointPath", alias = "savepoint-path")]
        savepoint_path: Option<String>,
        /// Finish the open window before stopping (no splits in the savepoint).
        #[arg(short = 'd', long)]
        drain: bool,
        /// Wait until source writes stopped, one more window completed, split
        /// counts are 0 and sink writes stopped, then stop.
        #[arg(long = "drain-check")]
        drain_check: bool,
        /// Give up the drain check after this many seconds.
        #[arg(long = "drain-timeout", default_value_t = 300)]
        drain_timeout: u64,
        /// A table counts as quiet when its write counters did not move for
        /// this many seconds.
        #[arg(long = "quiet-period", default_value_t = 5.0)]
        quiet_period: f64,
        job_id: String,
    },
    /// Cancel a job (its retained checkpoints stay), like `flink cancel`.
    Cancel {
        #[command(flatten)]
        target: Target,
        job_id: String,
    },
    /// Take a checkpoint now, like `flink checkpoint JOB_ID`.
    Checkpoint {
        #[command(flatten)]
        target: Target,
        /// Accepted for compatibility (ferry checkpoints are always full).
        #[arg(long)]
        full: bool,
        job_id: String,
    },
    /// Show a running job's limits on rows/s and bytes/s, or change them
    /// live (0: unlimited): `ferry throttle JOB_ID --read-snapshot-rows 1000`.
    Throttle {
        #[command(flatten)]
        target: Target,
        job_id: String,
        #[command(flatten)]
        limits: ThrottleFlags,
    },
    /// Checkpoint and savepoint storage tools (`ferry state mirror SRC DST`).
    State {
        #[command(subcommand)]
        command: super::state::StateCommand,
    },
    /// Find the newest complete, valid savepoint or checkpoint of a job and
    /// start the job from it (see `ferry failover --help`).
    #[command(disable_help_flag = true)]
    Failover {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Watch a job's lease and take the job over when it lapses (see
    /// `ferry standby --help`).
    #[command(disable_help_flag = true)]
    Standby {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Prove a job's sink table equal to its source table, each read at one
    /// hybrid time, or list what differs (see `ferry verify --help`).
    #[command(disable_help_flag = true)]
    Verify {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Planned cutover: drain check, stop with a savepoint, verify at the
    /// final window end, report (RPO) and the reverse job (see `ferry
    /// cutover --help`).
    #[command(disable_help_flag = true)]
    Cutover {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Bring the old source back after an unplanned failover without a
    /// re-copy: salvage its unreplicated writes, rewind it, prepare the
    /// reverse job (see `ferry failback --help`).
    #[command(disable_help_flag = true)]
    Failback {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Prove the DR setup works without stopping replication: RPO per
    /// table, a verify at a consistent cut, the DR store's freshness and a
    /// dry-run restore, the lease, measured failover steps (see `ferry
    /// drill --help`).
    #[command(disable_help_flag = true)]
    Drill {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The demo's source workload (used by scripts/demo).
    #[command(hide = true)]
    DemoWriter(super::demo_writer::DemoWriterArgs),
}
