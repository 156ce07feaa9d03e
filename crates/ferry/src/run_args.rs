//! Arguments of `ferry run`: the reference job's `--job.* / --reader.* /
//! --writer.*` pairs verbatim, plus ferry's own process flags.
//!
//! clap cannot take an open set of dotted keys, so `run` collects its
//! arguments raw and this module splits them: process flags here, job keys
//! to the engine's config parser (which names any unknown key).

use crate::process_opts::{OptionError, ProcessOptions};
use ferry_engine::config::{ConfigError, JobConfig, RawConfig};
use std::path::PathBuf;

/// Parsed `ferry run` arguments.
#[derive(Debug)]
pub struct RunArgs {
    /// The validated job configuration.
    pub config: JobConfig,
    /// `-s/--fromSavepoint`: a savepoint or retained checkpoint to resume from.
    pub from_savepoint: Option<String>,
    /// `-p/--parallelism`: number of pipelines (default 1... the CPU count).
    pub parallelism: usize,
    /// `--savepointPath` / `--execution.checkpointing.savepoint-dir`: where
    /// SIGTERM / Ctrl-C writes a final savepoint.
    pub savepoint_dir: Option<String>,
    /// `-m/--jobmanager HOST:PORT`: submit to a running `ferry server`
    /// (session mode) instead of running the job in this process.
    pub jobmanager: Option<String>,
    /// `-d/--detached`: with `--jobmanager`, return once submitted.
    pub detached: bool,
    /// REST / metrics / tablet-server polling options (`rest.*`, `metrics.*`).
    pub process: ProcessOptions,
}

impl RunArgs {
    /// The arguments that reproduce this job on another process (session
    /// mode): every key with its effective value and paths made absolute,
    /// so the server neither reads the client's files nor resolves paths
    /// against its own working directory.
    pub fn to_submission_args(&self) -> Result<Vec<String>, UsageError> {
        let mut out = Vec::new();
        for (key, value) in self.config.effective_values() {
            out.push(format!("--{}={value}", key.name()));
        }
        out.push(format!("--parallelism={}", self.parallelism));
        let absolute = |flag: &str, path: &str| -> Result<String, UsageError> {
            ferry_engine::checkpoint::StorageLocation::parse(path)
                .map(|l| l.to_uri())
                .map_err(|e| UsageError::InvalidValue {
                    flag: flag.to_string(),
                    value: path.to_string(),
                    reason: e.reason,
                })
        };
        if let Some(p) = &self.from_savepoint {
            out.push(format!(
                "--fromSavepoint={}",
                absolute("--fromSavepoint", p)?
            ));
        }
        if let Some(p) = &self.savepoint_dir {
            out.push(format!(
                "--savepointPath={}",
                absolute("--savepointPath", p)?
            ));
        }
        let k = &self.process.kudu;
        if let Some(a) = &k.source_master_http {
            out.push(format!(
                "--metrics.kudu.sourceMasterHttpAddresses={}",
                a.join(",")
            ));
        }
        if let Some(a) = &k.sink_master_http {
            out.push(format!(
                "--metrics.kudu.sinkMasterHttpAddresses={}",
                a.join(",")
            ));
        }
        out.push(format!(
            "--metrics.kudu.pollIntervalMillis={}",
            k.poll_interval.as_millis()
        ));
        Ok(out)
    }
}

/// What the command line asked for.
#[derive(Debug)]
pub enum RunCommand {
    Run(Box<RunArgs>),
    Help,
}

/// A usage error: printed with exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Option(#[from] OptionError),
    #[error("{flag} needs a value")]
    MissingValue { flag: String },
    #[error("invalid value '{value}' for {flag}: {reason}")]
    InvalidValue {
        flag: String,
        value: String,
        reason: String,
    },
}

/// Default parallelism: one pipeline per core, at least 1.
pub fn default_parallelism() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Splits and validates `ferry run` arguments (everything after `run`).
pub fn parse(args: &[String]) -> Result<RunCommand, UsageError> {
    let mut from_savepoint = None;
    let mut parallelism = None;
    let mut config_file: Option<PathBuf> = None;
    let mut savepoint_dir = None;
    let mut jobmanager = None;
    let mut detached = false;
    let mut process = ProcessOptions::default();
    let mut job_args = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg == "-D" {
            i += 1;
            let pair = args
                .get(i)
                .ok_or_else(|| UsageError::MissingValue { flag: "-D".into() })?;
            process.set_dynamic(pair)?;
            i += 1;
            continue;
        }
        if let Some(pair) = arg.strip_prefix("-D") {
            process.set_dynamic(pair)?;
            i += 1;
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let value = |i: &mut usize| -> Result<String, UsageError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            *i += 1;
            args.get(*i)
                .cloned()
                .ok_or_else(|| UsageError::MissingValue {
                    flag: flag.to_string(),
                })
        };
        match flag {
            "-h" | "--help" => return Ok(RunCommand::Help),
            "-s" | "--fromSavepoint" => from_savepoint = Some(value(&mut i)?),
            "-p" | "--parallelism" => {
                let v = value(&mut i)?;
                let n: usize = v.parse().map_err(|_| UsageError::InvalidValue {
                    flag: flag.to_string(),
                    value: v.clone(),
                    reason: "expected a whole number from 1 to 1024".into(),
                })?;
                if !(1..=1024).contains(&n) {
                    return Err(UsageError::InvalidValue {
                        flag: flag.to_string(),
                        value: v,
                        reason: "expected a whole number from 1 to 1024".into(),
                    });
                }
                parallelism = Some(n);
            }
            "--config" => config_file = Some(PathBuf::from(value(&mut i)?)),
            "--savepointPath" | "--execution.checkpointing.savepoint-dir" => {
                savepoint_dir = Some(value(&mut i)?)
            }
            "-m" | "--jobmanager" => jobmanager = Some(value(&mut i)?),
            "-d" | "--detached" => detached = true,
            f if crate::process_opts::is_process_key(f) && f.starts_with("--") => {
                let v = value(&mut i)?;
                process.set(f, &v)?;
            }
            _ => job_args.push(arg.clone()),
        }
        i += 1;
    }
    let file = match config_file {
        None => None,
        Some(p) => Some(read_config_file(&p, &mut process)?),
    };
    // Command-line process keys win over the file's: apply them again.
    reapply_cli_process_keys(args, &mut process)?;
    let config = JobConfig::from_sources(file, job_args)?;
    Ok(RunCommand::Run(Box::new(RunArgs {
        config,
        from_savepoint,
        parallelism: parallelism.unwrap_or_else(default_parallelism),
        savepoint_dir,
        jobmanager,
        detached,
        process,
    })))
}

/// Reads a `--config` TOML file: `rest.*` / `metrics.*` keys go to
/// `process`, the rest to the job's parser (which names the file in its
/// errors).
pub fn read_config_file(
    path: &std::path::Path,
    process: &mut ProcessOptions,
) -> Result<RawConfig, UsageError> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(RawConfig::from_toml_file(path)?);
    };
    match crate::process_opts::take_process_keys_from_toml(&text, process) {
        Ok(Some(rest)) => Ok(RawConfig::from_toml_str(&rest)?),
        Ok(None) => Ok(RawConfig::from_toml_file(path)?),
        Err(reason) => Err(UsageError::InvalidValue {
            flag: "--config".into(),
            value: path.display().to_string(),
            reason,
        }),
    }
}

fn reapply_cli_process_keys(
    args: &[String],
    process: &mut ProcessOptions,
) -> Result<(), UsageError> {
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg == "-D" {
            if let Some(pair) = args.get(i + 1) {
                process.set_dynamic(pair)?;
            }
            i += 2;
            continue;
        }
        if let Some(pair) = arg.strip_prefix("-D") {
            process.set_dynamic(pair)?;
        } else if arg.starts_with("--") {
            match arg.split_once('=') {
                Some((k, v)) => {
                    process.set(k, v)?;
                }
                None if crate::process_opts::is_process_key(arg) => {
                    if let Some(v) = args.get(i + 1) {
                        process.set(arg, v)?;
                        i += 1;
                    }
                }
                None => {}
            }
        }
        i += 1;
    }
    Ok(())
}

/// `ferry run --help`.
pub fn help() -> String {
    let usage = r"Run a replication job: snapshot the source table at t0, then apply chained
diff scans to the sink table on another cluster.

Usage: ferry run [OPTIONS] --job.sourceMasterAddresses ADDRS --job.sinkMasterAddresses ADDRS
                 --job.tableName TABLE --job.checkpointsDirectory DIR [--KEY VALUE ...]

Options:
  -s, --fromSavepoint PATH   resume from a savepoint or retained checkpoint (directory or its _metadata)
  -p, --parallelism N        number of reader-to-writer pipelines [default: number of cores]
      --config FILE          TOML file with the same keys (command-line values win)
      --savepointPath DIR    on SIGTERM / Ctrl-C, stop with a savepoint in DIR (else cancel)
  -m, --jobmanager HOST:PORT submit to a running `ferry server` (session mode) instead of
                             running the job in this process (application mode)
  -d, --detached             with --jobmanager: return once the job is submitted
  -D KEY=VALUE               set a process option (Flink style, e.g. -Drest.port=8082)
  -h, --help                 print this help

Keys (also accepted as --key=value):
";
    let mut process = String::from(
        "\nProcess options (also --key=value, -Dkey=value, or [rest] / [metrics] in --config):\n",
    );
    for (key, default, doc) in crate::process_opts::PROCESS_KEYS {
        process.push_str(&format!("  --{key} VALUE  [{default}]\n      {doc}\n"));
    }
    format!(
        "{usage}{}{process}\nExit codes: 0 stopped cleanly, 1 the job failed, 2 usage or configuration error.\n",
        ferry_engine::config::render_help()
    )
}
