//! Arguments of `ferry run`: the reference job's `--job.* / --reader.* /
//! --writer.*` pairs verbatim, plus ferry's own process flags.
//!
//! clap cannot take an open set of dotted keys, so `run` collects its
//! arguments raw and this module splits them: process flags here, job keys
//! to the engine's config parser (which names any unknown key).

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
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Splits and validates `ferry run` arguments (everything after `run`).
pub fn parse(args: &[String]) -> Result<RunCommand, UsageError> {
    let mut from_savepoint = None;
    let mut parallelism = None;
    let mut config_file: Option<PathBuf> = None;
    let mut savepoint_dir = None;
    let mut job_args = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let value = |i: &mut usize| -> Result<String, UsageError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            *i += 1;
            args.get(*i).cloned().ok_or_else(|| UsageError::MissingValue { flag: flag.to_string() })
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
            _ => job_args.push(arg.clone()),
        }
        i += 1;
    }
    let file = config_file.map(|p| RawConfig::from_toml_file(&p)).transpose()?;
    let config = JobConfig::from_sources(file, job_args)?;
    Ok(RunCommand::Run(Box::new(RunArgs {
        config,
        from_savepoint,
        parallelism: parallelism.unwrap_or_else(default_parallelism),
        savepoint_dir,
    })))
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
  -h, --help                 print this help

Keys (also accepted as --key=value):
";
    format!(
        "{usage}{}\nExit codes: 0 stopped cleanly, 1 the job failed, 2 usage or configuration error.\n",
        ferry_engine::config::render_help()
    )
}
