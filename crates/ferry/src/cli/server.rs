//! `ferry server`: session mode's options and help; the process itself is
//! the server half's (`server::run::serve`).

use super::{init_logging, runtime, usage_error};
use crate::{key_docs, process_opts, settings};
use std::process::ExitCode;

/// `ferry server`: help, or serve jobs over REST.
pub fn command(args: &[String]) -> ExitCode {
    match server_options(args) {
        Ok(None) => {
            print!("{}", server_help());
            ExitCode::SUCCESS
        }
        Ok(Some(opts)) => {
            init_logging();
            match runtime().map(|rt| rt.block_on(crate::server::run::serve(opts))) {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) | Err(e) => {
                    eprintln!("error: {}", crate::error_line(&e));
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => usage_error(&e, "ferry server --help"),
    }
}

/// `ferry server` options; `Ok(None)` for `--help`. Read like `ferry
/// run`'s (one map per source, the command line wins over `--config`), but
/// only the server's own keys: from a config file shared with `ferry run`
/// the others are left to the jobs, on the command line they are refused.
fn server_options(args: &[String]) -> Result<Option<process_opts::ProcessOptions>, String> {
    use ferry_engine::config::Scope;
    use settings::{Settings, SettingsError};
    let mut cli = Settings::default();
    let mut file = Settings::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let next = args.get(i + 1).map(String::as_str);
        i += 1;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (arg, None),
        };
        let mut value = || -> Result<&str, SettingsError> {
            match inline {
                Some(v) => Ok(v),
                None => {
                    i += 1;
                    next.ok_or_else(|| SettingsError::MissingFlagValue {
                        flag: flag.to_string(),
                    })
                }
            }
        };
        let step = match flag {
            "-h" | "--help" => return Ok(None),
            "-D" => value().and_then(|pair| cli.insert_dynamic(pair)),
            f if f.starts_with("-D") => cli.insert_dynamic(&arg[2..]),
            "--config" => value().and_then(|path| {
                file = Settings::from_toml_file(std::path::Path::new(path))?;
                Ok(())
            }),
            f if f.starts_with("--") && f.len() > 2 => cli
                .insert_flag(&f[2..], inline, next)
                .map(|took_next| i += usize::from(took_next)),
            other => return Err(format!("unknown option '{other}' for ferry server")),
        };
        step.map_err(|e| e.to_string())?;
    }
    if let Some((_, key)) = cli.keys().find(|(s, _)| s.scope != Scope::Process) {
        return Err(SettingsError::NotHere {
            key: key.name(),
            command: "ferry server",
            reason: "it is a per-job key; give it to `ferry run` (with --jobmanager to submit the job here)",
        }
        .to_string());
    }
    file.retain(|s| s.scope == Scope::Process);
    let settings = file.overridden_by(cli);
    let mut opts =
        process_opts::ProcessOptions::from_config(settings.config()).map_err(|e| e.to_string())?;
    opts.s3 = settings
        .with_bucket_keys(opts.s3)
        .map_err(|e| e.to_string())?;
    Ok(Some(opts))
}

fn server_help() -> String {
    let keys = settings::KEYS
        .keys()
        .filter(|(s, _)| s.scope == ferry_engine::config::Scope::Process)
        .map(|(_, k)| k.spec())
        .collect::<Vec<_>>();
    format!(
        "Start a session-mode ferry process: it serves the REST API, the web page and the\n\
         Prometheus endpoint, and runs the jobs submitted with `ferry run --jobmanager HOST:PORT`.\n\
         SIGTERM / Ctrl-C stops every job (with a savepoint where --savepointPath was given).\n\n\
         Usage: ferry server [--rest.port PORT] [--rest.address ADDR] [--metrics.port PORT] [-Dkey=value] [--config FILE]\n\n\
         --config FILE reads these keys from a TOML file (command-line values win); its other\n\
         keys are left to `ferry run`.\n\n{}",
        key_docs::render_help(&keys)
    )
}
