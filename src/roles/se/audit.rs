//! The agent audit (SPEC §7). A coding agent runs with the user's privileges and shares `.git`
//! with the user's repo: its scratch worktree is its own, nothing else is. The run's restore
//! (`git::restore`) already knows the run's tree, index, HEAD, `.git/config`, hooks and — when
//! the run holds the repo — every ref, and puts them back. What it does not own is recorded
//! here before the agent runs and compared after it exits: every ref outside git-factory's
//! namespaces (also in a `--worktree` run, whose refs are shared with the user's own work) and
//! the HEAD of every other worktree. This module only names what escaped, and removes the refs
//! an agent made at objects only its private folder held (see [`Audit::drop_agents_own_refs`]);
//! `watched` and `sealed` put back the rest.
//! What other runs of the repo write meanwhile (their records, their delivered branches) is
//! theirs, by `git::restore`'s one rule, and never named.

use crate::error::Result;
use git2::Repository;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One file as it was: its mode and bytes (a symlink's target for a link).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileFact {
    mode: u32,
    bytes: Vec<u8>,
}

fn file_fact(path: &Path) -> Option<FileFact> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).ok()?;
        return Some(FileFact {
            mode: 0o120000,
            bytes: target.as_os_str().as_bytes().to_vec(),
        });
    }
    if !meta.is_file() {
        return Some(FileFact {
            mode: meta.permissions().mode(),
            bytes: Vec::new(),
        });
    }
    Some(FileFact {
        mode: meta.permissions().mode() & 0o7777,
        bytes: std::fs::read(path).ok()?,
    })
}

/// What an agent must leave as it was.
#[derive(Debug)]
pub struct Audit {
    common: PathBuf,
    refs: BTreeMap<String, String>,
    /// `HEAD` of the main worktree and of every linked one, by admin folder name (`""` for
    /// the main one).
    heads: BTreeMap<Vec<u8>, Option<FileFact>>,
    /// Ignored files, notes refs and `.git/factory/` files, put back when changed.
    pub watched: super::watched::Watched,
    /// The run records and their seals, put back when changed.
    pub sealed: super::sealed::Sealed,
}

fn is_ours(name: &str) -> bool {
    name.starts_with("refs/factory/") || name.starts_with("refs/notes/factory")
}

/// Every ref outside git-factory's namespaces, as `name -> target`.
fn list_refs(repo: &Repository) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for r in repo.references()? {
        let r = r?;
        let name = String::from_utf8_lossy(r.name_bytes()).into_owned();
        if is_ours(&name) || name == "HEAD" {
            continue;
        }
        let target = match (r.target(), r.symbolic_target_bytes()) {
            (Some(oid), _) => oid.to_string(),
            (None, Some(sym)) => format!("ref: {}", String::from_utf8_lossy(sym)),
            (None, None) => String::new(),
        };
        out.insert(name, target);
    }
    Ok(out)
}

fn list_heads(common: &Path) -> BTreeMap<Vec<u8>, Option<FileFact>> {
    let mut out = BTreeMap::new();
    out.insert(Vec::new(), file_fact(&common.join("HEAD")));
    // git-factory's own temporary worktrees (a run's, a race's candidates', other agents'
    // scratch ones) come and go beside the agent: they are not the user's.
    let ours = common.join("factory").join("worktrees");
    if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
        for e in entries.flatten() {
            // One whose record is half-written or half-removed (no gitdir file yet or any more,
            // or one git has opened but not yet written) is being added or removed by git
            // right now: not a HEAD anyone moved.
            let Ok(gitdir) = std::fs::read(e.path().join("gitdir")) else {
                continue;
            };
            let gitdir = gitdir.trim_ascii_end();
            if gitdir.is_empty()
                || Path::new(std::ffi::OsStr::from_bytes(gitdir)).starts_with(&ours)
            {
                continue;
            }
            out.insert(
                e.file_name().as_bytes().to_vec(),
                file_fact(&e.path().join("HEAD")),
            );
        }
    }
    out
}

fn shown(name: &[u8]) -> String {
    name.escape_ascii().to_string()
}

impl Audit {
    /// Records the facts of the repository `repo` belongs to, before the agent runs.
    /// `sandboxed`: the agent runs confined (the repo's objects are read-only to it).
    pub fn capture(repo: &Repository, sandboxed: bool) -> Result<Self> {
        let common = repo.commondir().to_path_buf();
        Ok(Audit {
            watched: super::watched::Watched::capture(repo, sandboxed)?,
            sealed: super::sealed::Sealed::capture(repo)?,
            refs: list_refs(repo)?,
            heads: list_heads(&common),
            common,
        })
    }

    /// Removes the refs the agent made for its own work and nothing else can use: created
    /// since the capture and pointing at an object the repo's store lacks — a branch it
    /// committed on, `refs/stash`, made while its git wrote to its private object folder
    /// (SPEC §7.1), which is gone with its scratch worktree. Left, they would be refs to
    /// nothing; they are no escape (its proposal is its worktree's files, wherever it kept
    /// its commits). Returns their names.
    pub fn drop_agents_own_refs(&self, repo: &Repository) -> Result<Vec<String>> {
        let odb = repo.odb()?;
        let mut dropped = Vec::new();
        for (name, target) in list_refs(repo)? {
            if self.refs.contains_key(&name) {
                continue;
            }
            let Ok(oid) = git2::Oid::from_str(&target) else {
                continue; // symbolic
            };
            if odb.exists(oid) {
                continue;
            }
            if let Ok(mut r) = repo.find_reference(&name) {
                // Its reflog goes with it.
                r.delete()?;
                dropped.push(name);
            }
        }
        Ok(dropped)
    }

    /// What differs now, one line each (`refs/heads/x (moved)`, `HEAD of worktree w
    /// (changed)`). The agent's scratch worktree is gone by the time this is asked; one that
    /// is still there would be named as added.
    pub fn changes(&self, repo: &Repository) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let refs = list_refs(repo)?;
        diff_maps(&self.refs, &refs, |name, how| {
            // Another run's delivery, made while the agent worked (SPEC §5.2): not the agent's.
            if how == "added" && crate::git::restore::another_runs_branch(repo, name) {
                return;
            }
            let how = if how == "changed" { "moved" } else { how };
            out.push(format!("{name} ({how})"))
        });
        let heads = list_heads(&self.common);
        diff_maps(&self.heads, &heads, |name, how| {
            out.push(if name.is_empty() {
                format!("HEAD ({how})")
            } else {
                let how = if how == "added" {
                    "worktree added"
                } else {
                    how
                };
                format!("HEAD of worktree {} ({how})", shown(name))
            })
        });
        Ok(out)
    }
}

/// Calls `report(key, "added" | "removed" | "changed")` for each key that differs, in key
/// order.
fn diff_maps<K: Ord, V: PartialEq>(
    before: &BTreeMap<K, V>,
    after: &BTreeMap<K, V>,
    mut report: impl FnMut(&K, &str),
) {
    let keys: std::collections::BTreeSet<&K> = before.keys().chain(after.keys()).collect();
    for k in keys {
        match (before.get(k), after.get(k)) {
            (Some(_), None) => report(k, "removed"),
            (None, Some(_)) => report(k, "added"),
            (Some(a), Some(b)) if a != b => report(k, "changed"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        let sig = git2::Signature::now("t", "t@t.invalid").expect("sig");
        let tree = repo.index().and_then(|mut i| i.write_tree()).expect("tree");
        let tree = repo.find_tree(tree).expect("tree");
        repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
            .expect("commit");
        drop(tree);
        (dir, repo)
    }

    #[test]
    fn names_refs_and_heads_that_changed() {
        let (_dir, repo) = repo();
        let head = repo.head().expect("head").target().expect("oid");
        repo.reference("refs/heads/gone", head, false, "t")
            .expect("ref");
        let audit = Audit::capture(&repo, false).expect("capture");
        assert!(audit.changes(&repo).expect("changes").is_empty());

        repo.reference("refs/heads/evil", head, false, "t")
            .expect("ref");
        repo.reference("refs/factory/abc", head, false, "t")
            .expect("ours");
        repo.find_reference("refs/heads/gone")
            .and_then(|mut r| r.delete())
            .expect("delete");
        repo.set_head_detached(head).expect("detach");
        let wt = repo.path().join("worktrees/other");
        std::fs::create_dir_all(&wt).expect("mkdir");
        std::fs::write(wt.join("HEAD"), format!("{head}\n")).expect("head");
        std::fs::write(wt.join("gitdir"), "/elsewhere/other/.git\n").expect("gitdir");
        assert_eq!(
            audit.changes(&repo).expect("changes"),
            [
                "refs/heads/evil (added)",
                "refs/heads/gone (removed)",
                "HEAD (changed)",
                "HEAD of worktree other (worktree added)",
            ]
        );
    }
}
