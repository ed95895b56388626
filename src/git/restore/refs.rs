//! Refs: listed at capture, put back first (HEAD and its branch, every other ref, the run
//! records a command deleted), or, when shared with the user's ongoing work, only named.

use super::facts::{RefFact, Restore};
use super::report::Report;
use crate::error::Result;
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
/// `factory/<run_id>` appear at delivery): none of them is provably a command's, so none is
/// deleted or moved; the run's report names them instead.
fn changed_refs(repo: &Repository, recorded: &[RefFact]) -> Result<Vec<String>> {
    let now = list_refs(repo)?;
    let mut out: Vec<String> = now
        .iter()
        .filter(|r| !recorded.contains(r))
        .filter(|r| !another_runs_branch(repo, recorded, &r.name))
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

/// A branch `factory/<run_id>` that appeared while this run ran, named after a run whose
/// record exists: another run's delivery (a batch runs several at once), not a side effect.
fn another_runs_branch(repo: &Repository, recorded: &[RefFact], name: &str) -> bool {
    let Some(run_id) = name.strip_prefix("refs/heads/factory/") else {
        return false;
    };
    let created = !recorded.iter().any(|k| k.name == name);
    created
        && !run_id.is_empty()
        && !run_id.contains('/')
        && repo
            .find_reference(&format!("refs/factory/{run_id}"))
            .is_ok()
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
        if !recorded.iter().any(|k| k.name == r.name) {
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
