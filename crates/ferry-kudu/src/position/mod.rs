//! The Kudu sink's position record ([`ferry_engine::sink_position`] says
//! what it means): a small table on the sink cluster.
//!
//! - `table`: the position table ([`PositionTable`]);
//! - `error`: [`PositionError`];
//! - `sink`: the Kudu sink's [`ferry_engine::connector::SinkPositions`].

mod error;
mod sink;
mod table;

pub use error::{Call, PositionError};
pub use table::{PositionTable, DEFAULT_POSITION_TABLE};
