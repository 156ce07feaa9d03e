//! Continuous verify's verifier for a Kudu-to-Kudu job
//! ([`ferry_engine::verify::Verifier`]): `ferry-verify`'s tablet-server
//! checksums, the source at the cut's source time and the sink at its sink
//! time, `job.verifyBudgetRanges` key ranges at a time on each side.
//!
//! A repair does not write the source's rows *at the cut*: the job may have
//! copied a newer version of a row since, and writing the older one back
//! would undo it for good. When the cut shows differences, the repair
//! verifies again with the sink read *first*, now, and the source read
//! after it, now: every row the sink holds then came from a window that
//! ended before that source time, so each row the repair writes is as new
//! as anything the job wrote, or newer (and rows the job would have
//! written anyway are written once more, harmlessly).

use ferry_engine::connector::CapabilityFuture;
use ferry_engine::error::{ConnectorError, Domain};
use ferry_engine::verify::{Verifier, VerifyOutcome, VerifyRequest};
use ferry_engine::EngineError;
use ferry_verify::{At, Side, VerifyOptions};
use kudu_client::{HybridTime, KuduClient};
use std::num::NonZeroUsize;

/// `ferry-verify` between the job's two clusters.
pub struct KuduVerifier {
    source: KuduClient,
    sink: KuduClient,
    /// Key ranges checksummed at once (`job.verifyBudgetRanges`).
    ranges: NonZeroUsize,
}

impl KuduVerifier {
    /// Verifies tables of `source` against their copies on `sink`,
    /// `ranges` key ranges at a time.
    pub fn new(source: KuduClient, sink: KuduClient, ranges: NonZeroUsize) -> Self {
        KuduVerifier {
            source,
            sink,
            ranges,
        }
    }

    fn options(&self, request: &VerifyRequest, at: (HybridTime, HybridTime)) -> VerifyOptions {
        let source = Side {
            client: self.source.clone(),
            table: request.source_table.clone(),
            at: At::Time(at.0),
        };
        let sink = Side {
            client: self.sink.clone(),
            table: request.sink_table.clone(),
            at: At::Time(at.1),
        };
        let mut options = VerifyOptions::new(source, sink);
        options.parallelism = self.ranges.get();
        options.max_listed = 10;
        options
    }

    /// The repair's times: the sink's now, then the source's now.
    async fn now(&self) -> Result<(HybridTime, HybridTime), EngineError> {
        let sink = self.sink.server_clock().await.map_err(failed)?;
        let source = self.source.server_clock().await.map_err(failed)?;
        Ok((source, sink))
    }

    async fn run(&self, request: &VerifyRequest) -> Result<VerifyOutcome, EngineError> {
        let cut = (
            HybridTime::from_raw(request.source_time.raw()),
            HybridTime::from_raw(request.sink_time.raw()),
        );
        let report = ferry_verify::verify(self.options(request, cut))
            .await
            .map_err(failed)?;
        let mut outcome = VerifyOutcome {
            rows_compared: report.rows_compared,
            differences: report.differences,
            repaired: 0,
        };
        if report.differences == 0 || !request.repair {
            return Ok(outcome);
        }
        let mut options = self.options(request, self.now().await?);
        options.repair = true;
        let repaired = ferry_verify::verify(options).await.map_err(failed)?;
        outcome.repaired = repaired.repair.map_or(0, |r| r.upserted + r.deleted);
        Ok(outcome)
    }
}

fn failed(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> EngineError {
    ConnectorError::new(Domain::Sink, "Verify", e).into()
}

impl Verifier for KuduVerifier {
    fn verify<'a>(&'a self, request: &'a VerifyRequest) -> CapabilityFuture<'a, VerifyOutcome> {
        Box::pin(self.run(request))
    }
}
