//! What a run was asked to do, and how it ended: the hand-offs between the command line and
//! the run pipeline.

use crate::error::Exit;
use crate::roles::se::provider::ProviderSpec;
use crate::store::records::{RunSummary, Verdict};
use crate::workorder::LoadedWorkOrder;
use std::path::PathBuf;

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
    /// A batch's baseline: the commit its runs start from, whatever HEAD is now (SPEC §5.2).
    pub pinned_baseline: Option<String>,
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
    /// `--max-cost` / `factory.maxCost`: the dollar budget over all attempts and candidates.
    pub max_cost: Option<f64>,
    /// `--attest` / `--no-attest` as given (SPEC §6.1); none → git config `factory.attest`.
    pub attest: Option<bool>,
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
