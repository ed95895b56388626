//! Record (SPEC §4): the run's final summary, its last checkpoint (the run commit) and the
//! notes on the baseline and the result commit; a refused run's record taken back.

use crate::clock::utc_now;
use crate::error::Result;
use crate::run::attempt::session::Session;
use crate::run::deliver::Landed;
use crate::run::plan::Plan;
use crate::store::{
    self,
    records::{RunSummary, Verdict},
};
use git2::Repository;

/// Writes the final record: the verdict and where the run left the tree, the run commit,
/// and the notes.
pub fn finish(session: &mut Session<'_>, landed: Landed) -> Result<RunSummary> {
    let s = &mut session.summary;
    s.verdict = landed.verdict;
    s.ended_stage = landed.stage.clone();
    s.repo_tree_hash_after = landed.tree_after.to_string();
    s.result_commit = landed.result_commit.map(|c| c.to_string());
    s.ended_utc = utc_now();
    s.duration_seconds = landed.elapsed.as_secs_f64();
    s.error = session.fatal.clone();
    s.cost = run_cost(s);
    session.save()?;
    seal_final_record(session);
    let line = store::note_line(&session.summary);
    store::append_note(session.repo, session.baseline.id(), &line)?;
    if let Some(c) = landed.result_commit {
        store::append_note(session.repo, c, &line)?;
    }
    attest_if_asked(session, &landed);
    Ok(session.summary.clone())
}

/// What the whole run cost: every candidate's attempts and the run's own (SPEC §3.3 Cost).
pub fn run_cost(s: &RunSummary) -> Option<crate::store::records::Cost> {
    let candidates = s.candidates.iter().filter_map(|c| c.cost.as_ref());
    let attempts = s.attempts.iter().filter_map(|a| a.cost.as_ref());
    crate::store::records::Cost::sum(candidates.chain(attempts))
}

/// A final PASS or FAIL is sealed as this clone's own (see
/// [`seal_record`](crate::roles::po::cache::seal_record)); a seal that cannot be written only
/// means the cache will not deliver this run's change later, so it is a warning.
fn seal_final_record(session: &Session<'_>) {
    let s = &session.summary;
    if !s.verdict.is_final() {
        return;
    }
    let sealed = session
        .repo
        .refname_to_id(&store::run_ref(&s.run_id))
        .map_err(crate::error::Error::from)
        .and_then(|record| crate::roles::po::cache::seal_record(session.repo, &s.run_id, record));
    if let Err(e) = sealed {
        session.ui.warn(format!(
            "could not seal run {} as made here ({}): a later --commit over the cache will run it again",
            s.run_id, e.message
        ));
    }
}

/// `--attest` (SPEC §6.1): a delivered PASS is signed as evidence for the tree it left. The
/// verdict is the checks': a signature that fails is named in a warning and changes nothing.
fn attest_if_asked(session: &Session<'_>, landed: &Landed) {
    let Some(signer) = &session.plan.signer else {
        return;
    };
    let s = &session.summary;
    if s.verdict != Verdict::Pass || s.delivered == Some(false) {
        return;
    }
    let commands = (s.attempts.last())
        .map(crate::evidence::commands_of)
        .unwrap_or_default();
    let run_ref = store::run_ref(&s.run_id);
    let evidence = crate::evidence::Evidence {
        tree: landed.tree_after,
        commit: landed.result_commit,
        commands: &commands,
        work_order_sha256: Some(&session.plan.wo.hash),
        run_ref: Some(&run_ref),
        tests: (s.attempts.last())
            .map(crate::evidence::tests_of)
            .unwrap_or_default(),
    };
    match crate::evidence::attest(session.repo, signer, &evidence) {
        Ok(done) => session.ui.info(format!(
            "  evidence signed by {} for tree {} (refs/notes/factory-attest)",
            done.keyid,
            crate::git::short(&landed.tree_after.to_string())
        )),
        Err(e) => session.ui.warn(format!(
            "the PASS stands, but its evidence was not signed: {}{}",
            e.message,
            e.details
                .iter()
                .map(|d| format!("; {d}"))
                .collect::<String>()
        )),
    }
}

/// A refused run leaves refs as they were: its ref goes back to the earlier record, or away.
pub fn withdraw(repo: &Repository, plan: &Plan) -> Result<()> {
    store::withdraw_run(repo, &plan.run_id, plan.previous_commit)
}
