//! KRPC: the connection preamble, frame codec, negotiation (SASL PLAIN and
//! TLS), call multiplexing over one connection, and a per-server pool.
//!
//! - [`frame`]: pure encode/decode of frames and sidecars.
//! - [`negotiate`]: preamble → NEGOTIATE → TLS → SASL PLAIN → connection
//!   context, turning a socket into a ready stream.
//! - [`tls`]: the tunnelled TLS handshake and the TLS stream after it.
//! - [`connection`]: one connection, many concurrent calls.
//! - [`pool`]: one shared connect per server address.
//!
//! Typed calls pair a method marker from [`crate::pb`] (e.g.
//! `pb::master::master_service::ConnectToMaster`) with its request:
//! `pool.call::<ConnectToMaster>(addr, &req, &CallOptions::with_timeout(t))`.

pub mod connection;
pub mod frame;
pub mod negotiate;
pub mod pool;
pub mod tls;

pub use crate::pb::RpcMethod;
pub use connection::{CallOptions, ConnectOptions, Connection, Response};
pub use negotiate::{NegotiateOptions, TlsPolicy};
pub use pool::{ConnectionPool, RpcContext};
