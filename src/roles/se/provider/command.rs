//! `--agent-command`: any program that reads the request as JSON on stdin and prints its
//! proposal on stdout. Run like every other command: argv only, own process group, timeout;
//! under `--sandbox` confined by the agents' policy (SPEC §1.1, §7.1): the repo read-only, its
//! `factory.agentWritable` folders writable, the network on.

use super::contract::{Provider, ProviderError, Request, Response};
use crate::config::Config;
use crate::roles::po::exec::{self, excerpt, CommandSpec, LogFiles, Sandbox};
use crate::roles::se::proposal::OutputFormat;
use serde_json::json;
use std::time::Duration;

pub struct AgentCommand {
    pub argv: Vec<String>,
    pub timeout: Duration,
}

impl Provider for AgentCommand {
    fn propose(&mut self, request: &Request<'_>) -> Result<Response, ProviderError> {
        let input = json!({
            "prompt": request.prompt,
            "work_order": request.work_order,
            "attempt": request.attempt,
            "failure_brief": request.failure_brief,
        });
        let sandbox = match request.sandbox {
            true => Some(confine(request.root)?),
            false => None,
        };
        let spec = CommandSpec {
            argv: self.argv.clone(),
            cwd: request.root.to_path_buf(),
            timeout: self.timeout,
            env_remove: Vec::new(),
            env_set: request.candidate_env(),
            stdin: Some(input.to_string().into_bytes()),
            label: "agent",
            sandbox,
            pgid_file: None,
        };
        let logs = LogFiles::in_dir(request.attempt_dir, request.attempt_rel, "agent");
        let result = exec::run(&spec, &logs);
        if !result.succeeded() {
            let tail = excerpt(&result.stderr_trunc);
            let tail: String = tail
                .chars()
                .rev()
                .take(1500)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            return Err(ProviderError::Failed(format!(
                "agent command {}: {}\n{}",
                result.display(),
                result.outcome(),
                tail.trim_end()
            )));
        }
        let raw = std::fs::read(&logs.stdout)
            .map_err(|e| ProviderError::Failed(format!("cannot read the agent's output: {e}")))?;
        // A last line that reports usage (SPEC §3.3 Cost) is kept in the output, not parsed.
        let said = super::edits::reported_usage(&raw);
        let text = match &said {
            Some((start, _, _)) => raw[..*start].to_vec(),
            None => raw.clone(),
        };
        Ok(Response {
            sandbox: result.sandbox.clone(),
            text,
            usage: said.as_ref().map(|s| s.1.clone()),
            served_model: said.and_then(|s| s.2),
            ..Response::plain(raw, OutputFormat::AgentText)
        })
    }
}

/// The agent's confinement in the tree at `root`, by the repo's chosen backend.
fn confine(root: &std::path::Path) -> Result<Sandbox, ProviderError> {
    let failed = |what: &str, e: String| ProviderError::Failed(format!("{what}: {e}"));
    let repo = git2::Repository::open(root)
        .map_err(|e| failed("cannot open the repo", e.message().to_string()))?;
    let writable = super::edits::agent_writable(&Config::of(&repo))?;
    let backend = crate::sandbox::require(&repo)
        .map_err(|e| failed("cannot confine the agent", e.message))?;
    let policy = crate::sandbox::Policy::for_command_agent(&repo, root, writable);
    Ok(Sandbox::new(policy, backend))
}
