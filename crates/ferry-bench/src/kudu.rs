//! The Kudu side of a benchmark: clusters from the test kit, the bundled
//! `kudu` CLI (table creation, `table copy`, `perf loadgen`, runtime flags),
//! and tablet counters from the tablet servers' JSON `/metrics` endpoint.

use crate::monitor::Monitor;
use crate::procs::shell_line;
use anyhow::{anyhow, bail, Context, Result};
use ferry_testkit::{KuduBinaries, MiniCluster};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One started cluster.
pub struct Cluster {
    pub cluster: MiniCluster,
    pub masters: String,
    pub tserver_rpc: Vec<String>,
    pub tserver_http: Vec<String>,
    pub tserver_flags: Vec<String>,
}

impl Cluster {
    /// Starts `masters` masters (1 or 3) and `tservers` tablet servers
    /// (torn down on drop).
    pub async fn start(
        name: String,
        masters: usize,
        tservers: usize,
        tserver_flags: &[String],
        monitor: &Monitor,
    ) -> Result<Cluster> {
        let started = Instant::now();
        let n = name.clone();
        let mut flags = tserver_flags.to_vec();
        // One log line per LLVM compile, with its CPU time (see codegen_since).
        flags.insert(0, "--codegen_time_compilation=true".to_string());
        // An 8 MB WAL segment preallocated per tablet fills the disk at
        // 1 000 tables (bench/run tables: 2 000 tablets per cluster).
        flags.insert(0, "--log_preallocate_segments=false".to_string());
        let tserver_flags = flags.clone();
        let cluster = tokio::task::spawn_blocking(move || {
            let mut b = MiniCluster::builder()
                .name(n)
                .masters(masters)
                .tservers(tservers);
            for f in flags {
                b = b.tserver_flag(f);
            }
            b.start()
        })
        .await
        .context("cluster start task")?
        .with_context(|| format!("starting cluster {name}"))?;
        monitor.track(cluster.pids());
        let info = cluster.info();
        let c = Cluster {
            masters: cluster.master_addrs_joined(),
            tserver_rpc: info.tservers.iter().map(|d| d.rpc_addr.clone()).collect(),
            tserver_http: info.tservers.iter().map(|d| d.http_addr.clone()).collect(),
            tserver_flags: tserver_flags.to_vec(),
            cluster,
        };
        println!(
            "  cluster {name}: {masters} master(s) + {tservers} tablet servers at {} (up in {:.1} s)",
            c.masters,
            started.elapsed().as_secs_f64()
        );
        Ok(c)
    }

    /// The equivalent CLI invocation, for the record.
    pub fn up_command(&self, tservers: usize) -> String {
        let masters = self.cluster.info().masters.len();
        let masters = if masters > 1 {
            format!(" --masters {masters}")
        } else {
            String::new()
        };
        let flags: String = self
            .tserver_flags
            .iter()
            .map(|f| format!(" --tserver-flag={f}"))
            .collect();
        format!(
            "ferry-testkit up --name {}{masters} --tservers {tservers}{flags}   # via the ferry-testkit library",
            self.cluster.name()
        )
    }

    /// Pids of the tablet servers.
    pub fn tserver_pids(&self) -> Vec<u32> {
        self.cluster
            .info()
            .tservers
            .iter()
            .filter_map(|d| d.pid)
            .collect()
    }

    /// Pids of every daemon.
    pub fn pids(&self) -> Vec<u32> {
        self.cluster
            .info()
            .masters
            .iter()
            .chain(self.cluster.info().tservers.iter())
            .filter_map(|d| d.pid)
            .collect()
    }

    /// Sets a runtime flag on every tablet server.
    pub async fn set_tserver_flag(&self, flag: &str, value: &str) -> Result<()> {
        for ts in &self.tserver_rpc {
            kudu_ok(&["tserver", "set_flag", ts, flag, value]).await?;
        }
        Ok(())
    }

    /// Sums tablet counters of `table` over every tablet server.
    pub async fn table_counters(
        &self,
        table: &str,
        names: &[&str],
    ) -> Result<BTreeMap<String, f64>> {
        let mut sums: BTreeMap<String, f64> = names.iter().map(|n| (n.to_string(), 0.0)).collect();
        let filter = names.join(",");
        for http in &self.tserver_http {
            let body = http_get(
                http,
                &format!("/metrics?types=tablet&metrics={filter}&compact=true"),
            )
            .await?;
            let entities: serde_json::Value = serde_json::from_str(&body)
                .with_context(|| format!("metrics of {http} are not JSON"))?;
            for e in entities.as_array().into_iter().flatten() {
                // The server's attribute filter is a substring match; compare exactly here.
                if e["attributes"]["table_name"].as_str() != Some(table) {
                    continue;
                }
                for m in e["metrics"].as_array().into_iter().flatten() {
                    let (Some(name), Some(v)) = (m["name"].as_str(), m["value"].as_f64()) else {
                        continue;
                    };
                    if let Some(sum) = sums.get_mut(name) {
                        *sum += v;
                    }
                }
            }
        }
        Ok(sums)
    }

    /// Current sizes of the tablet servers' INFO logs (a mark for
    /// [`Cluster::codegen_since`]).
    pub fn log_marks(&self) -> Vec<u64> {
        self.cluster
            .info()
            .tservers
            .iter()
            .map(|d| {
                std::fs::metadata(d.log_dir().join("kudu-tserver.INFO"))
                    .map(|m| m.len())
                    .unwrap_or(0)
            })
            .collect()
    }

    /// LLVM compiles the tablet servers logged since `marks`
    /// (`--codegen_time_compilation`): their number and CPU seconds.
    pub fn codegen_since(&self, marks: &[u64]) -> (u64, f64) {
        let mut marks = marks.to_vec();
        self.codegen_advance(&mut marks)
    }

    /// Like [`Cluster::codegen_since`], and moves `marks` past the complete
    /// lines read, so that the next call counts only what came after (a
    /// line still being written is left for the next call).
    pub fn codegen_advance(&self, marks: &mut [u64]) -> (u64, f64) {
        use std::io::{Read, Seek, SeekFrom};
        let (mut n, mut cpu) = (0u64, 0.0f64);
        for (d, mark) in self.cluster.info().tservers.iter().zip(marks.iter_mut()) {
            let Ok(mut f) = std::fs::File::open(d.log_dir().join("kudu-tserver.INFO")) else {
                continue;
            };
            let mut bytes = Vec::new();
            if f.seek(SeekFrom::Start(*mark)).is_err() || f.read_to_end(&mut bytes).is_err() {
                continue;
            }
            let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            *mark += complete as u64;
            let (k, c) = codegen_lines(&String::from_utf8_lossy(&bytes[..complete]));
            n += k;
            cpu += c;
        }
        (n, cpu)
    }

    /// Codegen cache (queries, hits) summed over the tablet servers.
    pub async fn code_cache(&self) -> Result<(f64, f64)> {
        let (mut q, mut h) = (0.0, 0.0);
        for http in &self.tserver_http {
            let body = http_get(
                http,
                "/metrics?types=server&metrics=code_cache&compact=true",
            )
            .await?;
            let entities: serde_json::Value = serde_json::from_str(&body)?;
            for e in entities.as_array().into_iter().flatten() {
                for m in e["metrics"].as_array().into_iter().flatten() {
                    let v = m["value"].as_f64().unwrap_or(0.0);
                    match m["name"].as_str() {
                        Some("code_cache_queries") => q += v,
                        Some("code_cache_hits") => h += v,
                        _ => {}
                    }
                }
            }
        }
        Ok((q, h))
    }

    /// Write and Scan RPCs the tablet servers have handled so far.
    pub async fn rpc_counts(&self) -> Result<RpcCounts> {
        let mut c = RpcCounts::default();
        for http in &self.tserver_http {
            let body = http_get(
                http,
                "/metrics?types=server&metrics=handler_latency_kudu_tserver_TabletServerService_Write,handler_latency_kudu_tserver_TabletServerService_Scan&compact=true",
            )
            .await?;
            let entities: serde_json::Value = serde_json::from_str(&body)?;
            for e in entities.as_array().into_iter().flatten() {
                for m in e["metrics"].as_array().into_iter().flatten() {
                    let n = m["total_count"].as_u64().unwrap_or(0);
                    match m["name"].as_str() {
                        Some("handler_latency_kudu_tserver_TabletServerService_Write") => {
                            c.write += n
                        }
                        Some("handler_latency_kudu_tserver_TabletServerService_Scan") => {
                            c.scan += n
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(c)
    }

    /// Flushes `table`'s MemRowSets to disk (as a long-lived table would
    /// be): lowers `flush_threshold_secs` until every tablet's MemRowSet
    /// is small, then restores the default. Returns the seconds it took.
    pub async fn flush_table(&self, table: &str, timeout: Duration) -> Result<f64> {
        let started = Instant::now();
        self.set_tserver_flag("flush_threshold_secs", "1").await?;
        let outcome = async {
            loop {
                let mrs = self.table_counters(table, &["memrowset_size"]).await?;
                let bytes = mrs.get("memrowset_size").copied().unwrap_or(0.0);
                // An empty MemRowSet still reports a few hundred bytes.
                if bytes < 256.0 * 1024.0 {
                    return Ok(());
                }
                if started.elapsed() > timeout {
                    bail!("{table}: MemRowSets still hold {bytes:.0} bytes after {timeout:?}");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        .await;
        self.set_tserver_flag("flush_threshold_secs", "120").await?;
        outcome.map(|_| started.elapsed().as_secs_f64())
    }
}

/// Compiles logged in `text` (the tablet servers' `code-generating row
/// projector` timing lines): their number and CPU seconds (user + sys).
fn codegen_lines(text: &str) -> (u64, f64) {
    let (mut n, mut cpu) = (0u64, 0.0f64);
    for line in text
        .lines()
        .filter(|l| l.contains("code-generating row projector"))
    {
        n += 1;
        cpu += timing_field(line, "user") + timing_field(line, "sys");
    }
    (n, cpu)
}

/// `user 0.090s` in a glog timing line.
fn timing_field(line: &str, name: &str) -> f64 {
    let pat = format!("{name} ");
    line.find(&pat)
        .and_then(|i| line[i + pat.len()..].split_whitespace().next())
        .and_then(|v| v.trim_end_matches('s').parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// RPC counters of a cluster's tablet servers.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct RpcCounts {
    pub write: u64,
    pub scan: u64,
}

impl std::ops::Sub for RpcCounts {
    type Output = RpcCounts;
    fn sub(self, o: RpcCounts) -> RpcCounts {
        RpcCounts {
            write: self.write.saturating_sub(o.write),
            scan: self.scan.saturating_sub(o.scan),
        }
    }
}

/// The `kudu` executable and its environment.
pub fn kudu_program() -> Result<(std::path::PathBuf, Vec<(&'static str, String)>)> {
    let bins = KuduBinaries::get().map_err(|e| anyhow!("{e}"))?;
    let env = bins
        .env()
        .into_iter()
        .map(|(k, v)| {
            let k: &'static str = match k.to_str() {
                Some("LD_LIBRARY_PATH") => "LD_LIBRARY_PATH",
                Some("SASL_PATH") => "SASL_PATH",
                _ => "KUDU_ENV",
            };
            (k, v.to_string_lossy().into_owned())
        })
        .collect();
    Ok((bins.kudu(), env))
}

/// Runs `kudu args` to completion; returns stdout, or an error with stderr.
pub async fn kudu_ok(args: &[&str]) -> Result<String> {
    let (program, env) = kudu_program()?;
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let out = tokio::process::Command::new(&program)
        .args(&args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("running kudu {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "kudu {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The copy-pasteable command line of `kudu args`.
pub fn kudu_line(args: &[String]) -> Result<String> {
    let (program, env) = kudu_program()?;
    Ok(shell_line(&env, program.as_os_str(), args))
}

/// A measured `kudu` run: its usage, stdout and stderr.
pub type KuduRun = crate::procs::MeasuredRun;

/// Runs `kudu args` as a measured child (stdout/stderr kept under `dir`).
pub async fn kudu_measured(
    args: &[String],
    dir: &Path,
    label: &str,
    monitor: &Monitor,
    timeout: Duration,
) -> Result<KuduRun> {
    let (program, env) = kudu_program()?;
    crate::procs::run_measured(
        program.as_os_str(),
        args,
        &env,
        (dir, label),
        monitor,
        timeout,
    )
    .await
}

pub use crate::procs::tail;

/// A plain HTTP/1.0 GET (Kudu's embedded web server answers and closes).
pub async fn http_get(host_port: &str, path: &str) -> Result<String> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(host_port)
            .await
            .with_context(|| format!("connecting to http://{host_port}"))?;
        s.write_all(
            format!("GET {path} HTTP/1.0\r\nHost: {host_port}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| anyhow!("http://{host_port}{path}: no HTTP header"))?;
        let status = head.lines().next().unwrap_or_default();
        if !status.contains(" 200") {
            bail!("http://{host_port}{path}: {status}");
        }
        Ok(body.to_string())
    };
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .map_err(|_| anyhow!("http://{host_port}{path}: timed out"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_codegen_timing_lines() {
        let text = "I1202 15:04:05.1 1 compilation_manager.cc:200] Time spent code-generating row projector: real 0.152s\tuser 0.140s\tsys 0.010s\n\
                    I1202 15:04:05.2 1 tablet_service.cc:1] something else user 9.000s\n\
                    I1202 15:04:06.1 1 compilation_manager.cc:200] Time spent code-generating row projector: real 0.101s\tuser 0.090s\tsys 0.000s\n";
        let (n, cpu) = codegen_lines(text);
        assert_eq!(n, 2);
        assert!((cpu - 0.24).abs() < 1e-9, "{cpu}");
        assert_eq!(timing_field("no timing here", "user"), 0.0);
    }
}
