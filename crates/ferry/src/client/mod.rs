//! The client half: the verbs that talk to a running ferry process
//! (`ferry list / savepoint / stop / cancel / checkpoint / throttle`, `ferry run
//! --jobmanager`, `ferry stop --drain-check`), mirroring the `flink` CLI's
//! options and output lines; each talks to the process's REST API and
//! reads its answers as the typed bodies of [`crate::api`].
//! `security`: TLS, client certificate and bearer token for a secured
//! REST API (the `security.*` keys); `drain`: the drain check.
//!
//! Nothing here imports [`crate::server`].

mod drain;
pub mod security;
mod shards;
mod throttle;

pub use drain::{drain_check, drain_then_stop, DrainCheck};
pub use security::RestClientOptions;
pub use throttle::throttle;

use crate::api::flink::{
    AsynchronousOperationResult, CheckpointInfo, CheckpointTriggerRequestBody, CheckpointType,
    JobExceptionsInfo, JobOverview, JobStatusBody, MultipleJobsDetails, OperationOutcome,
    QueueStatusId, SavepointInfo, SavepointTriggerRequestBody, StopWithSavepointRequestBody,
    TriggerResponse,
};
use crate::api::live::{SubmitRequestBody, SubmitResponse};
use crate::http_client::{HttpClient, Response};
use crate::run_args::RunArgs;
use anyhow::{anyhow, bail, Context, Result};
use hyper::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::{Duration, Instant};

/// A REST client for one ferry process.
pub struct Rest {
    http: HttpClient,
    base: String,
    /// Added to "cannot reach" errors: what a TLS failure may mean.
    hint: &'static str,
}

impl Rest {
    /// A client of the REST API at `jobmanager` (`host:port`, `http://…`
    /// or `https://…`) with `security`'s TLS and token; an error (a bad
    /// option or file) is a usage error.
    pub fn new(jobmanager: &str, security: &RestClientOptions) -> Result<Self, String> {
        let (base, prepared) = security.prepare(jobmanager)?;
        let hint = match (prepared.tls.is_some(), security.keystore.is_some()) {
            (true, false) => {
                "; a server with security.ssl.rest.authentication-enabled also needs \
                              a client certificate: -D security.ssl.rest.keystore=CLIENT.pem"
            }
            (false, _) => "; a REST API with TLS needs https://HOST:PORT",
            (true, true) => "",
        };
        Ok(Rest {
            http: HttpClient::secured(Duration::from_secs(30), prepared),
            base,
            hint,
        })
    }

    async fn call<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Response> {
        let url = format!("{}{path}", self.base);
        self.http.request(method, &url, body).await.map_err(|e| {
            anyhow!("cannot reach the ferry REST API at {}: {e:#}\n(is the job's process running? pass --jobmanager HOST:PORT{})", self.base, self.hint)
        })
    }

    /// A call that must answer 2xx.
    async fn expect_ok<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Response> {
        let resp = self.call(method.clone(), path, body).await?;
        if !resp.status.is_success() {
            bail!(
                "{method} {path} failed ({}): {}",
                resp.status,
                resp.error_message()
            );
        }
        Ok(resp)
    }

    /// `GET path`, answered 2xx with a `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.expect_ok::<()>(Method::GET, path, None).await?.parse()
    }

    /// `POST path` with `body`, answered 2xx with a `T`.
    async fn post<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T> {
        self.expect_ok(Method::POST, path, Some(body))
            .await?
            .parse()
    }

    /// The same client (TLS, token) for the REST API at `base` (another
    /// worker of a sharded job).
    fn at(&self, base: &str) -> Rest {
        Rest {
            http: self.http.clone(),
            base: base.trim_end_matches('/').to_string(),
            hint: self.hint,
        }
    }

    /// Polls an asynchronous operation until it completes; returns its
    /// result, or the failure cause as an error.
    async fn wait_operation<O>(&self, path: &str, timeout: Duration) -> Result<O>
    where
        O: DeserializeOwned + OperationOutcome,
    {
        let deadline = Instant::now() + timeout;
        loop {
            let v: AsynchronousOperationResult<O> = self.get(path).await?;
            if v.status.id == QueueStatusId::Completed {
                let Some(op) = v.operation else {
                    bail!("the operation completed without a result")
                };
                if let Some(cause) = op.failure() {
                    bail!("{}", cause.stack_trace);
                }
                return Ok(op);
            }
            if Instant::now() > deadline {
                bail!(
                    "the operation did not complete within {}s",
                    timeout.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

const OP_TIMEOUT: Duration = Duration::from_secs(600);

fn format_local_time(epoch_ms: u64) -> String {
    let secs = (epoch_ms / 1000) as libc::time_t;
    // SAFETY: localtime_r writes only into `tm`, which we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if !ok {
        return epoch_ms.to_string();
    }
    format!(
        "{:02}.{:02}.{:04} {:02}:{:02}:{:02}",
        tm.tm_mday,
        tm.tm_mon + 1,
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Prints one `flink list` section: its header and jobs, or `empty`.
fn print_section(header: &str, empty: &str, jobs: &[&JobOverview]) {
    if jobs.is_empty() {
        println!("{empty}");
        return;
    }
    println!("{header}");
    for j in jobs {
        println!(
            "{} : {} : {} ({})",
            format_local_time(j.start_time),
            j.jid,
            j.name,
            j.state
        );
    }
    println!("--------------------------------------------------------------");
}

/// `ferry list`: like `flink list` (running and scheduled jobs by default).
pub async fn list(rest: &Rest, running: bool, scheduled: bool, all: bool) -> Result<()> {
    println!("Waiting for response...");
    let overview: MultipleJobsDetails = rest.get("/jobs/overview").await?;
    let (show_running, show_scheduled, show_terminated) = if all {
        (true, true, true)
    } else if running || scheduled {
        (running, scheduled, false)
    } else {
        (true, true, false)
    };
    let in_states = |states: &[&str]| -> Vec<&JobOverview> {
        overview
            .jobs
            .iter()
            .filter(|j| states.contains(&j.state.as_str()))
            .collect()
    };
    if show_running {
        print_section(
            "------------------ Running/Restarting Jobs -------------------",
            "No running jobs.",
            // SUSPENDED: a lease holder standing by to run it again.
            &in_states(&["RUNNING", "RESTARTING", "CANCELLING", "SUSPENDED"]),
        );
    }
    if show_scheduled {
        println!("No scheduled jobs.");
    }
    if show_terminated {
        print_section(
            "---------------------- Terminated Jobs -----------------------",
            "No terminated jobs.",
            &in_states(&["FINISHED", "CANCELED", "FAILED"]),
        );
    }
    shards::print_shards(rest).await;
    Ok(())
}

/// `ferry savepoint JOB_ID [DIR] [--detached]`.
pub async fn savepoint(rest: &Rest, job: &str, dir: Option<&str>, detached: bool) -> Result<()> {
    println!("Triggering savepoint for job {job}.");
    let body = SavepointTriggerRequestBody {
        target_directory: dir.map(absolute_uri).transpose()?,
        cancel_job: false,
        ..Default::default()
    };
    let trigger: TriggerResponse = rest.post(&format!("/jobs/{job}/savepoints"), &body).await?;
    let tid = trigger.request_id;
    if detached {
        println!("Successfully trigger manual savepoint, triggerId: {tid}");
        return Ok(());
    }
    println!("Waiting for response...");
    let op: SavepointInfo = rest
        .wait_operation(&format!("/jobs/{job}/savepoints/{tid}"), OP_TIMEOUT)
        .await
        .context("Savepoint failed")?;
    println!("Savepoint completed. Path: {}", location(op)?);
    println!("You can resume your program from this savepoint with the run command.");
    Ok(())
}

/// `ferry stop --savepointPath DIR [--drain] JOB_ID`.
pub async fn stop(rest: &Rest, job: &str, dir: Option<&str>, drain: bool) -> Result<()> {
    stop_at(rest, job, dir, drain).await.map(|_| ())
}

/// [`stop`], returning the savepoint's location.
pub async fn stop_at(rest: &Rest, job: &str, dir: Option<&str>, drain: bool) -> Result<String> {
    println!("Suspending job \"{job}\" with a CANONICAL savepoint.");
    let body = StopWithSavepointRequestBody {
        target_directory: dir.map(absolute_uri).transpose()?,
        drain,
        ..Default::default()
    };
    let trigger: TriggerResponse = rest.post(&format!("/jobs/{job}/stop"), &body).await?;
    let tid = trigger.request_id;
    let op: SavepointInfo = rest
        .wait_operation(&format!("/jobs/{job}/savepoints/{tid}"), OP_TIMEOUT)
        .await
        .context("Could not stop with a savepoint job")?;
    let path = location(op)?;
    println!("Savepoint completed. Path: {path}");
    Ok(path)
}

/// `ferry cancel JOB_ID`.
pub async fn cancel(rest: &Rest, job: &str) -> Result<()> {
    println!("Cancelling job {job}.");
    rest.expect_ok::<()>(Method::PATCH, &format!("/jobs/{job}?mode=cancel"), None)
        .await?;
    println!("Cancelled job {job}.");
    Ok(())
}

/// `ferry checkpoint JOB_ID [--full]`.
pub async fn checkpoint(rest: &Rest, job: &str, full: bool) -> Result<()> {
    println!("Triggering checkpoint for job {job}.");
    let (kind, name) = if full {
        (CheckpointType::Full, "FULL")
    } else {
        (CheckpointType::Configured, "CONFIGURED")
    };
    let body = CheckpointTriggerRequestBody {
        checkpoint_type: Some(kind),
        trigger_id: None,
    };
    let trigger: TriggerResponse = rest
        .post(&format!("/jobs/{job}/checkpoints"), &body)
        .await?;
    let tid = trigger.request_id;
    println!("Waiting for response...");
    let op: CheckpointInfo = rest
        .wait_operation(&format!("/jobs/{job}/checkpoints/{tid}"), OP_TIMEOUT)
        .await
        .context("Checkpoint failed")?;
    let id = op
        .checkpoint_id
        .ok_or_else(|| anyhow!("no checkpointId in the answer"))?;
    println!("Checkpoint({name}) {id} for job {job} completed.");
    Ok(())
}

fn location(op: SavepointInfo) -> Result<String> {
    op.location
        .ok_or_else(|| anyhow!("no location in the answer"))
}

/// Paths given on this host are sent as absolute `file://` URIs, so a
/// server with another working directory writes where the user meant.
fn absolute_uri(path: &str) -> Result<String> {
    ferry_engine::checkpoint::StorageLocation::parse(path)
        .map(|l| l.to_uri())
        .map_err(|e| anyhow!("{e}"))
}

/// `ferry run --jobmanager HOST:PORT ...`: session-mode submission.
pub async fn submit(args: RunArgs) -> Result<std::process::ExitCode> {
    let jm = args.jobmanager.clone().unwrap_or_default();
    let security = RestClientOptions::from_process(&args.process.server.security);
    let rest = Rest::new(&jm, &security).map_err(|e| anyhow!("{e}"))?;
    let body: SubmitRequestBody = args.submission()?;
    let resp = rest.call(Method::POST, "/ferry/jobs", Some(&body)).await?;
    if resp.status != StatusCode::OK {
        bail!(
            "the job was not submitted ({}): {}",
            resp.status,
            resp.error_message()
        );
    }
    let id = resp.parse::<SubmitResponse>()?.jobid;
    println!("Job has been submitted with JobID {id}");
    if args.detached {
        return Ok(std::process::ExitCode::SUCCESS);
    }
    wait_for_end(&rest, &id).await
}

/// The newest failure's message, from `/jobs/:id/exceptions`.
async fn newest_failure(rest: &Rest, id: &str) -> Option<String> {
    let ex: JobExceptionsInfo = rest
        .get(&format!("/jobs/{id}/exceptions?maxExceptions=1"))
        .await
        .ok()?;
    ex.root_exception
}

/// Follows a submitted job until it ends, like a non-detached `flink run`;
/// says when it restarts after a transient failure and when it runs again.
async fn wait_for_end(rest: &Rest, id: &str) -> Result<std::process::ExitCode> {
    let mut last = String::from("RUNNING");
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let status: JobStatusBody = rest.get(&format!("/jobs/{id}/status")).await?;
        let s = status.status.as_str();
        match s {
            "FINISHED" | "CANCELED" => {
                println!("Job with JobID {id} has finished ({s}).");
                return Ok(std::process::ExitCode::SUCCESS);
            }
            "FAILED" => {
                let msg = newest_failure(rest, id)
                    .await
                    .unwrap_or_else(|| "unknown error".into());
                eprintln!("error: the job failed: {msg}");
                return Ok(std::process::ExitCode::FAILURE);
            }
            "RESTARTING" if last != s => {
                let msg = newest_failure(rest, id)
                    .await
                    .unwrap_or_else(|| "unknown error".into());
                eprintln!("Job {id} is restarting after a failure: {msg}");
            }
            "RUNNING" if last == "RESTARTING" => {
                eprintln!("Job {id} is running again.");
            }
            _ => {}
        }
        last = s.to_string();
    }
}
