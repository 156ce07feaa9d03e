//! Throttling (`throttle.*`): the job-wide limits a job starts with, as
//! [`Limits`]; they can be changed while it runs (`JobHandle::set_throttle`)
//! and per table ([`crate::throttle`]).

use super::error::ConfigError;
use super::map::Config;
use super::option::ConfigOption;
use super::parse;
use super::section::Section;
use super::spec::ValueKind;
use crate::throttle::{Limits, Rate, WindowRates};

const fn rows(name: &'static str) -> ConfigOption<u64> {
    ConfigOption::new(
        name,
        ValueKind::CountOrZero,
        parse::count_or_zero_u64,
        u64::to_string,
    )
    .default_value("0")
}

const fn bytes(name: &'static str) -> ConfigOption<u64> {
    ConfigOption::new(name, ValueKind::Bytes, parse::size_or_zero, u64::to_string)
        .default_value("0")
}

crate::config_section! {
    /// The job-wide limits (ferry only).
    pub static THROTTLE_KEYS = Section::job("throttle");
    /// `throttle.read.snapshot.rowsPerSecond`.
    pub const THROTTLE_READ_SNAPSHOT_ROWS: ConfigOption<u64> = rows("throttle.read.snapshot.rowsPerSecond")
        .doc("Most rows per second the job reads from the source while it copies a snapshot window, over all its pipelines; 0: unlimited. Changed live with `ferry throttle` or PATCH /ferry/jobs/:jobid/throttle.");
    /// `throttle.read.snapshot.bytesPerSecond`.
    pub const THROTTLE_READ_SNAPSHOT_BYTES: ConfigOption<u64> = bytes("throttle.read.snapshot.bytesPerSecond")
        .doc("Most bytes per second (scan batch bytes; units kb, mb, gb accepted) the job reads from the source while it copies a snapshot window; 0: unlimited.");
    /// `throttle.read.diff.rowsPerSecond`.
    pub const THROTTLE_READ_DIFF_ROWS: ConfigOption<u64> = rows("throttle.read.diff.rowsPerSecond")
        .doc("Most rows per second the job reads from the source in diff windows; 0: unlimited.");
    /// `throttle.read.diff.bytesPerSecond`.
    pub const THROTTLE_READ_DIFF_BYTES: ConfigOption<u64> = bytes("throttle.read.diff.bytesPerSecond")
        .doc("Most bytes per second the job reads from the source in diff windows (units kb, mb, gb accepted); 0: unlimited.");
    /// `throttle.write.snapshot.rowsPerSecond`.
    pub const THROTTLE_WRITE_SNAPSHOT_ROWS: ConfigOption<u64> = rows("throttle.write.snapshot.rowsPerSecond")
        .doc("Most rows per second the job writes to the sink while it copies a snapshot window; 0: unlimited.");
    /// `throttle.write.snapshot.bytesPerSecond`.
    pub const THROTTLE_WRITE_SNAPSHOT_BYTES: ConfigOption<u64> = bytes("throttle.write.snapshot.bytesPerSecond")
        .doc("Most bytes per second (the batches' source bytes; units kb, mb, gb accepted) the job writes to the sink while it copies a snapshot window; 0: unlimited.");
    /// `throttle.write.diff.rowsPerSecond`.
    pub const THROTTLE_WRITE_DIFF_ROWS: ConfigOption<u64> = rows("throttle.write.diff.rowsPerSecond")
        .doc("Most rows per second the job writes to the sink in diff windows; 0: unlimited.");
    /// `throttle.write.diff.bytesPerSecond`.
    pub const THROTTLE_WRITE_DIFF_BYTES: ConfigOption<u64> = bytes("throttle.write.diff.bytesPerSecond")
        .doc("Most bytes per second the job writes to the sink in diff windows (units kb, mb, gb accepted); 0: unlimited.");
}

/// The job-wide limits the keys give.
pub(super) fn limits(keys: &Config) -> Result<Limits, ConfigError> {
    let rate = |rows: &ConfigOption<u64>, bytes: &ConfigOption<u64>| -> Result<Rate, ConfigError> {
        Ok(Rate::new(keys.get(rows)?, keys.get(bytes)?))
    };
    Ok(Limits {
        read: WindowRates {
            snapshot: rate(&THROTTLE_READ_SNAPSHOT_ROWS, &THROTTLE_READ_SNAPSHOT_BYTES)?,
            diff: rate(&THROTTLE_READ_DIFF_ROWS, &THROTTLE_READ_DIFF_BYTES)?,
        },
        write: WindowRates {
            snapshot: rate(
                &THROTTLE_WRITE_SNAPSHOT_ROWS,
                &THROTTLE_WRITE_SNAPSHOT_BYTES,
            )?,
            diff: rate(&THROTTLE_WRITE_DIFF_ROWS, &THROTTLE_WRITE_DIFF_BYTES)?,
        },
    })
}
