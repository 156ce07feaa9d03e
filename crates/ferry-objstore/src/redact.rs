//! [`RedactingStore`]: a [`StateStore`] whose errors carry no secret and no
//! raw XML.
//!
//! object_store errors embed request URLs and the server's response body;
//! SigV4 keeps the secret key off the wire, but a session token travels in a
//! header and servers echo what they like. Every backend error is therefore
//! flattened to one line ([`describe`]), S3 error bodies condensed to
//! `Code: Message`, and every known secret replaced by `***` before the
//! error leaves this crate.

use std::sync::Arc;

use bytes::Bytes;
use ferry_engine::checkpoint::{ObjectStateStore, StateKey, StateStore, StoreError, StoreFuture};

use crate::secret::{redact, Secret};

/// A backend error, already described and redacted (no source chain: its
/// text is the whole story).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RedactedError(pub String);

/// Wraps an [`ObjectStateStore`], redacting its errors.
#[derive(Debug)]
pub struct RedactingStore {
    inner: ObjectStateStore,
    secrets: Arc<[Secret]>,
}

impl RedactingStore {
    /// `inner`, with every secret in `secrets` kept out of its errors.
    pub fn new(inner: ObjectStateStore, secrets: Arc<[Secret]>) -> Self {
        RedactingStore { inner, secrets }
    }

    fn clean(&self, error: StoreError) -> StoreError {
        match error {
            StoreError::Backend { op, key, source } => StoreError::Backend {
                op,
                key,
                source: Box::new(RedactedError(describe(source.as_ref(), &self.secrets))),
            },
            other => other,
        }
    }
}

impl StateStore for RedactingStore {
    fn put_if_absent<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let result = self.inner.put_if_absent(key, bytes).await;
            result.map_err(|e| self.clean(e))
        })
    }

    fn put<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let result = self.inner.put(key, bytes).await;
            result.map_err(|e| self.clean(e))
        })
    }

    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>> {
        Box::pin(async move {
            let result = self.inner.get(key).await;
            result.map_err(|e| self.clean(e))
        })
    }

    fn list<'a>(&'a self, prefix: &'a StateKey) -> StoreFuture<'a, Vec<StateKey>> {
        Box::pin(async move {
            let result = self.inner.list(prefix).await;
            result.map_err(|e| self.clean(e))
        })
    }

    fn list_modified<'a>(
        &'a self,
        prefix: &'a StateKey,
    ) -> StoreFuture<'a, Vec<(StateKey, Option<u64>)>> {
        Box::pin(async move {
            let result = self.inner.list_modified(prefix).await;
            result.map_err(|e| self.clean(e))
        })
    }

    fn delete<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let result = self.inner.delete(key).await;
            result.map_err(|e| self.clean(e))
        })
    }
}

/// One line for an error and its causes: each cause's text once (object
/// store errors often repeat their source's text), an S3 XML body reduced
/// to `Code: Message`, secrets replaced by `***`.
pub fn describe(error: &(dyn std::error::Error + 'static), secrets: &[Secret]) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let more = cause.to_string();
        if !more.is_empty() && !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        next = cause.source();
    }
    redact(&condense_xml(&text), secrets)
}

/// `…<?xml …><Error><Code>C</Code><Message>M</Message>…` → `… C: M`.
fn condense_xml(text: &str) -> String {
    let Some(start) = text.find("<?xml").or_else(|| text.find("<Error>")) else {
        return text.to_string();
    };
    let body = &text[start..];
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let from = body.find(&open)? + open.len();
        let to = body[from..].find(&close)? + from;
        Some(body[from..to].trim().to_string())
    };
    let summary = match (tag("Code"), tag("Message")) {
        (Some(code), Some(message)) if !message.is_empty() => format!("{code}: {message}"),
        (Some(code), _) => code,
        _ => "(unparsed XML error body)".to_string(),
    };
    format!("{}{summary}", &text[..start])
}

/// The S3 error code in a described error (`NoSuchBucket`, …), if any.
pub(crate) fn s3_code(text: &str) -> Option<&str> {
    const CODES: &[&str] = &[
        "NoSuchBucket",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "InvalidBucketName",
        "ExpiredToken",
        "InvalidToken",
    ];
    CODES.iter().copied().find(|c| text.contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner with token tok-12345")]
    struct Inner;

    #[test]
    fn causes_once_secrets_blanked_xml_condensed() {
        let e = Outer(Inner);
        assert_eq!(
            describe(&e, &[Secret::new("tok-12345")]),
            "outer: inner with token ***"
        );
        let xml = "Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message><RequestId>1</RequestId></Error>";
        assert_eq!(
            condense_xml(xml),
            "Server returned non-2xx status code: 403 Forbidden: SignatureDoesNotMatch: The request signature we calculated does not match"
        );
        assert_eq!(s3_code(xml), Some("SignatureDoesNotMatch"));
        assert_eq!(condense_xml("plain"), "plain");
    }
}
