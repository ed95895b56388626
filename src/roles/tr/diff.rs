//! Our own unified-diff parser. It feeds both the scope rules and the appliers, so touched paths
//! always come from the diff's headers — never from the model's words, and never from a tool
//! that silently reinterprets them (`git apply` turns `+++ /tmp/x` into `tmp/x`).

use super::detect::{foreign_block, split_text};
use crate::roles::change::Dialect;
use bstr::ByteSlice;
use std::fmt;

/// One line of a hunk body, without its leading marker and without the `\n` (a `\r` before
/// it stays: the line's ending is the file's business, see `apply::Endings`). Bytes, never
/// decoded: a Latin-1 line is matched and written as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Context(Vec<u8>),
    Remove(Vec<u8>),
    Add(Vec<u8>),
}

impl Line {
    pub fn text(&self) -> &[u8] {
        match self {
            Line::Context(t) | Line::Remove(t) | Line::Add(t) => t,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub old_start: usize,
    pub old_count: usize,
    pub new_start: usize,
    pub new_count: usize,
    /// `@@ ... @@` or `@@ @@`: the model gave no numbers at all.
    pub placeholder: bool,
    pub lines: Vec<Line>,
    /// `\ No newline at end of file` after the last old-side / new-side line.
    pub old_no_eol: bool,
    pub new_no_eol: bool,
    /// 1-based line of the `@@` header in the diff text.
    pub at_line: usize,
    /// The header as text, for messages only.
    pub header: String,
    /// Lines the hunk must come after, in order (the `@@ anchor` lines of the Begin Patch
    /// dialect, stacked as `@@ class B:` then `@@ def run`).
    pub anchors: Vec<Vec<u8>>,
    /// The hunk's old side ends at the end of the file (`*** End of File`).
    pub at_end: bool,
}

impl Hunk {
    pub fn body_old_count(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| !matches!(l, Line::Add(_)))
            .count()
    }

    pub fn body_new_count(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| !matches!(l, Line::Remove(_)))
            .count()
    }

    /// Whether the header's counts agree with the body; a strict apply needs both.
    pub fn counts_match(&self) -> bool {
        !self.placeholder
            && self.old_count == self.body_old_count()
            && self.new_count == self.body_new_count()
    }

    pub fn old_lines(&self) -> impl Iterator<Item = &[u8]> {
        self.lines.iter().filter_map(|l| match l {
            Line::Context(s) | Line::Remove(s) => Some(s.as_slice()),
            Line::Add(_) => None,
        })
    }

    pub fn new_lines(&self) -> impl Iterator<Item = &[u8]> {
        self.lines.iter().filter_map(|l| match l {
            Line::Context(s) | Line::Add(s) => Some(s.as_slice()),
            Line::Remove(_) => None,
        })
    }
}

/// Everything one file section of a diff says about one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilePatch {
    /// Path before, prefix stripped; `None` for `/dev/null` (a creation).
    pub old_path: Option<String>,
    /// Path after, prefix stripped; `None` for `/dev/null` (a deletion).
    pub new_path: Option<String>,
    pub old_mode: Option<u32>,
    pub new_mode: Option<u32>,
    pub is_rename: bool,
    pub is_copy: bool,
    pub is_new: bool,
    pub is_deleted: bool,
    /// A deletion of the envelope dialect (`*** Delete File:`), whose content, when given,
    /// follows as `-` lines; only the hint of a refusal differs.
    pub delete_by_name: bool,
    pub binary: bool,
    pub hunks: Vec<Hunk>,
    /// 1-based line of the section's first header line.
    pub at_line: usize,
}

impl FilePatch {
    /// Every path this section touches: both sides of a rename or copy.
    pub fn touched_paths(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for p in [&self.old_path, &self.new_path].into_iter().flatten() {
            if !out.contains(&p.as_str()) {
                out.push(p);
            }
        }
        out
    }

    /// The path whose content results from this section (new side, or old side of a deletion).
    pub fn target(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or("")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
    /// Headers that contradict each other: a safety refusal, not a damaged diff.
    pub disagree: bool,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "diff line {}: {}", self.line, self.message)
    }
}

pub(crate) fn err(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
        disagree: false,
    }
}

fn dialect_name(d: Dialect) -> &'static str {
    match d {
        Dialect::Unified => "unified diff",
        Dialect::Envelope => "'*** Begin Patch' envelope",
        Dialect::SearchReplace => "SEARCH/REPLACE block",
    }
}

/// The refusal of a proposal that mixes dialects.
pub(crate) fn mixed(line: usize, own: Dialect, other: Dialect) -> ParseError {
    err(
        line,
        format!(
            "a {} starts here in a proposal read as a {}: the proposal mixes more than one dialect, so which of its changes are meant is not said; send every change in one dialect",
            dialect_name(other),
            dialect_name(own)
        ),
    )
}

fn disagreement(line: usize, what: impl std::fmt::Display) -> ParseError {
    ParseError {
        disagree: true,
        ..err(line, format!("headers disagree: {what}"))
    }
}

/// How path prefixes (`a/`, `b/`) are removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strip {
    /// git's `a/` and `b/` when present on both sides, else nothing.
    Auto,
    /// Remove exactly N leading components (`patch -pN`).
    Components(usize),
}

/// A line of the diff for a message: lossy, escaped, at most 160 characters.
pub(crate) fn show(line: &[u8]) -> String {
    let s: String = line.to_str_lossy().chars().take(160).collect();
    format!("{s:?}")
}

/// A header line as text. File names are kept as `String`s, so a header naming a file whose
/// name is not UTF-8 is refused rather than decoded lossily into another name.
fn header_text(line: &[u8], n: usize) -> Result<&str, ParseError> {
    std::str::from_utf8(line.strip_suffix(b"\r").unwrap_or(line))
        .map_err(|_| err(n, "a file name that is not UTF-8 is not supported"))
}

/// Parses a git-style or plain unified diff into file sections.
pub fn parse(text: &[u8], strip: Strip) -> Result<Vec<FilePatch>, ParseError> {
    let lines = split_text(text);
    let mut patches: Vec<FilePatch> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with(b"diff --git ") {
            let rest = &header_text(line, i + 1)?["diff --git ".len()..];
            let (patch, next) = parse_git_section(&lines, i, rest, strip)?;
            patches.push(patch);
            i = next;
        } else if is_file_header_pair(&lines, i) {
            let mut patch = FilePatch {
                at_line: i + 1,
                ..FilePatch::default()
            };
            let (old_raw, new_raw) = header_pair(&lines, i)?;
            apply_plain_names(&mut patch, old_raw, new_raw, strip, i + 1)?;
            let next = parse_hunks(&lines, i + 2, &mut patch)?;
            if patch.hunks.is_empty() {
                return Err(err(i + 1, "file header without any hunk"));
            }
            patches.push(patch);
            i = next;
        } else if line.starts_with(b"@@") {
            return Err(err(
                i + 1,
                "hunk without a file header (--- / +++) before it",
            ));
        } else if line.starts_with(b"GIT binary patch") || line.starts_with(b"Binary files ") {
            return Err(err(i + 1, "binary patch outside a file section"));
        } else if let Some(other) = foreign_block(&lines, i, Dialect::Unified) {
            return Err(mixed(i + 1, Dialect::Unified, other));
        } else {
            // Preamble or prose between sections (commit messages, `Index:` lines): ignored.
            i += 1;
        }
    }
    Ok(patches)
}

fn is_file_header_pair(lines: &[&[u8]], i: usize) -> bool {
    lines[i].starts_with(b"--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with(b"+++ "))
}

fn header_pair(lines: &[&[u8]], i: usize) -> Result<(Option<String>, Option<String>), ParseError> {
    let old = header_path(&header_text(lines[i], i + 1)?[4..], i + 1)?;
    let new = header_path(&header_text(lines[i + 1], i + 2)?[4..], i + 2)?;
    Ok((old, new))
}

/// A `--- X` / `+++ X` pair (same name, a/ and b/ aside, or one side `/dev/null`) directly
/// followed by `@@`: the next file's header, even inside a hunk whose counts are not reached.
/// A removed `-- x` and an added `++ y` (SQL, Lua comments) name no such pair.
fn starts_next_file(lines: &[&[u8]], i: usize) -> bool {
    if !lines.get(i + 2).is_some_and(|l| l.starts_with(b"@@")) {
        return false;
    }
    match header_pair(lines, i) {
        Ok((Some(old), Some(new))) => {
            let bare = |p: &str, prefix: &str| p.strip_prefix(prefix).map(str::to_string);
            old == new
                || matches!((bare(&old, "a/"), bare(&new, "b/")), (Some(o), Some(n)) if o == n)
        }
        Ok((None, Some(_)) | (Some(_), None)) => true,
        _ => false,
    }
}

/// A `---`/`+++` path: quoted or bare, timestamp after a tab removed, `/dev/null` → None.
fn header_path(raw: &str, line: usize) -> Result<Option<String>, ParseError> {
    let raw = raw.trim_end_matches('\r');
    let path = if raw.starts_with('"') {
        let (path, _) =
            unquote(raw).ok_or_else(|| err(line, "malformed (or not UTF-8) quoted path"))?;
        path
    } else {
        let bare = raw.split('\t').next().unwrap_or("");
        // `diff -u` puts two spaces and a timestamp after the name when no tab is used.
        let bare = match bare.find("  ") {
            Some(pos) if looks_like_timestamp(&bare[pos..]) => &bare[..pos],
            _ => bare,
        };
        bare.trim_end().to_string()
    };
    if path.is_empty() {
        return Err(err(line, "empty path in file header"));
    }
    if path == "/dev/null" {
        return Ok(None);
    }
    Ok(Some(path))
}

fn looks_like_timestamp(s: &str) -> bool {
    let s = s.trim_start();
    s.len() >= 10 && s.as_bytes()[..4].iter().all(u8::is_ascii_digit) && s.as_bytes()[4] == b'-'
}

/// Decodes a C-style quoted path (`"a/t\303\251st\tx"`); returns it and the rest of the input.
pub fn unquote(s: &str) -> Option<(String, &str)> {
    let inner = s.strip_prefix('"')?;
    let mut bytes: Vec<u8> = Vec::new();
    let raw = inner.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'"' => {
                // A name that is not UTF-8 is refused, never decoded into another name.
                let path = String::from_utf8(bytes).ok()?;
                return Some((path, &inner[i + 1..]));
            }
            b'\\' => {
                let c = *raw.get(i + 1)?;
                let (byte, used) = match c {
                    b'n' => (b'\n', 2),
                    b't' => (b'\t', 2),
                    b'r' => (b'\r', 2),
                    b'a' => (7, 2),
                    b'b' => (8, 2),
                    b'f' => (12, 2),
                    b'v' => (11, 2),
                    b'"' => (b'"', 2),
                    b'\\' => (b'\\', 2),
                    b'0'..=b'3' => {
                        let digits = raw.get(i + 1..i + 4)?;
                        if !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                            return None;
                        }
                        let v = (digits[0] - b'0') as u32 * 64
                            + (digits[1] - b'0') as u32 * 8
                            + (digits[2] - b'0') as u32;
                        (v as u8, 4)
                    }
                    _ => return None,
                };
                bytes.push(byte);
                i += used;
            }
            b => {
                bytes.push(b);
                i += 1;
            }
        }
    }
    None
}

fn strip_components(path: &str, n: usize) -> Option<String> {
    let mut rest = path;
    for _ in 0..n {
        let pos = rest.find('/')?;
        rest = rest[pos + 1..].trim_start_matches('/');
    }
    Some(rest.to_string())
}

fn strip_name(
    path: Option<String>,
    prefix: &str,
    strip: Strip,
    auto_strip: bool,
    line: usize,
) -> Result<Option<String>, ParseError> {
    let Some(p) = path else { return Ok(None) };
    match strip {
        Strip::Components(n) => strip_components(&p, n)
            .map(Some)
            .ok_or_else(|| err(line, format!("cannot strip {n} components from {p:?}"))),
        Strip::Auto if auto_strip => Ok(Some(p.strip_prefix(prefix).unwrap_or(&p).to_string())),
        Strip::Auto => Ok(Some(p)),
    }
}

/// Plain (non-git) headers: `a/`/`b/` are stripped only when every named side carries its prefix.
fn apply_plain_names(
    patch: &mut FilePatch,
    old: Option<String>,
    new: Option<String>,
    strip: Strip,
    line: usize,
) -> Result<(), ParseError> {
    let old_ok = old.as_deref().is_none_or(|p| p.starts_with("a/"));
    let new_ok = new.as_deref().is_none_or(|p| p.starts_with("b/"));
    let auto = old_ok && new_ok && (old.is_some() || new.is_some());
    let old = strip_name(old, "a/", strip, auto, line)?;
    let new = strip_name(new, "b/", strip, auto, line + 1)?;
    match (&old, &new) {
        (None, None) => return Err(err(line, "both sides of the file header are /dev/null")),
        (Some(o), Some(n)) if o != n => {
            return Err(disagreement(
                line,
                format!("--- names {o:?} but +++ names {n:?}"),
            ))
        }
        _ => {}
    }
    patch.is_new = old.is_none();
    patch.is_deleted = new.is_none();
    patch.old_path = old;
    patch.new_path = new;
    Ok(())
}

/// Splits the `a/X b/Y` of a `diff --git` line.
fn git_line_names(rest: &str, line: usize) -> Result<(String, String), ParseError> {
    let rest = rest.trim_end_matches('\r');
    if rest.starts_with('"') {
        let (a, tail) =
            unquote(rest).ok_or_else(|| err(line, "malformed (or not UTF-8) quoted path"))?;
        let tail = tail.trim_start();
        let b = if tail.starts_with('"') {
            unquote(tail)
                .ok_or_else(|| err(line, "malformed (or not UTF-8) quoted path"))?
                .0
        } else {
            tail.to_string()
        };
        return Ok((a, b));
    }
    if let Some(pos) = rest.rfind(" \"") {
        let (b, _) = unquote(&rest[pos + 1..])
            .ok_or_else(|| err(line, "malformed (or not UTF-8) quoted path"))?;
        return Ok((rest[..pos].to_string(), b));
    }
    // Unquoted names may contain spaces: prefer the split where both names agree.
    let candidates: Vec<usize> = rest.match_indices(" b/").map(|(i, _)| i).collect();
    for &pos in &candidates {
        let (a, b) = (&rest[..pos], &rest[pos + 1..]);
        if a.strip_prefix("a/") == b.strip_prefix("b/") {
            return Ok((a.to_string(), b.to_string()));
        }
    }
    if let [pos] = candidates.as_slice() {
        return Ok((rest[..*pos].to_string(), rest[pos + 1..].to_string()));
    }
    match rest.split_once(' ') {
        Some((a, b)) if !b.contains(' ') => Ok((a.to_string(), b.to_string())),
        _ => Err(err(
            line,
            format!("cannot tell the two names apart in 'diff --git {rest}'"),
        )),
    }
}

fn parse_mode(value: &str, line: usize) -> Result<u32, ParseError> {
    u32::from_str_radix(value.trim(), 8).map_err(|_| err(line, format!("bad file mode {value:?}")))
}

fn parse_git_section(
    lines: &[&[u8]],
    start: usize,
    rest: &str,
    strip: Strip,
) -> Result<(FilePatch, usize), ParseError> {
    let line_no = start + 1;
    let (git_a, git_b) = git_line_names(rest, line_no)?;
    let git_a = strip_name(Some(git_a), "a/", strip, true, line_no)?.unwrap_or_default();
    let git_b = strip_name(Some(git_b), "b/", strip, true, line_no)?.unwrap_or_default();
    let mut patch = FilePatch {
        at_line: line_no,
        ..FilePatch::default()
    };
    let (names, i) = read_git_headers(lines, start + 1, &mut patch)?;
    reconcile_git_names(&mut patch, names, (git_a, git_b), strip, line_no)?;
    let next = parse_hunks(lines, i, &mut patch)?;
    Ok((patch, next))
}

/// The names an extended header of a `diff --git` section gives, besides its first line.
#[derive(Default)]
struct GitNames {
    rename_from: Option<String>,
    rename_to: Option<String>,
    copy_from: Option<String>,
    copy_to: Option<String>,
    /// The `--- `/`+++ ` pair, when the section has hunks.
    headers: Option<(Option<String>, Option<String>)>,
}

/// Reads the extended header lines from line `i` (modes, rename/copy, index, binary, the
/// `---`/`+++` pair) into `patch` and the names they give; returns those and the index of the
/// first line after them.
fn read_git_headers(
    lines: &[&[u8]],
    mut i: usize,
    patch: &mut FilePatch,
) -> Result<(GitNames, usize), ParseError> {
    let mut names = GitNames::default();
    while i < lines.len() {
        let n = i + 1;
        let l = match header_text(lines[i], n) {
            Ok(l) => l,
            Err(e) if GIT_HEADER_WORDS.iter().any(|w| lines[i].starts_with(w)) => return Err(e),
            Err(_) => break,
        };
        let path_of = |v: &str| -> Result<String, ParseError> {
            if v.starts_with('"') {
                unquote(v)
                    .map(|(p, _)| p)
                    .ok_or_else(|| err(n, "malformed (or not UTF-8) quoted path"))
            } else {
                Ok(v.to_string())
            }
        };
        if let Some(v) = l.strip_prefix("old mode ") {
            patch.old_mode = Some(parse_mode(v, n)?);
        } else if let Some(v) = l.strip_prefix("new mode ") {
            patch.new_mode = Some(parse_mode(v, n)?);
        } else if let Some(v) = l.strip_prefix("deleted file mode ") {
            patch.is_deleted = true;
            patch.old_mode = Some(parse_mode(v, n)?);
        } else if let Some(v) = l.strip_prefix("new file mode ") {
            patch.is_new = true;
            patch.new_mode = Some(parse_mode(v, n)?);
        } else if let Some(v) = l.strip_prefix("rename from ") {
            names.rename_from = Some(path_of(v)?);
        } else if let Some(v) = l.strip_prefix("rename to ") {
            names.rename_to = Some(path_of(v)?);
        } else if let Some(v) = l.strip_prefix("copy from ") {
            names.copy_from = Some(path_of(v)?);
        } else if let Some(v) = l.strip_prefix("copy to ") {
            names.copy_to = Some(path_of(v)?);
        } else if l.starts_with("similarity index ")
            || l.starts_with("dissimilarity index ")
            || l.starts_with("index ")
        {
        } else if l.starts_with("GIT binary patch") || l.starts_with("Binary files ") {
            patch.binary = true;
        } else if is_file_header_pair(lines, i) {
            names.headers = Some(header_pair(lines, i)?);
            i += 2;
            break;
        } else {
            break;
        }
        i += 1;
    }
    Ok((names, i))
}

/// Reconciles every source of names (the `diff --git` line, rename/copy lines, the `---`/`+++`
/// pair) and sets the section's paths; any disagreement is refused, never guessed.
fn reconcile_git_names(
    patch: &mut FilePatch,
    names: GitNames,
    (git_a, git_b): (String, String),
    strip: Strip,
    line_no: usize,
) -> Result<(), ParseError> {
    let disagree = |what: String| disagreement(line_no, what);
    let GitNames {
        rename_from,
        rename_to,
        copy_from,
        copy_to,
        headers,
    } = names;
    patch.is_rename = rename_from.is_some() || rename_to.is_some();
    patch.is_copy = copy_from.is_some() || copy_to.is_some();
    if patch.is_rename && patch.is_copy {
        return Err(disagree("both rename and copy lines".into()));
    }
    for (from, to, kind) in [
        (&rename_from, &rename_to, "rename"),
        (&copy_from, &copy_to, "copy"),
    ] {
        if let (Some(f), Some(t)) = (from, to) {
            if f != &git_a || t != &git_b {
                return Err(disagree(format!(
                    "'{kind} from/to' name {f:?} → {t:?} but 'diff --git' names {git_a:?} → {git_b:?}"
                )));
            }
        } else if from.is_some() || to.is_some() {
            return Err(disagree(format!(
                "'{kind} from' without '{kind} to' (or the reverse)"
            )));
        }
    }
    if git_a != git_b && !patch.is_rename && !patch.is_copy {
        return Err(disagree(format!(
            "'diff --git' names {git_a:?} and {git_b:?} but there is no rename or copy line"
        )));
    }
    let mut old_path = if patch.is_new { None } else { Some(git_a) };
    let mut new_path = if patch.is_deleted { None } else { Some(git_b) };
    if patch.is_new && patch.is_deleted {
        return Err(disagree("both 'new file' and 'deleted file'".into()));
    }
    if let Some((h_old, h_new)) = headers {
        let h_old = strip_name(h_old, "a/", strip, true, line_no)?;
        let h_new = strip_name(h_new, "b/", strip, true, line_no)?;
        if h_old.is_none() && !patch.is_new {
            if old_path.as_deref() == new_path.as_deref() && patch.new_mode.is_none() {
                patch.is_new = true;
                old_path = None;
            } else {
                return Err(disagree("'--- /dev/null' but not a new file".into()));
            }
        }
        if h_new.is_none() && !patch.is_deleted {
            if old_path.as_deref() == new_path.as_deref() {
                patch.is_deleted = true;
                new_path = None;
            } else {
                return Err(disagree("'+++ /dev/null' but not a deletion".into()));
            }
        }
        if h_old.is_some() && h_old != old_path {
            return Err(disagree(format!(
                "'---' names {:?} but 'diff --git' names {:?}",
                h_old.unwrap_or_default(),
                old_path.unwrap_or_default()
            )));
        }
        if h_new.is_some() && h_new != new_path {
            return Err(disagree(format!(
                "'+++' names {:?} but 'diff --git' names {:?}",
                h_new.unwrap_or_default(),
                new_path.unwrap_or_default()
            )));
        }
    }
    patch.old_path = old_path;
    patch.new_path = new_path;
    Ok(())
}

/// The extended header lines of a `diff --git` section that carry a name.
const GIT_HEADER_WORDS: [&[u8]; 4] = [b"rename from ", b"rename to ", b"copy from ", b"copy to "];

/// Reads the hunks that follow a file header; returns the index of the first line after them.
fn parse_hunks(lines: &[&[u8]], mut i: usize, patch: &mut FilePatch) -> Result<usize, ParseError> {
    while i < lines.len() && lines[i].starts_with(b"@@") {
        let (mut hunk, bare_tail, next, markers) = parse_hunk(lines, i)?;
        trim_trailing_blank(&mut hunk, bare_tail);
        check_no_newline_markers(&hunk, markers)?;
        patch.hunks.push(hunk);
        i = next;
    }
    Ok(i)
}

fn parse_range(s: &str) -> Option<(usize, usize)> {
    match s.split_once(',') {
        Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
        None => Some((s.parse().ok()?, 1)),
    }
}

fn parse_hunk_header(line: &str) -> Option<(usize, usize, usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let (os, oc) = parse_range(old)?;
    let (ns, nc) = parse_range(new)?;
    Some((os, oc, ns, nc))
}

fn is_bare(line: &[u8]) -> bool {
    line.is_empty() || line == b"\r"
}

/// `-- ` alone on a line: the signature `git format-patch` puts after the last hunk.
fn is_signature(line: &[u8]) -> bool {
    line == b"-- " || line == b"-- \r"
}

/// `From <commit id> …`: the first line of the next mail in a `git format-patch` series,
/// whose message may hold anything.
fn starts_mail(line: &[u8]) -> bool {
    line.strip_prefix(b"From ")
        .and_then(|rest| rest.get(..40))
        .is_some_and(|id| id.iter().all(u8::is_ascii_hexdigit))
}

fn malformed(lines: &[&[u8]], at: usize, hunk_line: usize, why: &str) -> ParseError {
    err(
        at + 1,
        format!(
            "{} inside the hunk at line {hunk_line} is not a context (' '), removed ('-') or added ('+') line{why}; a context line that lost its leading space must get it back",
            show(lines[at])
        ),
    )
}

/// Parses one hunk; also returns how many bare empty lines (no leading space) end its body.
///
/// A hunk ends at the next `@@`, `diff --git` or file header, or at the end of the input
/// (the recount pass reads that whole body; the strict pass wants it to agree with the
/// header's counts). A line that is none of ` `, `-`, `+`, `\` or empty ends it only where the
/// header's counts are reached (followed at most by blank lines or a `-- ` signature) and no
/// change follows before the next file section: anywhere else the diff is malformed, never a
/// silently shorter hunk.
fn parse_hunk(lines: &[&[u8]], start: usize) -> Result<(Hunk, usize, usize, Markers), ParseError> {
    let mut hunk = hunk_header(lines, start)?;
    let body = read_hunk_body(lines, start, &mut hunk)?;
    let end = body.end;
    let trailer = |from: usize| {
        lines[from..end]
            .iter()
            .all(|l| is_bare(l) || is_signature(l) || l.starts_with(b"\\"))
    };
    if let Some(at) = body.prose {
        let Some((keep, _)) = body.reached.filter(|(_, from)| trailer(*from)) else {
            return Err(malformed(lines, at, start + 1, ""));
        };
        refuse_changes_after_prose(lines, at, start)?;
        hunk.lines.truncate(keep);
        return Ok((hunk, 0, at, body.markers));
    }
    if let Some((keep, from)) = body.reached {
        if from < end && trailer(from) && lines[from..end].iter().any(|l| is_signature(l)) {
            hunk.lines.truncate(keep);
            return Ok((hunk, 0, end, body.markers));
        }
        refuse_changes_after_blank(lines, start, from, end)?;
    }
    let bare_tail = lines[start + 1..end]
        .iter()
        .rev()
        .filter(|l| !l.starts_with(b"\\"))
        .take_while(|l| is_bare(l))
        .count();
    Ok((hunk, bare_tail, end, body.markers))
}

/// The hunk an `@@` header at line `start` opens, with no lines yet: its ranges, or a
/// placeholder (`@@ ... @@`, `@@ @@`) when the model gave no numbers.
fn hunk_header(lines: &[&[u8]], start: usize) -> Result<Hunk, ParseError> {
    let header = lines[start].to_str_lossy();
    let header = header.trim_end_matches('\r');
    let (old_start, old_count, new_start, new_count, placeholder) = match parse_hunk_header(header)
    {
        Some((a, b, c, d)) => (a, b, c, d, false),
        None => {
            let inner = header.trim_start_matches('@').trim();
            let inner = inner.split("@@").next().unwrap_or("").trim();
            if inner.is_empty() || inner.chars().all(|c| c == '.' || c == ' ' || c == '…') {
                (0, 0, 0, 0, true)
            } else {
                return Err(err(start + 1, format!("malformed hunk header {header:?}")));
            }
        }
    };
    Ok(Hunk {
        old_start,
        old_count,
        new_start,
        new_count,
        placeholder,
        lines: Vec::new(),
        old_no_eol: false,
        new_no_eol: false,
        at_line: start + 1,
        header: header.to_string(),
        anchors: Vec::new(),
        at_end: false,
    })
}

/// What reading a hunk's body found.
struct HunkBody {
    /// The index of the first line after the body.
    end: usize,
    /// Where the header's counts were first met exactly: (body length, next diff line).
    reached: Option<(usize, usize)>,
    /// A line that is none of ` `, `-`, `+`, `\` or empty, which stopped the reading.
    prose: Option<usize>,
    markers: Markers,
}

/// Reads a hunk's lines after its header into `hunk`, up to the next `@@`, `diff --git` or
/// file header, a line of prose, or the end of the input.
fn read_hunk_body(lines: &[&[u8]], start: usize, hunk: &mut Hunk) -> Result<HunkBody, ParseError> {
    let (mut old_n, mut new_n) = (0usize, 0usize);
    let mut reached: Option<(usize, usize)> = None;
    let mut prose: Option<usize> = None;
    let mut markers = Markers::default();
    let mut i = start + 1;
    while i < lines.len() {
        let l = lines[i];
        let counts_reached =
            hunk.placeholder || (old_n >= hunk.old_count && new_n >= hunk.new_count);
        if l.starts_with(b"@@")
            || l.starts_with(b"diff --git ")
            || (is_file_header_pair(lines, i) && (counts_reached || starts_next_file(lines, i)))
        {
            break;
        }
        match l.first() {
            Some(b' ') => hunk.lines.push(Line::Context(l[1..].to_vec())),
            Some(b'-') => hunk.lines.push(Line::Remove(l[1..].to_vec())),
            Some(b'+') => hunk.lines.push(Line::Add(l[1..].to_vec())),
            Some(b'\\') => no_newline_marker(hunk, &mut markers, i)?,
            // A blank context line whose leading space was lost.
            _ if is_bare(l) => hunk.lines.push(Line::Context(l.to_vec())),
            _ => {
                prose = Some(i);
                break;
            }
        }
        match hunk.lines.last() {
            Some(Line::Add(_)) if !l.starts_with(b"\\") => new_n += 1,
            Some(Line::Remove(_)) if !l.starts_with(b"\\") => old_n += 1,
            Some(Line::Context(_)) if !l.starts_with(b"\\") => {
                old_n += 1;
                new_n += 1;
            }
            _ => {}
        }
        if !hunk.placeholder
            && reached.is_none()
            && old_n == hunk.old_count
            && new_n == hunk.new_count
        {
            reached = Some((hunk.lines.len(), i + 1));
        }
        i += 1;
    }
    Ok(HunkBody {
        end: i,
        reached,
        prose,
        markers,
    })
}

/// A `\ No newline at end of file` at line `i`: the hunk line before it ends its side.
fn no_newline_marker(hunk: &mut Hunk, markers: &mut Markers, i: usize) -> Result<(), ParseError> {
    let mark = Some(Marker {
        after: hunk.lines.len(),
        at: i + 1,
    });
    match hunk.lines.last() {
        Some(Line::Remove(_)) => {
            hunk.old_no_eol = true;
            markers.old = mark;
        }
        Some(Line::Add(_)) => {
            hunk.new_no_eol = true;
            markers.new = mark;
        }
        Some(Line::Context(_)) => {
            hunk.old_no_eol = true;
            hunk.new_no_eol = true;
            markers.old = mark;
            markers.new = mark;
        }
        None => return Err(err(i + 1, "'\\ No newline' marker before any line")),
    }
    Ok(())
}

/// Prose at line `at` after a complete hunk: it must hold no change before the next file
/// section, or the damaged line really was inside the hunk.
fn refuse_changes_after_prose(lines: &[&[u8]], at: usize, start: usize) -> Result<(), ParseError> {
    for (j, l) in lines.iter().enumerate().skip(at) {
        if l.starts_with(b"diff --git ")
            || is_file_header_pair(lines, j)
            || starts_mail(l)
            || foreign_block(lines, j, Dialect::Unified).is_some()
        {
            break;
        }
        let change = (l.starts_with(b"+") && !l.starts_with(b"+++"))
            || (l.starts_with(b"-") && !l.starts_with(b"---") && !is_signature(l))
            || l.starts_with(b"@@");
        if change {
            return Err(malformed(
                lines,
                at,
                start + 1,
                &format!(" (changes follow it at line {})", j + 1),
            ));
        }
    }
    Ok(())
}

/// The header's counts were met at line `from`, then a blank line, then changes. Either the
/// blank line ends the hunk and the rest is prose that happens to start with `+` or `-` (`git
/// apply` reads it so), or the header is under-counted and the blank line is context that
/// lost its space (the recount pass would read it so). Which one is not said, and the wrong
/// reading writes prose into the file or drops a change: refused. Context lines after the
/// blank line are kept as context: they write nothing, they only narrow where the hunk may go.
fn refuse_changes_after_blank(
    lines: &[&[u8]],
    start: usize,
    from: usize,
    end: usize,
) -> Result<(), ParseError> {
    let blank = (from..end).find(|&j| is_bare(lines[j]));
    let change = blank.and_then(|b| (b + 1..end).find(|&j| is_change_line(lines[j])));
    if let (Some(b), Some(c)) = (blank, change) {
        return Err(err(
            c + 1,
            format!(
                "the hunk at line {} has every line its header counts before the blank line at line {}; {} after the blank line may be prose or more of the hunk, so which is meant is not said; give the header the hunk's true counts, or keep prose apart from the diff",
                start + 1,
                b + 1,
                show(lines[c])
            ),
        ));
    }
    Ok(())
}

/// A hunk line that changes the file.
fn is_change_line(line: &[u8]) -> bool {
    matches!(line.first(), Some(b'+' | b'-')) && !is_signature(line)
}

/// Where a hunk's `\ No newline at end of file` markers stood.
#[derive(Debug, Clone, Copy, Default)]
struct Markers {
    old: Option<Marker>,
    new: Option<Marker>,
}

#[derive(Debug, Clone, Copy)]
struct Marker {
    /// How many hunk lines came before it.
    after: usize,
    /// Its line in the diff.
    at: usize,
}

/// The marker says the line before it is the last of its side and has no newline; a line of
/// that side after it contradicts it (the file would lose a newline that a later line shows
/// it has). Such a diff is malformed, whatever the header's counts say.
fn check_no_newline_markers(hunk: &Hunk, markers: Markers) -> Result<(), ParseError> {
    /// Whether a hunk line belongs to the side (old or new) of a marker.
    type OnSide = fn(&Line) -> bool;
    let sides: [(Option<Marker>, &str, OnSide); 2] = [
        (markers.old, "old", |l| !matches!(l, Line::Add(_))),
        (markers.new, "new", |l| !matches!(l, Line::Remove(_))),
    ];
    for (mark, side, on_side) in sides {
        let Some(Marker { after, at }) = mark else {
            continue;
        };
        let later = hunk.lines.get(after..).unwrap_or(&[]);
        if later.iter().any(on_side) {
            return Err(err(
                at,
                format!(
                    "'\\ No newline at end of file' in the hunk at line {} follows a line that is not the last {side} line of the hunk; the marker may only follow the last line of its side",
                    hunk.at_line
                ),
            ));
        }
    }
    Ok(())
}

/// Drops bare empty lines at a hunk's end that its header does not account for: they are the
/// diff text's final newline or blank lines between sections, not context.
fn trim_trailing_blank(hunk: &mut Hunk, mut bare_tail: usize) {
    while bare_tail > 0 && matches!(hunk.lines.last(), Some(Line::Context(s)) if is_bare(s)) {
        let fits = !hunk.placeholder
            && hunk.body_old_count() <= hunk.old_count
            && hunk.body_new_count() <= hunk.new_count;
        if fits {
            break;
        }
        hunk.lines.pop();
        bare_tail -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_git_modify() {
        let d = "diff --git a/src/x.py b/src/x.py\nindex 1..2 100644\n--- a/src/x.py\n+++ b/src/x.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].old_path.as_deref(), Some("src/x.py"));
        assert_eq!(p[0].hunks[0].lines.len(), 3);
        assert!(p[0].hunks[0].counts_match());
    }

    #[test]
    fn deletion_and_creation() {
        let d = "--- a/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n--- /dev/null\n+++ b/y\n@@ -0,0 +1 @@\n+y\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p[0].touched_paths(), vec!["x"]);
        assert!(p[0].is_deleted);
        assert!(p[1].is_new);
        assert_eq!(p[1].new_path.as_deref(), Some("y"));
    }

    #[test]
    fn renames_and_copies_touch_both_sides() {
        let d = "diff --git a/a.txt b/sub/b.txt\nsimilarity index 100%\nrename from a.txt\nrename to sub/b.txt\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert!(p[0].is_rename);
        assert_eq!(p[0].touched_paths(), vec!["a.txt", "sub/b.txt"]);
        let d = "diff --git a/a.txt b/c.txt\ncopy from a.txt\ncopy to c.txt\n";
        assert!(parse(d.as_bytes(), Strip::Auto).expect("parses")[0].is_copy);
    }

    #[test]
    fn quoted_paths_with_c_escapes() {
        let d = "diff --git \"a/t\\303\\251st\\tx\" \"b/t\\303\\251st\\tx\"\n--- \"a/t\\303\\251st\\tx\"\n+++ \"b/t\\303\\251st\\tx\"\n@@ -1 +1 @@\n-a\n+b\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p[0].new_path.as_deref(), Some("tést\tx"));
    }

    #[test]
    fn disagreeing_headers_are_refused() {
        let d = "diff --git a/A b/B\n--- a/A\n+++ b/B\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(parse(d.as_bytes(), Strip::Auto)
            .expect_err("refused")
            .message
            .contains("disagree"));
        let e =
            parse(b"--- a/A\n+++ b/C\n@@ -1 +1 @@\n-a\n+b\n", Strip::Auto).expect_err("refused");
        assert!(e.disagree);
        // A malformed header that merely says "disagree" is damage, not a refusal.
        let e = parse(b"--- a/A\n+++ b/A\n@@ disagree @@\n-a\n+b\n", Strip::Auto)
            .expect_err("malformed");
        assert!(!e.disagree, "{e}");
        let d = "diff --git a/A b/A\n--- a/A\n+++ b/C\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(parse(d.as_bytes(), Strip::Auto).is_err());
        let d = "--- a/A\n+++ b/C\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(parse(d.as_bytes(), Strip::Auto).is_err());
    }

    #[test]
    fn absolute_traditional_header_stays_absolute() {
        let d = "--- /tmp/x\n+++ /tmp/x\n@@ -1 +1 @@\n-a\n+b\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p[0].new_path.as_deref(), Some("/tmp/x"));
    }

    #[test]
    fn body_longer_than_header_is_kept_whole() {
        let d = "--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-a\n+b\n+c\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p[0].hunks[0].lines.len(), 3);
        assert!(!p[0].hunks[0].counts_match());
    }

    #[test]
    fn sql_comments_are_not_file_headers() {
        let d = "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n--- old comment\n+++ new comment\n select 1;\n--- a/r.sql\n+++ b/r.sql\n@@ -1 +1 @@\n-x\n+y\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p.len(), 2);
        assert_eq!(
            p[0].hunks[0].lines[0],
            Line::Remove("-- old comment".into())
        );
        assert_eq!(p[0].hunks[0].lines[1], Line::Add("++ new comment".into()));
        assert!(p[0].hunks[0].counts_match());
    }

    #[test]
    fn no_newline_markers() {
        let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n";
        let h = &parse(d.as_bytes(), Strip::Auto).expect("parses")[0].hunks[0];
        assert!(h.old_no_eol && !h.new_no_eol);
    }

    #[test]
    fn modes_and_binary() {
        let d = "diff --git a/s.sh b/s.sh\nold mode 100644\nnew mode 100755\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p[0].new_mode, Some(0o100755));
        let d = "diff --git a/i.png b/i.png\nBinary files a/i.png and b/i.png differ\n";
        assert!(parse(d.as_bytes(), Strip::Auto).expect("parses")[0].binary);
    }

    #[test]
    fn hunk_without_header_reports_line() {
        let e = parse(b"hello\n@@ -1 +1 @@\n-a\n+b\n", Strip::Auto).expect_err("refused");
        assert_eq!(e.line, 2);
    }

    #[test]
    fn a_line_that_lost_its_marker_makes_the_diff_malformed() {
        // Before the header's counts: inside the hunk.
        let d = "--- a/x\n+++ b/x\n@@ -1,4 +1,4 @@\n a\n\tb\n-c\n+C\n d\n";
        let e = parse(d.as_bytes(), Strip::Auto).expect_err("malformed");
        assert_eq!(e.line, 5);
        assert!(e.message.contains("\"\\tb\""), "{e}");
        // After them, but changes follow: the header was under-counted, still inside.
        let d = "--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-a\n+A\n\tb\n-c\n+C\n";
        let e = parse(d.as_bytes(), Strip::Auto).expect_err("malformed");
        assert_eq!(e.line, 6);
        assert!(e.message.contains("changes follow it at line 7"), "{e}");
        // Over-long body, then prose: the hunk cannot end anywhere the diff says.
        let d = "--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-a\n+A\n+B\nThat is all.\n";
        assert_eq!(
            parse(d.as_bytes(), Strip::Auto)
                .expect_err("malformed")
                .line,
            7
        );
        // A placeholder header has no counts to end at.
        let d = "--- a/x\n+++ b/x\n@@ ... @@\n-a\n+A\nThat is all.\n";
        assert!(parse(d.as_bytes(), Strip::Auto).is_err());
    }

    #[test]
    fn prose_and_signatures_after_a_complete_hunk_are_not_hunk_lines() {
        let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+A\n\nThat is all.\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert!(p[0].hunks[0].counts_match());
        let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+A\n-- \n2.43.0\n\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p[0].hunks[0].lines.len(), 2);
        let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+A\n-- \n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert!(p[0].hunks[0].counts_match());
    }

    #[test]
    fn a_format_patch_series_reads_as_its_patches() {
        let id = "0123456789abcdef0123456789abcdef01234567";
        let d = format!("From {id} Mon Sep 17 00:00:00 2001\nSubject: [PATCH 1/2] one\n\n- first\n---\n x | 2 +-\n\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+A\n-- \n2.43.0\n\nFrom {id} Mon Sep 17 00:00:00 2001\nSubject: [PATCH 2/2] two\n\n- second\n+ more\n---\ndiff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-b\n+B\n-- \n2.43.0\n");
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|f| f.hunks[0].counts_match()));
    }

    #[test]
    fn file_headers_end_an_over_counted_hunk() {
        let d = "--- m.js\n+++ m.js\n@@ -1,9 +1,9 @@\n a\n-b\n+B\n--- package.json\n+++ package.json\n@@ -1 +1 @@\n-1\n+2\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].hunks[0].lines.len(), 3);
        assert!(!p[0].hunks[0].counts_match());
        assert_eq!(p[1].new_path.as_deref(), Some("package.json"));
        // Names that differ are a removed `-- x` and an added `++ y`, even before `@@`.
        let d =
            "--- a/q.sql\n+++ b/q.sql\n@@ -1,3 +1,3 @@\n--- old\n+++ new\n@@ -9 +9 @@\n-x\n+y\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p[0].hunks.len(), 2);
    }

    #[test]
    fn changes_after_a_blank_line_past_the_counts_are_ambiguous() {
        let d = "--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n a\n+n\n b\n\n+ Note: done\n";
        let e = parse(d.as_bytes(), Strip::Auto).expect_err("ambiguous");
        assert_eq!(e.line, 8);
        assert!(e.message.contains("blank line at line 7"), "{e}");
        // Context after the blank line writes nothing: kept, for the recount pass to match.
        let d = "--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n a\n+n\n b\n\n c\n";
        let p = parse(d.as_bytes(), Strip::Auto).expect("parses");
        assert_eq!(p[0].hunks[0].lines.len(), 5);
        // No blank line: an under-counted hunk, kept whole (the recount pass reads it).
        let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+A\n+B\n";
        assert!(parse(d.as_bytes(), Strip::Auto).is_ok());
    }

    #[test]
    fn a_no_newline_marker_must_follow_the_last_line_of_its_side() {
        let d = "--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n a\n+X\n\\ No newline at end of file\n b\n";
        let e = parse(d.as_bytes(), Strip::Auto).expect_err("malformed");
        assert_eq!(e.line, 6);
        // After the last removed line, with added lines following: well formed.
        let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n\n";
        assert!(parse(d.as_bytes(), Strip::Auto).is_ok());
    }

    #[test]
    fn a_block_of_another_dialect_is_refused_not_dropped() {
        let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+A\n\nx\n<<<<<<< SEARCH\nb\n=======\nB\n>>>>>>> REPLACE\n";
        let e = parse(d.as_bytes(), Strip::Auto).expect_err("mixed");
        assert!(e.message.contains("more than one dialect"), "{e}");
        assert_eq!(e.line, 8);
    }

    #[test]
    fn lines_are_bytes_and_names_must_be_utf8() {
        let d = b"--- a/m\n+++ b/m\n@@ -1 +1 @@\n-caf\xe9\n+th\xe9\r\n";
        let p = parse(d, Strip::Auto).expect("parses");
        assert_eq!(p[0].hunks[0].lines[0], Line::Remove(b"caf\xe9".to_vec()));
        assert_eq!(p[0].hunks[0].lines[1], Line::Add(b"th\xe9\r".to_vec()));
        let d = b"--- a/caf\xe9\n+++ b/caf\xe9\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(parse(d, Strip::Auto)
            .expect_err("refused")
            .message
            .contains("UTF-8"));
        let d = b"diff --git \"a/caf\\351\" \"b/caf\\351\"\n--- \"a/caf\\351\"\n+++ \"b/caf\\351\"\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(parse(d, Strip::Auto).is_err());
    }
}
