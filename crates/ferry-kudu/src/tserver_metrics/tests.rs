//! The answers' formats, with hand-made bodies and with answers captured
//! from a real Kudu 1.18.1 tablet server (`testdata/`, see its README);
//! the endpoint choice per server; the HTTP answer's framing.

use super::*;

/// A real 1.18.1 server's `/metrics_prometheus`, trimmed to a few metric
/// families of its two tablets and its server.
const PROMETHEUS_1_18: &str = include_str!("testdata/kudu-1.18.1-metrics_prometheus.txt");
/// The same server's JSON `/metrics` of the same tablets, asked for the
/// counters ferry reads, a moment later (no write in between).
const JSON_1_18: &str = include_str!("testdata/kudu-1.18.1-metrics.json");
/// The same server's clock from the JSON `/metrics`.
const CLOCK_1_18: &str = include_str!("testdata/kudu-1.18.1-clock.json");

const TABLET_A: &str = "2668913e64c441d7a6b5a6b1f17f0fc2";
const TABLET_B: &str = "2997b1ccc86547398e434aebf7b1bc8a";
const TABLE_1_18: &str = "fx.loadgen_auto_d18566a7b9e54c7fa88e4a67d6e81d39";

fn any(_: &str, _: Option<&str>) -> bool {
    true
}

#[test]
fn table_counters_come_from_the_tables_tablets() {
    let body = br#"[
      {"type":"tablet","id":"a","attributes":{"table_name":"t"},"metrics":[
        {"name":"rows_inserted","value":10},{"name":"rows_deleted","value":2}]},
      {"type":"tablet","id":"b","attributes":{"table_name":"other"},"metrics":[
        {"name":"rows_inserted","value":99}]}]"#;
    let found = json::tablet_values(body, &COUNTER_NAMES, |_, t| t == Some("t")).expect("parses");
    assert_eq!(found.len(), 1);
    assert_eq!(TableCounters::of_tablet(&found["a"]).total(), 12);
    assert_eq!(http::percent_encode("default.t 1"), "default.t%201");
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
    let asked = ["aaaa", "bbbb"];
    let values = json::tablet_values(TABLETS.as_bytes(), &COUNTER_NAMES, |id, _| {
        asked.contains(&id)
    })
    .expect("parses");
    let c = complete_counters(values);
    assert_eq!(c.get("aaaa"), Some(&Counters([10, 0, 3, 1, 4096])));
    // bbbb lacks counters: no reading; cccc was not asked for.
    assert_eq!(c.len(), 1);
}

#[test]
fn the_clock_of_the_server_entity() {
    let body = br#"[{"type":"server","id":"kudu.tabletserver","metrics":[
        {"name":"hybrid_clock_error","value":5},{"name":"hybrid_clock_timestamp","value":7062385419237036032}]}]"#;
    assert_eq!(json::clock(body), Ok(7062385419237036032));
    assert_eq!(json::clock(CLOCK_1_18.as_bytes()), Ok(7358922703677825024));
    assert!(json::clock(b"[]").is_err());
    assert!(json::clock(b"<html>").is_err());
}

#[test]
fn a_real_prometheus_dump_gives_the_counters_of_the_json_endpoint() {
    let from_prometheus =
        prometheus::tablet_values(PROMETHEUS_1_18.as_bytes(), &COUNTER_NAMES, |_| true)
            .expect("parses");
    let from_json = json::tablet_values(JSON_1_18.as_bytes(), &COUNTER_NAMES, any).expect("parses");
    let expected = HashMap::from([
        (TABLET_A.to_owned(), Counters([183, 46, 0, 21, 18268])),
        (TABLET_B.to_owned(), Counters([157, 54, 0, 19, 16990])),
    ]);
    assert_eq!(complete_counters(from_prometheus.clone()), expected);
    assert_eq!(complete_counters(from_json.clone()), expected);
    // The table's counters agree too (JSON by name, Prometheus by id).
    let table = |values: &HashMap<String, [Option<u64>; 5]>| {
        values
            .values()
            .map(TableCounters::of_tablet)
            .fold(TableCounters::default(), TableCounters::add)
    };
    let by_name = json::tablet_values(JSON_1_18.as_bytes(), &COUNTER_NAMES, |_, t| {
        t == Some(TABLE_1_18)
    })
    .expect("parses");
    assert_eq!(table(&by_name), table(&from_prometheus));
    assert_eq!(
        table(&from_prometheus),
        TableCounters {
            rows_inserted: 340,
            rows_upserted: 100,
            rows_updated: 0,
            rows_deleted: 40,
        }
    );
}

#[test]
fn only_the_asked_tablets_and_the_named_metrics_are_taken_from_a_dump() {
    let only_b = prometheus::tablet_values(PROMETHEUS_1_18.as_bytes(), &COUNTER_NAMES, |id| {
        id == TABLET_B
    })
    .expect("parses");
    assert_eq!(only_b.len(), 1);
    // Families with similar names (scanner_rows_scanned,
    // insert_ignore_errors), gauges and summaries are not counters asked
    // for; the server's metrics are no tablet's.
    let names = [
        "live_row_count",
        "log_append_latency",
        "hybrid_clock_timestamp",
    ];
    let other =
        prometheus::tablet_values(PROMETHEUS_1_18.as_bytes(), &names, |_| true).expect("parses");
    assert_eq!(other[TABLET_A], [Some(185), None, None]);
}

#[test]
fn sample_lines_are_read_as_the_text_format_writes_them() {
    let body = concat!(
        "# HELP kudu_tablet_aa_rows_inserted Rows {inserted}\n",
        "# TYPE kudu_tablet_aa_rows_inserted counter\n",
        "kudu_tablet_aa_rows_inserted{unit_type=\"rows\"} 7\r\n",
        "kudu_tablet_aa_rows_upserted 8 1712345678000\n",
        "kudu_tablet_aa_rows_updated{a=\"x}\\\"y\",unit_type=\"rows\"} 9\n",
        "kudu_tablet_aa_rows_deleted{unit_type=\"rows\"} 1.5\n",
        "kudu_tablet_aa_log_bytes_logged{unit_type=\"bytes\"} -3\n",
        "  \n",
        "kudu_tablet_bb_rows_inserted{unit_type=\"rows\"} 18446744073709551615\n",
        "other_metric 1\n",
    );
    let v = prometheus::tablet_values(body.as_bytes(), &COUNTER_NAMES, |_| true).expect("parses");
    // A whole number, after labels (even with a quoted brace) or a bare
    // name; a timestamp after it does not count. Not whole: none.
    assert_eq!(v["aa"], [Some(7), Some(8), Some(9), None, None]);
    assert_eq!(v["bb"][0], Some(u64::MAX));
}

#[test]
fn an_answer_without_kudu_metrics_is_refused() {
    let html = b"<html><body>Forbidden</body></html>";
    assert!(prometheus::tablet_values(html, &COUNTER_NAMES, |_| true).is_err());
    assert!(prometheus::tablet_values(b"", &COUNTER_NAMES, |_| true).is_err());
    // A server with no tablet still has its own metrics: no tablet, no error.
    let server_only = b"kudu_tserver_uptime{unit_type=\"microseconds\"} 5\n";
    let none = prometheus::tablet_values(server_only, &COUNTER_NAMES, |_| true).expect("parses");
    assert!(none.is_empty());
}

#[test]
fn each_server_is_read_where_its_release_has_the_tablets() {
    let prefer = EndpointChoice::PrometheusWhereAvailable;
    for (version, endpoint) in [
        ("kudu 1.18.1 (rev 3a9f2b1c)", Endpoint::Prometheus),
        ("kudu 1.19.0-SNAPSHOT", Endpoint::Prometheus),
        ("kudu 1.18.0.7.3.1.0-100", Endpoint::Prometheus),
        ("kudu 1.17.1 (rev 0a1b2c)", Endpoint::Json),
        ("kudu 1.17.0.7.2.18.0-123", Endpoint::Json),
        ("", Endpoint::Json),
        ("unknown", Endpoint::Json),
    ] {
        assert_eq!(prefer.for_server(version), endpoint, "{version}");
        assert_eq!(
            EndpointChoice::default().for_server(version),
            Endpoint::Json
        );
    }
    assert_eq!(Endpoint::Prometheus.path(), "/metrics_prometheus");
    assert_eq!(Endpoint::Json.path(), "/metrics");
}

#[test]
fn chunked_bodies_are_reassembled() {
    assert_eq!(
        http::dechunk(b"4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\n\r\n"),
        Some(b"Wikipedia".to_vec())
    );
    assert_eq!(http::dechunk(b"9\r\nshort\r\n"), None);
}

#[test]
fn an_answer_cut_short_is_not_taken_for_a_whole_one() {
    let answer = |head: &str, body: &str| format!("{head}\r\n\r\n{body}").into_bytes();
    let ok = answer("HTTP/1.1 200 OK\r\nContent-Length: 5", "abcde");
    assert_eq!(
        http::body_of("a", "/p", &ok).expect("whole"),
        b"abcde".to_vec()
    );
    let cut = answer("HTTP/1.1 200 OK\r\ncontent-length: 9", "abcde");
    let e = http::body_of("a", "/p", &cut).expect_err("cut");
    assert!(e.to_string().contains("5 of 9 bytes"), "{e}");
    let refused = answer("HTTP/1.1 404 Not Found\r\nContent-Length: 0", "");
    assert!(matches!(
        http::body_of("a", "/p", &refused),
        Err(WebError::Status { status: 404, .. })
    ));
    // No length given (the connection's end is the body's): all of it.
    let unframed = answer("HTTP/1.1 200 OK", "abc");
    assert_eq!(
        http::body_of("a", "/p", &unframed).expect("whole"),
        b"abc".to_vec()
    );
}
