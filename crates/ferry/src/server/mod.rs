//! The server half: what runs jobs in this process.
//!
//! - [`registry`]: the jobs of a process and their asynchronous
//!   operations; [`submit`]: starting a job in-process (job wiring).
//! - [`run`]: the application-mode (`ferry run`) and session-mode (`ferry
//!   server`) processes; [`lease`]: running a job as the holder of its
//!   lease (`high-availability.type lease`), for `ferry run`, `ferry
//!   standby` and `ferry failover`; [`holder`]: the holder's life — run,
//!   stand by when fenced, run the next generation it wins; [`workers`]:
//!   the workers of a sharded job (`job.shards` > 1), each running the
//!   shards its worker slot owns.
//! - [`listen`]: the REST and Prometheus listeners; [`rest`]: the
//!   Flink-shaped REST API, ferry's `/ferry/*` endpoints and the web page;
//!   [`prom`]: the Prometheus exposition; [`view`]: one job's state, read
//!   once per request by `rest` and `prom`; [`sampler`]: lag history and
//!   rates; [`progress`]: snapshot progress on the terminal.
//!
//! Nothing here imports [`crate::client`]; the REST bodies are
//! [`crate::api`]'s.

pub mod holder;
pub mod kube_lease;
pub mod lease;
pub mod listen;
pub mod progress;
pub mod prom;
pub mod registry;
pub mod rest;
pub mod rto;
pub mod run;
pub mod sampler;
pub mod submit;
pub mod view;
pub mod workers;
