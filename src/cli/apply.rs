//! `git factory apply <run>`: brings a PASSed run's change into the current work tree,
//! 3-way when HEAD has moved on since the run's baseline. All or nothing: a conflict is
//! reported and nothing is written.

use crate::error::{Error, Exit, Result};
use crate::git;
use crate::roles::tr::apply::{write_outcomes, FileOutcome, FileState};
use crate::store::checked::{self, checked_tree};
use crate::store::records::Verdict;
use crate::ui::Ui;
use clap::Args;
use git2::{Oid, Repository, Tree};
use std::path::Path;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A run id or a unique prefix of at least 4 hex digits (default: the newest run)
    #[arg(value_name = "RUN")]
    pub run: Option<String>,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

/// A tree entry's state as a work-tree file (`None` when absent).
pub(super) fn state_in(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
) -> Result<Option<FileState>> {
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

fn changed_paths(repo: &Repository, a: &Tree<'_>, b: &Tree<'_>) -> Result<Vec<String>> {
    let diff = repo.diff_tree_to_tree(Some(a), Some(b), None)?;
    let mut paths: Vec<String> = Vec::new();
    for d in diff.deltas() {
        for f in [d.old_file().path(), d.new_file().path()]
            .into_iter()
            .flatten()
        {
            let p = f.to_string_lossy().into_owned();
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
    }
    paths.sort();
    Ok(paths)
}

pub fn cmd_apply(ui: &Ui, args: ApplyArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    crate::journal::refuse_if_pending(&repo, crate::journal::Beside::Refuse)?;
    let root = git::workdir(&repo)?;
    let run = super::run_or_newest(&repo, args.run.as_deref())?;
    if run.summary.verdict != Verdict::Pass {
        return Err(Error::new(format!(
            "run {} did not pass (verdict {}); only a PASSed change is applied",
            run.run_id,
            run.summary.verdict.as_str()
        ))
        .hint(format!("see why with git factory show {}", run.run_id)));
    }
    if run.summary.ended_stage == crate::store::records::Stage::AlreadySatisfied.as_str() {
        ui.info(format!(
            "run {} was already satisfied at its baseline: it has no change to apply",
            run.run_id
        ));
        return Ok(Exit::Success);
    }
    let attempt = run
        .summary
        .attempts
        .iter()
        .rev()
        .find(|a| a.failure_brief.is_none() && a.tree_commit.is_some())
        .ok_or_else(|| {
            Error::new(format!(
                "run {} records no passing attempt tree",
                run.run_id
            ))
        })?;
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
    let head = git::head_commit(&repo)?;
    let ours = head.tree()?;
    // A fetched record is untrusted: its trees are checked before anything reads them.
    for (tree, what) in [
        (&theirs, format!("attempt {}'s tree", attempt.attempt_index)),
        (&base, "its baseline tree".to_string()),
    ] {
        checked_tree(&repo, tree, Some(&ours))
            .map_err(|e| checked::refusal(&run.run_id, &what, &e))?;
    }

    let result = if ours.id() == base.id() {
        theirs
    } else {
        let mut merged = repo.merge_trees(&base, &ours, &theirs, None)?;
        if merged.has_conflicts() {
            let mut paths: Vec<String> = merged
                .conflicts()?
                .flatten()
                .filter_map(|c| c.our.or(c.their).or(c.ancestor))
                .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                .collect();
            paths.sort();
            paths.dedup();
            ui.always(format!(
                "{} run {}'s change conflicts with HEAD in: {}\nnothing was changed; apply it by hand from git factory show {} --patch",
                console::style("conflict:").red().bold(),
                run.run_id,
                paths.join(", "),
                run.run_id
            ));
            return Ok(Exit::Fail);
        }
        let oid = merged.write_tree_to(&repo)?;
        repo.find_tree(oid)?
    };

    // Only the paths the merge changes are written, and only if the user has not touched them.
    let paths = changed_paths(&repo, &ours, &result)?;
    let dirty: Vec<String> = git::dirty_paths(&repo, true)?
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
        let before = state_in(&repo, &ours, p)?;
        refuse_untracked(&root, p, before.is_none())?;
        refuse_linked_parent(&root, p)?;
        outcomes.push(FileOutcome {
            path: p.clone(),
            before,
            after: state_in(&repo, &result, p)?,
        });
    }
    write_outcomes(&root, &outcomes).map_err(|e| {
        Error::new(format!(
            "writing the change failed (nothing was left half-written): {e}"
        ))
    })?;
    ui.always(format!(
        "applied run {} ({} file{}{}); the change is in your work tree, uncommitted",
        run.run_id,
        paths.len(),
        if paths.len() == 1 { "" } else { "s" },
        if ours.id() == base.id() {
            ""
        } else {
            ", merged 3-way onto HEAD"
        }
    ));
    Ok(Exit::Success)
}
