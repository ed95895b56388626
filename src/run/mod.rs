//! One run of the loop in the user's work tree (in-situ mode, SPEC §5): preflight, identity,
//! the SE/TR/PO nodes the graph drives, rollback, and the run's record.

pub mod attempt;
mod deliver;
mod files;
pub mod options;
mod place;
pub mod preflight;
pub mod race;

pub use options::{exit_for, RunOptions, RunReport};

use crate::clock::{unix_ms, utc_now};
use crate::config::Config;
use crate::delivery::Delivery;
use crate::error::{Error, Result};
use crate::git::{self, lock::RepoLock};
use crate::graph::{self, Ending};
use crate::identity;
use crate::journal::Journal;
use crate::roles::po::baseline;
use crate::roles::po::exec::Sandbox;
use crate::roles::po::pycache::PyCache;
use crate::roles::po::verify;
use crate::roles::se::prompt;
use crate::roles::se::provider::{Provider, ProviderSpec};
use crate::roles::tr::protect::Protected;
use crate::run::attempt::session::Session;
use crate::run::files::{copy_dir, write_json};
use crate::store::records::{Contract, RunConfig, RunSummary, Stage, Verdict};
use crate::store::{self, RunWriter};
use crate::ui::{self, Ui};
use std::path::Path;
use std::time::{Duration, Instant};

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
        preflight::check_out_dir(out, &user_root)?;
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
                place::discard_journal(&journal, opts.worktree, &factory_dir);
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
        place::discard_journal(&journal, opts.worktree, &factory_dir);
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
        place::discard_journal(&journal, opts.worktree, &factory_dir);
    }
    // Otherwise paths the last restore could not put back are named in the record and the
    // journal stays, so every command points at recover, which tries again once they are fixed.
    Ok(RunReport::Finished {
        summary: Box::new(summary),
        out,
    })
}
