//! `git factory recover`: finishes a run whose process was killed. Stops its command if it
//! still runs, restores the baseline exactly (work tree, index, HEAD), records the run as
//! INTERRUPTED and clears the journal.

use crate::error::{Error, Exit, Result};
use crate::git::{self, lock::RepoLock};
use crate::harness::utc_now;
use crate::journal::{self, Journal};
use crate::roles::tr::apply::{self, FileState};
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
    let repo = git::open(args.repo.as_deref())?;
    let root = git::workdir(&repo)?;
    let factory_dir = git::factory_dir(&repo);
    let _lock = RepoLock::acquire(&factory_dir)?;
    // `--worktree` races whose process is gone: their worktrees (they have no journal).
    for run_id in crate::race::remove_orphaned_races(&repo) {
        ui.info(format!(
            "removed the worktrees of run {run_id}, a --worktree race that was killed"
        ));
    }
    let Some(j) = Journal::read(&factory_dir)? else {
        ui.info("nothing to recover: no run was interrupted in this repo");
        return Ok(Exit::Success);
    };
    crate::roles::po::exec::stop_noted_group(&factory_dir.join("command.pgid"));
    // A race's candidates: their commands, worktrees and scratch files.
    crate::race::remove_leftovers(&repo, &j.run_id);
    let baseline_id = git2::Oid::from_str(&j.baseline)?;
    let baseline = repo.find_commit(baseline_id).map_err(|_| {
        Error::new(format!(
            "the journal's baseline {} is not in this repository",
            j.baseline
        ))
    })?;
    // The bytes every touched path had before the change (ignored files included).
    for p in &j.preimages {
        let state = match &p.blob {
            Some(id) => Some(FileState {
                bytes: repo.find_blob(git2::Oid::from_str(id)?)?.content().to_vec(),
                executable: p.executable,
            }),
            None => None,
        };
        apply::write_state(&root, &p.path, state.as_ref())
            .map_err(|e| Error::new(format!("restoring {}: {e}", p.path)))?;
    }
    let restored = git::restore_baseline(&repo, &root, &baseline)?;
    let copy = journal::index_copy(&factory_dir);
    let index = repo.path().join("index");
    if let Ok(saved) = std::fs::read(&copy) {
        if std::fs::read(&index).ok().as_deref() != Some(saved.as_slice()) {
            std::fs::write(&index, saved)?;
        }
    }
    git::restore_head(&repo, j.head_ref.as_deref(), baseline_id)?;

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
    Journal::clear(&factory_dir);
    ui.info(format!(
        "recovered run {}: the baseline {} is restored{}; the run is recorded as INTERRUPTED",
        j.run_id,
        git::short(&j.baseline),
        if restored.is_empty() {
            String::new()
        } else {
            format!(" ({} paths put back)", restored.len())
        }
    ));
    Ok(Exit::Success)
}
