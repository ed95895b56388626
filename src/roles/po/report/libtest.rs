//! libtest's human lines, as `cargo test` and `rustc --test` binaries print them:
//! `test NAME ... ok|FAILED|ignored`, and a `---- NAME stdout ----` section per failure.

use super::{bound, first_line, Folded};
use crate::store::records::TestStatus;

pub fn recognise(head: &str) -> bool {
    head.lines().any(|l| {
        (l.starts_with("running ") && (l.ends_with(" tests") || l.ends_with(" test")))
            || result_line(l).is_some()
    })
}

fn result_line(line: &str) -> Option<(&str, TestStatus)> {
    let rest = line.strip_prefix("test ")?;
    let (name, verdict) = rest.rsplit_once(" ... ")?;
    let status = match verdict.trim_end() {
        "ok" => TestStatus::Passed,
        "FAILED" => TestStatus::Failed,
        v if v == "ignored" || v.starts_with("ignored, ") => TestStatus::Skipped,
        _ => return None,
    };
    // `test NAME - should panic ... ok`
    let name = name.strip_suffix(" - should panic").unwrap_or(name);
    Some((name.trim(), status))
}

pub fn parse(text: &str, out: &mut Folded) {
    let mut sections: Vec<(String, String)> = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|r| r.strip_suffix(" stdout ----"))
        {
            sections.extend(open.take());
            open = Some((name.to_string(), String::new()));
            continue;
        }
        if let Some((_, body)) = open.as_mut() {
            if line == "failures:" || line.starts_with("test result: ") {
                sections.extend(open.take());
            } else {
                body.push_str(line);
                body.push('\n');
                continue;
            }
        }
        if let Some((name, status)) = result_line(line) {
            out.put(name, status, None, None, None);
        }
    }
    sections.extend(open.take());
    for (name, body) in sections {
        // The panic's own message is the line after `thread '…' panicked at …:`.
        let message = body
            .lines()
            .skip_while(|l| !l.contains(" panicked at "))
            .nth(1)
            .map(first_line)
            .or_else(|| Some(first_line(&body)).filter(|m| !m.is_empty()));
        out.put(&name, TestStatus::Failed, None, message, Some(bound(&body)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_results_and_failure_sections() {
        let text = "\nrunning 3 tests\ntest a::ok_one ... ok\ntest a::bad ... FAILED\ntest a::later ... ignored, slow\n\nfailures:\n\n---- a::bad stdout ----\n\nthread 'a::bad' panicked at src/lib.rs:3:5:\nassertion `left == right` failed\n  left: 1\n\nfailures:\n    a::bad\n\ntest result: FAILED. 1 passed; 1 failed; 1 ignored\n";
        assert!(recognise(text));
        let mut f = Folded::default();
        parse(text, &mut f);
        let got = crate::roles::po::report::statuses(&f);
        assert_eq!(
            got,
            [
                ("a::ok_one", TestStatus::Passed),
                ("a::bad", TestStatus::Failed),
                ("a::later", TestStatus::Skipped)
            ]
        );
        assert_eq!(
            f.tests[1].message.as_deref(),
            Some("assertion `left == right` failed")
        );
    }
}
