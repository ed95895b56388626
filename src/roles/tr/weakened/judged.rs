//! Files that hold judged tests (SPEC §3.9). A red test made to pass by an early `return`, a
//! changed expectation, an assertion inside `try`, a second definition under the same name
//! or a shadowed import adds no marker and removes no assertion, and its report then says
//! "passed" truthfully. Whether an edit to a file holding the tests the baseline's report
//! judged weakens them cannot be decided by reading it (as with `conftest.py`), so any change
//! to such a file is named; `tests_may_change` allows it.

use super::finding;
use crate::store::records::{CommandTests, TestStatus, Weakening};
use std::collections::BTreeMap;

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
            if !matches!(
                t.status,
                TestStatus::Passed | TestStatus::Failed | TestStatus::Error
            ) {
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

/// Names every touched path that holds judged tests.
pub fn in_judged(touched: &[String], judged: &[JudgedFile]) -> Vec<Weakening> {
    let mut out = Vec::new();
    for path in touched {
        let Some(j) = judged.iter().find(|j| &j.path == path) else {
            continue;
        };
        let more = match j.tests {
            0 | 1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        out.push(finding(
            path,
            None,
            format!(
                "changes a file holding tests the baseline's report judged ({}{more}): whether \
                 an edit to it weakens them cannot be decided by reading it",
                j.test
            ),
        ));
    }
    out
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
        let found = in_judged(&touched, &judged);
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
