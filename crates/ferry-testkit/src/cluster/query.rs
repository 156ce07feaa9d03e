//! Questions about a running cluster, answered by the bundled `kudu` CLI:
//! which tablet servers heartbeat, which master leads, and polling until a
//! condition holds.

use super::MiniCluster;
use crate::{io_err, Error, Result};
use std::collections::HashMap;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// A tablet server as the leader master sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TserverStatus {
    pub uuid: String,
    pub rpc_addr: String,
    /// Time since its last heartbeat, as the master reports it.
    pub since_heartbeat: Duration,
    /// Heartbeating recently (within 3 s).
    pub live: bool,
}

/// A master and its role as reported by `kudu master list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterStatus {
    pub rpc_addr: String,
    pub role: String,
}

impl MiniCluster {
    /// Runs the bundled `kudu` CLI with `args` (as the kit's superuser
    /// `kudu/testkit`, with a fresh ticket, on a Kerberized cluster).
    pub fn kudu(&self, args: &[&str]) -> Result<Output> {
        self.bins
            .command()
            .envs(self.kerberos_env()?)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(io_err(format!("running kudu {}", args.join(" "))))
    }

    /// Runs the `kudu` CLI and returns its stdout, or an error with its
    /// stderr if it exited non-zero.
    pub fn kudu_ok(&self, args: &[&str]) -> Result<String> {
        let out = self.kudu(args)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(Error::NotReady(format!(
                "kudu {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Tablet servers known to the leader master (`kudu tserver list`).
    pub fn tserver_status(&self) -> Result<Vec<TserverStatus>> {
        let masters = self.master_addrs_joined();
        let out = self.kudu_ok(&[
            "tserver",
            "list",
            &masters,
            "-columns=uuid,rpc-addresses,heartbeat",
            "-format=json",
            "-timeout_ms=5000",
        ])?;
        let rows: Vec<HashMap<String, serde_json::Value>> = serde_json::from_str(out.trim())
            .map_err(|e| {
                Error::NotReady(format!(
                    "unexpected `kudu tserver list` output {out:?}: {e}"
                ))
            })?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let text = |k: &str| {
                    row.get(k)
                        .map(|v| {
                            v.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| v.to_string())
                        })
                        .unwrap_or_default()
                };
                let since_heartbeat = parse_heartbeat(&text("heartbeat"));
                TserverStatus {
                    uuid: text("uuid"),
                    rpc_addr: text("rpc-addresses"),
                    since_heartbeat,
                    live: since_heartbeat < Duration::from_secs(3),
                }
            })
            .collect())
    }

    /// Masters and their Raft roles (`kudu master list`).
    pub fn master_status(&self) -> Result<Vec<MasterStatus>> {
        let masters = self.master_addrs_joined();
        let out = self.kudu_ok(&[
            "master",
            "list",
            &masters,
            "-columns=rpc-addresses,role",
            "-format=json",
            "-timeout_ms=5000",
        ])?;
        let rows: Vec<HashMap<String, serde_json::Value>> = serde_json::from_str(out.trim())
            .map_err(|e| {
                Error::NotReady(format!("unexpected `kudu master list` output {out:?}: {e}"))
            })?;
        Ok(rows
            .into_iter()
            .map(|row| MasterStatus {
                rpc_addr: row
                    .get("rpc-addresses")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string(),
                role: row
                    .get("role")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string(),
            })
            .collect())
    }

    /// Index of the current leader master.
    pub fn leader_master(&self) -> Result<usize> {
        let status = self.master_status()?;
        let leader = status
            .iter()
            .find(|m| m.role == "LEADER")
            .ok_or_else(|| Error::NotReady(format!("no leader master: {status:?}")))?;
        self.info
            .masters
            .iter()
            .position(|d| d.rpc_addr == leader.rpc_addr)
            .ok_or_else(|| {
                Error::NotReady(format!("leader {} is not one of ours", leader.rpc_addr))
            })
    }

    /// Polls `check` every 250 ms until it returns true or `timeout` passes.
    /// Errors from `check` count as "not yet"; the last one is reported.
    pub fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&Self) -> Result<bool>,
    ) -> Result<()> {
        let start = Instant::now();
        loop {
            let last = match check(self) {
                Ok(true) => return Ok(()),
                Ok(false) => "condition false".to_string(),
                Err(e) => e.to_string(),
            };
            if start.elapsed() > timeout {
                return Err(Error::NotReady(format!(
                    "cluster '{}': {what} not reached within {timeout:?} ({last}); logs under {}",
                    self.info.name,
                    self.info.root.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// `kudu tserver list` prints the heartbeat age like `0.523s`.
fn parse_heartbeat(text: &str) -> Duration {
    let t = text.trim();
    let secs = t
        .strip_suffix("ms")
        .and_then(|v| v.parse::<f64>().ok().map(|ms| ms / 1000.0))
        .or_else(|| t.strip_suffix('s').and_then(|v| v.parse::<f64>().ok()))
        .or_else(|| t.parse::<f64>().ok());
    match secs {
        Some(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s),
        _ => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_formats() {
        assert_eq!(parse_heartbeat("0.5s"), Duration::from_millis(500));
        assert_eq!(parse_heartbeat("250ms"), Duration::from_millis(250));
        assert_eq!(parse_heartbeat("garbage"), Duration::MAX);
    }
}
