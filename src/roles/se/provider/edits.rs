//! `--agent-edits`: a coding agent that edits files (seed 003's sandbox). Each attempt gets a
//! scratch worktree at the baseline; when the agent exits, the scratch tree's difference from
//! the baseline — edits, new files, deletions, mode changes, its own commits — *is* the
//! proposal. The scratch worktree is always removed; the user's tree is never the agent's.

use super::{Provider, ProviderError, Request, Response};
use crate::git::{self, worktree::TempWorktree};
use crate::roles::po::exec::{self, tail_chars, CommandSpec, LogFiles};
use crate::roles::se::proposal::OutputFormat;
use std::time::Duration;

pub struct AgentEdits {
    pub argv: Vec<String>,
    pub timeout: Duration,
}

impl AgentEdits {
    /// `{prompt_file}` and `{attempt}` inside any argument are replaced.
    fn argv_for(&self, prompt_file: &str, attempt: u32) -> Vec<String> {
        self.argv
            .iter()
            .map(|a| {
                a.replace("{prompt_file}", prompt_file)
                    .replace("{attempt}", &attempt.to_string())
            })
            .collect()
    }
}

fn failed(msg: impl Into<String>) -> ProviderError {
    ProviderError::Failed(msg.into())
}

impl Provider for AgentEdits {
    fn propose(&mut self, request: &Request<'_>) -> Result<Response, ProviderError> {
        let repo = git2::Repository::open(request.root)
            .map_err(|e| failed(format!("cannot open the repo: {}", e.message())))?;
        let baseline =
            git2::Oid::from_str(request.baseline).map_err(|e| failed(e.message().to_string()))?;
        let base_tree = repo
            .find_commit(baseline)
            .and_then(|c| c.tree())
            .map_err(|e| failed(e.message().to_string()))?
            .id();
        // Candidates of one race run at once: each gets its own scratch worktree.
        let name = match request.candidate {
            Some(i) => format!("agent-{}-c{i}-{}", request.run_id, request.attempt),
            None => format!("agent-{}-{}", request.run_id, request.attempt),
        };
        let scratch =
            TempWorktree::add(&repo, &name, request.baseline).map_err(|e| failed(e.message))?;
        let prompt_file = request.attempt_dir.join("agent_prompt.txt");
        std::fs::write(&prompt_file, request.prompt)
            .map_err(|e| failed(format!("cannot write the prompt file: {e}")))?;
        let prompt_path = prompt_file.display().to_string();
        let spec = CommandSpec {
            argv: self.argv_for(&prompt_path, request.attempt),
            cwd: scratch.path.clone(),
            timeout: self.timeout,
            env_set: [
                ("FACTORY_PROMPT_FILE".into(), prompt_path),
                ("FACTORY_ATTEMPT".into(), request.attempt.to_string()),
                ("FACTORY_RUN_ID".into(), request.run_id.to_string()),
                ("FACTORY_ALLOWED_FILES".into(), request.allowed.join("\n")),
            ]
            .into_iter()
            .chain(request.candidate_env())
            .collect(),
            stdin: Some(request.prompt.as_bytes().to_vec()),
            label: "agent",
            ..CommandSpec::default()
        };
        let logs = LogFiles::in_dir(request.attempt_dir, request.attempt_rel, "agent");
        let result = exec::run(&spec, &logs);
        if !result.succeeded() {
            drop(scratch);
            return Err(failed(format!(
                "agent {}: {}\n{}",
                result.display(),
                result.outcome(),
                tail_chars(result.stderr_trunc.trim_end(), 1500)
            )));
        }
        // Whatever the agent did — edits, new untracked files, deletions, chmod, commits — the
        // scratch work tree now holds it; its tree against the baseline's is the proposal.
        let diff = git::worktree_tree(&scratch.path)
            .and_then(|tree| git::diff_trees(&repo, base_tree, tree))
            .map_err(|e| failed(format!("reading the agent's changes: {}", e.message)));
        scratch.remove().map_err(|e| failed(e.message))?;
        let diff = diff?;
        let raw = if diff.iter().all(u8::is_ascii_whitespace) {
            serde_json::json!({"unified_diff": "", "summary": "the agent changed nothing"})
                .to_string()
                .into_bytes()
        } else {
            diff
        };
        Ok(Response::plain(raw, OutputFormat::AgentText))
    }
}
