//! A run served from the cache (SPEC §5): says so, says where its change is, and with
//! `--commit`/`--branch` delivers a cached PASS's change as a new run would.

use crate::delivery::Delivery;
use crate::error::{Error, Result};
use crate::git::restore::{Purpose, Restore};
use crate::git::{self, lock::RepoLock};
use crate::ops::apply::state_in;
use crate::roles::tr::apply::{write_outcomes, FileOutcome};
use crate::store::{self, records::RunSummary, records::Verdict};
use git2::{Commit, Oid, Repository};
use std::path::Path;

/// Where a cached run's change is, and the command that brings it: (where, hint).
pub fn whereabouts(repo: &Repository, s: &RunSummary) -> (String, String) {
    if s.verdict != Verdict::Pass {
        return (
            "it made no change".to_string(),
            format!(
                "see why with git factory show {}, or run it again with --force",
                s.run_id
            ),
        );
    }
    let on_branch =
        (s.result_commit.as_deref()).and_then(|c| crate::store::run_branch_at(repo, &s.run_id, c));
    match on_branch {
        Some(branch) => (
            format!("its change is on branch {branch}, not in your work tree"),
            format!("bring it in with git factory apply {}", s.run_id),
        ),
        None => (
            "its change is not in your work tree".to_string(),
            format!(
                "bring it in with git factory apply {}, or run again with --commit to commit it",
                s.run_id
            ),
        ),
    }
}

fn refuse(s: &RunSummary, why: &str) -> Error {
    Error::new(format!(
        "run {} is already recorded (PASS), but its change cannot be delivered: {why}",
        s.run_id
    ))
    .hint(format!(
        "bring it into your work tree with git factory apply {}, then commit it yourself",
        s.run_id
    ))
}

/// The cached record must be one a run of this clone made and sealed: a fetched one is
/// someone else's claim, and its change is never committed without a check run here.
fn made_here(repo: &Repository, s: &RunSummary) -> Result<()> {
    let record = repo
        .refname_to_id(&store::run_ref(&s.run_id))
        .map_err(|_| refuse(s, "its record is gone"))?;
    if crate::roles::po::cache::record_made_here(repo, &s.run_id, record) {
        return Ok(());
    }
    Err(Error::new(format!(
        "run {} is recorded as PASS, but not by a run in this clone (a record fetched from elsewhere, or made before records were sealed): its change is not committed without its checks running here",
        s.run_id
    ))
    .hint(format!(
        "run it here with --force (its checks run), or bring its change in with git factory apply {} and check it yourself",
        s.run_id
    )))
}

/// The tree of the cached run's passing attempt, checked to be in this repository.
fn passing_tree(repo: &Repository, s: &RunSummary) -> Result<Oid> {
    let commit = s
        .attempts
        .iter()
        .rev()
        .find(|a| a.failure_brief.is_none() && a.tree_commit.is_some())
        .and_then(|a| a.tree_commit.as_deref())
        .and_then(|c| Oid::from_str(c).ok())
        .ok_or_else(|| refuse(s, "the record names no passing attempt tree"))?;
    let commit = repo
        .find_commit(commit)
        .map_err(|_| refuse(s, "its commits are not in this repository"))?;
    Ok(commit.tree_id())
}

/// Delivers a cached PASS: in-situ its change is written to the clean tree and committed on
/// the current branch (`--commit`) or on NAME created at HEAD and checked out (`--branch`);
/// with `--worktree` NAME is created beside the user's branch. Returns the new commit.
pub fn deliver(
    repo_dir: Option<&Path>,
    s: &RunSummary,
    order: &crate::workorder::WorkOrder,
    branch: Option<&str>,
    worktree: bool,
) -> Result<Oid> {
    let repo = git::open(repo_dir)?;
    made_here(&repo, s)?;
    let _lock = if worktree {
        None
    } else {
        let lock = RepoLock::acquire(&git::factory_dir(&repo))?;
        git::ensure_no_operation(&repo)?;
        git::ensure_clean(&repo)?;
        Some(lock)
    };
    let head = git::head_commit(&repo)?;
    if head.tree_id().to_string() != s.repo_tree_hash_before {
        return Err(refuse(s, "HEAD's tree is not the run's baseline any more"));
    }
    let outcomes = outcomes(&repo, &head, s)?;
    let summary_text = s
        .attempts
        .iter()
        .rev()
        .find_map(|a| a.summary.clone())
        .unwrap_or_default();
    let message = crate::delivery::message(order, &summary_text, &s.run_id);
    let delivery = match (branch, worktree) {
        (Some(name), true) => Delivery::Branch(name.to_string()),
        (Some(name), false) => Delivery::NewBranchCheckedOut(name.to_string()),
        (None, true) => return Err(refuse(s, "--commit needs a branch in --worktree mode")),
        (None, false) => Delivery::CurrentBranch,
    };
    let commit = if worktree {
        deliver_in_worktree(&repo, s, &head, &delivery, &message, &outcomes)?
    } else {
        deliver_in_place(&repo, s, &head, &delivery, &message, &outcomes)?
    };
    store::append_note(&repo, commit, &store::note_line(s))?;
    Ok(commit)
}

/// Each path the passing attempt's tree changes from HEAD's, before and after.
fn outcomes(repo: &Repository, head: &Commit<'_>, s: &RunSummary) -> Result<Vec<FileOutcome>> {
    let tree = passing_tree(repo, s)?;
    let ours = head.tree()?;
    let theirs = repo.find_tree(tree)?;
    let diff = repo.diff_tree_to_tree(Some(&ours), Some(&theirs), None)?;
    let mut outcomes = Vec::new();
    for d in diff.deltas() {
        let path = d
            .new_file()
            .path()
            .or(d.old_file().path())
            .and_then(|p| p.to_str())
            .ok_or_else(|| refuse(s, "a changed path is not UTF-8"))?
            .to_string();
        outcomes.push(FileOutcome {
            path: path.clone(),
            before: state_in(repo, &ours, &path)?,
            after: state_in(repo, &theirs, &path)?,
        });
    }
    Ok(outcomes)
}

/// The change committed from a pooled worktree at HEAD (SPEC §5), so it goes through git's
/// filters and hooks as a new run's would, and the user's tree and index stay as they are.
fn deliver_in_worktree(
    repo: &Repository,
    s: &RunSummary,
    head: &Commit<'_>,
    delivery: &Delivery,
    message: &str,
    outcomes: &[FileOutcome],
) -> Result<Oid> {
    let wt = git::pool::take(
        repo,
        &head.id().to_string(),
        crate::roles::po::pycache::PyCache::POOLED,
    )?;
    let delivered = (|| {
        let wt_repo = Repository::open(&wt.path)?;
        write_outcomes(&wt.path, outcomes)
            .map_err(|e| Error::new(format!("writing the change failed: {e}")))?;
        let base = wt_repo.find_commit(head.id())?;
        crate::delivery::deliver(&wt_repo, delivery, &base, message, outcomes, None)
    })();
    wt.give_back()?;
    delivered_commit(s, delivered?)
}

/// The change written to the user's clean tree and committed there. What putting the repo
/// back needs is recorded first: a failed delivery is undone through the one restore (refs,
/// index, then the tree), as a new run's would be.
fn deliver_in_place(
    repo: &Repository,
    s: &RunSummary,
    head: &Commit<'_>,
    delivery: &Delivery,
    message: &str,
    outcomes: &[FileOutcome],
) -> Result<Oid> {
    let factory_dir = git::factory_dir(repo);
    let mut restore = Restore::capture(
        repo,
        crate::journal::saved_dir(&factory_dir, &format!("cached-{}", s.run_id)),
        true,
        None,
    )?;
    restore.set_images(repo, outcomes)?;
    let root = git::workdir(repo)?;
    let delivered = write_outcomes(&root, outcomes)
        .map_err(|e| Error::new(format!("writing the change failed: {e}")))
        .and_then(|()| {
            crate::delivery::deliver(repo, delivery, head, message, outcomes, Some(&restore))
        })
        .and_then(|d| delivered_commit(s, d));
    let undone = match &delivered {
        Ok(_) => None,
        Err(_) => Some(restore.apply_with(repo, &restore.images, Purpose::Delivery)),
    };
    let _ = std::fs::remove_dir_all(&restore.saved);
    match (delivered, undone) {
        (Ok(c), _) => Ok(c),
        (Err(e), Some(Ok(report))) => match report.error("undoing the delivery") {
            Some(u) => Err(u.detail(e.message)),
            None => Err(e),
        },
        (Err(e), Some(Err(u))) => Err(u.detail(e.message)),
        (Err(e), None) => Err(e),
    }
}

/// The commit a delivery made, or the refusal that says why there is none.
fn delivered_commit(s: &RunSummary, d: crate::delivery::Delivered) -> Result<Oid> {
    match (d.commit, d.refused) {
        (Some(c), _) => Ok(c),
        (None, Some(why)) => Err(refuse(s, &format!("a commit hook refused: {why}"))),
        (None, None) => Err(refuse(s, "nothing to commit")),
    }
}
