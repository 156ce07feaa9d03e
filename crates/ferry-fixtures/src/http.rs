//! A blocking HTTP/1.1 client for tests that talk to ferry's REST API and
//! metrics endpoint (no client library: the tests check the wire shapes).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long a call waits for an answer unless told otherwise.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One call to `127.0.0.1:port`: (status, body); 0 as the status when the
/// answer has no status line. Panics when the server cannot be reached.
pub fn http(method: &str, port: u16, path: &str, body: Option<&str>) -> (u16, String) {
    try_http(method, port, path, body)
        .unwrap_or_else(|e| panic!("{method} 127.0.0.1:{port}{path}: {e}"))
}

/// [`http`], with an unreachable server (or a broken answer) as an error:
/// for polls that expect the server to come and go.
pub fn try_http(
    method: &str,
    port: u16,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    try_http_at("127.0.0.1", port, method, path, body, READ_TIMEOUT)
}

/// [`try_http`] to `host:port`, connecting and waiting for the answer at
/// most `timeout` each (a process in a network namespace, a poll that must
/// not hang on a stopped server).
pub fn try_http_at(
    host: &str,
    port: u16,
    method: &str,
    path: &str,
    body: Option<&str>,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("no address for {host}")))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    let body = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Ok((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

/// `GET path` that must answer 200 with JSON.
pub fn get_json(port: u16, path: &str) -> serde_json::Value {
    let (status, body) = http("GET", port, path, None);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}
