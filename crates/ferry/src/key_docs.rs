//! `--help` text and the docs' key table, generated from the keys of every
//! section ([`crate::settings::KEYS`]: each key's [`KeySpec`]), so neither
//! can drift from what the parsers accept.

use ferry_engine::config::{KeyOrigin, KeySpec, ValueKind};

/// Plain-text reference of `specs`, grouped by section in the order the
/// sections first appear: one line `--<name> <hint>  <doc> [default]` per
/// key; ferry's own keys are tagged `(ferry)`, aliases are named.
pub fn render_help(specs: &[&KeySpec]) -> String {
    let width = specs
        .iter()
        .map(|s| s.name.len() + s.kind.hint().len() + 3)
        .max()
        .unwrap_or(0);
    let mut sections: Vec<&str> = Vec::new();
    for spec in specs {
        if !sections.contains(&spec.section()) {
            sections.push(spec.section());
        }
    }
    let mut out = String::new();
    for section in sections {
        out.push_str(&format!("{section}.* keys:\n"));
        for spec in specs.iter().filter(|s| s.section() == section) {
            let usage = format!("--{} {}", spec.name, spec.kind.hint());
            out.push_str(&format!(
                "  {usage:<width$}  {}{}{}{} [{}]\n",
                spec.doc,
                values_text(spec, ", ", ""),
                aliases_text(spec, "--"),
                match spec.origin {
                    KeyOrigin::Ferry => " (ferry)",
                    _ => "",
                },
                spec.default_doc()
            ));
        }
    }
    out
}

/// Markdown table of `specs` (name, default, value, origin, doc) for the
/// user documentation: the `docs_table_is_generated` test keeps
/// docs/configuration.md equal to it.
#[cfg(test)]
pub fn render_markdown(specs: &[&KeySpec]) -> String {
    let mut out = String::from("| key | default | value | origin | description |\n");
    out.push_str("| --- | --- | --- | --- | --- |\n");
    for spec in specs {
        let origin = match spec.origin {
            KeyOrigin::Reference => "reference job",
            KeyOrigin::Flink => "Flink",
            _ => "ferry only",
        };
        out.push_str(&format!(
            "| `{}` | {} | `{}` | {} | {}{}{} |\n",
            spec.name,
            spec.default_doc(),
            // A bare `|` would end the table cell, even in a code span.
            spec.kind.hint().replace('|', "\\|"),
            origin,
            spec.doc,
            values_text(spec, "`, `", "`"),
            aliases_text(spec, ""),
        ));
    }
    out
}

fn values_text(spec: &KeySpec, sep: &str, quote: &str) -> String {
    match spec.kind {
        ValueKind::Enum(names) => format!(" One of {quote}{}{quote}.", names.join(sep)),
        _ => String::new(),
    }
}

fn aliases_text(spec: &KeySpec, prefix: &str) -> String {
    if spec.aliases.is_empty() {
        return String::new();
    }
    let names: Vec<String> = spec
        .aliases
        .iter()
        .map(|a| format!("{prefix}{a}"))
        .collect();
    format!(" Alias {}.", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_engine::config::ENGINE_KEYS;

    fn all_specs() -> Vec<&'static KeySpec> {
        crate::settings::all_specs().collect()
    }

    #[test]
    fn help_lists_every_key_with_default() {
        let help = render_help(&all_specs());
        for spec in all_specs() {
            let line = help
                .lines()
                .find(|l| l.contains(&format!("--{} ", spec.name)))
                .unwrap_or_else(|| panic!("{} missing from help", spec.name));
            assert!(line.contains(&spec.default_doc()), "{line}");
            assert_eq!(
                line.contains("(ferry)"),
                spec.origin == KeyOrigin::Ferry,
                "{line}"
            );
            for alias in spec.aliases {
                assert!(line.contains(&format!("--{alias}")), "{line}");
            }
        }
        assert!(help.contains("One of CLOSEST_REPLICA, LEADER_ONLY."));
        for section in ["job", "reader", "writer", "rest", "metrics"] {
            assert!(help.contains(&format!("{section}.* keys:")), "{section}");
        }
        let md = render_markdown(&all_specs());
        assert_eq!(md.lines().count(), all_specs().len() + 2);
        assert!(md.contains("| `job.name` | ferry-replication-<job.tableName> |"));
        assert!(md.contains("| `rest.port` | 8081 |"));
        assert!(ENGINE_KEYS.specs().count() < all_specs().len());
    }

    /// docs/configuration.md carries the generated table; regenerate it with
    /// `FERRY_WRITE_DOCS=1 cargo test -p ferry --bins key_docs`.
    #[test]
    fn docs_table_is_generated() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
        let doc = std::fs::read_to_string(path).expect("docs/configuration.md");
        let (begin, end) = ("<!-- keys:begin -->\n", "<!-- keys:end -->");
        let start = doc.find(begin).expect("begin marker") + begin.len();
        let stop = doc.find(end).expect("end marker");
        let table = render_markdown(&all_specs());
        if std::env::var_os("FERRY_WRITE_DOCS").is_some() {
            let updated = format!("{}{table}{}", &doc[..start], &doc[stop..]);
            std::fs::write(path, updated).expect("write docs");
            return;
        }
        assert_eq!(
            &doc[start..stop],
            table,
            "docs/configuration.md is stale: FERRY_WRITE_DOCS=1 cargo test -p ferry --bins key_docs"
        );
    }
}
