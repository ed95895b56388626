//! Opening the run's own attempt loop over its place: the checks read in the place's tree,
//! the record opened, what putting the tree back needs captured, the baseline checked.

use crate::budget::Budget;
use crate::error::{Error, Result};
use crate::graph::Ending;
use crate::roles::po::pycache::PyCache;
use crate::roles::po::verify;
use crate::roles::se::provider::Provider;
use crate::run::artifacts::write_json;
use crate::run::attempt::session::Session;
use crate::run::place::Place;
use crate::run::plan::Plan;
use crate::store::records::{Stage, Verdict};
use crate::store::RunWriter;
use crate::ui::{self, Ui};
use std::time::Instant;

impl<'a> Session<'a> {
    /// The run's own session: it owns the run's record and delivers its PASS.
    pub(crate) fn open(
        place: &'a Place<'_>,
        plan: &'a Plan,
        provider: Box<dyn Provider>,
        budget: &'a Budget,
        ui: &'a Ui,
    ) -> Result<Self> {
        let verify_cmds =
            verify::global_commands(&place.root, &plan.configured_verify).map_err(|e| {
                Error::new(e)
                    .hint("fix the value with git config --replace-all factory.verify 'CMD'")
            })?;
        let summary = plan.opening_summary();
        write_json(&place.run_dir.join("work_order.json"), &plan.wo.raw)?;
        crate::trace::mark("staging folder");
        let journal = place.capture(plan)?;
        let sandbox = plan.sandbox.then(|| place.sandbox(&journal)).transpose()?;
        if let Some(sandbox) = &sandbox {
            use crate::sandbox::{landlock, Backend};
            if sandbox.backend == Backend::Landlock
                && landlock::root_closed(&sandbox.policy, &place.root)
            {
                ui.info(format!("note: {}", landlock::ROOT_CLOSED));
            }
        }
        let repo = place.repo();
        let session = Session {
            record: true,
            budget,
            board: None,
            candidate: None,
            winner_side_effects: None,
            passed_answer: None,
            pycache: PyCache::in_factory_dir(&plan.factory_dir),
            pyview: None,
            journal,
            preflight: place.preflight.as_ref(),
            reserve: Some(&place.reserve),
            persist_journal: !plan.worktree,
            unrestored: false,
            sandbox,
            delivery: plan.delivery.clone(),
            repo,
            root: place.root.clone(),
            ui,
            plan,
            baseline: repo.find_commit(plan.baseline)?,
            provider,
            priced: Some(plan.priced.clone()),
            audited: plan.audited,
            run_dir: place.run_dir.clone(),
            writer: RunWriter::new(&plan.run_id, &place.run_dir, plan.previous_commit),
            summary,
            acceptance: plan.wo.acceptance_argv(),
            pass_to_pass: plan.wo.pass_to_pass_argv(),
            fail_to_pass: plan.wo.fail_to_pass_argv(),
            verify_cmds,
            red: Vec::new(),
            baseline_tests: Vec::new(),
            tests: crate::roles::po::report::Private::for_run(
                crate::config::Config::of(repo).multi(crate::config::TEST_REPORT),
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
        crate::trace::mark("session ready");
        // The bytecode cache is filled from the baseline's own files first (SPEC §3.7).
        session.warm_pycache(None);
        Ok(session)
    }

    /// The baseline check (SPEC §3.8) when the plan asks for it: `Ok(true)` when the
    /// contract is satisfied already. It runs before the first record.
    pub(crate) fn check_baseline_if_asked(&mut self) -> Result<bool> {
        let satisfied = if self.plan.baseline_check {
            self.baseline_check()?
        } else {
            false
        };
        crate::trace::mark("baseline check");
        Ok(satisfied)
    }

    /// The run's first checkpoint, and its opening line.
    pub(crate) fn announce(&mut self) -> Result<()> {
        self.save()?;
        crate::trace::mark("first checkpoint");
        crate::crash::point("after_preflight");
        let plan = self.plan;
        self.ui.info(format!(
            "{} run {}: {} ({} attempts at most{}{})",
            ui::bold("factory"),
            plan.run_id,
            plan.wo.order.title,
            plan.max_attempts,
            (plan.race.as_ref())
                .map(|r| format!(" for each of {} candidates", r.candidates))
                .unwrap_or_default(),
            if plan.worktree { ", in a worktree" } else { "" }
        ));
        Ok(())
    }

    /// Nothing to change: every `fail_to_pass` command passes on the baseline.
    pub(crate) fn already_satisfied(&self) -> Ending {
        self.ui.info(format!(
            "  {} every fail_to_pass command passes on the baseline: nothing to change",
            ui::dim("✓")
        ));
        Ending {
            verdict: Verdict::Pass,
            stage: Stage::AlreadySatisfied.as_str().to_string(),
            attempts: 0,
        }
    }

    /// The loop could not finish (`Err`): whatever is in the tree is rolled back and the run
    /// ends ERROR, the cause kept for the record.
    pub(crate) fn ended(&mut self, driven: Result<Ending>) -> Ending {
        match driven {
            Ok(ending) => ending,
            Err(e) => {
                let mut text = e.message.clone();
                if let Err(r) = self.rollback() {
                    if r.message != e.message {
                        text = format!("{text}; {}", r.message);
                    }
                }
                self.fatal = Some(text);
                Ending {
                    verdict: Verdict::Error,
                    stage: Stage::Exception.as_str().to_string(),
                    attempts: self.summary.attempts.len() as u32,
                }
            }
        }
    }

    /// Gives the session up, handing back what its place still needs: the journal, and
    /// whether the last restore left paths it could not put back. No command of it runs any
    /// more, so the file its commands noted their process groups in goes.
    pub(crate) fn close(self) -> (crate::journal::Journal, bool) {
        let _ = std::fs::remove_file(self.pgid_file());
        (self.journal, self.unrestored)
    }
}
