//! `ferry-bench`: reproducible benchmarks of ferry on one machine, against
//! real local Kudu clusters from the test kit. Start it through `bench/run`
//! (which builds everything in release mode first).
//!
//! ```text
//! bench/run snapshot [--rows N] [--threads T]
//! bench/run lag [--seconds S] [--rate R | --rates A,B,C] [--initial-rows N] [--baseline-seconds B]
//! bench/run lag --rates 1000,5000,20000   # the lag sweep, one column per rate
//! bench/run idle-cycle [--sizes 1000000,4000000,16000000] [--windows K]
//! bench/run memory [--sizes 1000000,4000000,16000000]
//! bench/run tables [--counts 100,500,1000] [--seconds S]
//! bench/run shards [--rows N] [--workers 1,2,3] [--rate R] [--seconds S]
//! bench/run failover [--takeovers 5] [--rate 300]
//! bench/run verify [--rows N] [--threads T] [--repeat R]
//! bench/run throttle [--rows N] [--limits 25000,75000,150000] [--seconds 10]
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
    /// Replication lag under a steady insert/update/delete load, at one
    /// writer rate or several (`--rates 1000,5000,20000`, the sweep: ~12 min;
    /// the default single 5 000 ops/s run: ~4 min).
    ///
    /// Per rate: a fresh 1 M-row table, the writer alone for
    /// --baseline-seconds (what the writer costs the source), then ferry
    /// with the writer for --seconds; lag, windows, catch-up, sink ==
    /// source, ferry's CPU and RSS, the source's CPU split into LLVM
    /// compiles / ferry's diff scans / the rest, and whether the source
    /// saturated. One table with a column per rate; every raw figure per
    /// rate in lag.json (`results.rates[]`).
    Lag {
        /// Seconds the writer runs with ferry replicating, per rate.
        #[arg(long, default_value_t = scenarios::lag::DEFAULT_SECONDS)]
        seconds: u64,
        /// Writer operations per second, a single rate (default 5000).
        #[arg(long, value_parser = scenarios::lag::parse_rate, conflicts_with = "rates")]
        rate: Option<f64>,
        /// Several writer rates in one run, e.g. 1000,5000,20000 (ops/s, in
        /// this order; each on a fresh table).
        #[arg(long, value_parser = scenarios::lag::parse_rates)]
        rates: Option<scenarios::lag::Rates>,
        /// Rows in each source table before the writer starts.
        #[arg(long, default_value_t = scenarios::lag::DEFAULT_INITIAL_ROWS)]
        initial_rows: u64,
        /// ferry -p (default: ferry's own default, the core count).
        #[arg(long)]
        parallelism: Option<usize>,
        /// Seconds the writer runs alone (no ferry job) before ferry starts,
        /// per rate: the baseline that tells the source's CPU for ferry's
        /// diff scans from the writer's own (0: no baseline, no split).
        #[arg(long, default_value_t = scenarios::lag::DEFAULT_BASELINE_S)]
        baseline_seconds: u64,
        /// A bulk load: the writer at twice the rate for this many seconds
        /// (0: none), from --burst-at on; --seconds must leave a minute
        /// after it.
        #[arg(long, default_value_t = 0)]
        burst_seconds: u64,
        /// Seconds after the writer starts that the bulk load begins.
        #[arg(long, default_value_t = 60)]
        burst_at: u64,
    },
    /// Cost of one diff window with no changes, on tables of several sizes
    /// (default 1 M, 4 M and 16 M rows: ~7 min, of which loading 16 M rows
    /// takes ~1 min at ~400 k rows/s).
    IdleCycle {
        #[arg(long, value_delimiter = ',', default_value = DEFAULT_SIZES)]
        sizes: Vec<u64>,
        /// Idle windows measured per size.
        #[arg(long, default_value_t = 15)]
        windows: usize,
    },
    /// Idle tables in one job: N tables of 2 tablets and 100 rows, 1-second
    /// windows; source tablet-server, master and ferry CPU and ferry's RSS
    /// per idle table per window, at each count (default 100, 500 and
    /// 1 000: ~8 min, of which creating 1 000 tables takes ~2 min).
    Tables {
        #[arg(long, value_delimiter = ',', default_value = "100,500,1000")]
        counts: Vec<usize>,
        /// Seconds measured per count, once the job is steady.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
    },
    /// One job of 6 shards run by 1, 2 and 3 worker processes (issue 32):
    /// snapshot rows/s, steady lag under a writer, and the takeover of a
    /// killed worker's shards, per worker count (~5 min at the defaults;
    /// not in `all`). The workers share this machine's cores with each
    /// other and both clusters: the shape and the overhead, not a speed-up.
    Shards {
        /// Rows of the six source tables together (half in the big one,
        /// which is split by hash bucket over the shards).
        #[arg(long, default_value_t = 2_000_000)]
        rows: u64,
        /// Worker counts, in this order, each on a fresh job and fresh
        /// sink tables.
        #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
        workers: Vec<usize>,
        /// Writer operations per second on the big table (the `lag`
        /// scenario's writer) while the steady lag is measured.
        #[arg(long, default_value_t = 1000.0)]
        rate: f64,
        /// Seconds the writer runs per worker count.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// Peak RSS of ferry during snapshots of tables of several sizes
    /// (default 1 M, 4 M and 16 M rows, two allocator settings each: ~6 min,
    /// of which loading 16 M rows takes ~1 min at ~400 k rows/s).
    Memory {
        #[arg(long, value_delimiter = ',', default_value = DEFAULT_SIZES)]
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
    /// A snapshot under a read limit changed live to each of `--limits`
    /// (`ferry throttle`): measured rows/s over `--seconds` against each
    /// (±10 %), and a probe writer's latency on the source, throttled vs
    /// unthrottled (not in `all`).
    Throttle {
        /// Rows of the source table (enough for every limit's measurement).
        #[arg(long, default_value_t = 4_000_000)]
        rows: u64,
        /// The read limits (rows/s), in the order they are set.
        #[arg(long, value_delimiter = ',', default_value = "25000,75000,150000")]
        limits: Vec<u64>,
        /// Seconds each limit is measured over.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
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
    /// The snapshot, lag (one rate), idle-cycle and memory scenarios at
    /// their default sizes, one after the other (~20 min).
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
            rates,
            initial_rows,
            parallelism,
            baseline_seconds,
            burst_seconds,
            burst_at,
        } => {
            if seconds == 0 {
                bail!("--seconds must be positive");
            }
            let burst = (burst_seconds > 0).then_some(scenarios::lag::Burst {
                at_s: burst_at,
                seconds: burst_seconds,
            });
            if burst.is_some() && seconds < burst_at + burst_seconds + 60 {
                bail!("--seconds must be at least --burst-at + --burst-seconds + 60 (a minute after the bulk load)");
            }
            let params = scenarios::lag::Params {
                seconds,
                rates: scenarios::lag::rate_list(rate, rates),
                initial_rows,
                parallelism,
                baseline_s: baseline_seconds,
                burst,
            };
            scenarios::lag::run(&ctx, &params).await?;
        }
        Scenario::IdleCycle { sizes, windows } => {
            check_sizes(&sizes)?;
            scenarios::idle::run(&ctx, &sizes, windows.max(1)).await?;
        }
        Scenario::Tables { counts, seconds } => {
            if counts.is_empty() || counts.contains(&0) || seconds == 0 {
                bail!("--counts must be positive table counts and --seconds positive");
            }
            let mut counts = counts;
            counts.sort_unstable();
            counts.dedup();
            scenarios::tables::run(&ctx, &counts, seconds).await?;
        }
        Scenario::Shards {
            rows,
            workers,
            rate,
            seconds,
        } => {
            let max = scenarios::shards::SHARDS as usize;
            if rows < 100 || seconds == 0 || !(rate.is_finite() && rate > 0.0) {
                bail!("--rows must be at least 100, --seconds and --rate positive");
            }
            if workers.is_empty() || workers.iter().any(|&w| w == 0 || w > max) {
                bail!("--workers must be counts from 1 to {max}");
            }
            let params = scenarios::shards::Params {
                rows,
                workers,
                rate,
                seconds,
            };
            scenarios::shards::run(&ctx, &params).await?;
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
        Scenario::Throttle {
            rows,
            limits,
            seconds,
        } => {
            if limits.is_empty() || limits.contains(&0) || seconds == 0 {
                bail!("--limits must be positive rows/s and --seconds at least 1");
            }
            let params = scenarios::throttle::Params {
                rows,
                limits,
                seconds,
            };
            scenarios::throttle::run(&ctx, &params).await?;
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
            scenarios::lag::run(&ctx, &scenarios::lag::Params::default()).await?;
            scenarios::idle::run(&ctx, &scenarios::idle::DEFAULT_SIZES, 15).await?;
            scenarios::memory::run(&ctx, &scenarios::idle::DEFAULT_SIZES).await?;
        }
    }
    Ok(())
}

/// Default `--sizes` of idle-cycle and memory (the same as
/// `scenarios::idle::DEFAULT_SIZES`).
const DEFAULT_SIZES: &str = "1000000,4000000,16000000";

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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ferry-bench").chain(args.iter().copied()))
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
        let sizes: Vec<u64> = DEFAULT_SIZES
            .split(',')
            .map(|s| s.parse().expect("size"))
            .collect();
        assert_eq!(sizes, scenarios::idle::DEFAULT_SIZES);
    }

    #[test]
    fn lag_takes_one_rate_or_a_list() {
        let rates_of = |args: &[&str]| match parse(args).map(|c| c.scenario) {
            Ok(Scenario::Lag { rate, rates, .. }) => Ok(scenarios::lag::rate_list(rate, rates)),
            Ok(_) => panic!("not lag"),
            Err(e) => Err(e.kind()),
        };
        assert_eq!(rates_of(&["lag"]), Ok(vec![5_000.0]));
        assert_eq!(rates_of(&["lag", "--rate", "300"]), Ok(vec![300.0]));
        assert_eq!(
            rates_of(&["lag", "--rates", "1000,5000,20000"]),
            Ok(vec![1_000.0, 5_000.0, 20_000.0])
        );
        assert_eq!(
            rates_of(&["lag", "--rate", "1", "--rates", "2,3"]),
            Err(clap::error::ErrorKind::ArgumentConflict)
        );
        assert_eq!(
            rates_of(&["lag", "--rates", "1000,0"]),
            Err(clap::error::ErrorKind::ValueValidation)
        );
        assert!(rates_of(&["lag", "--rate", "-5"]).is_err());
        assert!(rates_of(&["lag", "--rates", "5,5"]).is_err());
    }

    #[test]
    fn sizes_default_to_one_four_and_sixteen_million() {
        match parse(&["idle-cycle"]).map(|c| c.scenario) {
            Ok(Scenario::IdleCycle { sizes, .. }) => {
                assert_eq!(sizes, [1_000_000, 4_000_000, 16_000_000])
            }
            _ => panic!("idle-cycle did not parse"),
        }
        match parse(&["memory", "--sizes", "20000,40000"]).map(|c| c.scenario) {
            Ok(Scenario::Memory { sizes }) => assert_eq!(sizes, [20_000, 40_000]),
            _ => panic!("memory did not parse"),
        }
    }
}
