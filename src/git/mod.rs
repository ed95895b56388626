//! Repository access: opening, preflight facts, status walks, tree ids, and restoring a work
//! tree to its baseline without ever writing the user's index.

pub mod lock;
pub mod nofollow;
pub mod status;
pub mod worktree;

use crate::error::{Error, Result};
use crate::roles::tr::apply::FileOutcome;
use git2::build::{CheckoutBuilder, TreeUpdateBuilder};
use git2::{FileMode, Oid, Repository, RepositoryState, Status};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Opens the repository containing `dir` (or the current directory), as git would.
pub fn open(dir: Option<&Path>) -> Result<Repository> {
    let start = match dir {
        Some(d) => d.to_path_buf(),
        // Like git: GIT_DIR and friends when set (hooks, `git -C`), else discovery from cwd.
        None => {
            return Repository::open_from_env().map_err(|_| {
                Error::new("not inside a git repository")
                    .hint("run inside a git work tree, or pass --repo DIR")
            })
        }
    };
    Repository::discover(&start).map_err(|_| {
        Error::new(format!(
            "{} is not inside a git repository",
            start.display()
        ))
        .hint("run inside a git work tree, or pass --repo DIR")
    })
}

/// The work tree root of a non-bare repository.
pub fn workdir(repo: &Repository) -> Result<PathBuf> {
    repo.workdir().map(Path::to_path_buf).ok_or_else(|| {
        Error::new("the repository is bare (it has no work tree)")
            .hint("run inside a clone that has a work tree")
    })
}

/// Where git-factory keeps its own files: `.git/factory/` of the common git dir.
pub fn factory_dir(repo: &Repository) -> PathBuf {
    repo.commondir().join("factory")
}

/// HEAD's commit id, refusing an unborn HEAD.
pub fn head_commit(repo: &Repository) -> Result<git2::Commit<'_>> {
    let head = repo.head().map_err(|_| {
        Error::new("HEAD has no commit yet")
            .hint("make a first commit: git commit --allow-empty -m init")
    })?;
    Ok(head.peel_to_commit()?)
}

/// Refuses while a merge, rebase, cherry-pick, revert or bisect is under way.
pub fn ensure_no_operation(repo: &Repository) -> Result<()> {
    let what = match repo.state() {
        RepositoryState::Clean => return Ok(()),
        RepositoryState::Merge => "a merge",
        RepositoryState::Revert | RepositoryState::RevertSequence => "a revert",
        RepositoryState::CherryPick | RepositoryState::CherryPickSequence => "a cherry-pick",
        RepositoryState::Bisect => "a bisect",
        RepositoryState::Rebase
        | RepositoryState::RebaseInteractive
        | RepositoryState::RebaseMerge => "a rebase",
        RepositoryState::ApplyMailbox | RepositoryState::ApplyMailboxOrRebase => "a git am",
    };
    Err(Error::new(format!("{what} is in progress"))
        .hint("finish or abort it first (e.g. git merge --abort, git rebase --abort)"))
}

/// One entry of a status walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirty {
    /// The path for people (and for comparing with paths we generated).
    pub path: String,
    /// The path's bytes as they are on disk: what a restore writes or removes.
    pub raw: Vec<u8>,
    pub label: &'static str,
    pub tracked: bool,
}

fn label(s: Status) -> (&'static str, bool) {
    if s.contains(Status::WT_NEW) && !s.intersects(Status::INDEX_NEW | Status::INDEX_MODIFIED) {
        return ("untracked", false);
    }
    if s.intersects(
        Status::INDEX_NEW
            | Status::INDEX_MODIFIED
            | Status::INDEX_DELETED
            | Status::INDEX_RENAMED
            | Status::INDEX_TYPECHANGE,
    ) {
        return ("staged", true);
    }
    if s.contains(Status::WT_DELETED) {
        return ("deleted", true);
    }
    if s.contains(Status::CONFLICTED) {
        return ("conflicted", true);
    }
    ("modified", true)
}

/// One status walk: staged, unstaged and untracked-not-ignored paths, sorted.
/// `recurse` lists each untracked file rather than its top directory.
pub fn dirty_paths(repo: &Repository, recurse: bool) -> Result<Vec<Dirty>> {
    let untracked = if recurse {
        status::Untracked::Files
    } else {
        status::Untracked::Folders
    };
    status::changes(repo, untracked)
}

/// Paths whose index entry differs from HEAD. Answered from the index's cached tree when it
/// matches HEAD's tree (the usual case), so HEAD's trees are read only when something is staged.
pub fn staged_paths(repo: &Repository) -> Result<Vec<Dirty>> {
    let head_tree = match repo.head().ok().and_then(|h| h.peel_to_tree().ok()) {
        Some(t) => t,
        None => return Ok(Vec::new()),
    };
    let mut index = repo.index()?;
    if index.has_conflicts() {
        return Ok(index
            .conflicts()?
            .flatten()
            .filter_map(|c| c.our.or(c.their).or(c.ancestor))
            .map(|e| Dirty {
                path: String::from_utf8_lossy(&e.path).into_owned(),
                raw: e.path,
                label: "conflicted",
                tracked: true,
            })
            .collect());
    }
    if index.write_tree().ok() == Some(head_tree.id()) {
        return Ok(Vec::new());
    }
    let diff = repo.diff_tree_to_index(Some(&head_tree), Some(&index), None)?;
    Ok(diff
        .deltas()
        .filter_map(|d| {
            d.new_file()
                .path_bytes()
                .or(d.old_file().path_bytes())
                .map(<[u8]>::to_vec)
        })
        .map(|raw| Dirty {
            path: String::from_utf8_lossy(&raw).into_owned(),
            raw,
            label: "staged",
            tracked: true,
        })
        .collect())
}

/// Refuses a work tree with any staged, unstaged or untracked-not-ignored change,
/// listing up to 10 of them.
pub fn ensure_clean(repo: &Repository) -> Result<()> {
    status::Snapshot::take(repo)?.ensure_clean()
}

/// The git tree id of the work tree (tracked plus untracked-not-ignored files), computed in an
/// in-memory copy of the index: its stat cache means only changed files are hashed, and the
/// user's index file is never written.
pub fn worktree_tree(root: &Path) -> Result<Oid> {
    let repo = Repository::open(root)?;
    let mut index = repo.index()?;
    index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"].iter(), None)?;
    Ok(index.write_tree()?)
}

/// The tree of `base` with the outcomes' after-states applied, built in memory.
pub fn tree_with(repo: &Repository, base: Oid, outcomes: &[FileOutcome]) -> Result<Oid> {
    let base_tree = repo.find_tree(base)?;
    let mut builder = TreeUpdateBuilder::new();
    for o in outcomes {
        match &o.after {
            None => {
                builder.remove(o.path.as_str());
            }
            Some(state) => {
                let blob = repo.blob(&state.bytes)?;
                let mode = if state.executable {
                    FileMode::BlobExecutable
                } else {
                    FileMode::Blob
                };
                builder.upsert(o.path.as_str(), blob, mode);
            }
        }
    }
    Ok(builder.create_updated(repo, &base_tree)?)
}

/// The git-style unified diff between two trees (modes, creations, deletions included), as
/// bytes: the files' lines are bytes.
pub fn diff_trees(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<u8>> {
    let old = repo.find_tree(old)?;
    let new = repo.find_tree(new)?;
    let mut opts = git2::DiffOptions::new();
    opts.show_binary(false);
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), Some(&mut opts))?;
    let mut text = Vec::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            text.push(line.origin() as u8);
        }
        text.extend_from_slice(line.content());
        true
    })?;
    Ok(text)
}

/// Makes the work tree equal to `baseline` again, as `git reset --hard` + `git clean -fd`
/// would, without writing the index: tracked paths that differ are checked out from the
/// baseline, untracked-not-ignored files removed (ignored files are never touched). Loops until
/// a status walk is empty; returns the paths it had to restore. With the run's preflight
/// `snapshot`, each walk lists only the folders that changed since.
pub fn restore_baseline(
    repo: &Repository,
    root: &Path,
    baseline: &git2::Commit<'_>,
    snapshot: Option<&status::Snapshot>,
) -> Result<Vec<String>> {
    let mut restored: Vec<String> = Vec::new();
    for round in 0..4 {
        let dirty = match snapshot {
            Some(s) => s.changes_since(repo)?,
            None => dirty_paths(repo, true)?,
        };
        if dirty.is_empty() {
            restored.sort();
            restored.dedup();
            return Ok(restored);
        }
        if round == 3 {
            let mut err =
                Error::new("rollback could not restore the baseline: these paths still differ");
            for d in dirty.iter().take(10) {
                err = err.detail(format!("{}: {}", d.label, d.path));
            }
            return Err(
                err.hint("inspect them with git status; the run record names the baseline commit")
            );
        }
        restore_paths(repo, root, baseline, &dirty)?;
        restored.extend(dirty.into_iter().map(|d| d.path));
    }
    Ok(restored)
}

/// Puts each path a status walk reported back to the baseline without writing the index:
/// tracked ones checked out, untracked ones removed.
pub fn restore_paths(
    repo: &Repository,
    root: &Path,
    baseline: &git2::Commit<'_>,
    dirty: &[Dirty],
) -> Result<()> {
    let mut checkout = CheckoutBuilder::new();
    // Paths, not patterns: a file named `*.txt` restores that file only.
    checkout
        .force()
        .update_index(false)
        .remove_untracked(false)
        .disable_pathspec_match(true);
    let mut any_tracked = false;
    for d in dirty {
        if d.tracked {
            if d.label == "modified" {
                // A change stat data hides (same size and mtime) is one libgit2's checkout
                // would skip as unmodified: the file goes first, so it is written again.
                remove_modified(root, &d.raw);
            }
            checkout.path(d.raw.as_slice());
            any_tracked = true;
        } else {
            remove_untracked(root, &d.raw);
        }
    }
    if any_tracked {
        repo.checkout_tree(baseline.as_object(), Some(&mut checkout))?;
    }
    Ok(())
}

/// Removes a modified tracked file (or symlink) before it is checked out again, only where
/// every folder above it is a real folder of the tree (never through a symlink).
fn remove_modified(root: &Path, path: &[u8]) {
    let mut dir = root.to_path_buf();
    let mut parts = path.split(|&b| b == b'/').peekable();
    while let Some(part) = parts.next() {
        dir.push(OsStr::from_bytes(part));
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            return;
        };
        if parts.peek().is_some() {
            if !meta.is_dir() {
                return;
            }
        } else if !meta.is_dir() {
            let _ = std::fs::remove_file(&dir);
        }
    }
}

/// Removes an untracked path a status walk reported: a file, or a whole directory when
/// status reports one (a nested repository), then the directories it leaves empty.
pub fn remove_untracked(root: &Path, path: &[u8]) {
    let path = path.strip_suffix(b"/").unwrap_or(path);
    let full = root.join(OsStr::from_bytes(path));
    let removed = if full.is_dir() && !full.is_symlink() {
        std::fs::remove_dir_all(&full)
    } else {
        std::fs::remove_file(&full)
    };
    if removed.is_ok() {
        crate::roles::tr::apply::prune_empty_dirs(root, &full);
    }
}

/// What a run must give back besides the work tree: the branch HEAD is on and where it points,
/// and the index file's bytes (a command may run `git add` or `git commit`). The index is
/// copied once before the run and restored only if it changed.
pub struct BaselineRefs {
    pub head_ref: Option<String>,
    pub commit: Oid,
    index: PathBuf,
    copy: PathBuf,
    stamp: Option<(u64, Option<std::time::SystemTime>)>,
}

fn stamp(path: &Path) -> Option<(u64, Option<std::time::SystemTime>)> {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}

impl BaselineRefs {
    pub fn capture(repo: &Repository, copy: PathBuf) -> Result<Self> {
        let head = repo.find_reference("HEAD")?;
        let head_ref = head.symbolic_target().map(str::to_string);
        let commit = head.peel_to_commit()?.id();
        let index = repo.path().join("index");
        let stamp = stamp(&index);
        if stamp.is_some() {
            // git and libgit2 replace the index by renaming a new file over it, so a hard link
            // keeps the old bytes at no cost; a copy where links are not possible.
            let _ = std::fs::remove_file(&copy);
            if std::fs::hard_link(&index, &copy).is_err() {
                std::fs::copy(&index, &copy)?;
            }
        }
        Ok(BaselineRefs {
            head_ref,
            commit,
            index,
            copy,
            stamp,
        })
    }

    /// Puts HEAD, its branch and the index back if a command moved them; returns what it fixed.
    pub fn restore(&self, repo: &Repository) -> Result<Vec<String>> {
        let mut fixed = Vec::new();
        if self.stamp.is_some() && stamp(&self.index) != self.stamp {
            std::fs::copy(&self.copy, &self.index)?;
            fixed.push("the index".to_string());
        }
        fixed.extend(restore_head(repo, self.head_ref.as_deref(), self.commit)?);
        Ok(fixed)
    }
}

/// Points HEAD (and the branch it was on) back at the baseline.
pub fn restore_head(repo: &Repository, head_ref: Option<&str>, commit: Oid) -> Result<Vec<String>> {
    let mut fixed = Vec::new();
    let head = repo.find_reference("HEAD")?;
    match head_ref {
        Some(name) => {
            if head.symbolic_target() != Some(name) {
                repo.reference_symbolic("HEAD", name, true, "git factory: restore HEAD")?;
                fixed.push("HEAD".to_string());
            }
            if repo.refname_to_id(name).ok() != Some(commit) {
                repo.reference(name, commit, true, "git factory: restore the baseline")?;
                fixed.push(name.to_string());
            }
        }
        None => {
            if head.symbolic_target().is_some() || head.target() != Some(commit) {
                repo.set_head_detached(commit)?;
                fixed.push("HEAD".to_string());
            }
        }
    }
    Ok(fixed)
}

/// Short (7-hex) form of an object id, for people.
pub fn short(oid: &str) -> &str {
    &oid[..oid.len().min(7)]
}
