//! Named tests (SPEC §3.9: `fail_to_pass_tests`, `pass_to_pass_tests`) beyond the run's own
//! grading: red first on the baseline, the baseline's per-test results cached by tree and
//! command list, the first prompt naming the red tests, and `reverify`/`verify`/the pre-push
//! hook judging as the run did. Real pytest, real git, the real binary.

use crate::common::*;
use crate::per_test::{named_order, named_project, rewrite, CALC, FIXED, NAMED_RED};
use serde_json::Value;
use std::path::PathBuf;

/// `git factory run` with an agent that leaves a mark each time it is asked, then prints a
/// proposal of `diff`.
fn run_marked(r: &TestRepo, diff: &str, order: Value) -> (std::process::Output, PathBuf) {
    let answer = r.outside.join("answer.json");
    let mark = r.outside.join("asked");
    std::fs::write(&answer, proposal(diff, "change")).expect("write");
    let wo = r.work_order(order);
    let out = r
        .factory()
        .args(["run", "--max-attempts", "1", "--agent-command"])
        .arg(format!(
            "sh -c 'echo asked >> {}; cat {}'",
            mark.display(),
            answer.display()
        ))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("git factory runs");
    (out, mark)
}

/// The order of `named_order`, under another id (so another run on the same baseline).
fn named_order_as(id: &str, tests: &[&str]) -> Value {
    let mut o = named_order(tests);
    o["id"] = Value::from(id);
    o
}

/// A known failure that leaves a dot in `counter` each time the whole suite runs it.
fn counted_known_failure(r: &TestRepo) -> PathBuf {
    let counter = r.outside.join("suite-runs");
    r.write(
        "tests/test_known.py",
        &format!(
            "def test_known_broken():\n    open({:?}, 'a').write('.')\n    assert 1 == 2\n",
            counter.display().to_string()
        ),
    );
    r.git(&["commit", "-qam", "count the suite's runs"]);
    counter
}

fn dots(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).unwrap_or_default().len()
}

#[test]
fn a_named_red_test_that_passes_when_run_again_is_refused_as_flaky_on_the_baseline() {
    let r = named_project();
    let counter = r.outside.join("red-count");
    let steady = r.outside.join("steady");
    r.write(
        "tests/test_calc.py",
        &format!(
            "import os\n\n\ndef test_negative():\n    p = {c:?}\n    n = int(open(p).read()) if os.path.exists(p) else 0\n    open(p, 'w').write(str(n + 1))\n    assert n != 0\n\n\ndef test_steady():\n    open({s:?}, 'a').write('.')\n",
            c = counter.display().to_string(),
            s = steady.display().to_string()
        ),
    );
    r.git(&[
        "commit",
        "-qam",
        "a named red test that passes on its second run",
    ]);
    let before = r.snapshot();
    let (out, asked) = run_marked(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        named_order(&[NAMED_RED]),
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("flaky on the baseline"), "{err}");
    assert!(err.contains(&format!("flaky: {NAMED_RED}")), "{err}");
    assert!(err.contains("hint:"), "{err}");
    assert!(r.run_ids().is_empty(), "nothing recorded");
    assert!(!asked.exists(), "no model was asked");
    assert_eq!(r.snapshot(), before);
    // pytest ran the named red test again alone; green there, the whole suite decided (red
    // by order is no flake): the named test ran three times, the other twice.
    assert_eq!(std::fs::read_to_string(&counter).ok().as_deref(), Some("3"));
    assert_eq!(
        dots(&steady),
        2,
        "a red test green alone is confirmed by the whole command"
    );
}

#[test]
fn a_named_red_test_that_stays_red_is_confirmed_and_the_run_proceeds() {
    let r = named_project();
    let counter = counted_known_failure(&r);
    let (out, _) = run_marked(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        named_order(&[NAMED_RED]),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // The baseline's whole suite and the attempt's; the confirmation ran only the named id.
    assert_eq!(dots(&counter), 2);
    let id = r.run_ids().last().cloned().expect("a run");
    let logs = r.git(&[
        "ls-tree",
        "-r",
        "--name-only",
        &format!("refs/factory/{id}"),
    ]);
    assert!(
        logs.contains("baseline/acceptance_0_confirm_stdout.txt"),
        "{logs}"
    );
}

#[test]
fn a_second_run_on_the_same_baseline_reads_the_named_baseline_from_the_cache() {
    let r = named_project();
    let counter = counted_known_failure(&r);
    let (out, _) = run_marked(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        named_order(&[NAMED_RED]),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(dots(&counter), 2);
    r.git(&["checkout", "--", "calc.py"]);

    // --dry-run shows the cached red test in the first prompt, running nothing.
    let wo = r.work_order(named_order_as("abs-dry", &[NAMED_RED]));
    let out = r
        .factory()
        .args(["run", "--dry-run", "--agent-command", "false", "-w"])
        .arg(&wo)
        .output()
        .expect("dry run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out)
            .contains("failing tests (1):\n- tests/test_calc.py::test_negative (failed): "),
        "{}",
        stdout_of(&out)
    );
    assert_eq!(dots(&counter), 2, "a dry run runs nothing");

    // Same tree, same commands, same names: the baseline is not run again, and its per-test
    // statuses still grade the change.
    let (out, _) = run_marked(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        named_order_as("abs-again", &[NAMED_RED]),
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(dots(&counter), 3, "only the attempt ran the suite: {err}");
    assert!(err.contains("from the cache"), "{err}");
    let listed = stdout_of(
        &r.factory()
            .args(["show", "--tests"])
            .output()
            .expect("show"),
    );
    for line in [
        "    failed → passed  tests/test_calc.py::test_negative\n",
        "    failed → failed  tests/test_known.py::test_known_broken\n",
    ] {
        assert!(listed.contains(line), "{line} in {listed}");
    }
    r.git(&["checkout", "--", "calc.py"]);

    // Other names: another entry, the baseline runs again.
    let (out, _) = run_marked(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        named_order_as("abs-other-names", &["tests/test_calc.py::test_neg*"]),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(dots(&counter), 5, "other names are not read from the cache");
    r.git(&["checkout", "--", "calc.py"]);

    // Other commands: another entry too.
    let mut o = named_order_as("abs-other-commands", &[NAMED_RED]);
    o["acceptance_commands"] = serde_json::json!(["python -m pytest -q tests"]);
    let (out, _) = run_marked(&r, &rewrite("calc.py", CALC, FIXED), o);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        dots(&counter),
        7,
        "another command list is not read from the cache"
    );
}

#[test]
fn the_first_prompt_names_the_red_named_tests_with_their_messages_at_most_twenty() {
    let r = named_project();
    r.write(
        "tests/test_many.py",
        "import pytest\nfrom calc import absolute\n\n\n@pytest.mark.parametrize('n', range(1, 26))\ndef test_many(n):\n    assert absolute(-n) == n, f'absolute(-{n}) is not {n}'\n",
    );
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "many red tests"]);
    let (out, _) = run_marked(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        named_order(&[NAMED_RED, "tests/test_many.py::test_many*"]),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = r.run_ids().last().cloned().expect("a run");
    let prompt = r.git(&["show", &format!("refs/factory/{id}:attempt_1/prompt.txt")]);
    assert!(
        prompt.contains("## The failing tests, run on the original files before you were asked\n\nfailing tests (26):\n- tests/test_calc.py::test_negative (failed): "),
        "{prompt}"
    );
    assert!(
        prompt.contains(
            "- tests/test_many.py::test_many[1] (failed): AssertionError: absolute(-1) is not 1"
        ),
        "{prompt}"
    );
    assert!(prompt.contains("\n- … and 6 more\n"), "{prompt}");
    assert!(!prompt.contains("test_many[25]"), "{prompt}");
    // The unrelated known failure is no red test of the contract.
    assert!(!prompt.contains("test_known_broken"), "{prompt}");
}

/// `git ARGS` with this build of git-factory first on PATH (so the installed hook runs it).
fn git_with_factory(r: &TestRepo, args: &[&str]) -> std::process::Output {
    let bin = assert_cmd::cargo::cargo_bin("git-factory");
    let dir = bin.parent().expect("a folder").display().to_string();
    let mut cmd = assert_cmd::Command::new("git");
    hermetic(&mut cmd, &r.home);
    cmd.current_dir(&r.root)
        .env(
            "PATH",
            format!("{dir}:{}", std::env::var("PATH").unwrap_or_default()),
        )
        .args(args)
        .output()
        .expect("git runs")
}

#[test]
fn a_commit_a_named_tests_run_made_is_judged_by_its_rule_in_reverify_verify_and_the_hook() {
    // Verification is the whole suite, with its unrelated known failure.
    let r = named_project();
    r.git(&["config", "factory.verify", "python -m pytest -q"]);
    let bare = bare_remote(&r);
    r.git(&["push", "-q", "origin", "main"]);
    let answer = r.outside.join("answer.json");
    std::fs::write(&answer, proposal(&rewrite("calc.py", CALC, FIXED), "fix")).expect("write");
    let wo = r.work_order(named_order(&[NAMED_RED]));
    let out = r
        .factory()
        .args(["run", "--max-attempts", "1", "--commit", "--agent-command"])
        .arg(format!("cat {}", answer.display()))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = r.run_ids().last().cloned().expect("a run");
    assert!(r
        .git(&["log", "-1", "--format=%B"])
        .contains(&format!("Factory-Run: {id}")));

    // reverify grades as the run did: the known failure does not fail verification.
    let out = r.factory().arg("reverify").output().expect("reverify");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    assert!(
        stdout_of(&out).contains("now passed"),
        "{}",
        stdout_of(&out)
    );

    // verify: the run's commit passes by its rule; the baseline commit fails plainly.
    let out = r.factory().arg("verify").output().expect("verify");
    let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!("judged per test by the tests run {id} named")),
        "{text}"
    );
    let out = r
        .factory()
        .args(["verify", "HEAD~1"])
        .output()
        .expect("verify");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));

    // The hook lets the run's commit through (and says why).
    r.factory().args(["hook", "install"]).assert().success();
    let out = git_with_factory(&r, &["push", "origin", "main"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("judged per test"),
        "{}",
        stderr_of(&out)
    );
    let pushed = std::process::Command::new("git")
        .args([
            "--git-dir",
            bare.to_str().expect("utf8"),
            "rev-parse",
            "main",
        ])
        .output()
        .expect("git");
    assert_eq!(
        stdout_of(&pushed).trim(),
        r.git(&["rev-parse", "HEAD"]).trim()
    );

    // A hand-made commit naming the run is judged by the rule too: breaking a test that
    // passed on the baseline blocks the push, naming the regression.
    r.write("calc.py", "def absolute(x):\n    return -x\n");
    r.git(&["commit", "-qam", &format!("worse\n\nFactory-Run: {id}")]);
    let out = git_with_factory(&r, &["push", "origin", "main"]);
    assert!(!out.status.success(), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("fails verification"),
        "{}",
        stderr_of(&out)
    );
}

/// The private report folder each check saw (the first entry of its `PYTHONPATH`), one line
/// per check, across a run of two attempts whose checks all fail.
fn report_folders_of_two_attempts(r: &TestRepo) -> Vec<String> {
    let seen = r.outside.join("seen");
    let lines = ["one", "two", "three"];
    let replay = r.replay(
        "two-attempts",
        &[
            (
                "1.json",
                proposal(&diff_replace("app.txt", &lines, "two", "TWO"), "first"),
            ),
            (
                "2.json",
                proposal(&diff_replace("app.txt", &lines, "two", "Two"), "second"),
            ),
        ],
    );
    let check = format!(
        "sh -c 'echo \"${{PYTHONPATH%%:*}}\" >> {}; exit 1'",
        seen.display()
    );
    let wo = r.work_order(basic_order(&[&check]));
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    std::fs::read_to_string(&seen)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_report_folder_is_made_once_per_run_and_removed_at_its_end() {
    let r = TestRepo::simple();
    let folders = report_folders_of_two_attempts(&r);
    assert_eq!(folders.len(), 2, "{folders:?}");
    assert!(folders[0].contains("git-factory-tests."), "{folders:?}");
    assert_eq!(folders[0], folders[1], "one folder for both attempts");
    assert!(
        !std::path::Path::new(&folders[0]).exists(),
        "removed when the run ended"
    );
}

#[test]
fn a_plugin_a_check_overwrote_is_put_back_for_the_next_attempt() {
    let r = named_project();
    let lines = CALC.lines().collect::<Vec<_>>();
    let wrong = diff_replace("calc.py", &lines, "    return x", "    return x + 0");
    let replay = r.replay(
        "two-attempts",
        &[
            ("1.json", proposal(&wrong, "first")),
            (
                "2.json",
                proposal(&rewrite("calc.py", CALC, FIXED), "second"),
            ),
        ],
    );
    // The first attempt's first check empties the plugin (then its pytest fails).
    let mut o = named_order(&[NAMED_RED]);
    o["acceptance_commands"] = serde_json::json!([
        "sh -c 'grep -q \"x + 0\" calc.py && : > \"${PYTHONPATH%%:*}/_git_factory_tests.py\"; exit 0'",
        "python -m pytest -q",
    ]);
    let wo = r.work_order(o);
    let out = r.run_replay(&wo, &replay, &["--max-attempts", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let (summary, _) = crate::per_test::records(&r);
    // Attempt 1's pytest reported nothing through the emptied plugin: its tests were lost.
    assert_eq!(
        summary["attempts"][0]["failure_brief"]["stage"],
        "regression"
    );
    assert_eq!(
        summary["attempts"].as_array().map(Vec::len),
        Some(2),
        "{summary}"
    );
    assert_eq!(summary["verdict"], "PASS", "{summary}");
}

#[test]
fn a_link_a_check_planted_in_the_report_folder_is_never_written_through() {
    use crate::per_test::{order, project, run_with};
    let r = project();
    let victim = r.outside.join("victim");
    std::fs::write(&victim, "precious\n").expect("write");
    // Verification plants a link where the re-run's list of node ids will be written.
    r.git(&[
        "config",
        "factory.verify",
        &format!(
            "sh -c 'ln -sf {} \"${{PYTHONPATH%%:*}}/pass_to_pass_0_rerun_only.txt\"'",
            victim.display()
        ),
    ]);
    // A baseline-passing test that fails once after the change: its command is re-run.
    let counter = r.outside.join("flaky-count");
    r.write(
        "tests/test_positive.py",
        &format!(
            "import os\nfrom calc import absolute\n\n\ndef test_positive():\n    assert absolute(2) == 2\n\n\ndef test_positive_zero():\n    p = {:?}\n    n = int(open(p).read()) if os.path.exists(p) else 0\n    open(p, 'w').write(str(n + 1))\n    assert n != 1\n",
            counter.display().to_string()
        ),
    );
    r.git(&["commit", "-qam", "a test that fails on its second run"]);
    let out = run_with(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        order(serde_json::json!({})),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(&counter).ok().as_deref(),
        Some("3"),
        "re-run"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).ok().as_deref(),
        Some("precious\n")
    );
}
