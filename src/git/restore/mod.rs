//! Putting a repo back (SPEC §7): the one owner of it. A [`Restore`] is built from facts
//! recorded before anything changed — the worktree (its root and git dir), the baseline, HEAD
//! and its branch, every other ref, the index's bytes, `.git/config`'s bytes, the folders of
//! the work tree, and the exact pre-images (bytes and mode) of the paths a change will write —
//! and [`Restore::apply`] puts them back in a fixed order: refs, then the index (a lock file
//! and a rename), then the work tree. Rollback, the PASS side-effect restore, the audit of an
//! agent that prints its proposal, a failed delivery and `git factory recover` all use it, so
//! the order and the care below are decided once.
//!
//! The work tree is written without ever following a symlink a command may have planted:
//! every write opens its parent folders one by one from the root with `O_NOFOLLOW` and
//! removes whatever is in the way (a link, a file where a folder belongs) instead of going
//! through it. Paths are bytes throughout; a path that cannot be put back is named, never
//! skipped in silence.
//!
//! What commands left is judged against what existed at capture, never against rules the
//! commands could change: the untracked entries that existed (ignored files and folders, with
//! their inodes), `.git/info/exclude`, the hooks folder and the odd modes (0600) of tracked
//! files are recorded, and the ignore rules are made the baseline's again before the status
//! walk looks at anything. New files the baseline's rules ignore stay (SPEC §5: `git clean
//! -fd`, no `-x`); a pre-existing ignored entry a command renamed is moved back, one it
//! deleted is named (its content was never copied). In a `--worktree` run the refs,
//! `.git/config` and `info/exclude` are shared with the user's ongoing work and with other
//! runs: what changed there is named in [`Report::left`], never put back (no ref there is
//! provably a command's); the hooks are put back in every mode. In git-factory's own
//! namespaces only run records a command deleted are put back: concurrent `--worktree` runs
//! create and advance records and notes (`refs/notes/factory*`) while an in-situ run is under
//! way, so a note a command wrote cannot be told from theirs here.
//!
//! This file is the order; each step has its own room, so a change to one (how hooks are
//! compared, what the sweep removes) is read without the others. `capture` records `facts`;
//! `apply` runs `refs`, then `gitfiles` (index, config, hooks, excludes), then `tree` (the
//! `sweep`, `python`'s bytecode pass, the status `walk`, `images`, `dirs`, `submodule`s), all
//! writing into one `report`. `paths` reaches a path through real folders only. The bytes the
//! capture keeps (index, config, exclude, hooks) are one file, `saved`'s state.

mod capture;
mod dirs;
mod facts;
mod gitfiles;
mod hooks;
mod images;
mod paths;
mod python;
mod refs;
mod report;
mod saved;
mod submodule;
mod sweep;
mod tree;
mod walk;

pub use facts::{DirFact, HookFile, HooksFact, Image, KeptEntry, RefFact, RelPath, Restore};
pub use gitfiles::replace_locked;
pub(crate) use python::change_time_now;
pub use refs::{
    another_runs_branch, another_runs_note_line, another_runs_notes_commit, restore_head,
    runs_in_progress,
};
pub use report::{Purpose, Report};

use crate::error::{Error, Result};
use git2::{Oid, Repository};
use std::path::Path;

impl Restore {
    /// This restore with [`Restore::confined`] set when the commands it follows are
    /// sandboxed.
    pub fn confined_if(mut self, sandboxed: bool) -> Self {
        self.confined = sandboxed;
        self
    }

    /// Whether `repo` is open on the worktree this restore belongs to.
    pub fn belongs_to(&self, repo: &Repository) -> bool {
        same_dir(repo.path(), &self.git_dir)
    }

    /// Whether the hooks folder this restore names is `repo`'s own: the one its config names
    /// now, or git's default one.
    pub fn hooks_are_the_repos(&self, repo: &Repository) -> bool {
        let Some(h) = &self.hooks else {
            return true;
        };
        let default = repo.commondir().join("hooks");
        same_dir(&h.dir, &default)
            || hooks::hooks_dir(repo, &self.root).is_some_and(|d| same_dir(&h.dir, &d))
    }

    /// Opens the worktree this restore belongs to, or says why it cannot be.
    pub fn open_worktree(&self) -> Result<Repository> {
        let refuse = |why: &str| {
            Error::new(format!(
                "the interrupted run changed the worktree at {}, {why}",
                self.root.display()
            ))
            .hint(format!(
                "put that worktree back where it was and run git factory recover there; or, if it is gone for good, remove the journal (journal.*.json) in {}",
                self.saved.parent().unwrap_or(&self.saved).display()
            ))
        };
        let repo = Repository::open(&self.root).map_err(|_| refuse("which is no longer there"))?;
        if !self.belongs_to(&repo) {
            return Err(refuse(
                "which now belongs to another repository or worktree",
            ));
        }
        Ok(repo)
    }

    /// Puts the worktree back: refs (HEAD and its branch, then every other ref), the index
    /// (its saved bytes, through `index.lock` and a rename), `.git/config`, then the work
    /// tree — what commands left removed first, then `images` written (their exact bytes and
    /// modes) and every other tracked path checked out from the baseline, folders as they
    /// were. `images` are the pre-images for a rollback, or baseline + change after a PASS.
    pub fn apply(&self, images: &[Image], purpose: Purpose) -> Result<Report> {
        let repo = Repository::open(&self.root)?;
        self.apply_with(&repo, images, purpose)
    }

    /// [`Restore::apply`] through a repository the caller already has open on this worktree
    /// (its parsed index and config are reused; the index is re-read when its file changed).
    pub fn apply_with(
        &self,
        repo: &Repository,
        images: &[Image],
        purpose: Purpose,
    ) -> Result<Report> {
        self.apply_walked(repo, images, purpose, None)
    }

    /// [`Restore::apply_with`] that finds what commands left with the run's preflight walk:
    /// only folders whose stamp changed since are listed again (SPEC §7 order unchanged).
    pub fn apply_walked(
        &self,
        repo: &Repository,
        images: &[Image],
        purpose: Purpose,
        walk: Option<&crate::git::status::Snapshot>,
    ) -> Result<Report> {
        if !self.belongs_to(repo) {
            return Err(Error::new(format!(
                "internal: a restore of {} was asked of another worktree",
                self.root.display()
            )));
        }
        let mut report = Report::default();
        let baseline = Oid::from_str(&self.baseline)?;
        // 1. Refs.
        self.put_back_refs(repo, baseline, &mut report)?;
        // 2. The index, `.git/config`, the hooks and `info/exclude`.
        self.put_back_git_files(repo, purpose, &mut report)?;
        crate::trace::mark("  restore: refs, index, config, hooks, excludes");
        crate::crash::point(purpose.kill_point());
        // 3. The work tree.
        let baseline_tree = repo.find_commit(baseline)?.tree()?;
        let new_ignored = self.confined || purpose == Purpose::AgentAudit;
        self.restore_tree(repo, &baseline_tree, images, walk, new_ignored, &mut report)?;
        crate::trace::mark("  restore: work tree");
        report.paths.sort();
        report.paths.dedup();
        Ok(report)
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
}
