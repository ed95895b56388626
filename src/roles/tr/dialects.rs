//! The other dialects coding agents speak, converted to the same file sections as a unified
//! diff (hunks without line numbers, so they are placed by the unique-location passes):
//! the `*** Begin Patch … *** End Patch` envelope and SEARCH/REPLACE blocks.

use super::diff::{err, FilePatch, Hunk, Line, ParseError};

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
        anchor: None,
    }
}

pub fn is_envelope(text: &str) -> bool {
    text.lines().any(|l| l.trim() == "*** Begin Patch")
}

pub fn is_search_replace(text: &str) -> bool {
    text.lines().any(|l| l.trim_end() == "<<<<<<< SEARCH")
}

/// Parses a `*** Begin Patch` envelope: Add File, Update File (optionally Move to), Delete File.
pub fn parse_envelope(text: &str) -> Result<Vec<FilePatch>, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let begin = lines
        .iter()
        .position(|l| l.trim() == "*** Begin Patch")
        .ok_or_else(|| err(1, "no '*** Begin Patch' line"))?;
    let mut patches: Vec<FilePatch> = Vec::new();
    let mut i = begin + 1;
    let mut ended = false;
    while i < lines.len() {
        let l = lines[i].trim_end_matches('\r');
        let n = i + 1;
        if l.trim() == "*** End Patch" {
            ended = true;
            break;
        }
        if let Some(path) = l.strip_prefix("*** Add File: ") {
            let mut p = FilePatch {
                new_path: Some(path.trim().to_string()),
                is_new: true,
                at_line: n,
                ..FilePatch::default()
            };
            let mut h = hunk(n, "*** Add File");
            i += 1;
            while i < lines.len() && !lines[i].starts_with("*** ") {
                match lines[i].strip_prefix('+') {
                    Some(text) => h
                        .lines
                        .push(Line::Add(text.trim_end_matches('\r').to_string())),
                    None => return Err(err(i + 1, "a line of an added file must start with '+'")),
                }
                i += 1;
            }
            p.hunks.push(h);
            patches.push(p);
            continue;
        }
        if let Some(path) = l.strip_prefix("*** Delete File: ") {
            patches.push(FilePatch {
                old_path: Some(path.trim().to_string()),
                is_deleted: true,
                at_line: n,
                ..FilePatch::default()
            });
            i += 1;
            continue;
        }
        if let Some(path) = l.strip_prefix("*** Update File: ") {
            let path = path.trim().to_string();
            let mut p = FilePatch {
                old_path: Some(path.clone()),
                new_path: Some(path),
                at_line: n,
                ..FilePatch::default()
            };
            i += 1;
            if let Some(to) = lines.get(i).and_then(|l| l.strip_prefix("*** Move to: ")) {
                p.new_path = Some(to.trim().to_string());
                p.is_rename = true;
                i += 1;
            }
            let mut current: Option<Hunk> = None;
            while i < lines.len() {
                let l = lines[i].trim_end_matches('\r');
                if l.trim() == "*** End of File" {
                    if let Some(h) = current.as_mut() {
                        h.old_no_eol = false;
                    }
                    i += 1;
                    continue;
                }
                if l.starts_with("*** ") {
                    break;
                }
                if let Some(anchor) = l.strip_prefix("@@") {
                    if let Some(h) = current.take().filter(|h| !h.lines.is_empty()) {
                        p.hunks.push(h);
                    }
                    let mut h = hunk(i + 1, l);
                    let anchor = anchor.trim();
                    if !anchor.is_empty() {
                        h.anchor = Some(anchor.to_string());
                    }
                    current = Some(h);
                    i += 1;
                    continue;
                }
                let h = current.get_or_insert_with(|| hunk(i + 1, "@@"));
                match l.as_bytes().first() {
                    Some(b' ') => h.lines.push(Line::Context(l[1..].to_string())),
                    Some(b'-') => h.lines.push(Line::Remove(l[1..].to_string())),
                    Some(b'+') => h.lines.push(Line::Add(l[1..].to_string())),
                    None => h.lines.push(Line::Context(String::new())),
                    Some(_) => {
                        return Err(err(i + 1, format!("unexpected line in an update: {l:?}")))
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
            patches.push(p);
            continue;
        }
        if l.trim().is_empty() {
            i += 1;
            continue;
        }
        return Err(err(
            n,
            format!("unexpected line in the patch envelope: {l:?}"),
        ));
    }
    if !ended {
        return Err(err(lines.len(), "no '*** End Patch' line"));
    }
    Ok(patches)
}

fn path_line(line: &str) -> Option<String> {
    if line.trim_start().starts_with("```") {
        return None;
    }
    let t = line.trim().trim_matches(|c| c == '`' || c == '*').trim();
    if t.is_empty() || t.contains(' ') && !t.contains('/') {
        return None;
    }
    Some(t.to_string())
}

/// Parses SEARCH/REPLACE blocks, each preceded by the file's path on its own line.
pub fn parse_search_replace(text: &str) -> Result<Vec<FilePatch>, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut patches: Vec<FilePatch> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() != "<<<<<<< SEARCH" {
            i += 1;
            continue;
        }
        let start = i + 1;
        let path = lines[..i]
            .iter()
            .rev()
            .take_while(|l| l.trim_end() != ">>>>>>> REPLACE")
            .find_map(|l| path_line(l))
            .ok_or_else(|| {
                err(
                    start,
                    "a SEARCH block without a file path on a line before it",
                )
            })?;
        let mut search: Vec<String> = Vec::new();
        let mut replace: Vec<String> = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim_end() != "=======" {
            search.push(lines[i].trim_end_matches('\r').to_string());
            i += 1;
        }
        if i >= lines.len() {
            return Err(err(start, "a SEARCH block without '======='"));
        }
        i += 1;
        while i < lines.len() && lines[i].trim_end() != ">>>>>>> REPLACE" {
            replace.push(lines[i].trim_end_matches('\r').to_string());
            i += 1;
        }
        if i >= lines.len() {
            return Err(err(start, "a SEARCH block without '>>>>>>> REPLACE'"));
        }
        i += 1;
        let mut h = hunk(start, "SEARCH/REPLACE");
        h.lines.extend(search.iter().cloned().map(Line::Remove));
        h.lines.extend(replace.into_iter().map(Line::Add));
        let creating = search.is_empty();
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
        let p = parse_envelope(t).expect("parses");
        assert_eq!(p.len(), 3);
        assert!(p[0].is_new);
        assert!(p[1].is_rename);
        assert_eq!(p[1].hunks[0].anchor.as_deref(), Some("def f():"));
        assert!(p[2].is_deleted);
        assert!(parse_envelope("*** Begin Patch\n*** Update File: a\n-x\n").is_err());
    }

    #[test]
    fn search_replace_blocks() {
        let t = "src/a.py\n```python\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n```\n\nnew.txt\n<<<<<<< SEARCH\n=======\nhi\n>>>>>>> REPLACE\n";
        let p = parse_search_replace(t).expect("parses");
        assert_eq!(p[0].new_path.as_deref(), Some("src/a.py"));
        assert_eq!(p[0].hunks[0].lines.len(), 2);
        assert!(p[1].is_new);
    }
}
