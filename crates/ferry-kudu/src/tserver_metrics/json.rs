//! Kudu's JSON `/metrics` answer: an array of entities (`type`, `id`,
//! `attributes`, `metrics: [{name, value}]`), filtered by the server to the
//! entity types, ids, attributes and metric names the request names.

use std::collections::HashMap;

/// Every tablet entity of a `/metrics` answer: its id, its attributes and
/// its metrics, to `each`.
fn for_each_tablet(
    body: &[u8],
    mut each: impl FnMut(&str, Option<&serde_json::Value>, &[serde_json::Value]),
) -> Result<(), String> {
    let entities: Vec<serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    for e in &entities {
        if e.get("type").and_then(|t| t.as_str()) != Some("tablet") {
            continue;
        }
        let Some(id) = e.get("id").and_then(|i| i.as_str()) else {
            continue;
        };
        let metrics = e.get("metrics").and_then(|m| m.as_array());
        each(id, e.get("attributes"), metrics.map_or(&[], Vec::as_slice));
    }
    Ok(())
}

/// The values of `names` (in that order) among `metrics`; one the entity
/// lacks is `None`.
fn values_of<const N: usize>(metrics: &[serde_json::Value], names: &[&str; N]) -> [Option<u64>; N] {
    let mut values = [None; N];
    for m in metrics {
        let name = m.get("name").and_then(|n| n.as_str()).unwrap_or_default();
        if let Some(i) = names.iter().position(|&c| c == name) {
            values[i] = m.get("value").and_then(|v| v.as_u64());
        }
    }
    values
}

/// An attribute's text.
fn attribute<'a>(attributes: Option<&'a serde_json::Value>, name: &str) -> Option<&'a str> {
    attributes
        .and_then(|a| a.get(name))
        .and_then(|n| n.as_str())
}

/// The values of `names` (in that order) of every tablet entity that
/// `wanted(id, table_name)` accepts; a metric the entity lacks is `None`.
pub(crate) fn tablet_values<const N: usize>(
    body: &[u8],
    names: &[&str; N],
    wanted: impl Fn(&str, Option<&str>) -> bool,
) -> Result<HashMap<String, [Option<u64>; N]>, String> {
    let mut out = HashMap::new();
    for_each_tablet(body, |id, attributes, metrics| {
        if wanted(id, attribute(attributes, "table_name")) {
            out.insert(id.to_owned(), values_of(metrics, names));
        }
    })?;
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
    let mut out = HashMap::new();
    for_each_tablet(body, |id, attributes, metrics| {
        let table_id = attribute(attributes, "table_id").map(str::to_owned);
        out.insert(id.to_owned(), (table_id, values_of(metrics, names)));
    })?;
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
