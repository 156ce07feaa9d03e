//! Write sessions: operations, flush modes, per-tablet batching and row
//! errors returned to the caller.

pub mod ops;
