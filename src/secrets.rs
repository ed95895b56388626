//! The one redactor: every text that comes from a provider (its answers, its error messages)
//! or from a check's output passes through [`redact`] before it is stored, printed or put in
//! a prompt, so a server that echoes the API key back cannot leak it (SPEC §3.3).
//!
//! The secrets are the values of the provider key variables and of the names listed in git
//! config `factory.scrubEnv`, read from the environment when redacting, so a key set after
//! start-up is covered too.
//!
//! The user's signing keys are kept from commands too ([`keep_from_signing`]): signed evidence
//! (SPEC §6.1) is only worth something if code under test cannot sign its own.

use std::sync::Mutex;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// A value shorter than this is not treated as a secret: replacing `1` or `yes` everywhere
/// would garble every text and protect nothing (real keys are dozens of characters).
const MIN_SECRET_LEN: usize = 8;

/// Variables through which a command could reach the user's ssh or gpg agent.
pub const SIGNING_AGENT_VARS: [&str; 2] = ["SSH_AUTH_SOCK", "GPG_AGENT_INFO"];

/// `GNUPGHOME` for commands: a folder that cannot exist (its parent is a device), so gpg finds
/// neither the user's keyring nor the agent's socket, which lives in the home folder or in a
/// run folder named after it.
pub const UNREACHABLE_GNUPGHOME: &str = "/dev/null/gnupg";

/// Takes away a command's way to the user's signing agents: no `SSH_AUTH_SOCK`, no
/// `GPG_AGENT_INFO`, and a `GNUPGHOME` where gpg finds no agent socket and no key. (Key files
/// read by path are the sandbox's to hide.)
pub fn keep_from_signing(cmd: &mut std::process::Command) {
    for name in SIGNING_AGENT_VARS {
        cmd.env_remove(name);
    }
    cmd.env("GNUPGHOME", UNREACHABLE_GNUPGHOME);
}

/// Names added by git config `factory.scrubEnv` (the provider keys are always included).
static EXTRA_NAMES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Adds variable names whose values are secrets (`factory.scrubEnv`).
pub fn register_names(names: &[String]) {
    if let Ok(mut extra) = EXTRA_NAMES.lock() {
        for n in names {
            if !extra.contains(n) {
                extra.push(n.clone());
            }
        }
    }
}

/// The secret values, longest first (so a key that contains another is replaced whole).
fn secrets() -> Vec<String> {
    let mut names: Vec<String> = crate::env::ALWAYS_SCRUBBED
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Ok(extra) = EXTRA_NAMES.lock() {
        names.extend(extra.iter().cloned());
    }
    let mut values: Vec<String> = names
        .iter()
        .filter_map(|n| crate::env::var(n))
        .map(|v| v.trim().to_string())
        .filter(|v| v.len() >= MIN_SECRET_LEN)
        .collect();
    values.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    values.dedup();
    values
}

/// `text` with every secret value replaced by `[redacted]`.
pub fn redact(text: &str) -> String {
    redact_with(text, &secrets())
}

/// [`redact`] for bytes (an agent's bare diff, a raw answer): bytes stay bytes.
pub fn redact_bytes(bytes: &[u8]) -> Vec<u8> {
    redact_bytes_with(bytes, &secrets())
}

fn redact_with(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), REDACTED);
        }
    }
    out
}

fn redact_bytes_with(bytes: &[u8], secrets: &[String]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for s in secrets {
        let needle = s.as_bytes();
        if needle.is_empty() || !out.windows(needle.len()).any(|w| w == needle) {
            continue;
        }
        let mut next = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            if out[i..].starts_with(needle) {
                next.extend_from_slice(REDACTED.as_bytes());
                i += needle.len();
            } else {
                next.push(out[i]);
                i += 1;
            }
        }
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced_in_text_and_bytes() {
        let secrets = vec!["sk-TOPSECRET123".to_string()];
        assert_eq!(
            redact_with("invalid key Bearer sk-TOPSECRET123!", &secrets),
            "invalid key Bearer [redacted]!"
        );
        assert_eq!(
            redact_bytes_with(b"\xff sk-TOPSECRET123sk-TOPSECRET123", &secrets),
            b"\xff [redacted][redacted]".to_vec()
        );
        assert_eq!(redact_with("nothing here", &secrets), "nothing here");
    }
}
