//! The one reader of tablet servers' metrics: their web servers' JSON
//! `/metrics` (plain HTTP/1.1, one request per connection; no client
//! library for a few GETs a window). Kudu 1.17's `/metrics_prometheus` has
//! no tablet metrics.
//!
//! The servers come from the Kudu client's tablet-server list
//! (ListTabletServers names each server's web address), never from the
//! masters' web UI. Two readings are taken here:
//! - [`TserverMetrics::table_counters`]: a table's row write counters on
//!   one cluster (per-table activity, the drain check, the write guard);
//! - `read`: a server's counters of some tablets and its hybrid clock,
//!   read after them (quiet tablets).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kudu_client::KuduClient;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A replica's write counters ([`COUNTER_NAMES`], in that order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counters(pub [u64; 5]);

/// The per-tablet counters a reading compares: every row a write changed
/// (by kind) and every byte the replica appended to its WAL (which also
/// moves on transaction commits and schema changes, whose rows the row
/// counters may not show).
pub(crate) const COUNTER_NAMES: [&str; 5] = [
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
pub(crate) struct ServerReading {
    pub counters: HashMap<String, Counters>,
    pub clock: u64,
}

/// Reads the counters of `tablets` on the tablet server whose web server is
/// at `addr` (`host:port`), then its hybrid clock.
pub(crate) async fn read(
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
pub(crate) fn parse_counters(
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
pub(crate) fn parse_clock(body: &[u8]) -> Result<u64, String> {
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

/// The four row counters of one table on one cluster: per tablet the
/// highest among its replicas (followers count writes too, so a sum would
/// multiply by the replication factor), summed over the tablets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableCounters {
    /// Rows inserted.
    pub rows_inserted: u64,
    /// Rows upserted.
    pub rows_upserted: u64,
    /// Rows updated.
    pub rows_updated: u64,
    /// Rows deleted.
    pub rows_deleted: u64,
}

/// The row counters a table reading asks for.
const ROW_COUNTERS: &str = "rows_inserted,rows_upserted,rows_updated,rows_deleted";

impl TableCounters {
    /// Rows written, all kinds.
    pub fn total(&self) -> u64 {
        self.rows_inserted + self.rows_upserted + self.rows_updated + self.rows_deleted
    }

    fn set(&mut self, name: &str, v: u64) {
        match name {
            "rows_inserted" => self.rows_inserted = v,
            "rows_upserted" => self.rows_upserted = v,
            "rows_updated" => self.rows_updated = v,
            "rows_deleted" => self.rows_deleted = v,
            _ => {}
        }
    }

    fn max(self, o: TableCounters) -> TableCounters {
        TableCounters {
            rows_inserted: self.rows_inserted.max(o.rows_inserted),
            rows_upserted: self.rows_upserted.max(o.rows_upserted),
            rows_updated: self.rows_updated.max(o.rows_updated),
            rows_deleted: self.rows_deleted.max(o.rows_deleted),
        }
    }

    fn add(self, o: TableCounters) -> TableCounters {
        TableCounters {
            rows_inserted: self.rows_inserted + o.rows_inserted,
            rows_upserted: self.rows_upserted + o.rows_upserted,
            rows_updated: self.rows_updated + o.rows_updated,
            rows_deleted: self.rows_deleted + o.rows_deleted,
        }
    }

    /// Every counter with its name (metric suffix).
    pub fn named(&self) -> [(&'static str, u64); 4] {
        [
            ("inserted", self.rows_inserted),
            ("upserted", self.rows_upserted),
            ("updated", self.rows_updated),
            ("deleted", self.rows_deleted),
        ]
    }
}

/// Why a table's counters could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The client could not list the tablet servers.
    #[error("cannot list the tablet servers")]
    List(#[source] kudu_client::Error),
    /// The list named no tablet server with a web address.
    #[error("the masters list no tablet server with a web address")]
    NoServers,
    /// Every tablet server failed; each one's reason.
    #[error("no tablet server answered: {0}")]
    NoAnswer(String),
}

/// How long a tablet-server list is used before it is asked for again.
const RELIST_AFTER: Duration = Duration::from_secs(30);

/// One cluster's tablet servers, listed through its Kudu client, and
/// their `/metrics`.
pub struct TserverMetrics {
    client: KuduClient,
    /// Each server's web address (`host:port`).
    servers: Vec<String>,
    listed: Option<Instant>,
    timeout: Duration,
}

impl TserverMetrics {
    /// The tablet servers of `client`'s cluster, each asked with
    /// `timeout`.
    pub fn new(client: KuduClient, timeout: Duration) -> Self {
        TserverMetrics {
            client,
            servers: Vec::new(),
            listed: None,
            timeout,
        }
    }

    async fn list(&mut self) -> Result<(), MetricsError> {
        let servers = self
            .client
            .list_tablet_servers()
            .await
            .map_err(MetricsError::List)?;
        let addrs: Vec<String> = servers
            .into_iter()
            .filter_map(|s| s.http_addresses.into_iter().next())
            .collect();
        if addrs.is_empty() {
            return Err(MetricsError::NoServers);
        }
        self.servers = addrs;
        self.listed = Some(Instant::now());
        Ok(())
    }

    /// Table `table`'s row counters now, and how many servers answered.
    /// The servers are listed again every 30 s and after a server failed
    /// (it may have moved or died).
    pub async fn table_counters(
        &mut self,
        table: &str,
    ) -> Result<(TableCounters, usize), MetricsError> {
        if self.listed.is_none_or(|t| t.elapsed() > RELIST_AFTER) {
            self.list().await?;
        }
        let path = format!(
            "/metrics?types=tablet&metrics={ROW_COUNTERS}&attributes=table_name,{}&compact=1",
            percent_encode(table)
        );
        let timeout = self.timeout;
        let calls = self.servers.iter().map(|addr| {
            let path = path.as_str();
            async move { (addr, get(addr, path, timeout).await) }
        });
        let answers = futures::future::join_all(calls).await;
        let mut per_tablet: HashMap<String, TableCounters> = HashMap::new();
        let mut ok = 0;
        let mut failures = Vec::new();
        for (addr, answer) in answers {
            let parsed = answer.and_then(|body| {
                table_entities(&body, table).map_err(|why| WebError::Malformed {
                    addr: addr.clone(),
                    why,
                })
            });
            match parsed {
                Ok(tablets) => {
                    ok += 1;
                    for (id, c) in tablets {
                        let e = per_tablet.entry(id).or_default();
                        *e = e.max(c);
                    }
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
        if !failures.is_empty() {
            self.listed = None;
        }
        if ok == 0 {
            return Err(MetricsError::NoAnswer(failures.join("; ")));
        }
        let total = per_tablet
            .values()
            .fold(TableCounters::default(), |a, c| a.add(*c));
        Ok((total, ok))
    }
}

/// Each tablet of `table` in a `/metrics` answer, with its row counters.
fn table_entities(body: &[u8], table: &str) -> Result<Vec<(String, TableCounters)>, String> {
    let entities: Vec<serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for entity in &entities {
        let name = entity
            .get("attributes")
            .and_then(|a| a.get("table_name"))
            .and_then(|n| n.as_str());
        if name != Some(table) {
            continue;
        }
        let Some(id) = entity.get("id").and_then(|i| i.as_str()) else {
            continue;
        };
        let mut c = TableCounters::default();
        for m in entity
            .get("metrics")
            .and_then(|m| m.as_array())
            .into_iter()
            .flatten()
        {
            if let (Some(n), Some(v)) = (
                m.get("name").and_then(|n| n.as_str()),
                m.get("value").and_then(|v| v.as_u64()),
            ) {
                c.set(n, v);
            }
        }
        out.push((id.to_owned(), c));
    }
    Ok(out)
}

/// `s` as a URL query value.
fn percent_encode(s: &str) -> String {
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

    #[test]
    fn table_counters_come_from_the_tables_tablets() {
        let body = br#"[
          {"type":"tablet","id":"a","attributes":{"table_name":"t"},"metrics":[
            {"name":"rows_inserted","value":10},{"name":"rows_deleted","value":2}]},
          {"type":"tablet","id":"b","attributes":{"table_name":"other"},"metrics":[
            {"name":"rows_inserted","value":99}]}]"#;
        let found = table_entities(body, "t").expect("parses");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "a");
        assert_eq!(found[0].1.total(), 12);
        assert_eq!(percent_encode("default.t 1"), "default.t%201");
    }

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
