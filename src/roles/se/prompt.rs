//! The SE prompt (SPEC §3.2): built only from the work order, bounded context file contents,
//! the previous FailureBrief and the output contract — so the same inputs give the same bytes.

use crate::identity::sha256_hex;
use crate::store::records::{BaselineResult, FailureBrief, TestResult};
use crate::workorder::{WorkOrder, CONTEXT_BUDGET_BYTES};
use std::fmt::Write as _;

pub const SYSTEM: &str = "You are the SE (software engineer) of a deterministic change harness. \
You propose one change as strict JSON and nothing else. You never run commands; the harness \
applies your change, runs the checks and decides.";

const CONTRACT: &str = r#"## Output contract

Reply with exactly one JSON object and nothing else: no prose, no Markdown, no code fences.
Either a unified diff:

{"unified_diff": "diff --git a/PATH b/PATH\n--- a/PATH\n+++ b/PATH\n@@ -L,N +L,M @@\n ...", "summary": "one line"}

or whole-file writes (base_sha256 is the sha256 shown above for the file's current bytes, or null to create a new file):

{"writes": [{"path": "PATH", "base_sha256": "HEX or null", "content": "the whole new file", "executable": false}], "summary": "one line"}

Rules:
- Touch only the files listed under "Files you may change". Anything else is rejected unapplied.
- Hunk line numbers and counts must be exact; context lines must match the file byte for byte.
- If the work is already done, reply {"unified_diff": "", "summary": "why nothing needs to change"}.
"#;

/// A context file as shown to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    pub path: String,
    pub sha256: Option<String>,
    pub size: usize,
    pub shown: String,
    pub truncated: bool,
}

/// Reads the context files in order within the 200 KB budget; a file past the budget is cut
/// at the same byte every time (on a character boundary), and the cut is noted.
pub fn read_context(order: &WorkOrder, read: impl Fn(&str) -> Option<Vec<u8>>) -> Vec<ContextFile> {
    let mut budget = CONTEXT_BUDGET_BYTES;
    let mut out = Vec::new();
    for path in &order.context_files {
        let bytes = match read(path) {
            Some(b) => b,
            None => {
                out.push(ContextFile {
                    path: path.clone(),
                    sha256: None,
                    size: 0,
                    shown: String::new(),
                    truncated: false,
                });
                continue;
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let mut cut = text.len().min(budget);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        budget -= cut;
        out.push(ContextFile {
            path: path.clone(),
            sha256: Some(sha256_hex(&bytes)),
            size: bytes.len(),
            shown: text[..cut].to_string(),
            truncated: cut < text.len(),
        });
    }
    out
}

/// How many red tests the first prompt names before "and N more" (as a failure brief does).
const RED_TESTS: usize = 20;

/// What the baseline check found red, for the first prompt (SPEC §3.8): the red
/// `fail_to_pass` commands with their excerpts, and the red tests the contract relies on
/// (named `fail_to_pass` tests, the tests of `fail_to_pass` commands) with their messages.
#[derive(Debug, Default)]
pub struct Red<'a> {
    pub commands: Vec<&'a BaselineResult>,
    pub tests: Vec<&'a TestResult>,
}

/// The prompt for one attempt. `red` holds what the baseline check found red (the first
/// attempt's prompt only): the model starts from the failing test, not only from the intent.
/// An order without a contract gets the same bytes as before contracts existed.
pub fn build(
    order: &WorkOrder,
    context: &[ContextFile],
    acceptance: &[String],
    brief: Option<&FailureBrief>,
    red: &Red<'_>,
) -> String {
    let mut p = String::new();
    order_section(&mut p, order);
    checks_section(&mut p, order, acceptance);
    red_section(&mut p, red);
    context_section(&mut p, context);
    if let Some(b) = brief {
        brief_section(&mut p, b);
    }
    p.push_str(CONTRACT);
    p
}

/// The work order: title, intent, notes, the files that may change, what is forbidden.
fn order_section(p: &mut String, order: &WorkOrder) {
    let _ = writeln!(p, "# Work order {}: {}\n", order.id, order.title);
    let _ = writeln!(p, "## Intent\n\n{}\n", order.intent.trim_end());
    if let Some(notes) = order.notes.as_deref().filter(|n| !n.trim().is_empty()) {
        let _ = writeln!(p, "## Notes\n\n{}\n", notes.trim_end());
    }
    let _ = writeln!(p, "## Files you may change\n");
    for f in &order.allowed_files {
        let _ = writeln!(p, "- {f}");
    }
    p.push('\n');
    if !order.forbidden.is_empty() {
        let _ = writeln!(p, "## Forbidden\n");
        for f in &order.forbidden {
            let _ = writeln!(p, "- {f}");
        }
        p.push('\n');
    }
}

/// The checks the harness runs after applying the change.
fn checks_section(p: &mut String, order: &WorkOrder, acceptance: &[String]) {
    let _ = writeln!(p, "## Checks the harness runs after applying your change\n");
    let _ = writeln!(p, "- the repository's global verification");
    for c in &order.pass_to_pass {
        let _ = writeln!(p, "- {c} (pass_to_pass: passes now and must keep passing)");
    }
    for c in &order.fail_to_pass {
        let _ = writeln!(
            p,
            "- {c} (fail_to_pass: fails now and must pass after your change)"
        );
    }
    for c in acceptance {
        let _ = writeln!(p, "- {c}");
    }
    for t in &order.fail_to_pass_tests {
        let _ = writeln!(p, "- test {t} (fails now and must pass after your change)");
    }
    for t in &order.pass_to_pass_tests {
        let _ = writeln!(p, "- test {t} (passes now and must keep passing)");
    }
    if order.has_contract() {
        let _ = writeln!(
            p,
            "\nThe files these tests name are protected: a change that edits them is rejected unapplied."
        );
    }
    p.push('\n');
}

/// What the baseline check found red, when it found anything: the failing tests first, by
/// id and message, then each red command's excerpt.
fn red_section(p: &mut String, red: &Red<'_>) {
    if red.commands.is_empty() && red.tests.is_empty() {
        return;
    }
    let _ = writeln!(
        p,
        "## The failing tests, run on the original files before you were asked\n"
    );
    if !red.tests.is_empty() {
        let _ = writeln!(p, "failing tests ({}):", red.tests.len());
        for t in red.tests.iter().take(RED_TESTS) {
            let status = t.status.as_str();
            match t.message.as_deref().filter(|m| !m.trim().is_empty()) {
                Some(m) => {
                    let m: String = m.chars().take(300).collect();
                    let _ = writeln!(p, "- {} ({status}): {m}", t.id);
                }
                None => {
                    let _ = writeln!(p, "- {} ({status})", t.id);
                }
            }
        }
        if red.tests.len() > RED_TESTS {
            let _ = writeln!(p, "- … and {} more", red.tests.len() - RED_TESTS);
        }
        p.push('\n');
    }
    for r in &red.commands {
        let _ = writeln!(p, "command: {}", r.display());
        match r.exit_code {
            Some(code) => {
                let _ = writeln!(p, "exit code: {code}");
            }
            None => {
                let _ = writeln!(p, "ended: {}", r.outcome);
            }
        }
        let _ = writeln!(p, "excerpt:\n<<<<<<\n{}\n>>>>>>\n", r.excerpt.trim_end());
    }
}

/// The context files, each with its sha256 (or said not to exist yet) and any cut noted.
fn context_section(p: &mut String, context: &[ContextFile]) {
    if context.is_empty() {
        return;
    }
    let _ = writeln!(p, "## Context files\n");
    for f in context {
        match &f.sha256 {
            None => {
                let _ = writeln!(p, "### {} (does not exist yet; base_sha256 null)\n", f.path);
            }
            Some(sha) => {
                let _ = writeln!(p, "### {} (sha256 {sha}, {} bytes)\n", f.path, f.size);
                let _ = writeln!(p, "<<<<<< {}", f.path);
                p.push_str(&f.shown);
                if !f.shown.is_empty() && !f.shown.ends_with('\n') {
                    p.push('\n');
                }
                let _ = writeln!(p, ">>>>>> {}", f.path);
                if f.truncated {
                    let _ = writeln!(
                        p,
                        "[truncated: showing the first {} of {} bytes; the context budget is {} KB]",
                        f.shown.len(),
                        f.size,
                        CONTEXT_BUDGET_BYTES / 1024
                    );
                }
                p.push('\n');
            }
        }
    }
}

/// The previous attempt's FailureBrief.
fn brief_section(p: &mut String, b: &FailureBrief) {
    let _ = writeln!(p, "## The previous attempt failed\n");
    let _ = writeln!(p, "stage: {}", b.stage.as_str());
    if let Some(c) = &b.command {
        let _ = writeln!(p, "command: {c}");
    }
    if let Some(code) = b.exit_code {
        let _ = writeln!(p, "exit code: {code}");
    }
    let _ = writeln!(
        p,
        "excerpt:\n<<<<<<\n{}\n>>>>>>",
        b.primary_error_excerpt.trim_end()
    );
    let _ = writeln!(p, "reminder: {}\n", b.constraints_reminder);
    let _ = writeln!(
        p,
        "Every attempt starts again from the original files above; propose the whole change again, corrected.\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workorder::LoadedWorkOrder;

    fn order(extra: serde_json::Value) -> WorkOrder {
        let mut v = serde_json::json!({"id": "w", "title": "t", "intent": "i",
            "allowed_files": ["calc.py"], "acceptance_commands": ["true"]});
        for (k, val) in extra.as_object().expect("object") {
            v[k] = val.clone();
        }
        LoadedWorkOrder::from_value(v, "x").expect("valid").order
    }

    #[test]
    fn the_red_test_goes_into_the_prompt() {
        let o =
            order(serde_json::json!({"fail_to_pass": ["python -m unittest tests/test_calc.py"]}));
        let red = BaselineResult {
            kind: "fail_to_pass".into(),
            command: vec![
                "python".into(),
                "-m".into(),
                "unittest".into(),
                "tests/test_calc.py".into(),
            ],
            passed: false,
            exit_code: Some(1),
            outcome: "exit 1".into(),
            excerpt: "AssertionError: -1 != 1".into(),
            duration_seconds: 0.1,
            cached: false,
        };
        let red = Red {
            commands: vec![&red],
            tests: Vec::new(),
        };
        let p = build(&o, &[], &o.acceptance_commands, None, &red);
        assert!(p.contains("fail_to_pass: fails now and must pass"));
        assert!(p.contains("command: python -m unittest tests/test_calc.py\nexit code: 1\n"));
        assert!(p.contains("AssertionError: -1 != 1"));
    }

    #[test]
    fn the_red_tests_come_first_with_their_messages_twenty_at_most() {
        use crate::store::records::TestStatus;
        let o = order(serde_json::json!({"fail_to_pass_tests": ["tests/t.py::test_*"]}));
        let tests: Vec<TestResult> = (0..23)
            .map(|n| TestResult {
                id: format!("tests/t.py::test_{n:02}"),
                status: TestStatus::Failed,
                duration_seconds: None,
                message: (n != 1).then(|| format!("AssertionError: {n} != -{n}")),
                excerpt: None,
                flaky: false,
                baseline: None,
            })
            .collect();
        let red = Red {
            commands: Vec::new(),
            tests: tests.iter().collect(),
        };
        let p = build(&o, &[], &o.acceptance_commands, None, &red);
        assert!(p.contains(
            "before you were asked\n\nfailing tests (23):\n- tests/t.py::test_00 (failed): AssertionError: 0 != -0\n- tests/t.py::test_01 (failed)\n"
        ));
        assert!(p.contains("- tests/t.py::test_19 (failed)"));
        assert!(!p.contains("test_20"));
        assert!(p.contains("- … and 3 more\n"));
    }

    #[test]
    fn an_order_without_a_contract_gets_the_old_checks_section() {
        let o = order(serde_json::json!({}));
        let p = build(&o, &[], &o.acceptance_commands, None, &Red::default());
        assert!(p.contains(
            "## Checks the harness runs after applying your change\n\n- the repository's global verification\n- true\n\n## Output contract"
        ));
    }
}
