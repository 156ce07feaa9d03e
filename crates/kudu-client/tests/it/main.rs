//! kudu-client's integration tests, one binary (one link) with a module per
//! area, against real Kudu 1.17 daemons (and a real MIT KDC with the
//! `kerberos` feature) started by `ferry-testkit`. Clusters of the same
//! shape are shared between modules ([`shared`]); tests that stop, kill,
//! pause or reconfigure daemons, or count what a whole server did, start
//! their own.

// Test code: a failed unwrap is a failed test, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod apply_rows;
mod catalog;
mod checksum;
mod codegen_and_barrier;
mod failover;
#[cfg(feature = "kerberos")]
mod kerberos;
mod roundtrip;
mod rpc;
mod scan;
mod shared;
mod spans;
mod write;
