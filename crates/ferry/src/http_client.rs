//! A small HTTP/1.1 JSON client (hyper-util), used by the CLI verbs to talk
//! to the REST API.
//! Plain HTTP by default; [`HttpClient::secured`] adds TLS (rustls, for
//! `https://` URLs, with an optional client certificate) and a bearer
//! token, for a REST API secured with `security.ssl.rest.*` /
//! `security.rest.token-file`.

use crate::api::flink::ErrorResponse;
use crate::security::Token;
use anyhow::{anyhow, Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{header, Method, Request, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;

/// A JSON-over-HTTP client with a per-request timeout.
#[derive(Clone)]
pub struct HttpClient {
    inner: Inner,
    timeout: Duration,
    /// Sent as `Authorization: Bearer …` with every request.
    token: Option<Token>,
}

#[derive(Clone)]
enum Inner {
    Plain(Client<HttpConnector, Full<Bytes>>),
    /// `https://` through rustls (`http://` URLs still plain).
    Tls(Client<HttpsConnector<HttpConnector>, Full<Bytes>>),
}

/// How [`HttpClient::secured`] talks to a secured REST API.
#[derive(Debug, Default)]
pub struct ClientSecurity {
    /// TLS for `https://` URLs (trusted CAs, client certificate).
    pub tls: Option<rustls::ClientConfig>,
    /// The bearer token.
    pub token: Option<Token>,
}

/// A response: status and body (parsed as JSON when it is JSON).
#[derive(Debug, Clone)]
pub struct Response {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body as received.
    pub body: Bytes,
}

impl Response {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as one of the typed REST bodies.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "the server answered {} with a body that is not a {}: {}",
                self.status,
                std::any::type_name::<T>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("?"),
                self.text()
            )
        })
    }

    /// Flink's `{"errors": [...]}` joined, or the raw body.
    pub fn error_message(&self) -> String {
        match serde_json::from_slice::<ErrorResponse>(&self.body) {
            Ok(e) => e.errors.join("; "),
            Err(_) => self.text(),
        }
    }
}

impl HttpClient {
    /// A client with TLS and / or a bearer token.
    pub fn secured(timeout: Duration, security: ClientSecurity) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        connector.set_nodelay(true);
        let builder = Client::builder(TokioExecutor::new());
        let inner = match security.tls {
            None => Inner::Plain(builder.build(connector)),
            Some(config) => {
                connector.enforce_http(false);
                let https = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(config)
                    .https_or_http()
                    .enable_http1()
                    .wrap_connector(connector);
                Inner::Tls(builder.build(https))
            }
        };
        HttpClient {
            inner,
            timeout,
            token: security.token,
        }
    }

    /// Sends one request; `body` is sent as JSON.
    pub async fn request<B: Serialize + ?Sized>(
        &self,
        method: Method,
        url: &str,
        body: Option<&B>,
    ) -> Result<Response> {
        let mut req = Request::builder()
            .method(method.clone())
            .uri(url)
            .header("accept", "application/json");
        if let Some(token) = &self.token {
            req = req.header(header::AUTHORIZATION, token.header_value());
        }
        let payload = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                Bytes::from(serde_json::to_vec(b)?)
            }
            None => Bytes::new(),
        };
        let req = req
            .body(Full::new(payload))
            .with_context(|| format!("invalid URL {url}"))?;
        let call = async {
            let resp = match &self.inner {
                Inner::Plain(c) => c.request(req).await?,
                Inner::Tls(c) => c.request(req).await?,
            };
            let status = resp.status();
            let body = resp.into_body().collect().await?.to_bytes();
            Ok::<_, anyhow::Error>(Response { status, body })
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(r) => r.map_err(|e| anyhow!("{method} {url}: {}", error_chain(&*e))),
            Err(_) => Err(anyhow!(
                "{method} {url}: no answer within {:?}",
                self.timeout
            )),
        }
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}
