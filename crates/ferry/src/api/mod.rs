//! The bodies of the REST API as typed structs, shared by the server (which
//! serializes them) and the client verbs (which deserialize them), so a
//! field name is written once.
//!
//! - [`flink`]: Flink's shapes (`rest_v1_dispatcher.yml`; the list is in
//!   `docs/operations.md`), field names exactly as
//!   Flink spells them (kebab-case, camelCase or snake_case, per field).
//! - [`live`]: ferry's own `/ferry/...` bodies (submission, the live
//!   numbers the web page and `ferry stop --drain-check` poll);
//!   [`shards`]: a sharded job's workers and shards (`/ferry/shards`);
//!   [`throttle`]: a job's limits (`/ferry/jobs/:jobid/throttle`).

// Flink's REST bodies field by field: each field is the Flink field its
// serde name gives, documented by Flink; the structs say which endpoint.
#[allow(missing_docs)]
pub mod flink;
pub mod live;
pub mod shards;
pub mod throttle;
