//! `ferry state mirror SRC DST [--watch] [--interval SECONDS]`: copies
//! every complete, valid checkpoint and savepoint under `SRC` to the same
//! place under `DST`, for people who copy state with a separate process
//! (the role S3 cross-region replication plays in the reference design).
//!
//! Same guarantees as the job's state replicas (`job.stateReplicas`):
//! `_metadata` created only if absent, read back and decoded (checksum)
//! after the copy; torn or damaged source states are skipped with a
//! warning naming them; nothing is deleted at `DST`. `--watch` repeats the
//! pass every `--interval` seconds until SIGTERM / Ctrl-C. Object stores
//! (`s3://`, …) take the `s3.*` keys as `-D key=value` and the `AWS_*`
//! environment, as `ferry run` does (one S3 endpoint for both sides).
//!
//! Exit codes: 0 every valid state is at `DST` (or `--watch` was stopped),
//! 1 a copy or the listing failed, 2 usage error.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ferry_engine::checkpoint::{StateStore, StorageLocation, StoreResolver};
use ferry_engine::config::Config;
use ferry_engine::error::display_chain;
use ferry_engine::replication::{mirror, MirrorReport};
use ferry_objstore::{redact, ObjectStoreResolver, S3Settings, S3_KEYS};

/// `ferry state ...`.
#[derive(clap::Subcommand, Debug)]
pub enum StateCommand {
    /// Copy every complete, valid checkpoint and savepoint from SRC to DST
    /// (create-only, verified after the copy); torn or damaged ones are
    /// skipped with a warning. Nothing is deleted at DST.
    Mirror(MirrorArgs),
}

/// `ferry state mirror`'s arguments.
#[derive(clap::Args, Debug)]
pub struct MirrorArgs {
    /// Source: a checkpoints directory or savepoint directory (path or
    /// file:// URI).
    pub src: String,
    /// Destination, laid out like SRC.
    pub dst: String,
    /// Keep mirroring: repeat every --interval until SIGTERM / Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// Seconds between passes with --watch.
    #[arg(long, default_value_t = 5.0)]
    pub interval: f64,
    /// An `s3.*` setting (s3.endpoint, s3.access-key, s3.secret-key,
    /// s3.path.style.access, s3.region, …); the AWS_* environment is read
    /// too.
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
}

/// The `-D` settings (only `s3.*` keys; values of secret keys are never
/// shown in errors).
fn s3_settings(pairs: &[String]) -> Result<S3Settings, String> {
    let mut keys = Config::new();
    let mut buckets = Vec::new();
    for pair in pairs {
        let (name, value) = pair
            .split_once('=')
            // The argument is not shown: it may be a misplaced secret.
            .ok_or_else(|| "-D expects KEY=VALUE".to_string())?;
        if ferry_objstore::is_bucket_key(name.trim()) {
            buckets.push((name.trim(), value));
            continue;
        }
        let key = S3_KEYS
            .keys
            .iter()
            .find(|k| k.name() == name.trim())
            .ok_or_else(|| {
                let known: Vec<_> = S3_KEYS.keys.iter().map(|k| k.name()).collect();
                format!(
                    "-D {}: unknown key; known: {}",
                    name.trim(),
                    known.join(", ")
                )
            })?;
        keys.set(*key, value);
    }
    let mut settings = S3Settings::from_config(&keys).map_err(|e| format!("-D {e}"))?;
    // Per-bucket settings: a mirror between two endpoints or accounts.
    for (name, value) in buckets {
        settings
            .set_bucket_key(name, value)
            .map_err(|e| format!("-D {e}"))?;
    }
    Ok(settings.with_process_env())
}

/// Exit code for usage errors.
const EXIT_USAGE: u8 = 2;

/// The store a location lives in, checked to answer (wrong credentials,
/// unknown bucket, unreachable endpoint fail here, naming the location).
async fn open(
    resolver: &ObjectStoreResolver,
    location: &StorageLocation,
) -> Result<Arc<dyn StateStore>, String> {
    resolver.probe(location).await.map_err(|e| e.to_string())?;
    resolver
        .open(location)
        .map_err(|e| redact(&display_chain(&e), resolver.secrets()))
}

fn location(what: &str, value: &str) -> Result<StorageLocation, String> {
    StorageLocation::parse(value).map_err(|e| format!("{what}: {e}"))
}

/// Runs `ferry state ...`.
pub fn run(command: StateCommand) -> ExitCode {
    match command {
        StateCommand::Mirror(args) => run_mirror(args),
    }
}

fn run_mirror(args: MirrorArgs) -> ExitCode {
    let parsed = (|| {
        let src = location("SRC", &args.src)?;
        let dst = location("DST", &args.dst)?;
        if src == dst {
            return Err(format!(
                "SRC and DST are the same location '{}'",
                src.to_uri()
            ));
        }
        if !(args.interval.is_finite() && args.interval > 0.0) {
            return Err(format!(
                "--interval must be a number of seconds above 0, not {}",
                args.interval
            ));
        }
        Ok((src, dst, s3_settings(&args.settings)?))
    })();
    let (src, dst, settings) = match parsed {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            eprintln!("Run 'ferry state mirror --help' for usage.");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let runtime = match crate::cli::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let resolver = ObjectStoreResolver::from_settings(&settings);
        let (src_store, dst_store) =
            match (open(&resolver, &src).await, open(&resolver, &dst).await) {
                (Ok(s), Ok(d)) => (s, d),
                (Err(e), _) | (_, Err(e)) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
        let secrets = resolver.secrets().to_vec();
        let mut mirror = Mirror {
            src,
            dst,
            src_store,
            dst_store,
            warned: HashSet::new(),
            secrets,
        };
        if !args.watch {
            return if mirror.pass().await {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
        let interval = Duration::from_secs_f64(args.interval);
        let stop = crate::server::run::shutdown_signal();
        tokio::pin!(stop);
        loop {
            mirror.pass().await;
            tokio::select! {
                _ = &mut stop => return ExitCode::SUCCESS,
                _ = tokio::time::sleep(interval) => {}
            }
        }
    })
}

struct Mirror {
    src: StorageLocation,
    dst: StorageLocation,
    src_store: Arc<dyn StateStore>,
    dst_store: Arc<dyn StateStore>,
    /// Skipped states already warned about (`--watch` says it once).
    warned: HashSet<String>,
    /// Kept out of every message.
    secrets: Vec<ferry_objstore::Secret>,
}

impl Mirror {
    /// One pass; prints what it did; returns whether it fully succeeded.
    async fn pass(&mut self) -> bool {
        let report = mirror(
            self.src_store.as_ref(),
            &self.src,
            self.dst_store.as_ref(),
            &self.dst,
        )
        .await;
        match report {
            Ok(report) => self.print(&report),
            Err(e) => {
                eprintln!("error: {}", redact(&display_chain(&e), &self.secrets));
                false
            }
        }
    }

    fn print(&mut self, report: &MirrorReport) -> bool {
        for path in &report.copied {
            crate::say!("copied {path}");
        }
        for skipped in &report.skipped {
            if self.warned.insert(skipped.path.clone()) {
                eprintln!("warning: skipped {}: {}", skipped.path, skipped.reason);
            }
        }
        for (path, error) in &report.failed {
            eprintln!(
                "error: {path} not copied: {}",
                redact(&display_chain(error), &self.secrets)
            );
        }
        if !report.copied.is_empty() || !report.failed.is_empty() {
            crate::say!(
                "mirror {} -> {}: {} copied, {} already there, {} skipped, {} failed",
                self.src.to_uri(),
                self.dst.to_uri(),
                report.copied.len(),
                report.present,
                report.skipped.len(),
                report.failed.len()
            );
        }
        report.failed.is_empty()
    }
}
