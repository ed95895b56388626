//! The agent audit of SPEC §7: what an agent changed outside its own worktree is put back
//! and named.

use crate::error::Result;
use crate::git::restore::Purpose;
use crate::graph::Outcome;
use crate::roles::se::audit::Audit;
use crate::roles::se::provider::{ProviderError, Response};
use crate::run::attempt::session::Session;
use crate::store::records::Stage;
use std::path::Path;

impl Session<'_> {
    /// The agent audit of SPEC §7: after an agent exits, everything outside its scratch
    /// worktree — the run's tree and index (ignored files included), HEAD, refs (notes
    /// included), `.git/config`, hooks, `.git/factory/` — must be as before. What it changed is put back through the run's one restore and the attempt fails
    /// with `agent_escaped`, the brief naming each thing; `None` when nothing escaped.
    pub(crate) fn agent_audit(
        &mut self,
        audit: Option<Audit>,
        dir: &Path,
        answer: &Result<Response, ProviderError>,
    ) -> Option<Outcome> {
        crate::trace::mark("  agent audit: start");
        if let Some(a) = &audit {
            if let Err(e) = a.drop_agents_own_refs(self.repo) {
                self.fatal = Some(e.message);
                return Some(Outcome::Fatal(Stage::Exception));
            }
        }
        let report = match self.journal.restore.apply_walked(
            self.repo,
            &[],
            Purpose::AgentAudit,
            self.preflight,
        ) {
            Ok(report) => report,
            Err(e) => {
                self.fatal = Some(e.message);
                return Some(Outcome::Fatal(Stage::Exception));
            }
        };
        if let Some(e) = report.error("restoring what the agent changed") {
            self.unrestored = true;
            self.fatal = Some(format!("{}: {}", e.message, e.details.join("; ")));
            return Some(Outcome::Fatal(Stage::Exception));
        }
        self.pycache
            .forget(&self.root, report.files.iter().map(Vec::as_slice));
        if let Some(note) = report.bytecode_note() {
            self.ui.info(format!("  {note}"));
        }
        // What the restore put back; what it only named (shared with the user's own work in a
        // --worktree run) is not among it.
        let mut restored = report.paths.clone();
        restored.extend(report.git.iter().cloned());
        // Ignored files, notes refs and git-factory's own files: put back by the audit.
        let mut unrestored: Vec<String> = Vec::new();
        if let Some(a) = &audit {
            let put = a.watched.put_back(self.repo).and_then(|mut put| {
                crate::trace::mark("  agent audit: watched files compared");
                a.sealed
                    .put_back(self.repo, &self.summary.run_id, &mut put)?;
                Ok(put)
            });
            match put {
                Ok(put) => {
                    self.pycache
                        .forget(&self.root, put.restored.iter().map(|p| p.as_bytes()));
                    restored.extend(put.restored);
                    unrestored = put.failed;
                }
                Err(e) => {
                    self.fatal = Some(e.message);
                    return Some(Outcome::Fatal(Stage::Exception));
                }
            }
        }
        // Refs the run does not own (a --worktree run shares them with the user's own work)
        // and other worktrees' HEADs: named, not put back.
        let mut left = match named_only(self.repo, audit, &restored, &report.left) {
            Ok(left) => left,
            Err(e) => {
                self.fatal = Some(e.message);
                return Some(Outcome::Fatal(Stage::Exception));
            }
        };
        left.extend(unrestored);
        crate::trace::mark("  agent audit: done");
        if restored.is_empty() && left.is_empty() {
            return None;
        }
        if let Ok(r) = answer {
            // Kept for the record: what the agent said, though its attempt is void.
            let _ = std::fs::write(dir.join("llm_output.txt"), &r.raw);
        }
        // An --agent-command agent has no worktree of its own: it must only print.
        let prints = self.summary.config.model.starts_with("agent:");
        let mut text = String::from(if prints {
            "you changed the repository instead of only printing your proposal, which you may not do; this attempt was discarded."
        } else {
            "you changed the repository outside your own worktree, which you may not do; this attempt's proposal was discarded."
        });
        if !restored.is_empty() {
            text.push_str(&format!("\nput back: {}", restored.join(", ")));
        }
        if !left.is_empty() {
            text.push_str(&format!(
                "\nchanged and left as found (shared with the user's own work): {}",
                left.join(", ")
            ));
        }
        text.push_str(if prints {
            "\nprint the change as your answer and change no file; do not run git commands that change the repository (add, commit, config, hooks, branches, tags)"
        } else {
            "\nedit files only inside the folder you were started in; do not run git commands that change the user's repository (config, hooks, branches, tags, other worktrees)"
        });
        self.ui.warn(format!(
            "the agent changed the repo outside its worktree: {}",
            restored
                .iter()
                .chain(&left)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
        Some(self.fail(Stage::AgentEscaped, None, &text))
    }
}

/// What changed outside the agent's worktree and was named, not put back: the audit's
/// changes (refs the run does not own, other worktrees' HEADs) and what the run's restore
/// only named, less what was put back.
fn named_only(
    repo: &git2::Repository,
    audit: Option<Audit>,
    restored: &[String],
    named: &[String],
) -> crate::error::Result<Vec<String>> {
    let head = |c: &str| c.split(" (").next().map(str::to_string);
    let mut left: Vec<String> = match audit {
        Some(a) => a
            .changes(repo)?
            .into_iter()
            .filter(|c| !restored.iter().any(|r| head(r) == head(c)))
            .collect(),
        None => Vec::new(),
    };
    for name in named {
        if !left
            .iter()
            .any(|l| head(l).as_deref() == Some(name.as_str()))
        {
            left.push(name.clone());
        }
    }
    Ok(left)
}
