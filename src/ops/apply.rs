//! Bringing a PASSed run's change into the user's work tree (`git factory apply`), 3-way when
//! HEAD has moved on since the run's baseline. All or nothing: on a conflict nothing is
//! written.

use crate::error::{Error, Result};
use crate::git;
use crate::roles::tr::apply::{write_outcomes, FileOutcome, FileState};
use crate::store::checked::{self, checked_tree};
use crate::store::records::{AttemptRecord, Stage, Verdict};
use crate::store::StoredRun;
use git2::{Oid, Repository, Tree};
use std::path::Path;

/// What bringing a run's change did.
pub enum Applied {
    /// The run was already satisfied at its baseline: it has no change.
    NothingToApply,
    /// The change conflicts with HEAD in these paths; nothing was written.
    Conflict(Vec<String>),
    /// The change is in the work tree, uncommitted: `files` paths, `merged` when it was
    /// merged 3-way onto a HEAD that moved on.
    Written { files: usize, merged: bool },
}

/// Writes `run`'s change into the work tree at `root`, or refuses with nothing written.
pub fn apply_run(repo: &Repository, root: &Path, run: &StoredRun) -> Result<Applied> {
    if run.summary.verdict != Verdict::Pass {
        return Err(Error::new(format!(
            "run {} did not pass (verdict {}); only a PASSed change is applied",
            run.run_id,
            run.summary.verdict.as_str()
        ))
        .hint(format!("see why with git factory show {}", run.run_id)));
    }
    if run.summary.ended_stage == Stage::AlreadySatisfied.as_str() {
        return Ok(Applied::NothingToApply);
    }
    let trees = Trees::of(repo, run)?;
    let merged = trees.ours.id() != trees.base.id();
    let result = match trees.result(repo)? {
        Ok(tree) => tree,
        Err(conflicts) => return Ok(Applied::Conflict(conflicts)),
    };
    let outcomes = outcomes(repo, root, &trees.ours, &result, &run.run_id)?;
    write_outcomes(root, &outcomes).map_err(|e| {
        Error::new(format!(
            "writing the change failed (nothing was left half-written): {e}"
        ))
    })?;
    Ok(Applied::Written {
        files: outcomes.len(),
        merged,
    })
}

/// The three trees of a 3-way apply, each checked before anything reads it.
struct Trees<'r> {
    /// The passing attempt's tree.
    theirs: Tree<'r>,
    /// The run's baseline.
    base: Tree<'r>,
    /// HEAD's tree now.
    ours: Tree<'r>,
}

impl<'r> Trees<'r> {
    fn of(repo: &'r Repository, run: &StoredRun) -> Result<Trees<'r>> {
        let attempt = passing_attempt(run)?;
        let theirs_commit = Oid::from_str(attempt.tree_commit.as_deref().unwrap_or_default())?;
        let missing = || {
            Error::new("the run's commits are not in this repository")
                .hint("fetch them: git factory fetch <remote>")
        };
        let theirs = repo
            .find_commit(theirs_commit)
            .map_err(|_| missing())?
            .tree()?;
        let base = repo
            .find_commit(Oid::from_str(&run.summary.repo_baseline_commit)?)
            .map_err(|_| missing())?
            .tree()?;
        let ours = git::head_commit(repo)?.tree()?;
        // A fetched record is untrusted: its trees are checked before anything reads them.
        for (tree, what) in [
            (&theirs, format!("attempt {}'s tree", attempt.attempt_index)),
            (&base, "its baseline tree".to_string()),
        ] {
            checked_tree(repo, tree, Some(&ours))
                .map_err(|e| checked::refusal(&run.run_id, &what, &e))?;
        }
        Ok(Trees { theirs, base, ours })
    }

    /// The tree to bring about: the attempt's own when HEAD is still the baseline, else the
    /// 3-way merge onto HEAD, or the conflicting paths (sorted) when it does not merge.
    fn result(&self, repo: &'r Repository) -> Result<std::result::Result<Tree<'r>, Vec<String>>> {
        if self.ours.id() == self.base.id() {
            return Ok(Ok(self.theirs.clone()));
        }
        let mut merged = repo.merge_trees(&self.base, &self.ours, &self.theirs, None)?;
        if merged.has_conflicts() {
            let mut paths: Vec<String> = merged
                .conflicts()?
                .flatten()
                .filter_map(|c| c.our.or(c.their).or(c.ancestor))
                .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                .collect();
            paths.sort();
            paths.dedup();
            return Ok(Err(paths));
        }
        let oid = merged.write_tree_to(repo)?;
        Ok(Ok(repo.find_tree(oid)?))
    }
}

/// The last attempt that passed and recorded its tree.
fn passing_attempt(run: &StoredRun) -> Result<&AttemptRecord> {
    run.summary
        .attempts
        .iter()
        .rev()
        .find(|a| a.failure_brief.is_none() && a.tree_commit.is_some())
        .ok_or_else(|| {
            Error::new(format!(
                "run {} records no passing attempt tree",
                run.run_id
            ))
        })
}

/// What to write: only the paths the change makes differ from HEAD, and only if the user has
/// not touched them, none is an untracked file and none is reached through a link.
fn outcomes(
    repo: &Repository,
    root: &Path,
    ours: &Tree<'_>,
    result: &Tree<'_>,
    run_id: &str,
) -> Result<Vec<FileOutcome>> {
    let paths = changed_paths(repo, ours, result, run_id)?;
    let dirty: Vec<String> = git::dirty_paths(repo, true)?
        .into_iter()
        .map(|d| d.path)
        .filter(|p| paths.contains(p))
        .collect();
    if !dirty.is_empty() {
        return Err(Error::new(format!(
            "your uncommitted changes to {} would be overwritten",
            dirty.join(", ")
        ))
        .hint("commit or stash them, then run git factory apply again"));
    }
    let mut outcomes = Vec::new();
    for p in &paths {
        let before = state_in(repo, ours, p)?;
        refuse_untracked(root, p, before.is_none())?;
        refuse_linked_parent(root, p)?;
        outcomes.push(FileOutcome {
            path: p.clone(),
            before,
            after: state_in(repo, result, p)?,
        });
    }
    Ok(outcomes)
}

/// A tree entry's state as a work-tree file (`None` when absent).
pub fn state_in(repo: &Repository, tree: &Tree<'_>, path: &str) -> Result<Option<FileState>> {
    let Ok(entry) = tree.get_path(Path::new(path)) else {
        return Ok(None);
    };
    if entry.filemode() != 0o100644 && entry.filemode() != 0o100755 {
        return Err(Error::new(format!(
            "{path} is not a regular file in the run's result"
        )));
    }
    let blob = repo.find_blob(entry.id())?;
    Ok(Some(FileState {
        bytes: blob.content().to_vec(),
        executable: entry.filemode() == 0o100755,
    }))
}

/// Refuses to write over a file HEAD does not track (an untracked or git-ignored file, e.g. a
/// `.env`): the status walk does not see ignored files, and nothing could bring it back.
fn refuse_untracked(root: &Path, path: &str, untracked: bool) -> Result<()> {
    if untracked && std::fs::symlink_metadata(root.join(path)).is_ok() {
        return Err(Error::new(format!(
            "{} is in your work tree but not tracked by git (untracked or ignored); the run would overwrite it",
            crate::ui::escape_line(path)
        ))
        .hint("move it out of the way, then run git factory apply again"));
    }
    Ok(())
}

/// Refuses a path whose folder in the user's tree is a symbolic link (e.g. an untracked
/// `out -> /elsewhere`): writing there would write outside the work tree (SPEC §7).
fn refuse_linked_parent(root: &Path, path: &str) -> Result<()> {
    if let Some(link) = git::nofollow::linked_parent(root, path.as_bytes()) {
        return Err(Error::new(format!(
            "{} is reached through {}, which is a symbolic link or not a folder in your work tree; apply never writes through one",
            crate::ui::escape_line(path),
            crate::ui::escape_line(&link)
        ))
        .hint("replace it with a real folder (or move it away), then run git factory apply again; nothing was changed"));
    }
    Ok(())
}

/// The paths that differ between `a` and `b`. A name that is not UTF-8 (only a crafted or
/// foreign record has one: a work order's paths are JSON) is refused, never written under a
/// lossy spelling.
fn changed_paths(
    repo: &Repository,
    a: &Tree<'_>,
    b: &Tree<'_>,
    run_id: &str,
) -> Result<Vec<String>> {
    let diff = repo.diff_tree_to_tree(Some(a), Some(b), None)?;
    let mut paths: Vec<String> = Vec::new();
    for d in diff.deltas() {
        for f in [d.old_file().path_bytes(), d.new_file().path_bytes()]
            .into_iter()
            .flatten()
        {
            let p = String::from_utf8(f.to_vec()).map_err(|_| {
                Error::new(format!(
                    "run {run_id} changes {}, a name that is not UTF-8; apply cannot write it byte for byte, so nothing was written",
                    bstr::ByteSlice::escape_bytes(f)
                ))
                .hint(format!(
                    "materialise the attempt with git factory checkout {run_id} --attempt N DIR"
                ))
            })?;
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
    }
    paths.sort();
    Ok(paths)
}
