//! Refs: listed at capture, put back first (HEAD and its branch, every other ref, the run
//! records a command deleted), or, when shared with the user's ongoing work, only named.
//!
//! Here too is the one rule for what other git-factory runs of the same repo write while a
//! command of this run works (SPEC §5.2: a batch runs several at once; two `--worktree` runs
//! may be started by hand): [`another_runs_branch`], [`another_runs_note_line`] and
//! [`another_runs_notes_commit`]. The check side-effect restore and the agent audit both ask
//! it, so neither takes another run's write for a command's, nor puts it "back" away.

use super::facts::{RefFact, Restore};
use super::report::Report;
use crate::error::Result;
use crate::store::{
    self,
    records::{RunSummary, Verdict},
};
use git2::{Oid, Repository};

fn is_ours(name: &str) -> bool {
    name.starts_with("refs/factory/") || name.starts_with("refs/notes/factory")
}

impl Restore {
    /// Refs, first: HEAD and its branch at the baseline, then every other ref as recorded and
    /// the run records a command deleted; shared refs are only named.
    pub(super) fn put_back_refs(
        &self,
        repo: &Repository,
        baseline: Oid,
        report: &mut Report,
    ) -> Result<()> {
        report
            .git
            .extend(restore_head(repo, self.head_ref.as_deref(), baseline)?);
        match &self.refs {
            Some(refs) => {
                report.git.extend(restore_refs(repo, refs)?);
                report.git.extend(restore_records(repo, &self.records));
            }
            None => report.left.extend(changed_refs(repo, &self.shared_refs)?),
        }
        Ok(())
    }
}

/// Every ref outside git-factory's own namespaces, sorted by name.
pub(super) fn list_refs(repo: &Repository) -> Result<Vec<RefFact>> {
    let mut out = Vec::new();
    for r in repo.references()? {
        let r = r?;
        let Some(name) = r.name().map(str::to_string) else {
            continue;
        };
        if is_ours(&name) {
            continue;
        }
        out.push(RefFact {
            name,
            oid: r.target().map(|o| o.to_string()),
            symbolic: r.symbolic_target().map(str::to_string),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
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

/// The shared refs that differ from `recorded` (created, moved or deleted), named only. A
/// `--worktree` run shares them with the user and with other runs (whose branches
/// `factory/run-<run_id>` appear at delivery): none of them is provably a command's, so none is
/// deleted or moved; the run's report names them instead.
fn changed_refs(repo: &Repository, recorded: &[RefFact]) -> Result<Vec<String>> {
    let now = list_refs(repo)?;
    let mut out: Vec<String> = now
        .iter()
        .filter(|r| !recorded.contains(r))
        .filter(|r| !(created(recorded, &r.name) && another_runs_branch(repo, &r.name)))
        .map(|r| r.name.clone())
        .chain(
            recorded
                .iter()
                .filter(|k| !now.iter().any(|r| r.name == k.name))
                .map(|k| k.name.clone()),
        )
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The run records (`refs/factory/<run_id>`, not the journal), sorted by name.
pub(super) fn list_records(repo: &Repository) -> Result<Vec<RefFact>> {
    let mut out = Vec::new();
    for r in repo.references_glob("refs/factory/*")? {
        let r = r?;
        let Some(name) = r.name().map(str::to_string) else {
            continue;
        };
        if name.starts_with("refs/factory/journal/") {
            continue;
        }
        if let Some(oid) = r.target() {
            out.push(RefFact {
                name,
                oid: Some(oid.to_string()),
                symbolic: None,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Run records a command deleted, put back where they were (never over one that exists now).
fn restore_records(repo: &Repository, recorded: &[RefFact]) -> Vec<String> {
    let mut fixed = Vec::new();
    for k in recorded {
        if repo.find_reference(&k.name).is_ok() {
            continue;
        }
        let Some(oid) = k.oid.as_deref().and_then(|o| Oid::from_str(o).ok()) else {
            continue;
        };
        if repo
            .reference(&k.name, oid, false, "git factory: restore a run record")
            .is_ok()
        {
            fixed.push(k.name.clone());
        }
    }
    fixed
}

/// Every ref back as recorded: created ones deleted, moved or deleted ones put back.
fn restore_refs(repo: &Repository, recorded: &[RefFact]) -> Result<Vec<String>> {
    let now = list_refs(repo)?;
    let mut fixed = Vec::new();
    for r in &now {
        // Created meanwhile; another run's delivery (a `--worktree` run beside this one) stays.
        if created(recorded, &r.name) && !another_runs_branch(repo, &r.name) {
            if let Ok(mut reference) = repo.find_reference(&r.name) {
                reference.delete()?;
                fixed.push(r.name.clone());
            }
        }
    }
    for k in recorded {
        if now.iter().any(|r| r == k) {
            continue;
        }
        match (&k.oid, &k.symbolic) {
            (_, Some(target)) => {
                repo.reference_symbolic(&k.name, target, true, "git factory: restore a ref")?;
            }
            (Some(oid), None) => {
                repo.reference(
                    &k.name,
                    Oid::from_str(oid)?,
                    true,
                    "git factory: restore a ref",
                )?;
            }
            (None, None) => continue,
        }
        fixed.push(k.name.clone());
    }
    fixed.sort();
    fixed.dedup();
    Ok(fixed)
}

/// Whether `name` is in `recorded` no more: created since the capture.
fn created(recorded: &[RefFact], name: &str) -> bool {
    !recorded.iter().any(|k| k.name == name)
}

/// The summary of the run record `refs/factory/<run_id>`, if there is a readable one.
fn record_of(repo: &Repository, run_id: &str) -> Option<RunSummary> {
    let oid = repo.refname_to_id(&store::run_ref(run_id)).ok()?;
    let summary = store::read_summary(repo, oid).ok()??;
    (summary.run_id == run_id).then_some(summary)
}

/// The runs under way in the repo whose `.git/factory/` is `factory_dir`, by run id: those a
/// live harness other than this process names in its owner file (`run.<id>.<harness>.json`)
/// or journal (`journal.<id>.<harness>.json`), and those this process has under way itself
/// ([`crate::harness::runs_here`]; a file naming this process proves nothing, as every command
/// it starts knows its marker). Their records and seals are theirs to write: the agent audit
/// takes any other write of `refs/factory/<id>` or `.git/factory/made/<id>` for the agent's.
pub fn runs_in_progress(factory_dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    let me = crate::harness::marker();
    let mut out: std::collections::BTreeSet<String> =
        crate::harness::runs_here().into_iter().collect();
    for entry in std::fs::read_dir(factory_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name
            .strip_prefix("run.")
            .or_else(|| name.strip_prefix("journal."))
            .and_then(|r| r.strip_suffix(".json"))
        else {
            continue;
        };
        let Some((id, harness)) = rest.split_once('.') else {
            continue;
        };
        if harness != me && crate::harness::alive(harness) {
            out.insert(id.to_string());
        }
    }
    out
}

/// Whether a harness other than this process, still alive, runs `run_id` outside the user's
/// tree: its owner file `run.<run_id>.<harness>.json` (see `run::orphans`) names it.
fn run_by_another_harness(repo: &Repository, run_id: &str) -> bool {
    let prefix = format!("run.{run_id}.");
    let me = crate::harness::marker();
    let Ok(entries) = std::fs::read_dir(crate::git::factory_dir(repo)) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let harness = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|n| n.strip_suffix(".json"));
        harness.is_some_and(|h| h != me && crate::harness::alive(h))
    })
}

/// Whether the branch `name` is another run's delivery (SPEC §5: a `--worktree` PASS is
/// committed on `factory/run-<run_id>`): its record `refs/factory/<run_id>` exists and either is
/// final and names the commit the branch points at as its result, or is still RUNNING in a
/// live harness other than this process (a run delivers before it writes its final record).
/// The caller asks it only of a branch created while its command ran.
pub fn another_runs_branch(repo: &Repository, name: &str) -> bool {
    let Some(run_id) = name
        .strip_prefix("refs/heads/")
        .and_then(crate::store::run_id_of_branch)
    else {
        return false;
    };
    let Some(summary) = record_of(repo, run_id) else {
        return false;
    };
    if summary.verdict == Verdict::Running {
        return run_by_another_harness(repo, run_id);
    }
    let target = repo.refname_to_id(name).ok().map(|o| o.to_string());
    summary.delivered != Some(false) && target.is_some() && summary.result_commit == target
}

/// Whether `line` of a note in `refs/notes/factory` is another run's: exactly the note line
/// (SPEC §4.1) its final record `refs/factory/<run_id>` says. A run writes its line only after
/// its final record, so a line naming a run still RUNNING — this one's, or one that does not
/// exist — is not another run's.
pub fn another_runs_note_line(repo: &Repository, line: &[u8]) -> bool {
    let Some(run_id) = line
        .strip_prefix(b"factory ")
        .and_then(|rest| rest.split(|b| *b == b' ').next())
        .and_then(|id| std::str::from_utf8(id).ok())
    else {
        return false;
    };
    if run_id.is_empty() || run_id.contains('/') {
        return false;
    }
    record_of(repo, run_id)
        .is_some_and(|s| s.verdict != Verdict::Running && store::note_line(&s).as_bytes() == line)
}

/// Whether the notes commit `commit` was made by a git-factory process: one line appended
/// through the store (its message is the store's), on a single parent. This tells another
/// harness's cached check results (`refs/notes/factory-verify`) and evidence from a command's
/// own `git notes` — a command running as the user could imitate it, so outside `--sandbox`
/// this is detection, not a wall.
pub fn another_runs_notes_commit(commit: &git2::Commit<'_>) -> bool {
    commit.parent_count() <= 1 && commit.message_bytes() == store::notes::ADDED.as_bytes()
}
