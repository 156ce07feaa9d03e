//! The tablet location cache: partition key → tablet and replicas, with
//! non-covered ranges remembered and entries invalidated on routing errors.
//!
//! [`cache`] is the plain data structure; the client fills it from the
//! master's `GetTableLocations` answers.

pub mod cache;

pub use cache::{Lookup, RemoteTablet, Replica, Role, TableLocations};
