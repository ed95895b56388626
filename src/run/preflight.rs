//! Misconfiguration caught before the first attempt (SPEC §1.1): a program that is not there
//! is the user's to fix, not a model FAIL that burns attempts and leaves a record.

use crate::error::{Error, Result};
use crate::git::{lock::RepoLock, status::Snapshot};
use crate::journal::Journal;
use crate::roles::se::provider::ProviderSpec;
use crate::run::options::RunOptions;
use git2::Repository;
use std::path::{Path, PathBuf};

/// Where a command names its program: the work order's acceptance commands, the global
/// verification, or the SE agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The Python defaults: no scripts/verify.sh and no factory.verify.
    DefaultVerify,
    Verify,
    Acceptance,
    AgentCommand,
    AgentEdits,
}

/// The program `argv[0]` names, found the way `execvp` finds it: a name without `/` through
/// PATH, anything else as a path.
fn found(program: &str, path_dirs: &[PathBuf]) -> bool {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    path_dirs.iter().any(|d| executable(&d.join(program)))
}

/// The refusal for a program that is not on PATH, naming the fix for where it came from.
fn refusal(source: Source, argv: &[String]) -> Error {
    let program = argv.first().map(String::as_str).unwrap_or("");
    let command = shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_default();
    match source {
        Source::DefaultVerify => Error::new(format!(
            "global verification needs {program}, which is not on PATH"
        ))
        .detail(format!("{command}   (the Python default, as this repo sets no checks of its own)"))
        .hint("set this repo's checks: git config factory.verify 'make test' (one value per command), or add scripts/verify.sh"),
        Source::Verify => Error::new(format!(
            "verification command {command:?} needs {program}, which is not on PATH"
        ))
        .hint("install it, or fix git config factory.verify (or scripts/verify.sh)"),
        Source::Acceptance => Error::new(format!(
            "acceptance command {command:?} needs {program}, which is not on PATH"
        ))
        .hint("install it, or fix the work order's acceptance_commands (for shell syntax use sh -c '…')"),
        Source::AgentCommand | Source::AgentEdits => {
            let flag = if source == Source::AgentCommand {
                "--agent-command"
            } else {
                "--agent-edits"
            };
            let place = if program.contains('/') {
                "does not exist or is not executable"
            } else {
                "is not on PATH"
            };
            Error::new(format!("{flag} program {program:?} {place}"))
                .hint(format!("install it, or give its full path: {flag} '/path/to/{} …'", program.rsplit('/').next().unwrap_or(program)))
        }
    }
}

/// Refuses when a command's program cannot be found. Verification and acceptance commands
/// are checked by name only (a path such as `./check.sh` may be the change itself); an
/// agent is checked by name or by absolute path.
pub fn programs(commands: &[(Source, &[String])]) -> Result<()> {
    let path_dirs = crate::env::path_dirs();
    for (source, argv) in commands {
        let Some(program) = argv.first() else {
            continue;
        };
        let checked = match source {
            Source::AgentCommand | Source::AgentEdits => {
                !program.contains('/') || Path::new(program).is_absolute()
            }
            _ => !program.contains('/'),
        };
        if checked && !found(program, &path_dirs) {
            return Err(refusal(*source, argv));
        }
    }
    Ok(())
}

/// A program that is not there is misconfiguration, refused before anything is recorded
/// (SPEC §1.1): the agent, the global verification and the acceptance commands.
pub fn run_programs(
    opts: &RunOptions,
    cfg: &crate::config::Config,
    baseline: &git2::Commit<'_>,
    user_root: &Path,
) -> Result<()> {
    let configured = cfg.multi(crate::config::VERIFY);
    let verify_cmds = if opts.worktree {
        crate::roles::po::verify::commands_for_tree(&baseline.tree()?, &configured)
    } else {
        crate::roles::po::verify::global_commands(user_root, &configured)
    }
    .unwrap_or_default();
    let by_default = configured.is_empty()
        && verify_cmds
            .first()
            .and_then(|a| a.first())
            .map(String::as_str)
            != Some("bash");
    let verify_source = if by_default {
        Source::DefaultVerify
    } else {
        Source::Verify
    };
    let acceptance = opts.work_order.acceptance_argv();
    let mut commands: Vec<(Source, &[String])> = agent(&opts.provider).into_iter().collect();
    commands.extend(verify_cmds.iter().map(|a| (verify_source, a.as_slice())));
    commands.extend(
        acceptance
            .iter()
            .map(|a| (Source::Acceptance, a.as_slice())),
    );
    programs(&commands)
}

/// The agent's argv, if SE is an agent program.
pub fn agent(spec: &ProviderSpec) -> Option<(Source, &[String])> {
    match spec {
        ProviderSpec::AgentCommand { argv } => Some((Source::AgentCommand, argv.as_slice())),
        ProviderSpec::AgentEdits { argv } => Some((Source::AgentEdits, argv.as_slice())),
        _ => None,
    }
}

/// The user's tree claimed for an in-situ run (SPEC §5's preflight): the repo lock held, no
/// interrupted run, no operation in progress, a clean tree. A worktree run claims nothing of
/// the user's (it takes no lock and ignores the user's tree); a dry run takes no lock.
pub struct Claim {
    pub(crate) lock: Option<RepoLock>,
    /// In-situ only: the preflight status walk, which later checks of the tree build on.
    pub(crate) preflight: Option<Snapshot>,
}

impl Claim {
    pub fn take(
        repo: &Repository,
        factory_dir: &Path,
        worktree: bool,
        dry_run: bool,
    ) -> Result<Claim> {
        // In-situ: another run in progress is named before anything else (its applied change
        // would otherwise show up as a dirty tree).
        let lock = if dry_run || worktree {
            None
        } else {
            Some(RepoLock::acquire(factory_dir)?)
        };
        if lock.is_some() {
            if let Some(j) = Journal::read(factory_dir)? {
                return Err(crate::journal::interrupted_error(&j));
            }
            if let Some(killed) = crate::journal::killed_outside_run(factory_dir) {
                return Err(crate::journal::killed_outside_error(&killed));
            }
        } else if !dry_run {
            crate::journal::refuse_if_pending(repo, crate::journal::Beside::Allow)?;
        }
        // The preflight walk is kept: the rollback check lists again only folders changed since.
        let preflight = if worktree {
            None
        } else {
            crate::git::ensure_no_operation(repo)?;
            let snapshot = Snapshot::take(repo)?;
            snapshot.ensure_clean()?;
            crate::trace::mark("preflight status walk");
            Some(snapshot)
        };
        Ok(Claim { lock, preflight })
    }
}

/// The options' own refusals: no sandbox to be had, `--out` inside the tree, no attempt
/// allowed, a `--branch` that cannot be made.
pub fn check_options(repo: &Repository, opts: &RunOptions, user_root: &Path) -> Result<()> {
    if opts.sandbox {
        crate::sandbox::require(repo)?;
    }
    if let Some(out) = &opts.out {
        check_out_dir(out, user_root)?;
    }
    if opts.max_attempts == 0 {
        return Err(Error::new("--max-attempts must be at least 1").hint("e.g. --max-attempts 2"));
    }
    if let Some(name) = &opts.branch {
        crate::delivery::check_requested_branch(repo, name, opts.force)?;
    }
    Ok(())
}

/// Refuses an `--out` folder inside the work tree (artifacts would dirty the tree).
pub(crate) fn check_out_dir(out: &Path, root: &Path) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_on_path_and_by_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").expect("write");
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "x").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let path = [dir.path().to_path_buf()];
        assert!(found("tool", &path));
        assert!(!found("plain", &path), "not executable");
        assert!(!found("nope", &path));
        assert!(!found("tool", &[]));
        assert!(found(&tool.display().to_string(), &[]));
    }
}
