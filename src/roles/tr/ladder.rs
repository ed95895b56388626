//! The fallback passes of SPEC §3.6, for diffs a model damaged: `recount` (line numbers and
//! counts ignored, each hunk located by its exact old-side lines anywhere in the file) and
//! `fuzzy` (lines compared by their whitespace-separated tokens, and blank lines the diff lost
//! tolerated). A pass is accepted only when every hunk matches at exactly one place and no two
//! hunks overlap; a claimed line number never breaks a tie. Never a misapplication.

use super::apply::{show, split_lines};
use super::diff::{Hunk, Line};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    Recount,
    Fuzzy,
}

fn tokens_eq(file: &[u8], diff: &str) -> bool {
    let a = String::from_utf8_lossy(file);
    a.split_whitespace().eq(diff.split_whitespace())
}

fn line_eq(pass: Pass, file: &[u8], diff: &str) -> bool {
    match pass {
        Pass::Recount => file == diff.as_bytes(),
        Pass::Fuzzy => tokens_eq(file, diff),
    }
}

/// An `@@ anchor` matches a line equal to it, or starting with it, whitespace aside.
fn anchor_eq(line: &[u8], anchor: &str) -> bool {
    let text = String::from_utf8_lossy(line);
    tokens_eq(line, anchor) || text.trim().starts_with(anchor.trim())
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Where one hunk's old side sits in the file: the file lines it spans, and for each old-side
/// line of the hunk the file line it matched. Blank file lines between them that the diff did
/// not mention (fuzzy only) are kept as context.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    start: usize,
    end: usize,
    matched: Vec<usize>,
}

/// Tries to match the hunk's old lines starting at file line `start`.
fn match_at(pass: Pass, lines: &[&[u8]], old: &[&str], start: usize) -> Option<Placement> {
    let mut matched = Vec::with_capacity(old.len());
    let mut i = start;
    for (k, want) in old.iter().enumerate() {
        loop {
            let got = lines.get(i)?;
            if line_eq(pass, got, want) {
                break;
            }
            // A blank line the diff lost (never before the first line of the hunk).
            if pass == Pass::Fuzzy && k > 0 && is_blank(got) && !want.trim().is_empty() {
                i += 1;
                continue;
            }
            return None;
        }
        matched.push(i);
        i += 1;
    }
    Some(Placement {
        start,
        end: i,
        matched,
    })
}

/// The file region most like the hunk's old side, for the failure brief.
fn closest(lines: &[&[u8]], old: &[&str]) -> String {
    if old.is_empty() || lines.is_empty() {
        return String::new();
    }
    let mut best = (0usize, 0usize);
    for start in 0..lines.len() {
        let score = old
            .iter()
            .enumerate()
            .filter(|(k, want)| lines.get(start + k).is_some_and(|got| tokens_eq(got, want)))
            .count();
        if score > best.1 {
            best = (start, score);
        }
    }
    let (start, score) = best;
    if score == 0 {
        return "no line of it occurs in the file".to_string();
    }
    let mut out = format!(
        "closest text, lines {}-{} ({} of {} lines match):",
        start + 1,
        (start + old.len()).min(lines.len()),
        score,
        old.len()
    );
    for (k, want) in old.iter().enumerate() {
        match lines.get(start + k) {
            Some(got) if tokens_eq(got, want) => {
                out.push_str(&format!("\n  {:>5}   {}", start + k + 1, show(got)))
            }
            Some(got) => out.push_str(&format!(
                "\n  {:>5} ≠ {}   (the diff has {})",
                start + k + 1,
                show(got),
                show(want.as_bytes())
            )),
            None => out.push_str(&format!(
                "\n      (end of file; the diff has {})",
                show(want.as_bytes())
            )),
        }
    }
    out
}

/// Applies every hunk at its unique location, or says which hunk could not be placed and why.
pub fn apply(pass: Pass, file: &str, source: &[u8], hunks: &[Hunk]) -> Result<Vec<u8>, String> {
    let (lines, eol) = split_lines(source);
    let mut placements: Vec<(usize, Placement)> = Vec::new();
    for (k, hunk) in hunks.iter().enumerate() {
        let name = format!("hunk {} of {file} ({})", k + 1, hunk.header);
        let old: Vec<&str> = hunk.old_lines().collect();
        if old.is_empty() {
            if lines.is_empty() {
                placements.push((
                    k,
                    Placement {
                        start: 0,
                        end: 0,
                        matched: Vec::new(),
                    },
                ));
                continue;
            }
            return Err(format!("{name}: it has no context or removed lines, so its place in the file cannot be found"));
        }
        let mut found: Vec<Placement> = (0..lines.len())
            .filter_map(|start| match_at(pass, &lines, &old, start))
            .collect();
        if let Some(anchor) = &hunk.anchor {
            let anchors: Vec<usize> = (0..lines.len())
                .filter(|&i| anchor_eq(lines[i], anchor))
                .collect();
            let Some(&first) = anchors.first() else {
                return Err(format!(
                    "{name}: its anchor {anchor:?} does not occur in the file"
                ));
            };
            // The chunk is the first match after the nearest anchor before it.
            found.retain(|p| p.start >= first);
            let mut by_anchor: Vec<Placement> = Vec::new();
            for (ai, &a) in anchors.iter().enumerate() {
                let next = anchors.get(ai + 1).copied().unwrap_or(usize::MAX);
                if let Some(p) = found.iter().find(|p| p.start >= a && p.start < next) {
                    if !by_anchor.contains(p) {
                        by_anchor.push(p.clone());
                    }
                }
            }
            found = by_anchor;
        }
        match found.len() {
            1 => placements.push((k, found.into_iter().next().expect("one"))),
            0 => {
                return Err(format!(
                    "{name}: its lines do not occur in the file; {}",
                    closest(&lines, &old)
                ))
            }
            n => {
                let at: Vec<String> = found
                    .iter()
                    .take(5)
                    .map(|p| (p.start + 1).to_string())
                    .collect();
                return Err(format!(
                    "{name}: its lines match at {n} places (lines {}); add context lines so it matches only one",
                    at.join(", ")
                ));
            }
        }
    }
    placements.sort_by_key(|(_, p)| p.start);
    for pair in placements.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.1.start < a.1.end {
            return Err(format!(
                "hunks {} and {} of {file} overlap (lines {}-{} and {}-{})",
                a.0 + 1,
                b.0 + 1,
                a.1.start + 1,
                a.1.end,
                b.1.start + 1,
                b.1.end
            ));
        }
    }
    let mut out: Vec<(&[u8], bool)> = Vec::with_capacity(lines.len() + 16);
    let mut cursor = 0usize;
    let last = lines.len();
    let mut final_eol = eol;
    for (k, place) in &placements {
        let hunk = &hunks[*k];
        for (i, line) in lines[cursor..place.start].iter().enumerate() {
            out.push((line, cursor + i + 1 < last || eol));
        }
        let mut file_i = place.start;
        let mut old_k = 0usize;
        for l in &hunk.lines {
            match l {
                Line::Add(text) => out.push((text.as_bytes(), true)),
                Line::Context(_) | Line::Remove(_) => {
                    let target = place.matched[old_k];
                    while file_i < target {
                        out.push((lines[file_i], true)); // a blank line the diff lost
                        file_i += 1;
                    }
                    if matches!(l, Line::Context(_)) {
                        out.push((lines[file_i], true));
                    }
                    file_i += 1;
                    old_k += 1;
                }
            }
        }
        cursor = place.end;
        if place.end == last {
            if hunk.new_no_eol {
                final_eol = false;
            } else if hunk.old_no_eol {
                final_eol = true;
            }
        }
    }
    for line in &lines[cursor..] {
        out.push((line, true));
    }
    let mut bytes = Vec::with_capacity(source.len() + 256);
    let n = out.len();
    for (i, (line, _)) in out.iter().enumerate() {
        bytes.extend_from_slice(line);
        if i + 1 < n || final_eol {
            bytes.push(b'\n');
        }
    }
    Ok(bytes)
}

pub fn recount(file: &str, source: &[u8], hunks: &[Hunk]) -> Result<Vec<u8>, String> {
    apply(Pass::Recount, file, source, hunks)
}

pub fn fuzzy(file: &str, source: &[u8], hunks: &[Hunk]) -> Result<Vec<u8>, String> {
    apply(Pass::Fuzzy, file, source, hunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::tr::diff::{parse, Strip};

    fn run(pass: Pass, src: &str, diff: &str) -> Result<String, String> {
        let p = parse(diff, Strip::Auto).expect("parses");
        apply(pass, "f", src.as_bytes(), &p[0].hunks).map(|b| String::from_utf8(b).expect("utf8"))
    }

    #[test]
    fn wrong_numbers_are_recounted() {
        let d = "--- a/f\n+++ b/f\n@@ -40,7 +40,9 @@\n b\n-c\n+C\n";
        assert_eq!(
            run(Pass::Recount, "a\nb\nc\nd\n", d).expect("applies"),
            "a\nb\nC\nd\n"
        );
    }

    #[test]
    fn two_matches_are_refused_whatever_the_line_numbers_say() {
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n x\n-y\n+Y\n";
        let e = run(Pass::Recount, "x\ny\nz\nx\ny\n", d).expect_err("ambiguous");
        assert!(e.contains("2 places"), "{e}");
    }

    #[test]
    fn fuzzy_tolerates_whitespace_and_keeps_the_files_context() {
        let d = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n def f():\n-    return 1\n+    return 2\n";
        let src = "def f():  \n\treturn 1\nend\n";
        assert!(run(Pass::Recount, src, d).is_err());
        assert_eq!(
            run(Pass::Fuzzy, src, d).expect("applies"),
            "def f():  \n    return 2\nend\n"
        );
    }

    #[test]
    fn fuzzy_tolerates_a_lost_blank_context_line() {
        let d = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n";
        assert_eq!(
            run(Pass::Fuzzy, "a\n\nb\nc\n", d).expect("applies"),
            "a\n\nB\nc\n"
        );
    }

    #[test]
    fn absent_context_names_the_closest_text() {
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n";
        let e = run(Pass::Fuzzy, "alpha\ngamma\n", d).expect_err("absent");
        assert!(e.contains("closest text, lines 1-2"), "{e}");
        assert!(e.contains("\"gamma\""), "{e}");
    }

    #[test]
    fn overlapping_hunks_are_refused() {
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -2,2 +2,2 @@\n-b\n+X\n c\n";
        assert!(run(Pass::Recount, "a\nb\nc\n", d).is_err());
    }
}
