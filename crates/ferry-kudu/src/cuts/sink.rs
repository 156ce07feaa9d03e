//! The Kudu sink's [`SinkCuts`]: each cut goes to the cuts table.

use super::CutsTable;
use crate::sink::KuduSink;
use ferry_engine::connector::{CapabilityFuture, SinkCuts};
use ferry_engine::sink_position::Cut;
use std::time::Duration;

impl KuduSink {
    /// Publishes consistent cuts in `table` on the sink cluster, keeping
    /// them for `retention` (`None`: publishes none). Needs the position
    /// table (the cut's sink time is the position's).
    pub fn with_cuts_table(mut self, table: Option<String>, retention: Duration) -> Self {
        self.cuts = table.map(|name| CutsTable::new(self.client.clone(), name, retention));
        self
    }
}

impl SinkCuts for KuduSink {
    fn record_cut<'a>(&'a self, cut: &'a Cut) -> CapabilityFuture<'a, ()> {
        Box::pin(async move {
            match &self.cuts {
                Some(cuts) => Ok(cuts.write(cut).await?),
                None => Ok(()),
            }
        })
    }
}
