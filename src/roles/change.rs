//! The change a proposal carries, in the forms SE may hand it to TR (SPEC §3.1): a unified
//! diff, another agent dialect, or whole-file writes. Both roles need these types, so they
//! live below both and import neither.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteSpec {
    pub path: String,
    /// sha256 of the file's current bytes; `None` means the file must not exist.
    pub base_sha256: Option<String>,
    pub content: String,
    pub executable: Option<bool>,
}

/// The text dialects a diff may come in (SPEC §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Unified,
    /// `*** Begin Patch … *** End Patch` (Codex-style agents).
    Envelope,
    /// `path` + `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE` blocks.
    SearchReplace,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A unified diff, as bytes: a bare diff is never decoded (one from JSON is UTF-8).
    Diff(Vec<u8>),
    /// Another agent dialect, converted by TR.
    Dialect(Dialect, Vec<u8>),
    Writes(Vec<WriteSpec>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub change: Change,
    pub summary: String,
}

impl Proposal {
    /// An explicit "the work is already done" proposal: it goes straight to PO.
    pub fn is_no_change(&self) -> bool {
        match &self.change {
            Change::Diff(d) | Change::Dialect(_, d) => d.iter().all(u8::is_ascii_whitespace),
            Change::Writes(w) => w.is_empty(),
        }
    }
}
