//! TR apply: every resulting file is computed in memory first, then written all or nothing.
//!
//! Neither `git apply` nor libgit2 is used to decide anything: both silently drop hunk lines
//! beyond a header's count, and libgit2 applies a copy as a rename.

use super::diff::{FilePatch, Hunk};
use serde::Serialize;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A file's bytes and executable bit: all of a regular file that git records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub bytes: Vec<u8>,
    pub executable: bool,
}

/// One path's state before and after the change (`None` = absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOutcome {
    pub path: String,
    pub before: Option<FileState>,
    pub after: Option<FileState>,
}

impl FileOutcome {
    pub fn action(&self) -> &'static str {
        match (&self.before, &self.after) {
            (None, Some(_)) => "create",
            (Some(_), None) => "delete",
            (Some(b), Some(a)) if b.bytes == a.bytes => "mode",
            _ => "modify",
        }
    }
}

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

pub(crate) fn show(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(line);
    let s: String = s.chars().take(160).collect();
    format!("{s:?}")
}

fn hunk_name(file: &str, index: usize, hunk: &Hunk) -> String {
    format!("hunk {} of {file} ({})", index + 1, hunk.header)
}

/// Strict pass: every hunk exactly at its stated line, exact context, counts that agree.
pub fn apply_strict(file: &str, source: &[u8], hunks: &[Hunk]) -> Result<Vec<u8>, String> {
    let (lines, eol) = split_lines(source);
    let mut out: Vec<(&[u8], bool)> = Vec::with_capacity(lines.len() + 16);
    let mut cursor = 0usize;
    let last = lines.len();
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
        if pos + hunk.old_count > last {
            return Err(format!(
                "{name}: reaches line {} but the file has {last} lines",
                pos + hunk.old_count
            ));
        }
        for (i, want) in hunk.old_lines().enumerate() {
            let got = lines[pos + i];
            if got != want.as_bytes() {
                return Err(format!(
                    "{name}: line {} should be {} but the file has {}",
                    pos + i + 1,
                    show(want.as_bytes()),
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
        if hunk.old_no_eol && !at_end {
            return Err(format!(
                "{name}: '\\ No newline' marker away from the end of the file"
            ));
        }
        if hunk.new_no_eol && !at_end {
            return Err(format!(
                "{name}: '\\ No newline' marker away from the end of the file"
            ));
        }
        for (i, line) in lines[cursor..pos].iter().enumerate() {
            out.push((line, cursor + i + 1 < last || eol));
        }
        let new: Vec<&str> = hunk.new_lines().collect();
        for (i, line) in new.iter().enumerate() {
            let final_line = i + 1 == new.len() && at_end;
            out.push((line.as_bytes(), !(final_line && hunk.new_no_eol)));
        }
        cursor = pos + hunk.old_count;
    }
    for (i, line) in lines[cursor..].iter().enumerate() {
        out.push((line, cursor + i + 1 < last || eol));
    }
    let mut bytes = Vec::with_capacity(source.len() + 256);
    for (line, newline) in out {
        bytes.extend_from_slice(line);
        if newline {
            bytes.push(b'\n');
        }
    }
    Ok(bytes)
}

pub type HunkApplier = fn(&str, &[u8], &[Hunk]) -> Result<Vec<u8>, String>;

/// Computes the outcome of every file section with one hunk applier, reading the work tree
/// but writing nothing.
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
            // A whole-file deletion (`*** Delete File`, or a deleted empty file).
            outcomes.push(FileOutcome {
                path: target,
                before: source,
                after: None,
            });
            continue;
        }
        let content = match &source {
            Some(s) if patch.hunks.is_empty() => s.bytes.clone(),
            Some(s) => applier(&target, &s.bytes, &patch.hunks).map_err(PlanError::hunks)?,
            None => applier(&target, b"", &patch.hunks).map_err(PlanError::hunks)?,
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

/// Makes one path hold exactly `state` (absent when `None`), atomically per file.
pub fn write_state(root: &Path, path: &str, state: Option<&FileState>) -> io::Result<()> {
    let full = root.join(path);
    match state {
        None => {
            match fs::remove_file(&full) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            prune_empty_dirs(root, &full);
            Ok(())
        }
        Some(state) => {
            let parent = full.parent().unwrap_or(root);
            fs::create_dir_all(parent)?;
            let name = full
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let tmp = parent.join(format!(".{name}.factory-tmp"));
            fs::write(&tmp, &state.bytes)?;
            // A file keeps its own permission bits (a 0600 secret stays unreadable to others);
            // only the executable bit is the change's to set.
            let existing = fs::symlink_metadata(&full)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.permissions().mode() & 0o7777);
            let mode = crate::git::restore::with_exec(existing.unwrap_or(0o644), state.executable);
            fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
            fs::rename(&tmp, &full).inspect_err(|_| {
                let _ = fs::remove_file(&tmp);
            })
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
        let p = parse(diff, Strip::Auto).expect("parses");
        apply_strict("f", src.as_bytes(), &p[0].hunks).map(|b| String::from_utf8(b).expect("utf8"))
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
        let p = parse("diff --git a/a b/c\ncopy from a\ncopy to c\n", Strip::Auto).expect("parses");
        let out = plan_patches(dir.path(), &p, apply_strict).expect("plans");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].path, "c");
        assert_eq!(out[0].action(), "create");
    }
}
