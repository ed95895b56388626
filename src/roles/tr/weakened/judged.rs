//! Files that hold judged tests (SPEC §3.9). A red test made to pass by an early `return`, a
//! changed expectation, an assertion inside `try`, a second definition under the same name
//! or a shadowed import adds no marker and removes no assertion, and its report then says
//! "passed" truthfully. Whether an edit to a file holding the tests the baseline's report
//! judged weakens them cannot be decided by reading it (as with `conftest.py`), so any change
//! to such a file is named; `tests_may_change` allows it.

use super::{finding, lang};
use crate::store::records::{CommandTests, TestStatus, Weakening};
use bstr::ByteSlice;
use std::collections::BTreeMap;
use std::path::Path;

/// What the baseline's reports judged, as TR can find it in a proposal's files.
#[derive(Debug, Clone, Default)]
pub struct Judged {
    /// The files pytest's ids name.
    pub files: Vec<JudgedFile>,
    /// The tests of runners whose ids name no file (`go test`, libtest, TAP, JUnit): each
    /// name a test definition may spell (`TestX`, `doubles_zero`, `'doubles zero'`), with the
    /// test id it comes from. A test file that defines one holds a judged test.
    pub names: BTreeMap<Vec<u8>, String>,
}

impl Judged {
    pub fn of(reports: &[CommandTests], files: Vec<JudgedFile>) -> Judged {
        let mut names = BTreeMap::new();
        for report in reports.iter().filter(|r| r.source != "pytest") {
            for t in report.tests.iter().filter(|t| judged(t.status)) {
                let whole = std::iter::once(t.id.as_str());
                for part in whole.chain(t.id.split("::")).chain(t.id.split('/')) {
                    let part = part.split('[').next().unwrap_or(part).trim();
                    if !part.is_empty() {
                        names
                            .entry(part.as_bytes().to_vec())
                            .or_insert_with(|| t.id.clone());
                    }
                }
            }
        }
        Judged { files, names }
    }
}

fn judged(status: TestStatus) -> bool {
    matches!(
        status,
        TestStatus::Passed | TestStatus::Failed | TestStatus::Error
    )
}

/// A file holding tests of the baseline's reports, with the test that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgedFile {
    pub path: String,
    /// A red test in it if it has one (the contract's), else a passing one.
    pub test: String,
    /// How many judged tests it holds.
    pub tests: usize,
}

/// The files of the tests the baseline's reports judged: those that passed (they must pass
/// again) and the red ones (the contract's). pytest names a test by its file
/// (`tests/test_x.py::test_y`, or the module alone for a collection error), relative to its
/// rootdir: the tree's root (`exists` says the tree has that file), or a folder below it —
/// then every file of the tree (`all`, listed once if ever) whose path ends with it. Other
/// runners' ids name no file.
pub fn judged_files(
    reports: &[CommandTests],
    exists: impl Fn(&str) -> bool,
    all: impl FnOnce() -> Vec<String>,
) -> Vec<JudgedFile> {
    let mut by_file: BTreeMap<&str, (Option<&str>, Option<&str>, usize)> = BTreeMap::new();
    for report in reports.iter().filter(|r| r.source == "pytest") {
        for t in &report.tests {
            if !judged(t.status) {
                continue;
            }
            let file = t.id.split("::").next().unwrap_or("");
            if file.is_empty() {
                continue;
            }
            let entry = by_file.entry(file).or_default();
            if t.status.is_red() {
                entry.0.get_or_insert(t.id.as_str());
            } else {
                entry.1.get_or_insert(t.id.as_str());
            }
            entry.2 += 1;
        }
    }
    let mut out: BTreeMap<String, JudgedFile> = BTreeMap::new();
    let mut listed: Option<Vec<String>> = None;
    let mut all = Some(all);
    for (file, (red, green, count)) in by_file {
        let paths: Vec<String> = if exists(file) {
            vec![file.to_string()]
        } else {
            let tree = listed.get_or_insert_with(|| all.take().map(|f| f()).unwrap_or_default());
            let suffix = format!("/{file}");
            tree.iter()
                .filter(|p| p.ends_with(&suffix))
                .cloned()
                .collect()
        };
        let test = red.or(green).unwrap_or(file);
        for path in paths {
            let j = out.entry(path.clone()).or_insert_with(|| JudgedFile {
                path,
                test: test.to_string(),
                tests: 0,
            });
            j.tests += count;
        }
    }
    out.into_values().collect()
}

/// Names every touched path that holds judged tests: a file pytest's ids name, or a test
/// file (by its runner's naming rules, or Rust's `tests/`) whose baseline text at `root`
/// defines a judged test of another runner. Rust unit tests share their file with the code
/// they test, which must stay changeable: they are left to the other rules.
pub fn in_judged(touched: &[String], judged: &Judged, root: &Path) -> Vec<Weakening> {
    let mut out = Vec::new();
    for path in touched {
        let found = match judged.files.iter().find(|j| &j.path == path) {
            Some(j) => Some((j.test.clone(), j.tests)),
            None => defined_in(path, judged, root).map(|id| (id, 1)),
        };
        let Some((test, count)) = found else {
            continue;
        };
        let more = match count {
            0 | 1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        out.push(finding(
            path,
            None,
            format!(
                "changes a file holding tests the baseline's report judged ({test}{more}): whether \
                 an edit to it weakens them cannot be decided by reading it"
            ),
        ));
    }
    out
}

/// The judged test a test file defines on the baseline, if any.
fn defined_in(path: &str, judged: &Judged, root: &Path) -> Option<String> {
    if judged.names.is_empty() {
        return None;
    }
    let lang = lang::lang_of(path)?;
    let in_tests = path.starts_with("tests/") || path.contains("/tests/");
    let test_file = match lang::by_path(path, lang) {
        lang::ByPath::Yes => true,
        _ => lang == lang::Lang::Rust && in_tests,
    };
    if !test_file {
        return None;
    }
    let bytes = crate::roles::tr::apply::read_state(root, path).ok()??.bytes;
    bytes.lines().find_map(|line| {
        let t = line.trim_ascii();
        let name = lang::test_def(lang, t).or_else(|| match lang {
            lang::Lang::Rust | lang::Lang::Java => lang::def_name(lang, t),
            _ => None,
        })?;
        // A JS test's name is its string literal, quotes and all.
        let name = match name {
            [q, inner @ .., end] if q == end && matches!(q, b'\'' | b'"' | b'`') => inner,
            _ => name,
        };
        judged.names.get(name).cloned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::TestResult;

    fn report(source: &str, tests: &[(&str, TestStatus)]) -> CommandTests {
        CommandTests {
            kind: "fail_to_pass".into(),
            command: vec!["pytest".into()],
            source: source.into(),
            tests: tests
                .iter()
                .map(|(id, status)| TestResult {
                    id: (*id).into(),
                    status: *status,
                    duration_seconds: None,
                    message: None,
                    excerpt: None,
                    flaky: false,
                    baseline: None,
                })
                .collect(),
            rerun: false,
        }
    }

    #[test]
    fn pytest_ids_name_their_files_from_the_root_or_a_folder_below_it() {
        let tracked: Vec<String> = [
            "tests/test_a.py",
            "pkg/tests/test_a.py",
            "pkg/tests/test_b.py",
            "tests/test_skipped.py",
            "calc.py",
        ]
        .map(String::from)
        .to_vec();
        let reports = [
            report(
                "pytest",
                &[
                    ("tests/test_a.py::test_green", TestStatus::Passed),
                    ("tests/test_a.py::test_red", TestStatus::Failed),
                    ("tests/test_b.py", TestStatus::Error),
                    ("tests/test_skipped.py::test_s", TestStatus::Skipped),
                ],
            ),
            report("libtest", &[("calc.py::x", TestStatus::Passed)]),
        ];
        let judged = judged_files(
            &reports,
            |p| tracked.iter().any(|t| t == p),
            || tracked.clone(),
        );
        let got: Vec<(&str, &str, usize)> = judged
            .iter()
            .map(|j| (j.path.as_str(), j.test.as_str(), j.tests))
            .collect();
        assert_eq!(
            got,
            [
                ("pkg/tests/test_b.py", "tests/test_b.py", 1),
                ("tests/test_a.py", "tests/test_a.py::test_red", 2),
            ]
        );
        let touched = ["calc.py".to_string(), "tests/test_a.py".to_string()];
        let judged = Judged::of(&reports, judged);
        let found = in_judged(&touched, &judged, Path::new("/nonexistent"));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].file, "tests/test_a.py");
        assert!(
            found[0]
                .what
                .contains("(tests/test_a.py::test_red and 1 more)"),
            "{}",
            found[0].what
        );
    }
}
