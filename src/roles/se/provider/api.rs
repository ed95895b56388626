//! What the model client and the three wire APIs (`openai`, `responses`, `anthropic`) share:
//! which API a request speaks, the optional parameters, what the user asked of the model, one
//! request's content, and the answer a wire's reader makes of the body. It sits below both,
//! so an adapter never imports the client that drives it.

use super::http::{self, Sink};
use crate::store::records::Usage;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// Which wire API a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Chat,
    Responses,
    Anthropic,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Anthropic => "anthropic",
        }
    }

    pub fn parse(s: &str) -> Option<Api> {
        match s {
            "chat" => Some(Api::Chat),
            "responses" => Some(Api::Responses),
            _ => None,
        }
    }
}

/// The optional request parameters. `Schema` and `JsonMode` are the two rungs of the
/// structured-output ladder (for Anthropic: `output_config.format`, then a tool whose
/// `input_schema` is the proposal's; `ToolChoice` forces the model to call it, and a model that
/// refuses that is offered the tool with `tool_choice: auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Param {
    Temperature,
    Seed,
    Schema,
    JsonMode,
    Effort,
    MaxOutput,
    /// The output limit under its older name (Chat Completions' `max_tokens`), for a server
    /// that refuses `max_completion_tokens` as unknown: under `--max-cost` a request is never
    /// sent without a limit because the server knows the limit by another name.
    MaxOutputOlder,
    Stream,
    StreamOptions,
    Store,
    ToolChoice,
}

pub const ALL_PARAMS: [Param; 11] = [
    Param::Temperature,
    Param::Seed,
    Param::Schema,
    Param::JsonMode,
    Param::Effort,
    Param::MaxOutput,
    Param::MaxOutputOlder,
    Param::Stream,
    Param::StreamOptions,
    Param::Store,
    Param::ToolChoice,
];

/// What the user asked of the model; `None` leaves the choice to the harness or the server.
#[derive(Debug, Clone)]
pub struct Settings {
    pub temperature: f64,
    /// The temperature came from a flag or git config: it is sent everywhere and never dropped.
    pub temperature_set: bool,
    pub max_output_tokens: Option<u64>,
    pub reasoning_effort: Option<String>,
    /// `--llm-api` / `factory.api`: no automatic switch away from it.
    pub api: Option<Api>,
    pub total_timeout: Duration,
    /// `.git/factory/providers.json`, where refused parameters are remembered.
    pub memory: Option<std::path::PathBuf>,
    /// The `seed` sent to OpenAI-compatible servers: 0, plus the candidate's index in a race
    /// (SPEC §5.1), so candidates sample differently yet reproducibly.
    pub seed: u64,
    /// The output limit the harness sends when the user set none: under `--max-cost` a
    /// request's worst case assumes `DEFAULT_OUTPUT_LIMIT`, so the request must not be
    /// allowed more. Chosen by the harness, so a server that refuses it may have it dropped
    /// (a model whose own limit is lower refuses it as too large). Not part of the identity.
    pub output_cap: Option<u64>,
}

/// The output limit a request's worst case assumes when the user set none (SPEC §3.3 Cost):
/// the harness sends it too under `--max-cost`.
pub const DEFAULT_OUTPUT_LIMIT: u64 = 32_768;

impl Settings {
    /// The output limit sent: the user's, else the harness's cap.
    pub fn output_limit(&self) -> Option<u64> {
        self.max_output_tokens.or(self.output_cap)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            temperature: 0.0,
            temperature_set: false,
            max_output_tokens: None,
            reasoning_effort: None,
            api: None,
            total_timeout: http::DEFAULT_TOTAL,
            memory: None,
            seed: 0,
            output_cap: None,
        }
    }
}

/// One request's content, with the parameters to send.
pub struct Ask<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub prompt: &'a str,
    pub settings: &'a Settings,
    pub send: &'a BTreeSet<Param>,
    pub schema: &'a Value,
}

impl Ask<'_> {
    pub fn has(&self, p: Param) -> bool {
        self.send.contains(&p)
    }
}

/// Why an answer ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    Complete,
    /// Stopped by the output limit; the server's words (`finish_reason: length`, …).
    Cut(String),
    /// The model refused; its words.
    Refused(String),
    /// The answer was larger than any proposal can be (`http::MAX_ANSWER`); nothing of it
    /// is kept.
    TooLarge(String),
}

pub struct Answer {
    pub text: String,
    pub reasoning: String,
    pub usage: Option<Usage>,
    pub stop: Stop,
    /// The model the answer says it came from (a dated snapshot behind an alias).
    pub model: Option<String>,
}

/// Turns events (or a whole JSON body) into an `Answer`.
pub trait Reader: Sink {
    fn finish(self: Box<Self>) -> Result<Answer, String>;
    /// The usage the server reported so far: a request that then fails (a stream cut or
    /// an error event after it) was billed all the same.
    fn usage_so_far(&self) -> Option<Usage>;
}

/// One wire API: its URL, body, parameter names and answer reader.
pub trait Wire {
    fn api(&self) -> Api;
    fn url(&self, base: &str) -> String;
    /// The name recorded in `dropped_params`, and the words a refusal of it uses; `None`
    /// when the API has no such parameter.
    fn names(&self, p: Param) -> Option<(&'static str, &'static [&'static str])>;
    /// Whether the API requires the parameter (it is then never dropped).
    fn required(&self, _p: Param) -> bool {
        false
    }
    fn body(&self, ask: &Ask<'_>) -> Value;
    fn reader(&self) -> Box<dyn Reader>;
}

/// The most one request (or one agent's run) is believed to have cost, in USD: a larger
/// figure is no bill, and summed it would overflow to a cost no record can hold.
const MAX_REPORTED_COST: f64 = 1e6;

/// A cost in USD that a server or an agent reports of itself: a number that can be a bill (a
/// negative or non-finite one would give a budget back; an absurd one is no bill either).
pub fn reported_cost(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
        .filter(|c| c.is_finite() && (0.0..=MAX_REPORTED_COST).contains(c))
}

/// What a server said a request cost (OpenRouter's `usage.cost`). On the user's own provider
/// key (`is_byok`) that is only OpenRouter's fee: what the provider charged the user's own
/// account is `cost_details.upstream_inference_cost`, spent as well.
fn server_cost(u: &Value) -> Option<f64> {
    let cost = reported_cost(u.get("cost"))?;
    if u.get("is_byok").and_then(Value::as_bool) != Some(true) {
        return Some(cost);
    }
    let upstream = reported_cost(u.pointer("/cost_details/upstream_inference_cost"));
    Some(cost + upstream.unwrap_or(0.0))
}

/// The output count with its reasoning in it. OpenAI counts reasoning inside the output;
/// Gemini's OpenAI-compatible endpoint and many proxies report it beside, their total being
/// input + output + reasoning: that reasoning was billed as output all the same.
fn with_reasoning(
    input: Option<u64>,
    output: Option<u64>,
    reasoning: Option<u64>,
    total: Option<u64>,
) -> Option<u64> {
    let out = output?;
    if let (Some(input), Some(reasoning), Some(total)) = (input, reasoning, total) {
        let sum = input
            .checked_add(out)
            .and_then(|n| n.checked_add(reasoning));
        if reasoning > 0 && sum == Some(total) {
            return Some(out.saturating_add(reasoning));
        }
    }
    Some(out)
}

/// Reads a `usage` object as the API names its fields (SPEC §3.3): Chat Completions'
/// `prompt_tokens`/`completion_tokens` with their `*_details`, the Responses API's
/// `input_tokens`/`output_tokens` with theirs, Anthropic's `input_tokens` with its cache reads
/// and writes beside it (added in, so `input_tokens` is every input token on every API), and a
/// server's own `cost` in USD (OpenRouter's).
pub fn usage(v: Option<&Value>, api: Api) -> Option<Usage> {
    let u = v.filter(|u| u.is_object())?;
    let n = |path: &str| u.pointer(path).and_then(Value::as_u64);
    let cost = server_cost(u);
    Some(match api {
        Api::Chat => Usage {
            input_tokens: n("/prompt_tokens"),
            output_tokens: with_reasoning(
                n("/prompt_tokens"),
                n("/completion_tokens"),
                n("/completion_tokens_details/reasoning_tokens"),
                n("/total_tokens"),
            ),
            cache_read_tokens: n("/prompt_tokens_details/cached_tokens"),
            cache_write_tokens: n("/prompt_tokens_details/cache_write_tokens"),
            reasoning_tokens: n("/completion_tokens_details/reasoning_tokens"),
            server_cost_usd: cost,
            ..Usage::default()
        },
        Api::Responses => Usage {
            input_tokens: n("/input_tokens"),
            output_tokens: with_reasoning(
                n("/input_tokens"),
                n("/output_tokens"),
                n("/output_tokens_details/reasoning_tokens"),
                n("/total_tokens"),
            ),
            cache_read_tokens: n("/input_tokens_details/cached_tokens"),
            cache_write_tokens: n("/input_tokens_details/cache_write_tokens"),
            reasoning_tokens: n("/output_tokens_details/reasoning_tokens"),
            server_cost_usd: cost,
            ..Usage::default()
        },
        Api::Anthropic => Usage {
            input_tokens: n("/input_tokens"),
            output_tokens: n("/output_tokens"),
            cache_read_tokens: n("/cache_read_input_tokens"),
            cache_write_tokens: n("/cache_creation_input_tokens"),
            cache_write_1h_tokens: n("/cache_creation/ephemeral_1h_input_tokens"),
            server_cost_usd: cost,
            ..Usage::default()
        },
    })
}
