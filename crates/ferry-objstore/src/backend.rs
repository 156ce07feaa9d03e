//! Building an object_store client for one bucket: S3 (feature `s3`), GCS
//! (`gcs`) and Azure (`azure`), all with the same short retry policy.
//!
//! Retries: object_store retries transient failures (connection errors,
//! 5xx, throttling) with exponential backoff. The defaults (10 retries,
//! 3 minutes) would hold a checkpoint for minutes during an outage; ferry
//! prefers a checkpoint that fails in seconds and counts against
//! `execution.checkpointing.tolerable-failed-checkpoints`, with the next
//! checkpoint trying again.

use std::sync::Arc;
use std::time::Duration;

use ferry_engine::checkpoint::ObjectScheme;
use object_store::ObjectStore;

use crate::settings::ResolvedS3;

/// Retries of one request after its first attempt.
pub const MAX_RETRIES: usize = 4;
/// No retry starts later than this after the first attempt.
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed to open a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Time allowed for one request, start to end.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
fn retry_config() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: MAX_RETRIES,
        retry_timeout: RETRY_TIMEOUT,
    }
}

#[cfg(any(feature = "s3", feature = "gcs", feature = "azure"))]
fn client_options(allow_http: bool) -> object_store::ClientOptions {
    object_store::ClientOptions::new()
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout(REQUEST_TIMEOUT)
        .with_allow_http(allow_http)
}

/// A client for `bucket`. The error text names no secret (builder errors
/// are about configuration values; the caller redacts anyway).
pub(crate) fn build(
    scheme: ObjectScheme,
    bucket: &str,
    s3: Option<&ResolvedS3>,
) -> Result<Arc<dyn ObjectStore>, String> {
    match scheme {
        ObjectScheme::S3 => match s3 {
            Some(resolved) => s3_store(resolved, bucket),
            None => Err("the S3 settings are invalid".to_string()),
        },
        ObjectScheme::Gs => gcs_store(bucket),
        ObjectScheme::Az => azure_store(bucket),
        _ => Err(format!("the '{scheme}' scheme is not supported")),
    }
}

#[cfg(feature = "s3")]
fn s3_store(r: &ResolvedS3, bucket: &str) -> Result<Arc<dyn ObjectStore>, String> {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
    let mut b = AmazonS3Builder::new();
    for (name, value) in &r.passthrough {
        if let Ok(key) = name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
            b = b.with_config(key, value.expose());
        }
    }
    b = b
        .with_bucket_name(bucket)
        .with_region(&r.region)
        // `put_if_absent` is `PutMode::Create`: a PUT with `If-None-Match: *`.
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_retry(retry_config())
        .with_client_options(client_options(r.allow_http))
        .with_virtual_hosted_style_request(!r.path_style);
    if let Some(endpoint) = &r.endpoint {
        let endpoint = if r.path_style {
            endpoint.clone()
        } else {
            // object_store wants the bucket in a virtual-hosted endpoint.
            virtual_hosted(endpoint, bucket)?
        };
        b = b.with_endpoint(endpoint);
    }
    if let Some((id, secret)) = &r.credentials {
        b = b
            .with_access_key_id(id)
            .with_secret_access_key(secret.expose());
    }
    if let Some(token) = &r.session_token {
        b = b.with_token(token.expose());
    }
    let store = b.build().map_err(|e| e.to_string())?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "s3"))]
fn s3_store(_: &ResolvedS3, _: &str) -> Result<Arc<dyn ObjectStore>, String> {
    Err(not_built("s3://", "s3"))
}

/// `https://host:port` → `https://bucket.host:port`.
#[cfg(feature = "s3")]
fn virtual_hosted(endpoint: &str, bucket: &str) -> Result<String, String> {
    let mut url = url::Url::parse(endpoint).map_err(|e| format!("s3.endpoint: {e}"))?;
    let host = url.host_str().unwrap_or_default().to_string();
    url.set_host(Some(&format!("{bucket}.{host}")))
        .map_err(|e| format!("s3.endpoint with bucket '{bucket}': {e}"))?;
    Ok(url.as_str().trim_end_matches('/').to_string())
}

#[cfg(feature = "gcs")]
fn gcs_store(bucket: &str) -> Result<Arc<dyn ObjectStore>, String> {
    let store = object_store::gcp::GoogleCloudStorageBuilder::from_env()
        .with_bucket_name(bucket)
        .with_retry(retry_config())
        .with_client_options(client_options(false))
        .build()
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "gcs"))]
fn gcs_store(_: &str) -> Result<Arc<dyn ObjectStore>, String> {
    Err(not_built("gs://", "gcs"))
}

#[cfg(feature = "azure")]
fn azure_store(container: &str) -> Result<Arc<dyn ObjectStore>, String> {
    let store = object_store::azure::MicrosoftAzureBuilder::from_env()
        .with_container_name(container)
        .with_retry(retry_config())
        .with_client_options(client_options(false))
        .build()
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "azure"))]
fn azure_store(_: &str) -> Result<Arc<dyn ObjectStore>, String> {
    Err(not_built("az://", "azure"))
}

#[cfg(not(all(feature = "s3", feature = "gcs", feature = "azure")))]
fn not_built(scheme: &str, feature: &str) -> String {
    format!("this ferry was built without {scheme} support (cargo feature '{feature}' of ferry-objstore)")
}

#[cfg(test)]
#[cfg(feature = "s3")]
mod tests {
    use super::*;

    #[test]
    fn virtual_hosted_endpoints_carry_the_bucket() {
        assert_eq!(
            virtual_hosted("https://s3.example.com:9000", "bkt").expect("valid"),
            "https://bkt.s3.example.com:9000"
        );
    }
}
