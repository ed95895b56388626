//! The agent audit (SPEC §7). A coding agent runs with the user's privileges and shares `.git`
//! with the user's repo: its scratch worktree is its own, nothing else is. Before it runs, the
//! facts it could change behind the harness's back are recorded — `.git/config`, the hooks
//! folder, every ref outside git-factory's namespaces, the HEAD of every worktree — and after
//! it exits they are compared, naming each difference. Putting things back is not done here:
//! that is the one restore's job (`git::restore`); this module only says what escaped.

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
#[derive(Debug, Clone)]
pub struct Audit {
    common: PathBuf,
    config: Option<FileFact>,
    hooks_dir: PathBuf,
    hooks: BTreeMap<Vec<u8>, FileFact>,
    refs: BTreeMap<String, String>,
    /// `HEAD` of the main worktree and of every linked one, by admin folder name (`""` for
    /// the main one).
    heads: BTreeMap<Vec<u8>, Option<FileFact>>,
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

fn list_hooks(dir: &Path) -> BTreeMap<Vec<u8>, FileFact> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if let Some(fact) = file_fact(&e.path()) {
                out.insert(e.file_name().as_bytes().to_vec(), fact);
            }
        }
    }
    out
}

fn list_heads(common: &Path) -> BTreeMap<Vec<u8>, Option<FileFact>> {
    let mut out = BTreeMap::new();
    out.insert(Vec::new(), file_fact(&common.join("HEAD")));
    if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
        for e in entries.flatten() {
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
    pub fn capture(repo: &Repository, hooks_dir: PathBuf) -> Result<Self> {
        let common = repo.commondir().to_path_buf();
        Ok(Audit {
            config: file_fact(&common.join("config")),
            hooks: list_hooks(&hooks_dir),
            hooks_dir,
            refs: list_refs(repo)?,
            heads: list_heads(&common),
            common,
        })
    }

    /// What differs now, one line each (`.git/config`, `hook pre-commit (added)`,
    /// `refs/heads/x (moved)`, …). `scratch` names the agent's own worktree (its admin
    /// folder under `.git/worktrees/`), whose HEAD is the agent's to move.
    pub fn changes(&self, repo: &Repository, scratch: Option<&[u8]>) -> Result<Vec<String>> {
        let mut out = Vec::new();
        if file_fact(&self.common.join("config")) != self.config {
            out.push(".git/config".to_string());
        }
        let hooks = list_hooks(&self.hooks_dir);
        diff_maps(&self.hooks, &hooks, |name, how| {
            out.push(format!("hook {} ({how})", shown(name)))
        });
        let refs = list_refs(repo)?;
        diff_maps(&self.refs, &refs, |name, how| {
            let how = if how == "changed" { "moved" } else { how };
            out.push(format!("{name} ({how})"))
        });
        let mut heads = list_heads(&self.common);
        if let Some(name) = scratch {
            heads.remove(name);
        }
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
    fn names_what_changed_outside_the_agents_worktree() {
        let (_dir, repo) = repo();
        let hooks = repo.path().join("hooks");
        std::fs::create_dir_all(&hooks).expect("hooks");
        std::fs::write(hooks.join("pre-push"), "#!/bin/sh\n").expect("hook");
        let audit = Audit::capture(&repo, hooks.clone()).expect("capture");
        assert!(audit.changes(&repo, None).expect("changes").is_empty());

        let head = repo.head().expect("head").target().expect("oid");
        repo.reference("refs/heads/evil", head, false, "t")
            .expect("ref");
        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\nevil\n").expect("hook");
        std::fs::set_permissions(
            hooks.join("pre-push"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        let mut cfg = repo.config().expect("config");
        cfg.set_str("core.fsmonitor", "evil").expect("set");
        repo.set_head_detached(head).expect("detach");
        assert_eq!(
            audit.changes(&repo, None).expect("changes"),
            [
                ".git/config",
                "hook pre-commit (added)",
                "hook pre-push (changed)",
                "refs/heads/evil (added)",
                "HEAD (changed)",
            ]
        );
    }
}
