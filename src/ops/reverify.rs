//! Re-running PO on every recorded attempt tree of a run (`git factory reverify`), offline,
//! each in a temporary worktree: what was recorded next to what happens now.

use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::git;
use crate::roles::po::{grade, verify};
use crate::store::checked::{self, checked_tree};
use crate::store::records::{AttemptRecord, CommandTests};
use crate::store::{self, StoredRun};
use crate::workorder::LoadedWorkOrder;
use serde::Serialize;
use std::time::Duration;

/// One attempt's verdict then and now.
#[derive(Debug, Serialize)]
pub struct Row {
    pub attempt: u32,
    pub tree: String,
    pub recorded: String,
    pub now: String,
    pub same: bool,
    /// Set when this tree was evaluated already for an earlier attempt.
    pub same_tree_as: Option<u32>,
}

/// What happens while the attempts are checked again, for the caller to show.
pub enum Progress<'a> {
    /// An attempt was never applied: it has no tree to check.
    NoTree { attempt: u32, recorded: &'a str },
    /// PO starts on an attempt's tree.
    Checking { attempt: u32, tree: &'a str },
    /// One check command starts.
    Command { kind: &'a str, argv: &'a [String] },
}

/// How to check: each command's time limit (default: the run's own) and the sandbox.
pub struct Settings {
    pub timeout_seconds: Option<u64>,
    pub sandboxed: bool,
}

/// The work order a run recorded, as it ran.
pub fn recorded_order(repo: &git2::Repository, run: &StoredRun) -> Result<LoadedWorkOrder> {
    let raw = store::read_artifact(repo, run.commit, "work_order.json")?
        .ok_or_else(|| Error::new(format!("run {} has no work_order.json", run.run_id)))?;
    let text = String::from_utf8(raw).map_err(|_| {
        Error::new(format!("run {}'s work_order.json is not UTF-8", run.run_id))
            .hint("the record was damaged or crafted; run the work order again instead")
    })?;
    LoadedWorkOrder::from_json_text(&text, "work_order.json")
}

/// Checks every applied attempt of `run` again with `order`'s commands; an attempt whose
/// tree an earlier one had takes that one's result, and a repeat is skipped.
pub fn reverify(
    repo: &git2::Repository,
    run: &StoredRun,
    order: &LoadedWorkOrder,
    settings: &Settings,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Vec<Row>> {
    let checker = Checker {
        repo,
        order,
        configured: Config::of(repo).multi(config::VERIFY),
        timeout: Duration::from_secs(
            settings
                .timeout_seconds
                .unwrap_or(run.summary.config.timeout_seconds),
        ),
        sandboxed: settings.sandboxed,
        baseline: recorded_baseline_tests(repo, run),
        flaky_fails: verify::flaky_fails(repo),
    };
    check_trees(repo, run)?;
    crate::roles::po::cache::ensure_secret(repo)?;
    let mut rows: Vec<Row> = Vec::new();
    for a in &run.summary.attempts {
        let recorded = match &a.failure_brief {
            Some(b) => b.stage.as_str().to_string(),
            None => "passed".to_string(),
        };
        let Some(commit) = a.tree_commit.as_deref() else {
            progress(Progress::NoTree {
                attempt: a.attempt_index,
                recorded: &recorded,
            });
            continue;
        };
        if a.repeat_of.is_some() {
            continue;
        }
        let tree = repo
            .find_commit(git2::Oid::from_str(commit)?)
            .map_err(|_| {
                Error::new(format!("attempt commit {commit} is missing"))
                    .hint("fetch the run's objects")
            })?
            .tree()?;
        let tree_id = tree.id().to_string();
        // The same tree was evaluated for an earlier attempt: its result stands for this one.
        let earlier = rows
            .iter()
            .find(|r| r.tree == tree_id)
            .map(|r| (r.now.clone(), Some(r.attempt)));
        let (now, same_tree_as) = match earlier {
            Some(found) => found,
            None => (checker.check(a, commit, &tree, &mut progress)?, None),
        };
        rows.push(Row {
            attempt: a.attempt_index,
            tree: tree_id,
            same: now == recorded,
            recorded,
            now,
            same_tree_as,
        });
    }
    Ok(rows)
}

/// What every attempt tree of one run is checked with.
struct Checker<'a> {
    repo: &'a git2::Repository,
    order: &'a LoadedWorkOrder,
    /// `factory.verify` as configured.
    configured: Vec<String>,
    timeout: Duration,
    sandboxed: bool,
    /// The baseline's per-test results the run recorded: what the run graded against.
    baseline: Vec<CommandTests>,
    flaky_fails: bool,
}

/// The run's `baseline_tests.json` (empty when it has none, or one that does not parse): a
/// re-check grades each command per test as the run did (SPEC §3.9). It is as trusted as
/// the recorded work order it comes with.
fn recorded_baseline_tests(repo: &git2::Repository, run: &StoredRun) -> Vec<CommandTests> {
    store::read_artifact(repo, run.commit, "baseline_tests.json")
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

impl Checker<'_> {
    /// PO on attempt `a`'s tree in a temporary worktree: the stage it fails at, or `passed`.
    fn check(
        &self,
        a: &AttemptRecord,
        commit: &str,
        tree: &git2::Tree<'_>,
        progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<String> {
        progress(Progress::Checking {
            attempt: a.attempt_index,
            tree: &tree.id().to_string(),
        });
        let verify_cmds = verify::commands_for_tree(tree, &self.configured).map_err(Error::new)?;
        let outcome = verify::run_in_temporary_worktree(
            self.repo,
            commit,
            &verify::Checks {
                verify: &verify_cmds,
                pass_to_pass: &self.order.pass_to_pass_argv(),
                fail_to_pass: &self.order.fail_to_pass_argv(),
                acceptance: &self.order.acceptance_argv(),
                baseline: &self.baseline,
                flaky_fails: self.flaky_fails,
                named: grade::Named {
                    fail_to_pass: &self.order.order.fail_to_pass_tests,
                    pass_to_pass: &self.order.order.pass_to_pass_tests,
                },
            },
            self.timeout,
            self.sandboxed,
            |kind, argv| progress(Progress::Command { kind, argv }),
        )?;
        Ok(outcome
            .failed
            .map(|s| s.as_str().to_string())
            .unwrap_or_else(|| "passed".to_string()))
    }
}

/// A fetched record is untrusted: every attempt tree is checked before the first worktree is
/// made, so a crafted one is refused with nothing written.
fn check_trees(repo: &git2::Repository, run: &StoredRun) -> Result<()> {
    let head = git::head_commit(repo)?.tree()?;
    for a in &run.summary.attempts {
        let Some(commit) = a.tree_commit.as_deref() else {
            continue;
        };
        let Ok(tree) = git2::Oid::from_str(commit)
            .and_then(|oid| repo.find_commit(oid))
            .and_then(|c| c.tree())
        else {
            continue;
        };
        checked_tree(repo, &tree, Some(&head)).map_err(|e| {
            checked::refusal(
                &run.run_id,
                &format!("attempt {}'s tree", a.attempt_index),
                &e,
            )
        })?;
    }
    Ok(())
}
