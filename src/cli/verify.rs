//! `git factory verify [<rev>]`: global verification of a revision in a temporary worktree,
//! cached by tree id in `refs/notes/factory-verify` (see `roles::po::cache`; only passes are
//! cached, so a flaky failure is checked again next time). A run's baseline check shares the
//! cache: a tree either of them verified is not verified again by the other. `--attest` signs
//! a pass as evidence anyone can check (SPEC §6.1, `crate::evidence`).

use crate::config::{self, Config};
use crate::error::{Error, Exit, Result};
use crate::git;
use crate::ops::{self, verify::Verified};
use crate::ui::Ui;
use clap::Args;
use git2::{Oid, Repository};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The revision to verify
    #[arg(value_name = "REV", default_value = "HEAD")]
    pub rev: String,
    /// Verify again even if this tree already passed
    #[arg(long = "no-cache")]
    pub no_cache: bool,
    /// Time limit in seconds for each command [default: 600] [config: factory.timeoutSeconds]
    #[arg(long = "timeout-seconds", value_name = "S")]
    pub timeout_seconds: Option<u64>,
    /// On a pass, sign the evidence that this tree passed (with user.signingKey) in
    /// refs/notes/factory-attest
    #[arg(long)]
    pub attest: bool,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

/// Verifies one commit, printing each command as it starts; `by_run`: as
/// `ops::verify::verify_commit` says.
pub(super) fn verify_commit(
    repo: &Repository,
    commit: Oid,
    no_cache: bool,
    timeout: Duration,
    by_run: bool,
    ui: &Ui,
) -> Result<Verified> {
    ops::verify::verify_commit(repo, commit, no_cache, timeout, by_run, |argv| {
        ui.info(format!("  verify: {}", argv.join(" ")))
    })
}

pub fn cmd_verify(ui: &Ui, args: VerifyArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let commit = repo
        .revparse_single(&args.rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| {
            Error::new(format!("{} is not a commit", args.rev))
                .hint("give a branch, tag or commit id")
        })?;
    // A key-less --attest is refused before any check runs.
    let signer = args
        .attest
        .then(|| crate::evidence::require_signer(&repo))
        .transpose()?;
    let timeout = Config::of(&repo).value(
        args.timeout_seconds,
        config::TIMEOUT_SECONDS,
        config::DEFAULT_TIMEOUT_SECONDS,
    )?;
    let v = verify_commit(
        &repo,
        commit.id(),
        args.no_cache,
        Duration::from_secs(timeout),
        // Evidence says the commands passed: a pass judged per test is not signed as one.
        signer.is_none(),
        ui,
    )?;
    let short = git::short(&v.tree.to_string()).to_string();
    if v.passed {
        ui.always(format!(
            "{} {} (tree {short}){}{}",
            console::style("verified").green().bold(),
            args.rev,
            judged_by(&v),
            if v.cached { ", cached" } else { "" }
        ));
        if let Some(signer) = &signer {
            let a = crate::evidence::attest_verified(&repo, signer, commit.id())?;
            ui.always(format!(
                "attested tree {short} ({} key {}) in {}",
                a.format.as_str(),
                a.keyid,
                crate::evidence::NOTES_REF
            ));
        }
        Ok(Exit::Success)
    } else {
        ui.always(format!(
            "{} {} (tree {short})\n{}",
            console::style("verification failed").red().bold(),
            args.rev,
            v.excerpt
        ));
        Ok(Exit::Fail)
    }
}

/// How a commit a factory run made was judged, when its run's named tests judged it.
pub(super) fn judged_by(v: &Verified) -> String {
    v.judged_by
        .as_deref()
        .map(|run| format!(", judged per test by the tests run {run} named"))
        .unwrap_or_default()
}
