//! Tests may not be weakened (SPEC §3.9): a proposal that skips, removes or loosens a test,
//! or changes test configuration, fails its attempt with stage `tests_weakened` before
//! anything is applied — unless the work order says `"tests_may_change": true`, when the
//! edits are listed. Proposals are replayed; diffs are made by git from real edits.

use crate::common::*;
use serde_json::{json, Value};

/// The unified diff git makes of writing `new` over `path` (the tree is put back).
fn diff_of(r: &TestRepo, path: &str, new: &str) -> String {
    r.write(path, new);
    let d = r.git(&["diff", "--", path]);
    r.git(&["checkout", "--", path]);
    d
}

fn order(allowed: &[&str], accept: &[&str]) -> Value {
    json!({
        "id": "fix-neg",
        "title": "Fix negative numbers",
        "intent": "Make the tests pass.",
        "allowed_files": allowed,
        "acceptance_commands": accept,
    })
}

/// Runs one replayed proposal under `order` and returns the run's summary, checking that the
/// attempt failed with `tests_weakened` (exit 1) and left the repo as it was.
fn refused(r: &TestRepo, order: Value, proposal: String) -> Value {
    let wo = r.work_order(order);
    let replay = r.replay("rp", &[("1.json", proposal)]);
    let before = r.snapshot();
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(
        s["attempts"][0]["failure_brief"]["stage"], "tests_weakened",
        "{s}"
    );
    assert_eq!(s["ended_stage"], "tests_weakened");
    assert_eq!(r.snapshot(), before, "the repo is as it was");
    s
}

/// The run passes with its one proposal; returns the summary.
fn passes(r: &TestRepo, order: Value, proposal: String) -> Value {
    let wo = r.work_order(order);
    let replay = r.replay("rp", &[("1.json", proposal)]);
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    serde_json::from_str(&stdout_of(&out)).expect("json")
}

fn brief(s: &Value) -> String {
    s["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const PY_TEST: &str = "import pytest\n\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_neg():\n    assert add(-1, -1) == -2\n";

fn repo_with(files: &[(&str, &str)]) -> TestRepo {
    let r = TestRepo::with_files(files);
    r.git(&["config", "factory.verify", "true"]);
    r
}

/// A marker of each kind, in each language's test file, fails the attempt naming the file,
/// the line and the marker.
#[test]
fn skip_and_expected_failure_markers_of_each_language_are_refused() {
    let rust = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 3), 5);\n    }\n}\n";
    let go = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"add\")\n\t}\n}\n";
    let js = "const { add } = require('./calc');\n\ndescribe('add', () => {\n  it('adds', () => {\n    expect(add(2, 3)).toBe(5);\n  });\n});\n";
    let java = "class CalcTest {\n    @Test\n    void adds() {\n        assertEquals(5, Calc.add(2, 3));\n    }\n}\n";
    let unit = "import unittest\n\n\nclass Calc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n";
    let cases: Vec<(&str, &str, String, &str)> = vec![
        (
            "tests/test_calc.py",
            PY_TEST,
            PY_TEST.replace(
                "def test_neg",
                "@pytest.mark.skip(reason='later')\ndef test_neg",
            ),
            ":10: adds a skip or expected-failure marker: \"@pytest.mark.skip(reason='later')\"",
        ),
        (
            "tests/test_calc.py",
            PY_TEST,
            PY_TEST.replace(
                "def test_neg",
                "@pytest.mark.skipif(True, reason='x')\ndef test_neg",
            ),
            ":10: adds a skip",
        ),
        (
            "tests/test_calc.py",
            PY_TEST,
            PY_TEST.replace("def test_neg", "@pytest.mark.xfail\ndef test_neg"),
            ":10: adds a skip or expected-failure marker: \"@pytest.mark.xfail\"",
        ),
        (
            "tests/test_calc.py",
            PY_TEST,
            PY_TEST.replace(
                "def test_neg():\n",
                "def test_neg():\n    pytest.skip('later')\n",
            ),
            ":11: adds a skip",
        ),
        (
            "tests/test_unit.py",
            unit,
            unit.replace(
                "    def test_add",
                "    @unittest.skip('later')\n    def test_add",
            ),
            ":5: adds a skip",
        ),
        (
            "src/lib.rs",
            rust,
            rust.replace("    #[test]\n", "    #[test]\n    #[ignore]\n"),
            ":8: adds a skip or expected-failure marker: \"#[ignore]\"",
        ),
        (
            "calc_test.go",
            go,
            go.replace("{\n\tif", "{\n\tt.Skip(\"later\")\n\tif"),
            ":6: adds a skip or expected-failure marker: \"t.Skip(\\\"later\\\")\"",
        ),
        (
            "calc.test.js",
            js,
            js.replace("it('adds'", "it.skip('adds'"),
            ":4: adds a skip",
        ),
        (
            "calc.test.js",
            js,
            js.replace("it('adds'", "xit('adds'"),
            ":4: adds a skip",
        ),
        (
            "calc.test.js",
            js,
            js.replace("describe('add'", "describe.skip('add'"),
            ":3: adds a skip",
        ),
        (
            "calc.test.js",
            js,
            js.replace("it('adds'", "test.todo('adds');\n  it('adds'"),
            ":4: adds a skip",
        ),
        (
            "src/test/java/CalcTest.java",
            java,
            java.replace("    @Test\n", "    @Test\n    @Disabled\n"),
            ":3: adds a skip",
        ),
    ];
    for (path, before, after, said) in cases {
        let r = repo_with(&[(path, before)]);
        let s = refused(
            &r,
            order(&[path], &["true"]),
            proposal(&diff_of(&r, path, &after), "skip it"),
        );
        let text = brief(&s);
        assert!(text.contains(&format!("{path}{said}")), "{path}: {text}");
        assert!(text.contains("does not allow"), "{text}");
        let listed = &s["attempts"][0]["weakening"][0];
        assert_eq!(listed["file"], path, "{s}");
    }
}

/// A real pytest project: the model cannot make the red test pass, so it skips it. pytest
/// would then report `1 passed, 1 skipped` and exit 0; the attempt fails instead, and a
/// second proposal that fixes the code passes.
#[test]
fn a_skip_on_the_red_pytest_test_fails_and_a_fix_then_passes() {
    let r = repo_with(&[
        ("calc.py", "def add(a, b):\n    return abs(a) + abs(b)\n"),
        ("tests/test_calc.py", PY_TEST),
        ("pytest.ini", "[pytest]\npythonpath = .\n"),
    ]);
    let pytest = "python3 -m pytest -q -p no:cacheprovider";
    let allowed = ["calc.py", "tests/test_calc.py"];
    let skip = proposal(
        &diff_of(
            &r,
            "tests/test_calc.py",
            &PY_TEST.replace("def test_neg", "@pytest.mark.skip\ndef test_neg"),
        ),
        "skip the failing test",
    );
    // The skipped suite does pass pytest: the refusal is what stops it.
    r.write(
        "tests/test_calc.py",
        &PY_TEST.replace("def test_neg", "@pytest.mark.skip\ndef test_neg"),
    );
    let status = std::process::Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .current_dir(&r.root)
        .output()
        .expect("pytest runs");
    assert!(
        status.status.success(),
        "pytest is installed and passes the skipped suite"
    );
    r.git(&["checkout", "--", "tests/test_calc.py"]);
    let s = refused(&r, order(&allowed, &[pytest]), skip.clone());
    assert!(
        brief(&s).contains(
            "tests/test_calc.py:10: adds a skip or expected-failure marker: \"@pytest.mark.skip\""
        ),
        "{}",
        brief(&s)
    );
    assert!(
        s["attempts"][0]["acceptance"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "no check ran"
    );
    let id = s["run_id"].as_str().expect("id");
    let apply: Value = serde_json::from_str(&r.git(&[
        "show",
        &format!("refs/factory/{id}:attempt_1/apply_result.json"),
    ]))
    .expect("apply_result.json");
    assert_eq!(apply["ok"], false);
    assert_eq!(
        apply["weakening"],
        json!([{"file": "tests/test_calc.py", "line": 10, "what": "adds a skip or expected-failure marker: \"@pytest.mark.skip\""}])
    );
    let shown = stdout_of(&r.factory().args(["show", id]).output().expect("show"));
    assert!(shown.contains("attempt 1: tests_weakened"), "{shown}");
    assert!(
        shown.contains("tests weakened (refused):\n    tests/test_calc.py:10: adds a skip"),
        "{shown}"
    );

    // Routed like a scope violation: the next proposal gets its chance, and the fix passes.
    let fix = proposal(
        &diff_of(&r, "calc.py", "def add(a, b):\n    return a + b\n"),
        "add without abs",
    );
    let wo = r.work_order(order(&allowed, &[pytest]));
    let replay = r.replay("rp2", &[("1.json", skip), ("2.json", fix)]);
    let out = r.run_replay(&wo, &replay, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["attempts"][0]["failure_brief"]["stage"], "tests_weakened");
    assert!(s["attempts"][1]["failure_brief"].is_null());
    assert_eq!(r.read("tests/test_calc.py").as_deref(), Some(PY_TEST));
}

/// Removing a test function, by a diff or by a whole-file write, is refused.
#[test]
fn a_removed_test_is_refused_by_diff_and_by_writes() {
    let without = PY_TEST.replace("\n\ndef test_neg():\n    assert add(-1, -1) == -2\n", "");
    let r = repo_with(&[("tests/test_calc.py", PY_TEST)]);
    let s = refused(
        &r,
        order(&["tests/test_calc.py"], &["true"]),
        proposal(&diff_of(&r, "tests/test_calc.py", &without), "drop it"),
    );
    assert!(
        brief(&s).contains("tests/test_calc.py:10: removes the test test_neg"),
        "{}",
        brief(&s)
    );
    let sha = {
        use sha2::{Digest, Sha256};
        Sha256::digest(PY_TEST.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let writes = json!({"writes": [{"path": "tests/test_calc.py", "base_sha256": sha, "content": without}], "summary": "drop it"});
    let s = refused(
        &r,
        order(&["tests/test_calc.py"], &["true"]),
        writes.to_string(),
    );
    assert!(
        brief(&s).contains("tests/test_calc.py:10: removes the test test_neg"),
        "{}",
        brief(&s)
    );
    assert_eq!(
        s["attempts"][0]["touched_files"],
        json!(["tests/test_calc.py"])
    );
}

/// Fewer assertions is a removal; an assertion moved to another part of the file, or
/// rewritten, is not.
#[test]
fn removed_assertions_are_refused_and_moved_ones_are_not() {
    let filler: String = (0..12).map(|i| format!("    x{i} = {i}\n")).collect();
    let before = format!("def test_long():\n    assert first()\n{filler}    done()\n");
    let r = repo_with(&[("tests/test_long.py", &before)]);
    let loosened = before.replace("    assert first()\n", "    first()\n");
    let s = refused(
        &r,
        order(&["tests/test_long.py"], &["true"]),
        proposal(&diff_of(&r, "tests/test_long.py", &loosened), "loosen"),
    );
    assert!(
        brief(&s).contains("tests/test_long.py:2: removes an assertion: \"assert first()\""),
        "{}",
        brief(&s)
    );
    // Moved to the end of the test, twelve lines down: two hunks, one assertion each way.
    let moved = format!("def test_long():\n{filler}    assert first()\n    done()\n");
    let d = diff_of(&r, "tests/test_long.py", &moved);
    assert_eq!(d.matches("@@ -").count(), 2, "{d}");
    let s = passes(
        &r,
        order(&["tests/test_long.py"], &["true"]),
        proposal(&d, "move"),
    );
    assert!(s["attempts"][0]["weakening"].is_null(), "{s}");
    let rewritten = moved.replace("assert first()", "assert first() is not None");
    passes(
        &r,
        order(&["tests/test_long.py"], &["true"]),
        proposal(&diff_of(&r, "tests/test_long.py", &rewritten), "rewrite"),
    );
}

/// Any change to conftest.py is refused; in pyproject.toml only the pytest section counts.
#[test]
fn test_configuration_conftest_and_the_pytest_section_of_pyproject() {
    let pyproject = "[project]\nname = \"calc\"\nversion = \"1.0\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\ntestpaths = [\"tests\"]\n\n[tool.black]\nline-length = 88\n";
    let r = repo_with(&[
        ("tests/conftest.py", "import pytest\n"),
        ("pyproject.toml", pyproject),
        ("tests/test_calc.py", PY_TEST),
    ]);
    let allowed = ["tests/conftest.py", "pyproject.toml"];
    let conftest = "import pytest\n\ncollect_ignore = ['test_calc.py']\n";
    let s = refused(
        &r,
        order(&allowed, &["true"]),
        proposal(&diff_of(&r, "tests/conftest.py", conftest), "deselect"),
    );
    assert!(
        brief(&s).contains("tests/conftest.py:2: changes a file of test configuration"),
        "{}",
        brief(&s)
    );
    let deselect = pyproject.replace("addopts = \"-q\"", "addopts = \"-q -k 'not neg'\"");
    let s = refused(
        &r,
        order(&allowed, &["true"]),
        proposal(&diff_of(&r, "pyproject.toml", &deselect), "deselect"),
    );
    assert!(
        brief(&s).contains(
            "pyproject.toml:6: changes the test configuration in [tool.pytest.ini_options]"
        ),
        "{}",
        brief(&s)
    );
    // The project's version and black's settings are not test configuration.
    let unrelated = pyproject
        .replace("version = \"1.0\"", "version = \"1.1\"")
        .replace("line-length = 88", "line-length = 100");
    let s = passes(
        &r,
        order(&allowed, &["true"]),
        proposal(&diff_of(&r, "pyproject.toml", &unrelated), "bump"),
    );
    assert!(s["attempts"][0]["weakening"].is_null(), "{s}");
}

/// With `tests_may_change`, the same edits pass and are listed: in the record, in
/// apply_result.json and by `show`.
#[test]
fn tests_may_change_allows_the_edits_and_lists_them() {
    let r = repo_with(&[("tests/test_calc.py", PY_TEST)]);
    let mut allowed = order(&["tests/test_calc.py"], &["true"]);
    allowed["tests_may_change"] = json!(true);
    let after = PY_TEST
        .replace("def test_neg", "@pytest.mark.xfail\ndef test_neg")
        .replace("\n\ndef test_add():\n    assert add(2, 3) == 5\n", "");
    let s = passes(
        &r,
        allowed,
        proposal(
            &diff_of(&r, "tests/test_calc.py", &after),
            "rework the tests",
        ),
    );
    // Lines of what was removed are the baseline's; of what was added, the new file's.
    let listed = json!([
        {"file": "tests/test_calc.py", "line": 6, "what": "adds a skip or expected-failure marker: \"@pytest.mark.xfail\""},
        {"file": "tests/test_calc.py", "line": 6, "what": "removes the test test_add"},
        {"file": "tests/test_calc.py", "line": 7, "what": "removes an assertion: \"assert add(2, 3) == 5\" (the change removes 1 assertion line(s) and adds 0)"},
    ]);
    assert_eq!(s["attempts"][0]["weakening"], listed, "{s}");
    let id = s["run_id"].as_str().expect("id");
    let apply: Value = serde_json::from_str(&r.git(&[
        "show",
        &format!("refs/factory/{id}:attempt_1/apply_result.json"),
    ]))
    .expect("apply_result.json");
    assert_eq!(apply["weakening"], listed);
    assert_eq!(
        r.read("tests/test_calc.py").as_deref(),
        Some(after.as_str())
    );
    let shown = stdout_of(&r.factory().args(["show", id]).output().expect("show"));
    assert!(
        shown.contains("tests weakened (allowed by tests_may_change):\n    tests/test_calc.py:6: adds a skip or expected-failure marker: \"@pytest.mark.xfail\"\n    tests/test_calc.py:6: removes the test test_add\n"),
        "{shown}"
    );
}

/// A file that holds no tests may say `skip` and lose asserts: nothing to do with tests.
#[test]
fn a_file_without_tests_that_says_skip_is_not_flagged() {
    let reader = "def read(lines, skip=False):\n    assert lines is not None\n    return [l for l in lines if l]\n";
    let r = repo_with(&[("reader.py", reader), ("tests/test_calc.py", PY_TEST)]);
    let after = "import pytest\n\n\n@pytest.mark.skip\ndef read(lines, skip=True):\n    if skip:\n        return []\n    return [l for l in lines if l]\n";
    let s = passes(
        &r,
        order(&["reader.py"], &["true"]),
        proposal(&diff_of(&r, "reader.py", after), "skip by default"),
    );
    assert!(s["attempts"][0]["weakening"].is_null(), "{s}");
}
