//! The markup of a run's page. maud escapes every value it is given; nothing here builds HTML
//! from strings, and the page loads nothing (its policy forbids scripts and every fetch).

use super::{AttemptView, CandidateView, Evidence, Patch, RunPage};
use crate::store::records::{
    AttemptRecord, CmdResult, CommandTests, RunSummary, TestCounts, TestResult, TestsRecord,
    Verdict,
};
use maud::{html, Markup, PreEscaped, DOCTYPE};

const STYLE: &str = include_str!("page.css");

/// No script, no font, no image but inline data, no request of any kind.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
                      form-action 'none'; base-uri 'none'";

/// A whole document around `body`.
pub(super) fn document(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(POLICY);
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body { main { (body) } }
        }
    }
    .into_string()
}

/// `git factory show RUN --html`: one run as a page of its own.
pub fn render_run(page: &RunPage) -> String {
    let s = &page.summary;
    let title = format!(
        "{} {} — {}",
        s.verdict.as_str(),
        s.run_id,
        s.work_order_title
    );
    document(
        &title,
        html! {
            (run_section(page, 1))
            footer { "git factory " (s.tool_version) " · rendered from refs/factory/" (s.run_id) }
        },
    )
}

/// One run: heading, facts, timeline, candidates, attempts. `level` 1 for a page of its own, 2
/// inside a report.
pub(super) fn run_section(page: &RunPage, level: u8) -> Markup {
    let s = &page.summary;
    let heading = html! {
        span.badge.(s.verdict.as_str()) { (s.verdict.as_str()) }
        span { (s.work_order_title) }
        span.muted.mono { (s.run_id) }
    };
    html! {
        section id={ "run-" (s.run_id) } {
            @if level == 1 { h1 { (heading) } } @else { h2 { (heading) } }
            (facts(page))
            @if let Some(intent) = &page.intent { div.intent { (intent) } }
            (timeline(page))
            (candidates_table(page))
            @if !page.candidates.is_empty() {
                @for c in &page.candidates { (candidate(s, c)) }
                @if !page.attempts.is_empty() {
                    h3 { "Delivery" }
                }
            }
            @for a in &page.attempts { (attempt(s, a, "", page.candidates.is_empty())) }
        }
    }
}

fn facts(page: &RunPage) -> Markup {
    let s = &page.summary;
    html! {
        dl.facts {
            dt { "work order" } dd { code { (s.work_order_id) } }
            dt { "ended" } dd {
                (s.ended_stage) " after " (attempts_made(s)) " attempt(s) of " (s.max_attempts)
                @if !s.candidates.is_empty() { " each, " (s.candidates.len()) " candidates" }
                ", " (seconds(s.duration_seconds))
            }
            dt { "started" } dd { (s.started_utc) " → " (s.ended_utc) }
            dt { "baseline" } dd.mono { (short(&s.repo_baseline_commit)) " (" (s.mode) ")" }
            dt { "model" } dd.mono { (s.config.model) }
            @if let Some(c) = &s.result_commit { dt { "result" } dd.mono { (short(c)) } }
            @if s.delivered == Some(false) {
                dt { "delivered" } dd.warn { "no: the tree changed during the race (git factory apply " (s.run_id) ")" }
            }
            @if !s.side_effects.is_empty() {
                dt { "side effects" } dd { "restored: " (s.side_effects.join(", ")) }
            }
            @if let Some(e) = &s.error { dt { "error" } dd.bad { (e) } }
            dt { "tokens" } dd { (tokens_total(page)) }
            dt { "cost" } dd { (cost_text(s.cost.as_ref())) }
            dt { "evidence" } dd { (evidence(&page.evidence)) }
        }
    }
}

fn evidence(e: &Evidence) -> Markup {
    html! {
        @match e {
            Evidence::NoResult => span.muted { "none (no passing tree)" },
            Evidence::Unsigned => span.muted { "not signed" },
            Evidence::Accepted { signer } => span.ok { "✓ signed by " (signer) ", verified" },
            Evidence::Unchecked(why) => span.warn { "could not be checked: " (why) },
            Evidence::Refused(why) => span.bad {
                "✗ signed, not accepted: " (why.join("; "))
            },
        }
    }
}

/// Attempts in order, one lane per candidate: each block as wide as the attempt took.
fn timeline(page: &RunPage) -> Markup {
    let s = &page.summary;
    let mut lanes: Vec<(String, String, &[AttemptView])> = Vec::new();
    for c in &page.candidates {
        lanes.push((
            format!("candidate {}", c.record.index),
            format!("c{}-", c.record.index),
            &c.attempts,
        ));
    }
    if !page.attempts.is_empty() {
        let label = if page.candidates.is_empty() {
            "attempts"
        } else {
            "delivery"
        };
        lanes.push((label.to_string(), String::new(), &page.attempts));
    }
    if lanes.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Timeline" }
        div.lanes {
            @for (label, prefix, attempts) in &lanes {
                div.lane {
                    span.label title=(label) { (label) }
                    div.bar {
                        @for a in attempts.iter() {
                            @let r = &a.record;
                            @let grow = (r.duration_seconds.max(0.05) * 100.0).round() as u64;
                            a.seg.(outcome_class(r))
                                href={ "#" (anchor(&s.run_id, prefix, r.attempt_index)) }
                                style={ "flex-grow: " (grow) }
                                title={ "attempt " (r.attempt_index) ": " (stage_of(r)) ", " (seconds(r.duration_seconds)) } {
                                "#" (r.attempt_index) " " (stage_of(r)) " · " (seconds(r.duration_seconds))
                            }
                        }
                    }
                }
            }
        }
    }
}

fn candidates_table(page: &RunPage) -> Markup {
    let s = &page.summary;
    if page.candidates.is_empty() {
        return html! {};
    }
    let winner = s.winner.flatten();
    html! {
        h2 { "Candidates" }
        table {
            thead { tr {
                th.num { "#" } th { "verdict" } th { "ended" } th.num { "attempts" }
                th.num { "lines" } th.num { "green" } th.num { "tokens" } th.num { "cost" } th.num { "time" } th { "model" }
            } }
            tbody {
                @for c in &page.candidates {
                    @let r = &c.record;
                    tr.winner[winner == Some(r.index)] {
                        td.num { a href={ "#" (anchor(&s.run_id, &format!("c{}-", r.index), 1)) } { (r.index) } }
                        td { span.badge.(r.verdict.as_str()) { (r.verdict.as_str()) }
                             @if winner == Some(r.index) { " winner" } }
                        td { (r.ended_stage) }
                        td.num { (r.attempts) }
                        td.num { (r.changed_lines.map(|n| n.to_string()).unwrap_or_else(|| "-".into())) }
                        td.num { (green_text(r.tests.as_ref())) }
                        td.num { (r.tokens) }
                        td.num { (cost_text(r.cost.as_ref())) }
                        td.num { (seconds(r.duration_seconds)) }
                        td.mono { (r.model) @if let Some(m) = &r.served_model { " (served by " (m) ")" } }
                    }
                }
            }
        }
    }
}

fn candidate(s: &RunSummary, c: &CandidateView) -> Markup {
    let r = &c.record;
    html! {
        details id={ "run-" (s.run_id) "-c" (r.index) } open[c.attempts.len() <= 2] {
            summary {
                span.attempt-head {
                    h3 { "Candidate " (r.index) }
                    span.badge.(r.verdict.as_str()) { (r.verdict.as_str()) }
                    span.mono { (r.model) }
                    span.muted { (r.ended_stage) ", " (r.attempts) " attempt(s), " (seconds(r.duration_seconds)) }
                }
            }
            div.body {
                @if let Some(e) = &r.error { p.bad { (e) } }
                @for a in &c.attempts { (attempt(s, a, &format!("c{}-", r.index), false)) }
            }
        }
    }
}

/// One attempt: how it ended, its stages' times, the diff, scope and apply, every check, the
/// brief, and its tokens.
fn attempt(s: &RunSummary, view: &AttemptView, prefix: &str, open: bool) -> Markup {
    let a = &view.record;
    let failed = a.failure_brief.is_some();
    html! {
        details id=(anchor(&s.run_id, prefix, a.attempt_index)) open[open && (failed || s.verdict == Verdict::Pass)] {
            summary {
                span.attempt-head {
                    h3 { "Attempt " (a.attempt_index) }
                    span.(if failed { "bad" } else { "ok" }) { (if failed { "✗ " } else { "✓ " }) (stage_of(a)) }
                    span.muted { (seconds(a.duration_seconds)) }
                    @if let Some(u) = &a.usage { span.muted { (usage_text(u)) } }
                    @if let Some(c) = &a.cost { span.muted { (c.display()) } }
                    @if let Some(t) = &a.tests { span.muted { (counts_text(t)) } }
                }
            }
            div.body {
                (stages(a))
                @if let Some(sum) = a.summary.as_deref().filter(|t| !t.is_empty()) {
                    p { b { "summary: " } (sum) }
                }
                (scope(a))
                @if !a.weakening.is_empty() {
                    div.brief {
                        b { "tests weakened" (if a.failure_brief.as_ref().is_some_and(|b| b.stage.as_str() == "tests_weakened") { " (refused)" } else { " (allowed by tests_may_change)" }) }
                        ul { @for w in &a.weakening { li.mono { (w.to_string()) } } }
                    }
                }
                @if let Some(p) = &view.patch { (patch(p)) }
                @if let Some(t) = &view.tests { (tests_table(t)) }
                (checks(a))
                @if let Some(b) = &a.failure_brief {
                    details.brief open {
                        summary { "failure brief: " b { (b.stage.as_str()) }
                            @if let Some(c) = &b.command { " — " code { (c) } } }
                        div.body { pre.wrap { (b.primary_error_excerpt) } }
                    }
                }
            }
        }
    }
}

/// The tests each command reported (SPEC §3.9): the ones that fail, changed or went missing
/// first, each with its status before (the baseline) and after, and the failure's message.
fn tests_table(record: &TestsRecord) -> Markup {
    html! {
        @for c in &record.commands {
            @let rows = look_first(c);
            @let red = c.red().count();
            details.tests open[red > 0] {
                summary {
                    span.(if red > 0 { "bad" } else { "ok" }) { (if red > 0 { "✗ " } else { "✓ " }) }
                    "tests of " (c.kind) ": " code { (c.display()) } " — " (command_counts(c))
                    span.muted { " (" (c.source) @if c.rerun { ", re-run once" } ")" }
                }
                div.body {
                    table {
                        thead { tr { th { "test" } th { "before" } th { "after" } th { "message" } } }
                        tbody {
                            @for t in rows {
                                tr {
                                    td.mono { (t.id) }
                                    td { (t.baseline.map(|b| b.as_str()).unwrap_or("new")) }
                                    td.(status_class(t)) {
                                        (t.status.as_str()) @if t.flaky { " (flaky)" }
                                    }
                                    td {
                                        @if let Some(m) = &t.message { (m) }
                                        @if let Some(x) = &t.excerpt {
                                            details { summary { "excerpt" } pre { (x) } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The command's tests, those to read first at the top, then by id.
fn look_first(c: &CommandTests) -> Vec<&TestResult> {
    let mut rows: Vec<&TestResult> = c.tests.iter().collect();
    rows.sort_by_key(|t| (!needs_a_look(t), t.id.clone()));
    rows
}

/// A test to read first: red now, flaky, or not passing where it passed on the baseline.
fn needs_a_look(t: &TestResult) -> bool {
    use crate::store::records::TestStatus;
    t.status.is_red()
        || t.flaky
        || (t.baseline == Some(TestStatus::Passed) && t.status != TestStatus::Passed)
}

fn status_class(t: &TestResult) -> &'static str {
    if needs_a_look(t) {
        "bad"
    } else if t.status == crate::store::records::TestStatus::Passed {
        "ok"
    } else {
        "muted"
    }
}

fn command_counts(c: &CommandTests) -> String {
    use crate::store::records::TestStatus;
    let count = |s: TestStatus| c.tests.iter().filter(|t| t.status == s).count();
    let mut text = format!(
        "{} passed, {} failed",
        count(TestStatus::Passed),
        count(TestStatus::Failed) + count(TestStatus::Error)
    );
    for (s, word) in [
        (TestStatus::Skipped, "skipped"),
        (TestStatus::Xfailed, "xfailed"),
        (TestStatus::Xpassed, "xpassed"),
        (TestStatus::Missing, "missing"),
    ] {
        let n = count(s);
        if n > 0 {
            text.push_str(&format!(", {n} {word}"));
        }
    }
    let flaky = c.tests.iter().filter(|t| t.flaky).count();
    if flaky > 0 {
        text.push_str(&format!(", {flaky} flaky"));
    }
    text
}

/// An attempt's counts in one line.
fn counts_text(t: &TestCounts) -> String {
    let mut text = format!("tests {} passed, {} failed", t.passed, t.failed);
    if t.fail_to_pass_total > 0 {
        text.push_str(&format!(
            ", {}/{} turned green",
            t.fail_to_pass_met, t.fail_to_pass_total
        ));
    }
    if t.flaky > 0 {
        text.push_str(&format!(", {} flaky", t.flaky));
    }
    text
}

/// Red tests turned green, of those the contract names (SPEC §3.9).
pub(super) fn green_text(t: Option<&TestCounts>) -> String {
    match t {
        Some(t) if t.fail_to_pass_total > 0 => {
            format!("{}/{}", t.fail_to_pass_met, t.fail_to_pass_total)
        }
        _ => "-".to_string(),
    }
}

/// Where the attempt's time went: proposing and applying, then each check.
fn stages(a: &AttemptRecord) -> Markup {
    let checks: f64 = a.commands().map(|c| c.duration_seconds).sum();
    let before = (a.duration_seconds - checks).max(0.0);
    html! {
        div.stages {
            span.stage { "SE + TR " (seconds(before)) }
            @for (kind, c) in kinds(a) {
                span.stage.(if c.succeeded() { "ok" } else { "bad" }) { (kind) " " (seconds(c.duration_seconds)) }
            }
        }
    }
}

fn scope(a: &AttemptRecord) -> Markup {
    html! {
        dl.facts {
            dt { "touched" } dd.mono {
                @if a.touched_files.is_empty() { span.muted { "nothing" } } @else { (a.touched_files.join(", ")) }
            }
            dt { "apply" } dd {
                @if a.apply_ok { span.ok { "applied" } } @else { span.bad { "not applied" } }
                @if let Some(m) = &a.apply_method { " (" (m) ")" }
                @if let Some(k) = a.repeat_of { " — repeated attempt " (k) "'s change" }
            }
            @if let Some(b) = a.sandbox() { dt { "sandbox" } dd { (b) } }
            @if let Some(m) = &a.served_model { dt { "served by" } dd.mono { (m) } }
            @if !a.dropped_params.is_empty() {
                dt { "dropped" } dd { (a.dropped_params.join(", ")) " (refused by the server)" }
            }
        }
    }
}

fn patch(p: &Patch) -> Markup {
    html! {
        details open {
            summary { (if p.is_diff { "proposed diff" } else { "proposed writes" }) }
            div.body {
                @if p.is_diff { (diff(&p.text)) } @else { pre { (p.text) } }
                @if p.cut > 0 { p.muted { "… " (p.cut) " more bytes in the record (git factory show RUN --patch)" } }
            }
        }
    }
}

/// A unified diff with its lines classed as `git diff` colours them.
fn diff(text: &str) -> Markup {
    let mut in_hunk = false;
    let lines: Vec<(&str, &str)> = text
        .lines()
        .map(|line| {
            let class = if line.starts_with("diff ") {
                in_hunk = false;
                "head"
            } else if line.starts_with("@@") {
                in_hunk = true;
                "hunk"
            } else if !in_hunk {
                "head"
            } else if line.starts_with('+') {
                "add"
            } else if line.starts_with('-') {
                "del"
            } else {
                "ctx"
            };
            (class, line)
        })
        .collect();
    html! {
        pre.diff { @for (class, line) in &lines { span.(class) { (line) "\n" } } }
    }
}

fn checks(a: &AttemptRecord) -> Markup {
    let all = kinds(a);
    if all.is_empty() {
        return html! {};
    }
    html! {
        ul.checks {
            @for (kind, c) in &all {
                li { (check(kind, c)) }
            }
        }
    }
}

fn check(kind: &str, c: &CmdResult) -> Markup {
    let ok = c.succeeded();
    html! {
        details open[!ok] {
            summary {
                span.(if ok { "ok" } else { "bad" }) { (if ok { "✓ " } else { "✗ " }) }
                (kind) ": " code { (c.display()) } " → " (c.outcome()) " "
                span.muted { "(" (seconds(c.duration_seconds)) ")" }
            }
            div.body {
                @if !c.stdout_trunc.is_empty() {
                    div.muted { "stdout (end)" } pre { (c.stdout_trunc) }
                }
                @if !c.stderr_trunc.is_empty() {
                    div.muted { "stderr (end)" } pre { (c.stderr_trunc) }
                }
                @if c.stdout_trunc.is_empty() && c.stderr_trunc.is_empty() {
                    p.muted { "no output" }
                }
            }
        }
    }
}

/// The attempt's commands with their kind, in the order they ran.
fn kinds(a: &AttemptRecord) -> Vec<(&'static str, &CmdResult)> {
    let mut out = Vec::new();
    for (kind, list) in [
        ("verify", &a.verify),
        ("pass_to_pass", &a.pass_to_pass),
        ("fail_to_pass", &a.fail_to_pass),
        ("acceptance", &a.acceptance),
    ] {
        out.extend(list.iter().map(|c| (kind, c)));
    }
    out
}

fn usage_text(u: &crate::store::records::Usage) -> String {
    let mut text = match (u.input_tokens, u.output_tokens) {
        (None, None) => return String::new(),
        (i, o) => format!(
            "{} in / {} out tokens",
            i.map(|n| n.to_string()).unwrap_or_else(|| "?".into()),
            o.map(|n| n.to_string()).unwrap_or_else(|| "?".into())
        ),
    };
    for (n, what) in [
        (u.cache_read_tokens, "cached"),
        (u.cache_write_tokens, "cache written"),
        (u.reasoning_tokens, "reasoning"),
    ] {
        if let Some(n) = n.filter(|n| *n > 0) {
            text.push_str(&format!(", {n} {what}"));
        }
    }
    if u.failed_requests > 0 {
        text.push_str(&format!(", {} billed request(s) failed", u.failed_requests));
    }
    text
}

/// A cost as people read it; a record made before costs were kept has none.
pub(super) fn cost_text(c: Option<&crate::store::records::Cost>) -> String {
    c.map(|c| c.display()).unwrap_or_else(|| "-".to_string())
}

fn tokens_total(page: &RunPage) -> String {
    let every = page
        .attempts
        .iter()
        .chain(page.candidates.iter().flat_map(|c| c.attempts.iter()));
    let (mut input, mut output, mut any) = (0u64, 0u64, false);
    for a in every {
        if let Some(u) = &a.record.usage {
            input += u.input_tokens.unwrap_or(0);
            output += u.output_tokens.unwrap_or(0);
            any |= u.input_tokens.is_some() || u.output_tokens.is_some();
        }
    }
    if any {
        format!("{input} in / {output} out")
    } else {
        "none reported".to_string()
    }
}

pub(super) fn anchor(run_id: &str, prefix: &str, n: u32) -> String {
    format!("run-{run_id}-{prefix}a{n}")
}

fn stage_of(a: &AttemptRecord) -> &'static str {
    a.failure_brief
        .as_ref()
        .map(|b| b.stage.as_str())
        .unwrap_or("passed")
}

fn outcome_class(a: &AttemptRecord) -> &'static str {
    if a.failure_brief.is_some() {
        "fail"
    } else {
        "pass"
    }
}

pub(super) fn attempts_made(s: &RunSummary) -> usize {
    if s.candidates.is_empty() {
        s.attempts.len()
    } else {
        s.candidates.iter().map(|c| c.attempts as usize).sum()
    }
}

pub(super) fn seconds(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.2}s")
    } else if s < 120.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    }
}

fn short(c: &str) -> &str {
    c.get(..12).unwrap_or(c)
}
