//! Kudu's `/metrics_prometheus` answer (the Prometheus text format 0.0.4).
//! Since Kudu 1.18 (KUDU-3563) it has every tablet replica's metrics, each
//! named `kudu_tablet_<tablet id>_<metric>` (no label names the tablet or
//! its table), beside the server's `kudu_tserver_<metric>`. The endpoint
//! takes no filter: every answer is the whole dump, read here line by line
//! for the few samples asked for.

use std::collections::HashMap;

/// Where a tablet replica's metric names start.
const TABLET_PREFIX: &[u8] = b"kudu_tablet_";

/// The values of `names` (in that order) of every tablet replica whose id
/// `wanted` accepts; a metric the dump lacks is `None`, and so is a value
/// that is not a whole number. An answer without a single Kudu metric is
/// refused (a proxy's page, an HTML error).
pub(crate) fn tablet_values<const N: usize>(
    body: &[u8],
    names: &[&str; N],
    wanted: impl Fn(&str) -> bool,
) -> Result<HashMap<String, [Option<u64>; N]>, String> {
    let mut out: HashMap<String, [Option<u64>; N]> = HashMap::new();
    let mut kudu_samples = 0usize;
    // The family a `# TYPE … summary|histogram` line named last: its
    // samples are quantiles or buckets, no value of the metric itself.
    let mut distribution: Option<&[u8]> = None;
    for line in body.split(|&b| b == b'\n') {
        if let Some((family, kind)) = type_line(line) {
            distribution = matches!(kind, b"summary" | b"histogram").then_some(family);
            continue;
        }
        let Some((name, rest)) = sample_name(line) else {
            continue;
        };
        if !name.starts_with(b"kudu_") {
            continue;
        }
        kudu_samples += 1;
        if distribution == Some(name) {
            continue;
        }
        let Some((id, metric)) = tablet_metric(name) else {
            continue;
        };
        let Some(i) = names.iter().position(|n| n.as_bytes() == metric) else {
            continue;
        };
        let Ok(id) = std::str::from_utf8(id) else {
            continue;
        };
        if !wanted(id) {
            continue;
        }
        let value = sample_value(rest);
        let slot = out.entry(id.to_owned()).or_insert([None; N]);
        slot[i] = value;
    }
    if kudu_samples == 0 {
        return Err("no Kudu metric in the Prometheus text".to_owned());
    }
    Ok(out)
}

/// A `# TYPE <family> <kind>` line's family and kind.
fn type_line(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = line.strip_prefix(b"# TYPE ")?;
    let mut words = rest
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    Some((words.next()?, words.next()?))
}

/// A sample line's metric name and what follows it; `None` for comments
/// (`# HELP`, `# TYPE`) and blank lines.
fn sample_name(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let start = line.iter().position(|b| !b.is_ascii_whitespace())?;
    let line = &line[start..];
    if line[0] == b'#' {
        return None;
    }
    let end = line
        .iter()
        .position(|&b| b == b'{' || b.is_ascii_whitespace())
        .unwrap_or(line.len());
    Some((&line[..end], &line[end..]))
}

/// `kudu_tablet_<id>_<metric>` as (id, metric). Tablet ids are hex
/// (no `_`), so the id ends at the first `_` after the prefix.
fn tablet_metric(name: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = name.strip_prefix(TABLET_PREFIX)?;
    let split = rest.iter().position(|&b| b == b'_')?;
    let (id, metric) = (&rest[..split], &rest[split + 1..]);
    (!id.is_empty() && !metric.is_empty()).then_some((id, metric))
}

/// The value after a sample's name (`{labels} value [timestamp]`) as a
/// whole number.
fn sample_value(rest: &[u8]) -> Option<u64> {
    let rest = if rest.first() == Some(&b'{') {
        after_labels(rest)?
    } else {
        rest
    };
    let value = rest
        .split(|b| b.is_ascii_whitespace())
        .find(|field| !field.is_empty())?;
    if !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// What follows the `{…}` that `rest` starts with; a `}` inside a quoted
/// label value (with `\` escapes) does not end it.
fn after_labels(rest: &[u8]) -> Option<&[u8]> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, &b) in rest.iter().enumerate().skip(1) {
        match (quoted, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (_, false, b'"') => quoted = !quoted,
            (false, _, b'}') => return Some(&rest[i + 1..]),
            _ => {}
        }
    }
    None
}
