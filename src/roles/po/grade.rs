//! Grading per test (SPEC §3.9): a command passes only if it exits 0 and its report shows no
//! red test; against the baseline's report, every test that passed there must pass again
//! (missing, skipped or xfailed is a regression) and every red test of a `fail_to_pass`
//! command must pass. A report is no more trusted than an exit code: both must agree.

use crate::store::records::{CmdResult, CommandTests, Stage, TestCounts, TestResult, TestStatus};

/// How many failing tests a brief names before "and N more".
const BRIEF_TESTS: usize = 20;
/// The room the test list may take in a brief.
const BRIEF_TESTS_CHARS: usize = 1400;

/// The tests a work order names (SPEC §3.9); empty lists: none named.
#[derive(Debug, Clone, Copy, Default)]
pub struct Named<'a> {
    pub fail_to_pass: &'a [String],
    pub pass_to_pass: &'a [String],
}

impl Named<'_> {
    pub fn is_empty(&self) -> bool {
        self.fail_to_pass.is_empty() && self.pass_to_pass.is_empty()
    }

    fn all(&self) -> impl Iterator<Item = &String> {
        self.fail_to_pass.iter().chain(self.pass_to_pass)
    }

    /// Whether a report holds a named test: its command is then graded by them only.
    pub fn judges(&self, report: Option<&CommandTests>) -> bool {
        report.is_some_and(|r| {
            r.tests
                .iter()
                .any(|t| self.all().any(|p| matches(p, &t.id)))
        })
    }
}

/// Whether test `id` is named by `pattern`: equal, or a prefix of it when `pattern` ends in `*`.
pub fn matches(pattern: &str, id: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => id.starts_with(prefix),
        None => pattern == id,
    }
}

/// The baseline's red tests a contract relies on, for the first prompt: named
/// `fail_to_pass` tests, and the tests of `fail_to_pass` commands; each id once.
pub fn red_on_baseline<'a>(baseline: &'a [CommandTests], named: &Named<'_>) -> Vec<&'a TestResult> {
    let mut seen = std::collections::HashSet::new();
    (baseline.iter())
        .flat_map(|c| c.red().map(move |t| (c.kind.as_str(), t)))
        .filter(|(kind, t)| {
            *kind == "fail_to_pass" || named.fail_to_pass.iter().any(|p| matches(p, &t.id))
        })
        .map(|(_, t)| t)
        .filter(|t| seen.insert(t.id.as_str()))
        .collect()
}

/// Judges a command that reports named tests (SPEC §3.9): every named test and every test
/// that passed on the baseline must pass; tests red on the baseline and not named may stay
/// red, and the exit code does not count (a suite with known failures can be the judge).
pub fn judge_named(cmd: &CmdResult, named: &Named<'_>, flaky_fails: bool) -> Judgement {
    let mut j = Judgement::default();
    for t in cmd.tests.iter().flat_map(|r| r.tests.iter()) {
        let passing = t.status == TestStatus::Passed && !(t.flaky && flaky_fails);
        if passing {
            continue;
        }
        let was_green = t.baseline == Some(TestStatus::Passed);
        let is_named = named.all().any(|p| matches(p, &t.id));
        if was_green {
            j.regression.push((t.id.clone(), t.status));
        } else if is_named {
            j.unmet.push((t.id.clone(), t.status));
        } else {
            continue;
        }
        j.red
            .push((t.id.clone(), t.message.clone().unwrap_or_default()));
    }
    j.ok = j.regression.is_empty() && j.unmet.is_empty();
    j
}

/// The baseline's report of the same command in the same group, if it had one.
pub fn find<'a>(
    baseline: &'a [CommandTests],
    kind: &str,
    argv: &[String],
) -> Option<&'a CommandTests> {
    baseline
        .iter()
        .find(|b| b.kind == kind && b.command == argv)
}

/// Joins the baseline into a command's report: each test's baseline status, and every test
/// the baseline named that this report lost, as `missing`. A command whose whole report is
/// gone lost every test.
pub fn join(cmd: &mut CmdResult, base: Option<&CommandTests>) {
    let Some(base) = base else {
        return;
    };
    let report = cmd.tests.get_or_insert_with(|| CommandTests {
        kind: base.kind.clone(),
        command: base.command.clone(),
        source: base.source.clone(),
        tests: Vec::new(),
        rerun: false,
    });
    let before: std::collections::HashMap<&str, TestStatus> = base
        .tests
        .iter()
        .map(|t| (t.id.as_str(), t.status))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for t in &mut report.tests {
        t.baseline = before.get(t.id.as_str()).copied();
        seen.insert(t.id.clone());
    }
    for b in &base.tests {
        if !seen.contains(&b.id) {
            report.tests.push(TestResult {
                id: b.id.clone(),
                status: TestStatus::Missing,
                duration_seconds: None,
                message: Some("not reported after the change".into()),
                excerpt: None,
                flaky: false,
                baseline: Some(b.status),
            });
        }
    }
}

/// What grading found in one command.
#[derive(Debug, Default)]
pub struct Judgement {
    pub ok: bool,
    /// Tests that passed on the baseline and do not pass now, with what they are now.
    pub regression: Vec<(String, TestStatus)>,
    /// Red tests of a `fail_to_pass` command's baseline that are still not passing.
    pub unmet: Vec<(String, TestStatus)>,
    /// Red tests now, with their message.
    pub red: Vec<(String, String)>,
}

impl Judgement {
    /// The stage a failure ends the attempt with: a lost baseline test is a regression
    /// whichever command holds it.
    pub fn stage(&self, own: Stage) -> Stage {
        if self.regression.is_empty() {
            own
        } else {
            Stage::Regression
        }
    }

    /// A command whose only failures are tests that passed on the baseline is run once more
    /// (flakes once).
    pub fn wants_rerun(&self, cmd: &CmdResult) -> bool {
        !self.ok
            && !cmd.timed_out
            && !cmd.interrupted
            && cmd.spawn_error.is_none()
            && !self.red.is_empty()
            && self.unmet.is_empty()
            && self.regression.len() == self.red.len()
            && self.regression.iter().all(|(_, s)| s.is_red())
    }
}

/// Judges one command after `join`. `fail_to_pass`: its baseline-red tests must pass.
/// `flaky_fails`: `factory.flaky=fail`, a test that passed only when re-run still fails.
pub fn judge(cmd: &CmdResult, fail_to_pass: bool, flaky_fails: bool) -> Judgement {
    let exit_ok = cmd.succeeded();
    let mut j = Judgement::default();
    if let Some(report) = &cmd.tests {
        for t in &report.tests {
            let passing = t.status == TestStatus::Passed && !(t.flaky && flaky_fails);
            if t.status.is_red() || (t.flaky && flaky_fails) {
                j.red
                    .push((t.id.clone(), t.message.clone().unwrap_or_default()));
            }
            match t.baseline {
                Some(TestStatus::Passed) if !passing => {
                    j.regression.push((t.id.clone(), t.status));
                }
                Some(b) if fail_to_pass && b.is_red() && !passing => {
                    j.unmet.push((t.id.clone(), t.status));
                }
                _ => {}
            }
        }
    }
    j.ok = exit_ok && j.red.is_empty() && j.regression.is_empty() && j.unmet.is_empty();
    j
}

/// The command run again: its own result, with the first run's report in which the tests
/// that failed then and pass now are marked flaky.
pub fn merge_rerun(first: CmdResult, mut again: CmdResult) -> CmdResult {
    let Some(mut report) = first.tests else {
        return again;
    };
    let now: std::collections::HashMap<&str, TestStatus> = again
        .tests
        .iter()
        .flat_map(|r| r.tests.iter().map(|t| (t.id.as_str(), t.status)))
        .collect();
    for t in &mut report.tests {
        if t.status.is_red()
            && t.baseline == Some(TestStatus::Passed)
            && now.get(t.id.as_str()) == Some(&TestStatus::Passed)
        {
            t.status = TestStatus::Passed;
            t.flaky = true;
        }
    }
    report.rerun = true;
    again.tests = Some(report);
    again
}

/// What the brief says first: the lost tests, then the failing ones with their messages.
pub fn describe(j: &Judgement) -> String {
    let mut s = String::new();
    if !j.regression.is_empty() {
        s.push_str(&format!(
            "regression: {} test(s) that passed on the baseline no longer pass:\n",
            j.regression.len()
        ));
        list(
            &mut s,
            j.regression
                .iter()
                .map(|(id, st)| format!("{id} — {}", st.as_str())),
        );
    }
    if !j.unmet.is_empty() {
        s.push_str(&format!(
            "{} red test(s) of the contract still do not pass:\n",
            j.unmet.len()
        ));
        list(
            &mut s,
            j.unmet
                .iter()
                .map(|(id, st)| format!("{id} — {}", st.as_str())),
        );
    }
    let extra: Vec<&(String, String)> = (j.red.iter())
        .filter(|(id, _)| !j.regression.iter().any(|(r, _)| r == id))
        .collect();
    if !extra.is_empty() {
        s.push_str(&format!("failing tests ({}):\n", extra.len()));
        list(
            &mut s,
            extra.iter().map(|(id, m)| {
                if m.is_empty() {
                    id.clone()
                } else {
                    format!("{id}: {m}")
                }
            }),
        );
    }
    s
}

fn list(out: &mut String, items: impl ExactSizeIterator<Item = String>) {
    let total = items.len();
    let budget = out.len() + BRIEF_TESTS_CHARS / 2;
    for (n, item) in items.enumerate() {
        if n >= BRIEF_TESTS || out.len() > budget {
            out.push_str(&format!("  … and {} more\n", total - n));
            return;
        }
        let item: String = item.chars().take(200).collect();
        out.push_str(&format!("  {item}\n"));
    }
}

/// The counts of `run_summary.json` over the commands an attempt ran; `None` when none of
/// them reported tests.
pub fn counts<'a>(
    commands: impl Iterator<Item = &'a CmdResult>,
    named: &Named<'_>,
) -> Option<TestCounts> {
    let mut c = TestCounts::default();
    let mut any = false;
    for cmd in commands {
        let Some(report) = &cmd.tests else {
            continue;
        };
        any = true;
        let f2p = report.kind == "fail_to_pass";
        for t in &report.tests {
            match t.status {
                TestStatus::Passed | TestStatus::Xpassed => c.passed += 1,
                TestStatus::Failed | TestStatus::Error | TestStatus::Missing => c.failed += 1,
                TestStatus::Skipped | TestStatus::Xfailed => c.skipped += 1,
            }
            c.flaky += u32::from(t.flaky);
            let passing = t.status == TestStatus::Passed;
            let named_red = named.fail_to_pass.iter().any(|p| matches(p, &t.id));
            match t.baseline {
                Some(TestStatus::Passed) => {
                    c.pass_to_pass_total += 1;
                    c.pass_to_pass_kept += u32::from(passing);
                }
                Some(b) if (f2p || named_red) && b.is_red() => {
                    c.fail_to_pass_total += 1;
                    c.fail_to_pass_met += u32::from(passing);
                }
                _ => {}
            }
        }
    }
    any.then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: &str, status: TestStatus) -> TestResult {
        TestResult {
            id: id.into(),
            status,
            duration_seconds: None,
            message: None,
            excerpt: None,
            flaky: false,
            baseline: None,
        }
    }

    fn cmd(exit: i32, tests: Option<Vec<TestResult>>) -> CmdResult {
        let mut c = CmdResult {
            exit_code: Some(exit),
            ..CmdResult::new(vec!["pytest".into()])
        };
        c.tests = tests.map(|tests| CommandTests {
            kind: "verify".into(),
            command: vec!["pytest".into()],
            source: "pytest".into(),
            tests,
            rerun: false,
        });
        c
    }

    #[test]
    fn a_report_saying_pass_does_not_beat_a_failing_exit() {
        let c = cmd(1, Some(vec![t("a", TestStatus::Passed)]));
        assert!(!judge(&c, false, false).ok);
        let c = cmd(0, Some(vec![t("a", TestStatus::Failed)]));
        assert!(!judge(&c, false, false).ok);
    }

    #[test]
    fn lost_skipped_or_xfailed_baseline_tests_are_regressions() {
        let base = cmd(
            0,
            Some(vec![
                t("a", TestStatus::Passed),
                t("b", TestStatus::Passed),
                t("c", TestStatus::Passed),
                t("d", TestStatus::Skipped),
            ]),
        )
        .tests
        .unwrap_or_else(|| unreachable!());
        let mut now = cmd(
            0,
            Some(vec![
                t("b", TestStatus::Skipped),
                t("c", TestStatus::Xfailed),
            ]),
        );
        join(&mut now, Some(&base));
        let j = judge(&now, false, false);
        assert!(!j.ok);
        assert_eq!(j.stage(Stage::VerifyFailed), Stage::Regression);
        let lost: Vec<&str> = j.regression.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(lost, ["b", "c", "a"]);
    }
}
