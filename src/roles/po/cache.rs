//! What checks did on committed trees, kept in `refs/notes/factory-verify`: a note on a tree
//! id with one line per command list run on it. `git factory verify`, the pre-push hook and a
//! run's baseline check (SPEC §3.8) share it, so a tree one of them checked is not checked
//! again by another.
//!
//! - `PASS <key>`: every command of the list passed. Only passes are kept this way, so a
//!   flaky failure of a list that must pass is checked again next time.
//! - `RESULTS <key> <json>`: each command's result, pass or fail: the baseline's red tests,
//!   whose failure is the expected answer and is worth keeping.
//!
//! `<key>` is the sha256 of the command list, so another list (a changed `factory.verify`, an
//! edited contract) is another entry. The note is shared state that can be fetched: a line
//! that does not parse is ignored, never trusted.

use crate::error::Result;
use crate::identity::sha256_hex;
use git2::{Oid, Repository};
use serde::{de::DeserializeOwned, Serialize};

pub const NOTES_REF: &str = "refs/notes/factory-verify";

/// The key of a command list: argv words joined by US, commands by RS, hashed.
pub fn key(commands: &[Vec<String>]) -> String {
    sha256_hex(
        commands
            .iter()
            .map(|c| c.join("\u{1f}"))
            .collect::<Vec<_>>()
            .join("\u{1e}")
            .as_bytes(),
    )
}

fn note_text(repo: &Repository, tree: Oid) -> Option<String> {
    repo.find_note(Some(NOTES_REF), tree)
        .ok()
        .and_then(|n| n.message().map(str::to_string))
}

/// Whether every command of `commands` is recorded as passing on `tree`.
pub fn passed(repo: &Repository, tree: Oid, commands: &[Vec<String>]) -> bool {
    let line = format!("PASS {}", key(commands));
    note_text(repo, tree).is_some_and(|text| text.lines().any(|l| l == line))
}

pub fn record_pass(repo: &Repository, tree: Oid, commands: &[Vec<String>]) -> Result<()> {
    let line = format!("PASS {}", key(commands));
    crate::store::append_note_in(repo, NOTES_REF, tree, &line)
}

/// The per-command results recorded for `commands` on `tree` (the latest, if several).
pub fn results<T: DeserializeOwned>(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
) -> Option<T> {
    let prefix = format!("RESULTS {} ", key(commands));
    let text = note_text(repo, tree)?;
    text.lines()
        .rev()
        .filter_map(|l| l.strip_prefix(&prefix))
        .find_map(|json| serde_json::from_str(json).ok())
}

pub fn record_results<T: Serialize>(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
    results: &T,
) -> Result<()> {
    // Compact JSON escapes every newline, so the record stays one line.
    let json = serde_json::to_string(results)
        .map_err(|e| crate::error::Error::new(format!("cannot serialise results: {e}")))?;
    let line = format!("RESULTS {} {json}", key(commands));
    crate::store::append_note_in(repo, NOTES_REF, tree, &line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lists_are_keyed_by_their_words_not_their_spelling() {
        let a = vec![argv(&["echo", "a b"])];
        let b = vec![argv(&["echo", "a", "b"])];
        assert_ne!(key(&a), key(&b));
        assert_eq!(key(&a), key(&[argv(&["echo", "a b"])]));
        assert_ne!(
            key(&[argv(&["x"]), argv(&["y"])]),
            key(&[argv(&["x", "y"])])
        );
    }

    #[test]
    fn passes_and_results_round_trip_and_garbage_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        let mut cfg = repo.config().expect("config");
        cfg.set_str("user.name", "T").expect("set");
        cfg.set_str("user.email", "t@example.invalid").expect("set");
        let tree = repo
            .treebuilder(None)
            .and_then(|b| b.write())
            .expect("empty tree");
        let cmds = vec![argv(&["false"])];
        assert!(!passed(&repo, tree, &cmds));
        assert_eq!(results::<Vec<u32>>(&repo, tree, &cmds), None);
        crate::store::append_note_in(
            &repo,
            NOTES_REF,
            tree,
            &format!("RESULTS {} {{nope", key(&cmds)),
        )
        .expect("note");
        assert_eq!(results::<Vec<u32>>(&repo, tree, &cmds), None);
        record_results(&repo, tree, &cmds, &vec![1u32, 2]).expect("record");
        record_pass(&repo, tree, &[argv(&["true"])]).expect("record");
        assert_eq!(results::<Vec<u32>>(&repo, tree, &cmds), Some(vec![1, 2]));
        assert!(passed(&repo, tree, &[argv(&["true"])]));
        assert!(!passed(&repo, tree, &cmds));
    }
}
