//! How rows are written to the sink (`writer.*`): the keys and
//! [`WriterConfig`].

use std::num::NonZeroUsize;
use std::time::Duration;

use super::error::ConfigError;
use super::map::Config;
use super::option::ConfigOption;
use super::section::Section;
use super::spec::KeyOrigin::Reference;
use crate::choice;

choice! {
    /// Flush mode of the sink write session (`writer.flushMode`).
    #[derive(Default)]
    pub enum FlushMode {
        /// `AUTO_FLUSH_BACKGROUND`: buffer and flush in the background.
        #[default]
        AutoFlushBackground = "AUTO_FLUSH_BACKGROUND",
        /// `AUTO_FLUSH_SYNC`: every operation is sent and awaited on its own.
        AutoFlushSync = "AUTO_FLUSH_SYNC",
        /// `MANUAL_FLUSH`: buffer until the sink flushes explicitly (every
        /// `writer.maxBufferSize` rows and at the end of each scan batch).
        ManualFlush = "MANUAL_FLUSH",
    }
}

crate::config_section! {
    /// The writer's keys (the reference job's).
    pub static WRITER_KEYS = Section::job("writer");
    /// `writer.flushMode`.
    pub const FLUSH_MODE: ConfigOption<FlushMode> = ConfigOption::choice("writer.flushMode")
        .origin(Reference)
        .default_value("AUTO_FLUSH_BACKGROUND")
        .doc("Flush mode of the sink write session. AUTO_FLUSH_SYNC sends and awaits every row on its own; MANUAL_FLUSH sends only when the sink flushes: every writer.maxBufferSize rows and at the end of each scan batch (writer.flushInterval unused).");
    /// `writer.operationTimeout`.
    pub const OPERATION_TIMEOUT: ConfigOption<Duration> = ConfigOption::millis("writer.operationTimeout")
        .origin(Reference)
        .default_value("30000")
        .doc("Timeout of one write operation.");
    /// `writer.maxBufferSize`.
    pub const MAX_BUFFER_SIZE: ConfigOption<NonZeroUsize> = ConfigOption::count("writer.maxBufferSize")
        .origin(Reference)
        .default_value("1000")
        .doc("Operations buffered by the write session before it starts a flush; while earlier flushes are still in flight the buffer keeps filling, up to writer.requestSizeBytes of rows. A scan batch is written whole (AUTO_FLUSH_BACKGROUND): in requests of at least this many rows and writer.requestSizeBytes per tablet, 7 MiB at most.");
    /// `writer.flushInterval`.
    pub const FLUSH_INTERVAL: ConfigOption<Duration> = ConfigOption::millis("writer.flushInterval")
        .origin(Reference)
        .default_value("1000")
        .doc("Longest time a buffered operation waits before a background flush.");
    /// `writer.ignoreNotFound`: only `false` is accepted.
    pub const IGNORE_NOT_FOUND: ConfigOption<bool> = ConfigOption::flag("writer.ignoreNotFound")
        .origin(Reference)
        .default_value("false")
        .doc("Only false is accepted: deletes are always DELETE_IGNORE, so a replayed delete of an absent row is already harmless (docs/semantics.md).");
    /// `writer.ignoreDuplicate`: only `false` is accepted.
    pub const IGNORE_DUPLICATE: ConfigOption<bool> = ConfigOption::flag("writer.ignoreDuplicate")
        .origin(Reference)
        .default_value("false")
        .doc("Only false is accepted: rows are always written as UPSERT_IGNORE, which never fails on a present row (docs/semantics.md).");
    /// `writer.requestSizeBytes`: encoded bytes per write request of a whole
    /// scan batch (background mode, `Session::apply_rows`), and how far a
    /// buffer of single operations waiting for a send may grow. 1 MiB gave
    /// ~10 000 rows per request and the sink 3 % more CPU than `kudu table
    /// copy` (11 111 rows); 1.5 MiB gives ~15 000 and 6 % less
    /// (docs/benchmarks.md, finding 1). At most Kudu's 7 MiB batch limit.
    pub const REQUEST_SIZE_BYTES: ConfigOption<usize> = ConfigOption::bytes::<{ 7 << 20 }>("writer.requestSizeBytes")
        .default_value("1572864")
        .doc("Encoded bytes per write request the Kudu sink seals when it writes a scan batch whole, and how far a buffer of rows waiting for a send may grow (AUTO_FLUSH_BACKGROUND); at most Kudu's 7 MiB batch limit (7340032).");
}

/// How rows are written to the sink (`writer.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterConfig {
    /// `writer.flushMode`.
    pub flush_mode: FlushMode,
    /// `writer.operationTimeout`.
    pub operation_timeout: Duration,
    /// `writer.maxBufferSize`: operations buffered before a flush.
    pub max_buffer_size: NonZeroUsize,
    /// `writer.flushInterval`.
    pub flush_interval: Duration,
    /// `writer.ignoreNotFound`: always `false` (`true` is refused, see
    /// docs/semantics.md); kept for the reference job's command lines.
    pub ignore_not_found: bool,
    /// `writer.ignoreDuplicate`: always `false`, like `ignore_not_found`.
    pub ignore_duplicate: bool,
    /// Every `writer.*` key in canonical form: keys the fields above do not
    /// carry are read where they are used, `keys.get(&KEY)`.
    pub keys: Config,
}

impl WriterConfig {
    pub(super) fn from_config(keys: &Config) -> Result<Self, ConfigError> {
        let writer = WriterConfig {
            flush_mode: keys.get(&FLUSH_MODE)?,
            operation_timeout: keys.get(&OPERATION_TIMEOUT)?,
            max_buffer_size: keys.get(&MAX_BUFFER_SIZE)?,
            flush_interval: keys.get(&FLUSH_INTERVAL)?,
            ignore_not_found: keys.get(&IGNORE_NOT_FOUND)?,
            ignore_duplicate: keys.get(&IGNORE_DUPLICATE)?,
            keys: WRITER_KEYS.effective(keys)?,
        };
        writer.refuse_ignore_keys()?;
        Ok(writer)
    }

    /// The reference job's session flags `writer.ignoreNotFound` and
    /// `writer.ignoreDuplicate` would make a write session drop "row not
    /// found" and "row already present" errors. ferry's operations cannot
    /// raise either (deletes are DELETE_IGNORE, writes UPSERT_IGNORE, so
    /// that replaying a batch after a restart is harmless), and turning the
    /// ignore ops off would break those replays. `true` would promise a
    /// choice that does not exist, so only the default is accepted.
    fn refuse_ignore_keys(&self) -> Result<(), ConfigError> {
        let refusals = [
            (
                &IGNORE_NOT_FOUND,
                self.ignore_not_found,
                "ferry writes every delete as DELETE_IGNORE, which never reports a missing row \
                 (replayed deletes must not fail the job); remove the key or set it to false",
            ),
            (
                &IGNORE_DUPLICATE,
                self.ignore_duplicate,
                "ferry writes every row as UPSERT_IGNORE, which never reports a present row \
                 (replayed writes must not fail the job); remove the key or set it to false",
            ),
        ];
        match refusals.into_iter().find(|(_, on, _)| *on) {
            Some((key, _, reason)) => Err(ConfigError::Unsupported {
                key: key.name(),
                value: "true".to_string(),
                reason,
            }),
            None => Ok(()),
        }
    }
}
