//! `git factory recover`: finishes a run whose process was killed. Stops its command if it
//! still runs, puts the worktree the run changed back exactly through the journal's
//! [`Restore`](crate::git::restore::Restore) (refs, index, then the tree), records the run
//! as INTERRUPTED and clears the journal.

use crate::clock::utc_now;
use crate::error::{Error, Exit, Result};
use crate::git::restore::Purpose;
use crate::git::{self, lock::RepoLock};
use crate::journal::Journal;
use crate::store::{self, records::Verdict, RunWriter};
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
    // `--worktree` races whose process is gone: their worktrees (they have no journal).
    for run_id in crate::run::race::leftovers::remove_orphaned_races(&here) {
        ui.info(format!(
            "removed the worktrees of run {run_id}, a --worktree race that was killed"
        ));
    }
    // Pooled worktrees a killed process held are never trusted again (SPEC §5).
    let _ = git::pool::remove_untrusted(&here, crate::roles::po::pycache::PyCache::forget_worktree);
    let Some(j) = Journal::read(&factory_dir)? else {
        // Recover always starts Python's bytecode cache afresh (SPEC §3.7).
        crate::roles::po::pycache::PyCache::in_factory_dir(&factory_dir).clear();
        ui.info("nothing to recover: no run was interrupted in this repo");
        return Ok(Exit::Success);
    };
    crate::roles::po::exec::stop_noted_group(&factory_dir.join("command.pgid"));
    // The killed run's checks may have compiled versions of files that are gone now.
    crate::roles::po::pycache::PyCache::in_factory_dir(&factory_dir).clear();
    // A race's candidates: their commands, worktrees and scratch files.
    crate::run::race::leftovers::remove_leftovers(&here, &j.run_id);
    // The worktree the run changed, by its recorded path — never the one we were run from
    // unless that is it.
    let repo = if j.restore.belongs_to(&here) {
        here
    } else {
        j.restore.open_worktree()?
    };
    let baseline_id = git2::Oid::from_str(&j.restore.baseline)?;
    repo.find_commit(baseline_id).map_err(|_| {
        Error::new(format!(
            "the journal's baseline {} is not in this repository",
            j.restore.baseline
        ))
    })?;
    let report = j.restore.apply(&j.restore.images, Purpose::Recover)?;
    if let Some(e) = report.error("recover") {
        return Err(e);
    }
    let restored = report.changed();
    if let Some(note) = report.bytecode_note() {
        ui.info(note);
    }

    // Finish the run's record from what it left.
    let run_dir = factory_dir.join("runs").join(&j.run_id);
    let existing = repo.refname_to_id(&store::run_ref(&j.run_id)).ok();
    let summary_path = run_dir.join("run_summary.json");
    let mut summary: Option<store::records::RunSummary> = std::fs::read(&summary_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if summary.is_none() {
        if let Some(c) = existing {
            summary = store::read_summary(&repo, c)?;
        }
    }
    if let Some(mut s) = summary {
        if s.verdict == Verdict::Running {
            s.verdict = Verdict::Interrupted;
            s.ended_stage = "interrupted".to_string();
            s.ended_utc = utc_now();
            s.repo_tree_hash_after = s.repo_tree_hash_before.clone();
            s.error = Some(format!(
                "interrupted at stage {}; recovered by git factory recover",
                j.stage
            ));
            let parents: Vec<git2::Oid> = match existing {
                Some(c) => repo.find_commit(c)?.parent_ids().collect(),
                None => Vec::new(),
            };
            if run_dir.is_dir() {
                let mut text = serde_json::to_string_pretty(&s).unwrap_or_default();
                text.push('\n');
                std::fs::write(&summary_path, text)?;
                let mut writer = RunWriter::resume(&j.run_id, &run_dir, parents);
                writer.checkpoint(&repo, &store::run_message(&s))?;
            }
            store::append_note(&repo, baseline_id, &store::note_line(&s))?;
        }
    }
    let _ = std::fs::remove_dir_all(&run_dir);
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
