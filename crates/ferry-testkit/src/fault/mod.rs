//! Faults for tests that must survive them: a network namespace whose
//! traffic can be cut off ([`NetNs`]), a small filesystem that can be made
//! read-only ([`SmallFs`]). Whole-cluster hangs and outages are methods of
//! [`crate::MiniCluster`] (`pause_all`, `stop_all`, ...).
//!
//! Both need root (network namespaces, nftables, mounts); everything they
//! set up is undone on drop, also when a test panics.

mod netns;
mod smallfs;

pub use netns::NetNs;
pub use smallfs::SmallFs;

use crate::{io_err, Error, Result};
use std::process::{Command, Stdio};

/// Runs `program args...`; an error carries its stderr.
fn run(program: &str, args: &[&str]) -> Result<String> {
    run_with_input(program, args, None)
}

fn run_with_input(program: &str, args: &[&str], input: Option<&str>) -> Result<String> {
    use std::io::Write;
    let line = format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(format!("running {line}")))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .map_err(io_err(format!("writing to {line}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(io_err(format!("running {line}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Fault(format!(
            "{line} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
