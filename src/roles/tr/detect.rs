//! Which dialect a text speaks (SPEC §3.1): the markers and headers that start a change
//! block, read before any parser runs. Both parsers (`diff`, `dialects`) and the proposal's
//! reader ask here, so none of them needs another.

use crate::roles::change::Dialect;
use bstr::ByteSlice;

/// A diff's lines without their `\n`; the text's own final newline is not an empty line.
pub fn split_text(text: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = text.split_str("\n").collect();
    if text.ends_with(b"\n") {
        lines.pop();
    }
    lines
}

/// Whether `text` looks like a unified diff at all (has file headers).
pub fn looks_like_diff(text: &[u8]) -> bool {
    let mut prev_minus = false;
    for line in text.split_str("\n") {
        if line.starts_with(b"diff --git ") || (prev_minus && line.starts_with(b"+++ ")) {
            return true;
        }
        prev_minus = line.starts_with(b"--- ");
    }
    false
}

/// The first line at column 0 that decides the dialect: a marker of ours, or a unified diff's
/// header. A context line quoting a marker (`  *** Begin Patch`) starts with a space; a marker
/// after a diff header is the diff's content.
fn first_marker_is(text: &[u8], marker: &str) -> bool {
    for line in split_text(text) {
        let line = line.trim_end_with(|c| c == '\r' || c == ' ' || c == '\t');
        if line == marker.as_bytes() {
            return true;
        }
        if line.starts_with(b"diff --git ")
            || line.starts_with(b"--- ")
            || line.starts_with(b"+++ ")
            || line.starts_with(b"@@")
        {
            return false;
        }
    }
    false
}

pub fn is_envelope(text: &[u8]) -> bool {
    first_marker_is(text, "*** Begin Patch")
}

pub fn is_search_replace(text: &[u8]) -> bool {
    first_marker_is(text, "<<<<<<< SEARCH")
}

/// A line that starts a change block of some dialect: `*** Begin Patch`, `<<<<<<< SEARCH`, or a
/// unified diff's `diff --git`, `--- `/`+++ ` pair or `@@ -` hunk header. Markers count at
/// column 0 only (a quoted, indented marker is text).
fn block_at(lines: &[&[u8]], i: usize) -> Option<Dialect> {
    let l = lines[i].trim_end_with(|c| c == '\r' || c == ' ' || c == '\t');
    if l == b"*** Begin Patch" {
        Some(Dialect::Envelope)
    } else if l == b"<<<<<<< SEARCH" {
        Some(Dialect::SearchReplace)
    } else if l.starts_with(b"diff --git ")
        || l.starts_with(b"@@ -")
        || (l.starts_with(b"--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with(b"+++ ")))
    {
        Some(Dialect::Unified)
    } else {
        None
    }
}

/// A change block of another dialect than `own` starting at line `i` of text that `own`'s
/// parser reads as prose. Dropping it would apply part of a proposal (SPEC §3.6: never
/// partial), and reading both dialects in one proposal would guess at what was meant.
pub(crate) fn foreign_block(lines: &[&[u8]], i: usize, own: Dialect) -> Option<Dialect> {
    block_at(lines, i).filter(|d| *d != own)
}
