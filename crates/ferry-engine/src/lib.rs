//! ferry's replication engine.
//!
//! Owns the window chain (snapshot at t0, then diff windows), the split
//! enumerator, the reader→writer pipelines and the checkpoint coordinator.
//! It talks to Kudu only through `kudu-client` and knows nothing of the CLI
//! or HTTP. Filled in by the replication-job issue.
