//! The `ferry` binary: parses the command line ([`ferry::cli::Cli`]) and
//! hands each verb to the library — the client half for the verbs that
//! talk to a running ferry process, `ferry::cli` for those that work in
//! this process — mapping the outcome to a documented exit code (0 ok, 1
//! failure, 2 usage error).

use clap::Parser;
use ferry::cli::{self, Cli, Command};
use ferry::client;
use std::process::ExitCode;
use std::time::Duration;

// Long on purpose: one arm per verb, each only unpacking its flags.
fn main() -> ExitCode {
    cli::pin_mmap_threshold();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(cli::EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Run { args } => cli::run::command(&args),
        Command::Server { args } => cli::server::command(&args),
        Command::List {
            target,
            running,
            scheduled,
            all,
        } => match target.rest("list") {
            Ok(rest) => {
                cli::verb(async move { client::list(&rest, running, scheduled, all).await })
            }
            Err(code) => code,
        },
        Command::Savepoint {
            target,
            detached,
            job_id,
            dir,
        } => match target.rest("savepoint") {
            Ok(rest) => cli::verb(async move {
                client::savepoint(&rest, &job_id, dir.as_deref(), detached).await
            }),
            Err(code) => code,
        },
        Command::Stop {
            target,
            savepoint_path,
            drain,
            drain_check,
            drain_timeout,
            quiet_period,
            job_id,
        } => {
            let rest = match target.rest("stop") {
                Ok(rest) => rest,
                Err(code) => return code,
            };
            cli::verb(async move {
                if drain_check {
                    let opts = client::DrainCheck {
                        timeout: Duration::from_secs(drain_timeout),
                        quiet: Duration::from_secs_f64(quiet_period.max(0.0)),
                    };
                    client::drain_check(&rest, &job_id, savepoint_path.as_deref(), opts).await
                } else {
                    client::stop(&rest, &job_id, savepoint_path.as_deref(), drain).await
                }
            })
        }
        Command::Cancel { target, job_id } => match target.rest("cancel") {
            Ok(rest) => cli::verb(async move { client::cancel(&rest, &job_id).await }),
            Err(code) => code,
        },
        Command::Checkpoint {
            target,
            full,
            job_id,
        } => match target.rest("checkpoint") {
            Ok(rest) => cli::verb(async move { client::checkpoint(&rest, &job_id, full).await }),
            Err(code) => code,
        },
        Command::Throttle {
            target,
            job_id,
            limits,
        } => {
            if limits.table.is_some() && limits.request().is_none() {
                return cli::usage_error(
                    "--table needs a limit to change (e.g. --read-snapshot-rows 1000)",
                    "ferry throttle --help",
                );
            }
            match target.rest("throttle") {
                Ok(rest) => cli::verb(async move {
                    client::throttle(&rest, &job_id, limits.request().as_ref()).await
                }),
                Err(code) => code,
            }
        }
        Command::State { command } => {
            cli::init_logging();
            cli::state::run(command)
        }
        Command::Failover { args } => cli::failover::command(&args, "failover"),
        Command::Standby { args } => cli::failover::command(&args, "standby"),
        Command::Verify { args } => cli::verify::command(&args),
        Command::Cutover { args } => cli::cutover::command(&args),
        Command::Failback { args } => cli::failback::command(&args),
        Command::Drill { args } => cli::drill::command(&args),
        Command::DemoWriter(args) => {
            cli::init_logging();
            cli::verb(cli::demo_writer::run(args))
        }
    }
}
