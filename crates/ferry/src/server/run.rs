//! The two kinds of ferry process.
//!
//! - **Application mode** (`ferry run` without `--jobmanager`): serve the
//!   REST API and metrics, start the one job, show snapshot progress, and
//!   turn SIGTERM / Ctrl-C into stop-with-savepoint (when a savepoint
//!   directory is configured) or cancel. The process exits when the job
//!   ends — after the REST clients have read the results of their
//!   operations, so `ferry stop` gets its savepoint path.
//! - **Session mode** (`ferry server`): serve the REST API and metrics and
//!   run the jobs submitted with `ferry run --jobmanager`; SIGTERM / Ctrl-C
//!   stops every job (with a savepoint where one is configured).

use crate::process_opts::ProcessOptions;
use crate::run_args::RunArgs;
use crate::server::listen::Bound;
use crate::server::registry::{JobEntry, Mode, Registry};
use crate::server::submit::StartExtras;
use anyhow::{bail, Result};
use ferry_engine::JobStatus;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

/// How long a finished process waits for REST clients to read the results
/// of their operations.
const RESULT_GRACE: Duration = Duration::from_secs(10);

/// Runs the job in this process until it ends; returns its final status.
/// With `high-availability.type lease` it first waits for and claims the
/// lease (see [`super::lease`]).
pub async fn run(args: RunArgs) -> Result<JobStatus> {
    if let Some(shards) = super::workers::sharded(&args) {
        return super::workers::run_worker(args, shards).await;
    }
    if args.config.ha.kind.holds_lease() {
        return super::lease::run_leased(args).await;
    }
    run_with(args, StartExtras::default(), |_| {}).await
}

/// The REST and Prometheus listeners of an application-mode process and
/// the registry they serve.
pub struct Listeners {
    registry: Arc<Registry>,
    bound: Bound,
}

impl Listeners {
    /// Opens them for the job `ferry run` is about to start.
    async fn open(process: &ProcessOptions) -> Result<Listeners> {
        let registry = Registry::new(Mode::Application, crate::wiring::resolver(process));
        let bound = crate::server::listen::start(registry.clone(), &process.server).await?;
        Ok(Listeners { registry, bound })
    }

    /// Opens them, with no job yet, for a process that waits for its
    /// job's lease: it answers `GET /healthz`, and `GET /readyz` with 503,
    /// so an orchestrator's liveness probe leaves a standby alone. A port
    /// that is busy now (the active on the same host) is only a warning:
    /// the job opens what is missing when it starts.
    pub async fn open_waiting(process: &ProcessOptions) -> Result<Listeners> {
        let mut server = process.server.clone();
        server.rest_port.explicit = false;
        server.metrics_port.explicit = false;
        let registry = Registry::new(Mode::Application, crate::wiring::resolver(process));
        let bound = crate::server::listen::start(registry.clone(), &server).await?;
        Ok(Listeners { registry, bound })
    }

    /// The job's listeners: `waiting`'s, with what was busy then opened
    /// now (the port a holder on the same host has just released), or new
    /// ones.
    async fn for_job(waiting: Option<Listeners>, process: &ProcessOptions) -> Result<Listeners> {
        match waiting {
            Some(mut l) => {
                crate::server::listen::open_missing(&l.registry, &process.server, &mut l.bound)
                    .await?;
                Ok(l)
            }
            None => Listeners::open(process).await,
        }
    }
}

/// [`run`] with a takeover's or lease holder's extras; `on_started` sees
/// the job once it is registered.
pub async fn run_with(
    args: RunArgs,
    mut extras: StartExtras,
    on_started: impl FnOnce(&Arc<JobEntry>),
) -> Result<JobStatus> {
    let app = App::start(extras.listeners.take(), &args.process).await?;
    let entry = match app.start_job(args, extras).await {
        Ok(e) => e,
        Err(e) => {
            app.finish().await;
            return Err(e);
        }
    };
    on_started(&entry);
    let status = tokio::select! {
        status = entry.handle.wait() => status,
        _ = shutdown_signal() => stop_on_signal(&entry).await,
    };
    app.settle(&entry).await;
    app.finish().await;
    Ok(status)
}

/// An application-mode process: the REST API and metrics, serving the job
/// it runs — one job, or one per lease generation for a lease holder
/// (`super::holder`), which keeps them up while it stands by.
pub struct App {
    /// The process's jobs.
    pub registry: Arc<Registry>,
    bound: Bound,
}

impl App {
    /// Serves the REST API and metrics as `process` says: `waiting`'s
    /// listeners (a process that waited for its lease), with what was
    /// busy then opened now, or new ones.
    pub async fn start(waiting: Option<Listeners>, process: &ProcessOptions) -> Result<App> {
        let Listeners { registry, bound } = Listeners::for_job(waiting, process).await?;
        if let Some(url) = bound.rest_url() {
            eprintln!("ferry: web page and REST API at {url}");
        }
        if let Some(url) = bound.metrics_url() {
            eprintln!("ferry: Prometheus metrics at {url}");
        }
        Ok(App { registry, bound })
    }

    /// The REST API's URL, if it listens.
    pub fn rest_url(&self) -> Option<String> {
        self.bound.rest_url()
    }

    /// Starts the job and its progress display.
    pub async fn start_job(&self, args: RunArgs, extras: StartExtras) -> Result<Arc<JobEntry>> {
        let entry = crate::server::submit::start_job_with(&self.registry, args, extras).await?;
        crate::say!("Job has been submitted with JobID {}", entry.id);
        crate::server::progress::spawn(
            entry.clone(),
            std::io::stderr().is_terminal(),
            self.registry.shutdown.clone(),
        );
        Ok(entry)
    }

    /// Lets REST clients (`ferry stop`, a savepoint script) read the
    /// results of their operations on the ended `entry`.
    pub async fn settle(&self, entry: &JobEntry) {
        let deadline = tokio::time::Instant::now() + RESULT_GRACE;
        while !entry.operations_settled() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops serving.
    pub async fn finish(self) {
        self.registry.shutdown.cancel();
        self.bound.finish(Duration::from_secs(3)).await;
    }
}

/// SIGTERM / Ctrl-C: stop with a savepoint if a directory is configured,
/// else cancel (checkpoints are kept). A second signal cancels at once.
pub async fn stop_on_signal(entry: &Arc<JobEntry>) -> JobStatus {
    if entry.savepoint_dir.is_some() {
        eprintln!("ferry: stopping with a savepoint ... (press Ctrl-C again to cancel instead)");
        tokio::select! {
            r = entry.handle.stop_with_savepoint(None) => match r {
                Ok(path) => crate::say!("Savepoint completed. Path: {path}"),
                Err(e) => {
                    // The job may still run (or restart): the signal asked
                    // for an end, so cancel rather than wait for one.
                    eprintln!("ferry: savepoint failed: {e}; cancelling (checkpoints are kept)");
                    entry.handle.cancel().await;
                }
            },
            _ = shutdown_signal() => {
                eprintln!("ferry: cancelling (checkpoints are kept)");
                entry.handle.cancel().await;
            }
        }
    } else {
        eprintln!("ferry: cancelling (no --savepointPath given; checkpoints are kept)");
        entry.handle.cancel().await;
    }
    entry.handle.wait().await
}

/// `ferry server`: session mode.
pub async fn serve(opts: ProcessOptions) -> Result<()> {
    let registry = Registry::new(Mode::Session, crate::wiring::resolver(&opts));
    let mut server = opts.server.clone();
    // The REST API is the point of a session server: a busy default port
    // is an error here.
    server.rest_port.explicit = true;
    let bound = crate::server::listen::start(registry.clone(), &server).await?;
    let Some(url) = bound.rest_url() else {
        bail!("the REST API could not be started")
    };
    crate::say!("ferry server: REST API and web page at {url}");
    if let Some(m) = bound.metrics_url() {
        crate::say!("ferry server: Prometheus metrics at {m}");
    }
    crate::say!(
        "Submit jobs with: ferry run --jobmanager {} --job.* ...",
        url.trim_start_matches("http://")
    );
    shutdown_signal().await;
    eprintln!("ferry server: shutting down");
    let running: Vec<_> = registry
        .jobs()
        .into_iter()
        .filter(|j| !j.status().is_terminal())
        .collect();
    let stops = running.into_iter().map(|j| async move {
        if j.savepoint_dir.is_some() {
            match j.handle.stop_with_savepoint(None).await {
                Ok(path) => crate::say!("Job {}: Savepoint completed. Path: {path}", j.id),
                Err(e) => {
                    eprintln!(
                        "Job {}: savepoint failed: {e}; cancelling (checkpoints are kept)",
                        j.id
                    );
                    j.handle.cancel().await;
                }
            }
        } else {
            j.handle.cancel().await;
            crate::say!("Job {}: cancelled (checkpoints are kept)", j.id);
        }
        j.handle.wait().await
    });
    futures::future::join_all(stops).await;
    registry.shutdown.cancel();
    bound.finish(Duration::from_secs(3)).await;
    Ok(())
}

/// SIGTERM and Ctrl-C, listened to for the whole life of a process that
/// outlives its jobs (a lease holder standing by between generations), so
/// a signal between two waits is not lost.
pub struct Signals {
    #[cfg(unix)]
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Default for Signals {
    fn default() -> Self {
        Self::new()
    }
}

impl Signals {
    /// Starts listening.
    pub fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let streams = signal(SignalKind::terminate())
                .and_then(|term| Ok((term, signal(SignalKind::interrupt())?)))
                .ok();
            Signals { streams }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// Resolves on the next SIGTERM or Ctrl-C.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some((term, int)) = &mut self.streams {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
