//! What a real project's suite (a thousand pytest tests, a flaky one, tests that lean on
//! modules other test files import) showed of the per-test rules of SPEC §3.9, each kept
//! here on a small synthetic repo with real pytest: a named red test is confirmed like a
//! red command, and a re-run of failing node ids collects their files, not the suite,
//! without losing a flake whose test needs the rest of the suite imported.

use crate::common::*;
use serde_json::{json, Value};

const CALC: &str = "def absolute(x):\n    return x\n";
const FIXED: &str = "def absolute(x):\n    return -x if x < 0 else x\n";
const RED: &str =
    "from calc import absolute\n\n\ndef test_negative():\n    assert absolute(-3) == 3\n";

fn diff(path: &str, old: &str, new: &str) -> String {
    let mut d = format!(
        "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{} +1,{} @@\n",
        old.lines().count(),
        new.lines().count()
    );
    for l in old.lines() {
        d.push_str(&format!("-{l}\n"));
    }
    for l in new.lines() {
        d.push_str(&format!("+{l}\n"));
    }
    d
}

fn run(r: &TestRepo, order: Value) -> std::process::Output {
    let answer = r.outside.join("answer.json");
    std::fs::write(&answer, proposal(&diff("calc.py", CALC, FIXED), "fix")).expect("write");
    let wo = r.work_order(order);
    r.factory()
        .args(["run", "--max-attempts", "1", "--agent-command"])
        .arg(format!("cat {}", answer.display()))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("git factory runs")
}

fn summary(r: &TestRepo) -> Value {
    let id = r.run_ids().last().cloned().expect("a run");
    serde_json::from_str(&r.git(&["show", &format!("refs/factory/{id}:run_summary.json")]))
        .expect("summary")
}

/// Python that counts its own runs in `path` (one more each time it runs) and evaluates
/// to the count before this one.
fn count_in(path: &std::path::Path) -> String {
    format!(
        "(lambda p: (lambda n: (open(p, 'w').write(str(n + 1)), n)[1])(int(open(p).read()) if __import__('os').path.exists(p) else 0))({:?})",
        path.display().to_string()
    )
}

#[test]
fn a_named_red_test_that_passes_when_run_again_is_refused_as_flaky_on_the_baseline() {
    // The whole suite as the check, the red test named: red on the baseline's first run,
    // green on the second, so no red to turn green.
    let r = TestRepo::with_files(&[
        ("calc.py", CALC),
        ("tests/test_other.py", "def test_other():\n    pass\n"),
    ]);
    let counter = r.outside.join("runs");
    r.write(
        "tests/test_calc.py",
        &format!(
            "def test_negative():\n    assert {} != 0\n",
            count_in(&counter)
        ),
    );
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "a red test that passes on its second run"]);
    r.git(&["config", "factory.verify", "python -m pytest -q"]);
    let before = r.snapshot();
    let out = run(
        &r,
        json!({
            "id": "abs", "title": "absolute", "intent": "fix absolute()",
            "allowed_files": ["calc.py"], "acceptance_commands": [],
            "fail_to_pass_tests": ["tests/test_calc.py::test_negative"],
        }),
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("flaky on the baseline"), "{err}");
    assert!(err.contains("tests/test_calc.py::test_negative"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    assert!(r.run_ids().is_empty(), "nothing recorded");
    assert_eq!(r.snapshot(), before);
    // A named red test that stays red runs on.
    let r = TestRepo::with_files(&[("calc.py", CALC), ("tests/test_calc.py", RED)]);
    r.git(&["config", "factory.verify", "python -m pytest -q"]);
    let out = run(
        &r,
        json!({
            "id": "abs", "title": "absolute", "intent": "fix absolute()",
            "allowed_files": ["calc.py"], "acceptance_commands": [],
            "fail_to_pass_tests": ["tests/test_calc.py::test_negative"],
        }),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// A suite of a flaky test in `suite/test_flaky.py` and a big module elsewhere that counts
/// how often it is imported (collected) in `imports`.
fn flaky_suite(flaky_test: &str) -> (TestRepo, std::path::PathBuf) {
    let r = TestRepo::with_files(&[("calc.py", CALC), ("tests/test_calc.py", RED)]);
    let imports = r.outside.join("imports");
    r.write(
        "suite/test_big.py",
        &format!(
            "{}\n\nimport pkg.sub\n\n\ndef test_big():\n    assert pkg.sub.VALUE == 1\n",
            count_in(&imports)
        ),
    );
    r.write("pkg/__init__.py", "");
    r.write("pkg/sub.py", "VALUE = 1\n");
    r.write("suite/test_flaky.py", flaky_test);
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "a flaky test"]);
    r.git(&["config", "factory.verify", "true"]);
    (r, imports)
}

fn flaky_order() -> Value {
    json!({
        "id": "abs", "title": "absolute", "intent": "fix absolute()",
        "allowed_files": ["calc.py"], "acceptance_commands": [],
        "fail_to_pass": ["python -m pytest -q tests/test_calc.py"],
        "pass_to_pass": ["python -m pytest -q suite"],
    })
}

#[test]
fn a_flaky_tests_re_run_collects_its_own_file_not_the_whole_suite() {
    // Fails on its second run only: passes on the baseline, fails after the change, passes
    // when re-run.
    let dir = tempfile::tempdir().expect("tempdir");
    let counter = dir.path().join("flaky");
    let (r, imports) = flaky_suite(&format!(
        "def test_flaky():\n    assert {} != 1\n",
        count_in(&counter)
    ));
    let out = run(&r, flaky_order());
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s = summary(&r);
    assert_eq!(s["attempts"][0]["tests"]["flaky"], 1, "{s}");
    // Collected on the baseline and after the change; the re-run of test_flaky.py's one
    // failing test did not import the rest of the suite a third time.
    assert_eq!(
        std::fs::read_to_string(&imports).ok().as_deref(),
        Some("2"),
        "the re-run collected only the failing test's file"
    );
    drop(dir);
}

#[test]
fn a_flaky_test_that_needs_the_rest_of_the_suite_imported_is_still_found_flaky() {
    // As click's pager tests: the test reaches `pkg.sub` through `pkg`, imported only by
    // another test file, so it fails when its file runs alone, flake or not.
    let dir = tempfile::tempdir().expect("tempdir");
    let counter = dir.path().join("flaky");
    let (r, imports) = flaky_suite(&format!(
        "import pkg\n\n\ndef test_flaky():\n    n = {}\n    assert pkg.sub.VALUE == 1\n    assert n != 1\n",
        count_in(&counter)
    ));
    let out = run(&r, flaky_order());
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s = summary(&r);
    assert_eq!(s["attempts"][0]["tests"]["flaky"], 1, "{s}");
    let remembered =
        std::fs::read_to_string(r.root.join(".git/factory/flaky.json")).unwrap_or_default();
    assert!(
        remembered.contains("suite/test_flaky.py::test_flaky"),
        "{remembered}"
    );
    // Its file alone, then the whole command once more for what still failed.
    assert_eq!(std::fs::read_to_string(&imports).ok().as_deref(), Some("3"));
    drop(dir);
}
