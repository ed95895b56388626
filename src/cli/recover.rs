//! `git factory recover`: finishes a run whose process was killed. Stops its command if it
//! still runs, puts the worktree the run changed back exactly through the journal's
//! [`Restore`](crate::git::restore::Restore) (refs, index, then the tree) and the read-only
//! files a sandboxed check changed from their saved copies, records the run as INTERRUPTED
//! and clears the journal.

use crate::error::{Error, Exit, Result};
use crate::git::restore::Purpose;
use crate::git::{self, lock::RepoLock};
use crate::journal::Journal;
use crate::run::orphans;
use crate::ui::Ui;
use clap::Args;

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

pub fn cmd_recover(ui: &Ui, args: RecoverArgs) -> Result<Exit> {
    let here = git::open(args.repo.as_deref())?;
    let factory_dir = git::factory_dir(&here);
    let _lock = RepoLock::acquire(&factory_dir)?;
    // Runs outside the user's tree (`--worktree`, races too) whose process is gone: their
    // commands stopped, worktrees removed, records finished. Live ones are left alone.
    let recovered = orphans::recover_worktree_runs(&here);
    for r in &recovered {
        let what = if r.race { "race" } else { "run" };
        ui.info(format!(
            "recovered run {}, a --worktree {what} that was killed: its commands are stopped, its worktrees removed, and the run is recorded as INTERRUPTED",
            r.run_id
        ));
    }
    // Pooled worktrees a killed process held are never trusted again (SPEC §5).
    let _ = git::pool::remove_untrusted(&here, crate::roles::po::pycache::PyCache::forget_worktree);
    let Some(j) = Journal::read(&factory_dir)? else {
        // Recover always starts Python's bytecode cache afresh (SPEC §3.7).
        crate::roles::po::pycache::PyCache::in_factory_dir(&factory_dir).clear();
        if recovered.is_empty() {
            ui.info("nothing to recover: no run was interrupted in this repo");
        }
        return Ok(Exit::Success);
    };
    // Nothing a journal names is acted on before its names are known to be a run's.
    if let Some(why) = j.foreign_names() {
        return Err(foreign_journal(&j, &factory_dir, &why));
    }
    // The killed run's commands are stopped before anything is put back: by the files its
    // harness noted and by the marker they carry — never another run's.
    match &j.harness {
        Some(harness) => orphans::stop_commands(&factory_dir, &j.run_id, harness),
        // A journal written before runs had their own files.
        None => crate::roles::po::exec::stop_noted_group(&factory_dir.join("command.pgid")),
    }
    // The killed run's checks may have compiled versions of files that are gone now.
    crate::roles::po::pycache::PyCache::in_factory_dir(&factory_dir).clear();
    // A race's candidates: their worktrees and scratch files (unless a live run of the same
    // run_id holds them).
    if let Ok(_run_lock) = RepoLock::acquire_run(&factory_dir, &j.run_id) {
        crate::run::race::leftovers::remove_leftovers(&here, &j.run_id);
    }
    // The worktree the run changed, by its recorded path — never the one we were run from
    // unless that is it.
    let repo = if j.restore.belongs_to(&here) {
        here
    } else {
        j.restore.open_worktree()?
    };
    if let Some(why) = j.foreign(&factory_dir, &repo) {
        return Err(foreign_journal(&j, &factory_dir, &why));
    }
    let baseline_id = git2::Oid::from_str(&j.restore.baseline)?;
    repo.find_commit(baseline_id).map_err(|_| {
        Error::new(format!(
            "the journal's baseline {} is not in this repository",
            j.restore.baseline
        ))
    })?;
    let mut report = j.restore.apply(&j.restore.images, Purpose::Recover)?;
    // Then the read-only files a sandboxed check changed before the kill, from the copies
    // saved on disk before it started (SPEC §7.1).
    let kept = j.put_back_kept(&mut report);
    if let Some(e) = report.error("recover") {
        return Err(e);
    }
    if !kept.is_empty() {
        ui.info(format!(
            "put back the ignored files a sandboxed check of run {} had changed, from the copies saved before it: {}",
            j.run_id,
            kept.join(", ")
        ));
    }
    let restored = report.changed();
    if let Some(note) = report.bytecode_note() {
        ui.info(note);
    }
    // Finish the run's record from what it left.
    orphans::finish_interrupted(&repo, &factory_dir, &j.run_id, Some(&j.stage), "in-situ")?;
    j.clear(&factory_dir);
    ui.info(format!(
        "recovered run {}: the baseline {} of {} is restored{}; the run is recorded as INTERRUPTED",
        j.run_id,
        git::short(&j.restore.baseline),
        j.restore.root.display(),
        if restored.is_empty() {
            String::new()
        } else {
            format!(" ({} paths put back)", restored.len())
        }
    ));
    Ok(Exit::Success)
}

/// The refusal for a journal that names places no run of this repository's would: `recover`
/// leaves it, and everything it names, alone.
fn foreign_journal(j: &Journal, factory_dir: &std::path::Path, why: &str) -> Error {
    let file = j.path(factory_dir);
    let shown = if j.foreign_names().is_some() {
        factory_dir.join("journal.*.json")
    } else {
        file
    };
    Error::new(format!(
        "the journal {} was not written by a run of this repository: {why}; nothing was put back",
        shown.display()
    ))
    .hint(format!(
        "a run writes only journals about its own repository: inspect {} and remove it, then run git factory recover",
        shown.display()
    ))
}
