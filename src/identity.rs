//! Deterministic identities: canonical JSON, work-order hash, config hash, run id (SPEC §2, §4.3).

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// Bumped whenever the prompt template changes, so a new prompt never hits an old run's cache.
pub const PROMPT_VERSION: &str = "p1";

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Serialises `value` exactly as Python's
/// `json.dumps(obj, sort_keys=True, separators=(",", ":"))` does (ASCII-only output),
/// so hashes agree with the seed's reference implementation.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Python sorts keys by code point; Rust's str ordering is by UTF-8 bytes, which
            // orders code points identically.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(&map[*key], out);
            }
            out.push('}');
        }
    }
}

fn write_number(n: &serde_json::Number, out: &mut String) {
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(f) = n.as_f64() {
        out.push_str(&python_float_repr(f));
    }
}

/// Python's `repr(float)`: shortest round-trip digits, `1.0` for integral values,
/// exponent form (`1e+16`) from 1e16 up and below 1e-4.
fn python_float_repr(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let sci = format!("{f:e}"); // shortest round-trip digits, e.g. "1.5e-7"
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let plain = format!("{f}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The optional parts of the config hash: each is appended only when set, so the ids of
/// runs made before it existed stay valid.
#[derive(Debug, Clone, Default)]
pub struct ConfigExtras<'a> {
    pub reasoning_effort: Option<&'a str>,
    pub max_output_tokens: Option<u64>,
    /// `--candidates N`; appended only when N > 1.
    pub candidates: Option<u32>,
    /// What judges (SPEC §4.3): the sha256 of the global verification commands when they come
    /// from git config `factory.verify`, so a changed list never serves the old list's verdict.
    pub verify: Option<String>,
    /// The sandbox backend actually chosen under `--sandbox` (`bwrap`, `landlock`): a check
    /// that could not write under one is no verdict for the other.
    pub sandbox: Option<&'a str>,
    /// git config `factory.flaky=fail`.
    pub flaky_fail: bool,
}

/// `config_hash` of SPEC §4.3.
pub fn config_hash(
    model: &str,
    temperature: f64,
    max_attempts: u32,
    timeout_seconds: u64,
    apply: &str,
) -> String {
    config_hash_with(
        model,
        temperature,
        max_attempts,
        timeout_seconds,
        apply,
        &ConfigExtras::default(),
    )
}

/// `config_hash` with the optional parts (`|effort=E`, `|max_output=N`, `|candidates=N`,
/// `|verify=H`, `|sandbox=B`, `|flaky=fail`, in that order).
pub fn config_hash_with(
    model: &str,
    temperature: f64,
    max_attempts: u32,
    timeout_seconds: u64,
    apply: &str,
    extras: &ConfigExtras<'_>,
) -> String {
    let mut line =
        format!("{model}|{temperature}|{max_attempts}|{timeout_seconds}|{PROMPT_VERSION}|{apply}");
    if let Some(effort) = extras.reasoning_effort {
        line.push_str(&format!("|effort={effort}"));
    }
    if let Some(n) = extras.max_output_tokens {
        line.push_str(&format!("|max_output={n}"));
    }
    if let Some(n) = extras.candidates.filter(|n| *n > 1) {
        line.push_str(&format!("|candidates={n}"));
    }
    if let Some(hash) = &extras.verify {
        line.push_str(&format!("|verify={hash}"));
    }
    if let Some(backend) = extras.sandbox {
        line.push_str(&format!("|sandbox={backend}"));
    }
    if extras.flaky_fail {
        line.push_str("|flaky=fail");
    }
    sha256_hex(line.as_bytes())
}

/// The `|verify=` part of the identity: the sha256 of the global verification command list as
/// git config `factory.verify` gives it (each value then a newline, in config order).
pub fn verify_list_hash(configured: &[String]) -> String {
    let mut text = String::new();
    for c in configured {
        text.push_str(c);
        text.push('\n');
    }
    sha256_hex(text.as_bytes())
}

/// `run_id` = first 12 hex chars of sha256(work_order_hash + tree_before + config_hash).
pub fn run_id(work_order_hash: &str, tree_before: &str, config_hash: &str) -> String {
    let full = sha256_hex(format!("{work_order_hash}{tree_before}{config_hash}").as_bytes());
    full[..12].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_matches_python_json_dumps() {
        // Expected strings produced by CPython 3.11:
        // json.dumps(v, sort_keys=True, separators=(",", ":"))
        let v =
            json!({"b": [1, 2, {"z": null, "a": true}], "a": "é\u{1F600}\"\\\n\u{1}", "c": 1.5});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":"\u00e9\ud83d\ude00\"\\\n\u0001","b":[1,2,{"a":true,"z":null}],"c":1.5}"#
        );
    }

    #[test]
    fn floats_follow_python_repr() {
        assert_eq!(python_float_repr(1.0), "1.0");
        assert_eq!(python_float_repr(0.1), "0.1");
        assert_eq!(python_float_repr(1e16), "1e+16");
        assert_eq!(python_float_repr(1.5e-7), "1.5e-07");
        assert_eq!(python_float_repr(123456.75), "123456.75");
        assert_eq!(python_float_repr(0.0001), "0.0001");
    }

    #[test]
    fn config_hash_uses_shortest_temperature() {
        assert_eq!(format!("{}", 0.0f64), "0");
        assert_eq!(format!("{}", 0.7f64), "0.7");
        let a = config_hash("openai:gpt-4o", 0.0, 2, 600, "ladder");
        let b = config_hash("openai:gpt-4o", 0.0, 2, 600, "strict");
        assert_ne!(a, b);
        assert_eq!(run_id("a", "b", "c").len(), 12);
    }

    #[test]
    fn effort_and_output_limit_are_appended_only_when_set() {
        let plain = config_hash("openai:gpt-5", 0.0, 2, 600, "ladder");
        assert_eq!(
            plain,
            sha256_hex(b"openai:gpt-5|0|2|600|p1|ladder"),
            "an unset extra leaves earlier run ids valid"
        );
        let both = config_hash_with(
            "openai:gpt-5",
            0.0,
            2,
            600,
            "ladder",
            &ConfigExtras {
                reasoning_effort: Some("high"),
                max_output_tokens: Some(8000),
                ..ConfigExtras::default()
            },
        );
        assert_eq!(
            both,
            sha256_hex(b"openai:gpt-5|0|2|600|p1|ladder|effort=high|max_output=8000")
        );
        let one = ConfigExtras {
            candidates: Some(1),
            ..ConfigExtras::default()
        };
        assert_eq!(
            config_hash_with("openai:gpt-5", 0.0, 2, 600, "ladder", &one),
            plain,
            "one candidate is a plain run"
        );
        let race = ConfigExtras {
            candidates: Some(4),
            ..ConfigExtras::default()
        };
        assert_eq!(
            config_hash_with("openai:a,openai:b", 0.0, 2, 600, "ladder", &race),
            sha256_hex(b"openai:a,openai:b|0|2|600|p1|ladder|candidates=4")
        );
    }

    #[test]
    fn what_judges_is_appended_in_order_and_only_when_present() {
        let judged = ConfigExtras {
            verify: Some(verify_list_hash(&["make test".into()])),
            sandbox: Some("bwrap"),
            flaky_fail: true,
            ..ConfigExtras::default()
        };
        let line = format!(
            "agent-edits:aider|0|2|600|p1|ladder|verify={}|sandbox=bwrap|flaky=fail",
            sha256_hex(b"make test\n")
        );
        assert_eq!(
            config_hash_with("agent-edits:aider", 0.0, 2, 600, "ladder", &judged),
            sha256_hex(line.as_bytes())
        );
        let landlock = ConfigExtras {
            sandbox: Some("landlock"),
            ..ConfigExtras::default()
        };
        assert_eq!(
            config_hash_with("m", 0.0, 2, 600, "ladder", &landlock),
            sha256_hex(b"m|0|2|600|p1|ladder|sandbox=landlock")
        );
    }
}
