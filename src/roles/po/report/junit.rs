//! JUnit XML files named by git config `factory.testReport` (SPEC §3.9): globs relative to
//! the tree root; only files the command wrote or changed count. Parsed with quick-junit
//! (the format's flaky and rerun elements included), never by hand.

use super::{bound, first_line, Folded};
use crate::store::records::TestStatus;
use quick_junit::{NonSuccessKind, TestCaseStatus};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// How many entries one pattern's walk looks at, at most.
const WALK_LIMIT: usize = 20_000;

/// What a report file was before the command: changed files are the command's.
pub type Stamps = HashMap<PathBuf, (i64, i64, u64, u64)>;

fn stamp(m: &std::fs::Metadata) -> (i64, i64, u64, u64) {
    (m.mtime(), m.mtime_nsec(), m.size(), m.ino())
}

/// The files under `root` the patterns name now, with their stamps.
pub fn files(root: &Path, patterns: &[String]) -> Stamps {
    let mut out = Stamps::new();
    for pattern in patterns {
        let pattern = pattern.trim_start_matches("./").trim_start_matches('/');
        // Walk only below the pattern's literal folders.
        let literal: Vec<&str> = pattern
            .split('/')
            .take_while(|c| !c.contains(['*', '?', '[']))
            .collect();
        let literal = if literal.len() == pattern.split('/').count() {
            &literal[..literal.len().saturating_sub(1)]
        } else {
            &literal[..]
        };
        let start = root.join(literal.join("/"));
        let mut stack = vec![start];
        let mut seen = 0usize;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                seen += 1;
                if seen > WALK_LIMIT {
                    break;
                }
                let path = e.path();
                let Ok(m) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                let Ok(rel) = path.strip_prefix(root) else {
                    continue;
                };
                if m.is_dir() {
                    if e.file_name() != ".git" {
                        stack.push(path);
                    }
                } else if m.is_file()
                    && crate::roles::tr::protect::wildmatch(
                        pattern.as_bytes(),
                        rel.as_os_str().as_encoded_bytes(),
                    )
                {
                    out.insert(path, stamp(&m));
                }
            }
        }
    }
    out
}

/// The files the command wrote or changed, in name order.
pub fn changed(before: &Stamps, after: Stamps) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = after
        .into_iter()
        .filter(|(p, s)| before.get(p) != Some(s))
        .map(|(p, _)| p)
        .collect();
    out.sort();
    out
}

/// One JUnit document's test cases, `classname::name`.
pub fn parse(xml: &str, out: &mut Folded) {
    let Ok(mut report) = quick_junit::Report::deserialize_from_str(xml) else {
        return;
    };
    if report.test_suites.iter().all(|s| s.test_cases.is_empty()) && xml.contains("<testcase") {
        // Cases straight under `<testsuites>` (node's reporter writes them so): read them as
        // one suite's.
        if let Some(wrapped) = wrap_loose_cases(xml) {
            if let Ok(r) = quick_junit::Report::deserialize_from_str(&wrapped) {
                report = r;
            }
        }
    }
    for suite in &report.test_suites {
        for case in &suite.test_cases {
            let id = match &case.classname {
                Some(c) if !c.as_str().is_empty() => {
                    format!("{}::{}", c.as_str(), case.name.as_str())
                }
                _ => format!("{}::{}", suite.name.as_str(), case.name.as_str()),
            };
            let duration = case.time.map(|d| d.as_secs_f64());
            let (status, message, text) = match &case.status {
                TestCaseStatus::Success { .. } => (TestStatus::Passed, None, None),
                TestCaseStatus::NonSuccess {
                    kind,
                    message,
                    description,
                    ..
                } => (
                    match kind {
                        NonSuccessKind::Failure => TestStatus::Failed,
                        NonSuccessKind::Error => TestStatus::Error,
                    },
                    message.as_ref().map(|m| first_line(m.as_str())),
                    description.as_ref().map(|d| bound(d.as_str())),
                ),
                TestCaseStatus::Skipped { message, .. } => (
                    TestStatus::Skipped,
                    message.as_ref().map(|m| first_line(m.as_str())),
                    None,
                ),
            };
            let message = message.or_else(|| text.as_deref().map(first_line));
            out.put(&id, status, duration, message, text);
        }
    }
}

/// The document with its root's children put in one `<testsuite>`.
fn wrap_loose_cases(xml: &str) -> Option<String> {
    let open = xml.find("<testsuites")?;
    let open_end = open + xml[open..].find('>')? + 1;
    if xml[..open_end].ends_with("/>") {
        return None;
    }
    let close = xml.rfind("</testsuites>")?;
    (close >= open_end).then(|| {
        format!(
            "{}<testsuite name=\"\">{}</testsuite>{}",
            &xml[..open_end],
            &xml[open_end..close],
            &xml[close..]
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cases_failures_skips_and_flaky_runs() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="run" tests="4" failures="1" errors="0">
  <testsuite name="calc" tests="4" failures="1" errors="0" skipped="1">
    <testcase name="adds" classname="calc.Add" time="0.5"/>
    <testcase name="subtracts" classname="calc.Sub">
      <failure message="expected 1, got 2" type="AssertionError">trace here</failure>
    </testcase>
    <testcase name="later" classname="calc.Sub"><skipped message="not today"/></testcase>
    <testcase name="flaky" classname="calc.Sub">
      <flakyFailure message="once" type="x">first run</flakyFailure>
    </testcase>
  </testsuite>
</testsuites>"#;
        let mut f = Folded::default();
        parse(xml, &mut f);
        let got = crate::roles::po::report::statuses(&f);
        assert_eq!(
            got,
            [
                ("calc.Add::adds", TestStatus::Passed),
                ("calc.Sub::subtracts", TestStatus::Failed),
                ("calc.Sub::later", TestStatus::Skipped),
                ("calc.Sub::flaky", TestStatus::Passed),
            ]
        );
        assert_eq!(f.tests[1].message.as_deref(), Some("expected 1, got 2"));
    }

    #[test]
    fn cases_straight_under_testsuites_are_read() {
        let xml = "<?xml version=\"1.0\"?>\n<testsuites>\n<testcase name=\"a\" classname=\"test\"/>\n<testcase name=\"b\" classname=\"test\"><failure message=\"no\">x</failure></testcase>\n</testsuites>\n";
        let mut f = Folded::default();
        parse(xml, &mut f);
        let got = crate::roles::po::report::statuses(&f);
        assert_eq!(
            got,
            [
                ("test::a", TestStatus::Passed),
                ("test::b", TestStatus::Failed)
            ]
        );
    }
}
