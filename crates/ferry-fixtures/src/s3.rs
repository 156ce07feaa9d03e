//! The tests' own view of a test S3 server ([`ferry_testkit::S3Server`]):
//! the settings ferry gets for it, and a resolver that opens its buckets,
//! so a test can read and damage what ferry wrote there.

use std::sync::Arc;

use ferry_engine::config::Config;
use ferry_objstore::{ObjectStoreResolver, S3Settings, S3_ACCESS_KEY, S3_ENDPOINT, S3_SECRET_KEY};
use ferry_testkit::S3Server;

/// The `s3.*` settings (endpoint and credentials) of `server`.
pub fn settings(server: &S3Server) -> S3Settings {
    let mut keys = Config::new();
    keys.set(&S3_ENDPOINT, server.endpoint());
    keys.set(&S3_ACCESS_KEY, server.access_key());
    keys.set(&S3_SECRET_KEY, server.secret_key());
    S3Settings::from_config(&keys).expect("valid s3 settings")
}

/// A resolver that opens `server`'s buckets with [`settings`].
pub fn resolver(server: &S3Server) -> Arc<ObjectStoreResolver> {
    Arc::new(ObjectStoreResolver::from_settings(&settings(server)))
}
