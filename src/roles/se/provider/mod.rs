//! SE providers behind one trait: model APIs, external agents, replayed proposals and the
//! demo's scripted proposer.

pub mod anthropic;
pub mod api;
pub mod client;
pub mod command;
pub mod contract;
pub mod edits;
pub mod http;
pub mod memory;
pub mod openai;
pub mod replay;
pub mod responses;
pub mod schema;
pub mod scripted;
pub mod sse;

pub use contract::{Learnt, Provider, ProviderError, Request, Response};
use std::path::Path;

/// The one door every provider's words come through: answers and error messages are
/// redacted (`secrets::redact`) before the harness stores, prints or re-prompts with them,
/// so a server that echoes the API key cannot leak it.
struct Redacted(Box<dyn Provider>);

impl Provider for Redacted {
    fn propose(&mut self, request: &Request<'_>) -> Result<Response, ProviderError> {
        use crate::secrets::{redact, redact_bytes};
        match self.0.propose(request) {
            Ok(r) => Ok(Response {
                raw: redact_bytes(&r.raw),
                text: redact_bytes(&r.text),
                reasoning: r.reasoning.as_deref().map(redact),
                served_model: r.served_model.as_deref().map(redact),
                stop: match r.stop {
                    api::Stop::Complete => api::Stop::Complete,
                    api::Stop::Cut(why) => api::Stop::Cut(redact(&why)),
                    api::Stop::Refused(why) => api::Stop::Refused(redact(&why)),
                    api::Stop::TooLarge(why) => api::Stop::TooLarge(redact(&why)),
                },
                ..r
            }),
            Err(ProviderError::Failed(m)) => Err(ProviderError::Failed(redact(&m))),
            Err(ProviderError::Exhausted(m)) => Err(ProviderError::Exhausted(redact(&m))),
            Err(ProviderError::Fatal(m)) => Err(ProviderError::Fatal(redact(&m))),
            Err(ProviderError::Unreachable { message, hint }) => Err(ProviderError::Unreachable {
                message: redact(&message),
                hint: redact(&hint),
            }),
            Err(ProviderError::OverBudget(m)) => Err(ProviderError::OverBudget(m)),
        }
    }

    fn meters_requests(&self) -> bool {
        self.0.meters_requests()
    }

    fn learnt(&mut self) -> Learnt {
        self.0.learnt()
    }
}

/// Which provider a run uses, as given on the command line; its `identity()` enters the
/// config hash, so it never holds a path or a key.
#[derive(Debug, Clone)]
pub enum ProviderSpec {
    OpenAi {
        model: String,
        base_url: Option<String>,
    },
    Anthropic {
        model: String,
        base_url: Option<String>,
    },
    AgentCommand {
        argv: Vec<String>,
    },
    AgentEdits {
        argv: Vec<String>,
    },
    Replay {
        dir: std::path::PathBuf,
    },
    Scripted {
        name: String,
        proposals: Vec<String>,
    },
}

/// An OpenAI model: OpenAI's own URL speaks the Responses API, any other server Chat
/// Completions (SPEC §3.3), unless `--llm-api` says which.
fn open_openai(
    name: &str,
    base_url: Option<&str>,
    model: &api::Settings,
    need_key: bool,
) -> crate::error::Result<Box<dyn Provider>> {
    let key = crate::env::openai_key();
    if key.is_none() && base_url.is_none() && need_key {
        return Err(crate::error::Error::new("OPENAI_API_KEY is not set").hint(
            "export OPENAI_API_KEY=…, or point --llm-base-url at a local OpenAI-compatible server",
        ));
    }
    let base = base_url.unwrap_or(openai::DEFAULT_BASE_URL).to_string();
    let api = model
        .api
        .unwrap_or(if base.trim_end_matches('/') == openai::DEFAULT_BASE_URL {
            api::Api::Responses
        } else {
            api::Api::Chat
        });
    let headers = key
        .map(|k| vec![("authorization", format!("Bearer {k}"))])
        .unwrap_or_default();
    Ok(Box::new(client::ModelClient::new(
        "openai",
        name.to_string(),
        base,
        headers,
        api,
        model.clone(),
    )))
}

/// An Anthropic model, over the Messages API.
fn open_anthropic(
    name: &str,
    base_url: Option<&str>,
    model: &api::Settings,
    need_key: bool,
) -> crate::error::Result<Box<dyn Provider>> {
    let key = match crate::env::anthropic_key() {
        Some(k) => k,
        None if !need_key => String::new(),
        None => {
            return Err(crate::error::Error::new("ANTHROPIC_API_KEY is not set")
                .hint("export ANTHROPIC_API_KEY=… and run again"))
        }
    };
    let base = base_url.unwrap_or(anthropic::DEFAULT_BASE_URL).to_string();
    Ok(Box::new(client::ModelClient::new(
        "anthropic",
        name.to_string(),
        base,
        vec![
            ("x-api-key", key),
            ("anthropic-version", anthropic::API_VERSION.to_string()),
        ],
        api::Api::Anthropic,
        model.clone(),
    )))
}

/// `--replay PATH|RUN`: a folder of proposals, or a stored run's.
fn open_replay(dir: &Path, cwd: &Path) -> crate::error::Result<replay::Replay> {
    use crate::error::Error;
    if dir.is_dir() {
        return replay::Replay::from_dir(dir);
    }
    let repo = crate::git::open(Some(cwd))?;
    let name = dir.to_string_lossy();
    let run = crate::store::resolve(&repo, &name).map_err(|e| {
        Error::new(format!(
            "--replay {name}: neither a folder nor a stored run ({})",
            e.message
        ))
        .hint("pass a folder of 1.json/1.diff files, or a run id from git factory log")
    })?;
    replay::Replay::from_run(&repo, &run)
}

fn join_argv(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

impl ProviderSpec {
    /// Parses `[PROVIDER:]MODEL` (openai when no provider is named).
    pub fn model(spec: &str, base_url: Option<String>) -> crate::error::Result<Self> {
        let (provider, model) = match spec.split_once(':') {
            Some((p, m)) if p == "openai" || p == "anthropic" => (p, m),
            Some((p, _)) if !p.contains('/') && !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric()) => {
                return Err(crate::error::Error::new(format!("unknown provider {p:?} in --llm-model {spec:?}"))
                    .hint("use openai:MODEL (any OpenAI-compatible server with --llm-base-url) or anthropic:MODEL"))
            }
            _ => ("openai", spec),
        };
        if model.trim().is_empty() {
            return Err(crate::error::Error::new("--llm-model names no model")
                .hint("e.g. --llm-model openai:gpt-4o"));
        }
        Ok(match provider {
            "anthropic" => ProviderSpec::Anthropic {
                model: model.to_string(),
                base_url,
            },
            _ => ProviderSpec::OpenAi {
                model: model.to_string(),
                base_url,
            },
        })
    }

    /// Opens the provider, checking what it needs (keys, folders) before anything runs;
    /// `need_key` is false for a dry run, which calls nothing.
    pub fn open(
        &self,
        cwd: &Path,
        model: &api::Settings,
        need_key: bool,
        agent_timeout: std::time::Duration,
    ) -> crate::error::Result<(Box<dyn Provider>, String)> {
        let (provider, identity) = self.open_unredacted(cwd, model, need_key, agent_timeout)?;
        Ok((Box::new(Redacted(provider)), identity))
    }

    fn open_unredacted(
        &self,
        cwd: &Path,
        model: &api::Settings,
        need_key: bool,
        agent_timeout: std::time::Duration,
    ) -> crate::error::Result<(Box<dyn Provider>, String)> {
        Ok(match self {
            ProviderSpec::OpenAi {
                model: name,
                base_url,
            } => (
                open_openai(name, base_url.as_deref(), model, need_key)?,
                self.identity(),
            ),
            ProviderSpec::Anthropic {
                model: name,
                base_url,
            } => (
                open_anthropic(name, base_url.as_deref(), model, need_key)?,
                self.identity(),
            ),
            ProviderSpec::AgentCommand { argv } => (
                Box::new(command::AgentCommand {
                    argv: argv.clone(),
                    timeout: agent_timeout,
                }),
                self.identity(),
            ),
            ProviderSpec::AgentEdits { argv } => (
                Box::new(edits::AgentEdits {
                    argv: argv.clone(),
                    timeout: agent_timeout,
                }),
                self.identity(),
            ),
            ProviderSpec::Replay { dir } => {
                let replay = open_replay(dir, cwd)?;
                let id = replay.identity.clone();
                (Box::new(replay), id)
            }
            ProviderSpec::Scripted { proposals, .. } => (
                Box::new(scripted::Scripted {
                    proposals: proposals.clone(),
                }),
                self.identity(),
            ),
        })
    }

    /// The `model` part of the config hash (SPEC §4.3). Replay's is computed from its files
    /// when opened.
    pub fn identity(&self) -> String {
        match self {
            ProviderSpec::OpenAi { model, base_url } => match base_url {
                Some(u) => format!("openai:{model}@{u}"),
                None => format!("openai:{model}"),
            },
            ProviderSpec::Anthropic { model, base_url } => match base_url {
                Some(u) => format!("anthropic:{model}@{u}"),
                None => format!("anthropic:{model}"),
            },
            ProviderSpec::AgentCommand { argv } => format!("agent:{}", join_argv(argv)),
            ProviderSpec::AgentEdits { argv } => format!("agent-edits:{}", join_argv(argv)),
            ProviderSpec::Replay { .. } => "replay".to_string(),
            ProviderSpec::Scripted { name, .. } => format!("scripted:{name}"),
        }
    }

    /// How its requests are priced (SPEC §3.3 Cost): a model by its name without the
    /// provider prefix, known to the table by its provider when spoken at the provider's own
    /// URL, else by the base URL it is served at.
    pub fn priced(&self) -> crate::cost::Priced {
        use crate::cost::Priced;
        match self {
            ProviderSpec::OpenAi { model, base_url } => Priced::Model {
                name: model.clone(),
                provider: base_url.is_none().then_some("openai"),
                base_url: base_url.clone(),
            },
            ProviderSpec::Anthropic { model, base_url } => Priced::Model {
                name: model.clone(),
                provider: base_url.is_none().then_some("anthropic"),
                base_url: base_url.clone(),
            },
            ProviderSpec::Replay { .. } | ProviderSpec::Scripted { .. } => Priced::Replay,
            ProviderSpec::AgentCommand { .. } | ProviderSpec::AgentEdits { .. } => Priced::Agent,
        }
    }

    /// Whether the provider is a model API (the `--llm-*` flags apply to it).
    pub fn is_model(&self) -> bool {
        matches!(
            self,
            ProviderSpec::OpenAi { .. } | ProviderSpec::Anthropic { .. }
        )
    }

    /// Whether the provider is an agent program, run with the user's privileges: the repo is
    /// audited after it (SPEC §7).
    pub fn is_agent(&self) -> bool {
        matches!(
            self,
            ProviderSpec::AgentCommand { .. } | ProviderSpec::AgentEdits { .. }
        )
    }
}
