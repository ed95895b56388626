//! Best of N (SPEC §5.1): N candidates run the single-run loop independently, each in its own
//! worktree at HEAD, at most `--jobs` at once; the gates' verdicts pick the winner, by rules
//! that depend on nothing but the candidates' results. The race knows nothing of how an
//! attempt works, and a candidate nothing of the others: `candidate::run_candidate` runs one.

pub(crate) mod candidate;
pub(crate) mod guard;
pub mod leftovers;

use crate::error::{Error, Result};
use crate::graph::{Ending, Nodes, Outcome};
use crate::roles::se::provider::ProviderSpec;
use crate::run::attempt::session::Session;
use crate::run::candidates::{Chosen, Race};
use crate::store::records::{CandidateRecord, Stage, Verdict};
use crate::ui::{Board, Ui};
use candidate::{CandidateRun, RaceShared};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Runs every candidate, at most `jobs` at once, and returns them in index order.
pub(crate) fn run_all(shared: &RaceShared<'_>, race: &Race, ui: &Ui) -> Vec<CandidateRun> {
    let board = Board::new(ui, race.candidates as usize);
    let next = AtomicU32::new(1);
    let done: Mutex<Vec<CandidateRun>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..race.jobs {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                if index > race.candidates {
                    break;
                }
                let spec = race.spec(index);
                let run = if crate::interrupt::requested() || shared.budget.exhausted() {
                    CandidateRun::not_started(index, &spec, shared.budget.exhausted())
                } else {
                    candidate::run_candidate(shared, index, &spec, &board)
                };
                board.set(index, &run.line(), true);
                if let Ok(mut done) = done.lock() {
                    done.push(run);
                }
            });
        }
    });
    board.finish();
    let mut runs = done.into_inner().unwrap_or_else(|e| e.into_inner());
    runs.sort_by_key(|r| r.index);
    runs
}

/// What the record keeps of a candidate.
pub(crate) fn record(
    repo: &git2::Repository,
    base_tree: git2::Oid,
    run: &CandidateRun,
) -> CandidateRecord {
    let changed_lines = run
        .tree
        .and_then(|tree| changed_lines(repo, base_tree, tree).ok());
    CandidateRecord {
        index: run.index,
        model: run.model.clone(),
        verdict: run.verdict,
        ended_stage: run.stage.clone(),
        attempts: run.attempts.len() as u32,
        change_set: run.tree.map(|t| t.to_string()),
        changed_lines,
        // Saturating: the counts are the server's numbers.
        tokens: run.attempts.iter().fold(0u64, |sum, a| {
            sum.saturating_add(crate::budget::tokens_of(a.usage.as_ref()))
        }),
        duration_seconds: run.duration.as_secs_f64(),
        error: run.error.clone(),
        served_model: served_model(run),
        cost: crate::store::records::Cost::sum(run.attempts.iter().filter_map(|a| a.cost.as_ref())),
        tests: run.attempts.iter().rev().find_map(|a| a.tests.clone()),
    }
}

/// The model that answered the candidate's last answered attempt.
fn served_model(run: &CandidateRun) -> Option<String> {
    run.attempts
        .iter()
        .rev()
        .find_map(|a| a.served_model.clone())
}

fn changed_lines(repo: &git2::Repository, old: git2::Oid, new: git2::Oid) -> Result<u64> {
    let old = repo.find_tree(old)?;
    let new = repo.find_tree(new)?;
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let stats = diff.stats()?;
    Ok((stats.insertions() + stats.deletions()) as u64)
}

/// The winner among the candidates that passed: the change set most of them produced, then
/// the one with the fewest changed lines, then the lowest index. Pure, so the same results
/// always pick the same winner, whatever order the candidates finished in.
pub fn select(candidates: &[CandidateRecord]) -> Option<u32> {
    // change set → (how many produced it, its changed lines, the lowest index that did)
    let mut groups: BTreeMap<&str, (u32, u64, u32)> = BTreeMap::new();
    for c in candidates {
        let (Verdict::Pass, Some(set)) = (c.verdict, c.change_set.as_deref()) else {
            continue;
        };
        let entry = groups
            .entry(set)
            .or_insert((0, c.changed_lines.unwrap_or(u64::MAX), c.index));
        entry.0 += 1;
        entry.2 = entry.2.min(c.index);
    }
    groups
        .values()
        .min_by_key(|(count, lines, index)| (std::cmp::Reverse(*count), *lines, *index))
        .map(|(_, _, index)| *index)
}

impl CandidateRun {
    /// A candidate the race stopped before it began (Ctrl-C, or the budget ran out).
    pub(crate) fn not_started(index: u32, spec: &ProviderSpec, budget: bool) -> Self {
        let (verdict, stage) = if budget {
            (Verdict::Fail, Stage::BudgetExhausted)
        } else {
            (Verdict::Interrupted, Stage::Interrupted)
        };
        CandidateRun {
            index,
            model: spec.identity(),
            verdict,
            stage: stage.as_str().to_string(),
            attempts: Vec::new(),
            tree: None,
            answer: None,
            attempt_commits: Vec::new(),
            side_effects: Vec::new(),
            error: None,
            refusal: None,
            duration: Duration::ZERO,
        }
    }

    /// Its final board line.
    fn line(&self) -> String {
        let n = self.attempts.len();
        let mut line = format!(
            "{} after {n} attempt{} ({}) {}",
            self.verdict.as_str(),
            if n == 1 { "" } else { "s" },
            self.stage,
            self.model
        );
        if let (Verdict::Error, Some(e)) = (self.verdict, &self.error) {
            line.push_str(&format!(": {}", e.lines().next().unwrap_or("")));
        }
        line
    }
}

/// Races the candidates (SPEC §5.1) and records them in this run. `Ok(None)`: a winner was
/// chosen and the session's provider now proposes its change, for the one attempt that
/// applies and verifies it where it lands; `Ok(Some(ending))`: the run ends without it.
pub(crate) fn race(session: &mut Session<'_>, race: &Race) -> Result<Option<Ending>> {
    let plan = session.plan;
    let shared = RaceShared {
        commondir: session.repo.commondir().to_path_buf(),
        plan,
        run_dir: session.run_dir.clone(),
        verify_cmds: &session.verify_cmds,
        acceptance: &session.acceptance,
        pass_to_pass: &session.pass_to_pass,
        fail_to_pass: &session.fail_to_pass,
        red: &session.red,
        baseline_tests: &session.baseline_tests,
        budget: session.budget,
        summary: &session.summary,
        ui: session.ui,
        lent: std::sync::Mutex::new(plan.worktree.then(|| session.root.clone())),
        reserve: session.reserve,
    };
    // A killed race is found by its place's journal (in-situ) or owner file (--worktree).
    let mut runs = run_all(&shared, race, session.ui);
    let taken = shared.lent.lock().map_or(true, |slot| slot.is_none());
    if plan.worktree && taken {
        // A candidate ran in the run's own worktree: it goes back to the baseline exactly,
        // as after a failed attempt, before the winner is delivered there.
        session.rollback()?;
    }
    if let Some(refusal) = runs.iter_mut().find_map(|r| r.refusal.take()) {
        session.refusal = Some(refusal);
        return Ok(Some(Ending {
            verdict: Verdict::Error,
            stage: Stage::Preflight.as_str().to_string(),
            attempts: 0,
        }));
    }
    let winner = record_all(session, &runs);
    let ending = |verdict: Verdict, stage: &str| {
        Ok(Some(Ending {
            verdict,
            stage: stage.to_string(),
            attempts: 0,
        }))
    };
    if crate::interrupt::requested() {
        return ending(Verdict::Interrupted, Stage::Interrupted.as_str());
    }
    if session.budget.exhausted() {
        session.summary.winner = Some(None);
        return ending(Verdict::Fail, Stage::BudgetExhausted.as_str());
    }
    let Some(index) = winner else {
        let all_errors = runs.iter().all(|r| r.verdict == Verdict::Error);
        session.fatal = all_errors
            .then(|| runs.iter().find_map(|r| r.error.clone()))
            .flatten();
        let stage = runs.first().map(|r| r.stage.clone()).unwrap_or_default();
        let verdict = if all_errors {
            Verdict::Error
        } else {
            Verdict::Fail
        };
        return ending(verdict, &stage);
    };
    if !session.plan.worktree {
        // The user may have worked during the race: their tree is delivered into only when
        // it is exactly as at preflight (SPEC §5.1).
        let changed = guard::changed_since_preflight(session)?;
        if !changed.is_empty() {
            return Ok(Some(guard::undelivered(
                session,
                &runs[index as usize - 1],
                &changed,
            )));
        }
    }
    hand_over(session, &runs, index)?;
    if session.plan.worktree {
        return deliver_verified(session, &runs[index as usize - 1]).map(Some);
    }
    Ok(None)
}

/// The run's one attempt after a `--worktree` race (SPEC §5.1): the winner's answer applied
/// in the run's worktree and committed on its branch. Unlike in-situ, where PO runs once more
/// where the change lands, it is not verified again: it passed on this very tree (the same
/// baseline, the same change) in a pooled worktree indistinguishable from this one. The
/// attempt records the winner's checks, their logs named under `candidate_<i>/`.
fn deliver_verified(session: &mut Session<'_>, won: &CandidateRun) -> Result<Ending> {
    let Some(checks) = won.attempts.last().cloned() else {
        return Err(Error::new(format!(
            "candidate {} passed but its checks were not kept",
            won.index
        )));
    };
    let mut winner = Verified {
        session,
        checks,
        index: won.index,
    };
    crate::graph::drive(&mut winner, 1, &crate::interrupt::requested)
}

struct Verified<'s, 'r> {
    session: &'s mut Session<'r>,
    /// The winner's passing attempt.
    checks: crate::store::records::AttemptRecord,
    index: u32,
}

impl Nodes for Verified<'_, '_> {
    fn se(&mut self, attempt: u32) -> Outcome {
        self.session.se(attempt)
    }

    fn tr(&mut self, attempt: u32) -> Outcome {
        self.session.tr(attempt)
    }

    fn po(&mut self, _attempt: u32) -> Outcome {
        let prefix = format!("candidate_{}/", self.index);
        let named = |results: &[crate::store::records::CmdResult]| {
            let mut results = results.to_vec();
            for r in &mut results {
                for path in [&mut r.stdout_path, &mut r.stderr_path] {
                    if !path.is_empty() && !path.starts_with(&prefix) {
                        *path = format!("{prefix}{path}");
                    }
                }
            }
            results
        };
        self.session.ui.info(format!(
            "  PO: passed in candidate {}'s worktree on this same tree",
            self.index
        ));
        let record = &mut self.session.current().record;
        record.verify = named(&self.checks.verify);
        record.pass_to_pass = named(&self.checks.pass_to_pass);
        record.fail_to_pass = named(&self.checks.fail_to_pass);
        record.acceptance = named(&self.checks.acceptance);
        Outcome::Ok
    }

    fn interrupt(&mut self, attempt: u32) -> Outcome {
        self.session.interrupt(attempt)
    }

    fn end_attempt(&mut self, attempt: u32, passed: bool, last: bool) -> Result<()> {
        self.session.end_attempt(attempt, passed, last)
    }
}

/// One record for the whole race: every candidate's attempt commits are parents of the run
/// commit, and the summary lists the candidates and the winner, which it returns.
fn record_all(session: &mut Session<'_>, runs: &[CandidateRun]) -> Option<u32> {
    for r in runs {
        (session.writer.attempt_commits).extend(r.attempt_commits.iter().copied());
    }
    let base_tree = session.baseline.tree_id();
    let records: Vec<_> = runs
        .iter()
        .map(|r| record(session.repo, base_tree, r))
        .collect();
    let winner = select(&records);
    session.summary.candidates = records;
    session.summary.winner = Some(winner);
    winner
}

/// The winner's proposal becomes what the session's provider proposes.
fn hand_over(session: &mut Session<'_>, runs: &[CandidateRun], index: u32) -> Result<()> {
    let won = &runs[index as usize - 1];
    let Some((text, format)) = won.answer.clone() else {
        return Err(Error::new(format!(
            "candidate {index} passed but its answer was not kept"
        )));
    };
    let passed = (runs.iter()).filter(|r| r.verdict == Verdict::Pass).count();
    session.ui.info(format!(
        "  {passed}/{} candidates passed; candidate {index} wins ({}): {}",
        runs.len(),
        won.model,
        if session.plan.worktree {
            "committing it"
        } else {
            "verifying it once more in your tree"
        }
    ));
    session.provider = Box::new(Chosen {
        text,
        format,
        served_model: served_model(won),
    });
    // The winner's change is replayed, not asked of an agent again: nothing to audit, and
    // no request to pay for.
    session.audited = false;
    session.priced = None;
    if !session.plan.worktree {
        session.winner_side_effects = Some(won.side_effects.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(index: u32, verdict: Verdict, set: Option<&str>, lines: u64) -> CandidateRecord {
        CandidateRecord {
            index,
            model: "m".into(),
            verdict,
            ended_stage: String::new(),
            attempts: 1,
            change_set: set.map(str::to_string),
            changed_lines: set.map(|_| lines),
            tokens: 0,
            duration_seconds: 0.0,
            error: None,
            served_model: None,
            cost: None,
            tests: None,
        }
    }

    #[test]
    fn consensus_then_fewest_lines_then_lowest_index() {
        use Verdict::*;
        // Two candidates agree on the longer change: consensus wins over size.
        let c = [
            cand(1, Pass, Some("small"), 2),
            cand(2, Pass, Some("big"), 9),
            cand(3, Fail, Some("small"), 2),
            cand(4, Pass, Some("big"), 9),
        ];
        assert_eq!(select(&c), Some(2));
        // No consensus: the fewest lines.
        let c = [cand(1, Pass, Some("a"), 5), cand(2, Pass, Some("b"), 3)];
        assert_eq!(select(&c), Some(2));
        // A full tie: the lowest index.
        let c = [cand(2, Pass, Some("b"), 3), cand(1, Pass, Some("a"), 3)];
        assert_eq!(select(&c), Some(1));
        // Nothing passed.
        let c = [cand(1, Fail, Some("a"), 1), cand(2, Error, None, 0)];
        assert_eq!(select(&c), None);
    }
}
