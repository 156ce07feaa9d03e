//! Reads a tablet server's write counters and hybrid clock from its web
//! server's JSON `/metrics` endpoint (plain HTTP/1.1, one request per
//! connection; no client library for two GETs a window).

use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Counters;

/// The per-tablet counters a reading compares: every row a write changed
/// (by kind) and every byte the replica appended to its WAL (which also
/// moves on transaction commits and schema changes, whose rows the row
/// counters may not show).
pub(super) const COUNTER_NAMES: [&str; 5] = [
    "rows_inserted",
    "rows_upserted",
    "rows_updated",
    "rows_deleted",
    "log_bytes_logged",
];

/// Above this many tablets the request asks for every tablet of the
/// server and filters here (the id list would make a very long URL).
const MAX_IDS_IN_URL: usize = 64;

/// The largest answer accepted.
const MAX_BODY: usize = 64 << 20;

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
    #[error("{addr} sent an answer that is not Kudu's metrics JSON: {why}")]
    Malformed { addr: String, why: String },
}

/// One tablet server's counters of the asked tablets (tablets it does not
/// host, or with a counter missing, are left out) and its hybrid clock,
/// read after the counters.
#[derive(Debug, Clone)]
pub(super) struct ServerReading {
    pub counters: HashMap<String, Counters>,
    pub clock: u64,
}

/// Reads the counters of `tablets` on the tablet server whose web server is
/// at `addr` (`host:port`), then its hybrid clock.
pub(super) async fn read(
    addr: &str,
    tablets: &[&str],
    timeout: Duration,
) -> Result<ServerReading, WebError> {
    let ids = if tablets.len() <= MAX_IDS_IN_URL {
        format!("&ids={}", tablets.join(","))
    } else {
        String::new()
    };
    let path = format!(
        "/metrics?types=tablet{ids}&metrics={}&compact=true",
        COUNTER_NAMES.join(",")
    );
    let body = get(addr, &path, timeout).await?;
    let counters = parse_counters(&body, tablets).map_err(|why| WebError::Malformed {
        addr: addr.to_owned(),
        why,
    })?;
    // Asked second: the clock is then past every write the counters count.
    let path = "/metrics?types=server&metrics=hybrid_clock_timestamp&compact=true";
    let body = get(addr, path, timeout).await?;
    let clock = parse_clock(&body).map_err(|why| WebError::Malformed {
        addr: addr.to_owned(),
        why,
    })?;
    Ok(ServerReading { counters, clock })
}

/// The counters of `wanted` tablets in a `/metrics` answer.
pub(super) fn parse_counters(
    body: &[u8],
    wanted: &[&str],
) -> Result<HashMap<String, Counters>, String> {
    let entities: Vec<serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut out = HashMap::new();
    for e in &entities {
        if e.get("type").and_then(|t| t.as_str()) != Some("tablet") {
            continue;
        }
        let Some(id) = e.get("id").and_then(|i| i.as_str()) else {
            continue;
        };
        if !wanted.contains(&id) {
            continue;
        }
        let mut values = [None; COUNTER_NAMES.len()];
        for m in e
            .get("metrics")
            .and_then(|m| m.as_array())
            .into_iter()
            .flatten()
        {
            let name = m.get("name").and_then(|n| n.as_str()).unwrap_or_default();
            if let Some(i) = COUNTER_NAMES.iter().position(|&c| c == name) {
                values[i] = m.get("value").and_then(|v| v.as_u64());
            }
        }
        // A counter this server does not report: no proof for this tablet.
        if let [Some(a), Some(b), Some(c), Some(d), Some(e)] = values {
            out.insert(id.to_owned(), Counters([a, b, c, d, e]));
        }
    }
    Ok(out)
}

/// The server's `hybrid_clock_timestamp` in a `/metrics` answer.
pub(super) fn parse_clock(body: &[u8]) -> Result<u64, String> {
    let entities: Vec<serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| e.to_string())?;
    entities
        .iter()
        .filter(|e| e.get("type").and_then(|t| t.as_str()) == Some("server"))
        .flat_map(|e| {
            e.get("metrics")
                .and_then(|m| m.as_array())
                .into_iter()
                .flatten()
        })
        .find(|m| m.get("name").and_then(|n| n.as_str()) == Some("hybrid_clock_timestamp"))
        .and_then(|m| m.get("value").and_then(|v| v.as_u64()))
        .ok_or_else(|| "no hybrid_clock_timestamp".to_owned())
}

/// `GET path` from `addr`; the body of a 200 answer.
async fn get(addr: &str, path: &str, timeout: Duration) -> Result<Vec<u8>, WebError> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|source| WebError::Connect {
                addr: addr.to_owned(),
                source,
            })?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n\r\n");
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
    let malformed = |why: &str| WebError::Malformed {
        addr: addr.to_owned(),
        why: why.to_owned(),
    };
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
        dechunk(body).ok_or_else(|| malformed("broken chunked encoding"))
    } else {
        Ok(body.to_vec())
    }
}

/// The payload of a chunked body.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    const TABLETS: &str = r#"[
      {"type":"tablet","id":"aaaa","attributes":{"table_name":"t"},"metrics":[
        {"name":"rows_inserted","value":10},{"name":"rows_upserted","value":0},
        {"name":"rows_updated","value":3},{"name":"rows_deleted","value":1},
        {"name":"log_bytes_logged","value":4096},{"name":"scanner_rows_scanned","value":99}]},
      {"type":"tablet","id":"bbbb","metrics":[{"name":"rows_inserted","value":1}]},
      {"type":"tablet","id":"cccc","metrics":[
        {"name":"rows_inserted","value":0},{"name":"rows_upserted","value":0},
        {"name":"rows_updated","value":0},{"name":"rows_deleted","value":0},
        {"name":"log_bytes_logged","value":0}]}
    ]"#;

    #[test]
    fn counters_of_the_asked_tablets_with_every_counter() {
        let c = parse_counters(TABLETS.as_bytes(), &["aaaa", "bbbb"]).expect("parses");
        assert_eq!(c.get("aaaa"), Some(&Counters([10, 0, 3, 1, 4096])));
        // bbbb lacks counters: no reading; cccc was not asked for.
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn the_clock_of_the_server_entity() {
        let body = br#"[{"type":"server","id":"kudu.tabletserver","metrics":[
            {"name":"hybrid_clock_error","value":5},{"name":"hybrid_clock_timestamp","value":7062385419237036032}]}]"#;
        assert_eq!(parse_clock(body), Ok(7062385419237036032));
        assert!(parse_clock(b"[]").is_err());
        assert!(parse_clock(b"<html>").is_err());
    }

    #[test]
    fn chunked_bodies_are_reassembled() {
        assert_eq!(
            dechunk(b"4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\n\r\n"),
            Some(b"Wikipedia".to_vec())
        );
        assert_eq!(dechunk(b"9\r\nshort\r\n"), None);
    }
}
