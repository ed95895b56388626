//! The proposal contract (SPEC §3.1) and its strict parser.

pub use crate::roles::change::{Change, Dialect, Proposal, WriteSpec};
use crate::roles::tr::detect::{is_envelope, is_search_replace, looks_like_diff};
use serde_json::Value;

pub const MAX_WRITE_BYTES: usize = 200 * 1024;
pub const MAX_WRITES_TOTAL: usize = 500 * 1024;

/// How a provider's raw output is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Exactly the JSON object of §3.1 (model providers, replayed `N.json`).
    StrictJson,
    /// The JSON object, or a bare diff in one of the agent dialects (`--agent-command`, `N.diff`).
    AgentText,
}

/// Reads a provider's raw output. JSON is UTF-8 by definition; a bare diff (from an agent,
/// `--agent-edits` or a replayed `N.diff`) is taken as bytes.
pub fn parse(raw: &[u8], format: OutputFormat) -> Result<Proposal, String> {
    let trimmed = raw.trim_ascii();
    let json = |raw: &[u8]| match std::str::from_utf8(raw) {
        Ok(text) => parse_strict(text),
        Err(e) => Err(format!("output is not UTF-8, so not JSON: {e}")),
    };
    match format {
        OutputFormat::StrictJson => json(raw),
        OutputFormat::AgentText => {
            if trimmed.starts_with(b"{") {
                json(raw)
            } else if trimmed.is_empty() {
                Err("the agent printed nothing".to_string())
            } else if is_envelope(raw) {
                Ok(Proposal {
                    change: Change::Dialect(Dialect::Envelope, raw.to_vec()),
                    summary: String::new(),
                })
            } else if is_search_replace(raw) {
                Ok(Proposal {
                    change: Change::Dialect(Dialect::SearchReplace, raw.to_vec()),
                    summary: String::new(),
                })
            } else if looks_like_diff(raw) {
                Ok(Proposal {
                    change: Change::Diff(raw.to_vec()),
                    summary: String::new(),
                })
            } else {
                Err(
                    "the agent's output is neither the proposal JSON nor a unified diff"
                        .to_string(),
                )
            }
        }
    }
}

/// Splits a leading `<think>…</think>` block (local reasoning models print one before their
/// answer) from the answer: the reasoning is stored, never parsed.
pub fn split_reasoning(raw: &str) -> (Option<&str>, &str) {
    let trimmed = raw.trim_start();
    if let Some(rest) = trimmed.strip_prefix("<think>") {
        if let Some(end) = rest.find("</think>") {
            return (Some(&rest[..end]), &rest[end + "</think>".len()..]);
        }
    }
    (None, raw)
}

/// Parses the strict JSON contract; every deviation is explained in one line for the brief.
pub fn parse_strict(raw: &str) -> Result<Proposal, String> {
    let value: Value = serde_json::from_str(raw.trim()).map_err(|e| {
        let hint = if raw.trim_start().starts_with("```") {
            " (remove the code fences)"
        } else {
            ""
        };
        format!("output is not a single JSON object{hint}: {e}")
    })?;
    let obj = value
        .as_object()
        .ok_or("output must be a JSON object, not an array or a scalar")?;
    for key in obj.keys() {
        if !["unified_diff", "writes", "summary"].contains(&key.as_str()) {
            return Err(format!(
                "unknown key {key:?}: the object has exactly \"summary\" and one of \"unified_diff\" or \"writes\""
            ));
        }
    }
    let summary = match obj.get("summary") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("\"summary\" must be a string".to_string()),
        None => return Err("missing key \"summary\"".to_string()),
    };
    // The structured-output schema has every key required, so the unused form comes as null.
    let present = |key: &str| obj.get(key).filter(|v| !v.is_null());
    let change = match (present("unified_diff"), present("writes")) {
        (Some(_), Some(_)) => {
            return Err("give \"unified_diff\" or \"writes\", not both".to_string())
        }
        (None, None) => return Err("missing key \"unified_diff\" (or \"writes\")".to_string()),
        (Some(Value::String(d)), None) => {
            if !d.trim().is_empty() && !looks_like_diff(d.as_bytes()) {
                return Err(
                    "\"unified_diff\" has no diff headers (diff --git, or --- / +++ lines)"
                        .to_string(),
                );
            }
            Change::Diff(d.clone().into_bytes())
        }
        (Some(_), None) => return Err("\"unified_diff\" must be a string".to_string()),
        (None, Some(w)) => Change::Writes(parse_writes(w)?),
    };
    let proposal = Proposal { change, summary };
    if proposal.is_no_change() && proposal.summary.trim().is_empty() {
        return Err(
            "an empty change needs a non-empty \"summary\" saying why nothing changes".to_string(),
        );
    }
    Ok(proposal)
}

fn parse_writes(value: &Value) -> Result<Vec<WriteSpec>, String> {
    let items = value.as_array().ok_or("\"writes\" must be a list")?;
    let mut out = Vec::with_capacity(items.len());
    let mut total = 0usize;
    for (i, item) in items.iter().enumerate() {
        let obj = item
            .as_object()
            .ok_or_else(|| format!("writes[{i}] must be an object"))?;
        for key in obj.keys() {
            if !["path", "base_sha256", "content", "executable"].contains(&key.as_str()) {
                return Err(format!("writes[{i}]: unknown key {key:?}"));
            }
        }
        let path = match obj.get("path") {
            Some(Value::String(p)) => p.clone(),
            _ => return Err(format!("writes[{i}]: \"path\" must be a string")),
        };
        let base_sha256 = match obj.get("base_sha256") {
            Some(Value::Null) => None,
            Some(Value::String(h)) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Some(h.to_ascii_lowercase())
            }
            Some(_) => {
                return Err(format!(
                    "writes[{i}]: \"base_sha256\" must be 64 hex digits or null"
                ))
            }
            None => {
                return Err(format!(
                    "writes[{i}]: missing \"base_sha256\" (null for a new file)"
                ))
            }
        };
        let content = match obj.get("content") {
            Some(Value::String(c)) => c.clone(),
            _ => return Err(format!("writes[{i}]: \"content\" must be a string")),
        };
        let executable = match obj.get("executable") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err(format!("writes[{i}]: \"executable\" must be true or false")),
        };
        if content.len() > MAX_WRITE_BYTES {
            return Err(format!(
                "writes[{i}] ({path}): {} bytes, over the {} KB limit per file",
                content.len(),
                MAX_WRITE_BYTES / 1024
            ));
        }
        total += content.len();
        if total > MAX_WRITES_TOTAL {
            return Err(format!(
                "writes: over the {} KB total limit",
                MAX_WRITES_TOTAL / 1024
            ));
        }
        out.push(WriteSpec {
            path,
            base_sha256,
            content,
            executable,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_two_forms() {
        let p = parse_strict(
            r#"{"unified_diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "summary": "s"}"#,
        )
        .expect("diff");
        assert!(matches!(p.change, Change::Diff(_)));
        let p = parse_strict(
            r#"{"writes": [{"path": "x", "base_sha256": null, "content": "y"}], "summary": "s"}"#,
        )
        .expect("writes");
        assert!(matches!(p.change, Change::Writes(ref w) if w.len() == 1));
    }

    #[test]
    fn no_change_needs_a_summary() {
        assert!(
            parse_strict(r#"{"unified_diff": "", "summary": "already done"}"#)
                .expect("ok")
                .is_no_change()
        );
        assert!(parse_strict(r#"{"unified_diff": "", "summary": ""}"#).is_err());
    }

    #[test]
    fn refuses_prose_fences_missing_keys_headerless() {
        assert!(parse_strict("Here is the patch").is_err());
        assert!(
            parse_strict("```json\n{\"unified_diff\": \"\", \"summary\": \"x\"}\n```")
                .expect_err("fenced")
                .contains("fences")
        );
        assert!(parse_strict(r#"{"unified_diff": "x"}"#).is_err());
        assert!(
            parse_strict(r#"{"unified_diff": "@@ -1 +1 @@\n-a\n+b", "summary": "s"}"#).is_err()
        );
        assert!(parse_strict(r#"{"unified_diff": "", "summary": "s", "extra": 1}"#).is_err());
    }

    #[test]
    fn the_schema_shape_with_a_null_form_is_accepted() {
        let p = parse_strict(r#"{"unified_diff": null, "writes": [], "summary": "done"}"#)
            .expect("writes");
        assert!(p.is_no_change());
        let p = parse_strict(r#"{"unified_diff": "", "writes": null, "summary": "done"}"#)
            .expect("diff");
        assert!(matches!(p.change, Change::Diff(_)));
        assert!(parse_strict(r#"{"unified_diff": null, "writes": null, "summary": "s"}"#).is_err());
    }

    #[test]
    fn a_leading_think_block_is_reasoning() {
        assert_eq!(
            split_reasoning("\n<think>plan é</think>\n{\"a\":1}"),
            (Some("plan é"), "\n{\"a\":1}")
        );
        assert_eq!(
            split_reasoning("{\"a\":\"<think>\"}"),
            (None, "{\"a\":\"<think>\"}")
        );
        assert_eq!(split_reasoning("<think>cut"), (None, "<think>cut"));
    }

    #[test]
    fn write_limits() {
        let big = "x".repeat(MAX_WRITE_BYTES + 1);
        let raw = serde_json::json!({"writes": [{"path": "a", "base_sha256": null, "content": big}], "summary": "s"});
        assert!(parse_strict(&raw.to_string()).is_err());
    }

    #[test]
    fn agent_text_accepts_bare_diff() {
        let p = parse(
            b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
            OutputFormat::AgentText,
        )
        .expect("bare");
        assert!(matches!(p.change, Change::Diff(_)));
        assert!(parse(b"I could not do it", OutputFormat::AgentText).is_err());
    }
}
