//! Place (SPEC §5): where a run happens — the user's work tree, under the repo lock claimed at
//! preflight, or a worktree of its own at the baseline, always removed. The place owns its
//! locks, the run's staging folder, what putting the tree back needs, and its cleanup.

use crate::error::{Error, Result};
use crate::git::pool::{Pooled, Reserve};
use crate::git::{lock::RepoLock, restore::Restore, status::Snapshot};
use crate::journal::Journal;
use crate::roles::po::exec::Sandbox;
use crate::run::artifacts::copy_dir;
use crate::run::orphans::Owner;
use crate::run::plan::Plan;
use crate::run::preflight::Claim;
use crate::store::records::RunSummary;
use git2::Repository;
use std::path::{Path, PathBuf};

pub struct Place<'r> {
    user: &'r Repository,
    /// A worktree run's tree: the repo opened there (dropped before the worktree goes).
    own: Option<Repository>,
    worktree: Option<Pooled>,
    /// A race's candidates' worktrees, taken side by side with the run's own.
    pub reserve: Reserve,
    /// A worktree run's owner file: `recover` finishes the run if its process is killed.
    owner: Option<Owner>,
    /// The tree the run changes.
    pub root: PathBuf,
    /// The staging folder of the run's artifacts, under `.git/factory/runs/`.
    pub run_dir: PathBuf,
    /// The first status walk of the tree the run changes (in-situ the preflight's, else its
    /// own worktree's), which later checks of the tree build on.
    pub preflight: Option<Snapshot>,
    factory_dir: PathBuf,
    /// A worktree run keeps no journal on disk (see [`discard_journal`]).
    worktree_run: bool,
    _lock: Option<RepoLock>,
    _run_lock: RepoLock,
}

impl<'r> Place<'r> {
    /// Takes the place: the claimed lock names the run, the run's own lock is taken, the
    /// staging folder made afresh, and in worktree mode a pooled worktree taken at the baseline.
    pub fn enter(user: &'r Repository, claim: Claim, plan: &Plan) -> Result<Self> {
        let Claim {
            mut lock,
            preflight,
        } = claim;
        if let Some(lock) = lock.as_mut() {
            lock.describe(&plan.run_id)?;
        }
        // Two runs of the same run_id (two --worktree runs of one order) would share the
        // staging folder and the worktree: the second refuses, naming the first.
        let run_lock = RepoLock::acquire_run(&plan.factory_dir, &plan.run_id)?;
        // The sealing secret exists before the first command of the run (SPEC §7.1).
        crate::roles::po::cache::ensure_secret(user)?;
        let run_dir = plan.factory_dir.join("runs").join(&plan.run_id);
        if run_dir.exists() {
            std::fs::remove_dir_all(&run_dir)?;
        }
        std::fs::create_dir_all(&run_dir)?;
        // A race's worktrees are taken now, beside the run's own: a candidate finds its
        // worktree ready instead of making it after the run's (SPEC §5.1). The run's own
        // worktree serves the first candidate of a --worktree race.
        let reserve = match &plan.race {
            Some(race) => Reserve::start(
                user.commondir(),
                &plan.baseline.to_string(),
                crate::roles::po::pycache::PyCache::POOLED,
                (race.jobs.min(race.candidates) as usize)
                    .saturating_sub(usize::from(plan.worktree)),
                plan.sandbox,
            ),
            None => Reserve::none(),
        };
        let worktree = if plan.worktree {
            let mut wt = crate::git::pool::take(
                user,
                &plan.baseline.to_string(),
                crate::roles::po::pycache::PyCache::POOLED,
            )?;
            if plan.sandbox {
                wt.sweep_ignored();
            }
            Some(wt)
        } else {
            None
        };
        let owner = match &worktree {
            Some(wt) => Some(Owner::write(
                &plan.factory_dir,
                &plan.run_id,
                &wt.path,
                plan.race.is_some(),
            )?),
            None => None,
        };
        let own = match &worktree {
            Some(wt) => Some(Repository::open(&wt.path)?),
            None => None,
        };
        // The run's own worktree gets the first status walk an in-situ run's preflight makes
        // of the user's tree: the capture and every later check of the tree build on it.
        let preflight = match &own {
            Some(repo) => Some(Snapshot::take(repo)?),
            None => preflight,
        };
        let root = (worktree.as_ref())
            .map(|w| w.path.clone())
            .unwrap_or_else(|| plan.user_root.clone());
        Ok(Place {
            user,
            own,
            worktree,
            reserve,
            owner,
            root,
            run_dir,
            preflight,
            factory_dir: plan.factory_dir.clone(),
            worktree_run: plan.worktree,
            _lock: lock,
            _run_lock: run_lock,
        })
    }

    /// The repository of the tree the run changes.
    pub fn repo(&self) -> &Repository {
        self.own.as_ref().unwrap_or(self.user)
    }

    /// From here on the tree may change: what putting it back needs is recorded first (the
    /// run's own worktree gets its HEAD and index back between attempts too, but the refs it
    /// shares with the user's ongoing work are not its to put back). In-situ the journal is
    /// written, so `recover` can finish the run if it is killed.
    pub fn capture(&self, plan: &Plan) -> Result<Journal> {
        let restore = Restore::capture(
            self.repo(),
            crate::journal::saved_dir(&plan.factory_dir, &plan.run_id),
            !plan.worktree,
            self.preflight.as_ref(),
        )?
        .confined_if(plan.sandbox);
        let journal = Journal {
            run_id: plan.run_id.clone(),
            pid: std::process::id(),
            harness: Some(crate::harness::marker().to_string()),
            stage: "preflight".to_string(),
            restore,
        };
        if !plan.worktree {
            // Nothing is changed yet, so the write need not survive a power cut (a killed
            // process leaves it in place); the apply stage, which has pre-images, is fsynced.
            journal.write(&plan.factory_dir, false)?;
        }
        crate::trace::mark("journal + saved index");
        Ok(journal)
    }

    /// The sandbox the run's checks run in: the tree writable, the repo's own folders and
    /// the tree's Python environments read-only, the saved read-only files kept with the
    /// journal.
    pub fn sandbox(&self, journal: &Journal) -> Result<Sandbox> {
        Ok(Sandbox::for_checks(crate::sandbox::ChecksIn {
            repo: self.repo(),
            tree: &self.root,
            also_read_only: journal.restore.environments(),
        })?
        .keeping_in(journal.kept_dir()))
    }

    /// Drops the run's repo and gives its pooled worktree back, if it has one; its record is
    /// final by now, so its owner file goes too.
    fn give_back_worktree(&mut self) -> Result<()> {
        self.own = None;
        let given = match self.worktree.take() {
            Some(wt) => wt.give_back(),
            None => Ok(()),
        };
        if let Some(owner) = self.owner.take() {
            owner.remove(&self.factory_dir);
        }
        given
    }

    /// Gives the place up unrecorded (a refusal after preflight): the worktree removed,
    /// `withdraw` run on the user's repo, the staging folder and the journal gone.
    pub fn abandon(
        mut self,
        journal: &Journal,
        withdraw: impl FnOnce(&Repository) -> Result<()>,
    ) -> Result<()> {
        self.give_back_worktree()?;
        withdraw(self.user)?;
        let _ = std::fs::remove_dir_all(&self.run_dir);
        discard_journal(journal, self.worktree_run, &self.factory_dir);
        Ok(())
    }

    /// Leaves the place after the final record: the worktree removed, the artifacts copied to
    /// `--out`, the staging folder removed, and the journal too — unless the last restore left
    /// paths it could not put back: they are named in the record and the journal stays, so
    /// every command points at recover, which tries again once they are fixed.
    pub fn leave(
        mut self,
        journal: &Journal,
        unrestored: bool,
        finished: Result<RunSummary>,
        out: Option<&Path>,
    ) -> Result<(RunSummary, Option<PathBuf>)> {
        self.give_back_worktree()?;
        let summary = finished?;
        let out = match out {
            Some(out) => {
                let dest = out.join(&summary.run_id);
                copy_dir(&self.run_dir, &dest).map_err(|e| {
                    Error::new(format!("cannot write --out {}: {e}", dest.display()))
                })?;
                Some(dest)
            }
            None => None,
        };
        let _ = std::fs::remove_dir_all(&self.run_dir);
        crate::trace::mark("cleanup");
        if self.worktree_run || !unrestored {
            discard_journal(journal, self.worktree_run, &self.factory_dir);
        }
        Ok((summary, out))
    }
}

/// A finished (or refused) run's journal: a worktree run has none on disk (the shared one
/// belongs to in-situ runs), only its saved bytes.
fn discard_journal(journal: &Journal, worktree: bool, factory_dir: &Path) {
    if worktree {
        let _ = std::fs::remove_dir_all(&journal.restore.saved);
    } else {
        journal.clear(factory_dir);
    }
}
