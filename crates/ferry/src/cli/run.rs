//! `ferry run`: its help, submitting to a jobmanager (client half), or
//! running the job in this process (server half).

use super::{client, finished_line, init_logging, runtime, usage_error};
use crate::{client as rest_client, run_args, server};
use ferry_engine::JobStatus;
use std::process::ExitCode;

/// `ferry run`: help, submit to a jobmanager, or run the job here.
pub fn command(args: &[String]) -> ExitCode {
    match run_args::parse(args) {
        Ok(run_args::RunCommand::Help) => {
            print!("{}", run_args::help());
            ExitCode::SUCCESS
        }
        Ok(run_args::RunCommand::Run(run)) if run.jobmanager.is_some() => {
            // The process's security.* keys are the client's here.
            let security =
                rest_client::RestClientOptions::from_process(&run.process.server.security);
            let jobmanager = run.jobmanager.as_deref().unwrap_or_default();
            if let Err(e) = security.prepare(jobmanager) {
                return usage_error(&e, "ferry run --help");
            }
            client(async move { rest_client::submit(*run).await }).unwrap_or(ExitCode::FAILURE)
        }
        Ok(run_args::RunCommand::Run(run)) => run_job(*run),
        Err(e) => usage_error(&e.to_string(), "ferry run --help"),
    }
}

fn run_job(run: run_args::RunArgs) -> ExitCode {
    init_logging();
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(server::run::run(run)) {
        Ok(JobStatus::Finished { savepoint }) => {
            crate::say!("{}", finished_line(&savepoint));
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
            eprintln!("error: {}", crate::error_line(&e));
            super::exit_code_of(&e)
        }
    }
}
