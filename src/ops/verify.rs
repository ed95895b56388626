//! Global verification of one commit (`git factory verify`, the pre-push hook): its tree's
//! verification commands in a pooled worktree (SPEC §5), cached by tree id in
//! `refs/notes/factory-verify` (see `roles::po::cache`; only passes are cached, so a flaky
//! failure is checked again next time).

use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::roles::po::exec::tail_chars;
use crate::roles::po::{cache, verify};
use git2::{Oid, Repository};
use std::time::Duration;

/// What verifying a commit found.
pub struct Verified {
    pub passed: bool,
    pub cached: bool,
    pub tree: Oid,
    /// How the failing command ended and the tail of its output.
    pub excerpt: String,
}

/// Verifies one commit's tree (or answers from the cache); `on_command` hears of each command
/// as it starts.
pub fn verify_commit(
    repo: &Repository,
    commit: Oid,
    no_cache: bool,
    timeout: Duration,
    mut on_command: impl FnMut(&[String]),
) -> Result<Verified> {
    let commit = repo.find_commit(commit)?;
    let tree = commit.tree()?;
    let cfg = Config::of(repo);
    let commands =
        verify::commands_for_tree(&tree, &cfg.multi(config::VERIFY)).map_err(Error::new)?;
    if !no_cache && cache::passed(repo, tree.id(), &commands) {
        return Ok(Verified {
            passed: true,
            cached: true,
            tree: tree.id(),
            excerpt: String::new(),
        });
    }
    cache::ensure_secret(repo)?;
    let outcome = verify::run_in_temporary_worktree(
        repo,
        &commit.id().to_string(),
        &verify::Checks {
            verify: &commands,
            ..verify::Checks::default()
        },
        timeout,
        false,
        |_, argv| on_command(argv),
    )?;
    let passed = outcome.failed.is_none();
    let excerpt = match outcome.failing_command() {
        Some(c) => {
            let out = format!("{}{}", c.stdout_trunc, c.stderr_trunc);
            format!(
                "{} → {}\n{}",
                c.display(),
                c.outcome(),
                tail_chars(&out, 2000)
            )
        }
        None => String::new(),
    };
    if passed {
        cache::record_pass(repo, tree.id(), &commands)?;
        // With the tests they reported, so a run's baseline check can grade against them.
        let reports: Vec<_> = outcome
            .verify
            .iter()
            .filter_map(|c| c.tests.clone())
            .collect();
        crate::roles::po::baseline::record_tests(repo, tree.id(), &commands, &reports)?;
    }
    Ok(Verified {
        passed,
        cached: false,
        tree: tree.id(),
        excerpt,
    })
}
