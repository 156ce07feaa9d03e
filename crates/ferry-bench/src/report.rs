//! A scenario's report: the figures as a printed table and as
//! `bench/results/<scenario>.json`, with the exact commands that ran, the
//! machine, its load and the versions.

use crate::env::{iso8601, unix_now, Machine, Versions};
use crate::monitor::{LoadSummary, Monitor};
use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub struct Report {
    pub scenario: String,
    started_unix: f64,
    started: Instant,
    pub machine: Machine,
    pub versions: Versions,
    pub params: Value,
    pub commands: Vec<String>,
    pub notes: Vec<String>,
    pub results: serde_json::Map<String, Value>,
    pub tables: Vec<Table>,
    pub work_dir: PathBuf,
}

/// A printed table.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: &str, header: &[&str]) -> Table {
        Table {
            title: title.into(),
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut width = vec![0usize; n];
        for r in std::iter::once(&self.header).chain(self.rows.iter()) {
            for (i, c) in r.iter().enumerate().take(n) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let cells: Vec<String> = (0..n)
                .map(|i| {
                    let c = r.get(i).map(String::as_str).unwrap_or("");
                    if i == 0 {
                        format!("{c:<w$}", w = width[i])
                    } else {
                        format!("{c:>w$}", w = width[i])
                    }
                })
                .collect();
            format!("| {} |", cells.join(" | "))
        };
        let sep: Vec<String> = width
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    format!(":{}", "-".repeat(*w + 1))
                } else {
                    format!("{}:", "-".repeat(*w + 1))
                }
            })
            .collect();
        let mut out = format!(
            "{}\n\n{}\n|{}|\n",
            self.title,
            line(&self.header),
            sep.join("|")
        );
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

impl Report {
    pub fn new(
        scenario: &str,
        machine: Machine,
        versions: Versions,
        params: Value,
        work_dir: PathBuf,
    ) -> Report {
        Report {
            scenario: scenario.into(),
            started_unix: unix_now(),
            started: Instant::now(),
            machine,
            versions,
            params,
            commands: Vec::new(),
            notes: Vec::new(),
            results: serde_json::Map::new(),
            tables: Vec::new(),
            work_dir,
        }
    }

    /// Records (and echoes) a command that ran.
    pub fn command(&mut self, line: impl Into<String>) {
        let line = line.into();
        println!("  $ {line}");
        self.commands.push(line);
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    pub fn result(&mut self, key: &str, value: impl Serialize) {
        let v = serde_json::to_value(value).unwrap_or(Value::Null);
        self.results.insert(key.into(), v);
    }

    /// Prints everything and writes `<dir>/<scenario>.json` (through a
    /// `.tmp` file, so a half-written result never replaces a good one).
    pub fn finish(self, results_dir: &Path, monitor: &Monitor) -> Result<PathBuf> {
        let load: LoadSummary = monitor.summary();
        let duration_s = self.started.elapsed().as_secs_f64();
        println!();
        println!("== {} — {} ==", self.scenario, iso8601(self.started_unix));
        println!("machine: {}", self.machine.describe());
        println!(
            "versions: {}; {}; {}; git {}",
            self.versions.ferry,
            self.versions.kudu,
            self.versions.rustc,
            self.versions.git.as_deref().unwrap_or("-")
        );
        println!(
            "load average: before {:.2} / after {:.2} / max {:.2} (1 min); other processes kept {:.2} cores busy on average (max {:.2})",
            load.load_average_before[0],
            load.load_average_after[0],
            load.load_average_1m_max,
            load.other_cores_mean,
            load.other_cores_max
        );
        println!(
            "run time: {duration_s:.0} s; work folder {}",
            self.work_dir.display()
        );
        println!();
        for t in &self.tables {
            println!("{}", t.render());
        }
        if !self.notes.is_empty() {
            println!("notes:");
            for n in &self.notes {
                println!("  - {n}");
            }
            println!();
        }
        println!("commands:");
        for c in &self.commands {
            println!("  $ {c}");
        }
        let json = serde_json::json!({
            "scenario": self.scenario,
            "date": iso8601(self.started_unix),
            "duration_s": (duration_s * 10.0).round() / 10.0,
            "machine": self.machine,
            "load": load,
            "versions": self.versions,
            "params": self.params,
            "results": Value::Object(self.results),
            "tables": self.tables,
            "notes": self.notes,
            "commands": self.commands,
            "work_dir": self.work_dir,
        });
        std::fs::create_dir_all(results_dir)?;
        let path = results_dir.join(format!("{}.json", self.scenario));
        let tmp = results_dir.join(format!("{}.json.tmp", self.scenario));
        std::fs::write(&tmp, to_json_text(&json) + "\n")
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
        println!("\nwrote {}", path.display());
        Ok(path)
    }
}

/// Pretty JSON that keeps long series short: an array of numbers is one
/// line, and an array of flat objects or number arrays puts each element on
/// one line.
pub fn to_json_text(v: &Value) -> String {
    let mut out = String::new();
    write_value(v, 0, &mut out);
    out
}

fn is_flat(v: &Value) -> bool {
    match v {
        // Numbers on one line; strings (commands, notes) one per line.
        Value::Array(a) => a
            .iter()
            .all(|x| x.is_number() || x.is_boolean() || x.is_null()),
        Value::Object(o) => o.values().all(|x| !x.is_array() && !x.is_object()),
        _ => true,
    }
}

fn write_value(v: &Value, depth: usize, out: &mut String) {
    let pad = |d: usize| "  ".repeat(d);
    match v {
        Value::Object(o) if !o.is_empty() => {
            out.push_str("{\n");
            for (i, (k, x)) in o.iter().enumerate() {
                out.push_str(&pad(depth + 1));
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_value(x, depth + 1, out);
                out.push_str(if i + 1 < o.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(depth));
            out.push('}');
        }
        Value::Array(a) if !a.is_empty() && !is_flat(v) => {
            let one_per_line = a.iter().all(is_flat);
            out.push_str("[\n");
            for (i, x) in a.iter().enumerate() {
                out.push_str(&pad(depth + 1));
                if one_per_line {
                    out.push_str(&x.to_string());
                } else {
                    write_value(x, depth + 1, out);
                }
                out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(depth));
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Formatting helpers.
pub fn f0(v: f64) -> String {
    if v.is_finite() {
        let s = format!("{:.0}", v);
        // thousands separators with a thin space for readability
        let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(' ');
            }
            out.push(c);
        }
        format!("{sign}{out}")
    } else {
        "-".into()
    }
}

pub fn f1(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

pub fn f2(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "-".into()
    }
}

/// The p-th percentile (0..=100) by nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(f0(1234567.4), "1 234 567");
        assert_eq!(f0(-999.0), "-999");
        assert_eq!(f0(f64::NAN), "-");
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(percentile(&v, 50.0), 5.0);
        assert_eq!(percentile(&v, 99.0), 10.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
    }

    #[test]
    fn json_text_round_trips_and_keeps_series_short() {
        let v = serde_json::json!({"a": [1, 2, 3], "s": [{"t": 1, "x": true}, {"t": 2, "x": false}], "n": {"k": "v"}, "e": [], "c": ["x", "y"]});
        let text = to_json_text(&v);
        assert_eq!(serde_json::from_str::<Value>(&text).expect("valid"), v);
        assert!(text.contains("\"a\": [1,2,3]"), "{text}");
        assert!(text.contains("    {\"t\":1,\"x\":true},\n"), "{text}");
        assert!(
            text.contains("\"c\": [\n    \"x\",\n    \"y\"\n  ]"),
            "{text}"
        );
    }

    #[test]
    fn table_renders_as_markdown() {
        let mut t = Table::new("T", &["a", "b"]);
        t.row(vec!["x".into(), "12".into()]);
        let r = t.render();
        assert!(r.contains("| a |  b |"), "{r}");
        assert!(r.contains("| x | 12 |"), "{r}");
    }
}
