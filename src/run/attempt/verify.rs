//! PO: the baseline check before any model call (SPEC §3.8) and an attempt's checks.

use crate::error::Result;
use crate::graph::Outcome;
use crate::roles::po::pycache::PyCache;
use crate::roles::po::verify::{self, PoRun};
use crate::roles::po::{baseline, cache, grade};
use crate::roles::se::prompt;
use crate::run::artifacts::write_json;
use crate::run::attempt::brief::{command_excerpt, denied_at_root, with_note, with_tests_first};
use crate::run::attempt::session::Session;
use crate::store::records::{BaselineCheck, CmdResult, Stage, TestsRecord};

impl Session<'_> {
    /// The tests the work order names (SPEC §3.9).
    fn named(&self) -> grade::Named<'_> {
        let order = &self.plan.wo.order;
        grade::Named {
            fail_to_pass: &order.fail_to_pass_tests,
            pass_to_pass: &order.pass_to_pass_tests,
        }
    }

    /// What the baseline check found red, for attempt `attempt`'s prompt: the first one
    /// only (SPEC §3.8), naming the red commands and the red tests the contract relies on.
    pub(crate) fn red_for(&self, attempt: u32) -> prompt::Red<'_> {
        if attempt != 1 {
            return prompt::Red::default();
        }
        prompt::Red {
            commands: self.red.iter().collect(),
            tests: grade::red_on_baseline(&self.baseline_tests, &self.named()),
        }
    }

    /// The baseline check of SPEC §3.8, in the run's tree before any model call: `Ok(true)`
    /// when every `fail_to_pass` command passes already; refusals come back as `Err` with the
    /// tree as it was. What the commands leave behind is removed as after an attempt.
    pub(crate) fn baseline_check(&mut self) -> Result<bool> {
        self.journal_stage("baseline_check", None)?;
        let prefix = self.check_cache(&[])?;
        let log_dir = self.run_dir.join("baseline");
        std::fs::create_dir_all(&log_dir)?;
        self.tests.fresh_pass();
        let po = PoRun {
            root: &self.root,
            timeout: self.plan.timeout,
            env_remove: &self.plan.env_remove,
            env_set: PyCache::env(&prefix, &self.root),
            log_dir,
            log_rel: "baseline".to_string(),
            sandbox: (self.sandbox.clone()).map(|s| s.with_writable(prefix.clone())),
            pgid_file: Some(self.pgid_file()),
            tests: Some(&self.tests),
        };
        let contract = baseline::Contract {
            repo: self.repo,
            tree: self.baseline.tree_id(),
            verify: &self.verify_cmds,
            pass_to_pass: &self.pass_to_pass,
            fail_to_pass: &self.fail_to_pass,
            acceptance: &self.acceptance,
            named: self.named(),
        };
        let ui = self.ui;
        let started = self.bytecode_mark();
        let checked = baseline::check(&contract, &po, |kind, argv| {
            let shown = shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_default();
            ui.progress(format!("  baseline {kind}: {shown}"))
        });
        self.drop_checks_bytecode(started);
        // Logs are kept only for commands that ran (a cached check leaves no folder).
        let _ = std::fs::remove_dir(self.run_dir.join("baseline"));
        if checked.as_ref().map_or(true, |r| r.ran) {
            self.rollback()?;
        }
        let report = checked?;
        let satisfied = report.finding == baseline::Finding::Satisfied;
        if !report.tests.is_empty() {
            let _ = write_json(&self.run_dir.join("baseline_tests.json"), &report.tests);
        }
        self.baseline_tests = report.tests.clone();
        self.red = report.red().into_iter().cloned().collect();
        let cached = report.results.iter().filter(|r| r.cached).count();
        let red_tests = grade::red_on_baseline(&report.tests, &self.named()).len();
        self.ui.info(format!(
            "  baseline check: {} red{}, {} command(s){}",
            self.red.len(),
            match red_tests {
                0 => String::new(),
                n => format!(" ({n} red test(s))"),
            },
            report.results.len(),
            if cached > 0 {
                format!(", {cached} from the cache")
            } else {
                String::new()
            }
        ));
        self.summary.baseline_check = Some(BaselineCheck {
            result: if satisfied {
                Stage::AlreadySatisfied.as_str()
            } else {
                "red"
            }
            .to_string(),
            commands: report.results,
        });
        Ok(satisfied)
    }

    pub(crate) fn verify(&mut self) -> Outcome {
        let (dir, rel) = {
            let a = self.current();
            (a.dir.clone(), a.rel.clone())
        };
        // No check may run bytecode of another version of a changed file; sandboxed checks
        // see the cache through the run's view of it, refreshed for each attempt.
        let changed: Vec<String> = (self.current().plan.iter())
            .flat_map(|p| p.outcomes.iter().map(|o| o.path.clone()))
            .collect();
        let changed: Vec<&str> = changed.iter().map(String::as_str).collect();
        let prefix = match self.check_cache(&changed) {
            Ok(cache) => cache,
            Err(e) => {
                self.fatal = Some(format!("cannot create a scratch folder: {e}"));
                return Outcome::Fatal(Stage::Exception);
            }
        };
        self.tests.fresh_pass();
        let po = PoRun {
            root: &self.root,
            timeout: self.plan.timeout,
            env_remove: &self.plan.env_remove,
            env_set: PyCache::env(&prefix, &self.root),
            log_dir: dir.clone(),
            log_rel: rel,
            sandbox: (self.sandbox.clone()).map(|s| s.with_writable(prefix.clone())),
            pgid_file: Some(self.pgid_file()),
            tests: Some(&self.tests),
        };
        let ui = self.ui;
        let checks = verify::Checks {
            verify: &self.verify_cmds,
            pass_to_pass: &self.pass_to_pass,
            fail_to_pass: &self.fail_to_pass,
            acceptance: &self.acceptance,
            baseline: &self.baseline_tests,
            flaky_fails: verify::flaky_fails(self.repo),
            named: self.named(),
        };
        let started = self.bytecode_mark();
        let outcome = po.run_checks(&checks, |kind, argv| {
            let shown = shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_default();
            ui.progress(format!("  PO {kind}: {shown}"))
        });
        self.drop_checks_bytecode(started);
        if let Some(view) = &self.pyview {
            self.warm_pycache(Some(view));
        }
        let _ = write_json(&dir.join("verify_result.json"), &outcome.verify);
        for (name, results) in [
            ("pass_to_pass_result.json", &outcome.pass_to_pass),
            ("fail_to_pass_result.json", &outcome.fail_to_pass),
        ] {
            if !results.is_empty() {
                let _ = write_json(&dir.join(name), results);
            }
        }
        let _ = write_json(&dir.join("acceptance_result.json"), &outcome.acceptance);
        let failing = outcome.failing_command().cloned();
        let record = TestsRecord {
            commands: (outcome.verify.iter())
                .chain(&outcome.pass_to_pass)
                .chain(&outcome.fail_to_pass)
                .chain(&outcome.acceptance)
                .filter_map(|c| c.tests.clone())
                .collect(),
            weakening: self.current().record.weakening.clone(),
        };
        if !record.commands.is_empty() || !record.weakening.is_empty() {
            let _ = write_json(&dir.join("tests.json"), &record);
        }
        let flaky: Vec<cache::FlakyTest> = (record.commands.iter())
            .flat_map(|c| {
                let command =
                    shlex::try_join(c.command.iter().map(String::as_str)).unwrap_or_default();
                (c.tests.iter().filter(|t| t.flaky)).map(move |t| cache::FlakyTest {
                    id: t.id.clone(),
                    command: command.clone(),
                })
            })
            .collect();
        if let Err(e) = cache::remember_flaky(self.repo, &flaky) {
            self.ui
                .warn(format!("cannot remember the flaky tests: {e}"));
        }
        let counts = grade::counts(
            (outcome.verify.iter())
                .chain(&outcome.pass_to_pass)
                .chain(&outcome.fail_to_pass)
                .chain(&outcome.acceptance),
            &self.named(),
        );
        {
            let a = self.current();
            a.record.tests = counts;
            a.record.verify = outcome.verify;
            a.record.pass_to_pass = outcome.pass_to_pass;
            a.record.fail_to_pass = outcome.fail_to_pass;
            a.record.acceptance = outcome.acceptance;
        }
        match (outcome.failed, failing) {
            (Some(stage), Some(cmd)) => {
                let mut text = with_tests_first(outcome.why.as_deref(), &command_excerpt(&cmd));
                if self.failed_at_closed_root(&cmd) {
                    text = with_note(&text, crate::sandbox::landlock::ROOT_CLOSED);
                }
                self.fail(stage, Some(&cmd), &text)
            }
            _ => Outcome::Ok,
        }
    }

    /// Whether `cmd` failed on a permission error at the root of a tree whose root Landlock
    /// keeps closed to new entries (SPEC §7.1): its brief then says why, and what has no such
    /// limit.
    fn failed_at_closed_root(&self, cmd: &CmdResult) -> bool {
        let Some(sandbox) = &self.sandbox else {
            return false;
        };
        sandbox.backend == crate::sandbox::Backend::Landlock
            && cmd.sandbox.as_deref() == Some(sandbox.backend.name())
            && denied_at_root(&[&cmd.stderr_trunc, &cmd.stdout_trunc], &self.root)
            && crate::sandbox::landlock::root_closed(&sandbox.policy, &self.root)
    }
}
