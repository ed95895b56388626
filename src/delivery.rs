//! Delivering a PASS as a commit (SPEC §5, seeds 003/004): a Conventional Commits message
//! derived from the work order, on the current branch (`--commit`), on a new branch checked
//! out (`--branch` in-situ), or on `factory/<run_id>` / `--branch` beside the user's work
//! (worktree mode).

use crate::error::{Error, Result};
use crate::roles::tr::apply::FileOutcome;
use crate::workorder::WorkOrder;
use git2::{Oid, Repository};
use std::path::Path;

const TYPES: [&str; 11] = [
    "feat", "fix", "docs", "test", "refactor", "perf", "build", "ci", "chore", "style", "revert",
];

/// Where a PASS goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// In-situ default: the change stays in the work tree, uncommitted.
    Uncommitted,
    /// In-situ `--commit`: one commit on the current branch.
    CurrentBranch,
    /// In-situ `--branch NAME`: NAME created at the baseline, checked out, the change committed.
    NewBranchCheckedOut(String),
    /// Worktree mode: a branch (`factory/<run_id>` or `--branch`), not checked out.
    Branch(String),
}

/// `type(scope): title`, the summary, the run id and a `Factory-Run:` trailer.
pub fn message(order: &WorkOrder, summary: &str, run_id: &str) -> String {
    let title = order.title.trim();
    let (kind, title) = match title.split_once(':') {
        Some((head, rest))
            if TYPES.contains(
                &head
                    .trim()
                    .split('(')
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase()
                    .as_str(),
            ) =>
        {
            (
                head.trim()
                    .split('(')
                    .next()
                    .unwrap_or("feat")
                    .to_ascii_lowercase(),
                rest.trim(),
            )
        }
        _ => {
            let lower = format!("{} {}", title, order.intent).to_ascii_lowercase();
            let kind = if order.allowed_files.iter().all(|f| f.contains("test")) {
                "test"
            } else if order
                .allowed_files
                .iter()
                .all(|f| f.ends_with(".md") || f.starts_with("docs/"))
            {
                "docs"
            } else if ["fix", "bug", "broken", "crash", "error", "typo", "wrong"]
                .iter()
                .any(|w| lower.contains(w))
            {
                "fix"
            } else {
                "feat"
            };
            (kind.to_string(), title)
        }
    };
    let scope = scope_of(&order.allowed_files);
    let mut subject_title = title.to_string();
    if let Some(first) = subject_title.get(..1) {
        if first.chars().all(|c| c.is_ascii_uppercase())
            && !subject_title
                .get(1..2)
                .is_some_and(|c| c.chars().all(|c| c.is_ascii_uppercase()))
        {
            subject_title = format!("{}{}", first.to_ascii_lowercase(), &subject_title[1..]);
        }
    }
    let subject = match scope {
        Some(s) => format!("{kind}({s}): {subject_title}"),
        None => format!("{kind}: {subject_title}"),
    };
    let mut body = String::new();
    if !summary.trim().is_empty() {
        body.push_str(summary.trim());
        body.push_str("\n\n");
    }
    body.push_str(&format!(
        "Work order {} passed verification and acceptance in git factory run {run_id}.\n\nFactory-Run: {run_id}\n",
        order.id
    ));
    format!("{subject}\n\n{body}")
}

/// The shared top folder of the allowed files, or the single file's stem.
fn scope_of(files: &[String]) -> Option<String> {
    if let [only] = files {
        let name = only.rsplit('/').next().unwrap_or(only);
        return Some(name.split('.').next().unwrap_or(name).to_string()).filter(|s| !s.is_empty());
    }
    let first: Vec<&str> = files
        .iter()
        .filter_map(|f| f.split_once('/').map(|(d, _)| d))
        .collect();
    if first.len() == files.len() && first.windows(2).all(|w| w[0] == w[1]) {
        return first.first().map(|s| s.to_string());
    }
    None
}

/// Refuses a branch name git would refuse, or an existing branch without `--force`.
pub fn check_branch(repo: &Repository, name: &str, force: bool) -> Result<()> {
    let full = format!("refs/heads/{name}");
    if !git2::Reference::is_valid_name(&full) {
        return Err(Error::new(format!("{name:?} is not a valid branch name"))
            .hint("choose a name git accepts, e.g. factory/fix-parser"));
    }
    if repo.find_reference(&full).is_ok() && !force {
        return Err(Error::new(format!("branch {name} already exists"))
            .hint("choose another name with --branch, or pass --force to move it"));
    }
    Ok(())
}

/// Updates only the changed paths of the index to the work tree, keeping every other
/// entry's stat data (a full `read_tree` would make git re-hash the whole tree).
pub fn stage_outcomes(repo: &Repository, outcomes: &[FileOutcome]) -> Result<()> {
    let mut index = repo.index()?;
    for o in outcomes {
        match &o.after {
            Some(_) => index.add_path(Path::new(&o.path))?,
            None => {
                let _ = index.remove_path(Path::new(&o.path));
            }
        }
    }
    index.write()?;
    Ok(())
}

/// Makes the delivery's commit; returns it (`None` when the change stays uncommitted).
pub fn deliver(
    repo: &Repository,
    delivery: &Delivery,
    baseline: &git2::Commit<'_>,
    tree: Oid,
    message: &str,
    outcomes: &[FileOutcome],
) -> Result<Option<Oid>> {
    let sig = crate::store::signature(repo)?;
    let tree = repo.find_tree(tree)?;
    let commit = match delivery {
        Delivery::Uncommitted => return Ok(None),
        Delivery::CurrentBranch => {
            let c = repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &[baseline])?;
            crate::crash::point("during_delivery");
            stage_outcomes(repo, outcomes)?;
            c
        }
        Delivery::NewBranchCheckedOut(name) => {
            let c = repo.commit(None, &sig, &sig, message, &tree, &[baseline])?;
            let full = format!("refs/heads/{name}");
            repo.reference(&full, c, true, "git factory: deliver a passing run")?;
            repo.set_head(&full)?;
            crate::crash::point("during_delivery");
            stage_outcomes(repo, outcomes)?;
            c
        }
        Delivery::Branch(name) => {
            let c = repo.commit(None, &sig, &sig, message, &tree, &[baseline])?;
            repo.reference(
                &format!("refs/heads/{name}"),
                c,
                true,
                "git factory: deliver a passing run",
            )?;
            c
        }
    };
    Ok(Some(commit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(title: &str, files: &[&str]) -> WorkOrder {
        WorkOrder {
            id: "wo-7".into(),
            title: title.into(),
            intent: "make it so".into(),
            allowed_files: files.iter().map(|s| s.to_string()).collect(),
            forbidden: vec![],
            acceptance_commands: vec!["true".into()],
            context_files: vec![],
            notes: None,
        }
    }

    #[test]
    fn conventional_subject_body_and_trailer() {
        let m = message(
            &order(
                "Fix the parser on empty input",
                &["src/parse.py", "src/util.py"],
            ),
            "return [] early",
            "abc123abc123",
        );
        assert!(
            m.starts_with("fix(src): fix the parser on empty input\n\nreturn [] early\n\n"),
            "{m}"
        );
        assert!(m.ends_with("Factory-Run: abc123abc123\n"));
        let m = message(&order("docs: explain the flags", &["README.md"]), "", "x");
        assert!(m.starts_with("docs(README): explain the flags\n"), "{m}");
        let m = message(&order("Add a --json flag", &["a.rs", "b/c.rs"]), "", "x");
        assert!(m.starts_with("feat: add a --json flag\n"), "{m}");
    }
}
