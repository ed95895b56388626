//! Where a run happens: the user's work tree, or a worktree of its own.

use crate::journal::Journal;
use std::path::Path;

/// A finished (or refused) run's journal: a worktree run has none on disk (the shared one
/// belongs to in-situ runs), only its saved bytes.
pub(crate) fn discard_journal(journal: &Journal, worktree: bool, factory_dir: &Path) {
    if worktree {
        let _ = std::fs::remove_dir_all(&journal.restore.saved);
    } else {
        journal.clear(factory_dir);
    }
}
