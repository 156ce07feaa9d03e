//! [`KubeLease`] as the engine's [`LeaseBackend`].

use ferry_engine::lease::{LeaseBackend, LeaseError, LeaseFuture, LeaseRecord};

use crate::lease::{Failed, KubeLease};

impl KubeLease {
    fn lease_error(&self, failed: Failed) -> LeaseError {
        LeaseError::Service {
            op: failed.op,
            path: self.location(),
            source: Box::new(failed.error),
        }
    }
}

impl LeaseBackend for KubeLease {
    fn location(&self) -> String {
        KubeLease::location(self)
    }

    fn newest(&self) -> LeaseFuture<'_, Option<LeaseRecord>> {
        Box::pin(async move {
            KubeLease::newest(self)
                .await
                .map_err(|f| self.lease_error(f))
        })
    }

    fn write_next<'a>(&'a self, record: &'a LeaseRecord) -> LeaseFuture<'a, Option<LeaseRecord>> {
        Box::pin(async move {
            KubeLease::write_next(self, record)
                .await
                .map_err(|f| self.lease_error(f))
        })
    }
}
