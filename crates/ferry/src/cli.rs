//! The client verbs (`ferry list / savepoint / stop / cancel / checkpoint`
//! and `ferry run --jobmanager`), mirroring the `flink` CLI's options and
//! output lines; each talks to a ferry process's REST API.

use crate::http_client::{base_url, HttpClient, Response};
use crate::run_args::RunArgs;
use anyhow::{anyhow, bail, Context, Result};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A REST client for one ferry process.
pub struct Rest {
    http: HttpClient,
    base: String,
}

impl Rest {
    pub fn new(jobmanager: &str) -> Self {
        Rest {
            http: HttpClient::new(Duration::from_secs(30)),
            base: base_url(jobmanager),
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Result<Response> {
        let url = format!("{}{path}", self.base);
        self.http.request(method, &url, body.as_ref()).await.map_err(|e| {
            anyhow!("cannot reach the ferry REST API at {}: {e:#}\n(is the job's process running? pass --jobmanager HOST:PORT)", self.base)
        })
    }

    /// A call that must answer 2xx; returns its JSON body.
    pub async fn expect_ok(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let resp = self.call(method.clone(), path, body).await?;
        if !resp.status.is_success() {
            bail!(
                "{method} {path} failed ({}): {}",
                resp.status,
                resp.error_message()
            );
        }
        resp.json()
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        self.expect_ok(Method::GET, path, None).await
    }

    /// Polls an asynchronous operation until it completes; returns its
    /// `operation` object, or the failure cause as an error.
    async fn wait_operation(&self, path: &str, timeout: Duration) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.get(path).await?;
            if v.pointer("/status/id").and_then(Value::as_str) == Some("COMPLETED") {
                let op = v.get("operation").cloned().unwrap_or(Value::Null);
                let cause = op.get("failure-cause").or_else(|| op.get("failureCause"));
                if let Some(c) = cause.filter(|c| !c.is_null()) {
                    let msg = c
                        .get("stack-trace")
                        .or_else(|| c.get("message"))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| c.to_string());
                    bail!("{msg}");
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

/// `ferry list`: like `flink list` (running and scheduled jobs by default).
pub async fn list(rest: &Rest, running: bool, scheduled: bool, all: bool) -> Result<()> {
    println!("Waiting for response...");
    let v = rest.get("/jobs/overview").await?;
    let jobs = v
        .get("jobs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let line = |j: &Value| {
        format!(
            "{} : {} : {} ({})",
            format_local_time(j.get("start-time").and_then(Value::as_u64).unwrap_or(0)),
            j.get("jid").and_then(Value::as_str).unwrap_or("?"),
            j.get("name").and_then(Value::as_str).unwrap_or("?"),
            j.get("state").and_then(Value::as_str).unwrap_or("?"),
        )
    };
    let (show_running, show_scheduled, show_terminated) = if all {
        (true, true, true)
    } else if running || scheduled {
        (running, scheduled, false)
    } else {
        (true, true, false)
    };
    let is = |j: &Value, states: &[&str]| {
        states.contains(&j.get("state").and_then(Value::as_str).unwrap_or(""))
    };
    if show_running {
        let r: Vec<&Value> = jobs
            .iter()
            .filter(|j| is(j, &["RUNNING", "RESTARTING", "CANCELLING"]))
            .collect();
        if r.is_empty() {
            println!("No running jobs.");
        } else {
            println!("------------------ Running/Restarting Jobs -------------------");
            for j in r {
                println!("{}", line(j));
            }
            println!("--------------------------------------------------------------");
        }
    }
    if show_scheduled {
        println!("No scheduled jobs.");
    }
    if show_terminated {
        let t: Vec<&Value> = jobs
            .iter()
            .filter(|j| is(j, &["FINISHED", "CANCELED", "FAILED"]))
            .collect();
        if t.is_empty() {
            println!("No terminated jobs.");
        } else {
            println!("---------------------- Terminated Jobs -----------------------");
            for j in t {
                println!("{}", line(j));
            }
            println!("--------------------------------------------------------------");
        }
    }
    Ok(())
}

/// `ferry savepoint JOB_ID [DIR] [--detached]`.
pub async fn savepoint(rest: &Rest, job: &str, dir: Option<&str>, detached: bool) -> Result<()> {
    println!("Triggering savepoint for job {job}.");
    let mut body = json!({ "cancel-job": false });
    if let Some(d) = dir {
        body["target-directory"] = json!(absolute_uri(d)?);
    }
    let v = rest
        .expect_ok(Method::POST, &format!("/jobs/{job}/savepoints"), Some(body))
        .await?;
    let tid = request_id(&v)?;
    if detached {
        println!("Successfully trigger manual savepoint, triggerId: {tid}");
        return Ok(());
    }
    println!("Waiting for response...");
    let op = rest
        .wait_operation(&format!("/jobs/{job}/savepoints/{tid}"), OP_TIMEOUT)
        .await
        .context("Savepoint failed")?;
    println!("Savepoint completed. Path: {}", location(&op)?);
    println!("You can resume your program from this savepoint with the run command.");
    Ok(())
}

/// `ferry stop --savepointPath DIR [--drain] JOB_ID`.
pub async fn stop(rest: &Rest, job: &str, dir: Option<&str>, drain: bool) -> Result<()> {
    println!("Suspending job \"{job}\" with a CANONICAL savepoint.");
    let mut body = json!({ "drain": drain });
    if let Some(d) = dir {
        body["targetDirectory"] = json!(absolute_uri(d)?);
    }
    let v = rest
        .expect_ok(Method::POST, &format!("/jobs/{job}/stop"), Some(body))
        .await?;
    let tid = request_id(&v)?;
    let op = rest
        .wait_operation(&format!("/jobs/{job}/savepoints/{tid}"), OP_TIMEOUT)
        .await
        .context("Could not stop with a savepoint job")?;
    println!("Savepoint completed. Path: {}", location(&op)?);
    Ok(())
}

/// `ferry cancel JOB_ID`.
pub async fn cancel(rest: &Rest, job: &str) -> Result<()> {
    println!("Cancelling job {job}.");
    rest.expect_ok(Method::PATCH, &format!("/jobs/{job}?mode=cancel"), None)
        .await?;
    println!("Cancelled job {job}.");
    Ok(())
}

/// `ferry checkpoint JOB_ID [--full]`.
pub async fn checkpoint(rest: &Rest, job: &str, full: bool) -> Result<()> {
    println!("Triggering checkpoint for job {job}.");
    let kind = if full { "FULL" } else { "CONFIGURED" };
    let v = rest
        .expect_ok(
            Method::POST,
            &format!("/jobs/{job}/checkpoints"),
            Some(json!({ "checkpointType": kind })),
        )
        .await?;
    let tid = request_id(&v)?;
    println!("Waiting for response...");
    let op = rest
        .wait_operation(&format!("/jobs/{job}/checkpoints/{tid}"), OP_TIMEOUT)
        .await
        .context("Checkpoint failed")?;
    let id = op
        .get("checkpointId")
        .and_then(Value::as_u64)
        .ok_or_else(|| anyhow!("no checkpointId in {op}"))?;
    println!("Checkpoint({kind}) {id} for job {job} completed.");
    Ok(())
}

fn request_id(v: &Value) -> Result<String> {
    v.get("request-id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| anyhow!("no request-id in the answer: {v}"))
}

fn location(op: &Value) -> Result<String> {
    op.get("location")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| anyhow!("no location in the answer: {op}"))
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
    let rest = Rest::new(&jm);
    let body = json!({ "args": args.to_submission_args()? });
    let resp = rest.call(Method::POST, "/ferry/jobs", Some(body)).await?;
    if resp.status != StatusCode::OK {
        bail!(
            "the job was not submitted ({}): {}",
            resp.status,
            resp.error_message()
        );
    }
    let v = resp.json()?;
    let id = v
        .get("jobid")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("no jobid in {v}"))?
        .to_string();
    println!("Job has been submitted with JobID {id}");
    if args.detached {
        return Ok(std::process::ExitCode::SUCCESS);
    }
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let status = rest.get(&format!("/jobs/{id}/status")).await?;
        let s = status.get("status").and_then(Value::as_str).unwrap_or("");
        match s {
            "FINISHED" | "CANCELED" => {
                println!("Job with JobID {id} has finished ({s}).");
                return Ok(std::process::ExitCode::SUCCESS);
            }
            "FAILED" => {
                let ex = rest
                    .get(&format!("/jobs/{id}/exceptions"))
                    .await
                    .unwrap_or(Value::Null);
                let msg = ex
                    .get("root-exception")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                eprintln!("error: the job failed: {msg}");
                return Ok(std::process::ExitCode::FAILURE);
            }
            _ => {}
        }
    }
}

/// Options of `ferry stop --drain-check`.
pub struct DrainCheck {
    pub timeout: Duration,
    pub quiet: Duration,
}

struct Live(Value);

impl Live {
    fn u(&self, ptr: &str) -> u64 {
        self.0.pointer(ptr).and_then(Value::as_u64).unwrap_or(0)
    }

    fn table(&self, cluster: &str) -> Option<&Value> {
        self.0
            .pointer("/kudu/tables")?
            .as_array()?
            .iter()
            .find(|t| t.get("cluster").and_then(Value::as_str) == Some(cluster))
    }

    fn table_name(&self, cluster: &str) -> String {
        self.table(cluster)
            .and_then(|t| t.get("table_name"))
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    }

    fn counters(&self, cluster: &str) -> Option<Value> {
        self.table(cluster)
            .and_then(|t| t.get("counters"))
            .filter(|c| !c.is_null())
            .cloned()
    }

    /// How long the cluster's counters have not moved, if known.
    fn quiet_for(&self, cluster: &str) -> Result<Option<u64>> {
        let Some(t) = self.table(cluster) else {
            bail!("the job reports no {cluster} table activity")
        };
        if let Some(e) = t.get("error").and_then(Value::as_str) {
            bail!("cannot read the {cluster} tablet servers' metrics: {e}");
        }
        if t.get("polls").and_then(Value::as_u64).unwrap_or(0) < 2 {
            return Ok(None);
        }
        let now = self.u("/now");
        let since = t
            .get("unchanged_since_ms")
            .and_then(Value::as_u64)
            .unwrap_or(now);
        Ok(Some(now.saturating_sub(since)))
    }
}

fn describe_movement(before: &Option<Value>, after: &Option<Value>) -> String {
    let (Some(b), Some(a)) = (before, after) else {
        return "no counters yet".into();
    };
    let mut parts = Vec::new();
    for k in [
        "rows_inserted",
        "rows_upserted",
        "rows_updated",
        "rows_deleted",
    ] {
        let d = a.get(k).and_then(Value::as_u64).unwrap_or(0) as i64
            - b.get(k).and_then(Value::as_u64).unwrap_or(0) as i64;
        if d != 0 {
            parts.push(format!("{k} {d:+}"));
        }
    }
    if parts.is_empty() {
        "counters unchanged".into()
    } else {
        parts.join(", ")
    }
}

/// `ferry stop --drain-check`: the reference's pre-stop checklist, then a
/// stop with savepoint. Each step is printed as it passes.
pub async fn drain_check(
    rest: &Rest,
    job: &str,
    dir: Option<&str>,
    opts: DrainCheck,
) -> Result<()> {
    let started = Instant::now();
    let deadline = started + opts.timeout;
    let live_path = format!("/ferry/jobs/{job}/live");
    let fetch = || async { rest.get(&live_path).await.map(Live) };
    let first = fetch().await?;
    if first.0.get("state").and_then(Value::as_str) != Some("RUNNING") {
        bail!(
            "job {job} is not running ({})",
            first.0.get("state").and_then(Value::as_str).unwrap_or("?")
        );
    }
    if !first
        .0
        .pointer("/kudu/enabled")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        bail!("the drain check needs the tablet servers' metrics, but the job polls none (metrics.kudu.pollIntervalMillis=0)");
    }
    let poll_ms = first.u("/kudu/poll_interval_ms");
    let quiet_ms = (opts.quiet.as_millis() as u64).max(2 * poll_ms + 500);
    let source = first.table_name("source");
    let sink = first.table_name("sink");
    println!(
        "Drain check for job {job} (timeout {}s; a table is quiet when its write counters do not move for {:.1}s).",
        opts.timeout.as_secs(),
        quiet_ms as f64 / 1000.0
    );
    let tick = Duration::from_millis(250);
    'restart: loop {
        // 1. Source writes stopped.
        println!("[1/4] waiting until the source table '{source}' has no writes ...");
        let mut window_start = (Instant::now(), fetch().await?.counters("source"));
        let quiet_source = loop {
            let l = fetch().await?;
            if let Some(q) = l.quiet_for("source")? {
                if q >= quiet_ms {
                    println!(
                        "      source quiet: write counters unchanged for {:.1}s",
                        q as f64 / 1000.0
                    );
                    break l;
                }
            }
            if Instant::now() > deadline {
                let now = l.counters("source");
                bail!(
                    "drain check timed out after {}s: the source table '{source}' is still being written ({} in the last {:.0}s). \
                     Stop the writers first, or stop without --drain-check.",
                    opts.timeout.as_secs(),
                    describe_movement(&window_start.1, &now),
                    window_start.0.elapsed().as_secs_f64()
                );
            }
            if window_start.0.elapsed() > Duration::from_secs(10) {
                window_start = (Instant::now(), l.counters("source"));
            }
            tokio::time::sleep(tick).await;
        };
        let quiet_at = quiet_source.u("/now");
        let source_counters = quiet_source.counters("source");
        let windows_before = quiet_source.u("/totals/windows_completed");

        // 2. One more window completed after the writes stopped.
        println!("[2/4] waiting for a window that ends after the last source write ...");
        loop {
            let l = fetch().await?;
            let end = l.u("/last_end_timestamp");
            if end >= quiet_at && l.u("/totals/windows_completed") > windows_before {
                println!(
                    "      window completed (lastEndTimestamp {end}, lag {:.1}s)",
                    l.u("/now").saturating_sub(end) as f64 / 1000.0
                );
                break;
            }
            if l.0.get("state").and_then(Value::as_str) != Some("RUNNING") {
                bail!("job {job} stopped running during the drain check");
            }
            if Instant::now() > deadline {
                bail!(
                    "drain check timed out after {}s waiting for a window to complete (lastEndTimestamp {end}, needed >= {quiet_at})",
                    opts.timeout.as_secs()
                );
            }
            tokio::time::sleep(tick).await;
        }

        // 3. No split in flight.
        println!("[3/4] waiting until split counts are 0 ...");
        loop {
            let l = fetch().await?;
            let (p, u, r) = (
                l.u("/splits/pending"),
                l.u("/splits/unassigned"),
                l.u("/splits/pending_removal"),
            );
            if p == 0 && u == 0 && r == 0 {
                println!("      pendingCount 0, unassignedCount 0, pendingRemovalCount 0");
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "drain check timed out after {}s: splits still in flight (pending {p}, unassigned {u}, pendingRemoval {r})",
                    opts.timeout.as_secs()
                );
            }
            tokio::time::sleep(tick).await;
        }

        // 4. Sink writes stopped.
        println!("[4/4] waiting until the sink table '{sink}' has no writes ...");
        loop {
            let l = fetch().await?;
            if l.counters("source") != source_counters {
                println!("      the source table was written again; starting over");
                continue 'restart;
            }
            if let Some(q) = l.quiet_for("sink")? {
                if q >= quiet_ms {
                    println!(
                        "      sink quiet: write counters unchanged for {:.1}s",
                        q as f64 / 1000.0
                    );
                    break;
                }
            }
            if Instant::now() > deadline {
                bail!("drain check timed out after {}s: the sink table '{sink}' is still being written", opts.timeout.as_secs());
            }
            tokio::time::sleep(tick).await;
        }
        let l = fetch().await?;
        if l.counters("source") != source_counters {
            println!("      the source table was written again; starting over");
            continue 'restart;
        }
        break;
    }
    println!(
        "Drain check passed in {:.1}s; stopping with a savepoint.",
        started.elapsed().as_secs_f64()
    );
    stop(rest, job, dir, false).await
}
