//! Tests, one by one (SPEC §3.9), against real pytest: per-test grading of a change against
//! the baseline's report, red first, flakes once, and the records. The model is an
//! `--agent-command` script printing a fixed proposal. Proposals that weaken tests run with
//! `"tests_may_change": true`: TR would refuse them first (`tests_weakened`), and the grading
//! must catch a lost test whether or not the order lets tests change.

use crate::common::*;
use serde_json::{json, Value};

pub(crate) const CALC: &str = "def absolute(x):\n    return x\n";
pub(crate) const FIXED: &str = "def absolute(x):\n    return -x if x < 0 else x\n";
pub(crate) const RED_TESTS: &str =
    "from calc import absolute\n\n\ndef test_negative():\n    assert absolute(-3) == 3\n";
pub(crate) const GREEN_TESTS: &str = "from calc import absolute\n\n\ndef test_positive():\n    assert absolute(2) == 2\n\n\ndef test_positive_zero():\n    assert absolute(0) == 0\n";
pub(crate) const RED: &str = "python -m pytest -q -k negative";
pub(crate) const GREEN: &str = "python -m pytest -q -k positive";

pub(crate) fn project() -> TestRepo {
    let r = TestRepo::with_files(&[
        ("calc.py", CALC),
        ("tests/test_calc.py", RED_TESTS),
        ("tests/test_positive.py", GREEN_TESTS),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    r
}

/// A diff that replaces the whole of `path` (`old` empty: a new file).
pub(crate) fn rewrite(path: &str, old: &str, new: &str) -> String {
    let (o, n) = (old.lines().count(), new.lines().count());
    let mut d = if old.is_empty() {
        format!("diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{n} @@\n")
    } else {
        format!("diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{o} +1,{n} @@\n")
    };
    for l in old.lines() {
        d.push_str(&format!("-{l}\n"));
    }
    for l in new.lines() {
        d.push_str(&format!("+{l}\n"));
    }
    d
}

pub(crate) fn order(extra: Value) -> Value {
    let mut o = json!({
        "id": "abs",
        "title": "absolute() of negative numbers",
        "intent": "absolute(x) must return -x for negative x.",
        "allowed_files": ["calc.py", "tests/test_calc.py", "tests/test_positive.py", "tests/conftest.py"],
        "context_files": ["calc.py"],
        "fail_to_pass": [RED],
        "pass_to_pass": [GREEN],
    });
    if let (Some(o), Some(e)) = (o.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    o
}

pub(crate) fn run_with(
    r: &TestRepo,
    diff: &str,
    order: Value,
    flags: &[&str],
) -> std::process::Output {
    let answer = r.outside.join("answer.json");
    std::fs::write(&answer, proposal(diff, "change")).expect("write");
    let wo = r.work_order(order);
    r.factory()
        .arg("run")
        .args(["--max-attempts", "1"])
        .args(flags)
        .arg("--agent-command")
        .arg(format!("cat {}", answer.display()))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("git factory runs")
}

/// The newest run's summary and the first attempt's tests.json, from the run ref.
pub(crate) fn records(r: &TestRepo) -> (Value, Value) {
    let id = r.run_ids().last().cloned().expect("a run");
    let summary: Value =
        serde_json::from_str(&r.git(&["show", &format!("refs/factory/{id}:run_summary.json")]))
            .expect("summary");
    let tests = r
        .git_code(&["show", &format!("refs/factory/{id}:attempt_1/tests.json")])
        .1;
    (summary, serde_json::from_str(&tests).unwrap_or(Value::Null))
}

fn test_of<'a>(tests: &'a Value, id: &str) -> &'a Value {
    tests["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["tests"].as_array().into_iter().flatten())
        .find(|t| t["id"] == id)
        .unwrap_or(&Value::Null)
}

#[test]
fn red_to_green_with_pytest_is_graded_per_test_and_recorded() {
    let r = project();
    let out = run_with(&r, &rewrite("calc.py", CALC, FIXED), order(json!({})), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let (summary, tests) = records(&r);
    let counts = &summary["attempts"][0]["tests"];
    assert_eq!(counts["fail_to_pass_met"], 1, "{summary}");
    assert_eq!(counts["fail_to_pass_total"], 1);
    assert_eq!(counts["pass_to_pass_kept"], 2);
    assert_eq!(counts["pass_to_pass_total"], 2);
    let t = test_of(&tests, "tests/test_calc.py::test_negative");
    assert_eq!(t["status"], "passed");
    assert_eq!(t["baseline"], "failed");
    assert_eq!(tests["weakening"], json!([]));
    let id = r.run_ids().last().cloned().expect("a run");
    let base = r.git(&["show", &format!("refs/factory/{id}:baseline_tests.json")]);
    assert!(
        base.contains("tests/test_positive.py::test_positive_zero"),
        "{base}"
    );
    let show = r.factory().arg("show").output().expect("show");
    let shown = stdout_of(&show);
    assert!(
        shown.contains("tests: 3 passed, 0 failed, 0 skipped; fail_to_pass 1/1; pass_to_pass 2/2"),
        "{shown}"
    );
}

#[test]
fn a_deleted_baseline_test_is_a_regression_naming_it() {
    let r = project();
    let only_positive =
        "from calc import absolute\n\n\ndef test_positive():\n    assert absolute(2) == 2\n";
    let diff = rewrite("calc.py", CALC, FIXED)
        + &rewrite("tests/test_positive.py", GREEN_TESTS, only_positive);
    let out = run_with(&r, &diff, order(json!({"tests_may_change": true})), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (summary, tests) = records(&r);
    let brief = &summary["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "regression", "{summary}");
    assert!(
        tests["weakening"]
            .to_string()
            .contains("removes the test test_positive_zero"),
        "the allowed edit is listed in tests.json: {tests}"
    );
    let excerpt = brief["primary_error_excerpt"].as_str().unwrap_or("");
    assert!(excerpt.starts_with("regression: 1 test(s)"), "{excerpt}");
    assert!(
        excerpt.contains("tests/test_positive.py::test_positive_zero — missing"),
        "{excerpt}"
    );
    assert_eq!(
        test_of(&tests, "tests/test_positive.py::test_positive_zero")["status"],
        "missing"
    );
    assert_eq!(
        r.read("tests/test_positive.py").as_deref(),
        Some(GREEN_TESTS),
        "rolled back"
    );
}

#[test]
fn a_skip_or_xfail_marker_on_a_passing_test_is_a_regression() {
    for marker in [
        "@pytest.mark.skip(reason='later')",
        "@pytest.mark.xfail(reason='later')",
    ] {
        let r = project();
        let marked = format!(
            "import pytest\nfrom calc import absolute\n\n\ndef test_positive():\n    assert absolute(2) == 2\n\n\n{marker}\ndef test_positive_zero():\n    assert absolute(0) == 0\n"
        );
        let diff = rewrite("calc.py", CALC, FIXED)
            + &rewrite("tests/test_positive.py", GREEN_TESTS, &marked);
        let out = run_with(&r, &diff, order(json!({"tests_may_change": true})), &[]);
        assert_eq!(out.status.code(), Some(1), "{marker}: {}", stderr_of(&out));
        let (summary, _) = records(&r);
        assert_eq!(
            summary["attempts"][0]["failure_brief"]["stage"], "regression",
            "{marker}"
        );
    }
}

#[test]
fn skipping_the_red_test_does_not_turn_it_green() {
    let r = project();
    let skipped = "import pytest\nfrom calc import absolute\n\n\n@pytest.mark.skip(reason='later')\ndef test_negative():\n    assert absolute(-3) == 3\n";
    let out = run_with(
        &r,
        &rewrite("tests/test_calc.py", RED_TESTS, skipped),
        order(json!({"tests_may_change": true})),
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (summary, _) = records(&r);
    let brief = &summary["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "acceptance_failed");
    let excerpt = brief["primary_error_excerpt"].as_str().unwrap_or("");
    assert!(
        excerpt.contains("tests/test_calc.py::test_negative — skipped"),
        "{excerpt}"
    );
}

#[test]
fn a_conftest_that_deselects_tests_is_a_regression() {
    let r = project();
    let conftest = "def pytest_collection_modifyitems(config, items):\n    items[:] = [i for i in items if 'zero' not in i.name]\n";
    let diff = rewrite("calc.py", CALC, FIXED) + &rewrite("tests/conftest.py", "", conftest);
    let out = run_with(&r, &diff, order(json!({"tests_may_change": true})), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (summary, _) = records(&r);
    assert_eq!(
        summary["attempts"][0]["failure_brief"]["stage"],
        "regression"
    );
}

#[test]
fn a_second_test_broken_while_fixing_the_first_fails_naming_it_first_in_the_brief() {
    let r = project();
    let broken = "def absolute(x):\n    return -x if x < 0 else x + (1 if x == 0 else 0)\n";
    let out = run_with(&r, &rewrite("calc.py", CALC, broken), order(json!({})), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (summary, tests) = records(&r);
    let brief = &summary["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "regression");
    let excerpt = brief["primary_error_excerpt"].as_str().unwrap_or("");
    assert!(excerpt.starts_with("regression: 1 test(s)"), "{excerpt}");
    assert!(
        excerpt.contains("tests/test_positive.py::test_positive_zero — failed"),
        "{excerpt}"
    );
    let t = test_of(&tests, "tests/test_positive.py::test_positive_zero");
    assert_eq!(t["baseline"], "passed");
    assert!(
        t["message"]
            .as_str()
            .unwrap_or("")
            .contains("assert 1 == 0"),
        "{t}"
    );
}

#[test]
fn a_test_that_fails_once_after_the_change_is_flaky_and_does_not_fail_the_attempt() {
    let r = project();
    let counter = r.outside.join("flaky-count");
    let steady = r.outside.join("steady-count");
    let flaky = format!(
        "import os\nfrom calc import absolute\n\n\ndef test_positive():\n    p = {steady:?}\n    open(p, 'a').write('.')\n    assert absolute(2) == 2\n\n\ndef test_positive_zero():\n    import os\n    p = {path:?}\n    n = int(open(p).read()) if os.path.exists(p) else 0\n    open(p, 'w').write(str(n + 1))\n    assert n != 1\n",
        path = counter.display().to_string(),
        steady = steady.display().to_string()
    );
    r.write("tests/test_positive.py", &flaky);
    r.git(&["commit", "-qam", "a test that fails on its second run"]);
    let out = run_with(&r, &rewrite("calc.py", CALC, FIXED), order(json!({})), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let (summary, tests) = records(&r);
    assert_eq!(summary["attempts"][0]["tests"]["flaky"], 1, "{summary}");
    assert_eq!(
        test_of(&tests, "tests/test_positive.py::test_positive_zero")["flaky"],
        true
    );
    // pytest re-ran only the failing node id: the steady test ran on the baseline and once
    // after the change, not a third time.
    assert_eq!(
        std::fs::read_to_string(&steady).ok().as_deref(),
        Some(".."),
        "the re-run ran only the test that failed"
    );
    let remembered =
        std::fs::read_to_string(r.root.join(".git/factory/flaky.json")).unwrap_or_default();
    assert_eq!(
        remembered,
        format!(
            "[{{\"command\":\"{GREEN}\",\"id\":\"tests/test_positive.py::test_positive_zero\"}}]\n"
        ),
    );
    let shown = stdout_of(&r.factory().arg("show").output().expect("show"));
    assert!(
        shown.contains("flaky tests (1):\n  tests/test_positive.py::test_positive_zero ("),
        "{shown}"
    );

    // factory.flaky=fail: the same flake fails the attempt.
    let r2 = project();
    let counter = r2.outside.join("flaky-count");
    let flaky = flaky.replace(
        &r.outside.join("flaky-count").display().to_string(),
        &counter.display().to_string(),
    );
    r2.write("tests/test_positive.py", &flaky);
    r2.git(&["commit", "-qam", "a test that fails on its second run"]);
    r2.git(&["config", "factory.flaky", "fail"]);
    let out = run_with(&r2, &rewrite("calc.py", CALC, FIXED), order(json!({})), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
}

#[test]
fn a_red_test_that_passes_when_run_again_is_refused_as_flaky_on_the_baseline() {
    let r = project();
    let counter = r.outside.join("red-count");
    let flaky_red = format!(
        "import os\n\n\ndef test_negative():\n    p = {path:?}\n    n = int(open(p).read()) if os.path.exists(p) else 0\n    open(p, 'w').write(str(n + 1))\n    assert n != 0\n",
        path = counter.display().to_string()
    );
    r.write("tests/test_calc.py", &flaky_red);
    r.git(&["commit", "-qam", "a red test that passes on its second run"]);
    let before = r.snapshot();
    let out = run_with(&r, &rewrite("calc.py", CALC, FIXED), order(json!({})), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("flaky on the baseline"),
        "{}",
        stderr_of(&out)
    );
    assert!(r.run_ids().is_empty());
    assert_eq!(r.snapshot(), before);
}

#[test]
fn a_report_that_says_pass_while_the_command_fails_is_a_fail_and_the_users_junitxml_still_works() {
    let r = project();
    let green = format!(
        "python -m pytest -q -k positive --junitxml={}",
        r.outside.join("user.xml").display()
    );
    let o = order(
        json!({"pass_to_pass": [green], "acceptance_commands": ["sh -c 'python -m pytest -q -k positive; exit 3'"]}),
    );
    let out = run_with(&r, &rewrite("calc.py", CALC, FIXED), o, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (summary, _) = records(&r);
    assert_eq!(
        summary["attempts"][0]["failure_brief"]["stage"],
        "acceptance_failed"
    );
    let xml = std::fs::read_to_string(r.outside.join("user.xml")).expect("the user's own report");
    assert!(xml.contains("test_positive_zero"), "{xml}");
}

/// A project whose `pass_to_pass` command runs a real test runner over `tests_file`, which
/// checks `lib_file`; the proposal breaks one test of two. Only a per-test report can name it.
fn a_broken_test_is_named(
    files: &[(&str, &str)],
    lib: (&str, &str, &str),
    command: &str,
    id: &str,
) {
    a_broken_test_is_named_with(files, &[], lib, command, id);
}

fn a_broken_test_is_named_with(
    files: &[(&str, &str)],
    config: &[(&str, &str)],
    lib: (&str, &str, &str),
    command: &str,
    id: &str,
) -> Value {
    let r = TestRepo::with_files(files);
    r.git(&["config", "factory.verify", "true"]);
    for (k, v) in config {
        r.git(&["config", "--add", k, v]);
    }
    let (path, old, new) = lib;
    let o = json!({
        "id": "abs",
        "title": "change the library",
        "intent": "Change it.",
        "allowed_files": [path],
        "context_files": [path],
        "pass_to_pass": [command],
        "acceptance_commands": ["true"],
    });
    let out = run_with(&r, &rewrite(path, old, new), o, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (summary, tests) = records(&r);
    let brief = &summary["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "regression", "{summary}");
    let excerpt = brief["primary_error_excerpt"].as_str().unwrap_or("");
    assert!(excerpt.starts_with("regression: 1 test(s)"), "{excerpt}");
    assert!(excerpt.contains(&format!("{id} — failed")), "{excerpt}");
    assert_eq!(test_of(&tests, id)["baseline"], "passed", "{tests}");
    assert_eq!(
        summary["attempts"][0]["tests"]["pass_to_pass_total"], 2,
        "{summary}"
    );
    tests
}

#[test]
fn libtest_lines_of_a_real_rust_test_binary_are_graded_per_test() {
    let lib = "pub fn double(x: i32) -> i32 {\n    x * 2\n}\n";
    let tests = "include!(\"lib.rs\");\n\n#[test]\nfn doubles_two() {\n    assert_eq!(double(2), 4);\n}\n\n#[test]\nfn doubles_zero() {\n    assert_eq!(double(0), 0);\n}\n";
    let broken = "pub fn double(x: i32) -> i32 {\n    if x == 0 { 1 } else { x * 2 }\n}\n";
    a_broken_test_is_named(
        &[("lib.rs", lib), ("t.rs", tests)],
        ("lib.rs", lib, broken),
        "sh -c 'd=$(mktemp -d) && rustc --edition 2021 --test t.rs -o $d/t && $d/t'",
        "doubles_zero",
    );
}

#[test]
fn tap_from_nodes_own_test_runner_is_graded_per_test() {
    let lib = "exports.double = (x) => x * 2;\n";
    let tests = "const test = require('node:test');\nconst assert = require('node:assert');\nconst { double } = require('../lib.js');\n\ntest('doubles two', () => {\n  assert.strictEqual(double(2), 4);\n});\n\ntest('doubles zero', () => {\n  assert.strictEqual(double(0), 0);\n});\n";
    let broken = "exports.double = (x) => (x === 0 ? 1 : x * 2);\n";
    a_broken_test_is_named(
        &[("lib.js", lib), ("test/double.test.js", tests)],
        ("lib.js", lib, broken),
        "node --test --test-reporter=tap test/",
        "doubles zero",
    );
}

#[test]
fn go_test_json_events_are_graded_per_test() {
    let lib = "package calc\n\nfunc Double(x int) int {\n\treturn x * 2\n}\n";
    let tests = "package calc\n\nimport \"testing\"\n\nfunc TestDoubleTwo(t *testing.T) {\n\tif Double(2) != 4 {\n\t\tt.Fatal(\"two\")\n\t}\n}\n\nfunc TestDoubleZero(t *testing.T) {\n\tif got := Double(0); got != 0 {\n\t\tt.Fatalf(\"got %d, want 0\", got)\n\t}\n}\n";
    let broken = "package calc\n\nfunc Double(x int) int {\n\tif x == 0 {\n\t\treturn 1\n\t}\n\treturn x * 2\n}\n";
    a_broken_test_is_named(
        &[
            ("go.mod", "module example.com/calc\n\ngo 1.18\n"),
            ("calc.go", lib),
            ("calc_test.go", tests),
        ],
        ("calc.go", lib, broken),
        "sh -c 'GOCACHE=$(mktemp -d) GOFLAGS=-mod=mod go test -json ./...'",
        "example.com/calc/TestDoubleZero",
    );
}

#[test]
fn a_junit_file_named_by_factory_test_report_is_graded_and_a_stale_one_is_not() {
    let lib = "exports.double = (x) => x * 2;\n";
    let tests = "const test = require('node:test');\nconst assert = require('node:assert');\nconst { double } = require('../lib.js');\n\ntest('doubles two', () => {\n  assert.strictEqual(double(2), 4);\n});\n\ntest('doubles zero', () => {\n  assert.strictEqual(double(0), 0);\n});\n";
    let broken = "exports.double = (x) => (x === 0 ? 1 : x * 2);\n";
    let stale = "<?xml version=\"1.0\"?>\n<testsuites><testsuite name=\"old\"><testcase name=\"gone\" classname=\"old\"><failure message=\"stale\">x</failure></testcase></testsuite></testsuites>\n";
    let tests = a_broken_test_is_named_with(
        &[
            ("lib.js", lib),
            ("test/double.test.js", tests),
            ("reports/stale.xml", stale),
        ],
        &[("factory.testReport", "reports/*.xml")],
        ("lib.js", lib, broken),
        "node --test --test-reporter=junit --test-reporter-destination=reports/node.xml test/",
        "test::doubles zero",
    );
    assert_eq!(tests["commands"][0]["source"], "junit", "{tests}");
    assert_eq!(
        test_of(&tests, "old::gone"),
        &Value::Null,
        "a file the command did not write"
    );
}

#[test]
fn under_the_sandbox_the_plugin_still_reports_and_a_deleted_test_is_a_regression() {
    if !bwrap_or_skip() {
        return;
    }
    let r = project();
    let only_positive =
        "from calc import absolute\n\n\ndef test_positive():\n    assert absolute(2) == 2\n";
    let diff = rewrite("calc.py", CALC, FIXED)
        + &rewrite("tests/test_positive.py", GREEN_TESTS, only_positive);
    // The proposal is replayed: a sandboxed agent could not read a file outside the tree.
    let replay = r.replay("rp", &[("1.json", proposal(&diff, "change"))]);
    let wo = r.work_order(order(json!({"tests_may_change": true})));
    let out = r
        .factory()
        .args(["run", "--sandbox", "--max-attempts", "1", "--replay"])
        .arg(&replay)
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (summary, _) = records(&r);
    assert_eq!(
        summary["attempts"][0]["failure_brief"]["stage"], "regression",
        "{summary}"
    );
}

pub(crate) const KNOWN_BROKEN: &str = "def test_known_broken():\n    assert 1 == 2\n";
pub(crate) const NAMED_RED: &str = "tests/test_calc.py::test_negative";

/// A real suite with an unrelated known failure, judged by named tests only (SPEC §3.9).
pub(crate) fn named_project() -> TestRepo {
    let r = project();
    r.write("tests/test_known.py", KNOWN_BROKEN);
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "a known failure"]);
    r
}

pub(crate) fn named_order(tests: &[&str]) -> Value {
    json!({
        "id": "abs",
        "title": "absolute() of negative numbers",
        "intent": "absolute(x) must return -x for negative x.",
        "allowed_files": ["calc.py"],
        "acceptance_commands": ["python -m pytest -q"],
        "fail_to_pass_tests": tests,
    })
}

#[test]
fn named_tests_judge_a_suite_with_an_unrelated_known_failure() {
    let r = named_project();
    let out = run_with(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        named_order(&[NAMED_RED]),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("calc.py").as_deref(), Some(FIXED));
    let (summary, tests) = records(&r);
    assert_eq!(summary["verdict"], "PASS", "{summary}");
    assert_eq!(
        summary["attempts"][0]["tests"]["fail_to_pass_met"], 1,
        "{summary}"
    );
    assert_eq!(summary["attempts"][0]["tests"]["fail_to_pass_total"], 1);
    assert_eq!(test_of(&tests, NAMED_RED)["status"], "passed");
    assert_eq!(
        test_of(&tests, "tests/test_known.py::test_known_broken")["status"],
        "failed"
    );
    let shown = stdout_of(&r.factory().arg("show").output().expect("show"));
    assert!(
        shown.contains("  python -m pytest -q: 3 passed, 1 failed, 0 skipped\n    failed tests/test_known.py::test_known_broken"),
        "{shown}"
    );
    let listed = stdout_of(
        &r.factory()
            .args(["show", "--tests"])
            .output()
            .expect("show"),
    );
    for line in [
        "    failed → passed  tests/test_calc.py::test_negative\n",
        "    failed → failed  tests/test_known.py::test_known_broken\n",
        "    passed → passed  tests/test_positive.py::test_positive_zero\n",
    ] {
        assert!(listed.contains(line), "{line} in {listed}");
    }
    let log = stdout_of(&r.factory().arg("log").output().expect("log"));
    assert!(log.contains("(tests: 3 passed, 1 failed)"), "{log}");
    let listing: Value = serde_json::from_str(&stdout_of(
        &r.factory().args(["log", "--json"]).output().expect("log"),
    ))
    .expect("json");
    assert_eq!(listing[0]["tests"]["passed"], 3, "{listing}");
    assert_eq!(listing[0]["tests"]["failed"], 1, "{listing}");
}

#[test]
fn a_proposal_that_leaves_the_named_red_test_failing_fails() {
    let r = named_project();
    let still_wrong = "def absolute(x):\n    return x + 0\n";
    let out = run_with(
        &r,
        &rewrite("calc.py", CALC, still_wrong),
        named_order(&["tests/test_calc.py::test_neg*"]),
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (summary, _) = records(&r);
    assert_eq!(summary["verdict"], "FAIL", "{summary}");
    assert_eq!(r.read("calc.py").as_deref(), Some(CALC), "rolled back");
}

#[test]
fn a_named_test_no_report_contains_is_refused_before_any_model_call() {
    let r = named_project();
    let out = run_with(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        named_order(&["tests/test_calc.py::test_nonexistent"]),
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("no such test") && err.contains("tests/test_calc.py::test_nonexistent"),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");
    assert!(r.run_ids().is_empty(), "nothing recorded");
    assert_eq!(r.read("calc.py").as_deref(), Some(CALC));
}

#[test]
fn a_named_fail_to_pass_test_that_passes_on_the_baseline_is_refused() {
    let r = named_project();
    let out = run_with(
        &r,
        &rewrite("calc.py", CALC, FIXED),
        named_order(&[NAMED_RED, "tests/test_positive.py::test_positive"]),
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("not a failing test"), "{err}");
    assert!(
        err.contains("tests/test_positive.py::test_positive"),
        "{err}"
    );
}
