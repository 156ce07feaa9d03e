//! What a result must say about where it was measured: the machine (cores,
//! CPU model, memory), its load, the versions of everything that ran, and
//! the time.

use serde::Serialize;
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// The machine a scenario ran on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// `nproc`: cores this process may use.
    pub nproc: usize,
    /// `lscpu` "Model name" (or /proc/cpuinfo's).
    pub cpu_model: String,
    pub mem_total_gib: f64,
    pub kernel: String,
    pub hypervisor: Option<String>,
}

impl Machine {
    pub fn probe() -> Machine {
        let nproc = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let lscpu = run_text("lscpu", &[]).unwrap_or_default();
        let field = |name: &str| {
            lscpu.lines().find_map(|l| {
                l.strip_prefix(name)
                    .map(|v| v.trim_start_matches(':').trim().to_string())
            })
        };
        let cpu_model = field("Model name")
            .or_else(cpuinfo_model)
            .unwrap_or_else(|| "unknown".into());
        let mem_total_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
            .map(|kib| (kib / 1024.0 / 1024.0 * 10.0).round() / 10.0)
            .unwrap_or(0.0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        Machine {
            nproc,
            cpu_model,
            mem_total_gib,
            kernel,
            hypervisor: field("Hypervisor vendor"),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "{} cores ({}{}), {:.1} GiB RAM, Linux {}",
            self.nproc,
            self.cpu_model,
            self.hypervisor
                .as_deref()
                .map(|h| format!(", {h} guest"))
                .unwrap_or_default(),
            self.mem_total_gib,
            self.kernel
        )
    }
}

fn cpuinfo_model() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines().find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        })
    })
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(f64::NAN));
    [
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
    ]
}

/// Versions of what ran.
#[derive(Debug, Clone, Serialize)]
pub struct Versions {
    pub ferry: String,
    pub ferry_bench: String,
    pub kudu: String,
    pub rustc: String,
    /// `git rev-parse --short HEAD` of the checkout (plus `-dirty` when the
    /// work tree has changes), if it is a git checkout.
    pub git: Option<String>,
}

impl Versions {
    pub fn probe(ferry_bin: &Path, repo: &Path) -> Versions {
        let ferry = run_text(&ferry_bin.to_string_lossy(), &["--version"])
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let kudu = ferry_testkit::KuduBinaries::get()
            .ok()
            .and_then(|b| b.command().arg("--version").output().ok())
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_string()
            })
            .unwrap_or_else(|| "unknown".into());
        let rustc = run_text("rustc", &["--version"])
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let repo_s = repo.to_string_lossy().into_owned();
        let git = run_text("git", &["-C", &repo_s, "rev-parse", "--short", "HEAD"]).map(|rev| {
            let dirty = run_text(
                "git",
                &[
                    "-C",
                    &repo_s,
                    "status",
                    "--porcelain",
                    "--untracked-files=no",
                ],
            )
            .is_some_and(|s| !s.trim().is_empty());
            format!("{}{}", rev.trim(), if dirty { "-dirty" } else { "" })
        });
        Versions {
            ferry,
            ferry_bench: env!("CARGO_PKG_VERSION").to_string(),
            kudu,
            rustc,
            git,
        }
    }
}

fn run_text(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Microseconds since the Unix epoch.
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time.
pub fn iso8601(unix_secs: f64) -> String {
    let secs = unix_secs.floor() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (the classic
/// era-based conversion).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(iso8601(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400.0), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_798_761_599.0), "2026-12-31T23:59:59Z");
    }
}
