//! Arguments of `ferry run`: the reference job's `--job.* / --reader.* /
//! --writer.*` pairs verbatim, the process keys (`--rest.port`, `-D…`), and
//! `run`'s own flags (`-p`, `-s`, `--config`, …).
//!
//! clap cannot take an open set of dotted keys, so `run` collects its
//! arguments raw and [`parse`] walks them once: flags here, every key into
//! one [`Settings`] map (names checked against every section). The
//! `--config` file is read once into another; the command line's map wins,
//! and the merged map is validated once ([`build`]) into `JobConfig`, the
//! Kafka settings and `ProcessOptions`. A session-mode server builds the
//! job it is sent with the same [`build`] ([`from_submission`]).

pub mod from_cutover;

use crate::api::live::SubmitRequestBody;
use crate::process_opts::{OptionError, ProcessOptions};
use crate::settings::{all_specs, Settings, SettingsError};
use ferry_engine::config::{ConfigError, JobConfig};
use ferry_kafka::config::{KafkaSinkConfig, KafkaSourceConfig};
use std::path::PathBuf;

/// Parsed `ferry run` arguments.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// The validated job configuration.
    pub config: JobConfig,
    /// The Kafka sink's settings, with `job.sinkType=kafka`.
    pub kafka_sink: Option<KafkaSinkConfig>,
    /// The Kafka source's settings, with `job.sourceType=kafka`.
    pub kafka_source: Option<KafkaSourceConfig>,
    /// `-s/--fromSavepoint`: a savepoint or retained checkpoint to resume from.
    pub from_savepoint: Option<String>,
    /// `--fromCutover FILE`: start the reverse job of a verified cutover
    /// with a diff from the cutover time (checked against the report).
    pub from_cutover: Option<from_cutover::CutoverStart>,
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
    /// Every key as given (command line over `--config`), for a
    /// session-mode submission.
    pub settings: Settings,
}

impl RunArgs {
    /// What a session-mode server needs to run this job: the job's keys as
    /// given (locations made absolute), `-p`, and `-s` / `--savepointPath`
    /// as absolute URIs, so the server neither reads the client's files nor
    /// resolves paths against its own working directory. Process keys stay
    /// here: the server has its own.
    pub fn submission(&self) -> Result<SubmitRequestBody, UsageError> {
        let absolute = |flag: &str, path: &Option<String>| -> Result<Option<String>, UsageError> {
            path.as_deref()
                .map(|p| {
                    ferry_engine::checkpoint::StorageLocation::parse(p)
                        .map(|l| l.to_uri())
                        .map_err(|e| UsageError::InvalidValue {
                            flag: flag.to_string(),
                            value: e.input,
                            reason: e.reason,
                        })
                })
                .transpose()
        };
        Ok(SubmitRequestBody {
            config: self.settings.submission()?,
            parallelism: self.parallelism,
            from_savepoint: absolute("--fromSavepoint", &self.from_savepoint)?,
            savepoint_path: absolute("--savepointPath", &self.savepoint_dir)?,
        })
    }
}

/// The job a session-mode submission describes, validated as `ferry run`
/// validates its command line.
pub fn from_submission(body: &SubmitRequestBody) -> Result<RunArgs, UsageError> {
    let flags = RunFlags {
        from_savepoint: body.from_savepoint.clone(),
        parallelism: Some(body.parallelism.to_string()),
        savepoint_dir: body.savepoint_path.clone(),
        ..RunFlags::default()
    };
    build(flags, Settings::from_submission(&body.config)?)
}

/// What the command line asked for.
#[derive(Debug)]
pub enum RunCommand {
    /// Run (or, with `--jobmanager`, submit) this job.
    Run(Box<RunArgs>),
    /// `--help`.
    Help,
}

/// A usage error: printed with exit code 2.
// The fields are named in each variant's message.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// A job key's value.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A process key's value.
    #[error(transparent)]
    Option(#[from] OptionError),
    /// The command line or the config file.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A flag of `ferry run` itself.
    #[error("invalid value '{value}' for {flag}: {reason}")]
    InvalidValue {
        flag: String,
        value: String,
        reason: String,
    },
    /// `--fromCutover`'s report cannot start this job.
    #[error("--fromCutover {path}: {reason}")]
    FromCutover { path: String, reason: String },
}

/// Default parallelism: one pipeline per core, at least 1.
pub fn default_parallelism() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// `run`'s own flags, as given.
#[derive(Debug, Default)]
struct RunFlags {
    from_savepoint: Option<String>,
    from_cutover: Option<PathBuf>,
    parallelism: Option<String>,
    config_file: Option<PathBuf>,
    savepoint_dir: Option<String>,
    jobmanager: Option<String>,
    detached: bool,
}

impl RunFlags {
    /// Sets `flag` (a name or short form) to `value`; `false` when `flag`
    /// is not one of `run`'s value-taking flags.
    fn set(&mut self, flag: &str, value: String) -> bool {
        match flag {
            "-s" | "--fromSavepoint" => self.from_savepoint = Some(value),
            "--fromCutover" => self.from_cutover = Some(PathBuf::from(value)),
            "-p" | "--parallelism" => self.parallelism = Some(value),
            "--config" => self.config_file = Some(PathBuf::from(value)),
            "--savepointPath" | "--execution.checkpointing.savepoint-dir" => {
                self.savepoint_dir = Some(value)
            }
            "-m" | "--jobmanager" => self.jobmanager = Some(value),
            _ => return false,
        }
        true
    }

    fn takes_value(flag: &str) -> bool {
        RunFlags::default().set(flag, String::new())
    }
}

/// Splits and validates `ferry run` arguments (everything after `run`).
pub fn parse(args: &[String]) -> Result<RunCommand, UsageError> {
    match parse_args(args)? {
        Some((flags, cli)) => {
            let file = match &flags.config_file {
                Some(path) => Settings::from_toml_file(path)?,
                None => Settings::default(),
            };
            build(flags, file.overridden_by(cli)).map(|run| RunCommand::Run(Box::new(run)))
        }
        None => Ok(RunCommand::Help),
    }
}

/// `run`'s flags and the keys of its command line; `None` for `--help`.
fn parse_args(args: &[String]) -> Result<Option<(RunFlags, Settings)>, UsageError> {
    // Help wins over any mistake elsewhere on the line.
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(None);
    }
    let mut flags = RunFlags::default();
    let mut cli = Settings::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let next = args.get(i + 1).map(String::as_str);
        i += 1;
        match arg {
            "-d" | "--detached" => flags.detached = true,
            "-D" => {
                let pair =
                    next.ok_or_else(|| SettingsError::MissingFlagValue { flag: "-D".into() })?;
                cli.insert_dynamic(pair)?;
                i += 1;
            }
            _ if arg.starts_with("-D") => cli.insert_dynamic(&arg[2..])?,
            _ => {
                let (flag, inline) = match arg.split_once('=') {
                    Some((f, v)) if f.starts_with('-') => (f, Some(v)),
                    _ => (arg, None),
                };
                if RunFlags::takes_value(flag) {
                    let value = match inline {
                        Some(v) => v,
                        None => {
                            i += 1;
                            next.ok_or_else(|| SettingsError::MissingFlagValue {
                                flag: flag.to_string(),
                            })?
                        }
                    };
                    flags.set(flag, value.to_string());
                    continue;
                }
                let Some(body) = arg.strip_prefix("--").filter(|b| !b.is_empty()) else {
                    return Err(SettingsError::UnexpectedArgument {
                        arg: arg.to_string(),
                    }
                    .into());
                };
                let (name, inline) = match body.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (body, None),
                };
                if cli.insert_flag(name, inline, next)? {
                    i += 1;
                }
            }
        }
    }
    Ok(Some((flags, cli)))
}

/// Validates `settings` (every key given, merged) and `run`'s own flags
/// into a job: process keys, the job's keys, the Kafka sides.
fn build(flags: RunFlags, settings: Settings) -> Result<RunArgs, UsageError> {
    let keys = settings.config();
    let mut process = ProcessOptions::from_config(keys)?;
    process.s3 = settings.with_bucket_keys(process.s3)?;
    let mut config = JobConfig::from_config(keys)?;
    let parallelism = match flags.parallelism {
        Some(v) => parse_parallelism(&v)?,
        None => default_parallelism(),
    };
    // Scan batches sized so the pipelines' batches fit reader.maxInFlightBytes.
    config.reader.fit_in_flight(parallelism);
    let kafka_sink = KafkaSinkConfig::from_config(keys, &config)?;
    let kafka_source = KafkaSourceConfig::from_config(keys, &config)?;
    let from_cutover = match flags.from_cutover {
        None => None,
        Some(path) => {
            let refuse = |reason: String| UsageError::FromCutover {
                path: path.display().to_string(),
                reason,
            };
            if flags.from_savepoint.is_some() {
                return Err(refuse("not together with -s/--fromSavepoint: the reverse job starts from the cutover, not from a saved state".into()));
            }
            if flags.jobmanager.is_some() {
                return Err(refuse(
                    "runs the job in this process; leave out -m/--jobmanager".into(),
                ));
            }
            Some(from_cutover::load(path.clone(), &config).map_err(refuse)?)
        }
    };
    Ok(RunArgs {
        config,
        kafka_sink,
        kafka_source,
        from_savepoint: flags.from_savepoint,
        from_cutover,
        parallelism,
        savepoint_dir: flags.savepoint_dir,
        jobmanager: flags.jobmanager,
        detached: flags.detached,
        process,
        settings,
    })
}

fn parse_parallelism(value: &str) -> Result<usize, UsageError> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=1024).contains(n))
        .ok_or_else(|| UsageError::InvalidValue {
            flag: "--parallelism".to_string(),
            value: value.to_string(),
            reason: "expected a whole number from 1 to 1024".into(),
        })
}

/// `ferry run --help`.
pub fn help() -> String {
    let usage = r"Run a replication job: snapshot the source table at t0, then apply chained
diff scans to the sink table on another cluster.

Usage: ferry run [OPTIONS] --job.sourceMasterAddresses ADDRS --job.sinkMasterAddresses ADDRS
                 --job.tableName TABLE --job.checkpointsDirectory DIR [--KEY VALUE ...]

Options:
  -s, --fromSavepoint PATH   resume from a savepoint or retained checkpoint (directory or its _metadata;
                             a path, file:// or s3://bucket/prefix URI)
      --fromCutover FILE     start the reverse job of a verified cutover (the report `ferry cutover` wrote):
                             a diff from the cutover time on the new primary, no snapshot; refused unless the
                             report says equal and drained, names this job's clusters and tables reversed,
                             and the new primary's history still reaches the cutover time (not with -s)
  -p, --parallelism N        number of reader-to-writer pipelines [default: number of cores]
      --config FILE          TOML file with the same keys (command-line values win)
      --savepointPath DIR    on SIGTERM / Ctrl-C, stop with a savepoint in DIR (else cancel); DIR may be s3://
  -m, --jobmanager HOST:PORT submit to a running `ferry server` (session mode) instead of
                             running the job in this process (application mode)
  -d, --detached             with --jobmanager: return once the job is submitted
  -D KEY=VALUE               set a process or security key (rest.*, metrics.*, s3.*, security.*), Flink style: -Drest.port=8082
  -h, --help                 print this help

With job.shards N > 1 and a high-availability.type, this process is a worker of the job: any number of
workers (1 to N) share its shards (a worker slot each; shard k runs on the (k mod M)-th of the M live
workers); joining, dying and SIGTERM move shards between them (docs/scale-out.md).

Keys (also accepted as --key=value; rest.*, metrics.*, s3.* and security.* also as -Dkey=value; all of them
in the --config file, flat, dotted or as [job] / [reader] / [writer] / [rest] / [metrics] / [s3] tables):
";
    format!(
        "{usage}{}\nExit codes: 0 stopped cleanly, 1 the job failed, 2 usage or configuration error.\n",
        crate::key_docs::render_help(&all_specs().collect::<Vec<_>>())
    )
}
