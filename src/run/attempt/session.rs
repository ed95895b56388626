//! The state one attempt loop carries over a place: the run's facts, the attempt under way,
//! and what earlier attempts left (the brief, the changes already tried).

use crate::delivery::Delivery;
use crate::error::{Error, Result};
use crate::git;
use crate::graph::Outcome;
use crate::journal::Journal;
use crate::roles::po::exec::Sandbox;
use crate::roles::po::pycache::{self, PyCache};
use crate::roles::se::proposal::{self, Proposal};
use crate::roles::se::provider::Provider;
use crate::roles::tr;
use crate::run::artifacts::write_json;
use crate::run::plan::Plan;
use crate::store::records::{
    AttemptRecord, BaselineResult, CmdResult, FailureBrief, RunSummary, Stage,
};
use crate::store::{self, RunWriter};
use crate::ui::{self, Ui};
use git2::{Commit, Repository};
use std::path::PathBuf;
use std::time::Instant;

/// The state of the attempt under way.
pub(crate) struct Attempt {
    pub(crate) record: AttemptRecord,
    pub(crate) dir: PathBuf,
    pub(crate) rel: String,
    pub(crate) proposal: Option<Proposal>,
    pub(crate) plan: Option<tr::Plan>,
    /// The tree this attempt's change made, once applied.
    pub(crate) tree: Option<git2::Oid>,
    pub(crate) applied: bool,
    pub(crate) brief: Option<FailureBrief>,
    pub(crate) started: Instant,
    /// The answer the parser judged, kept so a race's winning proposal can be delivered.
    pub(crate) answer: Option<(Vec<u8>, proposal::OutputFormat)>,
    /// The backend that confined the agent that proposed (`sandbox` in apply_result.json).
    pub(crate) agent_sandbox: Option<String>,
}

pub(crate) struct Session<'a> {
    /// Whether this session owns the run's record (a race's candidates do not: the race
    /// writes one record for all of them).
    pub(crate) record: bool,
    pub(crate) budget: &'a crate::budget::Budget,
    /// A race's candidate: its line on the race's board and its index.
    pub(crate) board: Option<&'a ui::Board>,
    pub(crate) candidate: Option<u32>,
    /// An in-situ race's final check: what the winner's checks changed outside its change in
    /// their own worktree. Anything else that changes in the user's tree meanwhile is the
    /// user's (SPEC §5.1).
    pub(crate) winner_side_effects: Option<Vec<String>>,
    /// The passing attempt's answer.
    pub(crate) passed_answer: Option<(Vec<u8>, proposal::OutputFormat)>,
    /// The repo's bytecode cache (SPEC §3.7): entries of every path the run writes are
    /// forgotten.
    pub(crate) pycache: PyCache,
    /// Sandboxed checks' view of the bytecode cache, kept for the run (SPEC §3.7).
    pub(crate) pyview: Option<pycache::View>,
    /// The journal and the restore it carries; written to disk in-situ only (a worktree
    /// run's tree is removed whatever happens).
    pub(crate) journal: Journal,
    pub(crate) persist_journal: bool,
    /// The last restore left paths it could not put back (named in the record).
    pub(crate) unrestored: bool,
    /// The first status walk of the tree the session changes (in-situ the preflight's, a
    /// candidate its worktree's; none for a `--worktree` run), which later checks build on.
    pub(crate) preflight: Option<&'a git::status::Snapshot>,
    /// A race's worktrees taken ahead (SPEC §5.1); `None` in a candidate's own session.
    pub(crate) reserve: Option<&'a git::pool::Reserve>,
    pub(crate) sandbox: Option<Sandbox>,
    pub(crate) delivery: Delivery,
    pub(crate) repo: &'a Repository,
    /// The run's plan: the work order, protected paths, context, limits.
    pub(crate) plan: &'a Plan,
    pub(crate) root: PathBuf,
    pub(crate) ui: &'a Ui,
    pub(crate) baseline: Commit<'a>,
    pub(crate) provider: Box<dyn Provider>,
    /// How the provider's requests are priced (SPEC §3.3 Cost); none for a race's winner
    /// proposed again where it lands (no request is made).
    pub(crate) priced: Option<crate::cost::Priced>,
    /// The proposer is an agent program (it runs with the user's privileges): audited.
    pub(crate) audited: bool,
    pub(crate) run_dir: PathBuf,
    pub(crate) writer: RunWriter,
    pub(crate) summary: RunSummary,
    pub(crate) verify_cmds: Vec<Vec<String>>,
    pub(crate) acceptance: Vec<Vec<String>>,
    pub(crate) pass_to_pass: Vec<Vec<String>>,
    pub(crate) fail_to_pass: Vec<Vec<String>>,
    /// The baseline's red `fail_to_pass` results, for the first prompt.
    pub(crate) red: Vec<BaselineResult>,
    /// The baseline's per-test reports (SPEC §3.9), graded against after every change.
    pub(crate) baseline_tests: Vec<crate::store::records::CommandTests>,
    /// The private folder of the per-test reports (SPEC §3.9): one for all of the run's
    /// passes, made when the first check starts, removed with the session.
    pub(crate) tests: crate::roles::po::report::Private,
    pub(crate) current: Option<Attempt>,
    /// The previous attempt's brief, fed to the next prompt.
    pub(crate) brief: Option<FailureBrief>,
    /// Fingerprints of changes already tried, with the attempt that tried them.
    pub(crate) seen: Vec<(String, u32)>,
    /// The passing attempt's change and the tree it made (baseline + change).
    pub(crate) passed: Option<(tr::Plan, git2::Oid)>,
    pub(crate) fatal: Option<String>,
    /// A misconfiguration found by the first model request: the run is refused, unrecorded.
    pub(crate) refusal: Option<Error>,
    pub(crate) started: Instant,
}

impl Session<'_> {
    pub(crate) fn current(&mut self) -> &mut Attempt {
        self.current
            .as_mut()
            .expect("a node runs only inside an attempt")
    }

    pub(crate) fn fail(
        &mut self,
        stage: Stage,
        command: Option<&CmdResult>,
        text: &str,
    ) -> Outcome {
        let brief = self.brief(stage, command, text);
        // Why, in one line: the failing command and how it ended, or the refusal's first line.
        let why = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        self.ui.info(format!(
            "  {} {}: {}",
            ui::dim("✗"),
            stage.as_str(),
            ui::clip(why.trim(), 160)
        ));
        self.current().brief = Some(brief);
        Outcome::Failed(stage)
    }

    /// Writes the summary and moves the run ref forward.
    pub(crate) fn save(&mut self) -> Result<()> {
        write_json(&self.run_dir.join("run_summary.json"), &self.summary)?;
        if self.record {
            let message = store::run_message(&self.summary);
            self.writer.checkpoint(self.repo, &message)?;
        }
        Ok(())
    }

    pub(crate) fn checkpoint(&mut self) -> Outcome {
        match self.save() {
            Ok(()) => Outcome::Ok,
            Err(e) => {
                self.fatal = Some(e.message.clone());
                Outcome::Fatal(Stage::Exception)
            }
        }
    }

    /// Runs `f`, then checkpoints; a failed checkpoint ends the run.
    pub(crate) fn staged(&mut self, f: impl FnOnce(&mut Self) -> Outcome) -> Outcome {
        let outcome = f(self);
        crate::trace::mark("  node");
        let saved = self.checkpoint();
        crate::trace::mark("  checkpoint");
        match saved {
            Outcome::Ok => outcome,
            fatal => fatal,
        }
    }
}
