//! Scanners: snapshot, fault-tolerant (ordered) and diff scans as async
//! streams of row batches, and serializable splits ("scan tokens").

pub mod decode;
