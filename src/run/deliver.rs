//! Deliver (SPEC §5): a PASS onto the user's tree as asked — left uncommitted, one commit on
//! the current branch, or a branch — and a delivery that failed half-way undone.

use crate::delivery::Delivery;
use crate::error::{Error, Result};
use crate::git::restore::Purpose;
use crate::graph::Ending;
use crate::run::attempt::session::Session;
use crate::store::records::{Stage, Verdict};

/// How the run ended once its change was delivered: what the final record says.
pub struct Landed {
    pub verdict: Verdict,
    pub stage: String,
    /// The tree the run left: baseline + change on PASS, else the baseline's.
    pub tree_after: git2::Oid,
    pub result_commit: Option<git2::Oid>,
    /// How long the run took up to its delivery.
    pub elapsed: std::time::Duration,
}

/// Delivers a PASS as the plan asks; anything else leaves the baseline.
pub fn land(session: &mut Session<'_>, ending: &Ending) -> Result<Landed> {
    let mut landed = Landed {
        verdict: ending.verdict,
        stage: ending.stage.clone(),
        tree_after: session.baseline.tree_id(),
        result_commit: None,
        elapsed: session.started.elapsed(),
    };
    let passed = session.passed.take();
    let (Verdict::Pass, Some((plan, tree))) = (&ending.verdict, &passed) else {
        return Ok(landed);
    };
    landed.tree_after = *tree;
    if session.delivery == Delivery::Uncommitted {
        return Ok(landed);
    }
    session.journal_stage("commit", None)?;
    let summary = (session.summary.attempts.last())
        .and_then(|a| a.summary.clone())
        .unwrap_or_default();
    let message =
        crate::delivery::message(&session.plan.wo.order, &summary, &session.summary.run_id);
    let delivered = crate::delivery::deliver(
        session.repo,
        &session.delivery,
        &session.baseline,
        &message,
        &plan.outcomes,
        // In-situ, a hook's checkout is undone through the run's own restore; a worktree
        // run's refs are shared with the user's work, so only its HEAD and index go back.
        (!session.plan.worktree).then_some(&session.journal.restore),
    );
    match delivered {
        Ok(delivered) => {
            landed.result_commit = delivered.commit;
            if let Some(why) = delivered.refused {
                let left = match session.delivery {
                    Delivery::Branch(_) => format!(
                        "bring it into your tree with git factory apply {}",
                        session.summary.run_id
                    ),
                    _ => "it is in the work tree, uncommitted".to_string(),
                };
                session.fatal = Some(format!(
                    "{why}; the change passed but was not committed ({left})"
                ));
            }
        }
        Err(e) => {
            // Undone through the same restore as any rollback: the run could not finish, so
            // the repo goes back to the baseline.
            undo(session, &e)?;
            landed.verdict = Verdict::Error;
            landed.stage = Stage::Exception.as_str().to_string();
            landed.tree_after = session.baseline.tree_id();
        }
    }
    Ok(landed)
}

/// A delivery that failed half-way (a held `index.lock`, a refused ref) is undone: refs,
/// index and tree back to the baseline, and the error named in the record.
fn undo(session: &mut Session<'_>, cause: &Error) -> Result<()> {
    session.journal_stage("delivery_undo", None)?;
    let images = session.journal.restore.images.clone();
    let report = (session.journal.restore).apply_with(session.repo, &images, Purpose::Delivery)?;
    let mut text = format!(
        "delivering the change failed: {}; the repo is back at the baseline",
        cause.message
    );
    if let Some(e) = report.error("undoing the delivery") {
        text.push_str(&format!("; {}: {}", e.message, e.details.join("; ")));
        session.unrestored = true;
    }
    session.fatal = Some(text);
    Ok(())
}
