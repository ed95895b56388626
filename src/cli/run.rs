//! `git factory run`: one work order through the loop.

use crate::error::{Error, Exit, Result};
use crate::run::{self, asked::Asked, RunReport};
use crate::store::records::{RunSummary, Verdict};
use crate::ui::{self, Ui};
use crate::workorder::LoadedWorkOrder;
use clap::Args;
use serde_json::{json, Map, Value};
use std::io::Read;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The work order JSON file (`-` reads stdin); several files (`-w orders/*.json`, or -w
    /// given more than once) are a batch: each its own run in a worktree, --jobs at once
    #[arg(
        short = 'w',
        long = "work-order",
        value_name = "FILE",
        num_args = 1..,
        action = clap::ArgAction::Append
    )]
    pub work_order: Vec<String>,
    /// The product repo (default: discovered from the current directory, like git)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Also write the file artifacts to DIR/<run_id>/ (must be outside the work tree)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The model, as [PROVIDER:]MODEL: openai: (default) or anthropic: [config: factory.model];
    /// repeatable with --candidates: candidate i uses the models in turn
    #[arg(long = "llm-model", value_name = "[PROVIDER:]MODEL")]
    pub llm_model: Vec<String>,
    /// Base URL of an OpenAI-compatible server [env: OPENAI_BASE_URL] [config: factory.baseUrl]
    #[arg(long = "llm-base-url", value_name = "URL")]
    pub llm_base_url: Option<String>,
    /// Sampling temperature [default: 0] [config: factory.temperature]
    #[arg(long = "llm-temperature", value_name = "F")]
    pub llm_temperature: Option<f64>,
    /// Which OpenAI API to speak [default: responses on OpenAI's own URL, chat elsewhere] [config: factory.api]
    #[arg(long = "llm-api", value_name = "API", value_parser = ["responses", "chat"])]
    pub llm_api: Option<String>,
    /// Output limit per answer, in tokens [default: the provider's] [config: factory.maxOutputTokens]
    #[arg(long = "llm-max-output-tokens", value_name = "N")]
    pub llm_max_output_tokens: Option<u64>,
    /// Reasoning effort where the API has it: low, medium, high (or the API's higher levels) [config: factory.reasoningEffort]
    #[arg(long = "llm-reasoning-effort", value_name = "E")]
    pub llm_reasoning_effort: Option<String>,
    /// SE is an external program that reads the request as JSON on stdin and prints its proposal
    #[arg(long = "agent-command", value_name = "ARGV")]
    pub agent_command: Option<String>,
    /// SE is a coding agent that edits files in a scratch worktree; its diff is the proposal
    /// ({prompt_file} and {attempt} in an argument are replaced)
    #[arg(long = "agent-edits", value_name = "ARGV")]
    pub agent_edits: Option<String>,
    /// Time limit in seconds for one agent invocation [default: 1800] [config: factory.agentTimeout]
    #[arg(long = "agent-timeout", value_name = "S")]
    pub agent_timeout: Option<u64>,
    /// SE replays recorded proposals from a folder (1.json, 2.json, … or 1.diff, 2.diff, …)
    #[arg(long, value_name = "PATH")]
    pub replay: Option<PathBuf>,
    /// SE → TR → PO attempts [default: 2] [config: factory.maxAttempts]
    #[arg(long = "max-attempts", value_name = "N")]
    pub max_attempts: Option<u32>,
    /// Time limit in seconds for each command [default: 600] [config: factory.timeoutSeconds]
    #[arg(long = "timeout-seconds", value_name = "S")]
    pub timeout_seconds: Option<u64>,
    /// Only the strict apply pass: every hunk exactly where its header says
    #[arg(long = "strict-apply")]
    pub strict_apply: bool,
    /// Run again even though a finished run with this run_id exists; with --branch, move an existing branch
    #[arg(long)]
    pub force: bool,
    /// Validate, preflight and print the first prompt; call nothing, change nothing
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Print the final run summary as JSON on stdout
    #[arg(long)]
    pub json: bool,
    /// Run in a fresh worktree at HEAD; your tree, index and branch are never touched; a PASS is
    /// committed on branch factory/run-<run_id> (or --branch NAME)
    #[arg(long)]
    pub worktree: bool,
    /// The HEAD a batch started from, which each of its runs starts from (SPEC §5.2): set by
    /// the batch, handed to its runs through the environment (`env::BATCH_BASELINE`), never a
    /// flag of its own
    #[arg(skip)]
    pub batch_baseline: Option<String>,
    /// On PASS, commit the change on the current branch (Conventional Commits message)
    #[arg(long)]
    pub commit: bool,
    /// On PASS, deliver the change on branch NAME (in-situ: created at the baseline and checked out)
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// Run verification and acceptance confined (bubblewrap or Landlock, by
    /// factory.sandboxBackend): no network, nothing writable but the tree's own files (never
    /// .git, never pre-existing ignored files) and a private TMPDIR; an --agent-edits agent
    /// too, with the network on, writing only its worktree and factory.agentWritable
    /// [config: factory.sandbox]
    #[arg(long, overrides_with = "no_sandbox")]
    pub sandbox: bool,
    /// Run the checks without the sandbox, whatever factory.sandbox says
    #[arg(long = "no-sandbox", overrides_with = "sandbox")]
    pub no_sandbox: bool,
    /// Before any model call, run verification and the contract (pass_to_pass, fail_to_pass)
    /// on the baseline [default: on when the work order has a contract] [config: factory.baselineCheck]
    #[arg(long = "baseline-check", overrides_with = "no_baseline_check")]
    pub baseline_check: bool,
    /// Do not run the baseline check
    #[arg(long = "no-baseline-check", overrides_with = "baseline_check")]
    pub no_baseline_check: bool,
    /// Best of N: N independent candidates in their own worktrees; the checks pick the winner
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub candidates: u32,
    /// Candidates (or a batch's runs) at once [default: min(N, CPUs); a batch: CPUs]
    #[arg(long, value_name = "J")]
    pub jobs: Option<u32>,
    /// Token budget for the whole run (all attempts and candidates), from the providers'
    /// reported usage; exceeded → the run stops with stage budget_exhausted (FAIL)
    #[arg(long = "max-tokens", value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Dollar budget for the whole run (all attempts and candidates): the run stops with stage
    /// budget_exhausted (FAIL) before a request whose worst case would pass it; refused up
    /// front when a model has no price [config: factory.maxCost]
    #[arg(
        long = "max-cost",
        value_name = "USD",
        allow_hyphen_values = true,
        value_parser = dollars
    )]
    pub max_cost: Option<f64>,
    /// On PASS, sign the evidence for the result tree with your git signing key (an in-toto
    /// statement in a DSSE envelope, noted in refs/notes/factory-attest); no key configured is
    /// refused before anything runs [config: factory.attest]
    #[arg(long, overrides_with = "no_attest")]
    pub attest: bool,
    /// Do not sign evidence, whatever factory.attest says
    #[arg(long = "no-attest", overrides_with = "attest")]
    pub no_attest: bool,

    /// Inline work order: its id
    #[arg(long, value_name = "ID", help_heading = "Inline work order")]
    pub id: Option<String>,
    /// Inline work order: its title
    #[arg(long, value_name = "TEXT", help_heading = "Inline work order")]
    pub title: Option<String>,
    /// Inline work order: what to change and why
    #[arg(long, value_name = "TEXT", help_heading = "Inline work order")]
    pub intent: Option<String>,
    /// Inline work order: a file the change may touch (repeatable)
    #[arg(
        long = "allow",
        value_name = "PATH",
        help_heading = "Inline work order"
    )]
    pub allow: Vec<String>,
    /// Inline work order: a file shown to the model (repeatable; must also be allowed)
    #[arg(
        long = "context",
        value_name = "PATH",
        help_heading = "Inline work order"
    )]
    pub context: Vec<String>,
    /// Inline work order: an acceptance command (repeatable)
    #[arg(
        long = "accept",
        value_name = "CMD",
        help_heading = "Inline work order"
    )]
    pub accept: Vec<String>,
    /// Inline work order: a constraint shown to the model (repeatable)
    #[arg(
        long = "forbid",
        value_name = "TEXT",
        help_heading = "Inline work order"
    )]
    pub forbid: Vec<String>,
}

impl RunArgs {
    pub(crate) fn has_inline(&self) -> bool {
        self.id.is_some()
            || self.title.is_some()
            || self.intent.is_some()
            || !self.allow.is_empty()
            || !self.context.is_empty()
            || !self.accept.is_empty()
            || !self.forbid.is_empty()
    }

    fn load_work_order(&self) -> Result<LoadedWorkOrder> {
        match (self.work_order.first(), self.has_inline()) {
            (Some(_), true) => Err(Error::new(
                "--work-order and inline work-order flags were both given",
            )
            .hint("use either -w FILE or --id/--title/--intent/--allow/--accept")),
            (Some(path), false) if path == "-" => {
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text).map_err(|e| {
                    Error::new(format!("cannot read the work order from stdin: {e}"))
                })?;
                LoadedWorkOrder::from_json_text(&text, "-")
            }
            (Some(path), false) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Error::new(format!("cannot read work order {path}: {e}"))
                        .hint("pass the path of a work-order JSON file with -w")
                })?;
                LoadedWorkOrder::from_json_text(&text, path)
            }
            (None, true) => LoadedWorkOrder::from_value(self.inline_value(), "inline"),
            (None, false) => Err(Error::new("no work order given")
                .hint("pass -w FILE (or - for stdin), or --id --title --intent --allow --accept")),
        }
    }

    /// The JSON object equivalent to the inline flags (hashed like a file's).
    fn inline_value(&self) -> Value {
        let mut obj = Map::new();
        let text = |v: &Option<String>| v.clone().map(Value::String);
        for (key, value) in [
            ("id", text(&self.id)),
            ("title", text(&self.title)),
            ("intent", text(&self.intent)),
        ] {
            if let Some(v) = value {
                obj.insert(key.into(), v);
            }
        }
        let list = |v: &[String]| json!(v);
        obj.insert("allowed_files".into(), list(&self.allow));
        obj.insert("acceptance_commands".into(), list(&self.accept));
        if !self.context.is_empty() {
            obj.insert("context_files".into(), list(&self.context));
        }
        if !self.forbid.is_empty() {
            obj.insert("forbidden".into(), list(&self.forbid));
        }
        Value::Object(obj)
    }
}

impl RunArgs {
    /// The flags as the library takes them.
    fn asked(&self) -> Asked {
        Asked {
            repo: self.repo.clone(),
            out: self.out.clone(),
            llm_model: self.llm_model.clone(),
            llm_base_url: self.llm_base_url.clone(),
            llm_temperature: self.llm_temperature,
            llm_api: self.llm_api.clone(),
            llm_max_output_tokens: self.llm_max_output_tokens,
            llm_reasoning_effort: self.llm_reasoning_effort.clone(),
            agent_command: self.agent_command.clone(),
            agent_edits: self.agent_edits.clone(),
            agent_timeout: self.agent_timeout,
            replay: self.replay.clone(),
            max_attempts: self.max_attempts,
            timeout_seconds: self.timeout_seconds,
            strict_apply: self.strict_apply,
            force: self.force,
            dry_run: self.dry_run,
            worktree: self.worktree,
            pinned_baseline: crate::env::batch_baseline(),
            commit: self.commit,
            branch: self.branch.clone(),
            sandbox: self.sandbox,
            no_sandbox: self.no_sandbox,
            baseline_check: self.baseline_check,
            no_baseline_check: self.no_baseline_check,
            candidates: self.candidates,
            jobs: self.jobs,
            max_tokens: self.max_tokens,
            max_cost: self.max_cost,
            attest: self.attest,
            no_attest: self.no_attest,
        }
    }
}

pub fn cmd_run(ui: &Ui, args: RunArgs) -> Result<Exit> {
    let opts = args.asked().resolve(args.load_work_order()?)?;
    crate::interrupt::install();
    let order = opts.work_order.order.clone();
    match run::run(opts, ui)? {
        RunReport::DryRun { prompt } => {
            ui.out(prompt);
            ui.always("dry run: nothing was called and nothing changed");
            Ok(Exit::Success)
        }
        RunReport::Cached { summary } => report_cached(ui, &args, &summary, &order),
        RunReport::Finished { summary, out } => {
            report(ui, &summary);
            if args.json {
                print_json(ui, &summary);
            }
            final_line(ui, &summary, out.as_deref());
            // Output that closed only now, after the record was final (rolled back or
            // delivered, and written): the record stays the truth (`git factory show` has
            // it) and is not rewritten; the exit status is all the caller can still get,
            // and says its output was lost, as SIGINT would.
            if crate::interrupt::requested() {
                return Ok(Exit::Interrupted);
            }
            // A PASS whose asked-for commit a hook refused did not finish what was asked.
            if summary.verdict == Verdict::Pass && summary.error.is_some() {
                return Ok(Exit::Refused);
            }
            Ok(run::exit_for(summary.verdict))
        }
    }
}

/// A run served from the cache (SPEC §5): where its change is, or with `--commit`/`--branch`
/// that change delivered as a new run would.
fn report_cached(
    ui: &Ui,
    args: &RunArgs,
    summary: &RunSummary,
    order: &crate::workorder::WorkOrder,
) -> Result<Exit> {
    // In --worktree mode a PASS is already on its branch; --commit adds nothing there.
    let deliver = summary.verdict == Verdict::Pass
        && (args.branch.is_some() || (args.commit && !args.worktree));
    let (where_, hint, note) = if deliver {
        let commit = super::cached::deliver(
            args.repo.as_deref(),
            summary,
            order,
            args.branch.as_deref(),
            args.worktree,
        )?;
        let short = crate::git::short(&commit.to_string()).to_string();
        let place = match &args.branch {
            Some(name) => format!("on branch {name}"),
            None => "on the current branch".to_string(),
        };
        (
            format!("its recorded change is now committed {place} as {short}"),
            None,
            format!("from the cache; committed as {short}"),
        )
    } else {
        let repo = crate::git::open(args.repo.as_deref())?;
        let (where_, hint) = super::cached::whereabouts(&repo, summary);
        (where_, Some(hint), "from the cache".to_string())
    };
    if args.json {
        print_json(ui, summary);
    }
    ui.info(format!(
        "run {} is already recorded ({}); nothing was run again: {where_}",
        summary.run_id,
        summary.verdict.as_str()
    ));
    if let Some(hint) = hint {
        ui.info(format!("{} {hint}", console::style("hint:").cyan().bold()));
    }
    final_line_noted(ui, summary, None, Some(note));
    Ok(run::exit_for(summary.verdict))
}

pub fn print_json(ui: &Ui, summary: &RunSummary) {
    let mut text = serde_json::to_string_pretty(summary).unwrap_or_default();
    text.push('\n');
    ui.out(text);
}

/// The per-attempt table shown after a run, like the seeds' result display.
pub fn report(ui: &Ui, s: &RunSummary) {
    for a in &s.attempts {
        let stage = a
            .failure_brief
            .as_ref()
            .map(|b| b.stage.as_str())
            .unwrap_or("passed");
        ui.info(format!(
            "  attempt {}: {:<22} {:<8} {:.2}s",
            a.attempt_index,
            stage,
            a.apply_method.as_deref().unwrap_or("-"),
            a.duration_seconds
        ));
        if let Some(t) = &a.tests {
            ui.info(format!("    tests: {}", t.line()));
        }
    }
    // A race with no PASS says how far each candidate got with the red tests (SPEC §3.9).
    if s.verdict != crate::store::records::Verdict::Pass {
        for c in &s.candidates {
            if let Some(t) = c.tests.as_ref().filter(|t| t.fail_to_pass_total > 0) {
                ui.info(format!(
                    "  candidate {}: turned {} of {} fail_to_pass tests green",
                    c.index, t.fail_to_pass_met, t.fail_to_pass_total
                ));
            }
        }
    }
    if !s.side_effects.is_empty() {
        ui.info(format!(
            "  restored side effects: {}",
            s.side_effects.join(", ")
        ));
    }
    // An undelivered PASS names why on its final line instead.
    if let (Some(e), None) = (&s.error, s.delivered) {
        let e = crate::ui::escape_controls(e);
        ui.always(format!("{} {e}", console::style("error:").red().bold()));
    }
}

/// "2 attempts", or for a race the attempts its candidates made: "5 attempts in 3 candidates"
/// (the winner's check where it lands is not one of them).
pub fn attempts_made(s: &RunSummary) -> String {
    let plural = |n: u64, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    if s.candidates.is_empty() {
        return plural(s.attempts.len() as u64, "attempt");
    }
    let made: u64 = s.candidates.iter().map(|c| u64::from(c.attempts)).sum();
    format!(
        "{} in {}",
        plural(made, "attempt"),
        plural(s.candidates.len() as u64, "candidate")
    )
}

/// ` on branch factory/run-<run_id>` when the run's own branch holds its result (not under
/// `--branch NAME`, which the user named and knows): the name to merge, never
/// `factory/<run_id>`, which git reads as the record `refs/factory/<run_id>` first.
fn on_run_branch(s: &RunSummary, commit: &str) -> String {
    git2::Repository::open_from_env()
        .ok()
        .and_then(|repo| crate::store::run_branch_at(&repo, &s.run_id, commit))
        .map(|b| format!(" on branch {b}"))
        .unwrap_or_default()
}

pub fn final_line(ui: &Ui, s: &RunSummary, out: Option<&std::path::Path>) {
    final_line_noted(ui, s, out, None)
}

/// The verdict line; `note` (a run served from the cache) replaces the words on where a
/// PASS's change is.
pub fn final_line_noted(
    ui: &Ui,
    s: &RunSummary,
    out: Option<&std::path::Path>,
    note: Option<String>,
) {
    let mut line = format!(
        "{} {} after {} ({}) → refs/factory/{}",
        ui::verdict(s.verdict),
        s.run_id,
        attempts_made(s),
        s.ended_stage,
        s.run_id
    );
    if let Some(out) = out {
        line.push_str(&format!(", {}", out.join("run_summary.json").display()));
    }
    if let Some(note) = note {
        line.push_str(&ui::dim(format!("  ({note})")));
    } else if let (Verdict::Pass, Some(false)) = (s.verdict, s.delivered) {
        // A race whose winner found the user's tree changed (SPEC §5.1).
        let why = s.error.as_deref().unwrap_or("not delivered");
        line.push_str(&format!("  ({})", crate::ui::escape_controls(why)));
    } else if s.verdict == Verdict::Pass {
        let note = match (&s.result_commit, s.mode.as_str()) {
            (Some(c), "worktree") => format!(
                "  (committed as {}{}; bring it in with git factory apply {})",
                crate::git::short(c),
                on_run_branch(s, c),
                s.run_id
            ),
            (Some(c), _) => format!("  (committed as {})", crate::git::short(c)),
            (None, _) if s.ended_stage == "already_satisfied" => {
                "  (already satisfied at the baseline: nothing to change)".to_string()
            }
            (None, _) => "  (the change is in your work tree, uncommitted)".to_string(),
        };
        line.push_str(&ui::dim(note));
    }
    ui.always(line);
}

/// `--max-cost` as written: any number (a NaN, a negative or an infinite one is refused with
/// its fix once the run's options are read); anything else is refused here, naming the fix.
fn dollars(text: &str) -> Result<f64, String> {
    text.trim().parse::<f64>().map_err(|_| {
        "not a number of US dollars\nhint: give a positive number of US dollars, e.g. --max-cost 2.50".to_string()
    })
}
