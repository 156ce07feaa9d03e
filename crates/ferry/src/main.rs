//! The `ferry` binary: parses the command line, builds the job
//! configuration and hands it to `ferry-engine`, mapping the outcome to a
//! documented exit code (0 ok, 1 job failure, 2 usage error).

mod run;
mod run_args;
mod sink;

use clap::{Parser, Subcommand};
use ferry_engine::JobStatus;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "ferry", version, about = "Continuous replication and disaster recovery for Apache Kudu")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a replication job (see `ferry run --help` for every key).
    #[command(disable_help_flag = true)]
    Run {
        /// `--job.* / --reader.* / --writer.*` keys and process flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Exit code for usage and configuration errors.
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(EXIT_USAGE) } else { ExitCode::SUCCESS };
        }
    };
    match cli.command {
        Command::Run { args } => match run_args::parse(&args) {
            Ok(run_args::RunCommand::Help) => {
                print!("{}", run_args::help());
                ExitCode::SUCCESS
            }
            Ok(run_args::RunCommand::Run(run)) => run_job(*run),
            Err(e) => {
                eprintln!("error: {e}");
                eprintln!("Run 'ferry run --help' for every key and its default.");
                ExitCode::from(EXIT_USAGE)
            }
        },
    }
}

fn run_job(run: run_args::RunArgs) -> ExitCode {
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run::run(run)) {
        Ok(JobStatus::Finished { savepoint }) => {
            println!("Job finished; savepoint at {savepoint}");
            ExitCode::SUCCESS
        }
        Ok(JobStatus::Canceled) => ExitCode::SUCCESS,
        Ok(JobStatus::Failed { error }) => {
            eprintln!("error: the job failed: {error}");
            ExitCode::FAILURE
        }
        Ok(other) => {
            eprintln!("error: the job ended in state {other:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FERRY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
