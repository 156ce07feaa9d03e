//! `GET` / `PATCH /ferry/jobs/:jobid/throttle`: a job's limits. The answer
//! is the engine's [`ThrottleSnapshot`] (`job`, `tables`,
//! `throttledReadSeconds`, `throttledWriteSeconds`); the request a
//! [`ThrottleRequest`]:
//!
//! ```json
//! {"table": "orders",
//!  "read":  {"snapshot": {"rowsPerSecond": 1000, "bytesPerSecond": "64mb"},
//!            "diff": {"rowsPerSecond": 0}},
//!  "write": {"snapshot": {"bytesPerSecond": 1048576}}}
//! ```
//!
//! Every field is optional; the limits given replace the current ones (0:
//! unlimited), the others stay. Without `table` the job-wide limits change.
//! A byte rate may be a number or text with a unit (`"64mb"`).

use ferry_engine::config::values::size_or_zero;
use ferry_engine::throttle::{LimitsUpdate, RateUpdate, WindowUpdate};
use serde::Serialize;
use serde_json::{Map, Value};

pub use ferry_engine::throttle::ThrottleSnapshot;

/// A change of a job's or a table's limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ThrottleRequest {
    /// The table whose own limits change; `None`: the job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The limits given.
    #[serde(flatten)]
    pub update: LimitsUpdate,
}

impl ThrottleRequest {
    /// Reads a request body; the error names the field at fault
    /// (`read.snapshot.rowsPerSecond`).
    pub fn from_json(body: &Value) -> Result<Self, String> {
        let top = object(body, "the body")?;
        only(top, &["table", "read", "write"], "")?;
        let table = match top.get("table") {
            None | Some(Value::Null) => None,
            Some(Value::String(t)) if !t.trim().is_empty() => Some(t.clone()),
            Some(_) => return Err("'table' must be a table name (a non-empty string)".into()),
        };
        Ok(ThrottleRequest {
            table,
            update: LimitsUpdate {
                read: window(top.get("read"), "read")?,
                write: window(top.get("write"), "write")?,
            },
        })
    }
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} must be a JSON object"))
}

fn only(map: &Map<String, Value>, known: &[&str], prefix: &str) -> Result<(), String> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown field '{prefix}{k}': expected one of {}",
            known.join(", ")
        )),
        None => Ok(()),
    }
}

fn window(v: Option<&Value>, name: &str) -> Result<WindowUpdate, String> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(WindowUpdate::default());
    };
    let map = object(v, &format!("'{name}'"))?;
    only(map, &["snapshot", "diff"], &format!("{name}."))?;
    Ok(WindowUpdate {
        snapshot: rate(map.get("snapshot"), &format!("{name}.snapshot"))?,
        diff: rate(map.get("diff"), &format!("{name}.diff"))?,
    })
}

fn rate(v: Option<&Value>, name: &str) -> Result<RateUpdate, String> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(RateUpdate::default());
    };
    let map = object(v, &format!("'{name}'"))?;
    only(
        map,
        &["rowsPerSecond", "bytesPerSecond"],
        &format!("{name}."),
    )?;
    let field = |key: &str, sizes: bool| -> Result<Option<u64>, String> {
        let path = format!("{name}.{key}");
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| {
                format!("'{path}' must be a whole number of 0 or more (0: unlimited), not {n}")
            }),
            Some(Value::String(s)) if sizes => size_or_zero(s)
                .map(Some)
                .map_err(|e| format!("'{path}': '{s}' {e}")),
            Some(other) => Err(format!(
                "'{path}' must be a whole number of 0 or more (0: unlimited), not {other}"
            )),
        }
    };
    Ok(RateUpdate {
        rows_per_second: field("rowsPerSecond", false)?,
        bytes_per_second: field("bytesPerSecond", true)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_reads_back_and_errors_name_the_field() {
        let body = json!({"table": "t", "read": {"snapshot": {"rowsPerSecond": 5, "bytesPerSecond": "1kb"}}});
        let req = ThrottleRequest::from_json(&body).expect("valid");
        assert_eq!(req.table.as_deref(), Some("t"));
        assert_eq!(req.update.read.snapshot.rows_per_second, Some(5));
        assert_eq!(req.update.read.snapshot.bytes_per_second, Some(1024));
        assert_eq!(req.update.write, WindowUpdate::default());
        // What the client sends is what the server reads.
        let sent = serde_json::to_value(&req).expect("json");
        assert_eq!(
            ThrottleRequest::from_json(&sent)
                .expect("again")
                .update
                .read
                .snapshot
                .bytes_per_second,
            Some(1024)
        );
        for (body, names) in [
            (
                json!({"read": {"snapshot": {"rowsPerSecond": -1}}}),
                "'read.snapshot.rowsPerSecond'",
            ),
            (
                json!({"write": {"diff": {"rowsPerSecond": "many"}}}),
                "'write.diff.rowsPerSecond'",
            ),
            (
                json!({"write": {"diff": {"bytesPerSecond": "9 parsecs"}}}),
                "'write.diff.bytesPerSecond'",
            ),
            (json!({"read": {"snapshots": {}}}), "'read.snapshots'"),
            (json!({"read": {"diff": {"rows": 1}}}), "'read.diff.rows'"),
            (json!({"reads": {}}), "'reads'"),
            (json!({"table": 3}), "'table'"),
            (json!([1]), "the body"),
        ] {
            let err = ThrottleRequest::from_json(&body).expect_err("refused");
            assert!(err.contains(names), "{err} should name {names}");
        }
    }
}
