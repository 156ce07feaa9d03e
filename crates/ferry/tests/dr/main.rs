//! Disaster recovery with the real binary: warm standby with fencing,
//! planned and unplanned cutover drills, the reverse job from a cutover
//! report, `ferry verify`, state replication to a DR store and state on
//! an S3 server.

mod cutover_drills;
mod from_cutover;
mod s3_state;
mod standby;
mod state_replication;
mod verify;
