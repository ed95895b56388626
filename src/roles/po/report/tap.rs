//! TAP 14 (and 13) on stdout: `ok`/`not ok` test points, `# SKIP`/`# TODO` directives,
//! indented subtests named by `# Subtest:` lines, YAML diagnostics after a point.

use super::{bound, first_line, Folded};
use crate::store::records::TestStatus;

pub fn recognise(head: &str) -> bool {
    head.lines().any(|l| {
        let l = l.trim_start();
        l == "TAP version 14" || l == "TAP version 13"
    })
}

/// A test point: its indent level, description and status.
fn point(line: &str) -> Option<(usize, String, TestStatus)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let body = line.trim_start_matches(' ');
    let (ok, rest) = if let Some(r) = body.strip_prefix("not ok") {
        (false, r)
    } else if let Some(r) = body.strip_prefix("ok") {
        (true, r)
    } else {
        return None;
    };
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let rest = rest
        .trim_start()
        .trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("- ").unwrap_or(rest);
    let (desc, directive) = match rest.find(" # ") {
        Some(i) => (&rest[..i], rest[i + 3..].trim()),
        None => (rest, ""),
    };
    let word = directive
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_uppercase();
    let status = match (ok, word.as_str()) {
        (_, "SKIP") => TestStatus::Skipped,
        (true, "TODO") => TestStatus::Xpassed,
        (false, "TODO") => TestStatus::Xfailed,
        (true, _) => TestStatus::Passed,
        (false, _) => TestStatus::Failed,
    };
    Some((indent / 4, desc.trim().to_string(), status))
}

pub fn parse(text: &str, out: &mut Folded) {
    let mut names: Vec<String> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let trimmed = line.trim_start_matches(' ');
        if let Some(name) = trimmed.strip_prefix("# Subtest:") {
            let level = (line.len() - trimmed.len()) / 4;
            names.truncate(level);
            names.push(name.trim().to_string());
            continue;
        }
        let Some((level, desc, status)) = point(line) else {
            continue;
        };
        names.truncate(level);
        let mut id = names.clone();
        id.push(desc);
        let id = id.join(" > ");
        // The YAML block that follows, indented two more spaces, between `---` and `...`.
        let mut yaml = String::new();
        if lines.get(i).is_some_and(|l| l.trim() == "---") {
            i += 1;
            while i < lines.len() && lines[i].trim() != "..." {
                yaml.push_str(lines[i].trim_start());
                yaml.push('\n');
                i += 1;
            }
            i += 1;
        }
        let duration = yaml
            .lines()
            .find_map(|l| l.strip_prefix("duration_ms:"))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|ms| ms / 1000.0);
        let (message, excerpt) = if status.is_red() && !yaml.is_empty() {
            let msg = yaml
                .lines()
                .find_map(|l| {
                    l.strip_prefix("error:")
                        .or_else(|| l.strip_prefix("message:"))
                })
                .map(|m| {
                    first_line(
                        m.trim()
                            .trim_matches(|c| c == '\'' || c == '"' || c == '|' || c == '>'),
                    )
                })
                .filter(|m| !m.is_empty());
            (msg, Some(bound(&yaml)))
        } else {
            (None, None)
        };
        out.put(&id, status, duration, message, excerpt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_points_directives_and_subtests() {
        let text = "TAP version 13\n# Subtest: math\n    # Subtest: adds\n    ok 1 - adds\n      ---\n      duration_ms: 2\n      ...\n    not ok 2 - subtracts\n      ---\n      error: 'Expected values to be equal'\n      ...\n    1..2\nnot ok 1 - math\nok 2 - later # SKIP not today\nnot ok 3 - wip # TODO soon\n1..3\n";
        assert!(recognise(text));
        let mut f = Folded::default();
        parse(text, &mut f);
        let got = crate::roles::po::report::statuses(&f);
        assert_eq!(
            got,
            [
                ("math > adds", TestStatus::Passed),
                ("math > subtracts", TestStatus::Failed),
                ("math", TestStatus::Failed),
                ("later", TestStatus::Skipped),
                ("wip", TestStatus::Xfailed),
            ]
        );
        assert_eq!(
            f.tests[1].message.as_deref(),
            Some("Expected values to be equal")
        );
    }
}
