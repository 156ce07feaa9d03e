//! Schema changes through the `ferry` binary (issue 13), written while a
//! second accept session writes live_tables.rs: this file is being written
//! now; see the next commits.
