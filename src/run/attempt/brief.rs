//! The failure brief (SPEC §3.4): what the next prompt is told about why an attempt failed,
//! bounded, with the work order's constraints repeated.

use crate::roles::po::exec::{excerpt, tail_chars};
use crate::run::attempt::session::Session;
use crate::store::records::{CmdResult, FailureBrief, Stage};
use std::path::Path;

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
    bound_to(text, BRIEF_CHARS)
}

fn bound_to(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
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
    let room = limit.saturating_sub(first.chars().count() + marker.chars().count());
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

/// `text` (a failing command's excerpt) with `note` as its second line, within the brief's
/// bound: right after the line saying what failed, where `show` and the next prompt see it
/// whatever the output's length.
pub(crate) fn with_note(text: &str, note: &str) -> String {
    let bounded = bound_to(text.trim_end(), BRIEF_CHARS.saturating_sub(note.len() + 1));
    match bounded.split_once('\n') {
        Some((first, rest)) => format!("{first}\n{note}\n{rest}"),
        None => format!("{bounded}\n{note}"),
    }
}

/// Whether a failing command's output (its streams' excerpts) reports a permission error on a path directly at the
/// root of the tree at `root` (SPEC §7.1: under Landlock the user's own tree's root takes no
/// new entries). Read from the lines saying `Permission denied` or `EACCES`: a quoted name,
/// an absolute or `./` path, or the name just before `: Permission denied` (as shells say
/// it), when it is a bare name (the command runs at the root) or an absolute path whose
/// folder is the root. The tree's own `.git` is left out: it is read-only by design.
pub(crate) fn denied_at_root(outputs: &[&str], root: &Path) -> bool {
    let real = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let at_root = |name: &str| -> bool {
        let path = Path::new(name);
        let leaf = if path.is_absolute() {
            if path.parent() != Some(root) && path.parent() != Some(&real) {
                return false;
            }
            path.file_name().and_then(|n| n.to_str()).unwrap_or("")
        } else {
            name.strip_prefix("./").unwrap_or(name)
        };
        !leaf.is_empty() && !leaf.contains('/') && ![".", "..", ".git"].contains(&leaf)
    };
    outputs
        .iter()
        .flat_map(|text| text.lines())
        .filter(|line| line.contains("Permission denied") || line.contains("EACCES"))
        .any(|line| named_paths(line).into_iter().any(at_root))
}

/// The names a permission error line may be about (see [`denied_at_root`]).
fn named_paths(line: &str) -> Vec<&str> {
    let mut names = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '\'')] {
        let mut rest = line;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else {
                break;
            };
            names.push(&after[..end]);
            rest = &after[end + close.len_utf8()..];
        }
    }
    for word in line.split_whitespace() {
        let word = word
            .trim_start_matches('(')
            .trim_end_matches([':', ',', ';', ')']);
        if word.starts_with('/') || word.starts_with("./") {
            names.push(word);
        }
    }
    // `sh: 1: cannot create out.txt: Permission denied`, `bash: out.txt: Permission denied`:
    // the word before, unless it starts the line (a program's name).
    if let Some((before, _)) = line.split_once(": Permission denied") {
        let words: Vec<&str> = before.split_whitespace().collect();
        if let [_, .., last] = words.as_slice() {
            names.push(last.trim_matches(['\'', '"', '‘', '’', '`']));
        }
    }
    names
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_error_is_at_the_root_only_when_it_names_a_root_level_path() {
        let root = Path::new("/nowhere/tree");
        let at_root = [
            "touch: cannot touch 'report.xml': Permission denied",
            "sed: couldn't open temporary file ./sedAb12Cd: Permission denied",
            "sh: 1: cannot create out.txt: Permission denied",
            "bash: line 1: out.txt: Permission denied",
            "PermissionError: [Errno 13] Permission denied: '/nowhere/tree/.coverage'",
            "rm: cannot remove \"old.txt\": Permission denied",
        ];
        for line in at_root {
            assert!(denied_at_root(&[line], root), "{line}");
        }
        let elsewhere = [
            "touch: cannot touch 'sub/report.xml': Permission denied",
            "PermissionError: [Errno 13] Permission denied: '/etc/passwd'",
            "sh: 1: cannot create .git/x: Permission denied",
            "touch: cannot touch '.git': Permission denied",
            "error: Permission denied",
            "Permission denied",
            "cannot touch 'report.xml': No such file or directory",
            "ls: cannot open directory '.': Permission denied",
        ];
        for line in elsewhere {
            assert!(!denied_at_root(&[line], root), "{line}");
        }
    }

    #[test]
    fn a_note_is_the_second_line_within_the_bound() {
        let long = format!("cmd → exit 1\n{}", "x\n".repeat(3000));
        let noted = with_note(&long, "NOTE");
        assert_eq!(noted.lines().nth(1), Some("NOTE"));
        assert!(noted.chars().count() <= BRIEF_CHARS);
        assert_eq!(bound_excerpt(&noted), noted);
    }
}
