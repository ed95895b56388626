//! One run of the loop in the user's work tree (in-situ mode, SPEC §5): preflight, identity,
//! the SE/TR/PO nodes the graph drives, rollback, and the run's record.

pub mod preflight;
pub mod race;

use crate::clock::{unix_ms, utc_now};
use crate::config::Config;
use crate::delivery::Delivery;
use crate::error::{Error, Exit, Result};
use crate::git::{self, lock::RepoLock, restore::Purpose};
use crate::graph::{self, Ending, Nodes, Outcome};
use crate::identity;
use crate::journal::Journal;
use crate::roles::po::baseline;
use crate::roles::po::exec::{excerpt, tail_chars, Sandbox};
use crate::roles::po::pycache::{self, PyCache};
use crate::roles::po::verify::{self, PoRun};
use crate::roles::se::audit::Audit;
use crate::roles::se::prompt::{self, ContextFile};
use crate::roles::se::proposal::{self, Change, Proposal};
use crate::roles::se::provider::client::Stop;
use crate::roles::se::provider::{Provider, ProviderError, ProviderSpec, Request, Response};
use crate::roles::tr::{self, apply, diff::Strip, protect::Protected, Plan, Rules};
use crate::store::records::{
    AttemptRecord, BaselineCheck, BaselineResult, CmdResult, Contract, FailureBrief, RunConfig,
    RunSummary, Stage, Verdict,
};
use crate::store::{self, RunWriter};
use crate::ui::{self, Ui};
use crate::workorder::LoadedWorkOrder;
use git2::{Commit, Repository};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BRIEF_CHARS: usize = 2000;

/// Everything `git factory run` was asked to do.
pub struct RunOptions {
    pub repo_dir: Option<PathBuf>,
    pub work_order: LoadedWorkOrder,
    pub out: Option<PathBuf>,
    pub provider: ProviderSpec,
    /// What the user asked of a model API (`--llm-*`).
    pub model: crate::roles::se::provider::client::Settings,
    pub temperature: f64,
    pub max_attempts: u32,
    pub timeout_seconds: u64,
    pub agent_timeout_seconds: u64,
    pub strict_apply: bool,
    pub force: bool,
    pub dry_run: bool,
    pub sandbox: bool,
    pub worktree: bool,
    pub commit: bool,
    pub branch: Option<String>,
    /// Run the contract on the baseline before any model call (SPEC §3.8).
    pub baseline_check: bool,
    /// Best of N (SPEC §5.1): how many candidates, how many at once, and the further
    /// `--llm-model`s beyond `provider` (candidate i uses model (i−1) mod their count).
    pub candidates: u32,
    pub jobs: Option<u32>,
    pub more_models: Vec<ProviderSpec>,
    /// `--max-tokens`: the budget over all attempts and candidates.
    pub max_tokens: Option<u64>,
}

/// How a run command ended, for the CLI to report.
pub enum RunReport {
    Finished {
        summary: Box<RunSummary>,
        out: Option<PathBuf>,
    },
    Cached {
        summary: Box<RunSummary>,
    },
    DryRun {
        prompt: String,
    },
}

pub fn exit_for(verdict: Verdict) -> Exit {
    match verdict {
        Verdict::Pass => Exit::Success,
        Verdict::Fail => Exit::Fail,
        Verdict::Interrupted => Exit::Interrupted,
        Verdict::Error | Verdict::Running => Exit::Refused,
    }
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::new(format!("cannot serialise {}: {e}", path.display())))?;
    text.push('\n');
    std::fs::write(path, text)
        .map_err(|e| Error::new(format!("cannot write {}: {e}", path.display())))
}

/// Refuses an `--out` folder inside the work tree (artifacts would dirty the tree).
fn check_out_dir(out: &Path, root: &Path) -> Result<()> {
    let absolute = if out.is_absolute() {
        out.to_path_buf()
    } else {
        std::env::current_dir()?.join(out)
    };
    let mut probe = absolute.clone();
    let mut tail = Vec::new();
    while !probe.exists() {
        match (probe.file_name().map(|n| n.to_os_string()), probe.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name);
                probe = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut resolved = probe.canonicalize().unwrap_or(probe);
    for name in tail.into_iter().rev() {
        resolved.push(name);
    }
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    if resolved.starts_with(&root) {
        return Err(
            Error::new(format!("--out {} is inside the work tree", out.display()))
                .hint("choose a folder outside the repository, e.g. --out ../factory-out"),
        );
    }
    Ok(())
}

pub fn run(opts: RunOptions, ui: &Ui) -> Result<RunReport> {
    let repo = git::open(opts.repo_dir.as_deref())?;
    let user_root = git::workdir(&repo)?;
    let baseline = git::head_commit(&repo)?;
    crate::trace::mark("opened repo");
    let factory_dir = git::factory_dir(&repo);
    // In-situ: another run in progress is named before anything else (its applied change would
    // otherwise show up as a dirty tree). Worktree runs take no lock and ignore the user's tree.
    let mut lock = if opts.dry_run || opts.worktree {
        None
    } else {
        Some(RepoLock::acquire(&factory_dir)?)
    };
    if lock.is_some() {
        if let Some(j) = Journal::read(&factory_dir)? {
            return Err(crate::journal::interrupted_error(&j));
        }
    } else if !opts.dry_run {
        crate::journal::refuse_if_pending(&repo, crate::journal::Beside::Allow)?;
    }
    // The preflight walk is kept: the rollback check lists again only folders changed since.
    let preflight = if opts.worktree {
        None
    } else {
        git::ensure_no_operation(&repo)?;
        let snapshot = git::status::Snapshot::take(&repo)?;
        snapshot.ensure_clean()?;
        crate::trace::mark("preflight status walk");
        Some(snapshot)
    };
    if opts.sandbox {
        Sandbox::require()?;
    }
    if let Some(out) = &opts.out {
        check_out_dir(out, &user_root)?;
    }
    if opts.max_attempts == 0 {
        return Err(Error::new("--max-attempts must be at least 1").hint("e.g. --max-attempts 2"));
    }
    if let Some(name) = &opts.branch {
        crate::delivery::check_requested_branch(&repo, name, opts.force)?;
    }
    let cfg = Config::of(&repo);
    // Protected paths (SPEC §3.5): an order that allows one is refused like any invalid order.
    let protected = Protected::for_run(
        &repo,
        &baseline.tree()?,
        &cfg.multi(crate::config::PROTECT),
        &opts.work_order.order,
    );
    protected.check_allowed(&opts.work_order.order.allowed_files)?;
    preflight::run_programs(&opts, &cfg, &baseline, &user_root)?;
    let agent_timeout = Duration::from_secs(opts.agent_timeout_seconds);
    let mut model_settings = opts.model.clone();
    model_settings.memory = Some(factory_dir.join("providers.json"));
    let race = race::Plan::of(&opts)?;
    let (provider, mut model_identity) = opts
        .provider
        .open(&user_root, &model_settings, !opts.dry_run, agent_timeout)
        .or_else(|e| match &race {
            // A replay folder of per-candidate folders holds no proposal of its own.
            Some(_) if matches!(opts.provider, ProviderSpec::Replay { .. }) => Ok((
                Box::new(race::NoProposal) as Box<dyn Provider>,
                String::new(),
            )),
            _ => Err(e),
        })?;
    if let Some(race) = &race {
        // Every candidate's provider is opened once up front: a missing key or replay file
        // is refused before anything changes.
        model_identity =
            race.identity(&user_root, &model_settings, !opts.dry_run, agent_timeout)?;
    }
    crate::trace::mark("provider opened");

    // Identity (SPEC §4.3). In-situ the tree is clean, so the work tree's tree id is HEAD's;
    // in worktree mode the run starts from HEAD's tree by definition.
    let tree_before = baseline.tree_id();
    let apply_mode = if opts.strict_apply {
        "strict"
    } else {
        "ladder"
    };
    let config_hash = identity::config_hash_with(
        &model_identity,
        opts.temperature,
        opts.max_attempts,
        opts.timeout_seconds,
        apply_mode,
        &identity::ConfigExtras {
            reasoning_effort: opts.model.reasoning_effort.as_deref(),
            max_output_tokens: opts.model.max_output_tokens,
            candidates: race.as_ref().map(|r| r.candidates),
        },
    );
    let run_id = identity::run_id(
        &opts.work_order.hash,
        &tree_before.to_string(),
        &config_hash,
    );

    let previous = store::find_run(&repo, &run_id)?;
    crate::trace::mark("identity and cache lookup");
    if let Some(prev) = &previous {
        if prev.summary.verdict.is_final() && !opts.force {
            return Ok(RunReport::Cached {
                summary: Box::new(prev.summary.clone()),
            });
        }
    }
    let previous_commit = previous.as_ref().map(|p| p.commit).or_else(|| {
        // A record that cannot be read is still kept as a parent.
        repo.refname_to_id(&store::run_ref(&run_id)).ok()
    });
    if opts.worktree && opts.branch.is_none() {
        crate::delivery::check_branch(&repo, &format!("factory/{run_id}"), opts.force)?;
    }

    let head_tree = baseline.tree()?;
    // In worktree mode the context comes from HEAD's tree, in-situ from the work tree.
    crate::workorder::check_context_files(
        &opts.work_order.order,
        &repo,
        &user_root,
        opts.worktree.then_some(&head_tree),
    )?;
    let context = prompt::read_context(&opts.work_order.order, |path| {
        if opts.worktree {
            let entry = head_tree.get_path(Path::new(path)).ok()?;
            Some(repo.find_blob(entry.id()).ok()?.content().to_vec())
        } else {
            std::fs::read(user_root.join(path)).ok()
        }
    });
    if opts.dry_run {
        let text = prompt::build(
            &opts.work_order.order,
            &context,
            &opts.work_order.order.acceptance_commands,
            None,
            &if opts.baseline_check {
                baseline::cached_red(&repo, tree_before, &opts.work_order.fail_to_pass_argv())
            } else {
                Vec::new()
            }
            .iter()
            .collect::<Vec<_>>(),
        );
        return Ok(RunReport::DryRun { prompt: text });
    }

    if let Some(lock) = lock.as_mut() {
        lock.describe(&run_id)?;
    }
    // Two runs of the same run_id (two --worktree runs of one order) would share the staging
    // folder and the worktree: the second refuses, naming the first.
    let _run_lock = RepoLock::acquire_run(&factory_dir, &run_id)?;
    let run_dir = factory_dir.join("runs").join(&run_id);
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)?;
    }
    std::fs::create_dir_all(&run_dir)?;

    // Where the run happens: the user's tree, or a fresh worktree at HEAD (always removed).
    let worktree = if opts.worktree {
        Some(git::worktree::TempWorktree::add(
            &repo,
            &format!("run-{run_id}"),
            &baseline.id().to_string(),
        )?)
    } else {
        None
    };
    let run_repo_owned = match &worktree {
        Some(wt) => Some(git2::Repository::open(&wt.path)?),
        None => None,
    };
    let run_repo = run_repo_owned.as_ref().unwrap_or(&repo);
    let root = worktree
        .as_ref()
        .map(|w| w.path.clone())
        .unwrap_or_else(|| user_root.clone());
    let verify_cmds =
        verify::global_commands(&root, &cfg.multi(crate::config::VERIFY)).map_err(|e| {
            Error::new(e).hint("fix the value with git config --replace-all factory.verify 'CMD'")
        })?;
    let env_remove = verify::scrub_list(&cfg);
    let delivery = match (&opts.branch, opts.worktree, opts.commit) {
        (Some(name), true, _) => Delivery::Branch(name.clone()),
        (None, true, _) => Delivery::Branch(format!("factory/{run_id}")),
        (Some(name), false, _) => Delivery::NewBranchCheckedOut(name.clone()),
        (None, false, true) => Delivery::CurrentBranch,
        (None, false, false) => Delivery::Uncommitted,
    };

    let summary = RunSummary {
        run_id: run_id.clone(),
        repo_path: user_root.display().to_string(),
        work_order_path: opts.work_order.source.clone(),
        work_order_hash: opts.work_order.hash.clone(),
        repo_baseline_commit: baseline.id().to_string(),
        repo_tree_hash_before: tree_before.to_string(),
        repo_tree_hash_after: String::new(),
        max_attempts: opts.max_attempts,
        attempts: Vec::new(),
        verdict: Verdict::Running,
        ended_stage: String::new(),
        started_utc: utc_now(),
        ended_utc: String::new(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: if opts.worktree { "worktree" } else { "in_situ" }.to_string(),
        config: RunConfig {
            model: model_identity,
            temperature: opts.temperature,
            max_attempts: opts.max_attempts,
            timeout_seconds: opts.timeout_seconds,
            prompt_version: identity::PROMPT_VERSION.to_string(),
            apply: apply_mode.to_string(),
            config_hash,
            reasoning_effort: opts.model.reasoning_effort.clone(),
            max_output_tokens: opts.model.max_output_tokens,
        },
        result_commit: None,
        duration_seconds: 0.0,
        work_order_id: opts.work_order.order.id.clone(),
        work_order_title: opts.work_order.order.title.clone(),
        side_effects: Vec::new(),
        error: None,
        candidates: Vec::new(),
        winner: None,
        contract: (opts.work_order.order.has_contract()
            || !cfg.multi(crate::config::PROTECT).is_empty())
        .then(|| Contract {
            fail_to_pass: opts.work_order.order.fail_to_pass.clone(),
            pass_to_pass: opts.work_order.order.pass_to_pass.clone(),
            protected: protected.listing(),
        }),
        baseline_check: None,
        started_unix_ms: Some(unix_ms()),
    };
    write_json(&run_dir.join("work_order.json"), &opts.work_order.raw)?;
    crate::trace::mark("staging folder");

    // From here on the tree may change: what putting it back needs is recorded first (the
    // run's own worktree gets its HEAD and index back between attempts too, but the refs it
    // shares with the user's ongoing work are not its to put back).
    let restore = git::restore::Restore::capture(
        run_repo,
        crate::journal::saved_dir(&factory_dir, &run_id),
        !opts.worktree,
        preflight.as_ref(),
    )?;
    let journal = Journal {
        run_id: run_id.clone(),
        pid: std::process::id(),
        stage: "preflight".to_string(),
        restore,
    };
    if !opts.worktree {
        // Nothing is changed yet, so the write need not survive a power cut (a killed
        // process leaves it in place); the apply stage, which has pre-images, is fsynced.
        journal.write(&factory_dir, false)?;
    }
    crate::trace::mark("journal + saved index");
    let sandbox = opts.sandbox.then(|| {
        let mut read_only = vec![
            repo.commondir().to_path_buf(),
            run_repo.path().to_path_buf(),
        ];
        read_only.extend(journal.restore.environments());
        Sandbox::for_checks(root.clone(), read_only)
    });

    let started = Instant::now();
    let budget = crate::budget::Budget::new(opts.max_tokens);
    let mut session = Session {
        record: true,
        budget: &budget,
        board: None,
        candidate: None,
        passed_answer: None,
        factory_dir: factory_dir.clone(),
        pycache: PyCache::in_factory_dir(&factory_dir),
        pyview: None,
        journal,
        preflight,
        persist_journal: !opts.worktree,
        unrestored: false,
        sandbox,
        delivery,
        repo: run_repo,
        root: root.clone(),
        ui,
        wo: &opts.work_order,
        baseline: run_repo.find_commit(baseline.id())?,
        provider,
        audited: opts.provider.is_agent(),
        strict_apply: opts.strict_apply,
        run_dir: run_dir.clone(),
        writer: RunWriter::new(&run_id, &run_dir, previous_commit),
        summary,
        verify_cmds,
        acceptance: opts.work_order.acceptance_argv(),
        pass_to_pass: opts.work_order.pass_to_pass_argv(),
        fail_to_pass: opts.work_order.fail_to_pass_argv(),
        protected,
        red: Vec::new(),
        timeout: Duration::from_secs(opts.timeout_seconds),
        env_remove,
        context,
        current: None,
        brief: None,
        seen: Vec::new(),
        passed: None,
        fatal: None,
        refusal: None,
    };
    crate::trace::mark("session ready");
    // The bytecode cache is filled from the baseline's own files first (SPEC §3.7).
    session.warm_pycache(None);
    // The baseline check runs before the first record: a refusal leaves no trace at all.
    let satisfied = if opts.baseline_check {
        match session.baseline_check() {
            Ok(satisfied) => satisfied,
            Err(e) => {
                let journal = session.journal.clone();
                drop(session);
                drop(run_repo_owned);
                if let Some(wt) = worktree {
                    wt.remove()?;
                }
                let _ = std::fs::remove_dir_all(&run_dir);
                discard_journal(&journal, opts.worktree, &factory_dir);
                return Err(e);
            }
        }
    } else {
        false
    };
    crate::trace::mark("baseline check");
    session.save()?;
    crate::trace::mark("first checkpoint");
    crate::crash::point("after_preflight");
    ui.info(format!(
        "{} run {run_id}: {} ({} attempts at most{}{})",
        ui::bold("factory"),
        opts.work_order.order.title,
        opts.max_attempts,
        race.as_ref()
            .map(|r| format!(" for each of {} candidates", r.candidates))
            .unwrap_or_default(),
        if opts.worktree { ", in a worktree" } else { "" }
    ));
    // Best of N: the candidates race in their own worktrees first; the winner's change is
    // then what this run's single attempt applies and verifies where it lands.
    let raced = match (&race, satisfied) {
        (Some(race), false) => session.race(race, &opts, &model_settings, agent_timeout),
        _ => Ok(None),
    };
    let (raced, max_attempts) = match raced {
        Ok(Some(ending)) => (Some(Ok(ending)), opts.max_attempts),
        Ok(None) if race.is_some() && !satisfied => (None, 1),
        Ok(None) => (None, opts.max_attempts),
        Err(e) => (Some(Err(e)), opts.max_attempts),
    };

    let driven = if let Some(raced) = raced {
        raced
    } else if satisfied {
        ui.info(format!(
            "  {} every fail_to_pass command passes on the baseline: nothing to change",
            ui::dim("✓")
        ));
        Ok(Ending {
            verdict: Verdict::Pass,
            stage: Stage::AlreadySatisfied.as_str().to_string(),
            attempts: 0,
        })
    } else {
        graph::drive(&mut session, max_attempts, &crate::interrupt::requested)
    };
    let ending = match driven {
        Ok(ending) => ending,
        Err(e) => {
            // The run could not finish: roll back whatever is in the tree, record ERROR.
            let mut text = e.message.clone();
            if let Err(r) = session.rollback() {
                if r.message != e.message {
                    text = format!("{text}; {}", r.message);
                }
            }
            session.fatal = Some(text);
            Ending {
                verdict: Verdict::Error,
                stage: Stage::Exception.as_str().to_string(),
                attempts: session.summary.attempts.len() as u32,
            }
        }
    };
    crate::trace::mark("loop done");
    if let Some(refusal) = session.refusal.take() {
        // The provider is misconfigured (SPEC §1.1): nothing was applied; the record written
        // so far is taken back, so the refusal leaves refs as they were.
        let _ = session.rollback();
        let journal = session.journal.clone();
        drop(session);
        drop(run_repo_owned);
        if let Some(wt) = worktree {
            wt.remove()?;
        }
        let refname = store::run_ref(&run_id);
        match previous_commit {
            Some(commit) => {
                repo.reference(&refname, commit, true, "factory: refused run")?;
            }
            None => {
                if let Ok(mut r) = repo.find_reference(&refname) {
                    r.delete()?;
                }
            }
        }
        let _ = std::fs::remove_dir_all(&run_dir);
        discard_journal(&journal, opts.worktree, &factory_dir);
        return Err(refusal);
    }
    let finished = session.finish(&ending, started.elapsed());
    crate::trace::mark("finish (record, notes)");
    let journal = session.journal.clone();
    let unrestored = session.unrestored;
    drop(session);
    drop(run_repo_owned);
    if let Some(wt) = worktree {
        wt.remove()?;
    }
    let summary = finished?;
    let out = match &opts.out {
        Some(out) => {
            let dest = out.join(&run_id);
            copy_dir(&run_dir, &dest)
                .map_err(|e| Error::new(format!("cannot write --out {}: {e}", dest.display())))?;
            Some(dest)
        }
        None => None,
    };
    let _ = std::fs::remove_dir_all(&run_dir);
    crate::trace::mark("cleanup");
    if opts.worktree || !unrestored {
        discard_journal(&journal, opts.worktree, &factory_dir);
    }
    // Otherwise paths the last restore could not put back are named in the record and the
    // journal stays, so every command points at recover, which tries again once they are fixed.
    Ok(RunReport::Finished {
        summary: Box::new(summary),
        out,
    })
}

/// A finished (or refused) run's journal: a worktree run has none on disk (the shared one
/// belongs to in-situ runs), only its saved bytes.
fn discard_journal(journal: &Journal, worktree: bool, factory_dir: &Path) {
    if worktree {
        let _ = std::fs::remove_dir_all(&journal.restore.saved);
    } else {
        journal.clear(factory_dir);
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), dest)?;
        }
    }
    Ok(())
}

/// The state of the attempt under way.
struct Attempt {
    record: AttemptRecord,
    dir: PathBuf,
    rel: String,
    proposal: Option<Proposal>,
    plan: Option<Plan>,
    /// The tree this attempt's change made, once applied.
    tree: Option<git2::Oid>,
    applied: bool,
    brief: Option<FailureBrief>,
    started: Instant,
    /// The answer the parser judged, kept so a race's winning proposal can be delivered.
    answer: Option<(Vec<u8>, proposal::OutputFormat)>,
}

struct Session<'a> {
    /// Whether this session owns the run's record (a race's candidates do not: the race
    /// writes one record for all of them).
    record: bool,
    budget: &'a crate::budget::Budget,
    /// A race's candidate: its line on the race's board and its index.
    board: Option<&'a ui::Board>,
    candidate: Option<u32>,
    /// The passing attempt's answer.
    passed_answer: Option<(Vec<u8>, proposal::OutputFormat)>,
    factory_dir: PathBuf,
    /// The repo's bytecode cache (SPEC §3.7): entries of every path the run writes are
    /// forgotten.
    pycache: PyCache,
    /// Sandboxed checks' view of the bytecode cache, kept for the run (SPEC §3.7).
    pyview: Option<pycache::View>,
    /// The journal and the restore it carries; written to disk in-situ only (a worktree
    /// run's tree is removed whatever happens).
    journal: Journal,
    persist_journal: bool,
    /// The last restore left paths it could not put back (named in the record).
    unrestored: bool,
    /// In-situ only: the preflight status walk, which later checks of the tree build on.
    preflight: Option<git::status::Snapshot>,
    sandbox: Option<Sandbox>,
    delivery: Delivery,
    repo: &'a Repository,
    root: PathBuf,
    ui: &'a Ui,
    wo: &'a LoadedWorkOrder,
    baseline: Commit<'a>,
    provider: Box<dyn Provider>,
    /// The proposer is an agent program (it runs with the user's privileges): audited.
    audited: bool,
    strict_apply: bool,
    run_dir: PathBuf,
    writer: RunWriter,
    summary: RunSummary,
    verify_cmds: Vec<Vec<String>>,
    acceptance: Vec<Vec<String>>,
    pass_to_pass: Vec<Vec<String>>,
    fail_to_pass: Vec<Vec<String>>,
    /// Paths no proposal may touch (SPEC §3.5).
    protected: Protected,
    /// The baseline's red `fail_to_pass` results, for the first prompt.
    red: Vec<BaselineResult>,
    timeout: Duration,
    env_remove: Vec<String>,
    context: Vec<ContextFile>,
    current: Option<Attempt>,
    /// The previous attempt's brief, fed to the next prompt.
    brief: Option<FailureBrief>,
    /// Fingerprints of changes already tried, with the attempt that tried them.
    seen: Vec<(String, u32)>,
    /// The passing attempt's change and the tree it made (baseline + change).
    passed: Option<(Plan, git2::Oid)>,
    fatal: Option<String>,
    /// A misconfiguration found by the first model request: the run is refused, unrecorded.
    refusal: Option<Error>,
}

#[derive(Serialize)]
struct ApplyResult<'a> {
    ok: bool,
    method: Option<&'a str>,
    touched_files: &'a [String],
    files: Vec<FileAction<'a>>,
    error: Option<&'a str>,
}

#[derive(Serialize)]
struct FileAction<'a> {
    path: &'a str,
    action: &'a str,
}

impl Session<'_> {
    fn reminder(&self) -> String {
        let mut s = format!(
            "change only {}; reply with the JSON contract only",
            self.wo.order.allowed_files.join(", ")
        );
        if !self.wo.order.forbidden.is_empty() {
            s.push_str(&format!(
                "; forbidden: {}",
                self.wo.order.forbidden.join("; ")
            ));
        }
        s
    }

    fn brief(&self, stage: Stage, command: Option<&CmdResult>, text: &str) -> FailureBrief {
        FailureBrief {
            stage,
            command: command.map(CmdResult::display),
            exit_code: command.and_then(|c| c.exit_code),
            primary_error_excerpt: bound_excerpt(text.trim_end()),
            constraints_reminder: self.reminder(),
        }
    }

    fn current(&mut self) -> &mut Attempt {
        self.current
            .as_mut()
            .expect("a node runs only inside an attempt")
    }

    fn fail(&mut self, stage: Stage, command: Option<&CmdResult>, text: &str) -> Outcome {
        let brief = self.brief(stage, command, text);
        // Why, in one line: the failing command and how it ended, or the refusal's first line.
        let why = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        self.ui.info(format!(
            "  {} {}: {}",
            ui::dim("✗"),
            stage.as_str(),
            ui::clip(why.trim(), 160)
        ));
        self.current().brief = Some(brief);
        Outcome::Failed(stage)
    }

    /// Writes the summary and moves the run ref forward.
    fn save(&mut self) -> Result<()> {
        write_json(&self.run_dir.join("run_summary.json"), &self.summary)?;
        if self.record {
            let message = store::run_message(&self.summary);
            self.writer.checkpoint(self.repo, &message)?;
        }
        Ok(())
    }

    fn checkpoint(&mut self) -> Outcome {
        match self.save() {
            Ok(()) => Outcome::Ok,
            Err(e) => {
                self.fatal = Some(e.message.clone());
                Outcome::Fatal(Stage::Exception)
            }
        }
    }

    /// Runs `f`, then checkpoints; a failed checkpoint ends the run.
    fn staged(&mut self, f: impl FnOnce(&mut Self) -> Outcome) -> Outcome {
        let outcome = f(self);
        crate::trace::mark("  node");
        let saved = self.checkpoint();
        crate::trace::mark("  checkpoint");
        match saved {
            Outcome::Ok => outcome,
            fatal => fatal,
        }
    }

    /// The bytecode cache as the next checks see it, with the entries of `changed` forgotten
    /// first: the shared cache itself, or under `--sandbox` a per-attempt view of it (dropped
    /// with the attempt) whose shared entries are read-only.
    fn check_cache(&mut self, changed: &[&str]) -> std::io::Result<PathBuf> {
        self.pycache
            .forget(&self.root, changed.iter().map(|p| p.as_bytes()));
        let _ = self.pycache.create();
        if self.sandbox.is_none() {
            return Ok(self.pycache.dir().to_path_buf());
        }
        let scratch = self.factory_dir.join("tmp");
        match &mut self.pyview {
            Some(view) => self.pycache.refresh(view, &scratch, &self.root)?,
            None => self.pyview = Some(self.pycache.view(&scratch, &self.root)?),
        }
        Ok(self
            .pyview
            .as_ref()
            .map_or(self.pycache.dir(), pycache::View::path)
            .to_path_buf())
    }

    /// Unsandboxed checks wrote the shared bytecode cache: what they compiled of the work tree
    /// goes (SPEC §3.7). Sandboxed checks wrote only their view, refreshed before the next.
    fn drop_checks_bytecode(&self, mark: Option<(i64, i64)>) {
        if let Some(mark) = mark {
            self.pycache.drop_compiled_since(&self.root, mark);
        }
    }

    /// See [`PyCache::mark`]; `None` under `--sandbox` (nothing to drop).
    fn bytecode_mark(&self) -> Option<(i64, i64)> {
        self.sandbox
            .is_none()
            .then(|| self.pycache.mark())
            .flatten()
    }

    /// Fills the bytecode cache from the baseline's own files before any change is applied
    /// (`after: None`; SPEC §3.7), and under `--sandbox`, whose checks cannot write it, after
    /// an attempt's checks compiles the interpreter's modules they needed but the cache
    /// lacked (`after: Some(view)`).
    fn warm_pycache(&self, after: Option<&pycache::View>) {
        let scratch = self.factory_dir.join("tmp");
        let (Ok(tree), Ok(()), Ok(logs)) = (
            self.baseline.tree(),
            std::fs::create_dir_all(&scratch),
            tempfile::Builder::new()
                .prefix("pycache-logs-")
                .tempdir_in(&scratch),
        ) else {
            return;
        };
        let interpreter = pycache::interpreter_of(&[
            &self.verify_cmds,
            &self.pass_to_pass,
            &self.fail_to_pass,
            &self.acceptance,
        ]);
        let how = pycache::Compiler {
            root: &self.root,
            interpreter: &interpreter,
            sandbox: self.sandbox.as_ref(),
            env_remove: &self.env_remove,
            timeout: self.timeout,
            log_dir: logs.path(),
        };
        let Some(view) = after else {
            let list = PyCache::prefill_list(&tree, &self.root);
            if list.is_empty() {
                return;
            }
            let progress = self
                .ui
                .progress("  PO filling the bytecode cache".to_string());
            let filled = (self.pycache).prefill(list, &how);
            progress.finish(self.ui, None);
            if filled.is_some_and(|r| r.spawn_error.is_none() && !r.succeeded()) {
                self.ui.detail(
                    "    compileall reported errors in the baseline; the cache is partly cold",
                );
            }
            return;
        };
        let _ = (self.pycache).learn(view, &how);
    }

    /// Records the stage in the journal (in-situ), with the pre-images before an apply.
    fn journal_stage(
        &mut self,
        stage: &str,
        outcomes: Option<&[apply::FileOutcome]>,
    ) -> Result<()> {
        if self.persist_journal {
            self.journal
                .stage(&self.factory_dir, self.repo, stage, outcomes)
        } else {
            self.journal.stage = stage.to_string();
            match outcomes {
                Some(o) => self.journal.restore.set_images(self.repo, o),
                None => Ok(()),
            }
        }
    }

    /// Puts the repo back at the baseline: refs, index, then the tree (SPEC §7).
    fn rollback(&mut self) -> Result<()> {
        let images = self.journal.restore.images.clone();
        let report = self.put_back("rollback", &images, Purpose::Rollback)?;
        self.warn_git(&report);
        if let Some(a) = self.current.as_mut() {
            a.applied = false;
        }
        self.unrestored = !report.failed.is_empty();
        match report.error("rollback") {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The one restore (SPEC §7) as every session step uses it: the stage journaled first,
    /// what commands left found with the preflight walk, and the bytecode of every path it
    /// wrote forgotten, so no later check runs a version of a file that is gone (SPEC §3.7) —
    /// also after the baseline check, which has no attempt.
    fn put_back(
        &mut self,
        stage: &str,
        images: &[git::restore::Image],
        purpose: Purpose,
    ) -> Result<git::restore::Report> {
        self.journal_stage(stage, None)?;
        let report = self.journal.restore.apply_walked(
            self.repo,
            images,
            purpose,
            self.preflight.as_ref(),
        )?;
        self.pycache.forget(
            &self.root,
            (images.iter().map(|i| i.path.as_bytes()))
                .chain(report.files.iter().map(Vec::as_slice)),
        );
        if let Some(note) = report.bytecode_note() {
            self.ui.info(format!("  {note}"));
        }
        Ok(report)
    }

    fn warn_git(&self, report: &git::restore::Report) {
        if !report.git.is_empty() {
            self.ui.warn(format!(
                "a command changed {}; restored",
                report.git.join(", ")
            ));
        }
        if !report.left.is_empty() {
            self.ui.warn(format!(
                "a command changed {}; left as is (shared with your own work: check them)",
                report.left.join(", ")
            ));
        }
    }

    /// After PASS the tree must hold exactly baseline + change: anything the commands changed
    /// outside it (files, refs, the index, .git/config) is put back and listed.
    fn restore_side_effects(&mut self, plan: &Plan) -> Result<Vec<String>> {
        let images = self
            .journal
            .restore
            .change_images(self.repo, &plan.outcomes)?;
        let report = self.put_back("side_effects", &images, Purpose::SideEffects)?;
        if let Some(e) = report.error("restoring what the checks changed") {
            return Err(e);
        }
        let mut side = report.changed();
        side.sort();
        side.dedup();
        Ok(side)
    }

    /// Records the verdict, delivers a PASS as asked, and writes the final record and notes.
    fn finish(&mut self, ending: &Ending, elapsed: Duration) -> Result<RunSummary> {
        let mut result_commit = None;
        let mut verdict = ending.verdict;
        let mut ended_stage = ending.stage.clone();
        let passed = self.passed.take();
        let tree_after = match (&ending.verdict, &passed) {
            (Verdict::Pass, Some((plan, tree))) => {
                let mut tree = *tree;
                if self.delivery != Delivery::Uncommitted {
                    self.journal_stage("commit", None)?;
                    let summary = self
                        .summary
                        .attempts
                        .last()
                        .and_then(|a| a.summary.clone())
                        .unwrap_or_default();
                    let message =
                        crate::delivery::message(&self.wo.order, &summary, &self.summary.run_id);
                    let delivered = crate::delivery::deliver(
                        self.repo,
                        &self.delivery,
                        &self.baseline,
                        &message,
                        &plan.outcomes,
                    );
                    match delivered {
                        Ok(delivered) => {
                            result_commit = delivered.commit;
                            if let Some(why) = delivered.refused {
                                let left = match self.delivery {
                                    Delivery::Branch(_) => format!(
                                        "bring it into your tree with git factory apply {}",
                                        self.summary.run_id
                                    ),
                                    _ => "it is in the work tree, uncommitted".to_string(),
                                };
                                self.fatal = Some(format!(
                                    "{why}; the change passed but was not committed ({left})"
                                ));
                            }
                        }
                        Err(e) => {
                            // Undone through the same restore as any rollback: the run could
                            // not finish, so the repo goes back to the baseline.
                            self.undo_delivery(&e)?;
                            verdict = Verdict::Error;
                            ended_stage = Stage::Exception.as_str().to_string();
                            tree = self.baseline.tree_id();
                        }
                    }
                }
                tree
            }
            _ => self.baseline.tree_id(),
        };
        let s = &mut self.summary;
        s.verdict = verdict;
        s.ended_stage = ended_stage;
        s.repo_tree_hash_after = tree_after.to_string();
        s.result_commit = result_commit.map(|c| c.to_string());
        s.ended_utc = utc_now();
        s.duration_seconds = elapsed.as_secs_f64();
        s.error = self.fatal.clone();
        self.save()?;
        let line = store::note_line(&self.summary);
        store::append_note(self.repo, self.baseline.id(), &line)?;
        if let Some(c) = result_commit {
            store::append_note(self.repo, c, &line)?;
        }
        Ok(self.summary.clone())
    }

    /// A delivery that failed half-way (a held `index.lock`, a refused ref) is undone: refs,
    /// index and tree back to the baseline, and the error named in the record.
    fn undo_delivery(&mut self, cause: &Error) -> Result<()> {
        self.journal_stage("delivery_undo", None)?;
        let images = self.journal.restore.images.clone();
        let report = self
            .journal
            .restore
            .apply_with(self.repo, &images, Purpose::Delivery)?;
        let mut text = format!(
            "delivering the change failed: {}; the repo is back at the baseline",
            cause.message
        );
        if let Some(e) = report.error("undoing the delivery") {
            text.push_str(&format!("; {}: {}", e.message, e.details.join("; ")));
            self.unrestored = true;
        }
        self.fatal = Some(text);
        Ok(())
    }

    /// Opens an attempt's record and artifact folder.
    fn se_start(&mut self, attempt: u32) -> Result<(PathBuf, String)> {
        let (dir, rel) = self.attempt_files(attempt);
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::new(format!("cannot create {}: {e}", dir.display())))?;
        self.current = Some(Attempt {
            record: AttemptRecord {
                attempt_index: attempt,
                baseline_commit: self.baseline.id().to_string(),
                patch_path: String::new(),
                touched_files: Vec::new(),
                apply_ok: false,
                verify: Vec::new(),
                pass_to_pass: Vec::new(),
                fail_to_pass: Vec::new(),
                acceptance: Vec::new(),
                failure_brief: None,
                apply_method: None,
                usage: None,
                summary: None,
                tree_commit: None,
                repeat_of: None,
                duration_seconds: 0.0,
                dropped_params: Vec::new(),
                api_switch: None,
                reasoning_path: None,
            },
            dir: dir.clone(),
            rel: rel.clone(),
            proposal: None,
            plan: None,
            tree: None,
            applied: false,
            brief: None,
            started: Instant::now(),
            answer: None,
        });
        Ok((dir, rel))
    }

    fn attempt_files(&self, attempt: u32) -> (PathBuf, String) {
        let rel = format!("attempt_{attempt}");
        (self.run_dir.join(&rel), rel)
    }
}

impl Nodes for Session<'_> {
    fn se(&mut self, attempt: u32) -> Outcome {
        let (dir, rel) = match self.se_start(attempt) {
            Ok(paths) => paths,
            Err(e) => {
                self.fatal = Some(e.message);
                return Outcome::Fatal(Stage::Exception);
            }
        };
        self.ui.info(format!(
            "{} {attempt}/{}",
            ui::bold("attempt"),
            self.summary.max_attempts
        ));
        self.show(attempt, "SE");
        self.staged(|s| s.propose(attempt, &dir, &rel))
    }

    fn tr(&mut self, attempt: u32) -> Outcome {
        self.show(attempt, "TR");
        self.staged(|s| s.apply(attempt))
    }

    fn po(&mut self, attempt: u32) -> Outcome {
        self.show(attempt, "PO");
        self.staged(|s| s.verify())
    }

    fn interrupt(&mut self, attempt: u32) -> Outcome {
        if self.current.is_none() {
            let _ = self.se_start(attempt);
        }
        // Stopped because another candidate spent the last of the token budget.
        if self.budget.exhausted() && !crate::interrupt::requested() {
            let _ = self.fail(
                Stage::BudgetExhausted,
                None,
                "the --max-tokens budget ran out",
            );
            return Outcome::Failed(Stage::BudgetExhausted);
        }
        let _ = self.fail(
            Stage::Interrupted,
            None,
            "the run was interrupted (SIGINT/SIGTERM)",
        );
        Outcome::Failed(Stage::Interrupted)
    }

    fn end_attempt(&mut self, _attempt: u32, passed: bool, last: bool) -> Result<()> {
        let Some(mut current) = self.current.take() else {
            return Ok(());
        };
        if passed {
            if let Some(plan) = current.plan.take() {
                // The restore forgot the bytecode of the change's files and of what it put back.
                let side = self.restore_side_effects(&plan)?;
                if !side.is_empty() {
                    self.ui.warn(format!(
                        "restored files the checks changed: {}",
                        side.join(", ")
                    ));
                }
                self.summary.side_effects = side;
                let tree = current.tree.unwrap_or_else(|| self.baseline.tree_id());
                self.passed = Some((plan, tree));
                self.passed_answer = current.answer.take();
            }
        } else {
            self.current = Some(current);
            let rolled = self.rollback();
            current = self.current.take().expect("just put back");
            rolled?;
        }
        if let Some(brief) = &current.brief {
            write_json(&current.dir.join("failure_brief.json"), brief)?;
        }
        current.record.failure_brief = current.brief.clone();
        current.record.duration_seconds = current.started.elapsed().as_secs_f64();
        self.brief = current.brief.clone();
        self.summary.attempts.push(current.record);
        if last {
            // The run's final record is written next, by finish(); one ref update, not two.
            return Ok(());
        }
        self.save()
    }
}

impl Session<'_> {
    /// Where the running command's process group is noted for `recover`; a race's
    /// candidates each have their own (SPEC §7).
    fn pgid_file(&self) -> PathBuf {
        match self.candidate {
            Some(i) => self
                .factory_dir
                .join(format!("command.{}.{i}.pgid", self.summary.run_id)),
            None => self.factory_dir.join("command.pgid"),
        }
    }

    /// Puts a race candidate's stage on its board line.
    fn show(&self, attempt: u32, stage: &str) {
        if let (Some(board), Some(i)) = (self.board, self.candidate) {
            board.set(
                i,
                &format!("attempt {attempt}/{} {stage}", self.summary.max_attempts),
                false,
            );
        }
    }

    /// The baseline check of SPEC §3.8, in the run's tree before any model call: `Ok(true)`
    /// when every `fail_to_pass` command passes already; refusals come back as `Err` with the
    /// tree as it was. What the commands leave behind is removed as after an attempt.
    fn baseline_check(&mut self) -> Result<bool> {
        self.journal_stage("baseline_check", None)?;
        let prefix = self.check_cache(&[])?;
        let log_dir = self.run_dir.join("baseline");
        std::fs::create_dir_all(&log_dir)?;
        let po = PoRun {
            root: &self.root,
            timeout: self.timeout,
            env_remove: &self.env_remove,
            env_set: PyCache::env(&prefix, &self.root),
            log_dir,
            log_rel: "baseline".to_string(),
            sandbox: self.sandbox.clone().map(|mut s| {
                s.scratch.push(prefix.clone());
                s
            }),
            pgid_file: Some(self.pgid_file()),
        };
        let contract = baseline::Contract {
            repo: self.repo,
            tree: self.baseline.tree_id(),
            verify: &self.verify_cmds,
            pass_to_pass: &self.pass_to_pass,
            fail_to_pass: &self.fail_to_pass,
        };
        let ui = self.ui;
        let started = self.bytecode_mark();
        let checked = baseline::check(&contract, &po, |kind, argv| {
            let shown = shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_default();
            ui.progress(format!("  baseline {kind}: {shown}"))
        });
        self.drop_checks_bytecode(started);
        // Logs are kept only for commands that ran (a cached check leaves no folder).
        let _ = std::fs::remove_dir(self.run_dir.join("baseline"));
        if checked.as_ref().map_or(true, |r| r.ran) {
            self.rollback()?;
        }
        let report = checked?;
        let satisfied = report.finding == baseline::Finding::Satisfied;
        self.red = report.red().into_iter().cloned().collect();
        let cached = report.results.iter().filter(|r| r.cached).count();
        self.ui.info(format!(
            "  baseline check: {} red, {} command(s){}",
            self.red.len(),
            report.results.len(),
            if cached > 0 {
                format!(", {cached} from the cache")
            } else {
                String::new()
            }
        ));
        self.summary.baseline_check = Some(BaselineCheck {
            result: if satisfied {
                Stage::AlreadySatisfied.as_str()
            } else {
                "red"
            }
            .to_string(),
            commands: report.results,
        });
        Ok(satisfied)
    }

    fn propose(&mut self, attempt: u32, dir: &Path, rel: &str) -> Outcome {
        let text = prompt::build(
            &self.wo.order,
            &self.context,
            &self.wo.order.acceptance_commands,
            self.brief.as_ref(),
            &if attempt == 1 {
                self.red.iter().collect()
            } else {
                Vec::new()
            },
        );
        if let Err(e) = std::fs::write(dir.join("prompt.txt"), &text) {
            self.fatal = Some(format!("cannot write prompt.txt: {e}"));
            return Outcome::Fatal(Stage::Exception);
        }
        let baseline = self.baseline.id().to_string();
        let progress = self
            .ui
            .progress(format!("  SE waiting for {}", self.summary.config.model));
        let on_tokens = |n: u64| progress.set_detail(format!("{n} tokens received"));
        let request = Request {
            root: &self.root,
            run_id: &self.summary.run_id,
            baseline: &baseline,
            allowed: &self.wo.order.allowed_files,
            prompt: &text,
            work_order: &self.wo.raw,
            attempt,
            failure_brief: self.brief.as_ref(),
            attempt_dir: dir,
            attempt_rel: rel,
            sandbox: self.sandbox.is_some(),
            on_tokens: &on_tokens,
            candidate: self.candidate,
        };
        // What the run's restore does not own (shared refs, other worktrees' HEADs) is
        // recorded before an agent runs, to name anything it changed there.
        let audit = match self.audited.then(|| Audit::capture(self.repo)).transpose() {
            Ok(a) => a,
            Err(e) => {
                self.fatal = Some(e.message);
                return Outcome::Fatal(Stage::Exception);
            }
        };
        let asked = Instant::now();
        let answer = self.provider.propose(&request);
        let tokens = match &answer {
            Ok(r) => r
                .usage
                .as_ref()
                .map(|u| {
                    format!(
                        ", {} in / {} out tokens",
                        u.input_tokens.unwrap_or(0),
                        u.output_tokens.unwrap_or(0)
                    )
                })
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        let took = asked.elapsed().as_secs_f64();
        progress.finish(
            self.ui,
            Some(match &answer {
                Ok(_) => format!("  SE answered in {took:.1}s{tokens}"),
                Err(_) => format!("  SE failed after {took:.1}s"),
            }),
        );
        if self.audited {
            if let Some(outcome) = self.agent_audit(audit, dir, &answer) {
                return outcome;
            }
        }
        let response = match answer {
            Ok(r) => r,
            Err(ProviderError::Failed(msg)) => return self.fail(Stage::LlmCallFailed, None, &msg),
            Err(ProviderError::Exhausted(msg)) => {
                let _ = self.fail(Stage::LlmCallFailed, None, &msg);
                return Outcome::Exhausted(Stage::LlmCallFailed);
            }
            Err(ProviderError::Fatal(msg)) => {
                let _ = self.fail(Stage::LlmCallFailed, None, &msg);
                self.fatal = Some(msg);
                return Outcome::Fatal(Stage::LlmCallFailed);
            }
            Err(ProviderError::Unreachable { message, hint }) => {
                if self.summary.attempts.is_empty() {
                    // Misconfiguration, caught before any attempt counts: refused, unrecorded.
                    self.refusal = Some(Error::new(message).hint(hint));
                    return Outcome::Fatal(Stage::Preflight);
                }
                return self.fail(Stage::LlmCallFailed, None, &message);
            }
        };
        let _ = std::fs::write(dir.join("llm_output.txt"), &response.raw);
        let over_budget = self.budget.spend(response.usage.as_ref());
        {
            let a = self.current();
            a.answer = Some((response.text.clone(), response.format));
            a.record.usage = response.usage.clone();
            a.record.dropped_params = response.dropped_params.clone();
            a.record.api_switch = response.api_switch.clone();
        }
        if over_budget {
            if let Some(board) = self.board {
                board.set(self.candidate.unwrap_or(1), "budget exhausted", false);
            }
            let text = format!(
                "the --max-tokens budget of {} tokens is spent ({} reported so far)",
                self.budget.limit().unwrap_or(0),
                self.budget.used()
            );
            // Every other candidate in flight stops too.
            crate::interrupt::halt();
            let _ = self.fail(Stage::BudgetExhausted, None, &text);
            return Outcome::Exhausted(Stage::BudgetExhausted);
        }
        if let Some(switch) = &response.api_switch {
            self.ui.info(format!(
                "  the server serves this model on the other API: switched {switch}"
            ));
        }
        if !response.dropped_params.is_empty() {
            self.ui.info(format!(
                "  the server refused {}: sent again without (remembered in .git/factory/providers.json)",
                response.dropped_params.join(", ")
            ));
        }
        if let Some(reasoning) = &response.reasoning {
            if std::fs::write(dir.join("reasoning.txt"), reasoning).is_ok() {
                self.current().record.reasoning_path = Some(format!("{rel}/reasoning.txt"));
            }
        }
        match &response.stop {
            Stop::Complete => {}
            Stop::Cut(why) => {
                let text = format!(
                    "your answer was cut at the output limit ({why}) before it was complete: propose a smaller change (fewer files, a shorter diff, only the hunks that change), or the user can raise --llm-max-output-tokens"
                );
                return self.fail(Stage::LlmOutputInvalid, None, &text);
            }
            Stop::Refused(why) => {
                let text = format!("the model refused to answer: {why}");
                return self.fail(Stage::LlmOutputInvalid, None, &text);
            }
            Stop::TooLarge(why) => {
                let text = format!("{why}: propose a smaller change (fewer files, a diff of only the hunks that change)");
                return self.fail(Stage::LlmOutputInvalid, None, &text);
            }
        }
        match proposal::parse(&response.text, response.format) {
            Ok(p) => {
                let a = self.current();
                a.record.summary = Some(p.summary.clone());
                a.proposal = Some(p);
                Outcome::Ok
            }
            Err(why) => {
                let start: String = String::from_utf8_lossy(&response.raw)
                    .chars()
                    .take(300)
                    .collect();
                let text = format!("{why}\nyour output began with:\n{start}");
                self.fail(Stage::LlmOutputInvalid, None, &text)
            }
        }
    }

    /// The agent audit of SPEC §7: after an agent exits, everything outside its scratch
    /// worktree — the run's tree and index, HEAD, refs, `.git/config`, hooks — must be as
    /// before. What it changed is put back through the run's one restore and the attempt fails
    /// with `agent_escaped`, the brief naming each thing; `None` when nothing escaped.
    fn agent_audit(
        &mut self,
        audit: Option<Audit>,
        dir: &Path,
        answer: &Result<Response, ProviderError>,
    ) -> Option<Outcome> {
        crate::trace::mark("  agent audit: start");
        let report = match self.journal.restore.apply_walked(
            self.repo,
            &[],
            Purpose::AgentAudit,
            self.preflight.as_ref(),
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
        // Refs the run does not own (a --worktree run shares them with the user's own work)
        // and other worktrees' HEADs: named, not put back.
        let mut left: Vec<String> = match audit.map(|a| a.changes(self.repo)) {
            Some(Ok(changes)) => changes
                .into_iter()
                .filter(|c| {
                    let name = c.split(" (").next().unwrap_or(c);
                    !restored.iter().any(|r| r == name)
                })
                .collect(),
            Some(Err(e)) => {
                self.fatal = Some(e.message);
                return Some(Outcome::Fatal(Stage::Exception));
            }
            None => Vec::new(),
        };
        for name in &report.left {
            if !left
                .iter()
                .any(|l| l.split(" (").next() == Some(name.as_str()))
            {
                left.push(name.clone());
            }
        }
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

    fn apply(&mut self, attempt: u32) -> Outcome {
        let (dir, rel) = {
            let a = self.current();
            (a.dir.clone(), a.rel.clone())
        };
        let Some(proposal) = self.current().proposal.clone() else {
            return self.fail(Stage::Exception, None, "no proposal to apply");
        };
        let written = match &proposal.change {
            Change::Diff(text) | Change::Dialect(_, text) => {
                self.current().record.patch_path = format!("{rel}/proposed_patch.diff");
                std::fs::write(dir.join("proposed_patch.diff"), text)
            }
            Change::Writes(writes) => {
                self.current().record.patch_path = format!("{rel}/proposed_writes.json");
                let list: Vec<serde_json::Value> = writes
                    .iter()
                    .map(|w| serde_json::json!({"path": w.path, "base_sha256": w.base_sha256, "content": w.content, "executable": w.executable}))
                    .collect();
                write_json(&dir.join("proposed_writes.json"), &list)
                    .map_err(|e| std::io::Error::other(e.message))
            }
        };
        if let Err(e) = written {
            self.fatal = Some(format!("cannot store the proposal: {e}"));
            return Outcome::Fatal(Stage::Exception);
        }
        let allowed = self.wo.order.allowed_files.clone();
        let rules = Rules {
            allowed: Some(&allowed),
            protected: Some(&self.protected),
            strip: Strip::Auto,
            strict_only: self.strict_apply,
        };
        let plan = match tr::plan(&proposal.change, &self.root, &rules) {
            Ok(plan) => plan,
            Err(refusal) => {
                let result = ApplyResult {
                    ok: false,
                    method: None,
                    touched_files: &refusal.touched,
                    files: Vec::new(),
                    error: Some(&refusal.message),
                };
                let _ = write_json(&dir.join("apply_result.json"), &result);
                self.current().record.touched_files = refusal.touched.clone();
                return self.fail(refusal.stage, None, &refusal.message);
            }
        };
        let fingerprint = plan.fingerprint();
        if let Some((_, earlier)) = self.seen.iter().find(|(f, _)| *f == fingerprint).cloned() {
            let earlier_record = self
                .summary
                .attempts
                .iter()
                .find(|r| r.attempt_index == earlier)
                .cloned();
            let (stage, text) = match earlier_record.and_then(|r| r.failure_brief) {
                Some(b) => (b.stage, b.primary_error_excerpt),
                None => (Stage::AcceptanceFailed, String::new()),
            };
            let text = format!(
                "you repeated attempt {earlier}'s change exactly; it was not applied again. It failed with:\n{text}"
            );
            let a = self.current();
            a.record.repeat_of = Some(earlier);
            a.record.touched_files = plan.touched.clone();
            return self.fail(stage, None, &text);
        }
        self.seen.push((fingerprint, attempt));
        if let Err(e) = self.journal_stage("apply", Some(&plan.outcomes)) {
            self.fatal = Some(e.message);
            return Outcome::Fatal(Stage::Exception);
        }
        if let Err(e) = apply::write_outcomes(&self.root, &plan.outcomes) {
            return self.fail(
                Stage::PatchApplyFailed,
                None,
                &format!("writing the change failed: {e}"),
            );
        }
        let dialect = matches!(proposal.change, Change::Dialect(..));
        let tree =
            git::tree_with(self.repo, self.baseline.tree_id(), &plan.outcomes).and_then(|t| {
                if dialect {
                    // Stored as the unified diff it amounts to (the raw text is in llm_output.txt).
                    let diff = git::diff_trees(self.repo, self.baseline.tree_id(), t)?;
                    std::fs::write(dir.join("proposed_patch.diff"), diff)?;
                }
                let commit = self
                    .writer
                    .attempt_commit(self.repo, &self.baseline, t, attempt)?;
                Ok((t, commit))
            });
        let files: Vec<FileAction<'_>> = plan
            .outcomes
            .iter()
            .map(|o| FileAction {
                path: &o.path,
                action: o.action(),
            })
            .collect();
        let result = ApplyResult {
            ok: true,
            method: Some(plan.method.as_str()),
            touched_files: &plan.touched,
            files,
            error: None,
        };
        let _ = write_json(&dir.join("apply_result.json"), &result);
        let method = plan.method.as_str().to_string();
        let count = plan.outcomes.len();
        let a = self.current();
        a.applied = true;
        a.record.apply_ok = true;
        a.record.apply_method = Some(method.clone());
        a.record.touched_files = plan.touched.clone();
        a.plan = Some(plan);
        match tree {
            Ok((tree, commit)) => {
                a.tree = Some(tree);
                a.record.tree_commit = Some(commit.to_string());
            }
            Err(e) => {
                self.fatal = Some(e.message);
                return Outcome::Fatal(Stage::Exception);
            }
        }
        self.ui
            .info(format!("  TR applied {count} file(s) ({method})"));
        Outcome::Ok
    }

    fn verify(&mut self) -> Outcome {
        let (dir, rel) = {
            let a = self.current();
            (a.dir.clone(), a.rel.clone())
        };
        // No check may run bytecode of another version of a changed file; sandboxed checks
        // see the cache through the run's view of it, refreshed for each attempt.
        let changed: Vec<String> = (self.current().plan.iter())
            .flat_map(|p| p.outcomes.iter().map(|o| o.path.clone()))
            .collect();
        let changed: Vec<&str> = changed.iter().map(String::as_str).collect();
        let prefix = match self.check_cache(&changed) {
            Ok(cache) => cache,
            Err(e) => {
                self.fatal = Some(format!("cannot create a scratch folder: {e}"));
                return Outcome::Fatal(Stage::Exception);
            }
        };
        let po = PoRun {
            root: &self.root,
            timeout: self.timeout,
            env_remove: &self.env_remove,
            env_set: PyCache::env(&prefix, &self.root),
            log_dir: dir.clone(),
            log_rel: rel,
            sandbox: self.sandbox.clone().map(|mut s| {
                s.scratch.push(prefix.clone());
                s
            }),
            pgid_file: Some(self.pgid_file()),
        };
        let ui = self.ui;
        let checks = verify::Checks {
            verify: &self.verify_cmds,
            pass_to_pass: &self.pass_to_pass,
            fail_to_pass: &self.fail_to_pass,
            acceptance: &self.acceptance,
        };
        let started = self.bytecode_mark();
        let outcome = po.run_checks(&checks, |kind, argv| {
            let shown = shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_default();
            ui.progress(format!("  PO {kind}: {shown}"))
        });
        self.drop_checks_bytecode(started);
        if let Some(view) = &self.pyview {
            self.warm_pycache(Some(view));
        }
        let _ = write_json(&dir.join("verify_result.json"), &outcome.verify);
        for (name, results) in [
            ("pass_to_pass_result.json", &outcome.pass_to_pass),
            ("fail_to_pass_result.json", &outcome.fail_to_pass),
        ] {
            if !results.is_empty() {
                let _ = write_json(&dir.join(name), results);
            }
        }
        let _ = write_json(&dir.join("acceptance_result.json"), &outcome.acceptance);
        let failing = outcome.failing_command().cloned();
        {
            let a = self.current();
            a.record.verify = outcome.verify;
            a.record.pass_to_pass = outcome.pass_to_pass;
            a.record.fail_to_pass = outcome.fail_to_pass;
            a.record.acceptance = outcome.acceptance;
        }
        match (outcome.failed, failing) {
            (Some(stage), Some(cmd)) => {
                let text = command_excerpt(&cmd);
                self.fail(stage, Some(&cmd), &text)
            }
            _ => Outcome::Ok,
        }
    }
}

/// What the candidates of a race share: the run's facts, read-only (SPEC §5.1).
pub(crate) struct RaceShared<'a> {
    pub commondir: PathBuf,
    pub factory_dir: PathBuf,
    pub run_id: String,
    pub run_dir: PathBuf,
    pub baseline: git2::Oid,
    pub wo: &'a LoadedWorkOrder,
    pub verify_cmds: &'a [Vec<String>],
    pub acceptance: &'a [Vec<String>],
    pub pass_to_pass: &'a [Vec<String>],
    pub fail_to_pass: &'a [Vec<String>],
    pub protected: &'a Protected,
    pub red: &'a [BaselineResult],
    pub timeout: Duration,
    pub env_remove: &'a [String],
    pub context: &'a [ContextFile],
    pub strict_apply: bool,
    pub sandbox: bool,
    pub max_attempts: u32,
    pub settings: &'a crate::roles::se::provider::client::Settings,
    pub agent_timeout: Duration,
    pub budget: &'a crate::budget::Budget,
    pub summary: &'a RunSummary,
    pub ui: &'a Ui,
}

/// How one candidate ended.
pub(crate) struct CandidateRun {
    pub index: u32,
    pub model: String,
    pub verdict: Verdict,
    pub stage: String,
    pub attempts: Vec<AttemptRecord>,
    /// On PASS: the tree its change made (baseline + change).
    pub tree: Option<git2::Oid>,
    /// On PASS: the answer that made it.
    pub answer: Option<(Vec<u8>, proposal::OutputFormat)>,
    pub attempt_commits: Vec<git2::Oid>,
    pub error: Option<String>,
    /// Its provider turned out misconfigured: the whole run is refused.
    pub refusal: Option<Error>,
    pub duration: Duration,
}

/// Runs one candidate: its own attempt loop in its own fresh worktree at the baseline, its
/// artifacts under `candidate_<index>/`. It writes no ref and touches nothing of the user's:
/// the race records all candidates at once. Its worktree is removed whatever happens.
pub(crate) fn run_candidate(
    shared: &RaceShared<'_>,
    index: u32,
    spec: &ProviderSpec,
    board: &ui::Board,
) -> CandidateRun {
    let started = Instant::now();
    let mut run = CandidateRun {
        index,
        model: spec.identity(),
        verdict: Verdict::Error,
        stage: Stage::Exception.as_str().to_string(),
        attempts: Vec::new(),
        tree: None,
        answer: None,
        attempt_commits: Vec::new(),
        error: None,
        refusal: None,
        duration: Duration::ZERO,
    };
    if let Err(e) = candidate_session(shared, index, spec, board, &mut run) {
        run.verdict = Verdict::Error;
        run.stage = Stage::Exception.as_str().to_string();
        run.error = Some(e.message);
    }
    run.duration = started.elapsed();
    run
}

fn candidate_session(
    shared: &RaceShared<'_>,
    index: u32,
    spec: &ProviderSpec,
    board: &ui::Board,
    run: &mut CandidateRun,
) -> Result<()> {
    let repo = Repository::open(&shared.commondir)?;
    let name = format!("cand-{}-{index}", shared.run_id);
    let worktree = git::worktree::TempWorktree::add(&repo, &name, &shared.baseline.to_string())?;
    let wt_repo = Repository::open(&worktree.path)?;
    let mut settings = shared.settings.clone();
    settings.seed += u64::from(index);
    let (provider, identity) = spec.open(&worktree.path, &settings, true, shared.agent_timeout)?;
    run.model = identity.clone();
    let dir = shared.run_dir.join(format!("candidate_{index}"));
    std::fs::create_dir_all(&dir)?;
    // The candidate's own worktree gets its HEAD and index back between attempts; the refs it
    // shares with the user's repo are not its to put back.
    let restore = git::restore::Restore::capture(
        &wt_repo,
        crate::journal::saved_dir(&shared.factory_dir, &format!("{}.{index}", shared.run_id)),
        false,
        None,
    )?;
    let saved = restore.saved.clone();
    let journal = Journal {
        run_id: shared.run_id.clone(),
        pid: std::process::id(),
        stage: "preflight".to_string(),
        restore,
    };
    let ui = shared.ui.silent();
    let mut summary = shared.summary.clone();
    summary.config.model = identity;
    let sandbox = shared.sandbox.then(|| {
        Sandbox::for_checks(
            worktree.path.clone(),
            vec![repo.commondir().to_path_buf(), wt_repo.path().to_path_buf()],
        )
    });
    {
        let mut session = Session {
            record: false,
            budget: shared.budget,
            board: Some(board),
            candidate: Some(index),
            passed_answer: None,
            factory_dir: shared.factory_dir.clone(),
            pycache: PyCache::in_factory_dir(&shared.factory_dir),
            pyview: None,
            journal,
            persist_journal: false,
            unrestored: false,
            preflight: None,
            sandbox,
            delivery: Delivery::Uncommitted,
            repo: &wt_repo,
            root: worktree.path.clone(),
            ui: &ui,
            wo: shared.wo,
            baseline: wt_repo.find_commit(shared.baseline)?,
            provider,
            audited: spec.is_agent(),
            strict_apply: shared.strict_apply,
            run_dir: dir.clone(),
            writer: RunWriter::new(&shared.run_id, &dir, None),
            summary,
            verify_cmds: shared.verify_cmds.to_vec(),
            acceptance: shared.acceptance.to_vec(),
            pass_to_pass: shared.pass_to_pass.to_vec(),
            fail_to_pass: shared.fail_to_pass.to_vec(),
            protected: shared.protected.clone(),
            red: shared.red.to_vec(),
            timeout: shared.timeout,
            env_remove: shared.env_remove.to_vec(),
            context: shared.context.to_vec(),
            current: None,
            brief: None,
            seen: Vec::new(),
            passed: None,
            fatal: None,
            refusal: None,
        };
        let budget = shared.budget;
        let stop = || crate::interrupt::requested() || budget.exhausted();
        let ending = match graph::drive(&mut session, shared.max_attempts, &stop) {
            Ok(ending) => ending,
            Err(e) => {
                let _ = session.rollback();
                session.fatal = Some(e.message.clone());
                Ending {
                    verdict: Verdict::Error,
                    stage: Stage::Exception.as_str().to_string(),
                    attempts: session.summary.attempts.len() as u32,
                }
            }
        };
        session.summary.verdict = ending.verdict;
        session.summary.ended_stage = ending.stage.clone();
        session.summary.error = session.fatal.clone();
        session.summary.ended_utc = utc_now();
        let _ = session.save();
        run.verdict = ending.verdict;
        run.stage = ending.stage;
        run.attempts = session.summary.attempts.clone();
        if ending.verdict == Verdict::Pass {
            run.tree = session.passed.as_ref().map(|(_, tree)| *tree);
            run.answer = session.passed_answer.take();
        }
        run.attempt_commits = session.writer.attempt_commits.clone();
        run.error = session.fatal.clone();
        run.refusal = session.refusal.take();
    }
    drop(wt_repo);
    let _ = std::fs::remove_dir_all(&saved);
    worktree.remove()
}

impl Session<'_> {
    /// Races the candidates (SPEC §5.1) and records them in this run. `Ok(None)`: a winner was
    /// chosen and this session's provider now proposes its change, for the one attempt that
    /// applies and verifies it where it lands; `Ok(Some(ending))`: the run ends without it.
    fn race(
        &mut self,
        plan: &race::Plan,
        opts: &RunOptions,
        settings: &crate::roles::se::provider::client::Settings,
        agent_timeout: Duration,
    ) -> Result<Option<Ending>> {
        let shared = RaceShared {
            commondir: self.repo.commondir().to_path_buf(),
            factory_dir: self.factory_dir.clone(),
            run_id: self.summary.run_id.clone(),
            run_dir: self.run_dir.clone(),
            baseline: self.baseline.id(),
            wo: self.wo,
            verify_cmds: &self.verify_cmds,
            acceptance: &self.acceptance,
            pass_to_pass: &self.pass_to_pass,
            fail_to_pass: &self.fail_to_pass,
            protected: &self.protected,
            red: &self.red,
            timeout: self.timeout,
            env_remove: &self.env_remove,
            context: &self.context,
            strict_apply: self.strict_apply,
            sandbox: opts.sandbox,
            max_attempts: opts.max_attempts,
            settings,
            agent_timeout,
            budget: self.budget,
            summary: &self.summary,
            ui: self.ui,
        };
        let owner = race::owner_file(&self.factory_dir, &self.summary.run_id);
        if !self.persist_journal {
            std::fs::write(&owner, std::process::id().to_string())?;
        }
        let mut runs = race::run_all(&shared, plan, self.ui);
        let _ = std::fs::remove_file(&owner);
        if let Some(refusal) = runs.iter_mut().find_map(|r| r.refusal.take()) {
            self.refusal = Some(refusal);
            return Ok(Some(Ending {
                verdict: Verdict::Error,
                stage: Stage::Preflight.as_str().to_string(),
                attempts: 0,
            }));
        }
        // One record: every candidate's attempt commits are parents of the run commit.
        for r in &runs {
            self.writer
                .attempt_commits
                .extend(r.attempt_commits.iter().copied());
        }
        let base_tree = self.baseline.tree_id();
        let records: Vec<_> = runs
            .iter()
            .map(|r| race::record(self.repo, base_tree, r))
            .collect();
        let winner = race::select(&records);
        let passed = records
            .iter()
            .filter(|c| c.verdict == Verdict::Pass)
            .count();
        self.summary.candidates = records;
        self.summary.winner = winner;
        let ending = |verdict: Verdict, stage: &str| {
            Ok(Some(Ending {
                verdict,
                stage: stage.to_string(),
                attempts: 0,
            }))
        };
        if crate::interrupt::requested() {
            return ending(Verdict::Interrupted, Stage::Interrupted.as_str());
        }
        if self.budget.exhausted() {
            self.summary.winner = None;
            return ending(Verdict::Fail, Stage::BudgetExhausted.as_str());
        }
        let Some(index) = winner else {
            let all_errors = runs.iter().all(|r| r.verdict == Verdict::Error);
            self.fatal = all_errors
                .then(|| runs.iter().find_map(|r| r.error.clone()))
                .flatten();
            let stage = runs.first().map(|r| r.stage.clone()).unwrap_or_default();
            let verdict = if all_errors {
                Verdict::Error
            } else {
                Verdict::Fail
            };
            return ending(verdict, &stage);
        };
        let won = &runs[index as usize - 1];
        let Some((text, format)) = won.answer.clone() else {
            return Err(Error::new(format!(
                "candidate {index} passed but its answer was not kept"
            )));
        };
        self.ui.info(format!(
            "  {passed}/{} candidates passed; candidate {index} wins ({}): verifying it {}",
            runs.len(),
            won.model,
            if opts.worktree {
                "once more before it is committed"
            } else {
                "once more in your tree"
            }
        ));
        self.provider = Box::new(race::Chosen { text, format });
        // The winner's change is replayed, not asked of an agent again: nothing to audit.
        self.audited = false;
        Ok(None)
    }
}

/// Bounds a brief's excerpt to BRIEF_CHARS, keeping its first line (what failed) and the
/// tail (where errors are).
fn bound_excerpt(text: &str) -> String {
    if text.chars().count() <= BRIEF_CHARS {
        return text.to_string();
    }
    let first: String = text
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(300)
        .collect();
    let marker = "\n[…]\n";
    let room = BRIEF_CHARS - first.chars().count() - marker.chars().count();
    format!("{first}{marker}{}", tail_chars(text, room))
}

/// What the next prompt is told about a failing command: how it ended and the tails of its
/// output, within the brief's bound.
fn command_excerpt(cmd: &CmdResult) -> String {
    let mut text = format!("{} → {}\n", cmd.display(), cmd.outcome());
    let out = excerpt(&cmd.stdout_trunc);
    let err = excerpt(&cmd.stderr_trunc);
    let half = BRIEF_CHARS / 2;
    match (out.trim().is_empty(), err.trim().is_empty()) {
        (false, false) => {
            text.push_str(&format!(
                "--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
                tail_chars(&out, half),
                tail_chars(&err, half)
            ));
        }
        (false, true) => text.push_str(&tail_chars(&out, BRIEF_CHARS)),
        (true, false) => text.push_str(&tail_chars(&err, BRIEF_CHARS)),
        (true, true) => {}
    }
    text
}
