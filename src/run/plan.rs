//! Plan (SPEC §4.3, §5): the run's options resolved once into a plain [`Plan`] — the
//! preflight refusals, the provider opened, protected paths and the contract, the identity
//! and the cache lookup. Every later stage reads the plan, never the options.

use crate::clock::{unix_ms, utc_now};
use crate::config::Config;
use crate::delivery::Delivery;
use crate::error::Result;
use crate::git;
use crate::identity;
use crate::roles::po::{baseline, grade, verify};
use crate::roles::se::prompt::{self, ContextFile};
use crate::roles::se::provider::client::Settings;
use crate::roles::se::provider::{Provider, ProviderSpec};
use crate::roles::tr::protect::Protected;
use crate::run::candidates::{NoProposal, Race};
use crate::run::options::RunOptions;
use crate::run::preflight::{self, Claim};
use crate::store::{
    self,
    records::{Contract, RunConfig, RunSummary, Verdict},
};
use crate::workorder::LoadedWorkOrder;
use git2::{Oid, Repository};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything a run does, decided before anything changes.
pub struct Plan {
    /// The run's identity (SPEC §4.3) and the config it hashes.
    pub run_id: String,
    pub config: RunConfig,
    pub baseline: Oid,
    pub tree_before: Oid,
    /// The run's earlier record (an unfinished or `--force`d one), kept as a parent.
    pub previous_commit: Option<Oid>,
    pub user_root: PathBuf,
    pub factory_dir: PathBuf,
    /// In a worktree of its own (`--worktree`), or in the user's tree.
    pub worktree: bool,
    pub out: Option<PathBuf>,
    pub wo: LoadedWorkOrder,
    pub context: Vec<ContextFile>,
    /// Paths no proposal may touch (SPEC §3.5), and the contract the record keeps.
    pub protected: Protected,
    pub contract: Option<Contract>,
    /// `factory.verify` as configured (the commands are read in the run's tree), and the
    /// environment variables no check sees.
    pub configured_verify: Vec<String>,
    pub env_remove: Vec<String>,
    /// SE: the model settings every provider of the run opens with; agents are audited.
    pub settings: Settings,
    pub audited: bool,
    pub race: Option<Race>,
    pub max_attempts: u32,
    pub timeout: Duration,
    pub agent_timeout: Duration,
    pub strict_apply: bool,
    pub sandbox: bool,
    pub baseline_check: bool,
    pub delivery: Delivery,
    pub max_tokens: Option<u64>,
    /// `--max-cost`, the prices every attempt is costed at, and how the run's SE is priced
    /// (a race's candidates: each its own).
    pub max_cost: Option<f64>,
    pub prices: crate::cost::PriceBook,
    pub priced: crate::cost::Priced,
    /// `--attest` (SPEC §6.1): the key a PASS's evidence is signed with, checked up front.
    pub signer: Option<crate::evidence::Signer>,
}

/// What resolving a run's options came to.
pub enum Resolved {
    /// A run to make: its plan, its opened provider, and the user's tree claimed (in-situ).
    Run(Box<Planned>),
    /// A finished run with this identity is recorded already.
    Cached(Box<RunSummary>),
    /// `--dry-run`: the first prompt.
    DryRun(String),
}

pub struct Planned {
    pub plan: Plan,
    pub provider: Box<dyn Provider>,
    pub claim: Claim,
}

/// The provider of the run, the model identity it hashes, and the settings it opened with.
struct Opened {
    provider: Box<dyn Provider>,
    identity: String,
    settings: Settings,
    race: Option<Race>,
}

/// Resolves `opts` in the order of SPEC §5's preflight: the refusals first, then the
/// provider, the identity and the cache, then the context the first prompt shows.
pub fn resolve(repo: &Repository, opts: RunOptions) -> Result<Resolved> {
    let user_root = git::workdir(repo)?;
    let baseline = match &opts.pinned_baseline {
        Some(_) if !opts.worktree => {
            return Err(crate::error::Error::new(format!(
            "{} is set, but only a batch's runs in worktrees start from a commit other than HEAD",
            crate::env::BATCH_BASELINE
        ))
            .hint(format!("unset {}", crate::env::BATCH_BASELINE)))
        }
        Some(id) => git::pinned_commit(repo, id)?,
        None => git::head_commit(repo)?,
    };
    crate::trace::mark("opened repo");
    let factory_dir = git::factory_dir(repo);
    let claim = Claim::take(repo, &factory_dir, opts.worktree, opts.dry_run)?;
    preflight::check_options(repo, &opts, &user_root)?;
    // A wanted but key-less --attest is refused before any model call or check (SPEC §6.1).
    let signer = crate::evidence::signer_for_run(repo, opts.attest)?;
    let cfg = Config::of(repo);
    // Protected paths (SPEC §3.5): an order that allows one is refused like any invalid order.
    let protect = cfg.multi(crate::config::PROTECT);
    let protected = Protected::for_run(repo, &baseline.tree()?, &protect, &opts.work_order.order);
    protected.check_allowed(&opts.work_order.order.allowed_files)?;
    preflight::run_programs(&opts, &cfg, &baseline, &user_root)?;
    // Prices (SPEC §3.3 Cost): a dollar budget needs a price for every model of the run.
    let prices = crate::cost::PriceBook::load(&cfg, &user_root)?;
    if opts.max_cost.is_some() {
        check_priced(&opts, &prices)?;
    }
    let opened = open_provider(&opts, &factory_dir, &user_root)?;
    crate::trace::mark("provider opened");

    // Identity (SPEC §4.3). In-situ the tree is clean, so the work tree's tree id is HEAD's;
    // in worktree mode the run starts from HEAD's tree by definition.
    let tree_before = baseline.tree_id();
    let judges = Judges::of(repo, &cfg, &opts, &baseline)?;
    let config = run_config(&opts, &opened, &judges);
    let run_id = identity::run_id(
        &opts.work_order.hash,
        &tree_before.to_string(),
        &config.config_hash,
    );
    let previous = store::find_run(repo, &run_id)?;
    crate::trace::mark("identity and cache lookup");
    if let Some(prev) = &previous {
        if prev.summary.verdict.is_final() && !opts.force {
            return Ok(Resolved::Cached(Box::new(prev.summary.clone())));
        }
    }
    let previous_commit = previous.as_ref().map(|p| p.commit).or_else(|| {
        // A record that cannot be read is still kept as a parent.
        repo.refname_to_id(&store::run_ref(&run_id)).ok()
    });
    if opts.worktree && opts.branch.is_none() {
        crate::delivery::check_branch(repo, &crate::store::run_branch(&run_id), opts.force)?;
    }
    // Every run may take pooled worktrees (its own, candidates', an agent's scratch): a
    // pool size that does not parse is a refusal before anything is written.
    crate::git::pool::pool_size(repo)?;
    let context = read_context(repo, &opts, &baseline, &user_root)?;
    if opts.dry_run {
        return Ok(Resolved::DryRun(first_prompt(
            repo,
            &opts,
            tree_before,
            &context,
        )));
    }
    let plan = Plan {
        contract: (opts.work_order.order.has_contract() || !protect.is_empty()).then(|| Contract {
            fail_to_pass: opts.work_order.order.fail_to_pass.clone(),
            pass_to_pass: opts.work_order.order.pass_to_pass.clone(),
            protected: protected.listing(),
        }),
        delivery: delivery(&opts, &run_id),
        configured_verify: cfg.multi(crate::config::VERIFY),
        env_remove: verify::scrub_list(&cfg),
        audited: opts.provider.is_agent(),
        settings: opened.settings,
        race: opened.race,
        run_id,
        config,
        baseline: baseline.id(),
        tree_before,
        previous_commit,
        user_root,
        factory_dir,
        context,
        protected,
        worktree: opts.worktree,
        out: opts.out,
        max_attempts: opts.max_attempts,
        timeout: Duration::from_secs(opts.timeout_seconds),
        agent_timeout: Duration::from_secs(opts.agent_timeout_seconds),
        strict_apply: opts.strict_apply,
        sandbox: opts.sandbox,
        baseline_check: opts.baseline_check,
        max_tokens: opts.max_tokens,
        max_cost: opts.max_cost,
        prices,
        priced: opts.provider.priced(),
        signer,
        wo: opts.work_order,
    };
    let provider = opened.provider;
    Ok(Resolved::Run(Box::new(Planned {
        plan,
        provider,
        claim,
    })))
}

/// `--max-cost` is refused up front when a model or agent of the run has no price: a server's
/// own report of a request's cost comes only after the request.
fn check_priced(opts: &RunOptions, prices: &crate::cost::PriceBook) -> Result<()> {
    for spec in std::iter::once(&opts.provider).chain(&opts.more_models) {
        let priced = spec.priced();
        if prices.has_price(&priced) {
            continue;
        }
        let err = match priced {
            crate::cost::Priced::Model { name, .. } => crate::error::Error::new(format!(
                "--max-cost: the model {name} has no price (it is not in the genai-prices table)"
            ))
            .hint(format!(
                "set its price in USD per million tokens: git config {} 0.5 && git config {} 1.5 (or name a price file with factory.priceFile)",
                crate::cost::shell_word(&format!("{}.{name}.input", crate::cost::PRICE_SECTION)),
                crate::cost::shell_word(&format!("{}.{name}.output", crate::cost::PRICE_SECTION)),
            )),
            _ => crate::error::Error::new(format!(
                "--max-cost: {} has no price before it runs (an agent's cost is known only from what it reports)",
                spec.identity()
            ))
            .hint("drop --max-cost (and factory.maxCost) for agent runs, or use --llm-model with a priced model"),
        };
        return Err(err);
    }
    Ok(())
}

/// Opens the run's provider, and with `--candidates` every candidate's once up front: a
/// missing key or replay file is refused before anything changes.
fn open_provider(opts: &RunOptions, factory_dir: &Path, user_root: &Path) -> Result<Opened> {
    let agent_timeout = Duration::from_secs(opts.agent_timeout_seconds);
    let mut settings = opts.model.clone();
    settings.memory = Some(factory_dir.join("providers.json"));
    // Under a dollar budget every request is sent with the output limit its worst case
    // assumes (SPEC §3.3 Cost).
    if opts.max_cost.is_some() {
        settings.output_cap = Some(crate::roles::se::provider::api::DEFAULT_OUTPUT_LIMIT);
    }
    let race = Race::of(opts)?;
    let (provider, mut identity) = opts
        .provider
        .open(user_root, &settings, !opts.dry_run, agent_timeout)
        .or_else(|e| match &race {
            // A replay folder of per-candidate folders holds no proposal of its own.
            Some(_) if matches!(opts.provider, ProviderSpec::Replay { .. }) => {
                Ok((Box::new(NoProposal) as Box<dyn Provider>, String::new()))
            }
            _ => Err(e),
        })?;
    if let Some(race) = &race {
        identity = race.identity(user_root, &settings, !opts.dry_run, agent_timeout)?;
    }
    Ok(Opened {
        provider,
        identity,
        settings,
        race,
    })
}

/// What judges a run, as its identity names it (SPEC §4.3): each part only when present.
struct Judges {
    /// The hash of the global verification commands, when git config `factory.verify` gives
    /// them (no `scripts/verify.sh` in the baseline).
    verify: Option<String>,
    /// The backend `--sandbox` confines with.
    sandbox: Option<&'static str>,
    /// git config `factory.flaky=fail`.
    flaky_fail: bool,
}

impl Judges {
    fn of(
        repo: &Repository,
        cfg: &Config,
        opts: &RunOptions,
        baseline: &git2::Commit<'_>,
    ) -> Result<Judges> {
        let configured = cfg.multi(crate::config::VERIFY);
        let script = baseline
            .tree()?
            .get_path(Path::new("scripts/verify.sh"))
            .is_ok_and(|e| e.kind() == Some(git2::ObjectType::Blob) && e.filemode() != 0o120000);
        let sandbox = if opts.sandbox {
            Some(crate::sandbox::require(repo)?.name())
        } else {
            None
        };
        Ok(Judges {
            verify: (!script && !configured.is_empty())
                .then(|| identity::verify_list_hash(&configured)),
            sandbox,
            flaky_fail: cfg
                .string(crate::config::FLAKY)
                .is_some_and(|v| v.trim() == "fail"),
        })
    }
}

/// The config the identity hashes (SPEC §4.3), as the record keeps it.
fn run_config(opts: &RunOptions, opened: &Opened, judges: &Judges) -> RunConfig {
    let apply_mode = if opts.strict_apply {
        "strict"
    } else {
        "ladder"
    };
    let config_hash = identity::config_hash_with(
        &opened.identity,
        opts.temperature,
        opts.max_attempts,
        opts.timeout_seconds,
        apply_mode,
        &identity::ConfigExtras {
            reasoning_effort: opts.model.reasoning_effort.as_deref(),
            max_output_tokens: opts.model.max_output_tokens,
            candidates: opened.race.as_ref().map(|r| r.candidates),
            verify: judges.verify.clone(),
            sandbox: judges.sandbox,
            flaky_fail: judges.flaky_fail,
        },
    );
    RunConfig {
        model: opened.identity.clone(),
        temperature: opts.temperature,
        max_attempts: opts.max_attempts,
        timeout_seconds: opts.timeout_seconds,
        prompt_version: identity::PROMPT_VERSION.to_string(),
        apply: apply_mode.to_string(),
        config_hash,
        reasoning_effort: opts.model.reasoning_effort.clone(),
        max_output_tokens: opts.model.max_output_tokens,
    }
}

/// The work order's context files, checked and read: in worktree mode from HEAD's tree,
/// in-situ from the work tree.
fn read_context(
    repo: &Repository,
    opts: &RunOptions,
    baseline: &git2::Commit<'_>,
    user_root: &Path,
) -> Result<Vec<ContextFile>> {
    let head_tree = baseline.tree()?;
    crate::workorder::check_context_files(
        &opts.work_order.order,
        repo,
        user_root,
        opts.worktree.then_some(&head_tree),
    )?;
    Ok(prompt::read_context(&opts.work_order.order, |path| {
        if opts.worktree {
            let entry = head_tree.get_path(Path::new(path)).ok()?;
            Some(repo.find_blob(entry.id()).ok()?.content().to_vec())
        } else {
            std::fs::read(user_root.join(path)).ok()
        }
    }))
}

/// `--dry-run`'s answer: the first prompt, with the baseline's red commands the cache knows.
fn first_prompt(
    repo: &Repository,
    opts: &RunOptions,
    tree_before: Oid,
    context: &[ContextFile],
) -> String {
    let (red, tests) = if opts.baseline_check {
        (
            baseline::cached_red(repo, tree_before, &opts.work_order.fail_to_pass_argv()),
            cached_named_tests(repo, opts, tree_before),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let order = &opts.work_order.order;
    let named = grade::Named {
        fail_to_pass: &order.fail_to_pass_tests,
        pass_to_pass: &order.pass_to_pass_tests,
    };
    prompt::build(
        &opts.work_order.order,
        context,
        &opts.work_order.order.acceptance_commands,
        None,
        &prompt::Red {
            commands: red.iter().collect(),
            tests: grade::red_on_baseline(&tests, &named),
        },
    )
}

/// The per-test reports the cache holds for this baseline of a named-tests order (SPEC
/// §3.9), with the commands a run would check it with; none when it holds none.
fn cached_named_tests(
    repo: &Repository,
    opts: &RunOptions,
    tree_before: Oid,
) -> Vec<crate::store::records::CommandTests> {
    let cfg = Config::of(repo);
    let Ok(tree) = repo.find_tree(tree_before) else {
        return Vec::new();
    };
    let Ok(verify) = verify::commands_for_tree(&tree, &cfg.multi(crate::config::VERIFY)) else {
        return Vec::new();
    };
    let wo = &opts.work_order;
    let (pass_to_pass, fail_to_pass) = (wo.pass_to_pass_argv(), wo.fail_to_pass_argv());
    let acceptance = wo.acceptance_argv();
    let contract = baseline::Contract {
        repo,
        tree: tree_before,
        verify: &verify,
        pass_to_pass: &pass_to_pass,
        fail_to_pass: &fail_to_pass,
        acceptance: &acceptance,
        named: grade::Named {
            fail_to_pass: &wo.order.fail_to_pass_tests,
            pass_to_pass: &wo.order.pass_to_pass_tests,
        },
    };
    baseline::cached_named_tests(&contract, &cfg.multi(crate::config::TEST_REPORT))
}

/// Where a PASS goes (SPEC §5): a worktree run's onto a branch, an in-situ run's into the
/// user's tree, committed when asked.
fn delivery(opts: &RunOptions, run_id: &str) -> Delivery {
    match (&opts.branch, opts.worktree, opts.commit) {
        (Some(name), true, _) => Delivery::Branch(name.clone()),
        (None, true, _) => Delivery::Branch(crate::store::run_branch(run_id)),
        (Some(name), false, _) => Delivery::NewBranchCheckedOut(name.clone()),
        (None, false, true) => Delivery::CurrentBranch,
        (None, false, false) => Delivery::Uncommitted,
    }
}

impl Plan {
    /// The run's record as it opens: verdict RUNNING, no attempt yet.
    pub fn opening_summary(&self) -> RunSummary {
        RunSummary {
            run_id: self.run_id.clone(),
            repo_path: self.user_root.display().to_string(),
            work_order_path: self.wo.source.clone(),
            work_order_hash: self.wo.hash.clone(),
            repo_baseline_commit: self.baseline.to_string(),
            repo_tree_hash_before: self.tree_before.to_string(),
            repo_tree_hash_after: String::new(),
            max_attempts: self.max_attempts,
            attempts: Vec::new(),
            verdict: Verdict::Running,
            ended_stage: String::new(),
            started_utc: utc_now(),
            ended_utc: String::new(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            mode: if self.worktree { "worktree" } else { "in_situ" }.to_string(),
            config: self.config.clone(),
            result_commit: None,
            duration_seconds: 0.0,
            work_order_id: self.wo.order.id.clone(),
            work_order_title: self.wo.order.title.clone(),
            side_effects: Vec::new(),
            error: None,
            candidates: Vec::new(),
            winner: None,
            delivered: None,
            contract: self.contract.clone(),
            baseline_check: None,
            started_unix_ms: Some(unix_ms()),
            cost: None,
        }
    }
}
