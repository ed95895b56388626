//! The baseline check (SPEC §3.8): before any model is paid, the contract is run on the
//! unchanged tree. Tests that already pass prove nothing, and a broken baseline would fail
//! every attempt whatever the model does, so both are refused up front; an order whose red
//! tests are all green already needs no change at all.
//!
//! Results are cached by tree id and command list in `refs/notes/factory-verify` (shared with
//! `git factory verify`), so a second run on the same baseline runs nothing.

use super::cache;
use super::exec::tail_chars;
use super::grade::{self, Named};
use super::verify::{Phase, PoRun};
use crate::error::{Error, Result};
use crate::store::records::{BaselineResult, CmdResult, CommandTests};
use git2::{Oid, Repository};

/// The bound on each command's excerpt (a failure brief's).
const EXCERPT_CHARS: usize = 2000;

/// What the check found.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// Every `fail_to_pass` command fails (or there are none): the run proceeds.
    Red,
    /// Every `fail_to_pass` command passes already: nothing to change.
    Satisfied,
}

/// The commands' results (in the order they ran or were read) and the finding.
#[derive(Debug, Clone)]
pub struct Report {
    pub results: Vec<BaselineResult>,
    pub finding: Finding,
    /// Whether any command actually ran (the tree may then need its side effects removed).
    pub ran: bool,
    /// The per-test reports of the commands that had one (SPEC §3.9): what every later
    /// report of the same command is graded against.
    pub tests: Vec<CommandTests>,
}

impl Report {
    /// The red `fail_to_pass` results, for the first prompt.
    pub fn red(&self) -> Vec<&BaselineResult> {
        self.results
            .iter()
            .filter(|r| r.kind == Phase::FailToPass.as_str() && !r.passed)
            .collect()
    }
}

/// The contract to check on one baseline tree.
pub struct Contract<'a> {
    pub repo: &'a Repository,
    /// The baseline's tree id: the cache key.
    pub tree: Oid,
    pub verify: &'a [Vec<String>],
    pub pass_to_pass: &'a [Vec<String>],
    pub fail_to_pass: &'a [Vec<String>],
    /// Run on the baseline only when the order names tests (SPEC §3.9).
    pub acceptance: &'a [Vec<String>],
    pub named: Named<'a>,
}

fn excerpt(cmd: &CmdResult) -> String {
    if cmd.succeeded() {
        return String::new();
    }
    let mut out = String::new();
    for part in [&cmd.stdout_trunc, &cmd.stderr_trunc] {
        if !part.trim().is_empty() {
            out.push_str(part.trim_end());
            out.push('\n');
        }
    }
    tail_chars(out.trim_end(), EXCERPT_CHARS)
}

/// A command stopped by SIGINT/SIGTERM says nothing about the baseline: the run ends (130).
fn interrupted(cmd: &CmdResult) -> Result<()> {
    if cmd.interrupted {
        return Err(Error::new(
            "the run was interrupted during the baseline check; nothing was recorded",
        )
        .exit(crate::error::Exit::Interrupted));
    }
    Ok(())
}

fn result(phase: Phase, cmd: &CmdResult) -> BaselineResult {
    BaselineResult {
        kind: phase.as_str().to_string(),
        command: cmd.command.clone(),
        passed: cmd.succeeded(),
        exit_code: cmd.exit_code,
        outcome: cmd.outcome(),
        excerpt: excerpt(cmd),
        duration_seconds: cmd.duration_seconds,
        cached: false,
    }
}

/// A command the cache says passed.
fn cached_pass(phase: Phase, argv: &[String]) -> BaselineResult {
    BaselineResult {
        kind: phase.as_str().to_string(),
        command: argv.to_vec(),
        passed: true,
        exit_code: Some(0),
        outcome: "exit 0".to_string(),
        excerpt: String::new(),
        duration_seconds: 0.0,
        cached: true,
    }
}

/// The refusal for a baseline whose verification or `pass_to_pass` fails.
fn broken(r: &BaselineResult) -> Error {
    let what = if r.kind == Phase::Verify.as_str() {
        "global verification"
    } else {
        "pass_to_pass"
    };
    let mut e = Error::new(format!(
        "the baseline is broken: `{}` ({what}) → {} before any change",
        r.display(),
        r.outcome
    ));
    for line in r
        .excerpt
        .lines()
        .rev()
        .take(20)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        e = e.detail(format!("  │ {line}"));
    }
    if r.kind == Phase::Verify.as_str() {
        // The common case: verification is the whole test suite, red tests included.
        return e.hint(
            "fix the baseline first, or, if verification runs the whole test suite (and so the \
             fail_to_pass tests), point git config factory.verify at checks that pass before the \
             change (or run with --no-baseline-check); nothing was recorded",
        );
    }
    e.hint(
        "fix the baseline first: every pass_to_pass command must pass before the model is asked \
         (or run with --no-baseline-check); nothing was recorded",
    )
}

/// Runs (or reads from the cache) verification, `pass_to_pass` and `fail_to_pass` on the
/// baseline and judges them; then, when the run proceeds, the acceptance commands for their
/// per-test reports. Refusals (exit 2) come back as `Err`: a broken baseline, or
/// `fail_to_pass` commands that pass already while others fail.
pub fn check<G>(
    contract: &Contract<'_>,
    po: &PoRun<'_>,
    mut on_command: impl FnMut(&str, &[String]) -> G,
) -> Result<Report> {
    if !contract.named.is_empty() {
        return check_named(contract, po, on_command);
    }
    let mut results: Vec<BaselineResult> = Vec::new();
    let mut tests: Vec<CommandTests> = Vec::new();
    let mut ran = false;
    // Lists that must pass: a cached pass (with the tests it reported) stands for all of
    // them; only passes are cached.
    for (phase, commands) in [
        (Phase::Verify, contract.verify),
        (Phase::PassToPass, contract.pass_to_pass),
    ] {
        if commands.is_empty() {
            continue;
        }
        if cache::passed(contract.repo, contract.tree, commands) {
            if let Some(cached) = cached_tests(contract.repo, contract.tree, commands) {
                results.extend(commands.iter().map(|argv| cached_pass(phase, argv)));
                tests.extend(cached);
                continue;
            }
        }
        let mut reported = Vec::new();
        for (i, argv) in commands.iter().enumerate() {
            let shown = on_command(phase.as_str(), argv);
            let cmd = po.run_one(phase.as_str(), i, argv);
            drop(shown);
            ran = true;
            interrupted(&cmd)?;
            let r = result(phase, &cmd);
            if !r.passed {
                return Err(broken(&r));
            }
            if let Some(red) = cmd.tests.as_ref().and_then(|t| t.red().next()) {
                // Exit 0 with a failing test is no passing baseline either.
                return Err(broken(&BaselineResult {
                    passed: false,
                    outcome: format!("exit 0, but test {} {}", red.id, red.status.as_str()),
                    ..r
                }));
            }
            reported.extend(cmd.tests);
            results.push(r);
        }
        cache::record_pass(contract.repo, contract.tree, commands)?;
        record_tests(contract.repo, contract.tree, commands, &reported)?;
        tests.extend(reported);
    }
    // The red tests: every one runs, and every result is cached (failing is the answer).
    if !contract.fail_to_pass.is_empty() {
        let cached: Option<Vec<BaselineResult>> =
            cache::results(contract.repo, contract.tree, contract.fail_to_pass)
                .filter(|c: &Vec<BaselineResult>| same_commands(c, contract.fail_to_pass));
        let red = red_results(contract, po, &mut on_command, &mut ran, &mut tests, cached)?;
        results.extend(red);
    }
    let green: Vec<&BaselineResult> = results
        .iter()
        .filter(|r| r.kind == Phase::FailToPass.as_str() && r.passed)
        .collect();
    let finding = if contract.fail_to_pass.is_empty() || green.is_empty() {
        Finding::Red
    } else if green.len() == contract.fail_to_pass.len() {
        Finding::Satisfied
    } else {
        let mut e = Error::new(format!(
            "{} of the {} fail_to_pass commands already pass{} on the baseline: not a failing test",
            green.len(),
            contract.fail_to_pass.len(),
            if green.len() == 1 { "es" } else { "" }
        ));
        for r in &green {
            e = e.detail(format!("  passes already: {}", r.display()));
        }
        return Err(e.hint(
            "a fail_to_pass command must fail before the change: move these to pass_to_pass, \
             or fix the command; nothing was recorded",
        ));
    };
    if finding == Finding::Red {
        let (reported, ran_them) = acceptance_reports(contract, po, &mut on_command, &mut results)?;
        ran |= ran_them;
        tests.extend(reported);
    }
    Ok(Report {
        results,
        finding,
        ran,
        tests,
    })
}

/// The acceptance commands on the baseline, for their per-test reports only (SPEC §3.9): a
/// test that passed there must pass again, whichever command reports it — without them an
/// acceptance command that runs the whole suite could lose a test (`tests_may_change`) or
/// loosen one no other command reports, and no grading would see it. Red or green, they
/// decide nothing here. Cached by tree like the red results, so a second run on the same
/// baseline runs nothing; with whether they ran.
fn acceptance_reports<G>(
    contract: &Contract<'_>,
    po: &PoRun<'_>,
    on_command: &mut impl FnMut(&str, &[String]) -> G,
    results: &mut Vec<BaselineResult>,
) -> Result<(Vec<CommandTests>, bool)> {
    if contract.acceptance.is_empty() {
        return Ok((Vec::new(), false));
    }
    // Cached like the red results, by tree and commands (tagged: the same list in another
    // role is another key), with the report globs that shape what they report.
    let junit = po.tests.map_or(&[][..], |t| &t.junit[..]);
    let key: Vec<Vec<String>> = (contract.acceptance.iter())
        .map(|argv| tagged("acceptance_reports", argv))
        .chain(std::iter::once(tagged("testReport", junit)))
        .collect();
    let cached: Option<Vec<BaselineResult>> = cache::results(contract.repo, contract.tree, &key);
    if let Some((list, reports)) = cached.zip(cached_tests(contract.repo, contract.tree, &key)) {
        results.extend(list.into_iter().map(|r| BaselineResult {
            kind: Phase::Acceptance.as_str().to_string(),
            cached: true,
            ..r
        }));
        return Ok((reports, false));
    }
    let mut list = Vec::new();
    let mut reported = Vec::new();
    for (i, argv) in contract.acceptance.iter().enumerate() {
        let shown = on_command(Phase::Acceptance.as_str(), argv);
        let cmd = po.run_one(Phase::Acceptance.as_str(), i, argv);
        drop(shown);
        interrupted(&cmd)?;
        list.push(result(Phase::Acceptance, &cmd));
        reported.extend(cmd.tests);
    }
    cache::record_results(contract.repo, contract.tree, &key, &list)?;
    record_tests(contract.repo, contract.tree, &key, &reported)?;
    results.extend(list);
    Ok((reported, true))
}

/// The phases a named-tests baseline runs, in order: every check command (SPEC §3.9).
fn named_phases<'a>(contract: &Contract<'a>) -> [(Phase, &'a [Vec<String>]); 4] {
    [
        (Phase::Verify, contract.verify),
        (Phase::PassToPass, contract.pass_to_pass),
        (Phase::FailToPass, contract.fail_to_pass),
        (Phase::Acceptance, contract.acceptance),
    ]
}

/// One line of a cache key that no real command list has: `words` after a tag holding a NUL,
/// which no argv word can.
fn tagged(tag: &str, words: &[String]) -> Vec<String> {
    std::iter::once(format!("\0{tag}"))
        .chain(words.iter().cloned())
        .collect()
}

/// The cache key of a named-tests baseline: every check command with its phase, the named
/// tests and the JUnit globs that decide which reports count — so an entry is never read for
/// another command list, other named tests or other report files. The tags hold a NUL, which
/// no argv word can, so no real command list has this key.
pub fn named_key(contract: &Contract<'_>, junit: &[String]) -> Vec<Vec<String>> {
    let mut key: Vec<Vec<String>> = Vec::new();
    for (phase, commands) in named_phases(contract) {
        key.extend(commands.iter().map(|argv| tagged(phase.as_str(), argv)));
    }
    key.push(tagged("fail_to_pass_tests", contract.named.fail_to_pass));
    key.push(tagged("pass_to_pass_tests", contract.named.pass_to_pass));
    key.push(tagged("testReport", junit));
    key
}

/// The baseline check of an order that names tests (SPEC §3.9): every check command runs
/// (which command reports a named test is only known by running it), or the cache answers
/// for this tree, these commands and these names. A command that reports a named test is
/// judged by its tests alone; the others as in §3.8.
fn check_named<G>(
    contract: &Contract<'_>,
    po: &PoRun<'_>,
    on_command: impl FnMut(&str, &[String]) -> G,
) -> Result<Report> {
    let key = named_key(contract, po.tests.map_or(&[][..], |t| &t.junit[..]));
    let (repo, tree) = (contract.repo, contract.tree);
    let cached = cache::results::<Vec<BaselineResult>>(repo, tree, &key)
        .filter(|r| same_named_commands(r, contract))
        .zip(cache::tests::<Vec<CommandTests>>(repo, tree, &key));
    let (results, tests, ran) = match cached {
        Some((results, tests)) => {
            let results = (results.into_iter())
                .map(|r| BaselineResult { cached: true, ..r })
                .collect();
            (results, tests, false)
        }
        None => {
            let (results, tests) = run_named(contract, po, on_command)?;
            (results, tests, true)
        }
    };
    let finding = judge_named(&contract.named, &results, &tests)?;
    if ran {
        // Only a baseline that proved the contract is kept: a refusal is checked again.
        cache::record_results(repo, tree, &key, &results)?;
        cache::record_tests(repo, tree, &key, &tests)?;
    }
    Ok(Report {
        results,
        finding,
        ran,
        tests,
    })
}

/// A cached named-tests record is used only if it is about exactly these commands, in
/// these phases and this order.
fn same_named_commands(cached: &[BaselineResult], contract: &Contract<'_>) -> bool {
    let want: Vec<(&str, &Vec<String>)> = named_phases(contract)
        .into_iter()
        .flat_map(|(phase, commands)| commands.iter().map(move |c| (phase.as_str(), c)))
        .collect();
    cached.len() == want.len()
        && (cached.iter().zip(want)).all(|(r, (kind, c))| r.kind == kind && &r.command == c)
}

/// The named tests of `report` that the contract relies on being red: named `fail_to_pass`
/// tests that are red in it.
fn red_named(named: &Named<'_>, report: Option<&CommandTests>) -> Vec<String> {
    (report.iter().flat_map(|r| r.red()))
        .filter(|t| named.fail_to_pass.iter().any(|p| grade::matches(p, &t.id)))
        .map(|t| t.id.clone())
        .collect()
}

/// Runs every check command of a named-tests order on the baseline; every red the contract
/// relies on is confirmed by a second run (red first).
fn run_named<G>(
    contract: &Contract<'_>,
    po: &PoRun<'_>,
    mut on_command: impl FnMut(&str, &[String]) -> G,
) -> Result<(Vec<BaselineResult>, Vec<CommandTests>)> {
    let named = &contract.named;
    let mut results: Vec<BaselineResult> = Vec::new();
    let mut tests: Vec<CommandTests> = Vec::new();
    for (phase, commands) in named_phases(contract) {
        for (i, argv) in commands.iter().enumerate() {
            let shown = on_command(phase.as_str(), argv);
            let cmd = po.run_one(phase.as_str(), i, argv);
            drop(shown);
            interrupted(&cmd)?;
            let r = result(phase, &cmd);
            let by_names = named.judges(cmd.tests.as_ref());
            if !by_names && !r.passed && matches!(phase, Phase::Verify | Phase::PassToPass) {
                return Err(broken(&r));
            }
            let relied = red_named(named, cmd.tests.as_ref());
            if !relied.is_empty() {
                confirm_red(po, phase.as_str(), i, &cmd, Relied::Tests(&relied))?;
            } else if phase == Phase::FailToPass && !by_names && !r.passed {
                confirm_red(po, phase.as_str(), i, &cmd, Relied::Command)?;
            }
            tests.extend(cmd.tests);
            results.push(r);
        }
    }
    Ok((results, tests))
}

/// What a named-tests baseline found: a named test no report holds, a named `pass_to_pass`
/// test that does not pass, or some named `fail_to_pass` tests passing already are refused.
fn judge_named(
    named: &Named<'_>,
    results: &[BaselineResult],
    tests: &[CommandTests],
) -> Result<Finding> {
    // A test in a module the baseline could not collect is found as that module's red result.
    let found = |pattern: &str| -> Vec<&crate::store::records::TestResult> {
        (tests.iter().flat_map(|c| c.tests.iter()))
            .filter(|t| grade::matches(pattern, &t.id) || grade::hides(&t.id, t.status, pattern))
            .collect()
    };
    for pattern in named.fail_to_pass.iter().chain(named.pass_to_pass) {
        if found(pattern).is_empty() {
            return Err(no_such_test(pattern, tests));
        }
    }
    for pattern in named.pass_to_pass {
        for t in found(pattern) {
            if t.status != crate::store::records::TestStatus::Passed {
                return Err(Error::new(format!(
                    "the baseline is broken: pass_to_pass test {} is {} before any change",
                    t.id,
                    t.status.as_str()
                ))
                .hint("a pass_to_pass test must pass before the change: fix the baseline or the work order; nothing was recorded"));
            }
        }
    }
    let mut green: Vec<String> = (named.fail_to_pass.iter())
        .flat_map(|p| found(p))
        .filter(|t| !t.status.is_red())
        .map(|t| format!("test {} ({})", t.id, t.status.as_str()))
        .collect();
    let mut red = (named.fail_to_pass.iter())
        .flat_map(|p| found(p))
        .filter(|t| t.status.is_red())
        .count();
    for r in results
        .iter()
        .filter(|r| r.kind == Phase::FailToPass.as_str())
    {
        match r.passed {
            true => green.push(format!("command {}", r.display())),
            false => red += 1,
        }
    }
    green.sort();
    green.dedup();
    match (green.is_empty(), red) {
        (true, _) => Ok(Finding::Red),
        (false, 0) => Ok(Finding::Satisfied),
        (false, _) => {
            let mut e = Error::new(format!(
                "{} named fail_to_pass test(s) or command(s) already pass on the baseline: not a failing test",
                green.len()
            ));
            for g in &green {
                e = e.detail(format!("  passes already: {g}"));
            }
            Err(e.hint(
                "a fail_to_pass test must fail before the change: move it to pass_to_pass_tests, \
                 or fix the work order; nothing was recorded",
            ))
        }
    }
}

/// The refusal for a named test no report contains, with the nearest ids reported.
fn no_such_test(pattern: &str, tests: &[CommandTests]) -> Error {
    let mut e = Error::new(format!(
        "no such test: {pattern} is named by the work order, but no check command reports it on the baseline"
    ));
    let stem = pattern.split("::").next().unwrap_or(pattern);
    let mut near: Vec<&str> = (tests.iter().flat_map(|c| c.tests.iter()))
        .map(|t| t.id.as_str())
        .filter(|id| id.starts_with(stem))
        .collect();
    near.sort_unstable();
    near.dedup();
    for id in near.iter().take(10) {
        e = e.detail(format!("  reported: {id}"));
    }
    let reporters = tests.iter().filter(|c| !c.tests.is_empty()).count();
    e.hint(format!(
        "name a test id exactly as its report gives it (pytest: path::Class::test[param]; a trailing * \
         matches a prefix); {reporters} command(s) reported tests; nothing was recorded"
    ))
}

/// The per-test reports recorded with a cached result (an empty list: none reported).
fn cached_tests(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
) -> Option<Vec<CommandTests>> {
    cache::tests(repo, tree, commands)
}

/// Records a command list's per-test reports on `tree`, so a cached baseline grades as a
/// fresh one does.
pub fn record_tests(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
    reports: &[CommandTests],
) -> Result<()> {
    cache::record_tests(repo, tree, commands, &reports)
}

/// The red result a confirmation checks: a `fail_to_pass` command's as a whole, or the
/// named tests a command reported red.
enum Relied<'a> {
    Command,
    Tests(&'a [String]),
}

/// Red first (SPEC §3.9): a red result the contract relies on is run a second time (pytest:
/// only the red node ids, as a flake after a change is, [`PoRun::run_again`], and the whole
/// command again if one passes alone; other runners the whole command); one that passes then
/// is refused as flaky, never a red to turn green.
fn confirm_red(
    po: &PoRun<'_>,
    kind: &str,
    index: usize,
    first: &CmdResult,
    relied: Relied<'_>,
) -> Result<()> {
    use crate::store::records::TestStatus;
    let red_ids: Vec<String> = match relied {
        Relied::Command => (first.tests.iter())
            .flat_map(|t| t.red().map(|t| t.id.clone()))
            .collect(),
        Relied::Tests(ids) => ids.to_vec(),
    };
    let stem = format!("{kind}_{index}_confirm");
    let narrowed = first.tests.as_ref().is_some_and(|t| t.source == "pytest");
    let mut again = po.run_again(kind, &stem, &first.command, first, &red_ids);
    interrupted(&again)?;
    let green_again = |again: &CmdResult| -> (Vec<String>, bool) {
        let now: std::collections::HashMap<&str, TestStatus> = (again.tests.iter())
            .flat_map(|t| t.tests.iter().map(|t| (t.id.as_str(), t.status)))
            .collect();
        let flaky = (red_ids.iter())
            .filter(|id| now.get(id.as_str()) == Some(&TestStatus::Passed))
            .cloned()
            .collect();
        (flaky, now.values().any(|s| s.is_red()))
    };
    let (mut flaky, mut now_red) = green_again(&again);
    if !flaky.is_empty() && narrowed {
        // Red in the whole suite, green alone: that may be order (an earlier test's state),
        // not chance. The whole command, as the contract runs it, decides.
        again = po.run_as(kind, &format!("{stem}_whole"), &first.command, &[]);
        interrupted(&again)?;
        (flaky, now_red) = green_again(&again);
    }
    let whole = matches!(relied, Relied::Command) && again.succeeded() && !now_red;
    if flaky.is_empty() && !whole {
        return Ok(());
    }
    let mut e = Error::new(match relied {
        Relied::Command => format!(
            "the fail_to_pass command `{}` is flaky on the baseline: red, then green when run again",
            first.display()
        ),
        Relied::Tests(_) => format!(
            "{} named fail_to_pass test(s) of `{}` are flaky on the baseline: red, then green when run again",
            flaky.len(),
            first.display()
        ),
    });
    for id in flaky.iter().take(20) {
        e = e.detail(format!("  flaky: {id}"));
    }
    Err(e.hint(
        "a red test must fail every time before the change: fix the flaky test first, or move \
         it out of fail_to_pass; nothing was recorded",
    ))
}

/// The `fail_to_pass` results: from the cache (with their tests), or run, each red one
/// confirmed by a second run.
fn red_results<G>(
    contract: &Contract<'_>,
    po: &PoRun<'_>,
    on_command: &mut impl FnMut(&str, &[String]) -> G,
    ran: &mut bool,
    tests: &mut Vec<CommandTests>,
    cached: Option<Vec<BaselineResult>>,
) -> Result<Vec<BaselineResult>> {
    let phase = Phase::FailToPass;
    let cached_reports = cached_tests(contract.repo, contract.tree, contract.fail_to_pass);
    let red = match cached.zip(cached_reports) {
        Some((list, reports)) => {
            tests.extend(reports);
            list.into_iter()
                .map(|r| BaselineResult {
                    kind: phase.as_str().to_string(),
                    cached: true,
                    ..r
                })
                .collect()
        }
        None => {
            let mut list = Vec::new();
            let mut reported = Vec::new();
            for (i, argv) in contract.fail_to_pass.iter().enumerate() {
                let shown = on_command(phase.as_str(), argv);
                let cmd = po.run_one(phase.as_str(), i, argv);
                drop(shown);
                *ran = true;
                interrupted(&cmd)?;
                if let Some(why) = &cmd.spawn_error {
                    // Red because it cannot even start is no test at all: no model could
                    // turn it green.
                    return Err(Error::new(format!(
                        "the fail_to_pass command `{}` could not start: {why}",
                        cmd.display()
                    ))
                    .hint(
                        "check the program's name and that it is installed; nothing was recorded",
                    ));
                }
                let red = !cmd.succeeded()
                    || cmd.tests.as_ref().is_some_and(|t| t.red().next().is_some());
                if red {
                    confirm_red(po, phase.as_str(), i, &cmd, Relied::Command)?;
                }
                let mut r = result(phase, &cmd);
                r.passed = !red;
                list.push(r);
                reported.extend(cmd.tests);
            }
            cache::record_results(contract.repo, contract.tree, contract.fail_to_pass, &list)?;
            record_tests(
                contract.repo,
                contract.tree,
                contract.fail_to_pass,
                &reported,
            )?;
            tests.extend(reported);
            list
        }
    };
    Ok(red)
}

/// The red `fail_to_pass` results the cache holds for this baseline, without running anything
/// (what `--dry-run` shows of the first prompt).
pub fn cached_red(
    repo: &Repository,
    tree: Oid,
    fail_to_pass: &[Vec<String>],
) -> Vec<BaselineResult> {
    if fail_to_pass.is_empty() {
        return Vec::new();
    }
    cache::results::<Vec<BaselineResult>>(repo, tree, fail_to_pass)
        .filter(|c| same_commands(c, fail_to_pass))
        .unwrap_or_default()
        .into_iter()
        .filter(|r| !r.passed)
        .map(|r| BaselineResult { cached: true, ..r })
        .collect()
}

/// The baseline's per-test reports the cache holds for a named-tests order on this tree,
/// without running anything (what `--dry-run` shows of the first prompt).
pub fn cached_named_tests(contract: &Contract<'_>, junit: &[String]) -> Vec<CommandTests> {
    if contract.named.is_empty() {
        return Vec::new();
    }
    let key = named_key(contract, junit);
    cache::results::<Vec<BaselineResult>>(contract.repo, contract.tree, &key)
        .filter(|r| same_named_commands(r, contract))
        .and_then(|_| cache::tests(contract.repo, contract.tree, &key))
        .unwrap_or_default()
}

/// A cached record is used only if it is about exactly these commands, in this order.
fn same_commands(cached: &[BaselineResult], commands: &[Vec<String>]) -> bool {
    cached.len() == commands.len() && cached.iter().zip(commands).all(|(r, c)| &r.command == c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_key_changes_with_every_command_phase_name_and_report_glob() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        let argv = |s: &str| -> Vec<Vec<String>> { vec![shlex::split(s).expect("splits")] };
        let (pytest, other) = (argv("python -m pytest -q"), argv("python -m pytest tests"));
        let names = ["tests/t.py::test_a".to_string()];
        let other_names = ["tests/t.py::test_*".to_string()];
        let base = Contract {
            repo: &repo,
            tree: Oid::zero(),
            verify: &[],
            pass_to_pass: &[],
            fail_to_pass: &[],
            acceptance: &pytest,
            named: Named {
                fail_to_pass: &names,
                pass_to_pass: &[],
            },
        };
        let key = |c: &Contract<'_>, junit: &[String]| cache::key(&named_key(c, junit));
        let first = key(&base, &[]);
        assert_eq!(first, key(&base, &[]));
        let variants = [
            key(
                &Contract {
                    acceptance: &other,
                    ..base
                },
                &[],
            ),
            key(
                &Contract {
                    acceptance: &[],
                    verify: &pytest,
                    ..base
                },
                &[],
            ),
            key(
                &Contract {
                    named: Named {
                        fail_to_pass: &other_names,
                        pass_to_pass: &[],
                    },
                    ..base
                },
                &[],
            ),
            key(
                &Contract {
                    named: Named {
                        fail_to_pass: &[],
                        pass_to_pass: &names,
                    },
                    ..base
                },
                &[],
            ),
            key(&base, &["target/*.xml".to_string()]),
            // The same commands as a plain §3.8 list never share the named entry.
            cache::key(&pytest),
        ];
        for v in variants {
            assert_ne!(first, v);
        }
    }
}
