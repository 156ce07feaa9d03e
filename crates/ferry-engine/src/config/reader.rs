//! How the source table is scanned (`reader.*`): the keys and
//! [`ReaderConfig`].

use std::num::NonZeroU64;
use std::time::Duration;

use super::error::ConfigError;
use super::map::Config;
use super::option::{ConfigOption, ValueError};
use super::parse::{self, Decimal};
use super::section::Section;
use super::spec::{KeyOrigin::Reference, ValueKind};
use crate::choice;

choice! {
    /// Which replica of a tablet the reader scans (`reader.replicaSelection`).
    #[derive(Default)]
    pub enum ReplicaSelection {
        /// `CLOSEST_REPLICA`: a replica on the local host if any, else any one.
        #[default]
        ClosestReplica = "CLOSEST_REPLICA",
        /// `LEADER_ONLY`: always the leader.
        LeaderOnly = "LEADER_ONLY",
    }
}

choice! {
    /// Which endpoint of each tablet server ferry reads per-tablet write
    /// counters from (`reader.tabletMetricsEndpoint`): quiet tablets, the
    /// drain check and the write guard.
    #[derive(Default)]
    pub enum TabletMetricsEndpoint {
        /// The JSON `/metrics`, filtered to the counters ferry reads, on
        /// every release.
        #[default]
        Json = "json",
        /// `/metrics_prometheus` on servers whose release has tablet metrics
        /// there (Kudu 1.18+), the JSON `/metrics` on older ones.
        Prometheus = "prometheus",
    }
}

crate::config_section! {
    /// The reader's keys (the reference job's, and quiet tablets).
    pub static READER_KEYS = Section::job("reader");
    /// `reader.batchSizeBytes` (Kudu's wire field is 32-bit).
    pub const BATCH_SIZE_BYTES: ConfigOption<u32> = ConfigOption::new("reader.batchSizeBytes", ValueKind::Bytes, batch_size, print_u32)
        .origin(Reference)
        .default_value("20971520")
        .doc("Bytes a tablet server returns per scan batch (20 MiB by default).");
    /// `reader.splitSizeBytes`; `None` (`-1`): one split per tablet.
    pub const SPLIT_SIZE_BYTES: ConfigOption<Option<NonZeroU64>> = ConfigOption::new("reader.splitSizeBytes", ValueKind::Bytes, split_size, print_split_size)
        .origin(Reference)
        .default_value("-1")
        .doc("Target bytes per split; -1 means one split per tablet.");
    /// `reader.scanRequestTimeout`.
    pub const SCAN_REQUEST_TIMEOUT: ConfigOption<Duration> = ConfigOption::millis("reader.scanRequestTimeout")
        .origin(Reference)
        .default_value("30000")
        .doc("Timeout of one scan request.");
    /// `reader.prefetching`.
    pub const PREFETCHING: ConfigOption<bool> = ConfigOption::flag("reader.prefetching")
        .origin(Reference)
        .default_value("false")
        .doc("Request the next scan batch as soon as one is handed on, while the writer works; costs one more scan batch of memory per pipeline.");
    /// `reader.keepAlivePeriodMs`.
    pub const KEEP_ALIVE_PERIOD_MS: ConfigOption<Duration> = ConfigOption::millis("reader.keepAlivePeriodMs")
        .origin(Reference)
        .default_value("15000")
        .doc("How often an idle open scanner is kept alive on its tablet server.");
    /// `reader.replicaSelection`.
    pub const REPLICA_SELECTION: ConfigOption<ReplicaSelection> = ConfigOption::choice("reader.replicaSelection")
        .origin(Reference)
        .default_value("CLOSEST_REPLICA")
        .doc("Which replica of a tablet to scan.");
    /// `reader.quietTabletMaxSkips`.
    pub const QUIET_TABLET_MAX_SKIPS: ConfigOption<u32> = ConfigOption::count_or_zero("reader.quietTabletMaxSkips")
        .default_value("3600")
        .doc("Diff windows in a row that may skip a tablet whose write counters prove it unchanged (read from the tablet servers' /metrics: one sweep of every server per window for all of the job's tables, and a safe-time barrier once after each change); every tablet is still scanned at least every N+1 windows (the default: an hour of 1-second windows). 0 scans every tablet every window.");
    /// `reader.tabletMetricsEndpoint`.
    pub const TABLET_METRICS_ENDPOINT: ConfigOption<TabletMetricsEndpoint> = ConfigOption::choice("reader.tabletMetricsEndpoint")
        .default_value("json")
        .doc("Where the tablet servers' per-tablet write counters are read (quiet tablets, drain check, write guard): json (/metrics, filtered to those counters, every release) or prometheus (/metrics_prometheus on Kudu 1.18+ servers, /metrics on older ones; the whole dump, ~65 KB per replica).");
    /// `reader.maxInFlightBytes`.
    pub const MAX_IN_FLIGHT_BYTES: ConfigOption<usize> = ConfigOption::bytes::<{ 1 << 40 }>("reader.maxInFlightBytes")
        .default_value("12582912")
        .doc("Bytes of scan batches the job's pipelines hold at once: each holds the batch it writes and the next one, so a scan asks for at most this / (2 × parallelism) bytes per batch (never more than reader.batchSizeBytes, never less than 1 MiB). Bounds ferry's memory; larger batches mean fewer scan requests.");
    /// `reader.recopyExpiredTablets`.
    pub const RECOPY_EXPIRED_TABLETS: ConfigOption<bool> = ConfigOption::flag("reader.recopyExpiredTablets")
        .default_value("true")
        .doc("When a diff window starts before a tablet's history (the job was down longer than the source keeps it), re-copy that tablet's key range instead of stopping: a snapshot scan at the window's end, and every sink row of the range the source no longer has deleted. The other tablets keep streaming. Needs a Kudu sink partitioned like the source (a created copy is); false stops the table with advice instead.");
    /// `reader.historyMaxAgeSec`.
    pub const HISTORY_MAX_AGE_SEC: ConfigOption<Duration> = ConfigOption::seconds("reader.historyMaxAgeSec")
        .default_value("604800")
        .doc("The source tablet servers' --tablet_history_max_age_sec (Kudu's default, 7 days): how far back a diff window may start. Only for the ferry_table_history_headroom_seconds gauge and its alert (a table's own kudu.table.history_max_age_sec is not read); the servers decide what they keep.");
    /// `reader.diffScanBudget`.
    pub const DIFF_SCAN_BUDGET: ConfigOption<Decimal> = ConfigOption::new("reader.diffScanBudget", ValueKind::Number, scan_budget, parse::print_decimal)
        .default_value("0")
        .doc("Diff scans per second the job may send each source tablet server, over all its tables; 0: no budget (a window every job.discoveryIntervalSeconds). Each diff scan of a written tablet costs its server an LLVM compile, about 0.1 s of CPU on Kudu 1.17 and 1.18, whatever it reads: a table whose windows would scan more opens them less often, and reads each tablet's changes of the longer window in one scan. Tablets proven unchanged cost nothing. reader.maxLag bounds the wait.");
    /// `reader.maxLag`.
    pub const MAX_LAG: ConfigOption<Duration> = ConfigOption::duration("reader.maxLag")
        .default_value("30 s")
        .doc("The longest reader.diffScanBudget may hold a table's next window back: the next window opens at the latest this long after the last one opened, less the time that window took, so the lag stays near this bound whatever the budget. Never shorter than job.discoveryIntervalSeconds.");
}

/// Scans per second: a decimal from 0 (no budget) to a million.
fn scan_budget(value: &str) -> Result<Decimal, ValueError> {
    parse::decimal(value, 0.0, 1e6)
}

/// Kudu's scan request carries the batch size as a 32-bit field.
fn batch_size(value: &str) -> Result<u32, ValueError> {
    let n = parse::positive(value)?;
    u32::try_from(n).map_err(|_| ValueError::OutOfRange(format!("must be at most {}", u32::MAX)))
}

fn print_u32(n: &u32) -> String {
    n.to_string()
}

fn split_size(value: &str) -> Result<Option<NonZeroU64>, ValueError> {
    let n = parse::integer(value)?;
    if n == -1 {
        return Ok(None);
    }
    u64::try_from(n)
        .ok()
        .and_then(NonZeroU64::new)
        .map(Some)
        .ok_or_else(|| {
            ValueError::OutOfRange(
                "must be greater than 0, or -1 for one split per tablet".to_string(),
            )
        })
}

fn print_split_size(n: &Option<NonZeroU64>) -> String {
    n.map_or_else(|| "-1".to_string(), |n| n.to_string())
}

/// How the source table is scanned (`reader.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderConfig {
    /// `reader.batchSizeBytes`: bytes per scan batch (Kudu's wire field is
    /// 32-bit, hence `u32`).
    pub batch_size_bytes: u32,
    /// `reader.splitSizeBytes`: target split size; `None` (configured as
    /// `-1`) means one split per tablet.
    pub split_size_bytes: Option<NonZeroU64>,
    /// `reader.scanRequestTimeout`.
    pub scan_request_timeout: Duration,
    /// `reader.prefetching`: keep the next scan request in flight while a
    /// batch is handed on.
    pub prefetching: bool,
    /// `reader.keepAlivePeriodMs`.
    pub keep_alive_period: Duration,
    /// `reader.replicaSelection`.
    pub replica_selection: ReplicaSelection,
    /// `reader.quietTabletMaxSkips`: diff windows in a row a tablet proven
    /// unchanged may go without a scan (0: never skip).
    pub quiet_tablet_max_skips: u32,
    /// Every `reader.*` key in canonical form: keys the fields above do not
    /// carry are read where they are used, `keys.get(&KEY)`.
    pub keys: Config,
}

/// The smallest scan batch `reader.maxInFlightBytes` makes a job ask for.
const MIN_BATCH_BYTES: usize = 1 << 20;

impl ReaderConfig {
    /// Fits the scan batch size to `parallelism` pipelines: at most
    /// `reader.maxInFlightBytes` / (2 × parallelism), at least 1 MiB, never
    /// above `reader.batchSizeBytes`. Returns the size now asked for.
    pub fn fit_in_flight(&mut self, parallelism: usize) -> u32 {
        let budget = self.keys.get(&MAX_IN_FLIGHT_BYTES).unwrap_or(usize::MAX);
        let share = (budget / (2 * parallelism.max(1))).max(MIN_BATCH_BYTES);
        let share = u32::try_from(share).unwrap_or(u32::MAX);
        self.batch_size_bytes = self.batch_size_bytes.min(share);
        self.batch_size_bytes
    }

    /// `reader.maxLag`: how far a source's budget may hold a window back.
    pub fn max_lag(&self) -> Duration {
        // Checked when the job's configuration was parsed.
        self.keys.get(&MAX_LAG).unwrap_or(Duration::from_secs(30))
    }

    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        Ok(ReaderConfig {
            batch_size_bytes: keys.get(&BATCH_SIZE_BYTES)?,
            split_size_bytes: keys.get(&SPLIT_SIZE_BYTES)?,
            scan_request_timeout: keys.get(&SCAN_REQUEST_TIMEOUT)?,
            prefetching: keys.get(&PREFETCHING)?,
            keep_alive_period: keys.get(&KEEP_ALIVE_PERIOD_MS)?,
            replica_selection: keys.get(&REPLICA_SELECTION)?,
            quiet_tablet_max_skips: keys.get(&QUIET_TABLET_MAX_SKIPS)?,
            keys: READER_KEYS.effective(keys)?,
        })
    }
}
