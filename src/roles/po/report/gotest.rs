//! `go test -json` events on stdout: one JSON object per line; a test is `package/Test`
//! (subtests keep their `/`), its failure message the first line of its own output.

use super::{bound, first_line, Folded};
use crate::store::records::TestStatus;
use serde::Deserialize;
use std::collections::HashMap;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Event {
    action: String,
    #[serde(default)]
    package: String,
    #[serde(default)]
    test: Option<String>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    elapsed: Option<f64>,
}

pub fn recognise(head: &str) -> bool {
    head.lines().any(|l| {
        l.starts_with('{') && l.contains("\"Action\":") && serde_json::from_str::<Event>(l).is_ok()
    })
}

/// Lines go test prints itself around a test's own output.
fn framing(line: &str) -> bool {
    let t = line.trim_start();
    ["=== ", "--- ", "PASS", "FAIL", "ok  ", "coverage:"]
        .iter()
        .any(|p| t.starts_with(p))
}

pub fn parse(text: &str, out: &mut Folded) {
    let mut output: HashMap<String, String> = HashMap::new();
    let mut failed_packages: Vec<String> = Vec::new();
    let mut packages_with_red: Vec<String> = Vec::new();
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<Event>(line) else {
            continue;
        };
        let Some(test) = e.test.as_deref().filter(|t| !t.is_empty()) else {
            if e.action == "fail" && !e.package.is_empty() {
                failed_packages.push(e.package.clone());
            }
            continue;
        };
        let id = format!("{}/{}", e.package, test);
        let status = match e.action.as_str() {
            "output" => {
                if let Some(o) = e.output.as_deref().filter(|o| !framing(o)) {
                    output.entry(id).or_default().push_str(o);
                }
                continue;
            }
            "pass" => TestStatus::Passed,
            "fail" => TestStatus::Failed,
            "skip" => TestStatus::Skipped,
            _ => continue,
        };
        let (message, excerpt) = if status.is_red() {
            packages_with_red.push(e.package.clone());
            let text = output.remove(&id).unwrap_or_default();
            (
                Some(first_line(&text)).filter(|m| !m.is_empty()),
                Some(bound(&text)).filter(|m| !m.is_empty()),
            )
        } else {
            (None, None)
        };
        out.put(&id, status, e.elapsed, message, excerpt);
    }
    // A package that failed with no failing test (it did not build, or exited early) is
    // an error of its own.
    for p in failed_packages {
        if !packages_with_red.contains(&p) {
            out.put(
                &p,
                TestStatus::Error,
                None,
                Some("package failed".into()),
                None,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_events_subtests_and_failed_packages() {
        let text = r#"{"Action":"start","Package":"ex/calc"}
{"Action":"run","Package":"ex/calc","Test":"TestAdd"}
{"Action":"output","Package":"ex/calc","Test":"TestAdd","Output":"=== RUN   TestAdd\n"}
{"Action":"pass","Package":"ex/calc","Test":"TestAdd","Elapsed":0}
{"Action":"output","Package":"ex/calc","Test":"TestSub/neg","Output":"    calc_test.go:9: got 1, want 2\n"}
{"Action":"fail","Package":"ex/calc","Test":"TestSub/neg","Elapsed":0}
{"Action":"skip","Package":"ex/calc","Test":"TestSkip","Elapsed":0}
{"Action":"fail","Package":"ex/calc","Elapsed":0.01}
{"Action":"fail","Package":"ex/broken","Elapsed":0}"#;
        assert!(recognise(text));
        let mut f = Folded::default();
        parse(text, &mut f);
        let got = crate::roles::po::report::statuses(&f);
        assert_eq!(
            got,
            [
                ("ex/calc/TestAdd", TestStatus::Passed),
                ("ex/calc/TestSub/neg", TestStatus::Failed),
                ("ex/calc/TestSkip", TestStatus::Skipped),
                ("ex/broken", TestStatus::Error),
            ]
        );
        assert_eq!(
            f.tests[1].message.as_deref(),
            Some("calc_test.go:9: got 1, want 2")
        );
    }
}
