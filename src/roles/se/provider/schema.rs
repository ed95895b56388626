//! The proposal (SPEC §3.1) as a JSON Schema that strict structured-output modes accept:
//! an object at the root, every key required, no other keys, the unused form `null`.
//! The parser of §3.1 stays the judge of what comes back.

use serde_json::{json, Value};

pub fn proposal() -> Value {
    let nullable = |schema: Value| json!({"anyOf": [schema, {"type": "null"}]});
    json!({
        "type": "object",
        "properties": {
            "unified_diff": nullable(json!({
                "type": "string",
                "description": "a git-style unified diff of the change; null when writes is given"
            })),
            "writes": nullable(json!({
                "type": "array",
                "description": "whole-file writes; null when unified_diff is given",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "base_sha256": nullable(json!({"type": "string"})),
                        "content": {"type": "string"},
                        "executable": {"type": "boolean"}
                    },
                    "required": ["path", "base_sha256", "content", "executable"],
                    "additionalProperties": false
                }
            })),
            "summary": {"type": "string", "description": "one line: what the change does"}
        },
        "required": ["unified_diff", "writes", "summary"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What strict modes (OpenAI `strict: true`, Anthropic `output_config.format`) demand:
    /// every object lists all its properties as required and forbids others.
    fn check_strict(v: &Value, path: &str) {
        if let Some(obj) = v.as_object() {
            if obj.get("type") == Some(&json!("object")) {
                let props = obj["properties"].as_object().expect("properties");
                let mut required: Vec<&str> = obj["required"]
                    .as_array()
                    .expect("required")
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                let mut keys: Vec<&str> = props.keys().map(String::as_str).collect();
                required.sort_unstable();
                keys.sort_unstable();
                assert_eq!(required, keys, "{path}");
                assert_eq!(obj["additionalProperties"], json!(false), "{path}");
            }
            for (k, child) in obj {
                check_strict(child, &format!("{path}/{k}"));
            }
        } else if let Some(items) = v.as_array() {
            for (i, child) in items.iter().enumerate() {
                check_strict(child, &format!("{path}/{i}"));
            }
        }
    }

    #[test]
    fn the_schema_is_strict_mode_compatible() {
        let s = proposal();
        assert_eq!(s["type"], "object", "the root is an object, not a union");
        check_strict(&s, "");
    }
}
