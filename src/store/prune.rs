//! Keeping records from growing without bound (`git factory prune`, SPEC §4.1).
//!
//! A run record goes when it is older than the age given, is not among the newest `keep`
//! runs of its work order, and is not RUNNING. Its ref and its lines in `refs/notes/factory`
//! go together (the lines first, in one notes commit, so a prune cut short leaves refs that
//! the next prune finds again); every other line stays byte for byte. Objects are left to
//! `git gc`.

use super::notes::{self, Edits};
use super::{list_runs, run_ref, RunHeader, NOTES_REF};
use crate::error::{Error, Result};
use git2::{Oid, Repository};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// Which runs a prune removes.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Runs that started longer ago than this may go; `None`: runs never age out.
    pub older_than: Option<Duration>,
    /// The newest runs of each work order that stay whatever their age.
    pub keep: usize,
}

/// An age as `--older-than` and `factory.pruneOlderThan` take it: a whole number and a unit
/// (`s`, `m`, `h`, `d`, `w`), or `never`.
pub fn parse_age(text: &str) -> Option<Option<Duration>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("never") {
        return Some(None);
    }
    let unit = text.chars().last()?;
    let number: u64 = text[..text.len() - unit.len_utf8()].parse().ok()?;
    let seconds: u64 = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        _ => return None,
    };
    Some(Some(Duration::from_secs(number.checked_mul(seconds)?)))
}

/// What a prune removes (or, with `--dry-run`, would remove).
#[derive(Debug, Default)]
pub struct Pruned {
    /// The runs, newest first, with their run commits.
    pub runs: Vec<(RunHeader, Oid)>,
    /// How many lines of `refs/notes/factory` name them.
    pub note_lines: usize,
    /// Pooled worktrees idle for longer than the age (held ones are never listed).
    pub worktrees: Vec<PathBuf>,
    /// Runs that stay.
    pub kept: usize,
}

/// The runs `policy` removes, as of `now_ms` (milliseconds since the epoch).
pub fn select(repo: &Repository, policy: Policy, now_ms: i64) -> Result<Pruned> {
    let mut pruned = Pruned::default();
    let Some(age) = policy.older_than else {
        pruned.kept = list_runs(repo)?.len();
        return Ok(pruned);
    };
    let cutoff = now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
    let commits: BTreeMap<String, Oid> = super::run_ids(repo)?.into_iter().collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    // Newest first: the first `keep` of each work order stay.
    for run in list_runs(repo)? {
        let rank = seen.entry(run.work_order_id.clone()).or_default();
        *rank += 1;
        let goes = *rank > policy.keep && run.verdict != "RUNNING" && run.order_key() < cutoff;
        match commits.get(&run.run_id) {
            Some(commit) if goes => pruned.runs.push((run, *commit)),
            _ => pruned.kept += 1,
        }
    }
    pruned.note_lines = note_edits(repo, &ids(&pruned), notes::all(repo, NOTES_REF)?)?.1;
    pruned.worktrees = crate::git::pool::idle_older_than(repo, age)?;
    Ok(pruned)
}

fn ids(pruned: &Pruned) -> BTreeSet<String> {
    pruned.runs.iter().map(|(r, _)| r.run_id.clone()).collect()
}

/// Whether a note line is one of these runs' (`factory <run_id> …`).
fn names_one_of(line: &[u8], runs: &BTreeSet<String>) -> bool {
    let mut words = line.split(|b| *b == b' ');
    words.next() == Some(b"factory")
        && words
            .next()
            .and_then(|id| std::str::from_utf8(id).ok())
            .is_some_and(|id| runs.contains(id))
}

/// The notes without the lines of `runs`: the edits, and how many lines go.
fn note_edits(
    repo: &Repository,
    runs: &BTreeSet<String>,
    all: Vec<(Oid, Vec<u8>)>,
) -> Result<(Edits, usize)> {
    let mut edits = Edits::new();
    let mut dropped = 0;
    for (target, text) in all {
        let lines: Vec<&[u8]> = text.split_inclusive(|b| *b == b'\n').collect();
        let kept: Vec<&[u8]> = lines
            .iter()
            .copied()
            .filter(|l| !names_one_of(l.strip_suffix(b"\n").unwrap_or(l), runs))
            .collect();
        if kept.len() == lines.len() {
            continue;
        }
        dropped += lines.len() - kept.len();
        let edit = match kept.concat() {
            rest if rest.iter().all(u8::is_ascii_whitespace) => None,
            rest => Some(repo.blob(&rest)?),
        };
        edits.insert(target.to_string(), edit);
    }
    Ok((edits, dropped))
}

/// Removes what [`select`] chose: the runs' note lines (one notes commit), then their refs
/// (only where a ref still points at the commit chosen), then the pooled worktrees idle for
/// longer than the age (never one a running command holds); `forget` drops what other rooms
/// keep of a removed worktree (its bytecode cache entries).
pub fn remove(
    repo: &Repository,
    pruned: &mut Pruned,
    policy: Policy,
    forget: crate::git::worktree::Forget,
) -> Result<()> {
    let runs = ids(pruned);
    let mut dropped = 0;
    notes::update(
        repo,
        NOTES_REF,
        "Notes pruned by 'git factory prune'",
        |repo, tree| {
            let all = match tree {
                Some(t) => notes::all_in(repo, t)?,
                None => Vec::new(),
            };
            let (edits, n) = note_edits(repo, &runs, all)?;
            dropped = n;
            Ok((!edits.is_empty()).then_some(edits))
        },
    )?;
    pruned.note_lines = dropped;
    for (run, commit) in &pruned.runs {
        let name = run_ref(&run.run_id);
        match repo.find_reference(&name) {
            Ok(mut r) if r.target() == Some(*commit) => r.delete().map_err(|e| {
                Error::new(format!("could not remove {name}: {}", e.message()))
                    .hint("run git factory prune again; what was removed stays removed")
            })?,
            _ => {}
        }
        // The record's seal goes with it.
        if let Some(seal) = super::record_seal(&run.run_id) {
            let factory = repo.commondir().join("factory");
            let _ = crate::git::nofollow::remove_file(&factory, seal.as_bytes());
        }
    }
    if let Some(age) = policy.older_than {
        pruned.worktrees = crate::git::pool::prune_idle(repo, age, forget)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_documented() {
        let day = Duration::from_secs(86_400);
        assert_eq!(parse_age("90d"), Some(Some(day * 90)));
        assert_eq!(parse_age("2w"), Some(Some(day * 14)));
        assert_eq!(parse_age("12h"), Some(Some(Duration::from_secs(12 * 3600))));
        assert_eq!(parse_age("0s"), Some(Some(Duration::ZERO)));
        assert_eq!(parse_age("never"), Some(None));
        for bad in ["", "d", "90", "9x", "-1d", "1.5d", "90 d", "ninety days"] {
            assert_eq!(parse_age(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_the_pruned_runs_lines_go_and_the_rest_stay_byte_for_byte() {
        let runs: BTreeSet<String> = ["aaaaaaaaaaaa".to_string()].into();
        assert!(names_one_of(
            b"factory aaaaaaaaaaaa FAIL wo attempts=1",
            &runs
        ));
        assert!(!names_one_of(
            b"factory bbbbbbbbbbbb FAIL wo attempts=1",
            &runs
        ));
        assert!(!names_one_of(b"reviewed aaaaaaaaaaaa", &runs));
        assert!(!names_one_of(b"caf\xe9 aaaaaaaaaaaa", &runs));
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        let one = Oid::hash_object(git2::ObjectType::Blob, b"1").expect("oid");
        let two = Oid::hash_object(git2::ObjectType::Blob, b"2").expect("oid");
        let (edits, n) = note_edits(
            &repo,
            &runs,
            vec![
                (
                    one,
                    b"caf\xe9\nfactory aaaaaaaaaaaa FAIL wo attempts=1\nfactory bbbbbbbbbbbb PASS wo attempts=2".to_vec(),
                ),
                (two, b"factory aaaaaaaaaaaa FAIL wo attempts=1\n".to_vec()),
            ],
        )
        .expect("edits");
        assert_eq!(n, 2);
        let kept = edits[&one.to_string()].expect("a note stays");
        assert_eq!(
            repo.find_blob(kept).expect("blob").content(),
            b"caf\xe9\nfactory bbbbbbbbbbbb PASS wo attempts=2"
        );
        assert_eq!(edits[&two.to_string()], None, "an emptied note goes");
    }
}
