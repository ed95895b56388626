//! Global verification of one commit (`git factory verify`, the pre-push hook): its tree's
//! verification commands in a pooled worktree (SPEC §5), cached by tree id in
//! `refs/notes/factory-verify` (see `roles::po::cache`; only passes are cached, so a flaky
//! failure is checked again next time).

use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::roles::po::exec::tail_chars;
use crate::roles::po::{cache, grade, verify};
use crate::store::records::{CommandTests, Verdict};
use git2::{Oid, Repository};
use std::time::Duration;

/// What verifying a commit found.
pub struct Verified {
    pub passed: bool,
    pub cached: bool,
    pub tree: Oid,
    /// How the failing command ended and the tail of its output.
    pub excerpt: String,
    /// The run whose named tests judged this commit per test (SPEC §3.9), if one did.
    pub judged_by: Option<String>,
}

/// The per-test rule of the factory run that made a commit (SPEC §3.9): the tests its work
/// order named and its baseline's per-test results. A commit it made is judged as the run
/// judged it — named tests and baseline-passing tests must pass, the baseline's unrelated
/// failures may keep failing — by the same grading as the run's (`PoRun::run_graded`).
pub struct RunRule {
    pub run_id: String,
    pub fail_to_pass_tests: Vec<String>,
    pub pass_to_pass_tests: Vec<String>,
    pub baseline: Vec<CommandTests>,
}

impl RunRule {
    fn named(&self) -> grade::Named<'_> {
        grade::Named {
            fail_to_pass: &self.fail_to_pass_tests,
            pass_to_pass: &self.pass_to_pass_tests,
        }
    }

    /// The cache key of a pass under this rule: the commands and the run, so a pass judged
    /// per test is never read as a plain pass of the same commands, nor for another run.
    fn key(&self, commands: &[Vec<String>]) -> Vec<Vec<String>> {
        let mut key = commands.to_vec();
        key.push(vec!["\0judged-by-run".to_string(), self.run_id.clone()]);
        key
    }
}

/// The rule of the run that made `commit` (its `Factory-Run:` trailer), when that run
/// PASSed and delivered this very tree, its record was sealed by a run of this clone (a fetched record is someone's claim,
/// and would otherwise let a push through that no check here judged) and its work order
/// named tests; `None`: the commit is judged by exit codes and reports as usual.
pub fn run_rule(repo: &Repository, commit: &git2::Commit<'_>) -> Option<RunRule> {
    let message = commit.message().unwrap_or("");
    let run_id = (message.lines().rev())
        .find_map(|l| l.strip_prefix("Factory-Run: "))?
        .trim();
    let run = crate::store::find_run(repo, run_id).ok()??;
    if run.summary.verdict != Verdict::Pass
        || !cache::record_made_here(repo, &run.run_id, run.commit)
    {
        return None;
    }
    // Only the tree the run judged: a trailer anyone can write on any commit, and the run's
    // leniency (its baseline's failures may keep failing) is no rule for a tree it never saw.
    let judged = (run.summary.result_commit.as_deref())
        .and_then(|c| Oid::from_str(c).ok())
        .and_then(|c| repo.find_commit(c).ok())?;
    if judged.tree_id() != commit.tree_id() {
        return None;
    }
    let order = super::reverify::recorded_order(repo, &run).ok()?.order;
    if order.fail_to_pass_tests.is_empty() && order.pass_to_pass_tests.is_empty() {
        return None;
    }
    let baseline = crate::store::read_artifact(repo, run.commit, "baseline_tests.json")
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    Some(RunRule {
        run_id: run.run_id,
        fail_to_pass_tests: order.fail_to_pass_tests,
        pass_to_pass_tests: order.pass_to_pass_tests,
        baseline,
    })
}

/// Verifies one commit's tree (or answers from the cache); `on_command` hears of each command
/// as it starts. `by_run`: a commit a factory run made whose work order named tests is judged
/// by that run's rule ([`run_rule`]); off for what signs evidence, which says commands passed.
pub fn verify_commit(
    repo: &Repository,
    commit: Oid,
    no_cache: bool,
    timeout: Duration,
    by_run: bool,
    mut on_command: impl FnMut(&[String]),
) -> Result<Verified> {
    let commit = repo.find_commit(commit)?;
    let tree = commit.tree()?;
    let cfg = Config::of(repo);
    let commands =
        verify::commands_for_tree(&tree, &cfg.multi(config::VERIFY)).map_err(Error::new)?;
    let rule = by_run.then(|| run_rule(repo, &commit)).flatten();
    let key = rule
        .as_ref()
        .map_or_else(|| commands.clone(), |r| r.key(&commands));
    let judged_by = rule.as_ref().map(|r| r.run_id.clone());
    if !no_cache && cache::passed(repo, tree.id(), &key) {
        return Ok(Verified {
            passed: true,
            cached: true,
            tree: tree.id(),
            excerpt: String::new(),
            judged_by,
        });
    }
    cache::ensure_secret(repo)?;
    let outcome = verify::run_in_temporary_worktree(
        repo,
        &commit.id().to_string(),
        &verify::Checks {
            verify: &commands,
            baseline: rule.as_ref().map_or(&[][..], |r| &r.baseline[..]),
            named: rule.as_ref().map(RunRule::named).unwrap_or_default(),
            flaky_fails: verify::flaky_fails(repo),
            ..verify::Checks::default()
        },
        timeout,
        false,
        |_, argv| on_command(argv),
    )?;
    let passed = outcome.failed.is_none();
    let excerpt = match outcome.failing_command() {
        Some(c) => {
            let out = format!("{}{}", c.stdout_trunc, c.stderr_trunc);
            format!(
                "{} → {}\n{}",
                c.display(),
                c.outcome(),
                tail_chars(&out, 2000)
            )
        }
        None => String::new(),
    };
    if passed && rule.is_some() {
        cache::record_pass(repo, tree.id(), &key)?;
    } else if passed {
        cache::record_pass(repo, tree.id(), &commands)?;
        // With the tests they reported, so a run's baseline check can grade against them.
        let reports: Vec<_> = outcome
            .verify
            .iter()
            .filter_map(|c| c.tests.clone())
            .collect();
        crate::roles::po::baseline::record_tests(repo, tree.id(), &commands, &reports)?;
    }
    Ok(Verified {
        passed,
        cached: false,
        tree: tree.id(),
        excerpt,
        judged_by,
    })
}
