//! Batches (SPEC §5.2): `-w` with several work orders — each its own run in a pooled
//! worktree, `--jobs` at once, validated up front, a table, exit 0/1/2, a `--json` array,
//! Ctrl-C stops them all.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;

const APP: [&str; 3] = ["one", "two", "three"];
const PASSES: &str = "grep -qx TWO app.txt";
const FAILS: &str = "grep -qx zwei app.txt";

/// A replay folder whose every proposal is `two` → `TWO` in `app.txt`. (Replayed, not an
/// `--agent-command`: an agent's audit compares shared refs while it runs, and the runs of a
/// batch write theirs meanwhile.)
fn proposals(r: &TestRepo) -> PathBuf {
    let diff = diff_replace("app.txt", &APP, "two", "TWO");
    r.replay("proposals", &[("1.diff", diff.clone()), ("2.diff", diff)])
}

/// A work order named `id` whose acceptance command is `accept`, written outside the repo.
fn order(r: &TestRepo, id: &str, accept: &str) -> PathBuf {
    let mut wo = basic_order(&[accept]);
    wo["id"] = id.into();
    wo["title"] = format!("order {id}").into();
    let path = r.outside.join(format!("{id}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&wo).expect("json")).expect("write");
    path
}

/// A check that passes but leaves the run's worktree index locked, so committing the PASS
/// fails: the run ends ERROR (its delivery undone).
fn errs() -> &'static str {
    "sh -c 'grep -qx TWO app.txt && touch \"$(git rev-parse --git-dir)/index.lock\"'"
}

/// `git factory run FLAGS -w ORDERS… --replay PROPOSALS`, to completion.
fn batch(r: &TestRepo, orders: &[&Path], flags: &[&str]) -> std::process::Output {
    let mut cmd = r.factory();
    cmd.arg("run").args(flags).arg("-w");
    for o in orders {
        cmd.arg(o);
    }
    cmd.arg("--replay")
        .arg(proposals(r))
        .output()
        .expect("git factory runs")
}

fn summary_of(r: &TestRepo, run_id: &str) -> Value {
    serde_json::from_str(&r.git(&["show", &format!("refs/factory/{run_id}:run_summary.json")]))
        .expect("json")
}

/// `git factory show` of every run recorded, for a failing assertion to say why.
fn every_run_shown(r: &TestRepo) -> String {
    r.run_ids()
        .iter()
        .map(|id| {
            let show = r.factory().args(["show", id]).output().expect("show");
            stdout_of(&show)
        })
        .collect()
}

/// The run ids of the batch's table, in its order (the table's second column).
fn table_ids(stderr: &str) -> Vec<String> {
    let mut lines = stderr.lines().skip_while(|l| !l.starts_with("work order"));
    lines.next();
    lines
        .take_while(|l| !l.starts_with("batch") && !l.starts_with("error:"))
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

/// No process this test started (the batch, its runs and their checks, all of which
/// name files under the test's `outside` folder) is still running.
fn nothing_running(r: &TestRepo) {
    let left = processes_with(r.outside.to_str().expect("utf-8"));
    assert!(left.is_empty(), "still running: {left:?}");
}

/// Everything in `.git` a refused batch must not have written: refs (all of them), notes,
/// worktrees and the harness's own folder.
fn git_state(r: &TestRepo) -> (String, bool, bool, bool) {
    let git = r.root.join(".git");
    (
        r.git(&["for-each-ref", "--format=%(refname) %(objectname)"]),
        git.join("worktrees").exists(),
        git.join("factory").exists(),
        git.join("refs/notes").exists(),
    )
}

#[test]
fn a_batch_runs_every_order_on_its_own_and_leaves_the_users_tree_alone() {
    let r = TestRepo::simple();
    // Work in progress: a batch never touches it (SPEC §5: a batch implies --worktree).
    r.write("app.txt", "one\nmine\nthree\n");
    r.write("notes.txt", "untracked\n");
    r.write(".env", "SECRET=1\n");
    let before = r.snapshot();
    let a = order(&r, "wo-a", PASSES);
    let b = order(&r, "wo-b", PASSES);
    // `-w` given twice, each with one file.
    let out = r
        .factory()
        .args(["run", "-w"])
        .arg(&a)
        .arg("-w")
        .arg(&b)
        .arg("--replay")
        .arg(proposals(&r))
        .output()
        .expect("runs");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // Each PASS is delivered on its own factory/run-<run_id> branch; nothing else moved.
    let mut after = r.snapshot();
    after.refs.retain(|l| !l.starts_with("refs/heads/factory/"));
    assert_eq!(after, before, "the user's tree, index and refs");
    let ids = table_ids(&err);
    assert_eq!(ids.len(), 2, "{err}");
    let mut stored = r.run_ids();
    stored.sort();
    let mut listed = ids.clone();
    listed.sort();
    assert_eq!(stored, listed, "one record per order");
    for (id, wo) in ids.iter().zip(["wo-a", "wo-b"]) {
        let s = summary_of(&r, id);
        assert_eq!(s["verdict"], "PASS");
        assert_eq!(s["mode"], "worktree");
        assert_eq!(s["work_order_id"], wo);
        let branch = r.git(&["show", &format!("refs/heads/factory/run-{id}:app.txt")]);
        assert_eq!(branch, "one\nTWO\nthree\n", "each PASS on its own branch");
    }
    assert!(
        err.contains("work order") && err.contains("run_id"),
        "{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("batch: 2 work orders, 2 PASS")),
        "{err}"
    );
    only_idle_pooled_worktrees(&r);
    nothing_running(&r);
}

#[test]
fn the_exit_code_is_the_worst_verdict() {
    let r = TestRepo::simple();
    let pass = order(&r, "wo-pass", PASSES);
    let pass2 = order(&r, "wo-pass2", &format!("{PASSES} app.txt"));
    let fail = order(&r, "wo-fail", FAILS);
    let out = batch(&r, &[&pass, &pass2], &["--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = batch(&r, &[&pass, &fail], &["--jobs", "2", "--max-attempts", "1"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("1 PASS, 1 FAIL"), "{err}");
    // An ERROR outweighs a FAIL. Each run of it in its own worktree (--jobs 3).
    let error = order(&r, "wo-error", errs());
    let out = batch(
        &r,
        &[&pass, &fail, &error],
        &["--jobs", "3", "--max-attempts", "1"],
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let row = err
        .lines()
        .find(|l| l.starts_with("wo-error "))
        .unwrap_or_default();
    assert!(row.contains("ERROR"), "{err}");
    assert!(
        err.contains("error: wo-error (") && err.contains("delivering the change failed"),
        "the reason is named: {err}"
    );
    // The PASS and the FAIL were served from the cache, as lone runs would be.
    let ids = table_ids(&err);
    assert_eq!(summary_of(&r, &ids[0])["verdict"], "PASS");
    assert_eq!(summary_of(&r, &ids[1])["verdict"], "FAIL");
    assert_eq!(summary_of(&r, &ids[2])["verdict"], "ERROR");
    nothing_running(&r);
}

#[test]
fn each_run_has_the_run_id_it_has_alone() {
    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    let other = clone_of(&r, &bare, "alone");
    let a = order(&r, "wo-a", PASSES);
    let b = order(&r, "wo-b", FAILS);
    let out = batch(&r, &[&a, &b], &["--max-attempts", "1"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let ids = table_ids(&err);
    assert_eq!(ids.len(), 2, "{err}");
    // The same orders run alone, with the same flags, in another clone: in-situ and in a
    // worktree alike.
    for (wo, id) in [&a, &b].iter().zip(&ids) {
        for mode in [&[][..], &["--worktree"][..]] {
            let alone = command_in(&r, &other, "git-factory")
                .args(["run", "--json", "--force", "--max-attempts", "1"])
                .args(mode)
                .arg("-w")
                .arg(wo)
                .arg("--replay")
                .arg(proposals(&r))
                .output()
                .expect("runs");
            let s: Value = serde_json::from_slice(&alone.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", stderr_of(&alone)));
            assert_eq!(&s["run_id"], id.as_str(), "{}", stderr_of(&alone));
            // An in-situ PASS leaves its change in the clone's tree: put it back.
            let reset = in_dir(&r, &other, "git", &["checkout", "--", "app.txt"]);
            assert!(reset.status.success());
        }
    }
    nothing_running(&r);
}

#[test]
fn json_prints_an_array_of_run_summaries_in_the_order_given() {
    let r = TestRepo::simple();
    let a = order(&r, "wo-a", FAILS);
    let b = order(&r, "wo-b", PASSES);
    let c = order(&r, "wo-c", &format!("{PASSES} app.txt"));
    let out = batch(&r, &[&a, &b, &c], &["--json", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).expect("a JSON array");
    let ids: Vec<&str> = list
        .iter()
        .map(|s| s["work_order_id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["wo-a", "wo-b", "wo-c"]);
    assert_eq!(list[0]["verdict"], "FAIL");
    assert_eq!(list[1]["verdict"], "PASS");
    for s in &list {
        let id = s["run_id"].as_str().expect("run_id");
        // The same object a lone `run --json` prints: the record's summary, key for key.
        assert_eq!(s, &summary_of(&r, id));
    }
    assert_eq!(table_ids(&stderr_of(&out)).len(), 3);
    nothing_running(&r);
}

#[test]
fn one_invalid_order_refuses_the_batch_and_writes_nothing() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let state = git_state(&r);
    let good = order(&r, "wo-good", PASSES);
    let good2 = order(&r, "wo-good2", PASSES);
    // Invalid as a work order (a field missing), and invalid at preflight (a program that is
    // not on PATH): both are found before anything runs.
    let missing = r.outside.join("missing-field.json");
    std::fs::write(
        &missing,
        r#"{"id": "x", "title": "t", "intent": "i", "acceptance_commands": ["true"]}"#,
    )
    .expect("write");
    let no_program = order(&r, "wo-np", "no-such-program-here --x");
    let unreadable = r.outside.join("not-there.json");
    for (bad, says) in [
        (&missing, "allowed_files"),
        (&no_program, "no-such-program-here"),
        (&unreadable, "cannot read"),
    ] {
        let name = bad.display().to_string();
        let out = batch(&r, &[&good, bad, &good2], &[]);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&name), "names the file: {err}");
        assert!(err.contains(says), "names the cause: {err}");
        assert!(err.contains("nothing ran"), "{err}");
        assert!(err.contains("hint:"), "{err}");
        assert!(!err.contains("work order  "), "no table: {err}");
        assert_eq!(r.snapshot(), before);
        assert_eq!(git_state(&r), state, "no refs, notes, worktrees");
        assert!(r.run_ids().is_empty());
    }
    // The same work order twice: one run_id twice at once.
    let copy = r.outside.join("copy.json");
    std::fs::copy(&good, &copy).expect("copy");
    for (twice, says) in [(&good, good.display()), (&copy, copy.display())] {
        let out = batch(&r, &[&good, twice], &[]);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("the same work order") && err.contains(&says.to_string()),
            "{err}"
        );
        assert_eq!(git_state(&r), state);
    }
    // What a batch cannot do is refused the same way.
    for (flags, says) in [
        (&["--branch", "b"][..], "--branch"),
        (&["--jobs", "0"][..], "--jobs"),
    ] {
        let out = batch(&r, &[&good, &good2], flags);
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(stderr_of(&out).contains(says), "{}", stderr_of(&out));
        assert_eq!(git_state(&r), state);
    }
    let out = r
        .factory()
        .args(["run", "-w", "-"])
        .arg(&good)
        .args(["--agent-command", "true"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("stdin"), "{}", stderr_of(&out));
    assert_eq!(r.snapshot(), before);
    assert_eq!(git_state(&r), state);
    nothing_running(&r);
}

#[test]
fn a_dry_run_batch_prints_each_first_prompt_and_changes_nothing() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let state = git_state(&r);
    let a = order(&r, "wo-a", PASSES);
    let b = order(&r, "wo-b", FAILS);
    let out = batch(&r, &[&a, &b], &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    let heads: Vec<&str> = text.lines().filter(|l| l.starts_with("==> ")).collect();
    assert_eq!(
        heads,
        [
            format!("==> {} <==", a.display()),
            format!("==> {} <==", b.display())
        ]
    );
    assert!(
        text.contains("order wo-a") && text.contains("order wo-b"),
        "{text}"
    );
    assert!(stderr_of(&out).contains("nothing was called and nothing changed"));
    assert_eq!(r.snapshot(), before);
    assert_eq!(git_state(&r), state);
    nothing_running(&r);
}

#[test]
fn one_work_order_is_still_a_lone_run() {
    let r = TestRepo::simple();
    let a = order(&r, "wo-a", PASSES);
    let out = batch(&r, &[&a], &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("batch:"), "{err}");
    // In-situ, as before: the change is in the work tree.
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    nothing_running(&r);
}

/// Checks that note when they start and end in `log` (appends of one short line each are
/// atomic), so the most that ever ran at once can be counted.
fn logged(log: &Path) -> String {
    format!(
        "sh -c 'grep -qx TWO app.txt && echo start >> {log} && sleep 1 && echo end >> {log}'",
        log = log.display()
    )
}

/// A batch of `count` orders `{prefix}-{i}` whose check logs its start and end to `log`, run
/// with `flags`; it must exit 0.
fn logged_batch_passes(r: &TestRepo, prefix: &str, count: usize, log: &Path, flags: &[&str]) {
    let orders: Vec<PathBuf> = (1..=count)
        .map(|i| order(r, &format!("{prefix}-{i}"), &logged(log)))
        .collect();
    let refs: Vec<&Path> = orders.iter().map(PathBuf::as_path).collect();
    let out = batch(r, &refs, flags);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stderr_of(&out),
        every_run_shown(r)
    );
}

fn most_at_once(log: &Path) -> usize {
    let text = std::fs::read_to_string(log).expect("log");
    let (mut now, mut most) = (0usize, 0usize);
    for l in text.lines() {
        match l {
            "start" => now += 1,
            "end" => now -= 1,
            other => panic!("unexpected line {other:?}"),
        }
        most = most.max(now);
    }
    assert_eq!(now, 0, "every start has its end");
    most
}

#[test]
fn at_most_jobs_checks_run_at_once() {
    let r = TestRepo::simple();
    let log = r.outside.join("checks.log");
    logged_batch_passes(&r, "wo", 4, &log, &["--jobs", "2"]);
    assert_eq!(
        std::fs::read_to_string(&log).expect("log").lines().count(),
        8
    );
    assert_eq!(most_at_once(&log), 2, "two at once, never more");
    nothing_running(&r);
}

#[test]
fn candidates_share_the_jobs_limit() {
    let r = TestRepo::simple();
    // 3 orders racing 2 candidates each under --jobs 3: one run (two candidates) at a time.
    let log = r.outside.join("checks.log");
    logged_batch_passes(&r, "wo", 3, &log, &["--jobs", "3", "--candidates", "2"]);
    let checks = std::fs::read_to_string(&log).expect("log").lines().count() / 2;
    assert!(checks >= 6, "every candidate checked: {checks}");
    assert!(most_at_once(&log) <= 3);
    // Under --jobs 4 two runs race at once: four candidates' checks, never more.
    let log4 = r.outside.join("checks4.log");
    logged_batch_passes(&r, "wo4", 4, &log4, &["--jobs", "4", "--candidates", "2"]);
    assert!(most_at_once(&log4) <= 4);
    for id in r.run_ids() {
        let s = summary_of(&r, &id);
        assert_eq!(s["candidates"].as_array().map(Vec::len), Some(2));
    }
    nothing_running(&r);
}

/// Starts a batch of three orders whose checks wait; returns it once every check started.
/// `sleep` names the test's own duration, so a check left behind would be found.
fn three_waiting_runs(r: &TestRepo, sleep: &str) -> std::process::Child {
    let started = r.outside.join("started");
    std::fs::create_dir_all(&started).expect("mkdir");
    let orders: Vec<PathBuf> = (1..=3)
        .map(|i| {
            order(
                r,
                &format!("wo-{i}"),
                &format!("sh -c 'touch {}/{i} && sleep {sleep}'", started.display()),
            )
        })
        .collect();
    let replay = proposals(r);
    let replay = replay.to_str().expect("utf-8");
    let mut cmd = r.spawn(&["run", "--jobs", "3", "--replay", replay, "-w"]);
    cmd.args(&orders)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(r.outside.join("stderr")).expect("create"));
    // Its own process group, as a shell gives a foreground job.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().expect("spawn");
    for i in 1..=3 {
        let marker = started.join(i.to_string());
        for _ in 0..1500 {
            if marker.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            marker.exists(),
            "run {i} never reached its check: {}",
            std::fs::read_to_string(r.outside.join("stderr")).unwrap_or_default()
        );
    }
    child
}

fn every_run_interrupted(r: &TestRepo, before: &Snapshot, code: Option<i32>, sleep: &str) {
    assert_eq!(
        code,
        Some(130),
        "{}",
        std::fs::read_to_string(r.outside.join("stderr")).unwrap_or_default()
    );
    assert_eq!(&r.snapshot(), before);
    let ids = r.run_ids();
    assert_eq!(ids.len(), 3, "one record per run");
    for id in &ids {
        assert_eq!(summary_of(r, id)["verdict"], "INTERRUPTED", "{id}");
    }
    assert_eq!(r.git(&["branch", "--list"]).trim(), "* main");
    only_idle_pooled_worktrees(r);
    let err = std::fs::read_to_string(r.outside.join("stderr")).unwrap_or_default();
    assert!(err.contains("batch interrupted"), "{err}");
    nothing_running(r);
    let left = processes_with(&format!("sleep {sleep}"));
    assert!(left.is_empty(), "checks left running: {left:?}");
}

#[test]
fn ctrl_c_stops_every_run_of_the_batch() {
    let r = TestRepo::simple();
    r.write("notes.txt", "mine\n");
    let before = r.snapshot();
    let mut child = three_waiting_runs(&r, "31.25");
    // Ctrl-C at a terminal: SIGINT to the whole foreground process group.
    let pgid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process_group(pgid, rustix::process::Signal::INT).expect("kill");
    let status = child.wait().expect("wait");
    every_run_interrupted(&r, &before, status.code(), "31.25");
}

#[test]
fn sigint_to_the_batch_alone_is_passed_on_to_every_run() {
    let r = TestRepo::simple();
    let before = r.snapshot();
    let mut child = three_waiting_runs(&r, "31.75");
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("kill");
    let status = child.wait().expect("wait");
    every_run_interrupted(&r, &before, status.code(), "31.75");
}

#[test]
fn on_a_terminal_each_run_has_a_live_line_and_ctrl_c_stops_them_all() {
    let r = TestRepo::simple();
    let Some(pane) = tmux::Pane::start(&r, 120) else {
        return;
    };
    let before = r.snapshot();
    let started = r.outside.join("started");
    std::fs::create_dir_all(&started).expect("mkdir");
    let orders: Vec<String> = (1..=2)
        .map(|i| {
            let accept = format!(
                "sh -c 'grep -qx TWO app.txt && touch {}/{i} && sleep 31.5'",
                started.display()
            );
            order(&r, &format!("wo-{i}"), &accept).display().to_string()
        })
        .collect();
    pane.type_line(&format!(
        "clear; git factory run --jobs 2 --replay {} -w {}",
        proposals(&r).display(),
        orders.join(" ")
    ));
    for i in 1..=2 {
        wait_for(&started.join(i.to_string()));
    }
    // One live line per running order, showing what its run is doing now.
    let line_of = |screen: &str, i: usize| {
        screen
            .lines()
            .find(|l| l.starts_with(&format!("  wo-{i}: ")))
            .map(str::to_string)
    };
    let mut screen = pane.screen();
    for _ in 0..600 {
        if (1..=2).all(|i| line_of(&screen, i).is_some_and(|l| l.contains("PO acceptance"))) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        screen = pane.screen();
    }
    for i in 1..=2 {
        let line = line_of(&screen, i).unwrap_or_default();
        assert!(line.contains("PO acceptance"), "wo-{i}:\n{screen}");
    }
    // Ctrl-C at the terminal: the foreground job, every run of it included.
    pane.tmux(&["send-keys", "-t", "0", "C-c"]);
    let screen = pane.wait_for("batch interrupted");
    assert!(screen.contains("batch interrupted"), "{screen}");
    let rows: Vec<&str> = screen.lines().filter(|l| l.starts_with("wo-")).collect();
    assert_eq!(rows.len(), 2, "{screen}");
    assert!(rows.iter().all(|l| l.contains("INTERRUPTED")), "{screen}");
    let mut after = r.snapshot();
    after.refs.retain(|l| !l.starts_with("refs/heads/factory/"));
    assert_eq!(after, before);
    for id in r.run_ids() {
        assert_eq!(summary_of(&r, &id)["verdict"], "INTERRUPTED");
    }
    only_idle_pooled_worktrees(&r);
    nothing_running(&r);
    assert!(processes_with("sleep 31.5").is_empty());
}

#[test]
fn every_order_runs_at_the_head_the_batch_started_from() {
    let r = TestRepo::simple();
    let started = r.outside.join("started");
    let go = r.outside.join("go");
    let waits = format!(
        "sh -c 'touch {}; while [ ! -e {} ]; do sleep 0.1; done; grep -qx TWO app.txt'",
        started.display(),
        go.display()
    );
    let first = order(&r, "first", &waits);
    let second = order(&r, "second", PASSES);
    let head = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    let replay = proposals(&r);
    let replay = replay.to_str().expect("utf-8");
    let mut cmd = r.spawn(&["run", "--jobs", "1", "--json", "--replay", replay, "-w"]);
    cmd.arg(&first)
        .arg(&second)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawns");
    let waited = std::time::Instant::now();
    while !started.exists() {
        assert!(
            waited.elapsed().as_secs() < 60,
            "the first run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // A commit while the batch runs: no order's baseline changes.
    r.git(&["commit", "-q", "--allow-empty", "-m", "meanwhile"]);
    std::fs::write(&go, "").expect("write");
    let out = child.wait_with_output().expect("waits");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summaries: Vec<Value> = serde_json::from_str(&stdout_of(&out)).expect("json array");
    assert_eq!(summaries.len(), 2);
    for s in &summaries {
        assert_eq!(s["repo_baseline_commit"], head.as_str(), "{s:#}");
    }
}

#[test]
fn a_batch_baseline_that_is_not_a_commit_is_refused() {
    let r = TestRepo::simple();
    let wo = order(&r, "pinned", PASSES);
    let tree = r.git(&["rev-parse", "HEAD^{tree}"]).trim().to_string();
    let head = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    let before = r.snapshot();
    let cases = [
        (
            tree.as_str(),
            "--worktree",
            "is not a commit of this repository",
        ),
        ("HEAD", "--worktree", "is not a commit of this repository"),
        (
            "0000000000000000000000000000000000000000",
            "--worktree",
            "is not a commit of this repository",
        ),
        // In the user's own tree a run always starts at HEAD.
        (head.as_str(), "--force", "only a batch's runs in worktrees"),
    ];
    for (pinned, flag, said) in cases {
        let out = r
            .factory()
            .env("GIT_FACTORY_BATCH_BASELINE", pinned)
            .args(["run", flag, "-w"])
            .arg(&wo)
            .arg("--replay")
            .arg(proposals(&r))
            .output()
            .expect("runs");
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{pinned}: {stderr}");
        assert!(stderr.contains(said), "{pinned}: {stderr}");
        assert!(stderr.contains("hint: "), "{pinned}: {stderr}");
        assert_eq!(r.snapshot(), before, "{pinned}");
        assert!(r.run_ids().is_empty());
    }
}
