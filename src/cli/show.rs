//! `git factory show <run>`: one run's summary, attempts, briefs, patch and logs.

use crate::config::Config;
use crate::error::{Exit, Result};
use crate::git;
use crate::store::records::{usd_words, AttemptRecord, CmdResult, Cost, RunSummary, Usage};
use crate::store::view::{self, RunView};
use crate::ui::{self, Ui};
use clap::Args;

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A run id or a unique prefix of at least 4 hex digits (default: the newest run)
    #[arg(value_name = "RUN")]
    pub run: Option<String>,
    /// Print the passing (or else the last) attempt's proposed patch
    #[arg(long)]
    pub patch: bool,
    /// Show only attempt N (with --patch: that attempt's patch)
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
    /// Print a command's full output, e.g. acceptance:0 or verify:1 (of --attempt N, default the last)
    #[arg(long, value_name = "KIND:I")]
    pub log: Option<String>,
    /// List every test of each attempt, per command, with its status before (baseline) and after
    #[arg(long)]
    pub tests: bool,
    /// Print the stored run_summary.json exactly
    #[arg(long)]
    pub json: bool,
    /// Write the run as one self-contained HTML page (default file: factory-<run_id>.html)
    #[arg(long)]
    pub html: bool,
    /// With --html: the file to write
    #[arg(short = 'o', long = "output", value_name = "FILE", requires = "html")]
    pub output: Option<std::path::PathBuf>,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

fn command_line(c: &CmdResult) -> String {
    let mark = if c.succeeded() {
        console::style("✓").green().to_string()
    } else {
        console::style("✗").red().to_string()
    };
    format!(
        "    {mark} {} → {} ({:.2}s)",
        c.display(),
        c.outcome(),
        c.duration_seconds
    )
}

/// The red→green contract, the protected paths and the baseline check (SPEC §3.8).
fn contract_lines(out: &mut String, s: &RunSummary) {
    if let Some(c) = &s.contract {
        out.push_str("contract:\n");
        for cmd in &c.fail_to_pass {
            out.push_str(&format!("  fail_to_pass: {cmd}\n"));
        }
        for cmd in &c.pass_to_pass {
            out.push_str(&format!("  pass_to_pass: {cmd}\n"));
        }
        let paths: Vec<&str> = c.protected.iter().map(|p| p.path.as_str()).collect();
        out.push_str(&format!("  protected: {}\n", paths.join(", ")));
    }
    if let Some(b) = &s.baseline_check {
        out.push_str(&format!("baseline check: {}\n", b.result));
        for r in &b.commands {
            let mark = if r.passed {
                console::style("✓").green().to_string()
            } else {
                console::style("✗").red().to_string()
            };
            out.push_str(&format!(
                "    {mark} {}: {} → {}{}\n",
                r.kind,
                r.display(),
                r.outcome,
                if r.cached { " (cached)" } else { "" }
            ));
            for line in r
                .excerpt
                .lines()
                .rev()
                .take(10)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                out.push_str(&format!("      │ {line}\n"));
            }
        }
    }
}

/// A race's candidates side by side (SPEC §5.1); the winner is marked `*`.
fn candidate_lines(out: &mut String, s: &RunSummary) {
    if s.candidates.is_empty() {
        return;
    }
    let passed = s
        .candidates
        .iter()
        .filter(|c| c.verdict == crate::store::records::Verdict::Pass)
        .count();
    out.push_str(&format!(
        "candidates: {passed}/{} passed{}\n",
        s.candidates.len(),
        s.winner
            .flatten()
            .map(|w| format!(", winner {w}"))
            .unwrap_or_default()
    ));
    out.push_str(&format!(
        "  {:>4}  {:<11} {:<22} {:>8} {:>6} {:>8} {:>10}  {}\n",
        "#", "verdict", "stage", "attempts", "lines", "tokens", "cost", "model"
    ));
    for c in &s.candidates {
        let mark = if s.winner.flatten() == Some(c.index) {
            "*"
        } else {
            " "
        };
        let served = (c.served_model.as_deref())
            .map(|m| format!(", served by {}", ui::escape_line(m)))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {mark}{:>3}  {:<11} {:<22} {:>8} {:>6} {:>8} {:>10}  {}{served}\n",
            c.index,
            c.verdict.as_str(),
            ui::escape_line(&c.ended_stage),
            c.attempts,
            c.changed_lines
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".to_string()),
            c.tokens,
            cost_words(c.cost.as_ref()),
            ui::escape_line(&c.model)
        ));
    }
}

pub fn cmd_show(ui: &Ui, args: ShowArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let run = super::run_or_newest(&repo, args.run.as_deref())?;
    if args.html {
        let page = crate::ops::page::RunPage::load(&repo, &run)?;
        let path = crate::ops::page::output_path(
            args.output.as_deref(),
            &format!("factory-{}.html", run.run_id),
        );
        crate::ops::page::write_page(&path, &crate::ops::page::render_run(&page))?;
        ui.out(format!("{}\n", path.display()));
        return Ok(Exit::Success);
    }
    let view = RunView::of(&run)?;
    if args.json {
        // The stored bytes as they are to a pipe; escaped on a terminal (a fetched record
        // is anyone's bytes, SPEC §7).
        ui.out_record_bytes(&view::stored_summary(&repo, &run)?);
        return Ok(Exit::Success);
    }
    if let Some(spec) = &args.log {
        let n = view.attempt(args.attempt)?;
        for log in view.logs(&repo, n, spec)? {
            ui.info(ui::dim(format!("── {}", log.path)));
            ui.out_record_bytes(&log.bytes);
        }
        return Ok(Exit::Success);
    }
    let core_pager = Config::of(&repo).string("core.pager");
    if args.patch {
        let patch = view.patch(&repo, view.attempt(args.attempt)?)?;
        ui.page_bytes(&patch.bytes, core_pager, |text| {
            if patch.is_diff && console::colors_enabled() {
                coloured_diff(text)
            } else {
                text.to_string()
            }
        });
        return Ok(Exit::Success);
    }
    let mut out = String::new();
    run_lines(&mut out, &view.summary);
    contract_lines(&mut out, &view.summary);
    candidate_lines(&mut out, &view.summary);
    for a in view.attempts(args.attempt) {
        attempt_lines(&mut out, a);
        if let Some(record) = view.tests(&repo, a.attempt_index) {
            test_lines(&mut out, &record, args.tests);
        }
    }
    flaky_lines(&mut out, &crate::roles::po::cache::flaky_tests(&repo));
    ui.page(out, core_pager);
    Ok(Exit::Success)
}

/// How many failing tests `show` names per command before "and N more".
const SHOWN_FAILING: usize = 20;

/// Per command: a summary line of its tests and the failing ones; with `every`, each test
/// with its status on the baseline and after the change. Ids are anyone's bytes: escaped.
fn test_lines(out: &mut String, record: &crate::store::records::TestsRecord, every: bool) {
    use crate::store::records::TestStatus;
    for c in &record.commands {
        let command = shlex::try_join(c.command.iter().map(String::as_str)).unwrap_or_default();
        let count = |s: TestStatus| c.tests.iter().filter(|t| t.status == s).count();
        let red: Vec<_> = c.tests.iter().filter(|t| t.status.is_red()).collect();
        let flaky = c.tests.iter().filter(|t| t.flaky).count();
        out.push_str(&format!(
            "  {}: {} passed, {} failed, {} skipped{}\n",
            ui::escape_line(&command),
            count(TestStatus::Passed),
            red.len(),
            count(TestStatus::Skipped) + count(TestStatus::Xfailed),
            if flaky > 0 {
                format!(", {flaky} flaky")
            } else {
                String::new()
            }
        ));
        if every {
            for t in &c.tests {
                let before = t.baseline.map_or("-", |b| b.as_str());
                out.push_str(&format!(
                    "    {before} → {}{}  {}\n",
                    t.status.as_str(),
                    if t.flaky { " (flaky)" } else { "" },
                    ui::escape_line(&t.id)
                ));
            }
            continue;
        }
        for t in red.iter().take(SHOWN_FAILING) {
            let message = t
                .message
                .as_deref()
                .and_then(|m| m.lines().next())
                .unwrap_or("");
            out.push_str(&format!(
                "    {} {} {}\n",
                t.status.as_str(),
                ui::escape_line(&t.id),
                ui::escape_line(message)
            ));
        }
        if red.len() > SHOWN_FAILING {
            out.push_str(&format!("    and {} more\n", red.len() - SHOWN_FAILING));
        }
    }
}

/// The tests this clone found flaky (SPEC §3.9), remembered in `.git/factory/flaky.json`.
fn flaky_lines(out: &mut String, flaky: &[crate::roles::po::cache::FlakyTest]) {
    if flaky.is_empty() {
        return;
    }
    out.push_str(&format!("flaky tests ({}):\n", flaky.len()));
    for t in flaky {
        out.push_str(&format!(
            "  {} ({})\n",
            ui::escape_line(&t.id),
            ui::escape_line(&t.command)
        ));
    }
}

/// The run's header: verdict, work order, baseline, how it ended, its result and error.
fn run_lines(out: &mut String, s: &RunSummary) {
    out.push_str(&format!(
        "run {}  {}\n",
        console::style(&s.run_id).yellow(),
        ui::verdict(s.verdict)
    ));
    out.push_str(&format!(
        "work order: {} — {}\n",
        s.work_order_id, s.work_order_title
    ));
    out.push_str(&format!(
        "baseline:   {}   mode: {}   model: {}\n",
        git::short(&s.repo_baseline_commit),
        s.mode,
        s.config.model
    ));
    out.push_str(&format!(
        "ended:      {} after {} ({} at most{}), {:.2}s ({} → {})\n",
        s.ended_stage,
        super::run::attempts_made(s),
        s.max_attempts,
        if s.candidates.is_empty() { "" } else { " each" },
        s.duration_seconds,
        s.started_utc,
        s.ended_utc
    ));
    if let Some(c) = &s.result_commit {
        out.push_str(&format!("result:     {}\n", git::short(c)));
    }
    if let Some(cost) = &s.cost {
        out.push_str(&format!("cost:       {}\n", cost_line(cost)));
    }
    if !s.side_effects.is_empty() {
        out.push_str(&format!(
            "side effects restored: {}\n",
            s.side_effects.join(", ")
        ));
    }
    if let Some(e) = &s.error {
        out.push_str(&format!("error: {}\n", e));
    }
}

/// One attempt: how it ended, what it touched, its commands and its failure brief.
fn attempt_lines(out: &mut String, a: &AttemptRecord) {
    let stage = a
        .failure_brief
        .as_ref()
        .map(|b| b.stage.as_str())
        .unwrap_or("passed");
    out.push_str(&format!(
        "\nattempt {}: {}  apply: {}  {:.2}s\n",
        a.attempt_index,
        ui::bold(stage),
        a.apply_method.as_deref().unwrap_or("-"),
        a.duration_seconds
    ));
    if let Some(sum) = a.summary.as_deref().filter(|s| !s.is_empty()) {
        out.push_str(&format!("  summary: {}\n", sum));
    }
    if !a.touched_files.is_empty() {
        let touched = a.touched_files.join(", ");
        out.push_str(&format!("  touched: {}\n", touched));
    }
    if let Some(backend) = a.sandbox() {
        out.push_str(&format!("  sandbox: {}\n", ui::escape_line(backend)));
    }
    if let Some(switch) = &a.api_switch {
        out.push_str(&format!("  api: switched {switch}\n"));
    }
    if let Some(model) = &a.served_model {
        out.push_str(&format!("  served by: {model}\n"));
    }
    if let Some(u) = &a.usage {
        out.push_str(&format!("  usage: {}\n", usage_words(u)));
    }
    if let Some(cost) = &a.cost {
        out.push_str(&format!("  cost: {}\n", cost_line(cost)));
    }
    if !a.dropped_params.is_empty() {
        out.push_str(&format!(
            "  dropped: {} (refused by the server)\n",
            a.dropped_params.join(", ")
        ));
    }
    if !a.weakening.is_empty() {
        let how = if stage == "tests_weakened" {
            "refused"
        } else {
            "allowed by tests_may_change"
        };
        out.push_str(&format!("  tests weakened ({how}):\n"));
        for w in &a.weakening {
            out.push_str(&format!("    {w}\n"));
        }
    }
    if let Some(k) = a.repeat_of {
        out.push_str(&format!(
            "  repeated attempt {k}'s change; not applied again\n"
        ));
    }
    for c in a
        .verify
        .iter()
        .chain(&a.pass_to_pass)
        .chain(&a.fail_to_pass)
        .chain(&a.acceptance)
    {
        out.push_str(&command_line(c));
        out.push('\n');
    }
    if let Some(t) = &a.tests {
        out.push_str(&format!("  tests: {}\n", t.line()));
    }
    if let Some(b) = &a.failure_brief {
        out.push_str("  failure brief:\n");
        for line in b.primary_error_excerpt.lines().take(40) {
            out.push_str(&format!("    │ {}\n", line));
        }
    }
}

/// A cost as a column shows it: `$0.0123`, `$0.0123+` (some unpriced), `unpriced`, `-`.
pub fn cost_words(cost: Option<&Cost>) -> String {
    match cost {
        None => "-".to_string(),
        Some(c) => match (c.usd, c.unpriced_requests) {
            (None, _) => "unpriced".to_string(),
            (Some(usd), 0) => usd_words(usd),
            (Some(usd), _) => format!("{}+", usd_words(usd)),
        },
    }
}

/// A cost with where its price came from, and how many requests had none.
fn cost_line(c: &Cost) -> String {
    let unpriced = match c.unpriced_requests {
        0 => String::new(),
        _ if c.usd.is_none() => String::new(),
        n => format!(" ({n} request{} unpriced)", if n == 1 { "" } else { "s" }),
    };
    let source = if c.usd.is_some() {
        format!(" ({})", ui::escape_line(&c.source))
    } else {
        String::new()
    };
    format!("{}{source}{unpriced}", c.display())
}

/// Token usage as the API reported it.
fn usage_words(u: &Usage) -> String {
    let n = |v: Option<u64>| v.map_or("?".to_string(), |n| n.to_string());
    let mut text = format!("{} in", n(u.input_tokens));
    let mut cached = Vec::new();
    if let Some(r) = u.cache_read_tokens.filter(|r| *r > 0) {
        cached.push(format!("{r} cache read"));
    }
    if let Some(w) = u.cache_write_tokens.filter(|w| *w > 0) {
        cached.push(format!("{w} cache written"));
    }
    if !cached.is_empty() {
        text.push_str(&format!(" ({})", cached.join(", ")));
    }
    text.push_str(&format!(" / {} out", n(u.output_tokens)));
    if let Some(r) = u.reasoning_tokens.filter(|r| *r > 0) {
        text.push_str(&format!(" ({r} reasoning)"));
    }
    if u.failed_requests > 0 {
        text.push_str(&format!(
            ", {} billed request{} that failed",
            u.failed_requests,
            if u.failed_requests == 1 { "" } else { "s" }
        ));
    }
    text
}

/// A diff coloured as `git diff` colours it: headers bold, hunk headers cyan, removed lines
/// red, added lines green, context plain.
fn coloured_diff(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut in_hunk = false;
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let styled = if body.starts_with("diff ") {
            in_hunk = false;
            console::style(body).bold().to_string()
        } else if body.starts_with("@@") {
            in_hunk = true;
            console::style(body).cyan().to_string()
        } else if !in_hunk {
            console::style(body).bold().to_string()
        } else if body.starts_with('+') {
            console::style(body).green().to_string()
        } else if body.starts_with('-') {
            console::style(body).red().to_string()
        } else {
            body.to_string()
        };
        out.push_str(&styled);
        out.push_str(end);
    }
    out
}
