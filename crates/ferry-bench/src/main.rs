//! `ferry-bench`: reproducible benchmarks of ferry on one machine, against
//! real local Kudu clusters from the test kit. Start it through `bench/run`
//! (which builds everything in release mode first).
//!
//! ```text
//! bench/run snapshot [--rows N] [--threads T]
//! bench/run lag [--seconds S] [--rate R] [--initial-rows N]
//! bench/run idle-cycle [--sizes 1000000,4000000] [--windows K]
//! bench/run memory [--sizes 1000000,4000000]
//! bench/run failover [--takeovers 5] [--rate 300]
//! bench/run verify [--rows N] [--threads T] [--repeat R]
//! bench/run soak [--minutes N] [--fault-every K] [--rate R] [--seed S] [--faults a,b]
//! bench/run kafka [--rows N] [--partitions P] [--guarantees at-least-once,exactly-once] [--repeat R]
//! bench/run all                      # snapshot, lag, idle-cycle, memory
//! ```
//!
//! Each scenario prints a table, the exact commands it ran, the core
//! count, load and versions, and writes `bench/results/<scenario>.json`.

mod data;
mod env;
mod ferry;
mod kudu;
mod monitor;
mod procs;
mod report;
mod scenarios;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ferry-bench",
    version,
    about = "Benchmarks of ferry against kudu table copy and the sink's write limit"
)]
struct Cli {
    /// The ferry binary to measure.
    #[arg(long, global = true, default_value = "target/release/ferry")]
    ferry: PathBuf,
    /// Where `<scenario>.json` goes.
    #[arg(long, global = true, default_value = "bench/results")]
    results: PathBuf,
    /// Where ferry logs, checkpoints and tool output go (one folder per run).
    #[arg(long, global = true)]
    work: Option<PathBuf>,
    /// Extra argument for every `ferry run` (repeatable), e.g.
    /// --ferry-arg=--writer.maxBufferSize=10000, to try settings.
    #[arg(long = "ferry-arg", global = true, allow_hyphen_values = true)]
    ferry_args: Vec<String>,
    /// Profile every `ferry run` with `perf record -g` (reports in the work folder).
    #[arg(long, global = true)]
    perf: bool,
    /// Extra flag for the source cluster's tablet servers (repeatable), e.g.
    /// --source-tserver-flag=--mrs_use_codegen=false.
    #[arg(
        long = "source-tserver-flag",
        global = true,
        allow_hyphen_values = true
    )]
    source_tserver_flags: Vec<String>,
    /// Tablet servers per cluster (each cluster also has one master).
    #[arg(long, global = true, default_value_t = 3)]
    tservers: usize,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand)]
enum Scenario {
    /// Copy one table three ways: ferry, kudu table copy, kudu perf loadgen.
    Snapshot {
        #[arg(long, default_value_t = 2_000_000)]
        rows: u64,
        /// ferry -p, table copy / loadgen --num_threads (default: cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Rounds of the three runs (rotating order); medians are reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// Replication lag under a steady insert/update/delete load.
    Lag {
        #[arg(long, default_value_t = 120)]
        seconds: u64,
        /// Operations per second.
        #[arg(long, default_value_t = 5_000.0)]
        rate: f64,
        /// Rows in the source table before the writer starts.
        #[arg(long, default_value_t = 1_000_000)]
        initial_rows: u64,
        /// ferry -p (default: ferry's own default, the core count).
        #[arg(long)]
        parallelism: Option<usize>,
    },
    /// Cost of one diff window with no changes, on tables of several sizes.
    IdleCycle {
        #[arg(long, value_delimiter = ',', default_value = "1000000,4000000")]
        sizes: Vec<u64>,
        /// Idle windows measured per size.
        #[arg(long, default_value_t = 15)]
        windows: usize,
    },
    /// Peak RSS of ferry during snapshots of tables of several sizes.
    Memory {
        #[arg(long, value_delimiter = ',', default_value = "1000000,4000000")]
        sizes: Vec<u64>,
    },
    /// Faults every K seconds for N minutes under a mixed workload;
    /// recovery, lag, restarts and cell-by-cell comparisons (not in `all`).
    Soak {
        /// How long faults are injected (the run ends with one more
        /// recovery and the final comparison).
        #[arg(long, default_value_t = 30.0, value_parser = positive_minutes)]
        minutes: f64,
        /// Seconds between the starts of two faults.
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(10..))]
        fault_every: u64,
        /// Workload operations per second (upserts, updates, deletes).
        #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..))]
        rate: u32,
        /// Seed of the fault sequence and the workload (default: from the clock).
        #[arg(long)]
        seed: Option<u64>,
        /// The faults to draw from (default: all).
        #[arg(long, value_delimiter = ',', value_enum)]
        faults: Vec<scenarios::soak::FaultKind>,
    },
    /// Warm-standby takeovers (kill -9 of the active): RTO and the DR
    /// copy's RPO per takeover, then a cell-by-cell comparison (not in `all`).
    Failover {
        /// Takeovers to measure.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
        takeovers: u64,
        /// Workload operations per second.
        #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..))]
        rate: u32,
    },
    /// `ferry verify` (server and client checksums) against `kudu table
    /// scan` and `kudu cluster ksck -checksum_scan` of both tables (not in
    /// `all`).
    Verify {
        /// Rows per table.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        /// ferry verify -p, kudu table scan --num_threads (default: cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Rounds of the runs (rotating order); medians are reported.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// ferry Kudu → Kafka and Kafka → Kudu against a real local broker,
    /// next to Kafka's own producer and consumer perf tests (not in `all`).
    Kafka {
        /// Rows of the source table (and records of each topic).
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        /// ferry -p (default: cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Partitions of every topic (ferry's and the producer test's).
        #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..))]
        partitions: u32,
        /// Delivery guarantees of the Kudu → Kafka runs (default:
        /// at-least-once,exactly-once); each also sets how the producer
        /// test sends.
        #[arg(long, value_delimiter = ',', value_enum)]
        guarantees: Vec<scenarios::kafka::Guarantee>,
        /// Record format (job.sinkFormat and job.sourceFormat).
        #[arg(long, value_enum, default_value_t = scenarios::kafka::Format::DebeziumJson)]
        format: scenarios::kafka::Format,
        /// Rounds (medians are reported).
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// The snapshot, lag, idle-cycle and memory scenarios at their default
    /// sizes, one after the other.
    All,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferry-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let ferry_bin = std::fs::canonicalize(&cli.ferry).with_context(|| {
        format!(
            "ferry binary {} (build it: cargo build --release -p ferry)",
            cli.ferry.display()
        )
    })?;
    if cli.tservers == 0 {
        bail!("--tservers must be at least 1");
    }
    let repo = std::env::current_dir()?;
    ferry_testkit::KuduBinaries::get().map_err(|e| anyhow::anyhow!("{e}"))?;
    let ctx = scenarios::Ctx {
        versions: env::Versions::probe(&ferry_bin, &repo),
        machine: env::Machine::probe(),
        ferry_bin,
        results_dir: cli.results,
        work_root: cli
            .work
            .unwrap_or_else(|| std::env::temp_dir().join("ferry-bench")),
        tservers: cli.tservers,
        ferry_args: cli.ferry_args,
        perf: cli.perf,
        source_tserver_flags: cli.source_tserver_flags,
        monitor: monitor::Monitor::start(),
    };
    let cores = ctx.machine.nproc;
    match cli.scenario {
        Scenario::Snapshot {
            rows,
            threads,
            repeat,
        } => {
            if rows == 0 || repeat == 0 {
                bail!("--rows and --repeat must be positive");
            }
            scenarios::snapshot::run(&ctx, rows, threads.unwrap_or(cores).max(1), repeat).await?;
        }
        Scenario::Lag {
            seconds,
            rate,
            initial_rows,
            parallelism,
        } => {
            scenarios::lag::run(&ctx, seconds, rate, initial_rows, parallelism).await?;
        }
        Scenario::IdleCycle { sizes, windows } => {
            check_sizes(&sizes)?;
            scenarios::idle::run(&ctx, &sizes, windows.max(1)).await?;
        }
        Scenario::Memory { sizes } => {
            check_sizes(&sizes)?;
            scenarios::memory::run(&ctx, &sizes).await?;
        }
        Scenario::Soak {
            minutes,
            fault_every,
            rate,
            seed,
            faults,
        } => {
            let seed = seed.unwrap_or_else(|| env::unix_micros() % 1_000_000);
            let kinds = if faults.is_empty() {
                scenarios::soak::FaultKind::ALL.to_vec()
            } else {
                faults
            };
            let params = scenarios::soak::Params {
                minutes,
                fault_every_s: fault_every,
                rate,
                seed,
                kinds,
            };
            scenarios::soak::run(&ctx, params).await?;
        }
        Scenario::Failover { takeovers, rate } => {
            scenarios::failover::run(&ctx, takeovers as usize, rate).await?;
        }
        Scenario::Verify {
            rows,
            threads,
            repeat,
        } => {
            if rows == 0 || repeat == 0 {
                bail!("--rows and --repeat must be positive");
            }
            scenarios::verify::run(&ctx, rows, threads.unwrap_or(cores).max(1), repeat).await?;
        }
        Scenario::Kafka {
            rows,
            threads,
            partitions,
            guarantees,
            format,
            repeat,
        } => {
            if rows == 0 || repeat == 0 {
                bail!("--rows and --repeat must be positive");
            }
            let mut guarantees = guarantees;
            if guarantees.is_empty() {
                guarantees = vec![
                    scenarios::kafka::Guarantee::AtLeastOnce,
                    scenarios::kafka::Guarantee::ExactlyOnce,
                ];
            }
            let mut seen = Vec::new();
            guarantees.retain(|g| {
                let first = !seen.contains(g);
                seen.push(*g);
                first
            });
            let params = scenarios::kafka::Params {
                rows,
                threads: threads.unwrap_or(cores).max(1),
                partitions,
                repeat,
                guarantees,
                format,
            };
            scenarios::kafka::run(&ctx, params).await?;
        }
        Scenario::All => {
            scenarios::snapshot::run(&ctx, 2_000_000, cores, 3).await?;
            scenarios::lag::run(&ctx, 120, 5_000.0, 1_000_000, None).await?;
            scenarios::idle::run(&ctx, &[1_000_000, 4_000_000], 15).await?;
            scenarios::memory::run(&ctx, &[1_000_000, 4_000_000]).await?;
        }
    }
    Ok(())
}

fn positive_minutes(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(m) if m.is_finite() && m > 0.0 => Ok(m),
        _ => Err(format!("'{s}' is not a positive number of minutes")),
    }
}

fn check_sizes(sizes: &[u64]) -> Result<()> {
    if sizes.is_empty() || sizes.contains(&0) {
        bail!("--sizes needs one or more positive row counts");
    }
    Ok(())
}
