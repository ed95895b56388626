use super::*;
use crate::git::files::FileState;
use crate::roles::tr::diff::{parse, Strip};

fn state(text: &str) -> Option<FileState> {
    Some(FileState {
        bytes: text.as_bytes().to_vec(),
        executable: false,
    })
}

/// The findings of writing `after` over `before` at `path`, as `file:line: what` lines.
fn writes(path: &str, before: Option<&str>, after: &str) -> Vec<String> {
    let outcome = FileOutcome {
        path: path.to_string(),
        before: before.and_then(state),
        after: state(after),
    };
    in_writes(&[outcome])
        .iter()
        .map(|w| w.to_string())
        .collect()
}

/// The findings of a diff over a tree holding `files`.
fn diff(files: &[(&str, &str)], text: &str) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, content) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, content).expect("write");
    }
    let patches = parse(text.as_bytes(), Strip::Auto).expect("parses");
    in_patches(&patches, dir.path())
        .iter()
        .map(|w| w.to_string())
        .collect()
}

const PY: &str = "import pytest\n\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_neg():\n    assert add(-1, -1) == -2\n";

#[test]
fn a_skip_marker_on_a_python_test_is_named_with_its_line() {
    let after = PY.replace(
        "def test_neg",
        "@pytest.mark.skip(reason='later')\ndef test_neg",
    );
    let found = writes("tests/test_calc.py", Some(PY), &after);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("tests/test_calc.py:10: adds a skip or expected-failure marker: \"@pytest.mark.skip(reason='later')\""),
        "{found:?}"
    );
    // The same edit to a file that holds no tests is not a weakening.
    let plain = "def skip(x):\n    return x\n";
    assert!(writes(
        "calc.py",
        Some(plain),
        "@pytest.mark.skip\ndef skip(x):\n    return x\n"
    )
    .is_empty());
}

#[test]
fn a_marker_moved_to_another_test_is_added_and_a_rewrite_that_keeps_it_is_not() {
    let before = PY.replace(
        "def test_add",
        "@pytest.mark.skipif(WIN, reason='x')\ndef test_add",
    );
    let moved = PY.replace(
        "def test_neg",
        "@pytest.mark.skipif(WIN, reason='x')\ndef test_neg",
    );
    assert_eq!(writes("tests/test_calc.py", Some(&before), &moved).len(), 1);
    let rewritten = before.replace("assert add(2, 3) == 5", "assert add(3, 2) == 5");
    assert!(writes("tests/test_calc.py", Some(&before), &rewritten).is_empty());
}

#[test]
fn removed_tests_and_assertions_are_named_and_moves_are_not() {
    let without = PY.replace("\n\ndef test_neg():\n    assert add(-1, -1) == -2\n", "");
    let found = writes("tests/test_calc.py", Some(PY), &without);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].contains(":10: removes the test test_neg"),
        "{found:?}"
    );
    assert!(found[1].contains(":11: removes an assertion"), "{found:?}");
    // The two tests swapped: every test and assertion is still there.
    let swapped = "import pytest\n\nfrom calc import add\n\n\ndef test_neg():\n    assert add(-1, -1) == -2\n\n\ndef test_add():\n    assert add(2, 3) == 5\n";
    assert!(writes("tests/test_calc.py", Some(PY), swapped).is_empty());
    // An assertion loosened into a pass is a removal; one rewritten is not.
    let loosened = PY.replace("    assert add(-1, -1) == -2", "    pass");
    let found = writes("tests/test_calc.py", Some(PY), &loosened);
    assert_eq!(found.len(), 1, "{found:?}");
    let rewritten = PY.replace(
        "assert add(-1, -1) == -2",
        "self.assertEqual(add(-1, -1), -2)",
    );
    assert!(writes("tests/test_calc.py", Some(PY), &rewritten).is_empty());
}

#[test]
fn an_assertion_moved_between_hunks_is_not_removed() {
    let lines: Vec<String> = (0..30).map(|i| format!("    x{i} = {i}")).collect();
    let mut before = String::from("def test_long():\n    assert first()\n");
    before.push_str(&lines.join("\n"));
    before.push_str("\n    done()\n");
    let text = "--- a/tests/test_m.py\n+++ b/tests/test_m.py\n@@ -1,3 +1,2 @@\n def test_long():\n-    assert first()\n     x0 = 0\n@@ -31,2 +30,3 @@\n     x29 = 29\n+    assert first()\n     done()\n";
    assert!(diff(&[("tests/test_m.py", &before)], text).is_empty());
    let only_removed = "--- a/tests/test_m.py\n+++ b/tests/test_m.py\n@@ -1,3 +1,2 @@\n def test_long():\n-    assert first()\n     x0 = 0\n";
    let found = diff(&[("tests/test_m.py", &before)], only_removed);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("tests/test_m.py:2: removes an assertion"),
        "{found:?}"
    );
}

#[test]
fn a_python_module_with_tests_is_found_by_its_lines() {
    let base = "def helper():\n    return 1\n\n\ndef test_helper():\n    assert helper() == 1\n";
    let text = "--- a/pkg/checks.py\n+++ b/pkg/checks.py\n@@ -5,2 +5,2 @@\n def test_helper():\n-    assert helper() == 1\n+    helper()\n";
    assert_eq!(diff(&[("pkg/checks.py", base)], text).len(), 1);
    let lib = "def f(x):\n    assert x\n    return x\n";
    let text = "--- a/pkg/lib.py\n+++ b/pkg/lib.py\n@@ -1,3 +1,2 @@\n def f(x):\n-    assert x\n     return x\n";
    assert!(diff(&[("pkg/lib.py", lib)], text).is_empty());
}

const RS: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    assert!(a < 100);\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn adds() {\n        assert_eq!(add(2, 3), 5);\n    }\n\n    #[test]\n    fn negative() {\n        assert_eq!(add(-1, -1), -2);\n    }\n}\n";

#[test]
fn rust_ignore_removed_tests_and_assertions_in_the_test_module_only() {
    let ignored = RS.replace(
        "    #[test]\n    fn negative",
        "    #[test]\n    #[ignore]\n    fn negative",
    );
    let found = writes("src/lib.rs", Some(RS), &ignored);
    assert_eq!(
        found,
        vec!["src/lib.rs:16: adds a skip or expected-failure marker: \"#[ignore]\""]
    );
    // The library's own assertion is not a test's.
    let lib = RS.replace("    assert!(a < 100);\n", "");
    assert!(writes("src/lib.rs", Some(RS), &lib).is_empty());
    let untested = RS.replace("    #[test]\n    fn negative", "    fn negative");
    let found = writes("src/lib.rs", Some(RS), &untested);
    assert!(
        found
            .iter()
            .any(|f| f.contains("removes the test negative")),
        "{found:?}"
    );
    let weaker = RS.replace("        assert_eq!(add(-1, -1), -2);\n", "");
    let found = writes("src/lib.rs", Some(RS), &weaker);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("src/lib.rs:17: removes an assertion"),
        "{found:?}"
    );
}

#[test]
fn go_and_js_markers_and_removed_tests() {
    let go = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"add\")\n\t}\n}\n";
    let skipped = go.replace(
        "func TestAdd(t *testing.T) {\n",
        "func TestAdd(t *testing.T) {\n\tt.Skip(\"later\")\n",
    );
    let found = writes("calc_test.go", Some(go), &skipped);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("calc_test.go:6: adds a skip"),
        "{found:?}"
    );
    assert!(writes("calc.go", Some(go), &skipped).is_empty());
    let js = "const { add } = require('./calc');\n\ntest('adds', () => {\n  expect(add(2, 3)).toBe(5);\n});\n";
    let skipped = js.replace("test('adds'", "test.skip('adds'");
    let found = writes("calc.test.js", Some(js), &skipped);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("calc.test.js:3: adds a skip"),
        "{found:?}"
    );
    let found = writes(
        "calc.test.js",
        Some(js),
        "const { add } = require('./calc');\n",
    );
    assert!(
        found.iter().any(|f| f.contains("removes the test 'adds'")),
        "{found:?}"
    );
}

#[test]
fn test_configuration_any_change_and_only_test_sections() {
    let found = writes(
        "tests/conftest.py",
        Some("import pytest\n"),
        "import pytest\ncollect_ignore = ['test_calc.py']\n",
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("changes a file of test configuration"),
        "{found:?}"
    );
    assert_eq!(writes("conftest.py", None, "x = 1\n").len(), 1);
    let py = "[project]\nname = \"calc\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\ntestpaths = [\"tests\"]\n\n[tool.black]\nline-length = 88\n";
    let black = "--- a/pyproject.toml\n+++ b/pyproject.toml\n@@ -8,2 +8,2 @@\n [tool.black]\n-line-length = 88\n+line-length = 100\n";
    assert!(diff(&[("pyproject.toml", py)], black).is_empty());
    // The hunk starts below the section's header: the baseline says which section it is in.
    let pytest = "--- a/pyproject.toml\n+++ b/pyproject.toml\n@@ -5,2 +5,2 @@\n-addopts = \"-q\"\n+addopts = \"-q -k 'not neg'\"\n testpaths = [\"tests\"]\n";
    let found = diff(&[("pyproject.toml", py)], pytest);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(
            "pyproject.toml:5: changes the test configuration in [tool.pytest.ini_options]"
        ),
        "{found:?}"
    );
    let cargo = "[package]\nname = \"calc\"\n\n[lib]\npath = \"src/lib.rs\"\n";
    let found = writes(
        "Cargo.toml",
        Some(cargo),
        &format!("{cargo}harness = false\n"),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    let found = writes(
        "Cargo.toml",
        Some(cargo),
        &format!("{cargo}\n[[test]]\nname = \"it\"\n"),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(writes("Cargo.toml", Some(cargo), &cargo.replace("calc", "calc2")).is_empty());
}

#[test]
fn deleted_and_moved_test_files_and_bytes_that_are_not_utf8() {
    let text = "diff --git a/tests/test_calc.py b/tests/test_calc.py\ndeleted file mode 100644\n--- a/tests/test_calc.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-def test_a():\n-    assert 1\n";
    let found = diff(
        &[("tests/test_calc.py", "def test_a():\n    assert 1\n")],
        text,
    );
    assert_eq!(
        found,
        vec!["tests/test_calc.py: deletes a file that holds tests"]
    );
    let text = "diff --git a/tests/test_calc.py b/tests/helpers.py\nsimilarity index 100%\nrename from tests/test_calc.py\nrename to tests/helpers.py\n";
    let found = diff(
        &[("tests/test_calc.py", "def test_a():\n    assert 1\n")],
        text,
    );
    assert_eq!(found.len(), 1, "{found:?}");
    let latin = b"def test_caf\xe9():\n    assert nom() == b'caf\xe9'\n".to_vec();
    let outcome = FileOutcome {
        path: "tests/test_l.py".to_string(),
        before: Some(FileState {
            bytes: latin,
            executable: false,
        }),
        after: state("def test_other():\n    pass\n"),
    };
    let found = in_writes(&[outcome]);
    assert_eq!(found.len(), 2, "{found:?}");
}

#[test]
fn a_test_file_the_baseline_lacks_held_no_tests() {
    let text = "--- a/tests/test_new.py\n+++ b/tests/test_new.py\n@@ -0,0 +1,3 @@\n+@pytest.mark.skip\n+def test_later():\n+    pass\n";
    assert!(diff(&[], text).is_empty());
}

#[test]
fn hunks_without_numbers_are_placed_in_the_baseline() {
    let text = b"*** Begin Patch\n*** Update File: tests/test_calc.py\n@@\n def test_neg():\n-    assert add(-1, -1) == -2\n+    pass\n*** End Patch\n";
    let patches = crate::roles::tr::dialects::parse_envelope(text).expect("parses");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("tests")).expect("mkdir");
    std::fs::write(dir.path().join("tests/test_calc.py"), PY).expect("write");
    let found = in_patches(&patches, dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].line, Some(11), "{found:?}");
}

#[test]
fn search_replace_blocks_are_read_like_any_diff() {
    let text = b"tests/test_calc.py\n<<<<<<< SEARCH\ndef test_neg():\n=======\n@pytest.mark.xfail\ndef test_neg():\n>>>>>>> REPLACE\n";
    let patches = crate::roles::tr::dialects::parse_search_replace(text).expect("parses");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("tests")).expect("mkdir");
    std::fs::write(dir.path().join("tests/test_calc.py"), PY).expect("write");
    let found: Vec<String> = in_patches(&patches, dir.path())
        .iter()
        .map(|w| w.to_string())
        .collect();
    assert_eq!(
        found,
        vec![
            "tests/test_calc.py:10: adds a skip or expected-failure marker: \"@pytest.mark.xfail\""
        ]
    );
}

#[test]
fn a_test_section_set_by_dotted_keys_inline_tables_or_spaced_names_is_test_configuration() {
    let project = "[project]\nname = \"calc\"\n";
    for (what, after) in [
        (
            "dotted below [tool]",
            format!("{project}\n[tool]\npytest.addopts = [\"-k\", \"not zero\"]\n"),
        ),
        (
            "dotted at the root",
            format!("tool.pytest.addopts = [\"-k\", \"not zero\"]\n{project}"),
        ),
        (
            "inline table",
            format!("{project}\n[tool]\npytest = {{ addopts = [\"-k\", \"not zero\"] }}\n"),
        ),
        (
            "nested inline tables",
            format!("tool = {{ pytest = {{ addopts = \"-k 'not zero'\" }} }}\n{project}"),
        ),
        (
            "spaced and quoted name",
            format!("{project}\n[ tool . \"pytest\" ]\naddopts = \"-k 'not zero'\"\n"),
        ),
    ] {
        let found = writes("pyproject.toml", Some(project), &after);
        assert_eq!(found.len(), 1, "{what}: {found:?}");
        assert!(found[0].contains("test configuration"), "{what}: {found:?}");
    }
    // A multi-line value of a test key: its lines below the key are test configuration too.
    let py = "[tool]\npytest.addopts = [\n    \"-q\",\n]\n\n[tool.black]\nline-length = 88\n";
    let edit = "--- a/pyproject.toml\n+++ b/pyproject.toml\n@@ -3,1 +3,1 @@\n-    \"-q\",\n+    \"-k\", \"not zero\",\n";
    assert_eq!(diff(&[("pyproject.toml", py)], edit).len(), 1);
    // Other tools' keys, and a `-k=…` inside a string, are not.
    let black =
        format!("{project}\n[tool]\nblack.line-length = 100\nruff = {{ select = [\"E\"] }}\n");
    assert!(writes("pyproject.toml", Some(project), &black).is_empty());
    // Cargo: `lib.test = false` and `lib = { test = false }` as `[lib] test = false`.
    let cargo = "[package]\nname = \"calc\"\n";
    for extra in [
        "lib.test = false\n",
        "lib = { path = \"src/lib.rs\", test = false }\n",
    ] {
        let found = writes("Cargo.toml", Some(cargo), &format!("{extra}{cargo}"));
        assert_eq!(found.len(), 1, "{extra}: {found:?}");
    }
}
