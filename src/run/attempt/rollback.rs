//! Putting the place back (SPEC §7): the stage journaled first, the one restore, and what
//! the checks changed beside a passing change.

use crate::error::Result;
use crate::git::{self, restore::Purpose};
use crate::roles::tr::{apply, Plan};
use crate::run::attempt::session::Session;

impl Session<'_> {
    /// Records the stage in the journal (in-situ), with the pre-images before an apply.
    pub(crate) fn journal_stage(
        &mut self,
        stage: &str,
        outcomes: Option<&[apply::FileOutcome]>,
    ) -> Result<()> {
        if self.persist_journal {
            self.journal
                .stage(&self.plan.factory_dir, self.repo, stage, outcomes)
        } else {
            self.journal.stage = stage.to_string();
            match outcomes {
                Some(o) => self.journal.restore.set_images(self.repo, o),
                None => Ok(()),
            }
        }
    }

    /// Puts the repo back at the baseline: refs, index, then the tree (SPEC §7).
    pub(crate) fn rollback(&mut self) -> Result<()> {
        let images = self.journal.restore.images.clone();
        let report = self.put_back("rollback", &images, Purpose::Rollback)?;
        self.warn_git(&report);
        if let Some(a) = self.current.as_mut() {
            a.applied = false;
        }
        self.unrestored = !report.failed.is_empty();
        match report.error("rollback") {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The one restore (SPEC §7) as every session step uses it: the stage journaled first,
    /// what commands left found with the preflight walk, and the bytecode of every path it
    /// wrote forgotten, so no later check runs a version of a file that is gone (SPEC §3.7) —
    /// also after the baseline check, which has no attempt.
    pub(crate) fn put_back(
        &mut self,
        stage: &str,
        images: &[git::restore::Image],
        purpose: Purpose,
    ) -> Result<git::restore::Report> {
        self.journal_stage(stage, None)?;
        let mut report =
            self.journal
                .restore
                .apply_walked(self.repo, images, purpose, self.preflight)?;
        // Last: read-only files a sandboxed check changed, once the folders on their way are
        // the baseline's again (SPEC §7.1).
        self.journal.put_back_kept(&mut report);
        self.pycache.forget(
            &self.root,
            (images.iter().map(|i| i.path.as_bytes()))
                .chain(report.files.iter().map(Vec::as_slice)),
        );
        if let Some(note) = report.bytecode_note() {
            self.ui.info(format!("  {note}"));
        }
        Ok(report)
    }

    pub(crate) fn warn_git(&self, report: &git::restore::Report) {
        if !report.git.is_empty() {
            self.ui.warn(format!(
                "a command changed {}; restored",
                report.git.join(", ")
            ));
        }
        if !report.left.is_empty() {
            self.ui.warn(format!(
                "a command changed {}; left as is (shared with your own work: check them)",
                report.left.join(", ")
            ));
        }
    }

    /// After PASS the tree must hold exactly baseline + change: anything the commands changed
    /// outside it (files, refs, the index, .git/config) is put back and listed.
    /// Returns everything the checks changed (for `side_effects`) and, apart, what of it was
    /// only named, not put back (refs shared with the user's work in a `--worktree` run).
    pub(crate) fn restore_side_effects(
        &mut self,
        plan: &Plan,
    ) -> Result<(Vec<String>, Vec<String>)> {
        let images = self
            .journal
            .restore
            .change_images(self.repo, &plan.outcomes)?;
        let report = self.put_back("side_effects", &images, Purpose::SideEffects)?;
        if let Some(e) = report.error("restoring what the checks changed") {
            return Err(e);
        }
        let mut side = report.changed();
        side.sort();
        side.dedup();
        Ok((side, report.left))
    }
}
