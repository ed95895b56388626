//! A batch (SPEC §5.2): `git factory run -w a.json b.json …` — several work orders, each its
//! own run, at most `--jobs` at once, one live line per run, a table and a total at the end.
//!
//! Each run is a child process of this same binary, `git factory run --worktree --json -w
//! ONE` with the user's other flags: a lone run in every respect, so it gets the run_id,
//! record and cache entry it would get alone, through the one run pipeline there is. The
//! process-wide state of a run — the interrupt flag, the token-budget halt, the trace, the
//! files named by run and process — stays its own. Ctrl-C at a terminal reaches the whole
//! process group, children included; a SIGINT or SIGTERM sent to the batch alone is passed on
//! to every running child. Either way each run rolls back and records itself INTERRUPTED, no
//! further run starts, and the batch exits 130 once every child has finished.
//!
//! Every work order is checked before any runs: read and validated here, then each through
//! `run --dry-run` (the run's own preflight, which calls nothing and changes nothing). One
//! that cannot run refuses the whole batch (exit 2), naming its file.

use super::run::RunArgs;
use crate::error::{Error, Exit, Result};
use crate::store::records::{RunSummary, Verdict};
use crate::ui::{self, Board, Ui};
use crate::workorder::LoadedWorkOrder;
use std::ffi::OsString;
use std::io::{BufRead, Read};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How `--jobs` is shared (SPEC §5.2: "`--candidates` combines: each run races its own
/// candidates, sharing the `--jobs` limit"). The limit J (default: the number of CPUs) counts
/// commands at once, not runs. Without `--candidates` a run does one thing at a time, so J
/// runs go at once. With `--candidates N` each run races min(N, J) candidates at once (its own
/// `--jobs`), and J / min(N, J) runs go at once (at least one): the candidates of all running
/// runs together never exceed J.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jobs {
    /// Runs at once.
    pub runs: usize,
    /// Each run's own `--jobs` (its candidates at once); none without `--candidates`.
    pub per_run: Option<u32>,
}

impl Jobs {
    pub fn share(jobs: Option<u32>, candidates: u32) -> Result<Jobs> {
        let limit = match jobs {
            Some(0) => return Err(Error::new("--jobs must be at least 1").hint("e.g. --jobs 4")),
            Some(j) => j,
            None => std::thread::available_parallelism()
                .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
        };
        if candidates <= 1 {
            return Ok(Jobs {
                runs: limit as usize,
                per_run: None,
            });
        }
        let per_run = candidates.min(limit);
        Ok(Jobs {
            runs: (limit / per_run).max(1) as usize,
            per_run: Some(per_run),
        })
    }
}

/// One work order of the batch, read and validated.
struct Order {
    file: String,
    id: String,
    /// `work_order_hash` (SPEC §2): two orders with the same one would be the same run.
    hash: String,
}

/// How one child run ended.
struct Ran {
    /// Its exit code (none: killed by a signal).
    code: Option<i32>,
    /// The RunSummary it printed (none: refused, or it could not finish writing one).
    summary: Option<RunSummary>,
    /// The `error:`/`hint:` lines it printed, for a run without a summary.
    said: Vec<String>,
}

pub fn cmd_batch(ui: &Ui, args: &RunArgs) -> Result<Exit> {
    refuse_flags(args)?;
    let jobs = Jobs::share(args.jobs, args.candidates)?;
    let orders = read_orders(args)?;
    // Every order runs at the HEAD the batch started from, whatever is committed meanwhile.
    let repo = crate::git::open(args.repo.as_deref())?;
    let mut pinned = args.clone();
    pinned.batch_baseline = Some(crate::git::head_commit(&repo)?.id().to_string());
    let args = &pinned;
    crate::interrupt::install();
    // The run's own preflight for each order, before any of them runs.
    let checked = for_each_at_once(&orders, jobs.runs, |order| {
        // As a lone `run --dry-run` of it would print: JSON only when asked for.
        let mut cmd = child(args, &order.file, jobs, args.json);
        cmd.arg("--dry-run");
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| spawn_error(&e))?;
        Ok((out.status.code(), out.stdout, out.stderr))
    })?;
    if crate::interrupt::requested() {
        ui.always("interrupted while checking the work orders: nothing was run");
        return Ok(Exit::Interrupted);
    }
    for (order, (code, _, stderr)) in orders.iter().zip(&checked) {
        if *code == Some(2) || code.is_none() {
            return Err(refused(order, &said(stderr)));
        }
    }
    if args.dry_run {
        for (order, (_, stdout, _)) in orders.iter().zip(&checked) {
            // Headed as `head` heads several files.
            ui.out(format!("==> {} <==\n", order.file));
            // Each run's first prompt as that run printed it: bytes to a pipe or a file.
            ui.out_record_bytes(stdout);
        }
        ui.always(format!(
            "dry run: {} work orders checked; nothing was called and nothing changed",
            orders.len()
        ));
        return Ok(Exit::Success);
    }
    let started = Instant::now();
    let board = Board::labelled(ui, orders.iter().map(|o| o.id.clone()).collect());
    let ran = run_all(args, &orders, jobs, &board);
    board.finish();
    let interrupted = crate::interrupt::requested();
    let exit = batch_exit(&ran, interrupted);
    table(ui, &orders, &ran);
    if args.json {
        let summaries: Vec<&RunSummary> = ran
            .iter()
            .filter_map(|r| r.as_ref().and_then(|r| r.summary.as_ref()))
            .collect();
        let mut text = serde_json::to_string_pretty(&summaries).unwrap_or_default();
        text.push('\n');
        ui.out(text);
    }
    ui.always(total(&ran, started.elapsed(), jobs, interrupted));
    Ok(exit)
}

/// Flags that cannot mean anything for several runs at once.
fn refuse_flags(args: &RunArgs) -> Result<()> {
    if args.has_inline() {
        return Err(
            Error::new("--work-order and inline work-order flags were both given")
                .hint("use either -w FILE… or --id/--title/--intent/--allow/--accept"),
        );
    }
    if args.work_order.iter().any(|w| w == "-") {
        return Err(
            Error::new("a batch cannot read a work order from stdin (-w -)")
                .hint("save that work order to a file and pass its path with -w"),
        );
    }
    if let Some(name) = &args.branch {
        return Err(Error::new(format!(
            "--branch {name} names one branch, but a batch makes several runs"
        ))
        .hint("drop --branch: each PASS of a batch is committed on its own factory/run-<run_id>"));
    }
    Ok(())
}

/// Every work order read and validated here, so a broken one is named before any child runs.
fn read_orders(args: &RunArgs) -> Result<Vec<Order>> {
    args.work_order
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).map_err(|e| {
                Error::new(format!(
                    "cannot read work order {file}: {e}; the batch was refused and nothing ran"
                ))
                .hint("pass the paths of work-order JSON files with -w")
            })?;
            let loaded = LoadedWorkOrder::from_json_text(&text, file).map_err(|e| {
                let what = if e.message.contains(file.as_str()) {
                    e.message
                } else {
                    format!("work order {file} is invalid: {}", e.message)
                };
                let mut refused =
                    Error::new(format!("{what}; the batch was refused and nothing ran"));
                refused.details = e.details;
                refused.hint = e.hint;
                refused
            })?;
            Ok(Order {
                file: file.clone(),
                id: loaded.order.id,
                hash: loaded.hash,
            })
        })
        .collect::<Result<Vec<Order>>>()
        .and_then(distinct)
}

/// The same work order twice (the same file, or two files with the same JSON) would be one
/// run_id twice at once under the same flags: the second could only wait for the first.
fn distinct(orders: Vec<Order>) -> Result<Vec<Order>> {
    for (i, order) in orders.iter().enumerate() {
        if let Some(first) = orders[..i].iter().find(|o| o.hash == order.hash) {
            return Err(Error::new(format!(
                "work orders {} and {} are the same work order (one run_id); the batch was refused and nothing ran",
                first.file, order.file
            ))
            .hint(format!("give {} once", first.file)));
        }
    }
    Ok(orders)
}

/// The refusal of the batch because `order`'s own preflight refused it (`said`: its lines).
fn refused(order: &Order, said: &[String]) -> Error {
    let why = said
        .iter()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or("its run was refused");
    let mut e = Error::new(format!(
        "work order {} cannot run: {why}; the batch was refused and nothing ran",
        order.file
    ));
    e.hint = said
        .iter()
        .find_map(|l| l.strip_prefix("hint: "))
        .map(|h| format!("{h}; or leave {} out of the batch", order.file));
    e.details = said
        .iter()
        .filter(|l| l.starts_with("  "))
        .map(|l| l.trim_start().to_string())
        .collect();
    e
}

fn spawn_error(e: &std::io::Error) -> Error {
    Error::new(format!("cannot start a run of the batch: {e}"))
        .hint("check that the git-factory binary is still where it was started from")
}

/// The `error:`, `hint:` and detail lines a child printed, without colour.
fn said(stderr: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(stderr);
    let mut out = Vec::new();
    let mut in_error = false;
    for line in text.lines() {
        if line.starts_with("error: ") {
            in_error = true;
            out.push(line.to_string());
        } else if line.starts_with("hint: ") || (in_error && line.starts_with("  ")) {
            out.push(line.to_string());
        } else {
            in_error = false;
        }
    }
    out
}

/// The command for one work order's run: this binary, `run --worktree -w FILE` (with
/// `--json` when `json`: the batch reads each run's summary from it), and every other flag
/// the user gave.
fn child(args: &RunArgs, file: &str, jobs: Jobs, json: bool) -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| "git-factory".into());
    let mut cmd = Command::new(exe);
    cmd.args(["--color", "never", "run", "--worktree"]);
    if let Some(baseline) = &args.batch_baseline {
        cmd.env(crate::env::BATCH_BASELINE, baseline);
    }
    if json {
        cmd.arg("--json");
    }
    cmd.arg("-w").arg(file).args(passed_on(args));
    if let Some(j) = jobs.per_run {
        cmd.arg("--jobs").arg(j.to_string());
    }
    cmd
}

/// The user's flags that each run of the batch gets as given: all but `-w`, `--json`,
/// `--jobs`, `--dry-run` and `--worktree`, which the batch sets itself, and the ones a batch
/// refuses (inline work orders, `--branch`).
pub(crate) fn passed_on(args: &RunArgs) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut value = |flag: &str, v: OsString| {
        out.push(flag.into());
        out.push(v);
    };
    if let Some(v) = &args.repo {
        value("--repo", v.into());
    }
    if let Some(v) = &args.out {
        value("--out", v.into());
    }
    for m in &args.llm_model {
        value("--llm-model", m.into());
    }
    let strings = [
        ("--llm-base-url", &args.llm_base_url),
        ("--llm-api", &args.llm_api),
        ("--llm-reasoning-effort", &args.llm_reasoning_effort),
        ("--agent-command", &args.agent_command),
        ("--agent-edits", &args.agent_edits),
    ];
    for (flag, v) in strings {
        if let Some(v) = v {
            value(flag, v.into());
        }
    }
    if let Some(t) = args.llm_temperature {
        // `Display` of an f64 reads back as the same number.
        value("--llm-temperature", t.to_string().into());
    }
    let numbers = [
        ("--llm-max-output-tokens", args.llm_max_output_tokens),
        ("--agent-timeout", args.agent_timeout),
        ("--max-attempts", args.max_attempts.map(u64::from)),
        ("--timeout-seconds", args.timeout_seconds),
        ("--max-tokens", args.max_tokens),
    ];
    for (flag, v) in numbers {
        if let Some(v) = v {
            value(flag, v.to_string().into());
        }
    }
    if let Some(usd) = args.max_cost {
        value("--max-cost", usd.to_string().into());
    }
    if let Some(v) = &args.replay {
        value("--replay", v.into());
    }
    if args.candidates != 1 {
        value("--candidates", args.candidates.to_string().into());
    }
    let switches = [
        ("--strict-apply", args.strict_apply),
        ("--force", args.force),
        ("--commit", args.commit),
        ("--sandbox", args.sandbox),
        ("--no-sandbox", args.no_sandbox),
        ("--baseline-check", args.baseline_check),
        ("--no-baseline-check", args.no_baseline_check),
        ("--attest", args.attest),
        ("--no-attest", args.no_attest),
    ];
    for (flag, on) in switches {
        if on {
            out.push(flag.into());
        }
    }
    out
}

/// `work(order)` for every order, at most `at_once` at a time, results in the orders' order.
fn for_each_at_once<T: Send>(
    orders: &[Order],
    at_once: usize,
    work: impl Fn(&Order) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<T>>>> =
        Mutex::new((0..orders.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..at_once.min(orders.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(order) = orders.get(i) else { break };
                let done = work(order);
                if let Ok(mut r) = results.lock() {
                    r[i] = Some(done);
                }
            });
        }
    });
    let results = results
        .into_inner()
        .map_err(|_| Error::new("a batch worker stopped unexpectedly"))?;
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::new("a batch worker stopped unexpectedly"))))
        .collect()
}

/// The children that run now, and whether the batch is stopping: a child is started and
/// noted under the same lock a stop takes, so none starts after the stop and none is missed.
#[derive(Default)]
struct Running {
    stopping: bool,
    pids: Vec<rustix::process::Pid>,
}

/// Every order's run, at most `jobs.runs` at once; `None` for an order that never started
/// (the batch was interrupted first).
fn run_all(args: &RunArgs, orders: &[Order], jobs: Jobs, board: &Board) -> Vec<Option<Ran>> {
    let next = AtomicUsize::new(0);
    let running = Mutex::new(Running::default());
    let results: Mutex<Vec<Option<Ran>>> = Mutex::new((0..orders.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..jobs.runs.min(orders.len()))
            .map(|_| {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(order) = orders.get(i) else { break };
                    let Some(ran) = run_one(args, order, i, jobs, board, &running) else {
                        break;
                    };
                    if let Ok(mut r) = results.lock() {
                        r[i] = Some(ran);
                    }
                })
            })
            .collect();
        let mut stopped = false;
        while !workers.iter().all(|w| w.is_finished()) {
            if !stopped && crate::interrupt::requested() {
                stopped = true;
                stop(&running);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    results.into_inner().unwrap_or_default()
}

/// No new run starts; every running one is asked to stop as Ctrl-C would (it rolls back and
/// records itself INTERRUPTED). A child that had the signal from the terminal already just
/// sees it again, which cannot cut its rollback short.
fn stop(running: &Mutex<Running>) {
    if let Ok(mut r) = running.lock() {
        r.stopping = true;
        for pid in &r.pids {
            let _ = rustix::process::kill_process(*pid, rustix::process::Signal::INT);
        }
    }
}

/// One order's run, to its end; `None` when the batch is stopping and it was not started.
fn run_one(
    args: &RunArgs,
    order: &Order,
    i: usize,
    jobs: Jobs,
    board: &Board,
    running: &Mutex<Running>,
) -> Option<Ran> {
    let line = u32::try_from(i + 1).unwrap_or(u32::MAX);
    let mut cmd = child(args, &order.file, jobs, true);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawned = {
        let mut r = running.lock().ok()?;
        if r.stopping {
            return None;
        }
        let spawned = cmd.spawn();
        if let Ok(child) = &spawned {
            r.pids.push(rustix::process::Pid::from_child(child));
        }
        spawned
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let said = vec![format!("error: {}", spawn_error(&e).message)];
            board.set(line, "ERROR: could not start", true);
            return Some(Ran {
                code: None,
                summary: None,
                said,
            });
        }
    };
    board.set(line, "running", false);
    let pid = rustix::process::Pid::from_child(&child);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (out, err) = std::thread::scope(|s| {
        let err = s.spawn(|| follow(stderr, line, board));
        let mut out = Vec::new();
        if let Some(mut stdout) = stdout {
            let _ = stdout.read_to_end(&mut out);
        }
        (out, err.join().unwrap_or_default())
    });
    let status = child.wait();
    if let Ok(mut r) = running.lock() {
        r.pids.retain(|p| *p != pid);
    }
    let ran = Ran {
        code: status.ok().and_then(|s| s.code()),
        summary: serde_json::from_slice::<RunSummary>(&out).ok(),
        said: said(&err),
    };
    board.set(line, &ended(&ran), true);
    Some(ran)
}

/// Reads a child's stderr to its end: each line is shown on its live line (on a terminal),
/// and all of it is kept for [`said`].
fn follow(stderr: Option<std::process::ChildStderr>, line: u32, board: &Board) -> Vec<u8> {
    let mut all = Vec::new();
    let Some(stderr) = stderr else {
        return all;
    };
    let mut reader = std::io::BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let shown = String::from_utf8_lossy(&buf);
                let shown = shown.trim();
                if !shown.is_empty() {
                    board.note(line, shown);
                }
                all.extend_from_slice(&buf);
            }
        }
    }
    all
}

/// A run's verdict as its line ends with, e.g. `PASS 1a2b3c4d5e6f after 1 attempt`.
fn ended(ran: &Ran) -> String {
    match (&ran.summary, ran.code) {
        (Some(s), _) => format!(
            "{} {} after {}",
            s.verdict.as_str(),
            s.run_id,
            super::run::attempts_made(s)
        ),
        (None, Some(130)) => "INTERRUPTED before its run began".to_string(),
        (None, _) => format!(
            "ERROR: {}",
            ran.said
                .iter()
                .find_map(|l| l.strip_prefix("error: "))
                .unwrap_or("the run ended without a summary")
        ),
    }
}

/// What a run counts as in the batch's exit code and total.
fn verdict_of(ran: &Ran) -> Verdict {
    match (&ran.summary, ran.code) {
        // A PASS the run itself exited 2 for (a commit a hook refused, an undelivered race).
        (Some(s), Some(2)) if s.verdict == Verdict::Pass => Verdict::Error,
        (Some(s), _) => s.verdict,
        (None, Some(130)) => Verdict::Interrupted,
        (None, _) => Verdict::Error,
    }
}

/// 130 when the batch was interrupted; else 2 when any run ended ERROR, 1 when any FAILed,
/// 0 when every run PASSed (SPEC §5.2).
fn batch_exit(ran: &[Option<Ran>], interrupted: bool) -> Exit {
    let verdicts: Vec<Verdict> = ran.iter().flatten().map(verdict_of).collect();
    if interrupted || verdicts.contains(&Verdict::Interrupted) {
        Exit::Interrupted
    } else if verdicts.contains(&Verdict::Error) || verdicts.len() < ran.len() {
        Exit::Refused
    } else if verdicts.contains(&Verdict::Fail) {
        Exit::Fail
    } else {
        Exit::Success
    }
}

/// The table of the batch's runs, in the order given: work-order id, run_id, verdict,
/// attempts, duration, cost; then what the batch cost and the reason of each run that could
/// not finish.
fn table(ui: &Ui, orders: &[Order], ran: &[Option<Ran>]) {
    let rows: Vec<([String; 6], Option<Verdict>)> = orders
        .iter()
        .zip(ran)
        .map(|(order, ran)| {
            let id = ui::escape_controls(&order.id);
            let Some(r) = ran else {
                let cells = [
                    id,
                    "-".into(),
                    "NOT RUN".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ];
                return (cells, None);
            };
            let v = verdict_of(r);
            let cells = match &r.summary {
                Some(s) => [
                    id,
                    s.run_id.clone(),
                    v.as_str().into(),
                    attempts(s).to_string(),
                    format!("{:.1}s", s.duration_seconds),
                    super::show::cost_words(s.cost.as_ref()),
                ],
                None => [
                    id,
                    "-".into(),
                    v.as_str().into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ],
            };
            (cells, Some(v))
        })
        .collect();
    let head = [
        "work order",
        "run_id",
        "verdict",
        "attempts",
        "duration",
        "cost",
    ];
    let mut widths = head.map(console::measure_text_width);
    for (row, _) in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(console::measure_text_width(cell));
        }
    }
    // Padded as plain text, then the verdict coloured: escapes do not count as width.
    let pad = |cell: &str, w: usize| {
        format!(
            "{cell}{}",
            " ".repeat(w.saturating_sub(console::measure_text_width(cell)))
        )
    };
    let head_line: Vec<String> = head.iter().zip(widths).map(|(h, w)| pad(h, w)).collect();
    ui.info(ui::bold(head_line.join("  ").trim_end()));
    for (row, verdict) in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(c, (cell, w))| match (c, verdict) {
                (2, Some(v)) => pad(&ui::verdict(*v), w),
                _ => pad(cell, w),
            })
            .collect();
        ui.info(cells.join("  ").trim_end());
    }
    for (order, ran) in orders.iter().zip(ran) {
        let Some(r) = ran else { continue };
        let why = match &r.summary {
            Some(s) if verdict_of(r) == Verdict::Error => s.error.clone(),
            None if verdict_of(r) == Verdict::Error => r
                .said
                .iter()
                .find_map(|l| l.strip_prefix("error: "))
                .map(str::to_string),
            _ => None,
        };
        if let Some(why) = why {
            ui.always(format!(
                "{} {} ({}): {}",
                console::style("error:").red().bold(),
                ui::escape_controls(&order.id),
                order.file,
                ui::escape_controls(&why)
            ));
        }
    }
}

/// Attempts a run made: its own, or its candidates' in a race.
fn attempts(s: &RunSummary) -> u64 {
    if s.candidates.is_empty() {
        s.attempts.len() as u64
    } else {
        s.candidates.iter().map(|c| u64::from(c.attempts)).sum()
    }
}

/// The one-line total: how many runs ended how, in how long, how many at once.
fn total(ran: &[Option<Ran>], took: Duration, jobs: Jobs, interrupted: bool) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut count = |what: String| match counts.iter_mut().find(|(w, _)| *w == what) {
        Some((_, n)) => *n += 1,
        None => counts.push((what, 1)),
    };
    for r in ran {
        match r {
            Some(r) => count(ui::verdict(verdict_of(r))),
            None => count("not run".to_string()),
        }
    }
    let parts: Vec<String> = counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
    // What the batch cost, where its runs recorded one (SPEC §3.3 Cost).
    let costs =
        (ran.iter().flatten()).filter_map(|r| r.summary.as_ref().and_then(|s| s.cost.as_ref()));
    let cost = crate::store::records::Cost::sum(costs)
        .map(|c| format!(", cost {}", c.display()))
        .unwrap_or_default();
    format!(
        "batch{}: {} work orders, {} in {:.1}s ({} at once){cost}",
        if interrupted { " interrupted" } else { "" },
        ran.len(),
        parts.join(", "),
        took.as_secs_f64(),
        jobs.runs
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Parser)]
    struct Wrapped {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(argv: &[OsString]) -> RunArgs {
        let mut all: Vec<OsString> = vec!["run".into()];
        all.extend_from_slice(argv);
        Wrapped::try_parse_from(all).expect("parses").run
    }

    /// Every flag of `run` with a value that is not its default, except the ones a batch
    /// sets itself or refuses.
    const EVERY_FLAG: &[(&str, Option<&str>)] = &[
        ("--repo", Some("some/repo")),
        ("--out", Some("/some/out")),
        ("--llm-model", Some("openai:a")),
        ("--llm-model", Some("anthropic:b")),
        ("--llm-base-url", Some("http://127.0.0.1:9/v1")),
        ("--llm-temperature", Some("0.7")),
        ("--llm-api", Some("chat")),
        ("--llm-max-output-tokens", Some("1234")),
        ("--llm-reasoning-effort", Some("high")),
        ("--agent-command", Some("my agent --x 'a b'")),
        ("--agent-edits", Some("other agent")),
        ("--agent-timeout", Some("77")),
        ("--replay", Some("some/replay")),
        ("--max-attempts", Some("5")),
        ("--timeout-seconds", Some("66")),
        ("--strict-apply", None),
        ("--force", None),
        ("--commit", None),
        ("--sandbox", None),
        ("--no-sandbox", None),
        ("--baseline-check", None),
        ("--no-baseline-check", None),
        ("--candidates", Some("3")),
        ("--max-tokens", Some("9999")),
        ("--max-cost", Some("2.5")),
        ("--attest", None),
        ("--no-attest", None),
    ];

    /// Set by the batch for each run, or refused in a batch: not passed on as given.
    const NOT_PASSED: &[&str] = &[
        "work-order",
        "json",
        "jobs",
        "dry-run",
        "worktree",
        "branch",
        "id",
        "title",
        "intent",
        "allow",
        "context",
        "accept",
        "forbid",
    ];

    #[test]
    fn every_flag_of_run_is_passed_on_or_set_by_the_batch() {
        // A flag added to `run` later must be added here (and to `passed_on`), or this fails.
        let cmd = Wrapped::command();
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if NOT_PASSED.contains(&long) || long == "help" {
                continue;
            }
            assert!(
                EVERY_FLAG.iter().any(|(f, _)| *f == format!("--{long}")),
                "--{long} is neither passed on to a batch's runs nor set by the batch"
            );
        }
        // Passed on, each flag reads back as given. (`overrides_with` pairs keep the last
        // one of each; given both, both are still passed on in the same order.)
        let argv: Vec<OsString> = EVERY_FLAG
            .iter()
            .flat_map(|(f, v)| std::iter::once(f.into()).chain(v.map(Into::into)))
            .collect();
        let given = parse(&argv);
        let again = parse(&passed_on(&given));
        assert_eq!(format!("{again:?}"), format!("{given:?}"));
    }

    #[test]
    fn flags_left_at_their_defaults_are_not_passed_on() {
        assert!(passed_on(&parse(&[])).is_empty());
    }

    #[test]
    fn the_jobs_limit_is_shared_by_the_candidates_of_every_run() {
        let share = |j, c| Jobs::share(Some(j), c).expect("valid");
        assert_eq!(
            share(4, 1),
            Jobs {
                runs: 4,
                per_run: None
            }
        );
        assert_eq!(
            share(4, 2),
            Jobs {
                runs: 2,
                per_run: Some(2)
            }
        );
        assert_eq!(
            share(4, 3),
            Jobs {
                runs: 1,
                per_run: Some(3)
            }
        );
        assert_eq!(
            share(3, 8),
            Jobs {
                runs: 1,
                per_run: Some(3)
            }
        );
        assert_eq!(
            share(1, 2),
            Jobs {
                runs: 1,
                per_run: Some(1)
            }
        );
        for j in 1..=16 {
            for c in 1..=16 {
                let s = share(j, c);
                let each = s.per_run.unwrap_or(1) as usize;
                assert!(s.runs >= 1 && s.runs * each <= j as usize, "{j} {c}: {s:?}");
            }
        }
        assert!(Jobs::share(Some(0), 1).is_err());
    }

    #[test]
    fn a_run_without_a_summary_counts_as_error_unless_interrupted() {
        let ran = |code| Ran {
            code,
            summary: None,
            said: vec!["error: x".into()],
        };
        assert_eq!(verdict_of(&ran(Some(2))), Verdict::Error);
        assert_eq!(verdict_of(&ran(None)), Verdict::Error);
        assert_eq!(verdict_of(&ran(Some(130))), Verdict::Interrupted);
        assert_eq!(batch_exit(&[Some(ran(Some(2)))], false), Exit::Refused);
        assert_eq!(batch_exit(&[None], false), Exit::Refused);
        assert_eq!(
            batch_exit(&[Some(ran(Some(2))), None], true),
            Exit::Interrupted
        );
    }
}
