//! The serde records a run leaves behind (seed 000 §4, SPEC §4). Field order is the JSON key
//! order; fields are only ever added, never renamed.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Preflight,
    LlmOutputInvalid,
    LlmCallFailed,
    PatchScopeViolation,
    PatchApplyFailed,
    VerifyFailed,
    /// A `pass_to_pass` command, or a test, that passed on the baseline fails after the change.
    Regression,
    AcceptanceFailed,
    /// An agent changed the repo outside its scratch worktree (`.git/config`, hooks, refs, the
    /// user's tree or index); put back, and the attempt failed (SPEC §7).
    AgentEscaped,
    Interrupted,
    Exception,
    /// The run needed no attempt: every `fail_to_pass` command already passes (SPEC §3.8).
    AlreadySatisfied,
    /// The `--max-tokens` budget ran out (SPEC §1.1): the run stops with verdict FAIL.
    BudgetExhausted,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Preflight => "preflight",
            Stage::LlmOutputInvalid => "llm_output_invalid",
            Stage::LlmCallFailed => "llm_call_failed",
            Stage::PatchScopeViolation => "patch_scope_violation",
            Stage::PatchApplyFailed => "patch_apply_failed",
            Stage::VerifyFailed => "verify_failed",
            Stage::Regression => "regression",
            Stage::AcceptanceFailed => "acceptance_failed",
            Stage::AgentEscaped => "agent_escaped",
            Stage::Interrupted => "interrupted",
            Stage::Exception => "exception",
            Stage::AlreadySatisfied => "already_satisfied",
            Stage::BudgetExhausted => "budget_exhausted",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
    Error,
    Interrupted,
    /// Written while the run is in progress; a record left so is finished by `recover`.
    Running,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Error => "ERROR",
            Verdict::Interrupted => "INTERRUPTED",
            Verdict::Running => "RUNNING",
        }
    }

    /// Only finished verdicts are served from the cache of runs.
    pub fn is_final(self) -> bool {
        matches!(self, Verdict::Pass | Verdict::Fail)
    }
}

/// What one command did. Exit, timeout, signal and spawn failure are kept apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CmdResult {
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Stopped because the run was interrupted (SIGINT/SIGTERM).
    #[serde(default)]
    pub interrupted: bool,
    pub signal: Option<i32>,
    pub spawn_error: Option<String>,
    pub stdout_trunc: String,
    pub stderr_trunc: String,
    /// Relative to the run's artifact folder.
    pub stdout_path: String,
    pub stderr_path: String,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub duration_seconds: f64,
    /// The backend that confined the command under `--sandbox` (`bwrap`, `landlock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Read-only files the command changed that the sandbox put back (where its backend
    /// could not single them out), relative to the tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox_put_back: Vec<String>,
    /// The tests the command reported, graded (SPEC §3.9); stored in `tests.json`, not in
    /// the summary.
    #[serde(skip)]
    pub tests: Option<CommandTests>,
}

impl CmdResult {
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
            && !self.timed_out
            && !self.interrupted
            && self.spawn_error.is_none()
    }

    /// One line on how it ended, for briefs and reports.
    pub fn outcome(&self) -> String {
        if let Some(e) = &self.spawn_error {
            format!("could not start: {e}")
        } else if self.interrupted {
            "interrupted".to_string()
        } else if self.timed_out {
            "timed out".to_string()
        } else if let Some(sig) = self.signal {
            format!("killed by signal {sig}")
        } else {
            format!("exit {}", self.exit_code.unwrap_or(-1))
        }
    }

    pub fn display(&self) -> String {
        shlex::try_join(self.command.iter().map(String::as_str))
            .unwrap_or_else(|_| self.command.join(" "))
    }
}

/// The bounded feedback the next attempt's prompt gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureBrief {
    pub stage: Stage,
    pub command: Option<String>,
    pub exit_code: Option<i32>,
    pub primary_error_excerpt: String,
    pub constraints_reminder: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

impl AttemptRecord {
    /// Every command the attempt ran, in order.
    pub fn commands(&self) -> impl Iterator<Item = &CmdResult> {
        (self.verify.iter())
            .chain(&self.pass_to_pass)
            .chain(&self.fail_to_pass)
            .chain(&self.acceptance)
    }

    /// The backend that confined the attempt's checks under `--sandbox` (SPEC §7.1).
    pub fn sandbox(&self) -> Option<&str> {
        self.commands().find_map(|c| c.sandbox.as_deref())
    }

    /// Read-only files the sandbox put back after the attempt's checks changed them.
    pub fn sandbox_put_back(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in self.commands().flat_map(|c| &c.sandbox_put_back) {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub attempt_index: u32,
    pub baseline_commit: String,
    pub patch_path: String,
    pub touched_files: Vec<String>,
    pub apply_ok: bool,
    pub verify: Vec<CmdResult>,
    /// The contract's commands (SPEC §3.8), run between verification and acceptance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_to_pass: Vec<CmdResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_to_pass: Vec<CmdResult>,
    pub acceptance: Vec<CmdResult>,
    pub failure_brief: Option<FailureBrief>,
    pub apply_method: Option<String>,
    pub usage: Option<Usage>,
    pub summary: Option<String>,
    /// The attempt commit (parent: baseline; tree: the repo after this attempt's change).
    pub tree_commit: Option<String>,
    /// Set when this attempt repeated an earlier attempt's change and was not re-verified.
    pub repeat_of: Option<u32>,
    pub duration_seconds: f64,
    /// Optional request parameters the server refused by name and the attempt went on
    /// without (SPEC §3.3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_params: Vec<String>,
    /// `chat -> responses` (or back) when the server said the model lives on the other API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_switch: Option<String>,
    /// The model the answer says it came from, when it names one (SPEC §3.3): a dated
    /// snapshot behind the alias the run asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_model: Option<String>,
    /// Where the model's reasoning text is stored, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_path: Option<String>,
    /// Per-test counts (SPEC §3.9), when any of the attempt's checks reported tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestCounts>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub model: String,
    pub temperature: f64,
    pub max_attempts: u32,
    pub timeout_seconds: u64,
    pub prompt_version: String,
    pub apply: String,
    pub config_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    pub repo_path: String,
    pub work_order_path: String,
    pub work_order_hash: String,
    pub repo_baseline_commit: String,
    pub repo_tree_hash_before: String,
    pub repo_tree_hash_after: String,
    pub max_attempts: u32,
    pub attempts: Vec<AttemptRecord>,
    pub verdict: Verdict,
    pub ended_stage: String,
    pub started_utc: String,
    pub ended_utc: String,
    pub tool_version: String,
    pub mode: String,
    pub config: RunConfig,
    pub result_commit: Option<String>,
    pub duration_seconds: f64,
    pub work_order_id: String,
    pub work_order_title: String,
    /// Files that verification or acceptance commands changed outside the change; restored.
    pub side_effects: Vec<String>,
    /// Why the run could not finish (verdict ERROR), in one line.
    pub error: Option<String>,
    /// Best of N (SPEC §5.1): every candidate, in index order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<CandidateRecord>,
    /// A race's winner (SPEC §5.1): `Some(Some(i))` candidate i, `Some(None)` a race that no
    /// candidate passed (written `"winner": null`), `None` no race (no key).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub winner: Option<Option<u32>>,
    /// `false` when a PASS was not delivered (the user's tree changed during a race): the
    /// change is kept in the record for `git factory apply`. No key when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<bool>,
    /// The work order's red→green contract and the paths it protects (SPEC §3.5, §3.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<Contract>,
    /// What the contract's commands did on the baseline, before any model call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_check: Option<BaselineCheck>,
    /// When the run started, in milliseconds since the epoch: `log` orders runs started in
    /// the same second by it (absent in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_ms: Option<i64>,
}

/// One candidate of a race; its attempts' artifacts are under `candidate_<index>/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRecord {
    /// 1-based.
    pub index: u32,
    pub model: String,
    pub verdict: Verdict,
    pub ended_stage: String,
    pub attempts: u32,
    /// The git tree id of baseline + the candidate's change: equal change sets, equal ids.
    pub change_set: Option<String>,
    /// Lines added plus lines removed by the change.
    pub changed_lines: Option<u64>,
    /// Input plus output tokens its answers reported.
    pub tokens: u64,
    pub duration_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The model that answered the candidate's last answered attempt (SPEC §3.3, "The model
    /// that answered"), where the answer named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_model: Option<String>,
    /// Per-test counts of the candidate's last attempt that ran checks (SPEC §3.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestCounts>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contract {
    pub fail_to_pass: Vec<String>,
    pub pass_to_pass: Vec<String>,
    /// Paths and patterns no proposal may touch, each with why.
    pub protected: Vec<ProtectedPath>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProtectedPath {
    pub path: String,
    pub why: String,
}

/// The baseline check of SPEC §3.8.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineCheck {
    /// `red` (the run proceeds) or `already_satisfied`.
    pub result: String,
    pub commands: Vec<BaselineResult>,
}

/// One command's result on the baseline, run now or taken from the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineResult {
    /// `verify`, `pass_to_pass` or `fail_to_pass`.
    pub kind: String,
    pub command: Vec<String>,
    pub passed: bool,
    pub exit_code: Option<i32>,
    /// How it ended, in words (`exit 1`, `timed out`, …).
    pub outcome: String,
    /// The tail of its output (empty when it passed).
    pub excerpt: String,
    pub duration_seconds: f64,
    /// Taken from `refs/notes/factory-verify` instead of run.
    pub cached: bool,
}

impl BaselineResult {
    pub fn display(&self) -> String {
        shlex::try_join(self.command.iter().map(String::as_str))
            .unwrap_or_else(|_| self.command.join(" "))
    }
}

/// A key that is present is `Some`, even when its value is `null`.
fn present<'de, D, T>(d: D) -> std::result::Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// One test's status in a report (SPEC §3.9). `Missing`: the baseline's report of the same
/// command named it and this one does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestStatus {
    Passed,
    Failed,
    Error,
    Skipped,
    Xfailed,
    Xpassed,
    Missing,
}

impl TestStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TestStatus::Passed => "passed",
            TestStatus::Failed => "failed",
            TestStatus::Error => "error",
            TestStatus::Skipped => "skipped",
            TestStatus::Xfailed => "xfailed",
            TestStatus::Xpassed => "xpassed",
            TestStatus::Missing => "missing",
        }
    }

    /// A red result: what fails its command.
    pub fn is_red(self) -> bool {
        matches!(self, TestStatus::Failed | TestStatus::Error)
    }
}

/// One test of one command's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub id: String,
    pub status: TestStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    /// The failure message's first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A bounded excerpt of the failure text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
    /// Failed, then passed when its command ran once more (SPEC §3.9, flakes once).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flaky: bool,
    /// Its status on the baseline, when the baseline's report of the command had it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<TestStatus>,
}

/// The tests one command reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandTests {
    /// `verify`, `pass_to_pass`, `fail_to_pass` or `acceptance`.
    pub kind: String,
    pub command: Vec<String>,
    /// Where the results came from: `pytest`, `junit`, `go`, `tap`, `libtest`.
    pub source: String,
    pub tests: Vec<TestResult>,
    /// Whether the command was run a second time (flakes once).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rerun: bool,
}

impl CommandTests {
    pub fn display(&self) -> String {
        shlex::try_join(self.command.iter().map(String::as_str))
            .unwrap_or_else(|_| self.command.join(" "))
    }

    /// The tests that fail the command (red, never a flake that passed again).
    pub fn red(&self) -> impl Iterator<Item = &TestResult> {
        self.tests.iter().filter(|t| t.status.is_red() && !t.flaky)
    }
}

/// An attempt's `tests.json` (SPEC §3.9).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestsRecord {
    pub commands: Vec<CommandTests>,
    /// Test-weakening edits allowed by `tests_may_change` (file, line, what); filled by TR.
    #[serde(default)]
    pub weakening: Vec<serde_json::Value>,
}

/// Per-test counts in `run_summary.json` (per attempt and per candidate).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestCounts {
    pub passed: u32,
    pub failed: u32,
    pub skipped: u32,
    pub flaky: u32,
    /// Baseline-red tests of `fail_to_pass` commands (or named ones) that pass now, of all.
    pub fail_to_pass_met: u32,
    pub fail_to_pass_total: u32,
    /// Tests that passed on the baseline and pass again, of all that passed on it.
    pub pass_to_pass_kept: u32,
    pub pass_to_pass_total: u32,
}
