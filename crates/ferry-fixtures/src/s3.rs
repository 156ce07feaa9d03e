//! The tests' own view of a test S3 server ([`ferry_testkit::S3Server`]):
//! the settings ferry gets for it, and a resolver that opens its buckets,
//! so a test can read and damage what ferry wrote there.

use std::sync::Arc;

use ferry_objstore::{ObjectStoreResolver, S3Key, S3Settings};
use ferry_testkit::S3Server;

/// The `s3.*` settings (endpoint and credentials) of `server`.
pub fn settings(server: &S3Server) -> S3Settings {
    let mut settings = S3Settings::default();
    settings
        .set(S3Key::Endpoint, &server.endpoint())
        .expect("endpoint");
    settings
        .set(S3Key::AccessKey, server.access_key())
        .expect("access key");
    settings
        .set(S3Key::SecretKey, server.secret_key())
        .expect("secret key");
    settings
}

/// A resolver that opens `server`'s buckets with [`settings`].
pub fn resolver(server: &S3Server) -> Arc<ObjectStoreResolver> {
    Arc::new(ObjectStoreResolver::from_settings(&settings(server)))
}
