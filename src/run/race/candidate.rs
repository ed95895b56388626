//! One candidate of a race (SPEC §5.1): its own attempt loop in its own worktree.

use crate::budget::Budget;
use crate::clock::utc_now;
use crate::delivery::Delivery;
use crate::error::{Error, Result};
use crate::git;
use crate::graph::{self, Ending};
use crate::journal::Journal;
use crate::roles::po::exec::Sandbox;
use crate::roles::po::pycache::PyCache;
use crate::roles::se::proposal;
use crate::roles::se::provider::ProviderSpec;
use crate::run::attempt::session::Session;
use crate::run::plan::Plan;
use crate::store::records::{AttemptRecord, BaselineResult, RunSummary, Stage, Verdict};
use crate::store::RunWriter;
use crate::ui::{self, Ui};
use git2::Repository;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What the candidates of a race share, read-only (SPEC §5.1): the run's plan, and what its
/// own session found before the race (the checks, the baseline's red commands).
pub(crate) struct RaceShared<'a> {
    pub commondir: PathBuf,
    pub plan: &'a Plan,
    pub run_dir: PathBuf,
    pub verify_cmds: &'a [Vec<String>],
    pub acceptance: &'a [Vec<String>],
    pub pass_to_pass: &'a [Vec<String>],
    pub fail_to_pass: &'a [Vec<String>],
    pub red: &'a [BaselineResult],
    pub baseline_tests: &'a [crate::store::records::CommandTests],
    pub budget: &'a Budget,
    pub summary: &'a RunSummary,
    pub ui: &'a Ui,
    /// A `--worktree` race's own worktree, idle until the winner is delivered there: the
    /// first candidate to start runs in it rather than in one more pooled worktree, and the
    /// race puts it back at the baseline afterwards (the run's own rollback).
    pub lent: std::sync::Mutex<Option<PathBuf>>,
    /// Worktrees taken ahead for the candidates, side by side with the run's own.
    pub reserve: Option<&'a git::pool::Reserve>,
}

/// How one candidate ended.
pub(crate) struct CandidateRun {
    pub index: u32,
    pub model: String,
    pub verdict: Verdict,
    pub stage: String,
    pub attempts: Vec<AttemptRecord>,
    /// On PASS: the tree its change made (baseline + change).
    pub tree: Option<git2::Oid>,
    /// On PASS: the answer that made it.
    pub answer: Option<(Vec<u8>, proposal::OutputFormat)>,
    pub attempt_commits: Vec<git2::Oid>,
    /// What its checks changed outside its change, as its PASS listed them (SPEC §5).
    pub side_effects: Vec<String>,
    pub error: Option<String>,
    /// Its provider turned out misconfigured: the whole run is refused.
    pub refusal: Option<Error>,
    pub duration: Duration,
}

/// Runs one candidate: its own attempt loop in its own fresh worktree at the baseline, its
/// artifacts under `candidate_<index>/`. It writes no ref and touches nothing of the user's:
/// the race records all candidates at once. Its worktree is removed whatever happens.
pub(crate) fn run_candidate(
    shared: &RaceShared<'_>,
    index: u32,
    spec: &ProviderSpec,
    board: &ui::Board,
) -> CandidateRun {
    let started = Instant::now();
    let mut run = CandidateRun {
        index,
        model: spec.identity(),
        verdict: Verdict::Error,
        stage: Stage::Exception.as_str().to_string(),
        attempts: Vec::new(),
        tree: None,
        answer: None,
        attempt_commits: Vec::new(),
        side_effects: Vec::new(),
        error: None,
        refusal: None,
        duration: Duration::ZERO,
    };
    if let Err(e) = candidate_session(shared, index, spec, board, &mut run) {
        run.verdict = Verdict::Error;
        run.stage = Stage::Exception.as_str().to_string();
        run.error = Some(e.message);
    }
    run.duration = started.elapsed();
    run
}

/// Candidate `index` in its worktree: the provider opened there with its own seed, what
/// putting the worktree back needs captured, its attempt loop driven; the worktree and the
/// saved bytes removed after.
fn candidate_session(
    shared: &RaceShared<'_>,
    index: u32,
    spec: &ProviderSpec,
    board: &ui::Board,
    run: &mut CandidateRun,
) -> Result<()> {
    let plan = shared.plan;
    let lent = shared.lent.lock().ok().and_then(|mut slot| slot.take());
    let (worktree, path) = match lent {
        Some(path) => (None, path),
        None => {
            let mut wt = match shared.reserve.and_then(git::pool::Reserve::next) {
                Some(ready) => ready?,
                None => {
                    let repo = Repository::open(&shared.commondir)?;
                    git::pool::take(&repo, &plan.baseline.to_string(), PyCache::POOLED)?
                }
            };
            if plan.sandbox {
                wt.sweep_ignored();
            }
            let path = wt.path.clone();
            (Some(wt), path)
        }
    };
    let wt_repo = Repository::open(&path)?;
    let mut settings = plan.settings.clone();
    settings.seed += u64::from(index);
    let (provider, identity) = spec.open(&path, &settings, true, plan.agent_timeout)?;
    run.model = identity.clone();
    let dir = shared.run_dir.join(format!("candidate_{index}"));
    std::fs::create_dir_all(&dir)?;
    // The candidate's own worktree gets its HEAD and index back between attempts; the refs it
    // shares with the user's repo are not its to put back. One status walk serves the capture
    // and every later check of the tree, as an in-situ run's preflight walk does.
    let walk = git::status::Snapshot::take(&wt_repo)?;
    let restore = git::restore::Restore::capture(
        &wt_repo,
        crate::journal::saved_dir(&plan.factory_dir, &format!("{}.{index}", plan.run_id)),
        false,
        Some(&walk),
    )?
    .confined_if(plan.sandbox);
    let saved = restore.saved.clone();
    let journal = Journal {
        run_id: plan.run_id.clone(),
        pid: std::process::id(),
        harness: Some(crate::harness::marker().to_string()),
        stage: "preflight".to_string(),
        restore,
    };
    let ui = shared.ui.silent();
    let mut summary = shared.summary.clone();
    summary.config.model = identity;
    let sandbox = match plan.sandbox {
        true => Some(Sandbox::for_checks(crate::sandbox::ChecksIn {
            repo: &wt_repo,
            tree: &path,
            also_read_only: Vec::new(),
        })?),
        false => None,
    };
    {
        let mut session = Session {
            record: false,
            budget: shared.budget,
            board: Some(board),
            candidate: Some(index),
            winner_side_effects: None,
            passed_answer: None,
            pycache: PyCache::in_factory_dir(&plan.factory_dir),
            pyview: None,
            journal,
            persist_journal: false,
            unrestored: false,
            preflight: Some(&walk),
            reserve: None,
            sandbox,
            delivery: Delivery::Uncommitted,
            repo: &wt_repo,
            root: path.clone(),
            ui: &ui,
            plan,
            baseline: wt_repo.find_commit(plan.baseline)?,
            provider,
            priced: Some(spec.priced()),
            audited: spec.is_agent(),
            run_dir: dir.clone(),
            writer: RunWriter::new(&plan.run_id, &dir, None),
            summary,
            verify_cmds: shared.verify_cmds.to_vec(),
            acceptance: shared.acceptance.to_vec(),
            pass_to_pass: shared.pass_to_pass.to_vec(),
            fail_to_pass: shared.fail_to_pass.to_vec(),
            red: shared.red.to_vec(),
            baseline_tests: shared.baseline_tests.to_vec(),
            tests: crate::roles::po::report::Private::for_run(
                crate::config::Config::of(&wt_repo).multi(crate::config::TEST_REPORT),
                &plan.factory_dir,
                &plan.run_id,
            ),
            current: None,
            brief: None,
            seen: Vec::new(),
            passed: None,
            fatal: None,
            refusal: None,
            started: Instant::now(),
        };
        drive(&mut session, run);
        // Its commands are done: the file they noted their process groups in goes.
        let _ = std::fs::remove_file(session.pgid_file());
    }
    drop(wt_repo);
    let _ = std::fs::remove_dir_all(&saved);
    give_back(worktree, shared.reserve)
}

/// A candidate's pooled worktree goes back: swept while the race goes on when the race keeps
/// a reserve (the run waits for it before it ends), else now.
fn give_back(
    worktree: Option<git::pool::Pooled>,
    reserve: Option<&git::pool::Reserve>,
) -> Result<()> {
    match (worktree, reserve) {
        (Some(wt), Some(reserve)) => {
            reserve.give_back_later(wt);
            Ok(())
        }
        (Some(wt), None) => wt.give_back(),
        (None, _) => Ok(()),
    }
}

/// The candidate's attempt loop, stopped by Ctrl-C or by a spent budget; what it ended with
/// goes into `run` (its own record is written, but moves no ref).
fn drive(session: &mut Session<'_>, run: &mut CandidateRun) {
    let budget = session.budget;
    let stop = || crate::interrupt::requested() || budget.exhausted();
    let max_attempts = session.plan.max_attempts;
    let ending = match graph::drive(session, max_attempts, &stop) {
        Ok(ending) => ending,
        Err(e) => {
            let _ = session.rollback();
            session.fatal = Some(e.message.clone());
            Ending {
                verdict: Verdict::Error,
                stage: Stage::Exception.as_str().to_string(),
                attempts: session.summary.attempts.len() as u32,
            }
        }
    };
    session.summary.verdict = ending.verdict;
    session.summary.ended_stage = ending.stage.clone();
    session.summary.error = session.fatal.clone();
    session.summary.ended_utc = utc_now();
    let _ = session.save();
    run.verdict = ending.verdict;
    run.stage = ending.stage;
    run.attempts = session.summary.attempts.clone();
    if ending.verdict == Verdict::Pass {
        run.tree = session.passed.as_ref().map(|(_, tree)| *tree);
        run.answer = session.passed_answer.take();
        run.side_effects = session.summary.side_effects.clone();
    }
    run.attempt_commits = session.writer.attempt_commits.clone();
    run.error = session.fatal.clone();
    run.refusal = session.refusal.take();
}
