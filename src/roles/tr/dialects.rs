//! The other dialects coding agents speak, converted to the same file sections as a unified
//! diff (hunks without line numbers, so they are placed by the unique-location passes):
//! the `*** Begin Patch … *** End Patch` envelope and SEARCH/REPLACE blocks.

use super::detect::{foreign_block, split_text};
pub use super::detect::{is_envelope, is_search_replace};
use super::diff::{err, mixed, show, FilePatch, Hunk, Line, ParseError};
use crate::roles::change::Dialect;
use bstr::ByteSlice;

fn hunk(at_line: usize, header: &str) -> Hunk {
    Hunk {
        old_start: 0,
        old_count: 0,
        new_start: 0,
        new_count: 0,
        placeholder: true,
        lines: Vec::new(),
        old_no_eol: false,
        new_no_eol: false,
        at_line,
        header: header.to_string(),
        anchors: Vec::new(),
        at_end: false,
    }
}

/// A marker or header line of the envelope: its `\r` and surrounding spaces do not matter.
fn marker(line: &[u8]) -> &[u8] {
    line.trim_with(|c| c == '\r' || c == ' ' || c == '\t')
}

/// A path named on a marker line (`*** Add File: x`); names must be UTF-8.
fn marker_path(rest: &[u8], n: usize) -> Result<String, ParseError> {
    std::str::from_utf8(marker(rest))
        .map(str::to_string)
        .map_err(|_| err(n, "a file name that is not UTF-8 is not supported"))
}

/// Parses every `*** Begin Patch` envelope of the text: Add File, Update File (optionally
/// Move to), Delete File. Text between envelopes is prose, unless it starts a change block of
/// another dialect (refused: never partly applied). Content lines keep their bytes (and any
/// `\r`): the file's own line endings decide how added lines end.
pub fn parse_envelope(text: &[u8]) -> Result<Vec<FilePatch>, ParseError> {
    let lines = split_text(text);
    let mut patches: Vec<FilePatch> = Vec::new();
    let mut envelopes = 0;
    let mut i = 0;
    while i < lines.len() {
        if marker(lines[i]) == b"*** Begin Patch" {
            i = parse_one_envelope(&lines, i + 1, &mut patches)?;
            envelopes += 1;
        } else if let Some(other) = foreign_block(&lines, i, Dialect::Envelope) {
            return Err(mixed(i + 1, Dialect::Envelope, other));
        } else {
            i += 1;
        }
    }
    if envelopes == 0 {
        return Err(err(1, "no '*** Begin Patch' line"));
    }
    Ok(patches)
}

/// One envelope's body from line `i` (after `*** Begin Patch`); returns the line after its
/// `*** End Patch`. An update of a file an earlier envelope already updates adds its hunks
/// to that section, so both are placed (and checked for overlap) against the same file.
fn parse_one_envelope(
    lines: &[&[u8]],
    mut i: usize,
    patches: &mut Vec<FilePatch>,
) -> Result<usize, ParseError> {
    while i < lines.len() {
        let l = lines[i].strip_suffix(b"\r").unwrap_or(lines[i]);
        let n = i + 1;
        if marker(l) == b"*** End Patch" {
            return Ok(i + 1);
        }
        if let Some(path) = l.strip_prefix(b"*** Add File: ") {
            let (p, next) = add_file(lines, i, path)?;
            patches.push(p);
            i = next;
        } else if let Some(path) = l.strip_prefix(b"*** Delete File: ") {
            let (p, next) = delete_file(lines, i, path)?;
            patches.push(p);
            i = next;
        } else if let Some(path) = l.strip_prefix(b"*** Update File: ") {
            let (mut p, next) = update_file(lines, i, path)?;
            let earlier = patches.iter_mut().find(|e| {
                !p.is_rename
                    && !e.is_rename
                    && !e.is_new
                    && !e.is_deleted
                    && e.old_path == p.old_path
                    && e.new_path == p.new_path
            });
            match earlier {
                Some(e) => e.hunks.append(&mut p.hunks),
                None => patches.push(p),
            }
            i = next;
        } else if marker(l).is_empty() {
            i += 1;
        } else {
            return Err(err(
                n,
                format!("unexpected line in the patch envelope: {}", show(l)),
            ));
        }
    }
    Err(err(lines.len(), "no '*** End Patch' line"))
}

/// `*** Add File: path` at line `i`, then the file's lines as `+` lines; returns the section
/// and the index of the next marker line.
fn add_file(lines: &[&[u8]], mut i: usize, path: &[u8]) -> Result<(FilePatch, usize), ParseError> {
    let n = i + 1;
    let mut p = FilePatch {
        new_path: Some(marker_path(path, n)?),
        is_new: true,
        at_line: n,
        ..FilePatch::default()
    };
    let mut h = hunk(n, "*** Add File");
    i += 1;
    while i < lines.len() && !lines[i].starts_with(b"*** ") {
        match lines[i].strip_prefix(b"+") {
            Some(text) => h.lines.push(Line::Add(text.to_vec())),
            None => return Err(err(i + 1, "a line of an added file must start with '+'")),
        }
        i += 1;
    }
    p.hunks.push(h);
    Ok((p, i))
}

/// `*** Delete File: path` at line `i`. SPEC §3.6: a deletion carries the file's whole
/// content as removed lines. The envelope as Codex writes it names the file only; here its
/// content may follow as '-' lines, and a non-empty file deleted without them is refused when
/// planned.
fn delete_file(
    lines: &[&[u8]],
    mut i: usize,
    path: &[u8],
) -> Result<(FilePatch, usize), ParseError> {
    let n = i + 1;
    let mut h = hunk(n, "*** Delete File");
    i += 1;
    while i < lines.len() && !lines[i].starts_with(b"*** ") {
        match lines[i].strip_prefix(b"-") {
            Some(text) => h.lines.push(Line::Remove(text.to_vec())),
            None if marker(lines[i]).is_empty() => {}
            None => {
                return Err(err(
                    i + 1,
                    "a line of a deleted file's content must start with '-'",
                ))
            }
        }
        i += 1;
    }
    let p = FilePatch {
        old_path: Some(marker_path(path, n)?),
        is_deleted: true,
        delete_by_name: true,
        at_line: n,
        hunks: if h.lines.is_empty() {
            Vec::new()
        } else {
            vec![h]
        },
        ..FilePatch::default()
    };
    Ok((p, i))
}

/// `*** Update File: path` at line `i` (optionally `*** Move to: other`), then its hunks:
/// `@@ anchor` lines and ` `/`-`/`+` lines, `*** End of File` after a hunk that ends the file.
fn update_file(
    lines: &[&[u8]],
    mut i: usize,
    path: &[u8],
) -> Result<(FilePatch, usize), ParseError> {
    let n = i + 1;
    let path = marker_path(path, n)?;
    let mut p = FilePatch {
        old_path: Some(path.clone()),
        new_path: Some(path),
        at_line: n,
        ..FilePatch::default()
    };
    i += 1;
    if let Some(to) = lines.get(i).and_then(|l| l.strip_prefix(b"*** Move to: ")) {
        p.new_path = Some(marker_path(to, i + 1)?);
        p.is_rename = true;
        i += 1;
    }
    let mut current: Option<Hunk> = None;
    while i < lines.len() {
        let l = lines[i];
        if marker(l) == b"*** End of File" {
            match current.as_mut().filter(|h| !h.lines.is_empty()) {
                Some(h) => h.at_end = true,
                None => return Err(err(i + 1, "'*** End of File' before any change line")),
            }
            i += 1;
            continue;
        }
        if l.starts_with(b"*** ") {
            break;
        }
        if let Some(anchor) = l.strip_prefix(b"@@") {
            anchor_line(&mut p, &mut current, l, anchor, i);
            i += 1;
            continue;
        }
        let h = current.get_or_insert_with(|| hunk(i + 1, "@@"));
        match l.first() {
            Some(b' ') => h.lines.push(Line::Context(l[1..].to_vec())),
            Some(b'-') => h.lines.push(Line::Remove(l[1..].to_vec())),
            Some(b'+') => h.lines.push(Line::Add(l[1..].to_vec())),
            None => h.lines.push(Line::Context(Vec::new())),
            Some(b'\r') if l.len() == 1 => h.lines.push(Line::Context(l.to_vec())),
            Some(_) => {
                return Err(err(
                    i + 1,
                    format!("unexpected line in an update: {}", show(l)),
                ))
            }
        }
        i += 1;
    }
    if let Some(h) = current.take().filter(|h| !h.lines.is_empty()) {
        p.hunks.push(h);
    }
    if p.hunks.is_empty() && !p.is_rename {
        return Err(err(n, "an Update File section with no change"));
    }
    Ok((p, i))
}

/// An `@@ anchor` line at line `i` of an update: it starts a new hunk, or stacks on a hunk
/// that has no line yet (`@@ class B:` then `@@ def run`).
fn anchor_line(p: &mut FilePatch, current: &mut Option<Hunk>, l: &[u8], anchor: &[u8], i: usize) {
    let anchor = marker(anchor);
    let stacking = current.as_ref().is_some_and(|h| h.lines.is_empty());
    if !stacking {
        if let Some(h) = current.take().filter(|h| !h.lines.is_empty()) {
            p.hunks.push(h);
        }
        *current = Some(hunk(i + 1, &l.to_str_lossy()));
    }
    if let Some(h) = current.as_mut().filter(|_| !anchor.is_empty()) {
        h.anchors.push(anchor.to_vec());
        if stacking {
            h.header = format!("{} {}", h.header, l.to_str_lossy());
        }
    }
}

fn path_line(line: &[u8]) -> Option<String> {
    let line = std::str::from_utf8(line).ok()?;
    if line.trim_start().starts_with("```") {
        return None;
    }
    let t = line.trim().trim_matches(|c| c == '`' || c == '*').trim();
    if t.is_empty() || t.contains(' ') && !t.contains('/') {
        return None;
    }
    Some(t.to_string())
}

/// Parses SEARCH/REPLACE blocks, each preceded by the file's path on its own line. Block
/// lines keep their bytes (and any `\r`).
pub fn parse_search_replace(text: &[u8]) -> Result<Vec<FilePatch>, ParseError> {
    let lines = split_text(text);
    let is =
        |l: &[u8], m: &str| l.trim_end_with(|c| c == '\r' || c == ' ' || c == '\t') == m.as_bytes();
    let mut patches: Vec<FilePatch> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !is(lines[i], "<<<<<<< SEARCH") {
            if let Some(other) = foreign_block(&lines, i, Dialect::SearchReplace) {
                return Err(mixed(i + 1, Dialect::SearchReplace, other));
            }
            i += 1;
            continue;
        }
        let start = i + 1;
        let path = lines[..i]
            .iter()
            .rev()
            .take_while(|l| !is(l, ">>>>>>> REPLACE"))
            .find_map(|l| path_line(l))
            .ok_or_else(|| {
                err(
                    start,
                    "a SEARCH block without a file path on a line before it",
                )
            })?;
        let mut search: Vec<Vec<u8>> = Vec::new();
        let mut replace: Vec<Vec<u8>> = Vec::new();
        i += 1;
        while i < lines.len() && !is(lines[i], "=======") {
            search.push(lines[i].to_vec());
            i += 1;
        }
        if i >= lines.len() {
            return Err(err(start, "a SEARCH block without '======='"));
        }
        i += 1;
        while i < lines.len() && !is(lines[i], ">>>>>>> REPLACE") {
            replace.push(lines[i].to_vec());
            i += 1;
        }
        if i >= lines.len() {
            return Err(err(start, "a SEARCH block without '>>>>>>> REPLACE'"));
        }
        i += 1;
        let mut h = hunk(start, "SEARCH/REPLACE");
        let creating = search.is_empty();
        h.lines.extend(search.into_iter().map(Line::Remove));
        h.lines.extend(replace.into_iter().map(Line::Add));
        match patches
            .iter_mut()
            .find(|p| p.new_path.as_deref() == Some(path.as_str()))
        {
            Some(p) if !creating && !p.is_new => p.hunks.push(h),
            Some(_) => {
                return Err(err(
                    start,
                    format!("{path}: an empty SEARCH (creating the file) must be its only block"),
                ))
            }
            None => patches.push(FilePatch {
                old_path: if creating { None } else { Some(path.clone()) },
                new_path: Some(path),
                is_new: creating,
                at_line: start,
                hunks: vec![h],
                ..FilePatch::default()
            }),
        }
    }
    if patches.is_empty() {
        return Err(err(1, "no SEARCH/REPLACE block"));
    }
    Ok(patches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_sections() {
        let t = "*** Begin Patch\n*** Add File: new.txt\n+hello\n*** Update File: a.py\n*** Move to: b.py\n@@ def f():\n-    return 1\n+    return 2\n*** Delete File: old.txt\n*** End Patch\n";
        let p = parse_envelope(t.as_bytes()).expect("parses");
        assert_eq!(p.len(), 3);
        assert!(p[0].is_new);
        assert!(p[1].is_rename);
        assert_eq!(p[1].hunks[0].anchors, vec![b"def f():".to_vec()]);
        assert!(p[2].is_deleted);
        assert!(parse_envelope(b"*** Begin Patch\n*** Update File: a\n-x\n").is_err());
    }

    #[test]
    fn every_envelope_is_read_and_anchors_stack() {
        let t = "*** Begin Patch\n*** Update File: a\n@@ class B:\n@@ def run\n-x\n+y\n*** End of File\n*** End Patch\nprose\n*** Begin Patch\n*** Update File: a\n@@\n-z\n+w\n*** Delete File: b\n-gone\n*** End Patch\n";
        let p = parse_envelope(t.as_bytes()).expect("parses");
        assert_eq!(p.len(), 2);
        let h = &p[0].hunks;
        assert_eq!(h.len(), 2);
        assert_eq!(
            h[0].anchors,
            vec![b"class B:".to_vec(), b"def run".to_vec()]
        );
        assert!(h[0].at_end && !h[1].at_end);
        assert_eq!(p[1].hunks[0].lines, vec![Line::Remove(b"gone".to_vec())]);
        let mixed =
            "*** Begin Patch\n*** Update File: a\n@@\n-z\n+w\n*** End Patch\na\n<<<<<<< SEARCH\n";
        let e = parse_envelope(mixed.as_bytes()).expect_err("mixed");
        assert!(e.message.contains("more than one dialect"), "{e}");
        let e = parse_search_replace(
            b"a\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n--- a/a\n+++ b/a\n",
        )
        .expect_err("mixed");
        assert_eq!(e.line, 7);
    }

    #[test]
    fn search_replace_blocks() {
        let t = "src/a.py\n```python\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n```\n\nnew.txt\n<<<<<<< SEARCH\n=======\nhi\n>>>>>>> REPLACE\n";
        let p = parse_search_replace(t.as_bytes()).expect("parses");
        assert_eq!(p[0].new_path.as_deref(), Some("src/a.py"));
        assert_eq!(p[0].hunks[0].lines.len(), 2);
        assert!(p[1].is_new);
    }

    #[test]
    fn detection_looks_at_column_zero_before_any_diff_header() {
        assert!(is_envelope(
            b"Here it is:\n*** Begin Patch\n*** End Patch\n"
        ));
        assert!(is_envelope(b"*** Begin Patch\r\n*** End Patch\r\n"));
        let quoted = b"--- a/doc.md\n+++ b/doc.md\n@@ -1,2 +1,2 @@\n   *** Begin Patch\n-a\n+b\n";
        assert!(!is_envelope(quoted));
        let lost_space = b"--- a/doc.md\n+++ b/doc.md\n@@ -1,2 +1,2 @@\n*** Begin Patch\n-a\n+b\n";
        assert!(!is_envelope(lost_space));
        assert!(!is_search_replace(
            b"--- a/m\n+++ b/m\n@@ -1 +1 @@\n+<<<<<<< SEARCH\n"
        ));
    }

    #[test]
    fn block_lines_keep_their_bytes() {
        let t = b"m.txt\r\n<<<<<<< SEARCH\r\ncaf\xe9\r\n=======\r\nth\xe9\r\n>>>>>>> REPLACE\r\n";
        let p = parse_search_replace(t).expect("parses");
        assert_eq!(p[0].new_path.as_deref(), Some("m.txt"));
        assert_eq!(p[0].hunks[0].lines[0], Line::Remove(b"caf\xe9\r".to_vec()));
        assert_eq!(p[0].hunks[0].lines[1], Line::Add(b"th\xe9\r".to_vec()));
    }
}
