//! `git factory log`: past runs, newest first, one line each.

use crate::config::Config;
use crate::error::{Exit, Result};
use crate::git;
use crate::store::records::Cost;
use crate::store::view::RunList;
use crate::store::RunHeader;
use crate::ui::{self, Ui};
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VerdictFilter {
    Pass,
    Fail,
    Error,
    Interrupted,
    Running,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Show at most N runs (also -N, as in git log -3)
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    pub max_count: Option<usize>,
    /// Only runs with this verdict (any case: pass, PASS)
    #[arg(long, value_enum, ignore_case = true, value_name = "VERDICT")]
    pub verdict: Option<VerdictFilter>,
    /// One short line per run: run id, verdict, title
    #[arg(long)]
    pub oneline: bool,
    /// Sum what the runs listed cost, per model and per work order (with --json: as JSON)
    #[arg(long)]
    pub cost: bool,
    /// Print the runs as a JSON array on stdout
    #[arg(long)]
    pub json: bool,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

/// "3 minutes ago"-style age, like git's relative dates.
pub fn age(now: i64, then: i64) -> String {
    let d = (now - then).max(0);
    let (n, unit) = match d {
        0..=89 => (d, "second"),
        90..=5399 => ((d + 30) / 60, "minute"),
        5400..=129_599 => ((d + 1800) / 3600, "hour"),
        129_600..=3_023_999 => ((d + 43_200) / 86_400, "day"),
        3_024_000..=31_535_999 => ((d + 1_296_000) / 2_592_000, "month"),
        _ => ((d + 15_768_000) / 31_536_000, "year"),
    };
    format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" })
}

pub fn cmd_log(ui: &Ui, args: LogArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let verdict = args
        .verdict
        .map(|filter| format!("{filter:?}").to_ascii_uppercase());
    let list = RunList::of(&repo, verdict.as_deref(), args.max_count)?;
    for e in &list.damaged {
        ui.warn(format!(
            "{} (not listed); {}",
            e.message,
            e.hint.as_deref().unwrap_or_default()
        ));
    }
    if args.cost {
        return cost_report(ui, &repo, &list, args.json);
    }
    if args.json {
        let mut text = serde_json::to_string_pretty(&list.runs).unwrap_or_default();
        text.push('\n');
        ui.out(text);
        return Ok(Exit::Success);
    }
    let runs = list.for_terminal()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let text = if args.oneline {
        oneline(&runs)
    } else {
        full_lines(&runs, now)
    };
    ui.page(text, Config::of(&repo).string("core.pager"));
    Ok(Exit::Success)
}

/// `--oneline`: run id, verdict, title.
fn oneline(runs: &[RunHeader]) -> String {
    let mut text = String::new();
    for r in runs {
        text.push_str(&format!(
            "{} {} {}\n",
            console::style(&r.run_id).yellow(),
            verdict_word(&r.verdict, 0),
            &r.title
        ));
    }
    text
}

/// One line a run: id, verdict, attempts, work order, title, marks, baseline and age.
fn full_lines(runs: &[RunHeader], now: i64) -> String {
    let mut text = String::new();
    for r in runs {
        let verdict = verdict_word(&r.verdict, 11);
        // A run that needed no attempt says so: its PASS changed nothing.
        let mark = if r.ended_stage == "already_satisfied" {
            format!(" {}", console::style("(already satisfied)").green())
        } else {
            String::new()
        };
        // A race says how many of its candidates passed.
        let mark = match &r.candidates {
            Some(c) => format!(
                "{mark} {}",
                ui::dim(format!("({} passed)", ui::escape_line(c)))
            ),
            None => mark,
        };
        // The last attempt's tests, in short (SPEC §3.9).
        let mark = match &r.tests {
            Some(t) => format!(
                "{mark} {}",
                ui::dim(format!(
                    "(tests: {} passed, {} failed{})",
                    t.passed,
                    t.failed,
                    if t.flaky > 0 {
                        format!(", {} flaky", t.flaky)
                    } else {
                        String::new()
                    }
                ))
            ),
            None => mark,
        };
        text.push_str(&format!(
            "{} {verdict} {} {:>9} {} {}{mark} {} {}\n",
            console::style(&r.run_id).yellow(),
            format_args!("{}×", r.attempts),
            super::show::cost_words(r.cost.as_ref()),
            ui::bold(&r.work_order_id),
            &r.title,
            ui::dim(git::short(&r.baseline)),
            ui::dim(age(now, r.time)),
        ));
    }
    text
}

/// One line of `log --cost`: what a model or a work order cost over the runs listed.
#[derive(Debug, Clone, serde::Serialize)]
struct CostLine {
    name: String,
    runs: u32,
    cost: Cost,
}

/// Adds `cost` to the line named `name`, made when new.
fn add_cost(lines: &mut Vec<CostLine>, name: &str, cost: &Cost) {
    match lines.iter_mut().find(|l| l.name == name) {
        Some(l) => {
            l.runs += 1;
            l.cost = Cost::sum([&l.cost, cost]).unwrap_or_default();
        }
        None => lines.push(CostLine {
            name: name.to_string(),
            runs: 1,
            cost: cost.clone(),
        }),
    }
}

/// `log --cost`: the listed runs' costs summed per model asked and per work order, from the
/// run commits' headers alone (no price is looked up: what each run cost is recorded).
fn cost_report(ui: &Ui, repo: &git2::Repository, list: &RunList, json: bool) -> Result<Exit> {
    let runs = if json {
        list.runs.clone()
    } else {
        list.for_terminal()?
    };
    let (mut by_model, mut by_order) = (Vec::new(), Vec::new());
    let mut total: Option<Cost> = None;
    let mut costed = 0u32;
    // A forced re-run replaced the runs before it under the same id; they were paid for.
    let replaced: Vec<RunHeader> = runs
        .iter()
        .flat_map(|r| crate::store::superseded_runs(repo, &r.run_id))
        .collect();
    for r in runs.iter().chain(&replaced) {
        let Some(cost) = &r.cost else { continue };
        costed += 1;
        total = Cost::sum(total.iter().chain([cost]));
        add_cost(&mut by_order, &r.work_order_id, cost);
        for (model, c) in &r.cost_by_model {
            add_cost(&mut by_model, model, c);
        }
    }
    for lines in [&mut by_model, &mut by_order] {
        lines.sort_by(|a, b| a.name.cmp(&b.name));
    }
    if json {
        let value = serde_json::json!({
            "runs": costed,
            "total": total,
            "by_model": by_model,
            "by_work_order": by_order,
        });
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        ui.out(text);
        return Ok(Exit::Success);
    }
    let mut text = String::new();
    for (title, lines) in [("by model", &by_model), ("by work order", &by_order)] {
        text.push_str(&format!("{}\n", ui::bold(format!("cost {title}:"))));
        for l in lines {
            text.push_str(&format!(
                "  {:<40} {:>22}  {} run{}\n",
                l.name,
                l.cost.display(),
                l.runs,
                if l.runs == 1 { "" } else { "s" }
            ));
        }
    }
    text.push_str(&format!(
        "total: {} over {costed} run{} with a recorded cost ({} listed)\n",
        total.as_ref().map_or("-".to_string(), Cost::display),
        if costed == 1 { "" } else { "s" },
        runs.len()
    ));
    ui.out(text);
    Ok(Exit::Success)
}

/// A verdict as `log` prints it, coloured, padded to `width`.
fn verdict_word(verdict: &str, width: usize) -> String {
    let padded = console::style(format!("{verdict:<width$}"));
    match verdict {
        "PASS" => padded.green().bold(),
        "FAIL" => padded.red().bold(),
        _ => padded.magenta().bold(),
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ages() {
        assert_eq!(super::age(100, 100), "0 seconds ago");
        assert_eq!(super::age(200, 80), "2 minutes ago");
        assert_eq!(super::age(86_400 * 3, 0), "3 days ago");
    }
}
