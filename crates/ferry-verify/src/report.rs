//! The human summary of a [`VerifyReport`] (its `Display`), printed by
//! `ferry verify` and `ferry cutover`.

use std::fmt;

use crate::values::display_map;
use crate::{DiffKind, Difference, Method, VerifyReport};

impl fmt::Display for VerifyReport {
    /// Lines without a final newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut lines: Vec<String> = Vec::new();
        let verdict = if self.equal { "EQUAL" } else { "DIFFERENT" };
        lines.push(format!(
            "{verdict}: source '{}' ({} rows at hybrid time {}) and sink '{}' ({} rows at hybrid time {})",
            self.source.table,
            self.source.rows,
            self.source.timestamp,
            self.sink.table,
            self.sink.rows,
            self.sink.timestamp
        ));
        let method = match self.method {
            Method::Server => "checksums on the tablet servers",
            Method::Client => "checksums on the client",
        };
        lines.push(format!(
            "compared {} rows, {} columns ({}), in {} key ranges with {method}, in {:.1} s",
            self.rows_compared,
            self.columns.len(),
            self.columns.join(", "),
            self.ranges,
            self.elapsed_ms as f64 / 1000.0
        ));
        for s in &self.skipped_columns {
            lines.push(format!("not compared: {} ({})", s.name, s.reason));
        }
        if self.differences > 0 {
            let tense = if self.repair.is_some() {
                "differed before the repair"
            } else {
                "differ"
            };
            lines.push(format!(
                "{} rows {tense} ({} missing in the sink, {} extra in the sink, {} differing) in {} key ranges:",
                self.differences, self.missing, self.extra, self.differing, self.ranges_differing
            ));
            for d in &self.listed {
                lines.push(format!("{d}"));
            }
            let more = self.differences.saturating_sub(self.listed.len() as u64);
            if more > 0 {
                lines.push(format!("… and {more} more not listed"));
            }
        }
        if let Some(r) = &self.repair {
            lines.push(format!(
                "repair: {} rows written to the sink, {} deleted; verified again: {}",
                r.upserted,
                r.deleted,
                if r.equal_after {
                    "equal"
                } else {
                    "still different"
                }
            ));
        }
        f.write_str(&lines.join("\n"))
    }
}

/// One line: `missing  {id: 5}`, `extra  {id: 7}` or
/// `differs  {id: 9}: name (source "a", sink "b")`.
impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            DiffKind::Missing => "missing",
            DiffKind::Extra => "extra",
            DiffKind::Differs => "differs",
        };
        write!(f, "{kind}  {}", display_map(&self.key))?;
        if self.kind == DiffKind::Differs {
            let cells: Vec<String> = self
                .columns
                .iter()
                .map(|c| {
                    let value = |row: &Option<serde_json::Map<String, serde_json::Value>>| {
                        row.as_ref()
                            .and_then(|r| r.get(c))
                            .map_or_else(|| "?".to_owned(), ToString::to_string)
                    };
                    format!(
                        "{c} (source {}, sink {})",
                        value(&self.source),
                        value(&self.sink)
                    )
                })
                .collect();
            write!(f, ": {}", cells.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        match v {
            serde_json::Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn differences_print_as_one_line_each() {
        let missing = Difference {
            kind: DiffKind::Missing,
            key: map(json!({"id": 5})),
            columns: vec![],
            source: Some(map(json!({"id": 5, "name": "a"}))),
            sink: None,
        };
        assert_eq!(missing.to_string(), "missing  {id: 5}");
        let differs = Difference {
            kind: DiffKind::Differs,
            key: map(json!({"id": 9})),
            columns: vec!["name".into()],
            source: Some(map(json!({"id": 9, "name": "a"}))),
            sink: Some(map(json!({"id": 9, "name": "b"}))),
        };
        assert_eq!(
            differs.to_string(),
            r#"differs  {id: 9}: name (source "a", sink "b")"#
        );
    }
}
