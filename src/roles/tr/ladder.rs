//! The fallback passes of SPEC §3.6, for diffs a model damaged: `recount` (line numbers and
//! counts ignored, each hunk located by its exact old-side lines anywhere in the file) and
//! `fuzzy` (lines compared by their whitespace-separated tokens, and a blank line the diff
//! lost or invented tolerated where its placement cannot change the result). A pass is
//! accepted only when every hunk matches at exactly one place and no two hunks overlap; a
//! claimed line number never breaks a tie. Never a misapplication.
//!
//! Locating is linear: every file line is hashed once per pass (and kept for the next pass
//! and the next hunk), and a hunk's lines are found with a KMP search over those hashes;
//! each hash match is confirmed byte for byte.

use super::apply::{show, Assembly, Index, Text};
use super::diff::{Hunk, Line};
use bstr::ByteSlice;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    Recount,
    Fuzzy,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// A line without the `\r` of a CRLF ending: in the recount pass the ending is not content.
fn content(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn exact_hash(line: &[u8]) -> u64 {
    fnv(FNV_OFFSET, content(line))
}

/// A line's whitespace-separated tokens. ASCII lines (nearly all of them) are split without
/// decoding; others on Unicode whitespace, invalid bytes being part of a token. Both agree on
/// ASCII, so a line hashes and compares the same either way.
fn tokens(line: &[u8]) -> Tokens<'_> {
    if line.is_ascii() {
        Tokens::Ascii(line)
    } else {
        Tokens::Other(line.fields_with(char::is_whitespace))
    }
}

enum Tokens<'a> {
    Ascii(&'a [u8]),
    Other(bstr::FieldsWith<'a, fn(char) -> bool>),
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Tokens::Other(fields) => fields.next(),
            Tokens::Ascii(rest) => {
                let start = rest
                    .iter()
                    .position(|b| !b.is_ascii_whitespace() && *b != 0x0b)?;
                let tail = &rest[start..];
                let len = tail
                    .iter()
                    .position(|b| b.is_ascii_whitespace() || *b == 0x0b)
                    .unwrap_or(tail.len());
                *rest = &tail[len..];
                Some(&tail[..len])
            }
        }
    }
}

fn token_hash(line: &[u8]) -> u64 {
    tokens(line).fold(FNV_OFFSET, |h, t| {
        fnv(fnv(h, &(t.len() as u64).to_le_bytes()), t)
    })
}

fn is_blank(line: &[u8]) -> bool {
    tokens(line).next().is_none()
}

fn tokens_eq(a: &[u8], b: &[u8]) -> bool {
    tokens(a).eq(tokens(b))
}

fn line_eq(pass: Pass, a: &[u8], b: &[u8]) -> bool {
    match pass {
        Pass::Recount => content(a) == content(b),
        Pass::Fuzzy => tokens_eq(a, b),
    }
}

impl Index {
    fn exact(&self, text: &Text) -> &[u64] {
        self.exact
            .get_or_init(|| (0..text.len()).map(|i| exact_hash(text.line(i))).collect())
    }

    fn tokens(&self, text: &Text) -> &[u64] {
        self.tokens
            .get_or_init(|| (0..text.len()).map(|i| token_hash(text.line(i))).collect())
    }

    fn nonblank(&self, text: &Text) -> (&[usize], &[u64]) {
        let (at, hashes) = self.nonblank.get_or_init(|| {
            let all = self.tokens(text);
            let blank = token_hash(b"");
            let at: Vec<usize> = (0..text.len())
                .filter(|&i| all[i] != blank || !is_blank(text.line(i)))
                .collect();
            let hashes = at.iter().map(|&i| all[i]).collect();
            (at, hashes)
        });
        (at, hashes)
    }

    fn places(&self, text: &Text) -> &HashMap<u64, Vec<usize>> {
        self.places.get_or_init(|| {
            let mut map: HashMap<u64, Vec<usize>> = HashMap::new();
            for (i, h) in self.tokens(text).iter().enumerate() {
                map.entry(*h).or_default().push(i);
            }
            map
        })
    }
}

/// Every start where `pattern` occurs in `hay` (Knuth–Morris–Pratt: linear in both).
fn occurrences(hay: &[u64], pattern: &[u64]) -> Vec<usize> {
    let m = pattern.len();
    if m == 0 || m > hay.len() {
        return Vec::new();
    }
    let mut fail = vec![0usize; m];
    let mut k = 0;
    for i in 1..m {
        while k > 0 && pattern[i] != pattern[k] {
            k = fail[k - 1];
        }
        if pattern[i] == pattern[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut found = Vec::new();
    let mut q = 0;
    for (i, h) in hay.iter().enumerate() {
        while q > 0 && *h != pattern[q] {
            q = fail[q - 1];
        }
        if *h == pattern[q] {
            q += 1;
        }
        if q == m {
            found.push(i + 1 - m);
            q = fail[q - 1];
        }
    }
    found
}

/// Where one hunk's old side sits in the file: the file lines it spans, and for each old-side
/// line of the hunk the file line it matched (`None`: a blank context line the file lacks).
/// Blank file lines inside the span that the diff did not mention are kept where they are.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    start: usize,
    end: usize,
    matched: Vec<Option<usize>>,
}

/// A place where the hunk's non-blank lines match but a blank line the diff lost (or added)
/// sits next to an added or removed line: which side of it the change goes on is not said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ambiguous {
    start: usize,
    /// 1-based file line near the blank line.
    near: usize,
}

/// The old-side lines of a hunk with where each sits among the hunk's lines.
struct OldSide<'h> {
    lines: Vec<&'h [u8]>,
    /// Whether old line k is context (else removed).
    context: Vec<bool>,
    /// For each old line, the index in `hunk.lines`.
    at: Vec<usize>,
}

impl<'h> OldSide<'h> {
    fn of(hunk: &'h Hunk) -> Self {
        let mut side = OldSide {
            lines: Vec::new(),
            context: Vec::new(),
            at: Vec::new(),
        };
        for (i, l) in hunk.lines.iter().enumerate() {
            match l {
                Line::Context(t) | Line::Remove(t) => {
                    side.lines.push(t);
                    side.context.push(matches!(l, Line::Context(_)));
                    side.at.push(i);
                }
                Line::Add(_) => {}
            }
        }
        side
    }

    /// Whether the hunk lines strictly between old lines `a` and `b` (either may be absent:
    /// the hunk's edge) are all context, and `a` and `b` are context too: only then can a
    /// blank line be gained or lost there without moving a change.
    fn quiet(&self, hunk: &Hunk, a: Option<usize>, b: Option<usize>) -> bool {
        let from = a.map_or(0, |k| self.at[k] + 1);
        let to = b.map_or(hunk.lines.len(), |k| self.at[k]);
        a.is_none_or(|k| self.context[k])
            && b.is_none_or(|k| self.context[k])
            && hunk.lines[from..to]
                .iter()
                .all(|l| matches!(l, Line::Context(_)))
    }
}

/// Where in the file a hunk may go: from a line on (after its anchors), and whether its old
/// side must end the file (`*** End of File`).
#[derive(Debug, Clone, Copy, Default)]
struct Scope {
    from: usize,
    at_end: bool,
}

impl Scope {
    /// The scope an envelope hunk's anchors give: each anchor is the first line matching it
    /// after the previous one, and the hunk comes after the last. `Err` names an anchor found
    /// nowhere after its predecessor. Linear in the file per anchor.
    fn of(text: &Text, hunk: &Hunk) -> Result<(Self, Option<usize>), Vec<u8>> {
        let mut from = 0;
        let mut last_anchor = None;
        for anchor in &hunk.anchors {
            let at = (from..text.len())
                .find(|&i| anchor_eq(text.line(i), anchor))
                .ok_or_else(|| anchor.clone())?;
            last_anchor = Some(at);
            from = at + 1;
        }
        Ok((
            Scope {
                from,
                at_end: hunk.at_end,
            },
            last_anchor,
        ))
    }
}

/// The recount pass's candidates: the old side exactly (a CRLF ending aside), anywhere in the
/// scope.
fn exact_places(
    text: &Text,
    old: &OldSide<'_>,
    scope: Scope,
    limit: usize,
) -> Vec<Result<Placement, Ambiguous>> {
    let pattern: Vec<u64> = old.lines.iter().map(|l| exact_hash(l)).collect();
    let hay = text.index.exact(text);
    let from = if scope.at_end {
        scope.from.max(hay.len().saturating_sub(pattern.len()))
    } else {
        scope.from
    };
    occurrences(hay.get(from..).unwrap_or(&[]), &pattern)
        .into_iter()
        .map(|s| s + from)
        .filter(|&s| {
            old.lines
                .iter()
                .enumerate()
                .all(|(k, l)| line_eq(Pass::Recount, text.line(s + k), l))
        })
        .take(limit)
        .map(|s| {
            Ok(Placement {
                start: s,
                end: s + old.lines.len(),
                matched: (s..s + old.lines.len()).map(Some).collect(),
            })
        })
        .collect()
}

/// The fuzzy pass's candidates. The hunk's non-blank old lines must equal (token by token)
/// consecutive non-blank lines of the file; between them, the blank lines of the diff and of
/// the file are paired one to one, and where their numbers differ the difference is tolerated
/// only in a quiet stretch (context on both sides, no change between).
fn fuzzy_places(
    text: &Text,
    hunk: &Hunk,
    old: &OldSide<'_>,
    scope: Scope,
    limit: usize,
) -> Vec<Result<Placement, Ambiguous>> {
    let blanks: Vec<bool> = old.lines.iter().map(|l| is_blank(l)).collect();
    let marks: Vec<usize> = (0..old.lines.len()).filter(|&k| !blanks[k]).collect();
    if marks.is_empty() {
        return blank_only_places(text, old.lines.len(), scope, limit);
    }
    let (nb, nb_hash) = text.index.nonblank(text);
    let pattern: Vec<u64> = marks.iter().map(|&k| token_hash(old.lines[k])).collect();
    // The non-blank lines in scope; at the end of the file, only the last ones can match.
    let mut first = nb.partition_point(|&i| i < scope.from);
    if scope.at_end {
        first = first.max(nb.len().saturating_sub(marks.len()));
    }
    let mut out = Vec::new();
    let hay = nb_hash.get(first..).unwrap_or(&[]);
    for p in occurrences(hay, &pattern).into_iter().map(|p| p + first) {
        if out.len() == limit {
            break;
        }
        let confirmed = marks
            .iter()
            .enumerate()
            .all(|(j, &k)| tokens_eq(text.line(nb[p + j]), old.lines[k]));
        if !confirmed {
            continue;
        }
        out.push(place_between_marks(
            text,
            hunk,
            old,
            &marks,
            &nb[p..p + marks.len()],
            p,
            nb,
        ));
    }
    out
}

/// Pairs the blank lines around and between the matched non-blank lines (see `fuzzy_places`).
fn place_between_marks(
    text: &Text,
    hunk: &Hunk,
    old: &OldSide<'_>,
    marks: &[usize],
    at: &[usize],
    p: usize,
    nb: &[usize],
) -> Result<Placement, Ambiguous> {
    let n = old.lines.len();
    let mut matched: Vec<Option<usize>> = vec![None; n];
    for (j, &k) in marks.iter().enumerate() {
        matched[k] = Some(at[j]);
    }
    let ambiguous = |near: usize| Ambiguous {
        start: at[0],
        near: near + 1,
    };
    // Leading blank lines of the diff, paired with the blank lines just above the first mark.
    let first = marks[0];
    let above = if p == 0 { at[0] } else { at[0] - nb[p - 1] - 1 };
    if first > above && !old.quiet(hunk, None, Some(first)) {
        return Err(ambiguous(at[0]));
    }
    let paired = first.min(above);
    for i in 0..paired {
        matched[first - paired + i] = Some(at[0] - paired + i);
    }
    // Between marks.
    for j in 1..marks.len() {
        let (ka, kb) = (marks[j - 1], marks[j]);
        let diff_blanks = kb - ka - 1;
        let file_blanks = at[j] - at[j - 1] - 1;
        if diff_blanks != file_blanks && !old.quiet(hunk, Some(ka), Some(kb)) {
            return Err(ambiguous(at[j - 1] + 1));
        }
        for i in 0..diff_blanks.min(file_blanks) {
            matched[ka + 1 + i] = Some(at[j - 1] + 1 + i);
        }
    }
    // Trailing blank lines, paired with those just below the last mark.
    let last = marks[marks.len() - 1];
    let end_mark = at[at.len() - 1];
    let below = nb.get(p + marks.len()).copied().unwrap_or(text.len()) - end_mark - 1;
    let trailing = n - last - 1;
    if trailing > below && !old.quiet(hunk, Some(last), None) {
        return Err(ambiguous(end_mark + 1));
    }
    for i in 0..trailing.min(below) {
        matched[last + 1 + i] = Some(end_mark + 1 + i);
    }
    let start = matched.iter().flatten().copied().min().unwrap_or(at[0]);
    let end = matched.iter().flatten().copied().max().unwrap_or(end_mark) + 1;
    Ok(Placement {
        start,
        end,
        matched,
    })
}

/// A hunk whose old side is only blank lines: runs of at least that many blank lines.
fn blank_only_places(
    text: &Text,
    n: usize,
    scope: Scope,
    limit: usize,
) -> Vec<Result<Placement, Ambiguous>> {
    let mut out = Vec::new();
    let mut run = 0usize;
    for i in scope.from..text.len() {
        run = if is_blank(text.line(i)) { run + 1 } else { 0 };
        let ends = !scope.at_end || i + 1 == text.len();
        if run >= n && ends && out.len() < limit {
            let s = i + 1 - n;
            out.push(Ok(Placement {
                start: s,
                end: s + n,
                matched: (s..s + n).map(Some).collect(),
            }));
        }
    }
    out
}

/// An `@@ anchor` matches a line equal to it, or starting with it, whitespace aside.
fn anchor_eq(line: &[u8], anchor: &[u8]) -> bool {
    tokens_eq(line, anchor)
        || line
            .trim_with(char::is_whitespace)
            .starts_with(anchor.trim_with(char::is_whitespace))
}

fn start_of(c: &Result<Placement, Ambiguous>) -> usize {
    match c {
        Ok(p) => p.start,
        Err(a) => a.start,
    }
}

/// The brief for a hunk found nowhere: the first of its lines that occurs nowhere in the file
/// (never claiming that none occurs when some do), and the file text most like it, with line
/// numbers.
fn brief(text: &Text, old: &[&[u8]]) -> String {
    let places = text.index.places(text);
    let where_is = |line: &[u8]| -> Vec<usize> {
        places
            .get(&token_hash(line))
            .map(|v| {
                // Beyond 64 places a line says nothing about where the hunk belongs.
                v.iter()
                    .copied()
                    .filter(|&i| tokens_eq(text.line(i), line))
                    .take(65)
                    .collect()
            })
            .unwrap_or_default()
    };
    let found: Vec<Vec<usize>> = old.iter().map(|l| where_is(l)).collect();
    let missing: Vec<usize> = (0..old.len()).filter(|&k| found[k].is_empty()).collect();
    let head = match missing.first() {
        Some(_) if missing.len() == old.len() => format!(
            "none of its {} old lines occurs in the file (the first is {})",
            old.len(),
            show(old[0])
        ),
        Some(&k) => format!(
            "its old line {} {} occurs nowhere in the file",
            k + 1,
            show(old[k])
        ),
        None => "each of its lines occurs in the file, but not together in this order".to_string(),
    };
    // The region most like the hunk: the start that most of its rarer lines point to.
    let mut votes: HashMap<usize, usize> = HashMap::new();
    for (k, at) in found.iter().enumerate() {
        if at.len() > 64 {
            continue;
        }
        for &q in at {
            if q >= k {
                *votes.entry(q - k).or_default() += 1;
            }
        }
    }
    let start = votes
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(s, _)| *s)
        .or_else(|| {
            found
                .iter()
                .enumerate()
                .find_map(|(k, at)| at.first().map(|q| q.saturating_sub(k)))
        });
    let Some(start) = start else {
        return head;
    };
    let rows: Vec<(usize, bool)> = (0..old.len())
        .map(|k| {
            let i = start + k;
            (k, i < text.len() && tokens_eq(text.line(i), old[k]))
        })
        .collect();
    let score = rows.iter().filter(|(_, ok)| *ok).count();
    let shown_end = (start + old.len()).min(text.len());
    let mut out = format!(
        "{head}; closest text, lines {}-{} ({score} of {} lines match):",
        start + 1,
        shown_end.max(start + 1),
        old.len()
    );
    // At most a dozen rows, from just before the first line that differs.
    let first_bad = rows.iter().position(|(_, ok)| !ok).unwrap_or(0);
    let from = first_bad.saturating_sub(2);
    let to = (from + 12).min(old.len());
    if from > 0 {
        out.push_str("\n      …");
    }
    for &(k, ok) in &rows[from..to] {
        let i = start + k;
        match (i < text.len(), ok) {
            (true, true) => out.push_str(&format!("\n  {:>5}   {}", i + 1, show(text.line(i)))),
            (true, false) => out.push_str(&format!(
                "\n  {:>5} ≠ {}   (the diff has {})",
                i + 1,
                show(text.line(i)),
                show(old[k])
            )),
            (false, _) => out.push_str(&format!(
                "\n      (end of file; the diff has {})",
                show(old[k])
            )),
        }
    }
    if to < old.len() {
        out.push_str("\n      …");
    }
    out
}

/// How many places of one hunk are looked at before it is called ambiguous.
const MANY: usize = 6;

/// Applies every hunk at its unique location, or says which hunk could not be placed and why.
pub fn apply(pass: Pass, file: &str, text: &Text, hunks: &[Hunk]) -> Result<Vec<u8>, String> {
    let mut placements: Vec<(usize, Placement)> = Vec::new();
    for (k, hunk) in hunks.iter().enumerate() {
        placements.push((k, place(pass, file, text, k, hunk)?));
    }
    placements.sort_by_key(|(_, p)| p.start);
    refuse_overlaps(file, &placements)?;
    Ok(assemble(text, hunks, &placements))
}

/// The one place hunk `k` goes in the file, or why it has none.
fn place(pass: Pass, file: &str, text: &Text, k: usize, hunk: &Hunk) -> Result<Placement, String> {
    let name = format!("hunk {} of {file} ({})", k + 1, hunk.header);
    let old = OldSide::of(hunk);
    if old.lines.is_empty() {
        if text.is_empty() {
            return Ok(Placement {
                start: 0,
                end: 0,
                matched: Vec::new(),
            });
        }
        return Err(format!(
            "{name}: it has no context or removed lines, so its place in the file cannot be found"
        ));
    }
    // An envelope hunk's anchors narrow where it may go, never which of several places
    // inside that scope it takes: the place must be unique after the last anchor, as it
    // must be in the whole file without one. Uniqueness needs two places at most; the
    // brief names a few.
    let (scope, anchor_line) = match Scope::of(text, hunk) {
        Ok(s) => s,
        Err(anchor) => {
            return Err(format!(
                "{name}: its anchor {} does not occur in the file (after the anchors before it)",
                show(&anchor)
            ))
        }
    };
    let mut found = match pass {
        Pass::Recount => exact_places(text, &old, scope, MANY),
        Pass::Fuzzy => fuzzy_places(text, hunk, &old, scope, MANY),
    };
    let after = match anchor_line {
        Some(a) => format!(" after its anchor at line {}", a + 1),
        None => String::new(),
    };
    let after = if scope.at_end {
        format!("{after} at the end of the file")
    } else {
        after
    };
    match found.len() {
        1 => match found.remove(0) {
            Ok(p) => Ok(p),
            Err(a) => Err(format!(
                "{name}: a blank line near line {} is in the file but not in the diff (or the reverse), next to added or removed lines: which side of it the change goes on is ambiguous; give the blank lines around the change exactly as the file has them",
                a.near
            )),
        },
        0 => Err(format!(
            "{name}: its lines do not occur in the file{after}; {}",
            brief(text, &old.lines)
        )),
        n => {
            let at: Vec<String> = found
                .iter()
                .take(5)
                .map(|c| (start_of(c) + 1).to_string())
                .collect();
            let n = if n >= MANY {
                format!("{MANY} or more")
            } else {
                n.to_string()
            };
            Err(format!(
                "{name}: its lines match at {n} places{after} (lines {}); add context lines so it matches only one",
                at.join(", ")
            ))
        }
    }
}

/// Two hunks placed over the same lines: refused (placements sorted by start).
fn refuse_overlaps(file: &str, placements: &[(usize, Placement)]) -> Result<(), String> {
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
    Ok(())
}

/// The new file: its lines outside the placed hunks as they are, each hunk's added and
/// context lines in its place (a blank line the diff lost kept).
fn assemble(text: &Text, hunks: &[Hunk], placements: &[(usize, Placement)]) -> Vec<u8> {
    let last = text.len();
    let mut out = Assembly::new(text.endings(hunks), last + 16);
    let mut cursor = 0usize;
    let mut final_eol = text.eol;
    for (k, place) in placements {
        let hunk = &hunks[*k];
        for i in cursor..place.start {
            out.file_line(text.line(i), true);
        }
        let mut file_i = place.start;
        let mut old_k = 0usize;
        for l in &hunk.lines {
            match l {
                Line::Add(t) => out.added_line(t, true),
                Line::Context(_) | Line::Remove(_) => {
                    if let Some(target) = place.matched[old_k] {
                        while file_i < target {
                            out.file_line(text.line(file_i), true); // a blank line the diff lost
                            file_i += 1;
                        }
                        if matches!(l, Line::Context(_)) {
                            out.file_line(text.line(target), true);
                        }
                        file_i = target + 1;
                    }
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
    for i in cursor..last {
        out.file_line(text.line(i), true);
    }
    out.final_eol(final_eol);
    out.finish()
}

pub fn recount(file: &str, text: &Text, hunks: &[Hunk]) -> Result<Vec<u8>, String> {
    apply(Pass::Recount, file, text, hunks)
}

pub fn fuzzy(file: &str, text: &Text, hunks: &[Hunk]) -> Result<Vec<u8>, String> {
    apply(Pass::Fuzzy, file, text, hunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::tr::diff::{parse, Strip};

    fn run(pass: Pass, src: &str, diff: &str) -> Result<String, String> {
        let p = parse(diff.as_bytes(), Strip::Auto).expect("parses");
        let text = Text::new(src.as_bytes().to_vec());
        apply(pass, "f", &text, &p[0].hunks).map(|b| String::from_utf8(b).expect("utf8"))
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
    fn fuzzy_tolerates_a_lost_blank_line_only_between_context_lines() {
        let d = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n b\n-c\n+C\n";
        assert_eq!(
            run(Pass::Fuzzy, "a\n\nb\nc\nd\n", d).expect("applies"),
            "a\n\nb\nC\nd\n"
        );
        // Next to the removed line: was the blank line meant to go with it?
        let d = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n";
        let e = run(Pass::Fuzzy, "a\n\nb\nc\n", d).expect_err("ambiguous");
        assert!(e.contains("blank line"), "{e}");
    }

    #[test]
    fn fuzzy_tolerates_an_invented_blank_line_between_context_lines() {
        let d = "--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n a\n \n b\n-c\n+C\n";
        assert_eq!(
            run(Pass::Fuzzy, "a\nb\nc\n", d).expect("applies"),
            "a\nb\nC\n"
        );
        let d = "--- a/f\n+++ b/f\n@@ -1,3 +1,4 @@\n a\n \n+x\n b\n";
        assert!(run(Pass::Fuzzy, "a\nb\nc\n", d).is_err());
    }

    #[test]
    fn recount_ignores_a_lost_cr_and_keeps_the_files_endings() {
        let d = "--- a/f\n+++ b/f\n@@ -9,2 +9,3 @@\n a\n-b\n+B\n+B2\n";
        assert_eq!(
            run(Pass::Recount, "a\r\nb\r\nc\r\n", d).expect("applies"),
            "a\r\nB\r\nB2\r\nc\r\n"
        );
        let d = "--- a/f\n+++ b/f\n@@ -9,2 +9,2 @@\n a\r\n-b\r\n+B\r\n";
        assert_eq!(
            run(Pass::Recount, "a\nb\nc\n", d).expect("applies"),
            "a\nB\nc\n"
        );
    }

    #[test]
    fn absent_context_names_the_line_and_the_closest_text() {
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n";
        let e = run(Pass::Fuzzy, "alpha\ngamma\n", d).expect_err("absent");
        assert!(e.contains("\"beta\" occurs nowhere"), "{e}");
        assert!(e.contains("closest text, lines 1-2"), "{e}");
        assert!(e.contains("\"gamma\""), "{e}");
        let e = run(Pass::Fuzzy, "gamma\nbeta\nalpha\n", d).expect_err("absent");
        assert!(e.contains("each of its lines occurs"), "{e}");
        let e = run(Pass::Fuzzy, "x\ny\n", d).expect_err("absent");
        assert!(e.contains("none of its 2 old lines"), "{e}");
    }

    #[test]
    fn overlapping_hunks_are_refused() {
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -2,2 +2,2 @@\n-b\n+X\n c\n";
        assert!(run(Pass::Recount, "a\nb\nc\n", d).is_err());
    }

    #[test]
    fn ascii_and_unicode_tokens_agree() {
        for line in [&b" a\t b\x0b c \x0c"[..], b"", b"   ", b"x"] {
            let fast: Vec<&[u8]> = tokens(line).collect();
            let slow: Vec<&[u8]> = line.fields_with(char::is_whitespace).collect();
            assert_eq!(fast, slow);
        }
        assert!(tokens_eq(b"caf\xc3\xa9\xc2\xa0x", "caf\u{e9} x".as_bytes()));
        assert!(!tokens_eq(b"caf\xe9 x", b"caf x"));
    }

    #[test]
    fn a_hunk_of_repeated_lines_is_refused_without_trying_every_place() {
        let src = "}\n".repeat(20_000);
        let mut d = String::from("--- a/f\n+++ b/f\n@@ -1,500 +1,500 @@\n");
        d.push_str(&" }\n".repeat(499));
        d.push_str("-}\n+x\n");
        for pass in [Pass::Recount, Pass::Fuzzy] {
            let e = run(pass, &src, &d).expect_err("ambiguous");
            assert!(e.contains("6 or more places"), "{e}");
        }
    }

    #[test]
    fn random_hunks_on_random_files_never_panic() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let pieces = ["a", "b", "  a", "\tb", "", "  ", "c\r", "}", "caf\u{e9}"];
        for _ in 0..3000 {
            let mut src = String::new();
            for _ in 0..next() % 12 {
                src.push_str(pieces[(next() % 9) as usize]);
                src.push('\n');
            }
            if next() % 4 == 0 {
                src.push('x');
            }
            let mut d = String::from("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n");
            for _ in 0..1 + next() % 6 {
                d.push([' ', '-', '+'][(next() % 3) as usize]);
                d.push_str(pieces[(next() % 9) as usize]);
                d.push('\n');
            }
            if next() % 5 == 0 {
                d.push_str("\\ No newline at end of file\n");
            }
            let Ok(p) = parse(d.as_bytes(), Strip::Auto) else {
                continue;
            };
            let text = Text::new(src.as_bytes().to_vec());
            let _ = crate::roles::tr::apply::apply_strict("f", &text, &p[0].hunks);
            for pass in [Pass::Recount, Pass::Fuzzy] {
                let _ = apply(pass, "f", &text, &p[0].hunks);
            }
        }
    }

    #[test]
    fn kmp_finds_every_occurrence() {
        assert_eq!(occurrences(&[1, 2, 1, 2, 1], &[1, 2, 1]), vec![0, 2]);
        assert_eq!(occurrences(&[1, 1, 1], &[1, 1]), vec![0, 1]);
        assert!(occurrences(&[1], &[1, 1]).is_empty());
    }
}
