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
    /// The proposal skips, removes or loosens tests, or changes test configuration, and the
    /// work order does not allow it (SPEC §3.9).
    TestsWeakened,
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
            Stage::TestsWeakened => "tests_weakened",
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
    /// The result of `argv` before it ran: no exit, no output, no logs.
    pub fn new(argv: Vec<String>) -> CmdResult {
        CmdResult {
            command: argv,
            exit_code: None,
            timed_out: false,
            interrupted: false,
            signal: None,
            spawn_error: None,
            stdout_trunc: String::new(),
            stderr_trunc: String::new(),
            stdout_path: String::new(),
            stderr_path: String::new(),
            stdout_bytes: 0,
            stderr_bytes: 0,
            duration_seconds: 0.0,
            sandbox: None,
            sandbox_put_back: Vec::new(),
            tests: None,
        }
    }

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

/// An edit of a proposal that weakens tests (SPEC §3.9): what failed an attempt with stage
/// `tests_weakened`, or, when the work order says `tests_may_change`, what it was allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Weakening {
    pub file: String,
    /// 1-based: in the baseline file for what was removed, in the proposed file for what was
    /// added; `None` where the proposal gives no position.
    pub line: Option<usize>,
    pub what: String,
}

impl std::fmt::Display for Weakening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(n) => write!(f, "{}:{n}: {}", self.file, self.what),
            None => write!(f, "{}: {}", self.file, self.what),
        }
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

/// An attempt's token usage as the API reported it (SPEC §3.3). `input_tokens` is every input
/// token, cached ones included (Anthropic reports its cache reads and writes apart: they are
/// added in), so the count means the same on every API; `output_tokens` includes reasoning.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the provider's prompt cache (Anthropic's cache creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Those of `cache_write_tokens` kept for an hour (Anthropic's `ephemeral_1h_input_tokens`):
    /// they cost more than the five-minute writes, so they are priced apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h_tokens: Option<u64>,
    /// Output tokens spent on reasoning (part of `output_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Requests of the attempt that were billed (their usage is counted here) yet gave no
    /// answer: a stream cut after the server reported usage, an error event after it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_requests: u32,
    /// What the server itself said the requests cost, in USD (OpenRouter's `usage.cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cost_usd: Option<f64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Usage {
    /// The sum of two usages (an attempt's requests): a count is known when either knows it.
    pub fn add(&self, other: &Usage) -> Usage {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        Usage {
            input_tokens: sum(self.input_tokens, other.input_tokens),
            output_tokens: sum(self.output_tokens, other.output_tokens),
            cache_read_tokens: sum(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens: sum(self.cache_write_tokens, other.cache_write_tokens),
            cache_write_1h_tokens: sum(self.cache_write_1h_tokens, other.cache_write_1h_tokens),
            reasoning_tokens: sum(self.reasoning_tokens, other.reasoning_tokens),
            failed_requests: self.failed_requests.saturating_add(other.failed_requests),
            server_cost_usd: match (self.server_cost_usd, other.server_cost_usd) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
            },
        }
    }
}

/// What an attempt, a candidate or a run cost (SPEC §3.3 Cost). `usd` is the sum over the
/// priced requests (`null` when none was priced: never a made-up $0); `unpriced_requests`
/// counts the answers no price was found for, so a sum with some is "$x + unpriced".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub usd: Option<f64>,
    pub unpriced_requests: u32,
    /// Where the price came from: `table` (genai-prices), `override` (the user's
    /// `factory-price.*` or `factory.priceFile`), `server` (the server's own report, or an
    /// agent's), `replay` ($0), `unpriced`, or `mixed` for a sum of several.
    pub source: String,
}

impl Cost {
    pub fn priced(usd: f64, source: &str) -> Cost {
        Cost {
            usd: Some(usd),
            unpriced_requests: 0,
            source: source.to_string(),
        }
    }

    pub fn unpriced() -> Cost {
        Cost {
            usd: None,
            unpriced_requests: 1,
            source: "unpriced".to_string(),
        }
    }

    /// The sum of several costs; `None` when there are none. A figure that is no bill
    /// (negative, or not finite: a record can come from anyone) adds nothing.
    pub fn sum<'a>(costs: impl IntoIterator<Item = &'a Cost>) -> Option<Cost> {
        let mut total: Option<Cost> = None;
        for c in costs {
            let sane;
            let c = if c.usd.is_some_and(|u| !u.is_finite() || u < 0.0) {
                sane = Cost {
                    usd: None,
                    ..c.clone()
                };
                &sane
            } else {
                c
            };
            total = Some(match total {
                None => c.clone(),
                Some(t) => Cost {
                    usd: match (t.usd, c.usd) {
                        (None, None) => None,
                        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
                    },
                    unpriced_requests: t.unpriced_requests.saturating_add(c.unpriced_requests),
                    source: if t.source == c.source {
                        t.source
                    } else {
                        "mixed".to_string()
                    },
                },
            });
        }
        total
    }

    /// As people read it: `$0.0123`, `$0.0123 + unpriced`, `unpriced`.
    pub fn display(&self) -> String {
        match (self.usd, self.unpriced_requests) {
            (None, _) => "unpriced".to_string(),
            (Some(usd), 0) => usd_words(usd),
            (Some(usd), _) => format!("{} + unpriced", usd_words(usd)),
        }
    }
}

/// Dollars with four decimals, or as many significant digits as a small sum needs.
pub fn usd_words(usd: f64) -> String {
    if usd != 0.0 && usd.abs() < 0.0001 {
        format!("${usd:.6}")
    } else {
        format!("${usd:.4}")
    }
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
    /// The proposal's edits that weaken tests (SPEC §3.9): refused, or allowed by
    /// `tests_may_change`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weakening: Vec<Weakening>,
    /// What the attempt's requests cost (SPEC §3.3 Cost); none when it made no request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// When each of its billed requests was made (UTC): each was priced at the rates in
    /// effect then. A record only: no identity is made of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requested_utc: Vec<String>,
    /// Per-test counts (SPEC §3.9), when any of the attempt's checks reported tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestCounts>,
}

/// The file in an attempt's folder that keeps what its requests used and cost, written as
/// soon as they are done: `recover` reads it back for an attempt whose record a killed run
/// never wrote.
pub const USAGE_FILE: &str = "usage.json";

/// What `USAGE_FILE` holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct KeptUsage {
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    cost: Option<Cost>,
    #[serde(default)]
    requested_utc: Vec<String>,
}

impl AttemptRecord {
    /// Writes what the attempt's requests used and cost into its folder (`USAGE_FILE`),
    /// when they used or cost anything; best effort, as the record itself is written later.
    pub fn keep_usage(&self, dir: &std::path::Path) {
        if self.usage.is_none() && self.cost.is_none() {
            return;
        }
        let kept = KeptUsage {
            usage: self.usage.clone(),
            cost: self.cost.clone(),
            requested_utc: self.requested_utc.clone(),
        };
        if let Ok(text) = serde_json::to_vec_pretty(&kept) {
            let _ = std::fs::write(dir.join(USAGE_FILE), text);
        }
    }

    /// An attempt rebuilt from the files its folder holds, for a run killed before the
    /// attempt's record was written (`recover`): what reached disk is kept, what did not is
    /// left empty.
    pub fn from_folder(run_dir: &std::path::Path, index: u32, baseline: &str) -> AttemptRecord {
        let rel = format!("attempt_{index}");
        let dir = run_dir.join(&rel);
        fn read<T: serde::de::DeserializeOwned>(path: std::path::PathBuf) -> Option<T> {
            serde_json::from_slice(&std::fs::read(path).ok()?).ok()
        }
        let commands = |name: &str| read::<Vec<CmdResult>>(dir.join(name)).unwrap_or_default();
        let applied: Option<serde_json::Value> = read(dir.join("apply_result.json"));
        let field = |name: &str| applied.as_ref().and_then(|a| a.get(name));
        let kept: KeptUsage = read(dir.join(USAGE_FILE)).unwrap_or_default();
        let patch_path = ["proposed_patch.diff", "proposed_writes.json"]
            .iter()
            .find(|f| dir.join(f).is_file())
            .map(|f| format!("{rel}/{f}"))
            .unwrap_or_default();
        AttemptRecord {
            attempt_index: index,
            baseline_commit: baseline.to_string(),
            patch_path,
            touched_files: field("touched_files")
                .and_then(|t| serde_json::from_value(t.clone()).ok())
                .unwrap_or_default(),
            apply_ok: field("ok")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
            verify: commands("verify_result.json"),
            pass_to_pass: commands("pass_to_pass_result.json"),
            fail_to_pass: commands("fail_to_pass_result.json"),
            acceptance: commands("acceptance_result.json"),
            failure_brief: read(dir.join("failure_brief.json")),
            apply_method: field("method")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
            usage: kept.usage,
            summary: None,
            tree_commit: None,
            repeat_of: None,
            duration_seconds: 0.0,
            dropped_params: Vec::new(),
            api_switch: None,
            served_model: None,
            cost: kept.cost,
            requested_utc: kept.requested_utc,
            tests: None,
            weakening: field("weakening")
                .and_then(|w| serde_json::from_value(w.clone()).ok())
                .unwrap_or_default(),
            reasoning_path: dir
                .join("reasoning.txt")
                .is_file()
                .then(|| format!("{rel}/reasoning.txt")),
        }
    }
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
    /// What the whole run cost: every attempt of every candidate (SPEC §3.3 Cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
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
    /// What the candidate's attempts cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
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
    /// Test-weakening edits allowed by `tests_may_change` (file, line, what), as TR found them.
    #[serde(default)]
    pub weakening: Vec<Weakening>,
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

impl TestCounts {
    /// An attempt's per-test counts in one line (SPEC §3.9).
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        );
        if self.flaky > 0 {
            s.push_str(&format!(", {} flaky", self.flaky));
        }
        if self.fail_to_pass_total > 0 {
            s.push_str(&format!(
                "; fail_to_pass {}/{}",
                self.fail_to_pass_met, self.fail_to_pass_total
            ));
        }
        if self.pass_to_pass_total > 0 {
            s.push_str(&format!(
                "; pass_to_pass {}/{}",
                self.pass_to_pass_kept, self.pass_to_pass_total
            ));
        }
        s
    }
}
