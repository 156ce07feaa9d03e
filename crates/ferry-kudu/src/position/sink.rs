//! The Kudu sink's [`SinkPositions`]: the position record in the position
//! table, and the sink time.

use super::PositionTable;
use crate::sink::KuduSink;
use ferry_engine::connector::{CapabilityFuture, SinkPositions};
use ferry_engine::sink_position::SinkPosition;
use ferry_engine::time::SinkTime;
use ferry_engine::EngineError;
use kudu_client::{HybridTime, KuduTable};

/// A hybrid time's physical part (microseconds) is shifted by this.
const LOGICAL_BITS: u32 = 12;

impl KuduSink {
    /// The sink table and the position table; `None` without a position
    /// table. Fails closed: a position table that was not prepared is an
    /// error, never a silent no-op.
    pub(crate) fn position_table(
        &self,
    ) -> Result<Option<(&KuduTable, &PositionTable)>, EngineError> {
        let Some(positions) = &self.position else {
            return Ok(None);
        };
        match &self.table {
            Some(table) => Ok(Some((table, positions))),
            None => Err(self.err(kudu_client::Error::TableNotFound(format!(
                "{} (the sink was not prepared)",
                self.options.sink_table_name
            )))),
        }
    }
}

impl SinkPositions for KuduSink {
    fn record_position<'a>(&'a self, position: &'a SinkPosition) -> CapabilityFuture<'a, ()> {
        Box::pin(async move {
            match self.position_table()? {
                Some((table, positions)) => Ok(positions.write(table, position).await?),
                None => Ok(()),
            }
        })
    }

    fn read_position(&self) -> CapabilityFuture<'_, Option<SinkPosition>> {
        Box::pin(async move {
            match self.position_table()? {
                Some((table, positions)) => Ok(positions.read(table).await?),
                None => Ok(None),
            }
        })
    }

    fn sink_time(&self) -> CapabilityFuture<'_, Option<SinkTime>> {
        Box::pin(async move {
            // Why this separates the windows, on a snapshot scan of the sink
            // (which sees the writes with a timestamp below the snapshot's):
            // - every sink write of this job, and the position write, goes
            //   through `self.client` (the writers' sessions and the position
            //   table share it), whose last propagated timestamp is folded from
            //   every write answer; all writes so far were acknowledged (a
            //   window opens only after the previous one's flushes), so each
            //   has a timestamp ≤ L, read after `server_clock` folded the
            //   master's clock in too;
            // - T = the first hybrid time of the microsecond after L's, so
            //   readers that take a snapshot in microseconds (Spark's
            //   kudu.snapshotTimestampMicros, Impala) read exactly T;
            // - T is folded into the client before anything else is sent:
            //   every later write carries ≥ T and gets a timestamp > T.
            // Without a position table nothing records T, so none is taken.
            if self.position.is_none() {
                return Ok(None);
            }
            self.client.server_clock().await.map_err(|e| self.err(e))?;
            let seen = self
                .client
                .last_propagated_timestamp()
                .map_or(0, |t| t.raw());
            let t = ((seen >> LOGICAL_BITS).saturating_add(1)) << LOGICAL_BITS;
            self.client
                .update_last_propagated_timestamp(HybridTime::from_raw(t));
            Ok(Some(SinkTime::from_raw(t)))
        })
    }
}
