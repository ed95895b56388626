//! Record (SPEC §4): the run's final summary, its last checkpoint (the run commit) and the
//! notes on the baseline and the result commit; a refused run's record taken back.

use crate::clock::utc_now;
use crate::error::Result;
use crate::run::attempt::session::Session;
use crate::run::deliver::Landed;
use crate::run::plan::Plan;
use crate::store::{self, records::RunSummary};
use git2::Repository;

/// Writes the final record: the verdict and where the run left the tree, the run commit,
/// and the notes.
pub fn finish(session: &mut Session<'_>, landed: Landed) -> Result<RunSummary> {
    let s = &mut session.summary;
    s.verdict = landed.verdict;
    s.ended_stage = landed.stage;
    s.repo_tree_hash_after = landed.tree_after.to_string();
    s.result_commit = landed.result_commit.map(|c| c.to_string());
    s.ended_utc = utc_now();
    s.duration_seconds = landed.elapsed.as_secs_f64();
    s.error = session.fatal.clone();
    session.save()?;
    let line = store::note_line(&session.summary);
    store::append_note(session.repo, session.baseline.id(), &line)?;
    if let Some(c) = landed.result_commit {
        store::append_note(session.repo, c, &line)?;
    }
    Ok(session.summary.clone())
}

/// A refused run leaves refs as they were: its ref goes back to the earlier record, or away.
pub fn withdraw(repo: &Repository, plan: &Plan) -> Result<()> {
    store::withdraw_run(repo, &plan.run_id, plan.previous_commit)
}
