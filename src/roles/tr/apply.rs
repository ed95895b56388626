//! TR apply: every resulting file is computed in memory first, then written all or nothing.
//!
//! Neither `git apply` nor libgit2 is used to decide anything: both silently drop hunk lines
//! beyond a header's count, and libgit2 applies a copy as a rename.

use super::diff::{FilePatch, Hunk, Line};
use serde::Serialize;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

// The file types live with git: the restore and the journal record them too, and git's floor
// may not import the roles above it.
pub use crate::git::files::{FileOutcome, FileState};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApplyMethod {
    Strict,
    Recount,
    Fuzzy,
    Writes,
}

impl ApplyMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            ApplyMethod::Strict => "strict",
            ApplyMethod::Recount => "recount",
            ApplyMethod::Fuzzy => "fuzzy",
            ApplyMethod::Writes => "writes",
        }
    }
}

/// Reads a path's current state in the work tree; a directory or link there is an error.
pub fn read_state(root: &Path, path: &str) -> io::Result<Option<FileState>> {
    let full = root.join(path);
    let meta = match fs::symlink_metadata(&full) {
        Ok(m) => m,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_file() {
        return Err(io::Error::other(format!("{path} is not a regular file")));
    }
    Ok(Some(FileState {
        bytes: fs::read(&full)?,
        executable: meta.permissions().mode() & 0o111 != 0,
    }))
}

/// Splits file bytes into lines (without `\n`) and whether the last line ends with one.
pub(crate) fn split_lines(bytes: &[u8]) -> (Vec<&[u8]>, bool) {
    if bytes.is_empty() {
        return (Vec::new(), true);
    }
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let eol = bytes.ends_with(b"\n");
    if eol {
        lines.pop();
    }
    (lines, eol)
}

pub(crate) use super::diff::show;

/// How the lines a diff adds must end to keep the file's own line endings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endings {
    Lf,
    Crlf,
    /// Mixed, unknown (a new or one-line file), or the diff replaces every line: as the diff
    /// has them.
    AsGiven,
}

impl Endings {
    /// An added line that is followed by `\n`, with the `\r` the file's style wants.
    pub fn fit(self, line: &[u8]) -> std::borrow::Cow<'_, [u8]> {
        match self {
            Endings::Crlf if !line.ends_with(b"\r") => {
                let mut v = line.to_vec();
                v.push(b'\r');
                v.into()
            }
            Endings::Lf if line.ends_with(b"\r") => line[..line.len() - 1].into(),
            _ => line.into(),
        }
    }
}

/// Per-file hashes, computed on first use and shared by every hunk and pass. Declared beside
/// the `Text` that carries it so this file need not import the fallback passes; the passes
/// (`ladder.rs`) fill and read it.
#[derive(Default)]
pub struct Index {
    pub(super) exact: OnceCell<Vec<u64>>,
    pub(super) tokens: OnceCell<Vec<u64>>,
    /// The non-blank lines' indices and token hashes (the fuzzy pass's skeleton).
    pub(super) nonblank: OnceCell<(Vec<usize>, Vec<u64>)>,
    /// Token hash → the lines that have it, for failure briefs.
    pub(super) places: OnceCell<HashMap<u64, Vec<usize>>>,
}

/// A file's current content, split into lines once and indexed lazily, so every pass and
/// every hunk reuses the same line hashes (SPEC §3.6: locating hunks is linear).
pub struct Text {
    bytes: Vec<u8>,
    spans: Vec<(usize, usize)>,
    pub eol: bool,
    pub(crate) index: Index,
}

impl Text {
    pub fn new(bytes: Vec<u8>) -> Self {
        let (lines, eol) = split_lines(&bytes);
        let base = bytes.as_ptr() as usize;
        let spans = lines
            .iter()
            .map(|l| {
                let at = l.as_ptr() as usize - base;
                (at, at + l.len())
            })
            .collect();
        Text {
            bytes,
            spans,
            eol,
            index: Index::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn line(&self, i: usize) -> &[u8] {
        let (a, b) = self.spans[i];
        &self.bytes[a..b]
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The file's line-ending style: CRLF when every `\n` is preceded by `\r`, LF when none
    /// is, otherwise as the diff gives them. A section that removes every line says nothing
    /// about the new content's style.
    pub fn endings(&self, hunks: &[Hunk]) -> Endings {
        let removed: usize = hunks
            .iter()
            .map(|h| {
                h.lines
                    .iter()
                    .filter(|l| matches!(l, Line::Remove(_)))
                    .count()
            })
            .sum();
        let terminated = if self.eol {
            self.len()
        } else {
            self.len().saturating_sub(1)
        };
        if terminated == 0 || removed >= self.len() {
            return Endings::AsGiven;
        }
        let crlf = (0..terminated)
            .filter(|&i| self.line(i).ends_with(b"\r"))
            .count();
        match crlf {
            0 => Endings::Lf,
            n if n == terminated => Endings::Crlf,
            _ => Endings::AsGiven,
        }
    }
}

/// Assembles a file from its lines: file lines exactly as they were, added lines with the
/// file's line endings.
pub(crate) struct Assembly<'a> {
    /// (line, added by the diff, followed by `\n`)
    parts: Vec<(&'a [u8], bool, bool)>,
    endings: Endings,
}

impl<'a> Assembly<'a> {
    pub fn new(endings: Endings, capacity: usize) -> Self {
        Assembly {
            parts: Vec::with_capacity(capacity),
            endings,
        }
    }

    pub fn file_line(&mut self, line: &'a [u8], newline: bool) {
        self.parts.push((line, false, newline));
    }

    pub fn added_line(&mut self, line: &'a [u8], newline: bool) {
        self.parts.push((line, true, newline));
    }

    /// Whether the file ends with a newline (its last line's).
    pub fn final_eol(&mut self, eol: bool) {
        if let Some(last) = self.parts.last_mut() {
            last.2 = eol;
        }
    }

    pub fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.parts.iter().map(|(l, _, _)| l.len() + 2).sum());
        for (line, added, newline) in self.parts {
            // In a CRLF file every terminated line of the file ends with `\r`, so a file line
            // without one that gets a newline is the old last line, which had none: it takes
            // the file's ending like an added line.
            let fits = added || self.endings == Endings::Crlf;
            if fits && newline {
                out.extend_from_slice(&self.endings.fit(line));
            } else {
                out.extend_from_slice(line);
            }
            if newline {
                out.push(b'\n');
            }
        }
        out
    }
}

fn hunk_name(file: &str, index: usize, hunk: &Hunk) -> String {
    format!("hunk {} of {file} ({})", index + 1, hunk.header)
}

/// Strict pass: every hunk exactly at its stated line, exact context, counts that agree.
pub fn apply_strict(file: &str, text: &Text, hunks: &[Hunk]) -> Result<Vec<u8>, String> {
    let last = text.len();
    let eol = text.eol;
    let mut out = Assembly::new(text.endings(hunks), last + 16);
    let mut cursor = 0usize;
    // How many lines the hunks before this one added (less removed): where the new side of a
    // hunk must start if its header agrees with itself.
    let mut shift: isize = 0;
    let mut last_insertion: Option<(usize, usize)> = None;
    for (k, hunk) in hunks.iter().enumerate() {
        let name = hunk_name(file, k, hunk);
        if !hunk.counts_match() {
            return Err(if hunk.placeholder {
                format!("{name}: the header has no line numbers")
            } else {
                format!(
                    "{name}: the header claims {} old and {} new lines but the body has {} and {}",
                    hunk.old_count,
                    hunk.new_count,
                    hunk.body_old_count(),
                    hunk.body_new_count()
                )
            });
        }
        if hunk.old_count > 0 && hunk.old_start == 0 {
            return Err(format!("{name}: line 0 cannot hold old lines"));
        }
        let pos = if hunk.old_count == 0 {
            hunk.old_start
        } else {
            hunk.old_start - 1
        };
        if pos < cursor {
            return Err(format!(
                "{name}: overlaps the previous hunk or is out of order"
            ));
        }
        // Header numbers come from the diff: no sum of them may overflow.
        if pos.saturating_add(hunk.old_count) > last {
            return Err(format!(
                "{name}: reaches line {} but the file has {last} lines",
                pos.saturating_add(hunk.old_count)
            ));
        }
        // A hunk without context lines is placed by its numbers alone (`git apply` refuses
        // it unless told `--unidiff-zero`): both sides of its header must name the same place,
        // and two of them may not insert at the same place.
        if !hunk.lines.iter().any(|l| matches!(l, Line::Context(_))) {
            if hunk.new_count > 0 && hunk.new_start == 0 {
                return Err(format!("{name}: line 0 cannot hold new lines"));
            }
            let new_pos = if hunk.new_count == 0 {
                hunk.new_start
            } else {
                hunk.new_start - 1
            };
            let said = pos as isize + shift;
            if new_pos as isize != said {
                return Err(format!(
                    "{name}: the header contradicts itself: its old side puts the change after line {pos}, its new side after line {new_pos} (its new side should start at {}); a hunk without context lines is placed by its numbers alone, so they must agree",
                    said + 1
                ));
            }
            if hunk.old_count == 0 {
                if let Some((other, _)) = last_insertion.filter(|(_, at)| *at == pos) {
                    return Err(format!(
                        "{name}: inserts at the same place as hunk {}: two context-free insertions at one place are a repeated change, not an order",
                        other + 1
                    ));
                }
                last_insertion = Some((k, pos));
            }
        }
        shift += hunk.new_count as isize - hunk.old_count as isize;
        for (i, want) in hunk.old_lines().enumerate() {
            let got = text.line(pos + i);
            if got != want {
                return Err(format!(
                    "{name}: line {} should be {} but the file has {}",
                    pos + i + 1,
                    show(want),
                    show(got)
                ));
            }
        }
        let at_end = pos + hunk.old_count == last;
        if hunk.old_count > 0 && at_end && hunk.old_no_eol == eol {
            return Err(format!(
                "{name}: the diff says the last line {} a newline, the file says otherwise",
                if hunk.old_no_eol { "lacks" } else { "has" }
            ));
        }
        if (hunk.old_no_eol || hunk.new_no_eol) && !at_end {
            return Err(format!(
                "{name}: '\\ No newline' marker away from the end of the file"
            ));
        }
        for i in cursor..pos {
            out.file_line(text.line(i), i + 1 < last || eol);
        }
        let new_total = hunk.body_new_count();
        let mut j = 0;
        for l in &hunk.lines {
            let newline = !(j + 1 == new_total && at_end && hunk.new_no_eol);
            match l {
                Line::Remove(_) => continue,
                // Context is the file's own bytes here (strict: they are equal).
                Line::Context(t) => out.file_line(t, newline),
                Line::Add(t) => out.added_line(t, newline),
            }
            j += 1;
        }
        cursor = pos + hunk.old_count;
    }
    for i in cursor..last {
        out.file_line(text.line(i), i + 1 < last || eol);
    }
    Ok(out.finish())
}

pub type HunkApplier = fn(&str, &Text, &[Hunk]) -> Result<Vec<u8>, String>;

/// The work tree's files as read for one change, each split and indexed once and reused by
/// every pass.
#[derive(Default)]
pub struct Sources {
    texts: std::collections::HashMap<String, std::rc::Rc<Text>>,
}

impl Sources {
    fn text(&mut self, path: &str, bytes: &[u8]) -> std::rc::Rc<Text> {
        match self.texts.get(path) {
            Some(t) if t.bytes() == bytes => t.clone(),
            _ => {
                let t = std::rc::Rc::new(Text::new(bytes.to_vec()));
                self.texts.insert(path.to_string(), t.clone());
                t
            }
        }
    }
}

/// Why a change could not be planned. `retry` says whether a looser pass may still place it
/// (hunks that did not fit) or no pass can (the work tree's files themselves are in the way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    pub message: String,
    pub retry: bool,
}

impl PlanError {
    fn hunks(message: String) -> Self {
        PlanError {
            message,
            retry: true,
        }
    }

    fn file(message: String) -> Self {
        PlanError {
            message,
            retry: false,
        }
    }
}

pub fn plan_patches(
    root: &Path,
    patches: &[FilePatch],
    applier: HunkApplier,
    sources: &mut Sources,
) -> Result<Vec<FileOutcome>, PlanError> {
    let mut outcomes: Vec<FileOutcome> = Vec::new();
    for patch in patches {
        let target = patch.target().to_string();
        let source = match &patch.old_path {
            Some(old) => {
                match read_state(root, old).map_err(|e| PlanError::file(format!("{old}: {e}")))? {
                    Some(state) => Some(state),
                    // A later pass may read it as a creation (an empty pre-image).
                    None => {
                        return Err(PlanError::hunks(format!(
                            "{old}: does not exist in the work tree"
                        )))
                    }
                }
            }
            None => None,
        };
        if patch.is_deleted && patch.hunks.is_empty() {
            // A deletion must carry the file's whole content as removed lines, in every dialect
            // (SPEC §3.6): deleting a file the model never saw is not a change it can propose.
            // git's diff of an empty file has none to carry.
            let empty = source.as_ref().is_none_or(|s| s.bytes.is_empty());
            if !empty {
                let how = if patch.delete_by_name {
                    "after '*** Delete File:', one '-' line per line of the file"
                } else {
                    "'-' lines, as git diff writes them"
                };
                return Err(PlanError::file(format!(
                    "{target}: the deletion carries none of the file's content: a deletion must remove its whole content ({how})"
                )));
            }
            outcomes.push(FileOutcome {
                path: target,
                before: source,
                after: None,
            });
            continue;
        }
        let content = match &source {
            Some(s) if patch.hunks.is_empty() => s.bytes.clone(),
            Some(s) => {
                let text = sources.text(&target, &s.bytes);
                applier(&target, &text, &patch.hunks).map_err(PlanError::hunks)?
            }
            None => {
                applier(&target, &Text::new(Vec::new()), &patch.hunks).map_err(PlanError::hunks)?
            }
        };
        if patch.is_deleted {
            if !content.is_empty() {
                return Err(PlanError::hunks(format!(
                    "{target}: the deletion does not remove the file's whole content"
                )));
            }
            outcomes.push(FileOutcome {
                path: target,
                before: source,
                after: None,
            });
            continue;
        }
        let Some(new_path) = patch.new_path.clone() else {
            return Err(PlanError::file(format!(
                "{target}: section names no resulting file"
            )));
        };
        let executable = match patch.new_mode {
            Some(mode) => mode == 0o100755,
            None => source.as_ref().is_some_and(|s| s.executable),
        };
        let after = Some(FileState {
            bytes: content,
            executable,
        });
        if patch.old_path.as_deref() == Some(new_path.as_str()) {
            outcomes.push(FileOutcome {
                path: new_path,
                before: source,
                after,
            });
            continue;
        }
        // Creation, rename or copy: the new path must not exist yet.
        let existing =
            read_state(root, &new_path).map_err(|e| PlanError::file(format!("{new_path}: {e}")))?;
        if existing.is_some() {
            return Err(PlanError::file(format!(
                "{new_path}: already exists in the work tree"
            )));
        }
        if patch.is_rename {
            if let Some(old) = &patch.old_path {
                outcomes.push(FileOutcome {
                    path: old.clone(),
                    before: source,
                    after: None,
                });
            }
        }
        outcomes.push(FileOutcome {
            path: new_path,
            before: None,
            after,
        });
    }
    outcomes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(outcomes)
}

/// Writes every outcome's `after` state. On an error, what was written is put back and the
/// error returned, so the tree is as before.
pub fn write_outcomes(root: &Path, outcomes: &[FileOutcome]) -> io::Result<()> {
    for (i, outcome) in outcomes.iter().enumerate() {
        if i == 1 {
            crate::crash::point("mid_apply");
        }
        if let Err(e) = write_state(root, &outcome.path, outcome.after.as_ref()) {
            for done in outcomes[..i].iter().rev() {
                let _ = write_state(root, &done.path, done.before.as_ref());
            }
            let _ = write_state(root, &outcome.path, outcome.before.as_ref());
            return Err(io::Error::new(e.kind(), format!("{}: {e}", outcome.path)));
        }
    }
    Ok(())
}

/// Makes one path hold exactly `state` (absent when `None`), atomically per file. No link on
/// the way is followed (SPEC §7): a folder on the path that is a symbolic link is an error.
pub fn write_state(root: &Path, path: &str, state: Option<&FileState>) -> io::Result<()> {
    match state {
        None => crate::git::nofollow::remove_file(root, path.as_bytes()),
        Some(state) => {
            // A file keeps its own permission bits (a 0600 secret stays unreadable to others);
            // only the executable bit is the change's to set.
            let existing = fs::symlink_metadata(root.join(path))
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.permissions().mode() & 0o7777);
            let mode = crate::git::files::with_exec(existing.unwrap_or(0o644), state.executable);
            crate::git::nofollow::replace_file(root, path.as_bytes(), &state.bytes, mode)
        }
    }
}

/// Removes directories left empty below the root, as git does when a file is deleted.
pub fn prune_empty_dirs(root: &Path, removed: &Path) {
    let mut dir = removed.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::tr::diff::{parse, Strip};

    fn strict(src: &str, diff: &str) -> Result<String, String> {
        let p = parse(diff.as_bytes(), Strip::Auto).expect("parses");
        let text = Text::new(src.as_bytes().to_vec());
        apply_strict("f", &text, &p[0].hunks).map(|b| String::from_utf8(b).expect("utf8"))
    }

    #[test]
    fn applies_exactly() {
        let d = "--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n";
        assert_eq!(strict("a\nb\nc\nd\n", d).expect("applies"), "a\nb\nC\nd\n");
    }

    #[test]
    fn no_offset_search() {
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n b\n-c\n+C\n";
        assert!(strict("a\nb\nc\nd\n", d).is_err());
    }

    #[test]
    fn extra_body_lines_are_not_dropped() {
        let d = "--- a/f\n+++ b/f\n@@ -1,1 +1,1 @@\n-a\n+A\n+B\n";
        assert!(strict("a\n", d).expect_err("refused").contains("claims"));
    }

    #[test]
    fn newline_at_eof_handling() {
        let d = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n";
        assert_eq!(strict("a", d).expect("applies"), "a\n");
        let d = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n";
        assert_eq!(strict("a\n", d).expect("applies"), "b");
        let d = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(strict("a", d).is_err());
    }

    #[test]
    fn insertion_and_creation() {
        let d = "--- a/f\n+++ b/f\n@@ -1,0 +2 @@\n+x\n";
        assert_eq!(strict("a\nb\n", d).expect("applies"), "a\nx\nb\n");
        let d = "--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n";
        assert_eq!(strict("", d).expect("applies"), "x\ny\n");
    }

    #[test]
    fn added_lines_take_the_files_line_endings() {
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\r\n+x\n b\r\n";
        assert_eq!(strict("a\r\nb\r\n", d).expect("applies"), "a\r\nx\r\nb\r\n");
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n+x\r\n b\n";
        assert_eq!(strict("a\nb\n", d).expect("applies"), "a\nx\nb\n");
        // A section that replaces every line says nothing about the new content's style.
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\r\n-b\r\n+a\n+b\n";
        assert_eq!(strict("a\r\nb\r\n", d).expect("applies"), "a\nb\n");
        // Mixed endings: as the diff gives them.
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\r\n+x\n b\n";
        assert_eq!(strict("a\r\nb\n", d).expect("applies"), "a\r\nx\nb\n");
    }

    #[test]
    fn huge_line_numbers_are_refused_not_overflowed() {
        let d = "--- a/f\n+++ b/f\n@@ -18446744073709551615,2 +1,2 @@\n a\n-b\n+c\n";
        assert!(strict("a\nb\n", d)
            .expect_err("refused")
            .contains("reaches line"));
    }

    #[test]
    fn paths_below_a_file_are_absent() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("a.txt"), "x\n").expect("write");
        assert_eq!(
            read_state(dir.path(), "a.txt/inner").expect("readable"),
            None
        );
        assert_eq!(
            read_state(dir.path(), "missing/inner").expect("readable"),
            None
        );
    }

    #[test]
    fn copy_keeps_its_source() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("a"), "x\n").expect("write");
        let p =
            parse(b"diff --git a/a b/c\ncopy from a\ncopy to c\n", Strip::Auto).expect("parses");
        let out =
            plan_patches(dir.path(), &p, apply_strict, &mut Sources::default()).expect("plans");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].path, "c");
        assert_eq!(out[0].action(), "create");
    }
}
