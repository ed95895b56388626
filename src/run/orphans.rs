//! Every run's own state (SPEC §7), and what a killed run leaves behind. A run's files are
//! named by the run and by its harness process ([`crate::harness::marker`]): the process group
//! of each command it runs (`command.<run_id>.<harness>[.c<i>].pgid`) and, for a run outside
//! the user's tree (`--worktree`, with or without a race), an owner file
//! (`run.<run_id>.<harness>.json`) naming its worktree. `recover` acts only on runs whose
//! harness is gone and whose run lock is free, so a live run is never signalled, restored or
//! recorded by it; it stops the killed run's commands first — by their files and by the
//! marker every command carries in its environment, so a command started a moment before
//! the kill is found too — and only then puts anything back.

use crate::clock::utc_now;
use crate::error::Result;
use crate::git::lock::RepoLock;
use crate::store::{self, records::Verdict, RunWriter};
use git2::Repository;
use std::path::{Path, PathBuf};

/// Where a run's command notes its process group: the run's own, or its candidate `i`'s.
pub fn pgid_file(factory_dir: &Path, run_id: &str, candidate: Option<u32>) -> PathBuf {
    let harness = crate::harness::marker();
    factory_dir.join(match candidate {
        Some(i) => format!("command.{run_id}.{harness}.c{i}.pgid"),
        None => format!("command.{run_id}.{harness}.pgid"),
    })
}

/// Stops every command the run `run_id` of harness `harness` left running: the process
/// groups its files note, then — when that harness is gone, so every command it started is
/// a leftover — any process that carries its marker. A harness still alive (a journal its
/// run left unrestored) keeps its other runs' commands.
pub fn stop_commands(factory_dir: &Path, run_id: &str, harness: &str) {
    let prefix = format!("command.{run_id}.{harness}.");
    for entry in std::fs::read_dir(factory_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".pgid") {
            crate::roles::po::exec::stop_noted_group(&entry.path());
        }
    }
    if !crate::harness::alive(harness) {
        crate::harness::stop_commands_of(harness);
    }
}

pub use crate::journal::Owner;

/// SPEC §7's one rule for every command that could change the repo (all but `recover`,
/// `log` and `show`): after a run was killed — in-situ (its journal is left, the repo lock
/// free) or outside the user's tree (its owner file names a harness that is gone) — it
/// refuses, pointing to `git factory recover`, so nothing (a fetched record over the killed
/// run's RUNNING one, a push of it, a prune) acts on a repo half-way through a run.
/// `beside` says whether it may go on while an in-situ run is under way.
pub fn refuse_if_killed(repo: &Repository, beside: crate::journal::Beside) -> Result<()> {
    crate::journal::refuse_if_pending(repo, beside)
}

/// A run recovered outside the user's tree.
pub struct Recovered {
    pub run_id: String,
    pub race: bool,
}

/// `recover` for runs outside the user's tree whose harness was killed: their commands
/// stopped, their worktrees (the run's and its candidates') removed, their record finished
/// as INTERRUPTED. A run whose harness lives, or whose run lock is held, is left alone.
pub fn recover_worktree_runs(repo: &Repository) -> Vec<Recovered> {
    let factory_dir = crate::git::factory_dir(repo);
    let mut done = Vec::new();
    for (file, owner) in Owner::all(&factory_dir) {
        if crate::harness::alive(&owner.harness) {
            continue;
        }
        let Ok(_run_lock) = RepoLock::acquire_run(&factory_dir, &owner.run_id) else {
            continue;
        };
        stop_commands(&factory_dir, &owner.run_id, &owner.harness);
        crate::run::race::leftovers::remove_leftovers(repo, &owner.run_id);
        if owner.worktree.exists() {
            let _ = crate::git::worktree::remove_path(
                repo,
                &owner.worktree,
                crate::roles::po::pycache::PyCache::forget_worktree,
            );
        }
        let _ = finish_interrupted(repo, &factory_dir, &owner.run_id, None, "worktree");
        let _ = std::fs::remove_file(factory_dir.join(format!("index.{}", owner.run_id)));
        let _ = std::fs::remove_dir_all(crate::journal::saved_dir(&factory_dir, &owner.run_id));
        let _ = std::fs::remove_file(&file);
        done.push(Recovered {
            run_id: owner.run_id,
            race: owner.race,
        });
    }
    done
}

/// Finishes a killed run's record from what it left (its staging folder's summary, else
/// the record itself): a RUNNING run becomes INTERRUPTED, with a note on its baseline; the
/// staging folder goes. `stage` is the journal's last stage, when there is one.
pub fn finish_interrupted(
    repo: &Repository,
    factory_dir: &Path,
    run_id: &str,
    stage: Option<&str>,
    place: &str,
) -> Result<()> {
    let run_dir = factory_dir.join("runs").join(run_id);
    let existing = repo.refname_to_id(&store::run_ref(run_id)).ok();
    let summary_path = run_dir.join("run_summary.json");
    let mut summary: Option<store::records::RunSummary> = std::fs::read(&summary_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if summary.is_none() {
        if let Some(c) = existing {
            summary = store::read_summary(repo, c)?;
        }
    }
    if let Some(mut s) = summary.filter(|s| s.verdict == Verdict::Running) {
        s.verdict = Verdict::Interrupted;
        s.ended_stage = "interrupted".to_string();
        s.ended_utc = utc_now();
        s.repo_tree_hash_after = s.repo_tree_hash_before.clone();
        rebuild_attempts(&mut s, &run_dir);
        // What its attempts cost, the one the kill cut short too, and a race's candidates
        // that had not ended (SPEC §3.3 Cost).
        let unlisted = unlisted_candidates_cost(&s, &run_dir);
        s.cost = store::records::Cost::sum(
            crate::run::record::run_cost(&s)
                .iter()
                .chain(unlisted.iter()),
        );
        s.error = Some(match stage {
            Some(stage) => {
                format!("interrupted at stage {stage}; recovered by git factory recover")
            }
            None => format!("its {place} run was killed; recovered by git factory recover"),
        });
        let parents: Vec<git2::Oid> = match existing {
            Some(c) => repo.find_commit(c)?.parent_ids().collect(),
            None => Vec::new(),
        };
        if run_dir.is_dir() {
            let mut text = serde_json::to_string_pretty(&s).unwrap_or_default();
            text.push('\n');
            std::fs::write(&summary_path, text)?;
            let mut writer = RunWriter::resume(run_id, &run_dir, parents);
            writer.checkpoint(repo, &store::run_message(&s))?;
        }
        let baseline = git2::Oid::from_str(&s.repo_baseline_commit)?;
        store::append_note(repo, baseline, &store::note_line(&s))?;
    }
    let _ = std::fs::remove_dir_all(&run_dir);
    Ok(())
}

/// What the attempts of a killed race's candidates cost, for the candidates its record does
/// not list yet (a candidate joins the record when the race ends), from the usage each
/// attempt kept in its folder.
fn unlisted_candidates_cost(
    s: &store::records::RunSummary,
    run_dir: &Path,
) -> Option<store::records::Cost> {
    let numbered = |dir: &Path, prefix: &str| -> Vec<(u32, std::path::PathBuf)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut found: Vec<(u32, std::path::PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let name = e.file_name();
                let n: u32 = name.to_str()?.strip_prefix(prefix)?.parse().ok()?;
                Some((n, e.path()))
            })
            .collect();
        found.sort();
        found
    };
    let costs: Vec<store::records::Cost> = numbered(run_dir, "candidate_")
        .into_iter()
        .filter(|(i, _)| !s.candidates.iter().any(|c| c.index == *i))
        .flat_map(|(_, dir)| {
            numbered(&dir, "attempt_")
                .into_iter()
                .filter_map(move |(n, _)| {
                    store::records::AttemptRecord::from_folder(&dir, n, &s.repo_baseline_commit)
                        .cost
                })
        })
        .collect();
    store::records::Cost::sum(&costs)
}

/// The attempts whose folders the killed run left but whose records it never wrote (an
/// attempt's record joins the summary only when the attempt ends): the summary lists every
/// attempt the record holds.
fn rebuild_attempts(s: &mut store::records::RunSummary, run_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return;
    };
    let mut found: Vec<u32> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name();
            let n: u32 = name.to_str()?.strip_prefix("attempt_")?.parse().ok()?;
            (n > 0 && n.to_string() == name.to_str()?.trim_start_matches("attempt_")).then_some(n)
        })
        .filter(|n| !s.attempts.iter().any(|a| a.attempt_index == *n))
        .collect();
    found.sort_unstable();
    for n in found {
        let record =
            store::records::AttemptRecord::from_folder(run_dir, n, &s.repo_baseline_commit);
        s.attempts.push(record);
    }
    s.attempts.sort_by_key(|a| a.attempt_index);
}
