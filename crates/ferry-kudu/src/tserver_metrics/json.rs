//! Kudu's JSON `/metrics` answer: an array of entities (`type`, `id`,
//! `attributes`, `metrics: [{name, value}]`), filtered by the server to the
//! entity types, ids, attributes and metric names the request names.

use std::collections::HashMap;

/// The values of `names` (in that order) of every tablet entity that
/// `wanted(id, table_name)` accepts; a metric the entity lacks is `None`.
pub(crate) fn tablet_values<const N: usize>(
    body: &[u8],
    names: &[&str; N],
    wanted: impl Fn(&str, Option<&str>) -> bool,
) -> Result<HashMap<String, [Option<u64>; N]>, String> {
    let entities: Vec<serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let mut out = HashMap::new();
    for e in &entities {
        if e.get("type").and_then(|t| t.as_str()) != Some("tablet") {
            continue;
        }
        let Some(id) = e.get("id").and_then(|i| i.as_str()) else {
            continue;
        };
        let table = e
            .get("attributes")
            .and_then(|a| a.get("table_name"))
            .and_then(|n| n.as_str());
        if !wanted(id, table) {
            continue;
        }
        let mut values = [None; N];
        for m in e
            .get("metrics")
            .and_then(|m| m.as_array())
            .into_iter()
            .flatten()
        {
            let name = m.get("name").and_then(|n| n.as_str()).unwrap_or_default();
            if let Some(i) = names.iter().position(|&c| c == name) {
                values[i] = m.get("value").and_then(|v| v.as_u64());
            }
        }
        out.insert(id.to_owned(), values);
    }
    Ok(out)
}

/// A tablet entity's table id (its `table_id` attribute) and the values
/// asked for.
pub(crate) type Entity<const N: usize> = (Option<String>, [Option<u64>; N]);

/// Every tablet entity of a `/metrics` answer: its id → (its table's id
/// from the `table_id` attribute, the values of `names` in that order).
pub(crate) fn tablet_entities<const N: usize>(
    body: &[u8],
    names: &[&str; N],
) -> Result<HashMap<String, Entity<N>>, String> {
    let entities: Vec<serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let mut out = HashMap::new();
    for e in &entities {
        if e.get("type").and_then(|t| t.as_str()) != Some("tablet") {
            continue;
        }
        let Some(id) = e.get("id").and_then(|i| i.as_str()) else {
            continue;
        };
        let table_id = e
            .get("attributes")
            .and_then(|a| a.get("table_id"))
            .and_then(|n| n.as_str())
            .map(str::to_owned);
        let mut values = [None; N];
        for m in e
            .get("metrics")
            .and_then(|m| m.as_array())
            .into_iter()
            .flatten()
        {
            let name = m.get("name").and_then(|n| n.as_str()).unwrap_or_default();
            if let Some(i) = names.iter().position(|&c| c == name) {
                values[i] = m.get("value").and_then(|v| v.as_u64());
            }
        }
        out.insert(id.to_owned(), (table_id, values));
    }
    Ok(out)
}

/// The server's `hybrid_clock_timestamp` in a `/metrics` answer.
pub(crate) fn clock(body: &[u8]) -> Result<u64, String> {
    let entities: Vec<serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
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
