//! The failure brief (SPEC §3.4): what the next prompt is told about why an attempt failed,
//! bounded, with the work order's constraints repeated.

use crate::roles::po::exec::{excerpt, tail_chars};
use crate::run::attempt::session::Session;
use crate::store::records::{CmdResult, FailureBrief, Stage};

pub(crate) const BRIEF_CHARS: usize = 2000;

impl Session<'_> {
    pub(crate) fn reminder(&self) -> String {
        let mut s = format!(
            "change only {}; reply with the JSON contract only",
            self.plan.wo.order.allowed_files.join(", ")
        );
        if !self.plan.wo.order.forbidden.is_empty() {
            s.push_str(&format!(
                "; forbidden: {}",
                self.plan.wo.order.forbidden.join("; ")
            ));
        }
        s
    }

    pub(crate) fn brief(
        &self,
        stage: Stage,
        command: Option<&CmdResult>,
        text: &str,
    ) -> FailureBrief {
        FailureBrief {
            stage,
            command: command.map(CmdResult::display),
            exit_code: command.and_then(|c| c.exit_code),
            primary_error_excerpt: bound_excerpt(text.trim_end()),
            constraints_reminder: self.reminder(),
        }
    }
}

/// Bounds a brief's excerpt to BRIEF_CHARS, keeping its first line (what failed) and the
/// tail (where errors are).
pub(crate) fn bound_excerpt(text: &str) -> String {
    if text.chars().count() <= BRIEF_CHARS {
        return text.to_string();
    }
    let first: String = text
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(300)
        .collect();
    let marker = "\n[…]\n";
    let room = BRIEF_CHARS - first.chars().count() - marker.chars().count();
    format!("{first}{marker}{}", tail_chars(text, room))
}

/// What the next prompt is told about a failing command: how it ended and the tails of its
/// output, within the brief's bound.
pub(crate) fn command_excerpt(cmd: &CmdResult) -> String {
    let mut text = format!("{} → {}\n", cmd.display(), cmd.outcome());
    let out = excerpt(&cmd.stdout_trunc);
    let err = excerpt(&cmd.stderr_trunc);
    let half = BRIEF_CHARS / 2;
    match (out.trim().is_empty(), err.trim().is_empty()) {
        (false, false) => {
            text.push_str(&format!(
                "--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
                tail_chars(&out, half),
                tail_chars(&err, half)
            ));
        }
        (false, true) => text.push_str(&tail_chars(&out, BRIEF_CHARS)),
        (true, false) => text.push_str(&tail_chars(&err, BRIEF_CHARS)),
        (true, true) => {}
    }
    text
}

/// A brief that names the failing tests first (SPEC §3.9), then as much of the log's tail as
/// the bound leaves room for.
pub(crate) fn with_tests_first(tests: Option<&str>, log: &str) -> String {
    let Some(tests) = tests.filter(|t| !t.trim().is_empty()) else {
        return log.to_string();
    };
    let tests = tests.trim_end();
    let room = BRIEF_CHARS.saturating_sub(tests.chars().count() + 1);
    if room < 80 {
        return tests.chars().take(BRIEF_CHARS).collect();
    }
    // The log's first line (the command and how it ended) stays; then its tail.
    let (head, rest) = log.split_once('\n').unwrap_or((log, ""));
    let head: String = head.chars().take(room.min(300)).collect();
    let left = room.saturating_sub(head.chars().count() + 1);
    format!("{tests}\n{head}\n{}", tail_chars(rest, left))
}
