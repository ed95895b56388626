//! Deliver and record (SPEC §5): a PASS onto the user's tree, a commit or a branch, then the
//! final record and notes.

use crate::clock::utc_now;
use crate::delivery::Delivery;
use crate::error::{Error, Result};
use crate::git::restore::Purpose;
use crate::graph::Ending;
use crate::run::attempt::session::Session;
use crate::store;
use crate::store::records::{RunSummary, Stage, Verdict};
use std::time::Duration;

impl Session<'_> {
    /// Records the verdict, delivers a PASS as asked, and writes the final record and notes.
    pub(crate) fn finish(&mut self, ending: &Ending, elapsed: Duration) -> Result<RunSummary> {
        let mut result_commit = None;
        let mut verdict = ending.verdict;
        let mut ended_stage = ending.stage.clone();
        let passed = self.passed.take();
        let tree_after = match (&ending.verdict, &passed) {
            (Verdict::Pass, Some((plan, tree))) => {
                let mut tree = *tree;
                if self.delivery != Delivery::Uncommitted {
                    self.journal_stage("commit", None)?;
                    let summary = self
                        .summary
                        .attempts
                        .last()
                        .and_then(|a| a.summary.clone())
                        .unwrap_or_default();
                    let message =
                        crate::delivery::message(&self.wo.order, &summary, &self.summary.run_id);
                    let delivered = crate::delivery::deliver(
                        self.repo,
                        &self.delivery,
                        &self.baseline,
                        &message,
                        &plan.outcomes,
                    );
                    match delivered {
                        Ok(delivered) => {
                            result_commit = delivered.commit;
                            if let Some(why) = delivered.refused {
                                let left = match self.delivery {
                                    Delivery::Branch(_) => format!(
                                        "bring it into your tree with git factory apply {}",
                                        self.summary.run_id
                                    ),
                                    _ => "it is in the work tree, uncommitted".to_string(),
                                };
                                self.fatal = Some(format!(
                                    "{why}; the change passed but was not committed ({left})"
                                ));
                            }
                        }
                        Err(e) => {
                            // Undone through the same restore as any rollback: the run could
                            // not finish, so the repo goes back to the baseline.
                            self.undo_delivery(&e)?;
                            verdict = Verdict::Error;
                            ended_stage = Stage::Exception.as_str().to_string();
                            tree = self.baseline.tree_id();
                        }
                    }
                }
                tree
            }
            _ => self.baseline.tree_id(),
        };
        let s = &mut self.summary;
        s.verdict = verdict;
        s.ended_stage = ended_stage;
        s.repo_tree_hash_after = tree_after.to_string();
        s.result_commit = result_commit.map(|c| c.to_string());
        s.ended_utc = utc_now();
        s.duration_seconds = elapsed.as_secs_f64();
        s.error = self.fatal.clone();
        self.save()?;
        let line = store::note_line(&self.summary);
        store::append_note(self.repo, self.baseline.id(), &line)?;
        if let Some(c) = result_commit {
            store::append_note(self.repo, c, &line)?;
        }
        Ok(self.summary.clone())
    }

    /// A delivery that failed half-way (a held `index.lock`, a refused ref) is undone: refs,
    /// index and tree back to the baseline, and the error named in the record.
    pub(crate) fn undo_delivery(&mut self, cause: &Error) -> Result<()> {
        self.journal_stage("delivery_undo", None)?;
        let images = self.journal.restore.images.clone();
        let report = self
            .journal
            .restore
            .apply_with(self.repo, &images, Purpose::Delivery)?;
        let mut text = format!(
            "delivering the change failed: {}; the repo is back at the baseline",
            cause.message
        );
        if let Some(e) = report.error("undoing the delivery") {
            text.push_str(&format!("; {}: {}", e.message, e.details.join("; ")));
            self.unrestored = true;
        }
        self.fatal = Some(text);
        Ok(())
    }
}
