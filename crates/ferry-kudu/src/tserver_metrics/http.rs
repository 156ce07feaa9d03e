//! One GET to a tablet server's web server: plain HTTP/1.1, one request per
//! connection (no client library for a few GETs a window).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest answer accepted. A Prometheus dump is ~65 KiB per tablet
/// replica, so a server with more than ~1 000 replicas passes it.
pub(crate) const MAX_BODY: usize = 64 << 20;

/// Why a reading could not be taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebError {
    #[error("cannot reach {addr}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{addr} did not answer within {0:?}", .timeout)]
    Timeout { addr: String, timeout: Duration },
    #[error("{addr} answered HTTP {status} to {path}")]
    Status {
        addr: String,
        path: String,
        status: u16,
    },
    #[error("{addr} sent an answer to {path} that is not Kudu's metrics: {why}")]
    Malformed {
        addr: String,
        path: String,
        why: String,
    },
}

impl WebError {
    /// A `Malformed` error of `path` on `addr`.
    pub(crate) fn malformed(addr: &str, path: &str, why: impl Into<String>) -> Self {
        WebError::Malformed {
            addr: addr.to_owned(),
            path: path.to_owned(),
            why: why.into(),
        }
    }
}

/// `GET path` from `addr`, accepting `accept`; the body of a 200 answer.
pub(crate) async fn get(
    addr: &str,
    path: &str,
    accept: &str,
    timeout: Duration,
) -> Result<Vec<u8>, WebError> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|source| WebError::Connect {
                addr: addr.to_owned(),
                source,
            })?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: {accept}\r\n\r\n"
        );
        let io = |source| WebError::Connect {
            addr: addr.to_owned(),
            source,
        };
        stream.write_all(request.as_bytes()).await.map_err(io)?;
        let mut raw = Vec::new();
        (&mut stream)
            .take(MAX_BODY as u64 + 64 * 1024)
            .read_to_end(&mut raw)
            .await
            .map_err(io)?;
        Ok::<_, WebError>(raw)
    };
    let raw = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| WebError::Timeout {
            addr: addr.to_owned(),
            timeout,
        })??;
    body_of(addr, path, &raw)
}

/// The body of the 200 answer `raw` (headers and body) that `addr` sent to
/// `GET path`.
pub(crate) fn body_of(addr: &str, path: &str, raw: &[u8]) -> Result<Vec<u8>, WebError> {
    let malformed = |why: &str| WebError::malformed(addr, path, why);
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| malformed("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let body = &raw[split + 4..];
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| malformed("no status line"))?;
    if status != 200 {
        return Err(WebError::Status {
            addr: addr.to_owned(),
            path: path.to_owned(),
            status,
        });
    }
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        return dechunk(body).ok_or_else(|| malformed("broken chunked encoding"));
    }
    // A cut answer must not pass for a whole one: the Prometheus text has
    // no end marker, so a dump cut short would just lack tablets.
    if body.len() > MAX_BODY {
        return Err(malformed("larger than 64 MiB"));
    }
    let length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        if !name.trim().eq_ignore_ascii_case("content-length") {
            return None;
        }
        value.trim().parse::<usize>().ok()
    });
    match length {
        Some(n) if n != body.len() => {
            Err(malformed(&format!("{} of {n} bytes arrived", body.len())))
        }
        _ => Ok(body.to_vec()),
    }
}

/// The payload of a chunked body.
pub(crate) fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        if body.len() < size + 2 || out.len() + size > MAX_BODY {
            return None;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

/// `s` as a URL query value.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
