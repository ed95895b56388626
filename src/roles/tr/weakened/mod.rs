//! Tests may not be weakened (SPEC §3.9). A model that cannot make a red test pass can make it
//! stop counting instead: skip it, delete it, drop its assertions, or bend the configuration
//! that decides which tests run. TR reads each proposal's change set — after parse and scope,
//! before anything is applied — and names every such edit: in a file that holds tests on the
//! baseline, an added skip or expected-failure marker, a removed test, removed assertions; and
//! any change to a file of test configuration; and any change to a file that holds tests the
//! baseline's report judged (`judged`).
//!
//! Only what the proposal changes is read: the lines of its hunks (a `writes` proposal is
//! compared with the file's baseline bytes, past their common first and last lines), and the
//! baseline file only where a finding needs it (does this file hold tests? which section of
//! `pyproject.toml` is this line in?). Lines are bytes, never decoded.
//!
//! A move is not a removal. A test is removed when its name leaves the changed lines and does
//! not come back in them; assertions are removed when the file's changed lines remove more
//! assertions than they add (then each removed one not re-added verbatim is named); a marker
//! is added when the same marker in front of the same definition was not removed elsewhere.

mod config;
mod judged;
mod lang;

pub use judged::{in_judged, judged_files, Judged, JudgedFile};

use super::diff::{show, FilePatch, Line};
use crate::git::files::FileOutcome;
use crate::store::records::Weakening;
use bstr::ByteSlice;
use lang::{ByPath, Lang};
use std::collections::HashMap;
use std::path::Path;

/// Findings of one kind named per file; the rest are counted in one more line.
const MAX_PER_KIND: usize = 20;
/// How far below a marker its definition is looked for (decorator stacks are short).
const MARKER_REACH: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Context,
    Remove,
    Add,
}

/// One hunk, as both kinds of proposal give it.
struct View<'a> {
    lines: Vec<(Kind, &'a [u8])>,
    /// 1-based baseline line of the first old-side line, and proposed-file line of the first
    /// new-side line; `None` where the proposal gives no numbers (the other dialects).
    old_start: Option<usize>,
    new_start: Option<usize>,
}

impl View<'_> {
    fn old_len(&self) -> usize {
        self.lines.iter().filter(|(k, _)| *k != Kind::Add).count()
    }

    fn new_len(&self) -> usize {
        self.lines
            .iter()
            .filter(|(k, _)| *k != Kind::Remove)
            .count()
    }
}

/// Where a file's baseline bytes come from: given (a `writes` proposal already read them), or
/// read from the work tree the first time a finding needs them.
enum Source<'a> {
    Given(Option<&'a [u8]>),
    Tree(&'a Path),
}

/// One file as a proposal changes it.
struct FileChange<'a> {
    /// The path on the baseline side (the new path of a creation).
    path: &'a str,
    views: Vec<View<'a>>,
    created: bool,
    deleted: bool,
    renamed_to: Option<&'a str>,
    source: Source<'a>,
}

/// The baseline bytes of a file, read at most once.
struct Baseline<'a> {
    source: &'a Source<'a>,
    path: &'a str,
    loaded: Option<Option<Vec<u8>>>,
}

impl Baseline<'_> {
    fn bytes(&mut self) -> Option<&[u8]> {
        if self.loaded.is_none() {
            self.loaded = Some(match self.source {
                Source::Given(b) => b.map(<[u8]>::to_vec),
                Source::Tree(root) => super::apply::read_state(root, self.path)
                    .ok()
                    .flatten()
                    .map(|s| s.bytes),
            });
        }
        self.loaded.as_ref().and_then(|b| b.as_deref())
    }

    fn lines(&mut self) -> Vec<&[u8]> {
        self.bytes()
            .map(|b| {
                let mut lines: Vec<&[u8]> = b.split(|c| *c == b'\n').collect();
                if b.ends_with(b"\n") {
                    lines.pop();
                }
                lines
                    .into_iter()
                    .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The weakening edits of a diff's file sections (already scoped: paths normalised), reading
/// baselines from the work tree at `root`.
pub fn in_patches(patches: &[FilePatch], root: &Path) -> Vec<Weakening> {
    let mut out = Vec::new();
    for patch in patches {
        let Some(path) = patch.old_path.as_deref().or(patch.new_path.as_deref()) else {
            continue;
        };
        let views = patch
            .hunks
            .iter()
            .map(|h| View {
                lines: h
                    .lines
                    .iter()
                    .map(|l| match l {
                        Line::Context(t) => (Kind::Context, unix(t)),
                        Line::Remove(t) => (Kind::Remove, unix(t)),
                        Line::Add(t) => (Kind::Add, unix(t)),
                    })
                    .collect(),
                old_start: (!h.placeholder).then_some(h.old_start),
                new_start: (!h.placeholder).then_some(h.new_start),
            })
            .collect();
        // A copy leaves its source as it was: what it makes is a new file.
        let path = if patch.is_copy {
            patch.new_path.as_deref().unwrap_or(path)
        } else {
            path
        };
        let change = FileChange {
            path,
            views,
            created: patch.old_path.is_none() || patch.is_copy,
            deleted: patch.new_path.is_none(),
            renamed_to: patch
                .is_rename
                .then_some(patch.new_path.as_deref())
                .flatten()
                .filter(|n| *n != path),
            source: Source::Tree(root),
        };
        check_file(change, &mut out);
    }
    finish(out)
}

/// The weakening edits of whole-file writes, each compared with its baseline bytes.
pub fn in_writes(outcomes: &[FileOutcome]) -> Vec<Weakening> {
    let mut out = Vec::new();
    for o in outcomes {
        let before = o.before.as_ref().map(|s| s.bytes.as_slice());
        let after = o.after.as_ref().map(|s| s.bytes.as_slice());
        let view = write_view(before.unwrap_or_default(), after.unwrap_or_default());
        check_file(
            FileChange {
                path: &o.path,
                views: vec![view],
                created: before.is_none(),
                deleted: after.is_none(),
                renamed_to: None,
                source: Source::Given(before),
            },
            &mut out,
        );
    }
    finish(out)
}

fn finish(mut out: Vec<Weakening>) -> Vec<Weakening> {
    out.sort_by(|a, b| a.file.cmp(&b.file).then(a.line.cmp(&b.line)));
    out
}

fn unix(t: &[u8]) -> &[u8] {
    t.strip_suffix(b"\r").unwrap_or(t)
}

fn split(bytes: &[u8]) -> Vec<&[u8]> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    body.split(|c| *c == b'\n').map(unix).collect()
}

/// A whole-file write as one hunk: the lines both versions share at the start and at the end
/// are context, the rest removed and added. Linear, and coarse only where a finer diff would
/// pair removed and added lines, which the rules (moves are not removals) do not need.
fn write_view<'a>(before: &'a [u8], after: &'a [u8]) -> View<'a> {
    let old = split(before);
    let new = split(after);
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut lines = Vec::with_capacity(old.len() + new.len() - prefix - suffix);
    lines.extend(old[..prefix].iter().map(|l| (Kind::Context, *l)));
    lines.extend(
        old[prefix..old.len() - suffix]
            .iter()
            .map(|l| (Kind::Remove, *l)),
    );
    lines.extend(
        new[prefix..new.len() - suffix]
            .iter()
            .map(|l| (Kind::Add, *l)),
    );
    lines.extend(
        old[old.len() - suffix..]
            .iter()
            .map(|l| (Kind::Context, *l)),
    );
    View {
        lines,
        old_start: Some(1),
        new_start: Some(1),
    }
}

fn finding(file: &str, line: Option<usize>, what: impl Into<String>) -> Weakening {
    Weakening {
        file: file.to_string(),
        line,
        what: what.into(),
    }
}

fn check_file(change: FileChange<'_>, out: &mut Vec<Weakening>) {
    let targets = [Some(change.path), change.renamed_to];
    if let Some((path, kind)) = targets
        .into_iter()
        .flatten()
        .find_map(|p| config::kind_of(p).map(|k| (p, k)))
    {
        let mut base = Baseline {
            source: &change.source,
            path: change.path,
            loaded: None,
        };
        config::check(path, kind, &change, &mut base, out);
        return;
    }
    let Some(lang) = lang::lang_of(change.path) else {
        return;
    };
    if change.created {
        // A file that did not exist held no tests on the baseline.
        return;
    }
    let mut base = Baseline {
        source: &change.source,
        path: change.path,
        loaded: None,
    };
    if change.deleted {
        if holds_tests(change.path, lang, &mut base) {
            out.push(finding(
                change.path,
                None,
                "deletes a file that holds tests",
            ));
        }
        return;
    }
    if let Some(to) = change.renamed_to {
        if holds_tests(change.path, lang, &mut base) {
            out.push(finding(
                change.path,
                None,
                format!("moves a file that holds tests to {to} (its tests are renamed, or no longer collected)"),
            ));
        }
    }
    let scan = Scan::of(lang, &change.views);
    // A "modification" of a file the baseline lacks creates it (SPEC §3.6): it held no tests.
    if scan.is_empty() || base.bytes().is_none() || !holds_tests(change.path, lang, &mut base) {
        return;
    }
    // The baseline's lines are needed only to place hunks without numbers and to find a Rust
    // file's tests.
    let numbered = change.views.iter().all(|v| v.old_start.is_some());
    let lines = if numbered && lang != Lang::Rust {
        Vec::new()
    } else {
        base.lines()
    };
    let starts = starts(&change.views, &lines);
    let region = (lang == Lang::Rust).then(|| rust_test_region(change.path, &lines));
    scan.judge(change.path, &starts, region.unwrap_or(1), out);
}

/// Whether a file holds tests on the baseline: by its name where that settles it, else by its
/// lines.
fn holds_tests(path: &str, lang: Lang, base: &mut Baseline<'_>) -> bool {
    match lang::by_path(path, lang) {
        ByPath::Yes => true,
        ByPath::No => false,
        ByPath::Maybe => base
            .bytes()
            .is_some_and(|b| b.lines().any(|l| lang::shows_tests(lang, l))),
    }
}

/// The first baseline line of a Rust file's tests: its `#[cfg(test)]` module (by convention
/// at the end), or the whole file (an integration test, a `tests.rs` module). An assertion
/// above it belongs to the library code, not to a test.
fn rust_test_region(path: &str, lines: &[&[u8]]) -> usize {
    if path.starts_with("tests/") || path.contains("/tests/") {
        return 1;
    }
    lines
        .iter()
        .position(|l| l.trim_ascii().starts_with(b"#[cfg(test)]"))
        .map_or(1, |i| i + 1)
}

/// The 1-based old and new start of each hunk: as the diff says, or, for a hunk without
/// numbers, where its old lines first occur in the baseline after the previous hunk.
fn starts(views: &[View<'_>], base: &[&[u8]]) -> Vec<(Option<usize>, Option<usize>)> {
    let mut out = Vec::with_capacity(views.len());
    let mut delta: isize = 0;
    let mut from = 0;
    for v in views {
        let (old, new) = match (v.old_start, v.new_start) {
            (Some(o), Some(n)) => (Some(o), Some(n)),
            _ => {
                let o = locate(v, base, from).map(|i| i + 1);
                (o, o.map(|o| o.saturating_add_signed(delta)))
            }
        };
        if let Some(o) = old {
            from = (o.saturating_sub(1) + v.old_len()).min(base.len());
        }
        delta += v.new_len() as isize - v.old_len() as isize;
        out.push((old, new));
    }
    out
}

/// The first index at or after `from` where the hunk's old lines occur in the baseline.
fn locate(v: &View<'_>, base: &[&[u8]], from: usize) -> Option<usize> {
    let old: Vec<&[u8]> = v
        .lines
        .iter()
        .filter(|(k, _)| *k != Kind::Add)
        .map(|(_, t)| *t)
        .collect();
    let first = old.first()?;
    (from..base.len()).find(|&i| {
        base[i] == *first && base.len() - i >= old.len() && base[i..i + old.len()] == old[..]
    })
}

/// A changed line's place: its hunk, and its offsets on the old and new sides of it.
#[derive(Debug, Clone, Copy)]
struct At<'a> {
    view: usize,
    old: usize,
    new: usize,
    text: &'a [u8],
}

impl At<'_> {
    fn old_line(&self, starts: &[(Option<usize>, Option<usize>)]) -> Option<usize> {
        starts[self.view].0.map(|s| s + self.old)
    }

    fn new_line(&self, starts: &[(Option<usize>, Option<usize>)]) -> Option<usize> {
        starts[self.view].1.map(|s| s + self.new)
    }
}

/// What a file's changed lines do to its tests, before deciding whether the file holds any.
#[derive(Default)]
struct Scan<'a> {
    added_markers: Vec<(At<'a>, &'a [u8])>,
    removed_markers: Vec<(&'a [u8], &'a [u8])>,
    removed_tests: Vec<(At<'a>, &'a [u8])>,
    added_tests: Vec<&'a [u8]>,
    removed_asserts: Vec<At<'a>>,
    added_asserts: Vec<At<'a>>,
}

impl<'a> Scan<'a> {
    fn is_empty(&self) -> bool {
        self.added_markers.is_empty()
            && self.removed_tests.is_empty()
            && self.removed_asserts.is_empty()
    }

    fn of(lang: Lang, views: &'a [View<'a>]) -> Scan<'a> {
        let mut scan = Scan::default();
        for (vi, view) in views.iter().enumerate() {
            let (mut old, mut new) = (0, 0);
            let mut pending: [Option<bool>; 2] = [None, None];
            for (i, (kind, raw)) in view.lines.iter().enumerate() {
                let text = raw.trim_ascii();
                let at = At {
                    view: vi,
                    old,
                    new,
                    text,
                };
                if *kind != Kind::Context {
                    scan.changed_line(lang, view, i, *kind, at);
                }
                if matches!(lang, Lang::Rust | Lang::Java) {
                    for (side, on) in [(0, Kind::Remove), (1, Kind::Add)] {
                        if *kind == Kind::Context || *kind == on {
                            scan.pair(lang, &mut pending[side], side == 1, *kind, at);
                        }
                    }
                }
                match kind {
                    Kind::Context => {
                        old += 1;
                        new += 1;
                    }
                    Kind::Remove => old += 1,
                    Kind::Add => new += 1,
                }
            }
        }
        scan
    }

    fn changed_line(&mut self, lang: Lang, view: &'a View<'a>, i: usize, kind: Kind, at: At<'a>) {
        let text = at.text;
        if lang::marker(lang, text) {
            let owner = next_definition(lang, view, i, kind);
            match kind {
                Kind::Add => self.added_markers.push((at, owner)),
                _ => self.removed_markers.push((text, owner)),
            }
        }
        if let Some(name) = lang::test_def(lang, text) {
            match kind {
                Kind::Add => self.added_tests.push(name),
                _ => self.removed_tests.push((at, name)),
            }
        }
        if lang::assertion(lang, text) {
            match kind {
                Kind::Add => self.added_asserts.push(at),
                _ => self.removed_asserts.push(at),
            }
        }
    }

    /// Pairs a test attribute with the function below it on one side (`new` or old); a test
    /// whose attribute or signature the change touched is removed (old side) or added (new).
    fn pair(&mut self, lang: Lang, pending: &mut Option<bool>, new: bool, kind: Kind, at: At<'a>) {
        let t = at.text;
        let changed = kind != Kind::Context;
        if lang::test_attribute(lang, t) {
            *pending = Some(changed);
        }
        if let Some(name) = lang::def_name(lang, t) {
            if pending.take().is_some_and(|attribute| attribute || changed) {
                if new {
                    self.added_tests.push(name);
                } else {
                    self.removed_tests.push((at, name));
                }
            }
        } else if !(t.is_empty()
            || lang::is_comment(lang, t)
            || t.starts_with(b"#[")
            || t.starts_with(b"@"))
        {
            *pending = None;
        }
    }

    /// Names what the change did, given where its hunks are and the first line of the file's
    /// tests (Rust keeps library code above them).
    fn judge(
        self,
        path: &str,
        starts: &[(Option<usize>, Option<usize>)],
        region: usize,
        out: &mut Vec<Weakening>,
    ) {
        let mut removed: HashMap<(&[u8], &[u8]), usize> = HashMap::new();
        for key in &self.removed_markers {
            *removed.entry(*key).or_default() += 1;
        }
        let mut found = Vec::new();
        for (at, owner) in &self.added_markers {
            if !take(&mut removed, (at.text, *owner)) {
                found.push(finding(
                    path,
                    at.new_line(starts),
                    format!("adds a skip or expected-failure marker: {}", show(at.text)),
                ));
            }
        }
        capped(path, found, "markers", out);
        let mut added: HashMap<&[u8], usize> = HashMap::new();
        for name in &self.added_tests {
            *added.entry(name).or_default() += 1;
        }
        let mut found = Vec::new();
        for (at, name) in &self.removed_tests {
            if !take(&mut added, name) {
                found.push(finding(
                    path,
                    at.old_line(starts),
                    format!("removes the test {}", name.to_str_lossy()),
                ));
            }
        }
        capped(path, found, "removed tests", out);
        self.judge_assertions(path, starts, region, out);
    }

    /// Assertions count per file: fewer after the change than before is a removal; which
    /// ones were removed are those not added back verbatim.
    fn judge_assertions(
        &self,
        path: &str,
        starts: &[(Option<usize>, Option<usize>)],
        region: usize,
        out: &mut Vec<Weakening>,
    ) {
        // An added line's place in the baseline is where it is inserted.
        let in_tests = |at: &&At<'_>| at.old_line(starts).is_none_or(|n| n >= region);
        let removed: Vec<&At<'_>> = self.removed_asserts.iter().filter(in_tests).collect();
        let added: Vec<&At<'_>> = self.added_asserts.iter().filter(in_tests).collect();
        if removed.len() <= added.len() {
            return;
        }
        let mut again: HashMap<&[u8], usize> = HashMap::new();
        for at in &added {
            *again.entry(at.text).or_default() += 1;
        }
        let (r, a) = (removed.len(), added.len());
        let found = removed
            .into_iter()
            .filter(|at| !take(&mut again, at.text))
            .map(|at| {
                finding(
                    path,
                    at.old_line(starts),
                    format!(
                        "removes an assertion: {} (the change removes {r} assertion line(s) and adds {a})",
                        show(at.text)
                    ),
                )
            })
            .collect();
        capped(path, found, "removed assertions", out);
    }
}

/// Takes one of `key` from a multiset; false when none is left.
fn take<K: std::hash::Hash + Eq>(set: &mut HashMap<K, usize>, key: K) -> bool {
    match set.get_mut(&key) {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    }
}

fn capped(path: &str, found: Vec<Weakening>, what: &str, out: &mut Vec<Weakening>) {
    let more = found.len().saturating_sub(MAX_PER_KIND);
    out.extend(found.into_iter().take(MAX_PER_KIND));
    if more > 0 {
        out.push(finding(path, None, format!("and {more} more {what}")));
    }
}

/// The definition a marker on line `i` stands in front of (on the marker's side of the hunk),
/// so a marker moved to another test is an added marker; empty when none is in reach.
fn next_definition<'a>(lang: Lang, view: &View<'a>, i: usize, kind: Kind) -> &'a [u8] {
    view.lines
        .iter()
        .skip(i + 1)
        .filter(|(k, _)| *k == Kind::Context || *k == kind)
        .take(MARKER_REACH)
        .find_map(|(_, t)| lang::def_name(lang, t.trim_ascii()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
