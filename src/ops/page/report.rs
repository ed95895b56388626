//! `git factory report`: many runs side by side (a batch, a fleet's fetched records), as a
//! table on the terminal or one page (SPEC §8).

use super::html::{anchor, attempts_made, cost_text, document, green_text, run_section, seconds};
use super::RunPage;
use crate::error::{Error, Result};
use crate::store::records::{RunSummary, Verdict};
use git2::Repository;
use maud::html;
use std::collections::BTreeMap;

/// The runs a report covers: those named, else every run (newest first), at or after
/// `since_unix` when given.
pub fn runs(
    repo: &Repository,
    named: &[String],
    since_unix: Option<i64>,
) -> Result<Vec<crate::store::StoredRun>> {
    let mut out = Vec::new();
    if named.is_empty() {
        for header in crate::store::list_runs(repo)? {
            if since_unix.is_some_and(|t| header.order_key() < t.saturating_mul(1000)) {
                continue;
            }
            out.push(crate::store::resolve(repo, &header.run_id)?);
        }
    } else {
        for prefix in named {
            let run = crate::store::resolve(repo, prefix)?;
            if !out
                .iter()
                .any(|r: &crate::store::StoredRun| r.run_id == run.run_id)
            {
                out.push(run);
            }
        }
    }
    if out.is_empty() {
        return Err(Error::new("no runs to report")
            .hint("list the runs with git factory log, or widen --since"));
    }
    Ok(out)
}

/// The seconds since the epoch that `date` names, read by git itself (`git rev-parse
/// --since=DATE`), so it takes exactly what `git log --since` takes.
pub fn since(repo: &Repository, date: &str) -> Result<i64> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(repo.path())
        .arg("rev-parse")
        .arg(format!("--since={date}"))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::new(format!("cannot run git to read --since: {e}")))?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .strip_prefix("--max-age=")
        .and_then(|n| n.parse().ok())
        .filter(|_| out.status.success())
        .ok_or_else(|| {
            Error::new(format!("--since {date:?} is not a date git understands"))
                .hint("e.g. --since 2.weeks, --since yesterday, --since 2026-11-01")
        })
}

/// One row of the table: what a run came to.
struct Row<'a> {
    s: &'a RunSummary,
}

impl Row<'_> {
    fn attempts(&self) -> String {
        attempts_made(self.s).to_string()
    }
    fn duration(&self) -> String {
        seconds(self.s.duration_seconds)
    }
    fn cost(&self) -> String {
        cost_text(self.s.cost.as_ref())
    }
    /// The most red tests any attempt or candidate turned green.
    fn green(&self) -> String {
        let best = (self.s.attempts.iter().filter_map(|a| a.tests.as_ref()))
            .chain(self.s.candidates.iter().filter_map(|c| c.tests.as_ref()))
            .max_by_key(|t| (t.fail_to_pass_met, t.fail_to_pass_total));
        green_text(best)
    }
}

/// Per model: runs (or candidates) it took part in, how many passed, attempts and time.
#[derive(Default)]
struct ModelTotal {
    runs: usize,
    passed: usize,
    attempts: usize,
    seconds: f64,
    cost: Vec<crate::store::records::Cost>,
}

fn per_model(pages: &[RunPage]) -> BTreeMap<String, ModelTotal> {
    let mut totals: BTreeMap<String, ModelTotal> = BTreeMap::new();
    for p in pages {
        let s = &p.summary;
        if s.candidates.is_empty() {
            let t = totals.entry(s.config.model.clone()).or_default();
            t.runs += 1;
            t.passed += usize::from(s.verdict == Verdict::Pass);
            t.attempts += s.attempts.len();
            t.seconds += s.duration_seconds;
            t.cost.extend(s.cost.clone());
        } else {
            for c in &s.candidates {
                let t = totals.entry(c.model.clone()).or_default();
                t.runs += 1;
                t.passed += usize::from(c.verdict == Verdict::Pass);
                t.attempts += c.attempts as usize;
                t.seconds += c.duration_seconds;
                t.cost.extend(c.cost.clone());
            }
        }
    }
    totals
}

/// The report as a table for the terminal (every value already escaped by [`RunPage::load`]).
pub fn table(pages: &[RunPage]) -> String {
    let mut out = format!(
        "{:<24} {:<12} {:<11} {:>8} {:>6} {:>9} {:>10}  {}\n",
        "work order", "run", "verdict", "attempts", "green", "time", "cost", "model"
    );
    for p in pages {
        let r = Row { s: &p.summary };
        out.push_str(&format!(
            "{:<24} {:<12} {:<11} {:>8} {:>6} {:>9} {:>10}  {}\n",
            crate::ui::clip(&r.s.work_order_id, 24),
            r.s.run_id,
            r.s.verdict.as_str(),
            r.attempts(),
            r.green(),
            r.duration(),
            r.cost(),
            r.s.config.model
        ));
    }
    let passed = pages
        .iter()
        .filter(|p| p.summary.verdict == Verdict::Pass)
        .count();
    out.push_str(&format!("\n{} run(s), {passed} passed\n", pages.len()));
    for (model, t) in per_model(pages) {
        out.push_str(&format!(
            "  {model}: {}/{} passed, {} attempt(s), {}, {}\n",
            t.passed,
            t.runs,
            t.attempts,
            seconds(t.seconds),
            cost_text(crate::store::records::Cost::sum(&t.cost).as_ref())
        ));
    }
    out
}

/// The report as one page: the table, totals per model, then every run in full; each row
/// links to its run below.
pub fn render(pages: &[RunPage]) -> String {
    let passed = pages
        .iter()
        .filter(|p| p.summary.verdict == Verdict::Pass)
        .count();
    let totals = per_model(pages);
    let body = html! {
        h1 { "git factory report" span.muted { (pages.len()) " run(s), " (passed) " passed" } }
        table {
            thead { tr {
                th { "work order" } th { "run" } th { "verdict" } th.num { "attempts" }
                th.num { "green" } th.num { "time" } th.num { "cost" } th { "model" }
            } }
            tbody {
                @for p in pages {
                    @let r = Row { s: &p.summary };
                    tr {
                        td { a href={ "#run-" (r.s.run_id) } { (r.s.work_order_id) } br; span.muted { (r.s.work_order_title) } }
                        td.mono { a href={ "#" (anchor(&r.s.run_id, "", 1)) } { (r.s.run_id) } }
                        td { span.badge.(r.s.verdict.as_str()) { (r.s.verdict.as_str()) } }
                        td.num { (r.attempts()) }
                        td.num { (r.green()) }
                        td.num { (r.duration()) }
                        td.num { (r.cost()) }
                        td.mono { (r.s.config.model) }
                    }
                }
            }
        }
        h2 { "Per model" }
        table {
            thead { tr { th { "model" } th.num { "passed" } th.num { "attempts" } th.num { "time" } th.num { "cost" } } }
            tbody {
                @for (model, t) in &totals {
                    tr {
                        td.mono { (model) }
                        td.num { (t.passed) "/" (t.runs) }
                        td.num { (t.attempts) }
                        td.num { (seconds(t.seconds)) }
                        td.num { (cost_text(crate::store::records::Cost::sum(&t.cost).as_ref())) }
                    }
                }
            }
        }
        @for p in pages { (run_section(p, 2)) }
        footer { "git factory report · rendered from refs/factory/*" }
    };
    document("git factory report", body)
}
