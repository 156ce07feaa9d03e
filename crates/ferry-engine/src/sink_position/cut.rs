//! A consistent cut of a job's sink tables: one source instant and a sink
//! time at which every listed sink table reflects exactly the source as of
//! that instant (docs/dr.md, "Consistent reads on the standby"). Taken
//! when every table of the job is between windows with the same last end
//! (the job then opens its tables' windows together, so that happens at
//! every window), published by a sink that offers
//! [`crate::connector::SinkCuts`].

use crate::time::{SinkTime, SourceTime};

/// One cut, as the job publishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The job that took it.
    pub job_id: String,
    /// The writer's generation (a takeover fence number; 0 without one).
    pub generation: u64,
    /// The source instant: the last end every listed table completed.
    pub source_time: SourceTime,
    /// A sink time at which every listed table holds exactly the windows
    /// up to `source_time` (docs/semantics.md, "The sink time").
    pub sink_time: SinkTime,
    /// The sink tables the cut covers: every table of the job that takes
    /// part in replication (a paused one does not reflect the instant).
    pub tables: Vec<String>,
}
