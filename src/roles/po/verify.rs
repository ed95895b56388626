//! Global verification rules (seed 000 §6.5, SPEC §3.7) and the PO pass over an attempt.

use super::exec::{self, CommandSpec, LogFiles};
use super::{grade, report};
use crate::store::records::{CmdResult, CommandTests, Stage};
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

/// `factory.flaky=fail`: a test that passes only when re-run fails its command (SPEC §3.9).
pub fn flaky_fails(repo: &git2::Repository) -> bool {
    crate::config::Config::of(repo)
        .string(crate::config::FLAKY)
        .is_some_and(|v| v.eq_ignore_ascii_case("fail"))
}

/// Variables removed from every PO command's environment: the provider keys and the names
/// listed in git config `factory.scrubEnv`.
pub fn scrub_list(cfg: &crate::config::Config) -> Vec<String> {
    let mut names: Vec<String> = crate::env::ALWAYS_SCRUBBED
        .iter()
        .map(|s| s.to_string())
        .collect();
    names.extend(cfg.multi(crate::config::SCRUB_ENV));
    // Their values are also what the redactor hides in provider and command output.
    crate::secrets::register_names(&names);
    names
}

/// Runs PO on a committed tree in a pooled worktree (verify, reverify, the pre-push hook; SPEC
/// §5): the user's tree is never used, scratch folders live under `.git/factory/tmp`, and the
/// worktree is given back clean afterwards. `sandboxed` runs the checks
/// as a `--sandbox` run does (reverify of a record's model-written trees): the worktree is
/// all they can write, and they see the bytecode cache through a private view of it.
pub fn run_in_temporary_worktree<G>(
    repo: &git2::Repository,
    commit: &str,
    checks: &Checks<'_>,
    timeout: Duration,
    sandboxed: bool,
    on_command: impl FnMut(&str, &[String]) -> G,
) -> crate::error::Result<PoOutcome> {
    if sandboxed {
        crate::sandbox::require(repo)?;
    }
    let cfg = crate::config::Config::of(repo);
    let scratch = crate::git::factory_dir(repo).join("tmp");
    std::fs::create_dir_all(&scratch)?;
    let logs = tempfile::Builder::new()
        .prefix("logs-")
        .tempdir_in(&scratch)?;
    // The repo's bytecode cache: warm for the interpreter's own modules and, the pooled
    // worktree's path being stable, for the tree's files the pool did not write.
    let cache = super::pycache::PyCache::of(repo);
    let scrub = scrub_list(&cfg);
    let mut wt = crate::git::pool::take(repo, commit, super::pycache::PyCache::POOLED)?;
    if sandboxed {
        wt.sweep_ignored();
    }
    let (view, sandbox) = if sandboxed {
        let view = cache.view(&scratch, &wt.path)?;
        let wt_repo = git2::Repository::open(&wt.path)?;
        let sandbox = exec::Sandbox::for_checks(crate::sandbox::ChecksIn {
            repo: &wt_repo,
            tree: &wt.path,
            also_read_only: Vec::new(),
        })?
        .with_writable(view.path().to_path_buf());
        (Some(view), Some(sandbox))
    } else {
        (None, None)
    };
    let prefix = view
        .as_ref()
        .map_or(cache.dir(), super::pycache::View::path)
        .to_path_buf();
    let tests = report::Private::new(cfg.multi(crate::config::TEST_REPORT));
    let po = PoRun {
        root: &wt.path,
        timeout,
        env_remove: &scrub,
        env_set: super::pycache::PyCache::env(&prefix, &wt.path),
        log_dir: logs.path().to_path_buf(),
        log_rel: String::new(),
        sandbox,
        pgid_file: None,
        tests: Some(&tests),
    };
    // Unsandboxed checks write the shared cache: what they wrote for files outside the
    // worktree goes, compiled again from the real sources (SPEC §7.1), and what they compiled
    // of the worktree goes too, since the pooled worktree keeps its path (and so its entries)
    // for the next holder.
    let mark = view.is_none().then(|| cache.mark()).flatten();
    let outcome = po.run_checks(checks, on_command);
    if let Some(mark) = mark {
        let dropped = cache.drop_outside_since(&wt.path, mark);
        let all = [
            checks.verify,
            checks.pass_to_pass,
            checks.fail_to_pass,
            checks.acceptance,
        ];
        let interpreter = super::pycache::interpreter_of(&all);
        let how = super::pycache::Compiler {
            root: &wt.path,
            interpreter: &interpreter,
            sandbox: None,
            env_remove: &scrub,
            timeout,
            log_dir: logs.path(),
        };
        let _ = cache.relearn(dropped, &how);
        cache.drop_compiled_since(&wt.path, mark);
    }
    drop(view);
    wt.give_back()?;
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
    /// The private folder of the per-test reports (SPEC §3.9); `None`: exit codes only.
    pub tests: Option<&'a report::Private>,
}

/// The commands PO runs, in SPEC §3.8's order: verification, then `pass_to_pass` (a failure
/// is a regression), then `fail_to_pass`, then the acceptance commands.
#[derive(Debug, Clone, Copy, Default)]
pub struct Checks<'a> {
    pub verify: &'a [Vec<String>],
    pub pass_to_pass: &'a [Vec<String>],
    pub fail_to_pass: &'a [Vec<String>],
    pub acceptance: &'a [Vec<String>],
    /// The baseline's per-test reports (SPEC §3.9): what every command is graded against.
    pub baseline: &'a [CommandTests],
    /// `factory.flaky=fail`: a test that passed only when re-run still fails its command.
    pub flaky_fails: bool,
    /// The tests the work order names: the commands that report them are graded by them.
    pub named: grade::Named<'a>,
}

/// One group of PO's commands: its name (also the stem of its log files) and the stage a
/// failure in it ends the attempt with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Verify,
    PassToPass,
    FailToPass,
    Acceptance,
}

impl Phase {
    pub const ALL: [Phase; 4] = [
        Phase::Verify,
        Phase::PassToPass,
        Phase::FailToPass,
        Phase::Acceptance,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Verify => "verify",
            Phase::PassToPass => "pass_to_pass",
            Phase::FailToPass => "fail_to_pass",
            Phase::Acceptance => "acceptance",
        }
    }

    pub fn stage(self) -> Stage {
        match self {
            Phase::Verify => Stage::VerifyFailed,
            Phase::PassToPass => Stage::Regression,
            Phase::FailToPass | Phase::Acceptance => Stage::AcceptanceFailed,
        }
    }

    fn commands<'a>(self, checks: &Checks<'a>) -> &'a [Vec<String>] {
        match self {
            Phase::Verify => checks.verify,
            Phase::PassToPass => checks.pass_to_pass,
            Phase::FailToPass => checks.fail_to_pass,
            Phase::Acceptance => checks.acceptance,
        }
    }
}

#[derive(Debug, Default)]
pub struct PoOutcome {
    pub verify: Vec<CmdResult>,
    pub pass_to_pass: Vec<CmdResult>,
    pub fail_to_pass: Vec<CmdResult>,
    pub acceptance: Vec<CmdResult>,
    /// The stage of the first failing command (the last result of its phase).
    pub failed: Option<Stage>,
    failed_phase: Option<Phase>,
    /// What per-test grading found wrong with the failing command (lost and failing tests),
    /// for the head of the brief.
    pub why: Option<String>,
}

impl PoOutcome {
    pub fn results(&self, phase: Phase) -> &[CmdResult] {
        match phase {
            Phase::Verify => &self.verify,
            Phase::PassToPass => &self.pass_to_pass,
            Phase::FailToPass => &self.fail_to_pass,
            Phase::Acceptance => &self.acceptance,
        }
    }

    fn results_mut(&mut self, phase: Phase) -> &mut Vec<CmdResult> {
        match phase {
            Phase::Verify => &mut self.verify,
            Phase::PassToPass => &mut self.pass_to_pass,
            Phase::FailToPass => &mut self.fail_to_pass,
            Phase::Acceptance => &mut self.acceptance,
        }
    }

    pub fn failing_command(&self) -> Option<&CmdResult> {
        self.failed_phase.and_then(|p| self.results(p).last())
    }
}

impl PoRun<'_> {
    /// Runs one command; its logs are `<kind>_<index>_stdout.txt` / `_stderr.txt`, and its
    /// per-test report, if any, is read into its result.
    pub fn run_one(&self, kind: &str, index: usize, argv: &[String]) -> CmdResult {
        self.run_as(kind, &format!("{kind}_{index}"), argv, &[])
    }

    /// `only`: pytest node ids to run, the others deselected by the harness's plugin (a
    /// re-run of the tests that failed); empty: every test the command selects.
    pub(super) fn run_as(
        &self,
        kind: &str,
        stem: &str,
        argv: &[String],
        only: &[String],
    ) -> CmdResult {
        let mut env_set = self.env_set.clone();
        let mut sandbox = self.sandbox.clone();
        let pytest_file = self.tests.and_then(|t| {
            let file = t.next_file(stem)?;
            let dir = t.path()?;
            t.add_env(&mut env_set, &file);
            if !only.is_empty() {
                if let Some(ids) = t.write_new(&format!("{stem}_only.txt"), &only.join("\n")) {
                    env_set.push((
                        report::ONLY_VAR.to_string(),
                        ids.to_string_lossy().into_owned(),
                    ));
                }
            }
            sandbox = sandbox.take().map(|s| s.with_writable(dir.to_path_buf()));
            Some(file)
        });
        let spec = CommandSpec {
            argv: argv.to_vec(),
            cwd: self.root.to_path_buf(),
            timeout: self.timeout,
            env_remove: self.env_remove.to_vec(),
            env_set,
            stdin: None,
            label: if kind == "verify" {
                "verify"
            } else {
                "acceptance"
            },
            sandbox,
            pgid_file: self.pgid_file.clone(),
        };
        let logs = LogFiles::in_dir(&self.log_dir, &self.log_rel, stem);
        let junit = self.tests.filter(|t| !t.junit.is_empty());
        let before = junit.map(|t| report::junit::files(self.root, &t.junit));
        let mut r = exec::run(&spec, &logs);
        if self.tests.is_some() {
            let written = match (junit, before) {
                (Some(t), Some(before)) => {
                    report::junit::changed(&before, report::junit::files(self.root, &t.junit))
                }
                _ => Vec::new(),
            };
            r.tests = report::read(
                kind,
                argv,
                pytest_file.as_deref(),
                &written,
                &logs.stdout,
                r.stdout_bytes,
            );
        }
        r
    }

    /// Runs a command again for the tests `ids` that failed in `first`: the whole command,
    /// unless `first` reported through pytest; then only those node ids, collecting only
    /// their files (one test's cost, not the suite's), and the tests still red then once
    /// more among the whole collection, for a test that leans on modules other test files
    /// import. The result is the last run's, its report holding every id's latest status.
    pub fn run_again(
        &self,
        kind: &str,
        stem: &str,
        argv: &[String],
        first: &CmdResult,
        ids: &[String],
    ) -> CmdResult {
        if first.tests.as_ref().is_none_or(|t| t.source != "pytest") || ids.is_empty() {
            return self.run_as(kind, stem, argv, &[]);
        }
        let mut narrowed = vec![report::NARROW.to_string()];
        narrowed.extend(ids.iter().cloned());
        let alone = self.run_as(kind, stem, argv, &narrowed);
        let passed = |r: &CmdResult, id: &str| {
            r.tests
                .iter()
                .flat_map(|t| t.tests.iter())
                .any(|t| t.id == id && t.status == crate::store::records::TestStatus::Passed)
        };
        let still: Vec<String> = (ids.iter())
            .filter(|id| !passed(&alone, id))
            .cloned()
            .collect();
        if still.is_empty() || alone.interrupted || alone.timed_out {
            return alone;
        }
        let mut among_all = self.run_as(kind, &format!("{stem}_all"), argv, &still);
        if let (Some(all), Some(first)) = (among_all.tests.as_mut(), alone.tests) {
            let later: std::collections::HashSet<String> =
                all.tests.iter().map(|t| t.id.clone()).collect();
            let earlier = first.tests.into_iter().filter(|t| !later.contains(&t.id));
            all.tests.splice(0..0, earlier);
        }
        among_all
    }

    /// Runs one command and grades it per test against the baseline; a command whose only
    /// failures are tests that passed on the baseline runs once more (flakes once).
    pub fn run_graded(
        &self,
        phase: Phase,
        index: usize,
        argv: &[String],
        checks: &Checks<'_>,
    ) -> (CmdResult, grade::Judgement) {
        let kind = phase.as_str();
        let base = grade::find(checks.baseline, kind, argv);
        let mut r = self.run_one(kind, index, argv);
        grade::join(&mut r, base);
        let f2p = phase == Phase::FailToPass;
        let by_names = checks.named.judges(base);
        let judge = |r: &CmdResult| match by_names {
            true => grade::judge_named(r, &checks.named, checks.flaky_fails),
            false => grade::judge(r, f2p, checks.flaky_fails),
        };
        let mut j = judge(&r);
        if j.wants_rerun(&r) && !r.interrupted {
            let ids: Vec<String> = j.regression.iter().map(|(id, _)| id.clone()).collect();
            let stem = format!("{kind}_{index}_rerun");
            let mut again = self.run_again(kind, &stem, argv, &r, &ids);
            grade::join(&mut again, base);
            r = grade::merge_rerun(r, again);
            j = judge(&r);
        }
        (r, j)
    }

    /// Runs verification then acceptance (no contract).
    pub fn run<G>(
        &self,
        verify: &[Vec<String>],
        acceptance: &[Vec<String>],
        on_command: impl FnMut(&str, &[String]) -> G,
    ) -> PoOutcome {
        let checks = Checks {
            verify,
            acceptance,
            ..Checks::default()
        };
        self.run_checks(&checks, on_command)
    }

    /// Runs every phase in order, stopping at the first command that does not succeed.
    /// `on_command` is told before each command starts; what it returns (a progress line) is
    /// dropped when the command ends.
    pub fn run_checks<G>(
        &self,
        checks: &Checks<'_>,
        mut on_command: impl FnMut(&str, &[String]) -> G,
    ) -> PoOutcome {
        let mut out = PoOutcome::default();
        for phase in Phase::ALL {
            for (i, argv) in phase.commands(checks).iter().enumerate() {
                let shown = on_command(phase.as_str(), argv);
                let (r, judged) = self.run_graded(phase, i, argv, checks);
                drop(shown);
                out.results_mut(phase).push(r);
                if !judged.ok {
                    out.failed = Some(judged.stage(phase.stage()));
                    out.failed_phase = Some(phase);
                    out.why = Some(grade::describe(&judged)).filter(|w| !w.is_empty());
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
    fn phases_run_in_the_contract_order_and_stop_at_the_first_failure() {
        let dir = tempfile::tempdir().expect("tempdir");
        let logs = tempfile::tempdir().expect("tempdir");
        let po = PoRun {
            root: dir.path(),
            timeout: Duration::from_secs(30),
            env_remove: &[],
            env_set: Vec::new(),
            log_dir: logs.path().to_path_buf(),
            log_rel: String::new(),
            sandbox: None,
            pgid_file: None,
            tests: None,
        };
        let argv = |s: &str| -> Vec<Vec<String>> { vec![shlex::split(s).expect("splits")] };
        let (t, f) = (argv("true"), argv("false"));
        let mut seen = Vec::new();
        let all = Checks {
            verify: &t,
            pass_to_pass: &t,
            fail_to_pass: &t,
            acceptance: &t,
            ..Checks::default()
        };
        let out = po.run_checks(&all, |kind, _| seen.push(kind.to_string()));
        assert_eq!(
            seen,
            ["verify", "pass_to_pass", "fail_to_pass", "acceptance"]
        );
        assert_eq!(out.failed, None);
        let regression = Checks {
            pass_to_pass: &f,
            ..all
        };
        let out = po.run_checks(&regression, |_, _| ());
        assert_eq!(out.failed, Some(Stage::Regression));
        assert!(out.fail_to_pass.is_empty() && out.acceptance.is_empty());
        assert_eq!(
            out.failing_command().map(|c| c.display()),
            Some("false".into())
        );
        let red = Checks {
            fail_to_pass: &f,
            ..all
        };
        assert_eq!(
            po.run_checks(&red, |_, _| ()).failed,
            Some(Stage::AcceptanceFailed)
        );
    }

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
