//! A regular file as git records it — its bytes and its executable bit — and a change as the
//! files it turns from one state into another. Shared by the roles that compute a change and
//! by the restore and the journal that put it back, so it lives on the floor below both.

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
