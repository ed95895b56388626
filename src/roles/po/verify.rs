//! Global verification rules (seed 000 §6.5, SPEC §3.7) and the PO pass over an attempt.

use super::exec::{self, CommandSpec, LogFiles};
use crate::store::records::{CmdResult, Stage};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The global verification commands for a tree: `scripts/verify.sh` through bash when it is
/// a file (the exec bit is not needed), else git config `factory.verify`, else the fixed
/// Python fallback.
pub fn global_commands(root: &Path, configured: &[String]) -> Result<Vec<Vec<String>>, String> {
    let script = root.join("scripts/verify.sh");
    decide(
        std::fs::symlink_metadata(&script).is_ok_and(|m| m.is_file()),
        configured,
    )
}

fn decide(has_script: bool, configured: &[String]) -> Result<Vec<Vec<String>>, String> {
    if has_script {
        return Ok(vec![vec!["bash".into(), "scripts/verify.sh".into()]]);
    }
    if !configured.is_empty() {
        return configured
            .iter()
            .map(|c| match shlex::split(c) {
                Some(argv) if !argv.is_empty() => Ok(argv),
                _ => Err(format!(
                    "git config factory.verify value {c:?} is not a command"
                )),
            })
            .collect();
    }
    Ok([
        &["python", "-m", "compileall", "-q", "."][..],
        &["python", "-m", "pip", "--version"],
        &["python", "-m", "pytest", "-q"],
    ]
    .iter()
    .map(|argv| argv.iter().map(|s| s.to_string()).collect())
    .collect())
}

/// The global verification commands for a committed tree, decided as `global_commands`
/// would in a checkout of it (used to look up cached results before making one).
pub fn commands_for_tree(
    tree: &git2::Tree<'_>,
    configured: &[String],
) -> Result<Vec<Vec<String>>, String> {
    let script = tree
        .get_path(Path::new("scripts/verify.sh"))
        .is_ok_and(|e| e.kind() == Some(git2::ObjectType::Blob) && e.filemode() != 0o120000);
    decide(script, configured)
}

/// Variables removed from every PO command's environment: the provider keys and the names
/// listed in git config `factory.scrubEnv`.
pub fn scrub_list(cfg: &crate::config::Config) -> Vec<String> {
    let mut names: Vec<String> = crate::env::ALWAYS_SCRUBBED
        .iter()
        .map(|s| s.to_string())
        .collect();
    names.extend(cfg.multi(crate::config::SCRUB_ENV));
    names
}

/// Runs PO on a committed tree in a temporary worktree (verify, reverify, the pre-push hook):
/// the user's tree is never used, scratch folders live under `.git/factory/tmp`, and the
/// worktree (with its bytecode entries) is removed afterwards.
pub fn run_in_temporary_worktree<G>(
    repo: &git2::Repository,
    name: &str,
    commit: &str,
    verify: &[Vec<String>],
    acceptance: &[Vec<String>],
    timeout: Duration,
    on_command: impl FnMut(&str, &[String]) -> G,
) -> crate::error::Result<PoOutcome> {
    let cfg = crate::config::Config::of(repo);
    let scratch = crate::git::factory_dir(repo).join("tmp");
    std::fs::create_dir_all(&scratch)?;
    let logs = tempfile::Builder::new()
        .prefix("logs-")
        .tempdir_in(&scratch)?;
    // The repo's bytecode cache: warm for the interpreter's own modules; the worktree's
    // entries are dropped with it (its files get new mtimes in any later checkout anyway).
    let cache = super::pycache::PyCache::of(repo);
    let scrub = scrub_list(&cfg);
    let wt = crate::git::worktree::TempWorktree::add(repo, name, commit)?;
    let po = PoRun {
        root: &wt.path,
        timeout,
        env_remove: &scrub,
        env_set: super::pycache::PyCache::env(cache.dir()),
        log_dir: logs.path().to_path_buf(),
        log_rel: String::new(),
        sandbox: None,
        pgid_file: None,
    };
    let outcome = po.run(verify, acceptance, on_command);
    wt.remove()?;
    Ok(outcome)
}

/// How PO runs commands for one attempt.
pub struct PoRun<'a> {
    pub root: &'a Path,
    pub timeout: Duration,
    pub env_remove: &'a [String],
    pub env_set: Vec<(String, String)>,
    /// Absolute folder for the logs, and its name relative to the artifact root.
    pub log_dir: PathBuf,
    pub log_rel: String,
    pub sandbox: Option<exec::Sandbox>,
    pub pgid_file: Option<PathBuf>,
}

pub struct PoOutcome {
    pub verify: Vec<CmdResult>,
    pub acceptance: Vec<CmdResult>,
    /// The stage and the index into verify/acceptance of the first failing command.
    pub failed: Option<Stage>,
}

impl PoOutcome {
    pub fn failing_command(&self) -> Option<&CmdResult> {
        match self.failed {
            Some(Stage::VerifyFailed) => self.verify.last(),
            Some(Stage::AcceptanceFailed) => self.acceptance.last(),
            _ => None,
        }
    }
}

impl PoRun<'_> {
    fn run_one(&self, kind: &str, index: usize, argv: &[String]) -> CmdResult {
        let spec = CommandSpec {
            argv: argv.to_vec(),
            cwd: self.root.to_path_buf(),
            timeout: self.timeout,
            env_remove: self.env_remove.to_vec(),
            env_set: self.env_set.clone(),
            stdin: None,
            label: if kind == "verify" {
                "verify"
            } else {
                "acceptance"
            },
            sandbox: self.sandbox.clone(),
            pgid_file: self.pgid_file.clone(),
        };
        let logs = LogFiles::in_dir(&self.log_dir, &self.log_rel, &format!("{kind}_{index}"));
        exec::run(&spec, &logs)
    }

    /// Runs verification then acceptance, stopping at the first command that does not succeed.
    /// `on_command` is told before each command starts; what it returns (a progress line) is
    /// dropped when the command ends.
    pub fn run<G>(
        &self,
        verify: &[Vec<String>],
        acceptance: &[Vec<String>],
        mut on_command: impl FnMut(&str, &[String]) -> G,
    ) -> PoOutcome {
        let mut out = PoOutcome {
            verify: Vec::new(),
            acceptance: Vec::new(),
            failed: None,
        };
        let phases: [(&str, &[Vec<String>], Stage); 2] = [
            ("verify", verify, Stage::VerifyFailed),
            ("acceptance", acceptance, Stage::AcceptanceFailed),
        ];
        for (kind, commands, stage) in phases {
            for (i, argv) in commands.iter().enumerate() {
                let shown = on_command(kind, argv);
                let r = self.run_one(kind, i, argv);
                drop(shown);
                let ok = r.succeeded();
                if kind == "verify" {
                    out.verify.push(r)
                } else {
                    out.acceptance.push(r)
                }
                if !ok {
                    out.failed = Some(stage);
                    return out;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_script_wins_then_config_then_fallback() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = vec!["make check".to_string()];
        let fallback = global_commands(dir.path(), &[]).expect("fallback");
        assert_eq!(fallback.len(), 3);
        assert_eq!(fallback[2], vec!["python", "-m", "pytest", "-q"]);
        assert_eq!(
            global_commands(dir.path(), &cfg).expect("config"),
            vec![vec!["make".to_string(), "check".to_string()]]
        );
        std::fs::create_dir(dir.path().join("scripts")).expect("mkdir");
        std::fs::write(dir.path().join("scripts/verify.sh"), "exit 0\n").expect("write");
        assert_eq!(
            global_commands(dir.path(), &cfg).expect("script"),
            vec![vec!["bash".to_string(), "scripts/verify.sh".to_string()]]
        );
    }
}
