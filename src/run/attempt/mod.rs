//! The attempt loop (SPEC §2): SE → TR → PO over one place, as the graph drives it, with a
//! rollback after each failed attempt and the brief for the next.

mod apply;
mod audit;
mod brief;
mod bytecode;
mod open;
mod propose;
mod rollback;
pub(crate) mod session;
mod verify;

use crate::error::{Error, Result};
use crate::graph::{Nodes, Outcome};
use crate::run::artifacts::write_json;
use crate::store::records::{AttemptRecord, Stage};
use crate::ui;
use session::{Attempt, Session};
use std::path::PathBuf;
use std::time::Instant;

impl Nodes for Session<'_> {
    fn se(&mut self, attempt: u32) -> Outcome {
        let (dir, rel) = match self.se_start(attempt) {
            Ok(paths) => paths,
            Err(e) => {
                self.fatal = Some(e.message);
                return Outcome::Fatal(Stage::Exception);
            }
        };
        self.ui.info(format!(
            "{} {attempt}/{}",
            ui::bold("attempt"),
            self.summary.max_attempts
        ));
        self.show(attempt, "SE");
        self.staged(|s| s.propose(attempt, &dir, &rel))
    }

    fn tr(&mut self, attempt: u32) -> Outcome {
        self.show(attempt, "TR");
        self.staged(|s| s.apply(attempt))
    }

    fn po(&mut self, attempt: u32) -> Outcome {
        self.show(attempt, "PO");
        self.staged(|s| s.verify())
    }

    fn interrupt(&mut self, attempt: u32) -> Outcome {
        if self.current.is_none() {
            let _ = self.se_start(attempt);
        }
        // Stopped because another candidate spent the last of the budget.
        if self.budget.exhausted() && !crate::interrupt::requested() {
            // This attempt's own request was the one refused: its brief already says why.
            let said = (self.current.as_ref().and_then(|c| c.brief.as_ref()))
                .is_some_and(|b| b.stage == Stage::BudgetExhausted);
            if said {
                return Outcome::Failed(Stage::BudgetExhausted);
            }
            let why = match (self.budget.limit(), self.budget.max_cost()) {
                (Some(_), None) => "the --max-tokens budget ran out",
                (None, Some(_)) => "the --max-cost budget ran out",
                _ => "the run's budget (--max-tokens, --max-cost) ran out",
            };
            let _ = self.fail(Stage::BudgetExhausted, None, why);
            return Outcome::Failed(Stage::BudgetExhausted);
        }
        let _ = self.fail(
            Stage::Interrupted,
            None,
            "the run was interrupted (SIGINT/SIGTERM)",
        );
        Outcome::Failed(Stage::Interrupted)
    }

    fn end_attempt(&mut self, _attempt: u32, passed: bool, last: bool) -> Result<()> {
        let Some(mut current) = self.current.take() else {
            return Ok(());
        };
        if passed {
            if let Some(plan) = current.plan.take() {
                // An in-situ race's final check: what the user did meanwhile is theirs, never
                // a side effect to restore (SPEC §5.1).
                if let Some(expected) = self.winner_side_effects.take() {
                    let change: Vec<String> =
                        plan.outcomes.iter().map(|o| o.path.clone()).collect();
                    let changed = crate::run::race::guard::changed_during_final_check(
                        self, &change, &expected,
                    )?;
                    if !changed.is_empty() {
                        crate::run::race::guard::keep_users_work(self, &plan, &changed)?;
                        current.record.duration_seconds = current.started.elapsed().as_secs_f64();
                        self.summary.attempts.push(current.record);
                        return if last { Ok(()) } else { self.save() };
                    }
                }
                // The restore forgot the bytecode of the change's files and of what it put back.
                let (mut side, left) = self.restore_side_effects(&plan)?;
                // Read-only files the sandbox itself had to put back (SPEC §7.1).
                side.extend(current.record.sandbox_put_back());
                let restored: Vec<&str> = (side.iter())
                    .filter(|s| !left.contains(s))
                    .map(String::as_str)
                    .collect();
                if !restored.is_empty() {
                    self.ui.warn(format!(
                        "restored files the checks changed: {}",
                        restored.join(", ")
                    ));
                }
                if !left.is_empty() {
                    self.ui.warn(format!(
                        "the checks changed what this run shares with your work, left as it is: {}",
                        left.join(", ")
                    ));
                }
                self.summary.side_effects = side;
                let tree = current.tree.unwrap_or_else(|| self.baseline.tree_id());
                self.passed = Some((plan, tree));
                self.passed_answer = current.answer.take();
            }
        } else {
            self.current = Some(current);
            let rolled = self.rollback();
            current = self.current.take().expect("just put back");
            rolled?;
        }
        if let Some(brief) = &current.brief {
            write_json(&current.dir.join("failure_brief.json"), brief)?;
        }
        current.record.failure_brief = current.brief.clone();
        current.record.duration_seconds = current.started.elapsed().as_secs_f64();
        self.brief = current.brief.clone();
        self.summary.attempts.push(current.record);
        if last {
            // The run's final record is written next, by finish(); one ref update, not two.
            return Ok(());
        }
        self.save()
    }
}

impl Session<'_> {
    /// Opens an attempt's record and artifact folder.
    pub(crate) fn se_start(&mut self, attempt: u32) -> Result<(PathBuf, String)> {
        let (dir, rel) = self.attempt_files(attempt);
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::new(format!("cannot create {}: {e}", dir.display())))?;
        self.current = Some(Attempt {
            record: AttemptRecord {
                attempt_index: attempt,
                baseline_commit: self.baseline.id().to_string(),
                patch_path: String::new(),
                touched_files: Vec::new(),
                apply_ok: false,
                verify: Vec::new(),
                pass_to_pass: Vec::new(),
                fail_to_pass: Vec::new(),
                acceptance: Vec::new(),
                failure_brief: None,
                apply_method: None,
                usage: None,
                summary: None,
                tree_commit: None,
                repeat_of: None,
                duration_seconds: 0.0,
                dropped_params: Vec::new(),
                api_switch: None,
                served_model: None,
                reasoning_path: None,
                weakening: Vec::new(),
                cost: None,
                requested_utc: Vec::new(),
                tests: None,
            },
            dir: dir.clone(),
            rel: rel.clone(),
            proposal: None,
            plan: None,
            tree: None,
            applied: false,
            brief: None,
            agent_sandbox: None,
            started: Instant::now(),
            answer: None,
        });
        Ok((dir, rel))
    }

    pub(crate) fn attempt_files(&self, attempt: u32) -> (PathBuf, String) {
        let rel = format!("attempt_{attempt}");
        (self.run_dir.join(&rel), rel)
    }

    /// Where the running command's process group is noted for `recover`; a race's
    /// candidates each have their own (SPEC §7).
    pub(crate) fn pgid_file(&self) -> PathBuf {
        crate::run::orphans::pgid_file(&self.plan.factory_dir, &self.summary.run_id, self.candidate)
    }

    /// Puts a race candidate's stage on its board line.
    pub(crate) fn show(&self, attempt: u32, stage: &str) {
        if let (Some(board), Some(i)) = (self.board, self.candidate) {
            board.set(
                i,
                &format!("attempt {attempt}/{} {stage}", self.summary.max_attempts),
                false,
            );
        }
    }
}
