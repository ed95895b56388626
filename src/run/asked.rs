//! What the user asked of a run, as given (the flags of `git factory run`), resolved into
//! [`RunOptions`]: git config and the work order's defaults filled in (SPEC §8), the SE
//! provider chosen and the model settings checked (SPEC §3.3).

use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::roles::se::provider::ProviderSpec;
use crate::run::options::RunOptions;
use crate::workorder::LoadedWorkOrder;
use std::path::PathBuf;

/// A run's flags as given, before git config and the defaults fill them in.
#[derive(Debug, Default, Clone)]
pub struct Asked {
    pub repo: Option<PathBuf>,
    pub out: Option<PathBuf>,
    pub llm_model: Vec<String>,
    pub llm_base_url: Option<String>,
    pub llm_temperature: Option<f64>,
    pub llm_api: Option<String>,
    pub llm_max_output_tokens: Option<u64>,
    pub llm_reasoning_effort: Option<String>,
    pub agent_command: Option<String>,
    pub agent_edits: Option<String>,
    pub agent_timeout: Option<u64>,
    pub replay: Option<PathBuf>,
    pub max_attempts: Option<u32>,
    pub timeout_seconds: Option<u64>,
    pub strict_apply: bool,
    pub force: bool,
    pub dry_run: bool,
    pub worktree: bool,
    pub pinned_baseline: Option<String>,
    pub commit: bool,
    pub branch: Option<String>,
    pub sandbox: bool,
    pub no_sandbox: bool,
    pub baseline_check: bool,
    pub no_baseline_check: bool,
    pub candidates: u32,
    pub jobs: Option<u32>,
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
    pub attest: bool,
    pub no_attest: bool,
}

impl Asked {
    /// The run's options: the flags, with git config and the work order's defaults filled in.
    pub fn resolve(&self, work_order: LoadedWorkOrder) -> Result<RunOptions> {
        let repo = crate::git::open(self.repo.as_deref())?;
        let cfg = Config::of(&repo);
        drop(repo);
        let provider = provider_spec(self, &cfg)?;
        let baseline_check = match (self.baseline_check, self.no_baseline_check) {
            (true, _) => true,
            (_, true) => false,
            _ => cfg
                .bool(config::BASELINE_CHECK)?
                .unwrap_or_else(|| work_order.order.has_contract()),
        };
        let sandbox = sandbox_wanted(self.sandbox, self.no_sandbox, &cfg)?;
        let model = model_settings(self, &cfg, &provider)?;
        let more_models = self
            .llm_model
            .iter()
            .skip(1)
            .map(|m| {
                let base_url = match &provider {
                    ProviderSpec::OpenAi { base_url, .. }
                    | ProviderSpec::Anthropic { base_url, .. } => base_url.clone(),
                    _ => None,
                };
                ProviderSpec::model(m, base_url)
            })
            .collect::<Result<Vec<_>>>()?;
        if self.max_tokens == Some(0) {
            return Err(
                Error::new("--max-tokens must be at least 1").hint("e.g. --max-tokens 200000")
            );
        }
        let max_cost = dollar_budget(self.max_cost, &cfg)?;
        let opts = RunOptions {
            max_cost,
            candidates: self.candidates,
            jobs: self.jobs,
            more_models,
            max_tokens: self.max_tokens,
            attest: match (self.attest, self.no_attest) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            model,
            repo_dir: self.repo.clone(),
            work_order,
            out: self.out.clone(),
            provider,
            temperature: cfg.value(self.llm_temperature, config::TEMPERATURE, 0.0)?,
            max_attempts: cfg.value(
                self.max_attempts,
                config::MAX_ATTEMPTS,
                config::DEFAULT_MAX_ATTEMPTS,
            )?,
            timeout_seconds: cfg.value(
                self.timeout_seconds,
                config::TIMEOUT_SECONDS,
                config::DEFAULT_TIMEOUT_SECONDS,
            )?,
            agent_timeout_seconds: cfg.value(
                self.agent_timeout,
                config::AGENT_TIMEOUT,
                config::DEFAULT_AGENT_TIMEOUT,
            )?,
            strict_apply: self.strict_apply,
            force: self.force,
            dry_run: self.dry_run,
            sandbox,
            worktree: self.worktree,
            pinned_baseline: self.pinned_baseline.clone(),
            commit: self.commit,
            branch: self.branch.clone(),
            baseline_check,
        };
        if !opts.temperature.is_finite() || opts.temperature < 0.0 {
            return Err(Error::new(format!(
                "--llm-temperature {} is not a valid temperature",
                opts.temperature
            ))
            .hint("use a number such as 0 or 0.7"));
        }
        Ok(opts)
    }
}

/// `--sandbox` / `--no-sandbox`, else git config `factory.sandbox`, else off.
pub fn sandbox_wanted(on: bool, off: bool, cfg: &Config) -> Result<bool> {
    Ok(match (on, off) {
        (true, _) => true,
        (_, true) => false,
        _ => cfg.bool(config::SANDBOX)?.unwrap_or(false),
    })
}

fn provider_spec(asked: &Asked, cfg: &Config) -> Result<ProviderSpec> {
    let chosen = [
        asked.agent_command.is_some(),
        asked.agent_edits.is_some(),
        asked.replay.is_some(),
        !asked.llm_model.is_empty(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if chosen > 1 {
        return Err(Error::new("more than one SE provider given")
            .hint("use one of --llm-model, --agent-command, --agent-edits or --replay"));
    }
    if let Some(cmd) = &asked.agent_edits {
        let argv = shlex::split(cmd).filter(|a| !a.is_empty()).ok_or_else(|| {
            Error::new(format!("--agent-edits {cmd:?} cannot be split into arguments"))
                .hint("quote it like a shell word list, e.g. --agent-edits 'claude -p --permission-mode acceptEdits'")
        })?;
        return Ok(ProviderSpec::AgentEdits { argv });
    }
    if let Some(cmd) = &asked.agent_command {
        let argv = shlex::split(cmd).filter(|a| !a.is_empty()).ok_or_else(|| {
            Error::new(format!(
                "--agent-command {cmd:?} cannot be split into arguments"
            ))
            .hint("quote it like a shell word list, e.g. --agent-command 'my-agent --json'")
        })?;
        return Ok(ProviderSpec::AgentCommand { argv });
    }
    if let Some(dir) = &asked.replay {
        return Ok(ProviderSpec::Replay { dir: dir.clone() });
    }
    let model = asked.llm_model.first().cloned().or_else(|| cfg.string(config::MODEL)).ok_or_else(|| {
        Error::new("no SE provider: no model given")
            .hint("pass --llm-model openai:gpt-4o (or set git config factory.model), --agent-command or --replay")
    })?;
    let base_url = asked
        .llm_base_url
        .clone()
        .or_else(|| cfg.string(config::BASE_URL))
        .or_else(crate::env::openai_base_url);
    ProviderSpec::model(&model, base_url)
}

/// What the user asked of a model API (SPEC §3.3); the `--llm-*` flags apply to models only.
fn model_settings(
    asked: &Asked,
    cfg: &Config,
    provider: &ProviderSpec,
) -> Result<crate::roles::se::provider::client::Settings> {
    use crate::roles::se::provider::client::{Api, Settings};
    if !provider.is_model() {
        let given = [
            ("--llm-api", asked.llm_api.is_some()),
            (
                "--llm-max-output-tokens",
                asked.llm_max_output_tokens.is_some(),
            ),
            (
                "--llm-reasoning-effort",
                asked.llm_reasoning_effort.is_some(),
            ),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
            return Err(
                Error::new(format!("{flag} applies to --llm-model only")).hint(format!(
                    "drop {flag}, or use --llm-model instead of an agent or a replay"
                )),
            );
        }
    }
    if asked.llm_api.is_some() && matches!(provider, ProviderSpec::Anthropic { .. }) {
        return Err(Error::new(
            "--llm-api chooses between OpenAI's APIs; anthropic: speaks the Messages API",
        )
        .hint("drop --llm-api for anthropic: models"));
    }
    let configured_api = match provider {
        ProviderSpec::OpenAi { .. } => cfg.string(config::API),
        _ => None,
    };
    let api = match asked.llm_api.clone().or(configured_api) {
        None => None,
        Some(a) => Some(Api::parse(a.trim()).ok_or_else(|| {
            Error::new(format!(
                "git config {} has an invalid value {a:?}",
                config::API
            ))
            .hint(format!(
                "use responses or chat: git config {} chat",
                config::API
            ))
        })?),
    };
    let max_output_tokens: Option<u64> = match asked.llm_max_output_tokens {
        Some(n) => Some(n),
        None => cfg
            .string(config::MAX_OUTPUT_TOKENS)
            .map(|_| cfg.value(None, config::MAX_OUTPUT_TOKENS, 0u64))
            .transpose()?,
    };
    if max_output_tokens == Some(0) {
        return Err(Error::new("--llm-max-output-tokens must be at least 1")
            .hint("e.g. --llm-max-output-tokens 16000"));
    }
    let effort = asked
        .llm_reasoning_effort
        .clone()
        .or_else(|| cfg.string(config::REASONING_EFFORT))
        .map(|e| e.trim().to_string());
    if let Some(e) = &effort {
        if e.is_empty()
            || !e
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            return Err(Error::new(format!(
                "--llm-reasoning-effort {e:?} is not an effort level"
            ))
            .hint("use low, medium or high (or the API's own levels, e.g. minimal, xhigh, max)"));
        }
    }
    let llm_timeout = cfg.value(None, config::LLM_TIMEOUT, config::DEFAULT_LLM_TIMEOUT)?;
    if llm_timeout == 0 {
        return Err(
            Error::new("git config factory.llmTimeout must be at least 1 second")
                .hint("e.g. git config factory.llmTimeout 900"),
        );
    }
    Ok(Settings {
        temperature: cfg.value(asked.llm_temperature, config::TEMPERATURE, 0.0)?,
        temperature_set: asked.llm_temperature.is_some()
            || cfg.string(config::TEMPERATURE).is_some(),
        max_output_tokens,
        reasoning_effort: effort,
        api,
        total_timeout: std::time::Duration::from_secs(llm_timeout),
        memory: None,
        seed: 0,
        output_cap: None,
    })
}

/// `--max-cost`, else `factory.maxCost`: a positive, finite number of dollars. NaN is refused
/// like any other non-budget (it compares false with every sum, so it would stop nothing).
fn dollar_budget(flag: Option<f64>, cfg: &Config) -> Result<Option<f64>> {
    let (usd, named) = match (flag, cfg.string(config::MAX_COST)) {
        (Some(usd), _) => (usd, "--max-cost".to_string()),
        (None, Some(text)) => (
            text.trim().parse::<f64>().unwrap_or(f64::NAN),
            format!("git config {} {text:?}", config::MAX_COST),
        ),
        (None, None) => return Ok(None),
    };
    if usd.is_finite() && usd > 0.0 {
        return Ok(Some(usd));
    }
    let shown = if flag.is_some() {
        format!("{named} {usd}")
    } else {
        named
    };
    Err(Error::new(format!("{shown} is not a dollar budget"))
        .hint("give a positive number of US dollars, e.g. --max-cost 2.50 (git config factory.maxCost 2.50)"))
}
