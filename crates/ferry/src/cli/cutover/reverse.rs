//! The reverse job of a cutover: the forward job's `ferry run` options
//! with the tables and clusters swapped and `--fromCutover REPORT`, as a
//! printable shell command and as arguments for `--start-reverse`.

use super::CutoverArgs;
use crate::cutover_report::CutoverReport;

/// The keys the reverse job sets itself.
const REVERSED_KEYS: &[&str] = &[
    "job.tableName",
    "job.tableSuffix",
    "job.sinkTableName",
    "job.sourceMasterAddresses",
    "job.sinkMasterAddresses",
];

/// The forward job's options without the keys the reverse job replaces.
fn without_reversed_keys(options: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < options.len() {
        let arg = &options[i];
        i += 1;
        let body = arg.strip_prefix("--").unwrap_or_default();
        let (name, inline) = match body.split_once('=') {
            Some((n, _)) => (n, true),
            None => (body, false),
        };
        if REVERSED_KEYS.contains(&name) || name == "fromCutover" {
            if !inline {
                i += 1;
            }
            continue;
        }
        out.push(arg.clone());
    }
    out
}

/// The reverse job's `ferry run` options.
pub(crate) fn reverse_options(
    args: &CutoverArgs,
    report: &CutoverReport,
    path: &str,
) -> Vec<String> {
    let mut out = without_reversed_keys(&args.run_options);
    for (key, value) in [
        ("job.tableName", report.sink.table.clone()),
        ("job.sinkTableName", report.source.table.clone()),
        ("job.sourceMasterAddresses", report.sink.masters.join(",")),
        ("job.sinkMasterAddresses", report.source.masters.join(",")),
        ("fromCutover", path.to_string()),
    ] {
        out.push(format!("--{key}"));
        out.push(value);
    }
    if !args.run.config.table_suffix.is_empty() {
        // A suffix from the --config file would rename the reverse sink.
        out.push("--job.tableSuffix=".into());
    }
    out
}

/// `value` quoted for a POSIX shell when it needs it.
pub(super) fn shell_quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:,=@-+".contains(c));
    if plain {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reversed_keys_are_dropped_in_both_forms() {
        let given: Vec<String> = [
            "--config",
            "job.toml",
            "--job.tableName",
            "t",
            "--job.tableSuffix=_copy",
            "--job.checkpointsDirectory",
            "/chk",
            "--job.sinkMasterAddresses=b:7051",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            without_reversed_keys(&given),
            ["--config", "job.toml", "--job.checkpointsDirectory", "/chk"]
        );
    }

    #[test]
    fn values_are_quoted_for_the_shell_when_needed() {
        assert_eq!(shell_quote("a:7051,b:7051"), "a:7051,b:7051");
        assert_eq!(shell_quote("/tmp/cutover-1.json"), "/tmp/cutover-1.json");
        assert_eq!(shell_quote("my table"), "'my table'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
