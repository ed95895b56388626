//! The one trait every SE provider answers through (model APIs, agents, replays, the demo's
//! scripted proposer), with what it is asked and what it answers. Every provider imports it;
//! it imports none of them.

use super::api::Stop;
use crate::roles::se::proposal::OutputFormat;
use crate::store::records::{FailureBrief, Usage};
use std::path::Path;

/// What a provider is asked for one attempt.
pub struct Request<'a> {
    /// The tree the run works in (the user's, or the run's worktree).
    pub root: &'a Path,
    pub run_id: &'a str,
    /// The baseline commit every attempt starts from.
    pub baseline: &'a str,
    pub allowed: &'a [String],
    pub prompt: &'a str,
    pub work_order: &'a serde_json::Value,
    pub attempt: u32,
    pub failure_brief: Option<&'a FailureBrief>,
    /// The folder where this attempt's artifacts go (an agent's logs land here).
    pub attempt_dir: &'a Path,
    pub attempt_rel: &'a str,
    /// `--sandbox`: agents run confined too (SPEC §7.1), by the backend the repo chooses.
    pub sandbox: bool,
    /// Hears the tokens received so far while a model streams its answer.
    pub on_tokens: &'a dyn Fn(u64),
    /// The candidate's index in a best-of-N race (SPEC §5.1); agents get it as
    /// `FACTORY_CANDIDATE`.
    pub candidate: Option<u32>,
    /// Holds each request's worst case against the run's dollar budget and prices what it
    /// cost (SPEC §3.3 Cost); a provider that sends requests itself meters every one.
    pub meter: &'a crate::cost::Meter<'a>,
}

impl Request<'_> {
    /// What an agent is told about the run besides its prompt.
    pub fn candidate_env(&self) -> Vec<(String, String)> {
        self.candidate
            .map(|i| vec![("FACTORY_CANDIDATE".to_string(), i.to_string())])
            .unwrap_or_default()
    }
}

/// A provider's answer: `raw` is stored verbatim, `text` (the answer without its reasoning)
/// is parsed by the harness.
pub struct Response {
    /// The exact output, as bytes: an agent's bare diff is never decoded.
    pub raw: Vec<u8>,
    /// What the parser judges: the output without reasoning text.
    pub text: Vec<u8>,
    pub format: OutputFormat,
    pub usage: Option<Usage>,
    /// Reasoning text (`<think>`, `reasoning_content`, reasoning items, thinking blocks).
    pub reasoning: Option<String>,
    pub stop: Stop,
    /// Optional parameters the server refused by name during this attempt.
    pub dropped_params: Vec<String>,
    /// `chat -> responses` when the server said the model lives on the other API.
    pub api_switch: Option<String>,
    /// The model the answer says it came from (`gpt-5.1-2026-08-07` behind `gpt-5.1`).
    pub served_model: Option<String>,
    /// The sandbox backend that confined the agent that made this answer (SPEC §7.1).
    pub sandbox: Option<String>,
}

impl Response {
    /// An answer that is all proposal (agents, replays).
    pub fn plain(raw: Vec<u8>, format: OutputFormat) -> Self {
        Response {
            text: raw.clone(),
            raw,
            format,
            usage: None,
            reasoning: None,
            stop: Stop::Complete,
            dropped_params: Vec::new(),
            api_switch: None,
            served_model: None,
            sandbox: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderError {
    /// The attempt fails with stage `llm_call_failed`; a later attempt may still succeed.
    Failed(String),
    /// The attempt fails with stage `llm_call_failed` and no later attempt can do better
    /// (a replay with no more proposals): the run ends with its verdict.
    Exhausted(String),
    /// The provider refuses us (bad key, unknown model, malformed request): the run ends at
    /// once with verdict ERROR.
    Fatal(String),
    /// The provider cannot be reached (connection refused, unknown host) or answered 404
    /// before it ever answered: a misconfiguration, refused before the first attempt counts.
    Unreachable { message: String, hint: String },
    /// The next request's worst case would pass what is left of `--max-cost`: it was not
    /// sent, and the run stops (stage `budget_exhausted`).
    OverBudget(String),
}

/// What a request that then failed had already learnt from the server: the parameters it
/// refused by name and the API it switched to. The failed attempt records them all the same.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Learnt {
    pub dropped_params: Vec<String>,
    pub api_switch: Option<String>,
    /// What its requests that were billed yet failed used (SPEC §3.3).
    pub billed: Option<Usage>,
}

pub trait Provider {
    fn propose(&mut self, request: &Request<'_>) -> Result<Response, ProviderError>;

    /// Whether `propose` meters each request it sends through `Request::meter` (a model
    /// API); otherwise the whole call is metered as one request.
    fn meters_requests(&self) -> bool {
        false
    }

    /// After `propose` failed: what its requests learnt before the failure (nothing, for a
    /// provider that is not a model API).
    fn learnt(&mut self) -> Learnt {
        Learnt::default()
    }
}
