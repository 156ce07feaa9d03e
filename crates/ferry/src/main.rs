//! The `ferry` binary: wires the CLI to the engine. Filled in by the
//! replication-job and operations issues.

fn main() {
    println!("ferry {}", env!("CARGO_PKG_VERSION"));
}
