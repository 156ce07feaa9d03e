//! `ferry run` replicating between real Kudu clusters: the operations
//! surface (REST, Prometheus, web page, savepoints, drain check, session
//! mode), live tables and schema changes, quiet tablets, restarts the
//! operator sees, stop with drain, the write guard, kill -9 crash loops and
//! restores of an older state.

mod crash_loop;
mod live_tables;
mod older_state;
mod operations;
mod quiet_tablets;
mod restarts;
mod schema_changes;
mod stop_drain;
mod write_guard;
