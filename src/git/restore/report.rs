//! Why a restore runs and what it did: the one account every step writes into, and the
//! refusal that names what could not be put back.

use crate::error::Error;

/// Why a restore runs: names its kill point and its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Rollback,
    SideEffects,
    AgentAudit,
    Delivery,
    Recover,
}

impl Purpose {
    pub(super) fn kill_point(self) -> &'static str {
        match self {
            Purpose::Rollback => "during_rollback",
            Purpose::SideEffects => "during_side_effect_restore",
            Purpose::AgentAudit => "during_agent_audit",
            Purpose::Delivery => "during_delivery_undo",
            Purpose::Recover => "during_recover",
        }
    }
}

/// What a restore did, and what it could not do.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Work-tree paths put back (restored, removed, or rewritten to their image), as shown.
    pub paths: Vec<String>,
    /// The same files as bytes, repo-relative (no folders, modes or submodule notes): what
    /// the bytecode cache forgets.
    pub files: Vec<Vec<u8>>,
    /// Refs put back (`HEAD`, `refs/heads/x`, …), the index, `.git/config`.
    pub git: Vec<String>,
    /// Paths that could not be put back, each with why.
    pub failed: Vec<String>,
    /// What commands changed that is not this restore's to put back — in a `--worktree` run,
    /// the refs and `.git/config`/`info/exclude` shared with the user's ongoing work — named
    /// so no message claims it restored.
    pub left: Vec<String>,
    /// Bytecode commands wrote in the work tree, removed (see `is_bytecode` in `python.rs`): a
    /// cache, not a change, so kept apart from `paths`.
    pub bytecode: Vec<String>,
    /// Work-tree paths this restore removed that `files` does not list (the bytecode above),
    /// as bytes: with `files`, what tells the folder pass which folders may have changed.
    pub(super) unlisted: Vec<Vec<u8>>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.paths.is_empty() && self.git.is_empty() && self.left.is_empty()
    }

    /// Everything that changed, for `side_effects` and warnings: work-tree paths, then refs
    /// and `.git/…` files.
    pub fn changed(&self) -> Vec<String> {
        let mut all = self.paths.clone();
        all.extend(self.git.iter().cloned());
        all.extend(self.left.iter().cloned());
        all
    }

    /// The line that names the bytecode removed, when there was any (up to five names).
    pub fn bytecode_note(&self) -> Option<String> {
        let first: Vec<&str> = self.bytecode.iter().take(5).map(String::as_str).collect();
        let more = match self.bytecode.len() {
            n if n > 5 => format!(" and {} more", n - 5),
            _ => String::new(),
        };
        (!first.is_empty()).then(|| {
            format!(
                "removed the Python bytecode a command wrote beside the sources (Python compiles it again): {}{more}",
                first.join(", ")
            )
        })
    }

    /// The error for paths that stayed different, naming each.
    pub fn error(&self, what: &str) -> Option<Error> {
        if self.failed.is_empty() {
            return None;
        }
        let names: Vec<&str> = self
            .failed
            .iter()
            .take(10)
            .map(|f| f.split(": ").next().unwrap_or(f))
            .collect();
        let more = if self.failed.len() > 10 { ", …" } else { "" };
        let mut err = Error::new(format!(
            "{what} could not put back {}{more}",
            names.join(", ")
        ));
        for f in self.failed.iter().take(20) {
            err = err.detail(f.clone());
        }
        if self.failed.len() > 20 {
            err = err.detail(format!("… and {} more", self.failed.len() - 20));
        }
        Some(
            err.hint(
                "fix what is named (git status shows the paths), then run git factory recover",
            ),
        )
    }
}
