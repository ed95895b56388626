//! The harness's own cost, measured side by side with git's: `cargo bench --bench bench`.
//!
//! Options (after `--`): `--sizes 1000,10000,100000`, `--runs 5`, `--only NAME[,NAME]` with
//! names from: attempt, log, startup, worktree, apply, pycache.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_git-factory");

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .stderr(Stdio::inherit())
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn git_env(dir: &Path, args: &[&str], env: &[(&str, &Path)]) {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).args(args).stdout(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let status = cmd.status().expect("git runs");
    assert!(status.success(), "git {args:?} failed");
}

/// A small deterministic generator (xorshift), so every machine builds the same repos.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const WORDS: [&str; 16] = [
    "fn", "let", "value", "return", "match", "struct", "impl", "self", "config", "error", "result",
    "index", "tree", "commit", "patch", "verify",
];

fn file_text(rng: &mut Rng) -> String {
    let lines = 60 + (rng.next() % 80) as usize; // ~2-4 KB
    let mut s = String::new();
    for _ in 0..lines {
        let words = 3 + rng.next() % 8;
        for w in 0..words {
            if w > 0 {
                s.push(' ');
            }
            s.push_str(WORDS[(rng.next() % 16) as usize]);
        }
        s.push('\n');
    }
    s
}

/// A repo of `files` tracked files in nested folders, plus an ignored build folder holding a
/// tenth as many files. The first file's path is returned for the 1-file patch.
fn generate(root: &Path, files: usize) -> String {
    std::fs::create_dir_all(root).expect("mkdir");
    git(root, &["init", "-q", "-b", "main"]);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ files as u64);
    let mut first = String::new();
    for i in 0..files {
        let rel = format!("src/m{:02}/p{:02}/f{i:06}.rs", i % 37, (i / 37) % 23);
        let path = root.join(&rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, file_text(&mut rng)).expect("write");
        if i == 0 {
            first = rel;
        }
    }
    std::fs::write(root.join(".gitignore"), "build/\n").expect("write");
    for i in 0..files / 10 {
        let path = root.join(format!("build/o{:02}/obj{i:06}.o", i % 17));
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, "object\n").expect("write");
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "generated"]);
    git(root, &["config", "factory.verify", "true"]);
    // A user's index was written well after their files: wait out git's racy-timestamp window,
    // then let git refresh the stat cache, as any later git command would have.
    std::thread::sleep(Duration::from_millis(1100));
    git(root, &["update-index", "-q", "--really-refresh"]);
    git(root, &["status", "--porcelain"]);
    first
}

fn one_line_patch(root: &Path, path: &str) -> String {
    let text = std::fs::read_to_string(root.join(path)).expect("read");
    let first = text.lines().next().expect("a line");
    let second = text.lines().nth(1).expect("a line");
    format!(
        "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,2 @@\n-{first}\n+{first} changed\n {second}\n"
    )
}

struct Stat {
    median: Duration,
    min: Duration,
    max: Duration,
}

fn measure(runs: usize, mut f: impl FnMut() -> Duration) -> Stat {
    let _ = f(); // warm-up: page cache, index stat cache
    let mut times: Vec<Duration> = (0..runs).map(|_| f()).collect();
    times.sort();
    Stat {
        median: times[times.len() / 2],
        min: times[0],
        max: times[times.len() - 1],
    }
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn factory(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .output()
        .expect("git-factory runs")
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn row(name: &str, size: &str, s: &Stat, ratio: Option<f64>) {
    println!(
        "{name:<34} {size:>8} {:>10} {:>18} {}",
        ms(s.median),
        format!("{}–{}", ms(s.min), ms(s.max)),
        ratio.map(|r| format!("{r:.2}×")).unwrap_or_default()
    );
}

fn bench_attempts(work: &Path, size: usize, runs: usize) {
    let root = work.join(format!("repo-{size}"));
    let first = generate(&root, size);
    let patch = one_line_patch(&root, &first);
    let replay = work.join(format!("replay-{size}"));
    std::fs::create_dir_all(&replay).expect("mkdir");
    std::fs::write(replay.join("1.diff"), &patch).expect("write");
    let patch_file = work.join(format!("patch-{size}.diff"));
    std::fs::write(&patch_file, &patch).expect("write");
    let replay_s = replay.to_string_lossy().into_owned();
    let base = [
        "run",
        "-q",
        "--id",
        "bench",
        "--title",
        "bench",
        "--intent",
        "bench",
        "--allow",
        first.as_str(),
        "--max-attempts",
        "1",
        "--force",
        "--replay",
        replay_s.as_str(),
    ];

    let failed = measure(runs, || {
        let mut args = base.to_vec();
        args.extend(["--accept", "false"]);
        let t = Instant::now();
        let out = factory(&root, &args);
        let d = t.elapsed();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        d
    });
    let passed = measure(runs, || {
        let mut args = base.to_vec();
        args.extend(["--accept", "true"]);
        let t = Instant::now();
        let out = factory(&root, &args);
        let d = t.elapsed();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        git(&root, &["checkout", "--", &first]);
        d
    });
    let tmp_index = work.join(format!("index-{size}.tmp"));
    let git_seq = measure(runs, || {
        time(|| {
            git(&root, &["status", "--porcelain"]);
            git(&root, &["rev-parse", "HEAD"]);
            let _ = std::fs::copy(root.join(".git/index"), &tmp_index);
            git_env(&root, &["add", "-A"], &[("GIT_INDEX_FILE", &tmp_index)]);
            git_env(&root, &["write-tree"], &[("GIT_INDEX_FILE", &tmp_index)]);
            git(&root, &["apply", patch_file.to_str().expect("utf8")]);
            let _ = std::fs::copy(root.join(".git/index"), &tmp_index);
            git_env(&root, &["add", "-A"], &[("GIT_INDEX_FILE", &tmp_index)]);
            git_env(&root, &["write-tree"], &[("GIT_INDEX_FILE", &tmp_index)]);
            git(&root, &["reset", "-q", "--hard"]);
            git(&root, &["clean", "-fdq"]);
            let _ = std::fs::copy(root.join(".git/index"), &tmp_index);
            git_env(&root, &["add", "-A"], &[("GIT_INDEX_FILE", &tmp_index)]);
            git_env(&root, &["write-tree"], &[("GIT_INDEX_FILE", &tmp_index)]);
        })
    });
    let ratio = failed.median.as_secs_f64() / git_seq.median.as_secs_f64();
    row(
        "failed attempt (harness)",
        &size.to_string(),
        &failed,
        Some(ratio),
    );
    row(
        "passing attempt (harness)",
        &size.to_string(),
        &passed,
        Some(passed.median.as_secs_f64() / git_seq.median.as_secs_f64()),
    );
    row("same sequence, git CLI", &size.to_string(), &git_seq, None);
    let _ = std::fs::remove_dir_all(&root);
}

fn bench_log(work: &Path, runs: usize) {
    let root = work.join("repo-log");
    let first = generate(&root, 50);
    let replay = work.join("replay-log");
    std::fs::create_dir_all(&replay).expect("mkdir");
    std::fs::write(replay.join("1.diff"), one_line_patch(&root, &first)).expect("write");
    let out = factory(
        &root,
        &[
            "run",
            "-q",
            "--json",
            "--id",
            "bench",
            "--title",
            "bench log",
            "--intent",
            "b",
            "--allow",
            &first,
            "--accept",
            "false",
            "--max-attempts",
            "1",
            "--replay",
            replay.to_str().expect("utf8"),
        ],
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary");
    let run_id = summary["run_id"].as_str().expect("id").to_string();
    // 5,000 stored runs: copies of a real run commit under distinct ids, written with git2.
    let repo = git2::Repository::open(&root).expect("open");
    let real = repo
        .find_reference(&format!("refs/factory/{run_id}"))
        .expect("ref")
        .peel_to_commit()
        .expect("commit");
    let tree = real.tree().expect("tree");
    let message = real.message().unwrap_or("").to_string();
    let sig = git2::Signature::now("bench", "bench@example.invalid").expect("sig");
    for i in 0..5000u32 {
        let id = format!("{:012x}", 0xb0000000u64 + i as u64);
        let msg = message.replace(&run_id, &id);
        let oid = repo
            .commit(None, &sig, &sig, &msg, &tree, &[])
            .expect("commit");
        repo.reference(&format!("refs/factory/{id}"), oid, true, "bench")
            .expect("ref");
    }
    let cold = measure(1, || {
        let _ = std::fs::remove_file(root.join(".git/factory/log-cache"));
        time(|| {
            let out = factory(&root, &["log"]);
            assert!(out.status.success());
        })
    });
    row(
        "log, 5,000 loose run commits, no cache",
        "5001",
        &cold,
        None,
    );
    // What `git gc --auto` does to a repo that accumulated thousands of runs.
    git(&root, &["gc", "-q"]);
    let log = measure(runs, || {
        time(|| {
            let out = factory(&root, &["log"]);
            assert!(out.status.success());
        })
    });
    row("log over 5,000 runs", "5001", &log, None);
    let show = measure(runs, || {
        time(|| {
            let out = factory(&root, &["show", &run_id]);
            assert!(out.status.success());
        })
    });
    row("show of one run", "5001", &show, None);
}

fn bench_startup(work: &Path, runs: usize) {
    let s = measure(runs.max(20), || {
        time(|| {
            let out = factory(work, &["--version"]);
            assert!(out.status.success());
        })
    });
    row("start-up (--version)", "-", &s, None);
}

fn bench_worktree(work: &Path, runs: usize) {
    let root = work.join("repo-wt");
    generate(&root, 20_000);
    let wt = work.join("wt");
    let git_time = measure(runs, || {
        time(|| {
            git(
                &root,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "--detach",
                    wt.to_str().expect("utf8"),
                    "HEAD",
                ],
            );
            git(
                &root,
                &["worktree", "remove", "--force", wt.to_str().expect("utf8")],
            );
        })
    });
    let repo = git2::Repository::open(&root).expect("open");
    let head = git(&root, &["rev-parse", "HEAD"]).trim().to_string();
    let ours = measure(runs, || {
        time(|| {
            let wt =
                git_factory::git::worktree::TempWorktree::add(&repo, "bench", &head).expect("add");
            wt.remove().expect("remove");
        })
    });
    row(
        "harness worktree create + remove",
        "20000",
        &ours,
        Some(ours.median.as_secs_f64() / git_time.median.as_secs_f64()),
    );
    row("git worktree add + remove", "20000", &git_time, None);
    let _ = std::fs::remove_dir_all(&root);
}

// ---- pycache: the checks' own time inside a run against the same checks in a warm shell ----

/// A Python repo of `modules` modules in 40 packages (with `__pycache__/` ignored, as Python
/// repos do), committed. Returns the modules' paths.
fn generate_python(root: &Path, modules: usize) -> Vec<String> {
    std::fs::create_dir_all(root).expect("mkdir");
    git(root, &["init", "-q", "-b", "main"]);
    let mut rng = Rng(0x5EED_0000_0000_0021 ^ modules as u64);
    let mut paths = Vec::new();
    for p in 0..40 {
        let dir = root.join(format!("pkg{p:02}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("__init__.py"), "").expect("write");
    }
    for i in 0..modules {
        let rel = format!("pkg{:02}/mod{i:05}.py", i % 40);
        let mut text = format!(
            "\"\"\"Module {i}.\"\"\"\nimport os\n\nLIMIT = {}\n\n",
            rng.next() % 1000
        );
        for f in 0..(4 + rng.next() % 6) {
            text.push_str(&format!(
                "def f{f}(items, key={k}):\n    out = []\n    for n, item in enumerate(items):\n        if n % {m} == key:\n            out.append((item, os.sep, n * {k}))\n    return out\n\n",
                k = rng.next() % 97,
                m = 2 + rng.next() % 7
            ));
        }
        text.push_str(&format!(
            "class C{i}:\n    def __init__(self):\n        self.v = [x * x for x in range(LIMIT)]\n"
        ));
        std::fs::write(root.join(&rel), text).expect("write");
        paths.push(rel);
    }
    let imports: String = paths
        .iter()
        .map(|p| format!("import {}\n", p.trim_end_matches(".py").replace('/', ".")))
        .collect();
    std::fs::write(root.join("import_all.py"), imports).expect("write");
    std::fs::write(root.join(".gitignore"), "__pycache__/\n").expect("write");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "python"]);
    paths
}

/// Runs a command the way a user's shell would (bytecode written), returning its time.
fn python_time(root: &Path, argv: &[&str], prefix: Option<&Path>) -> Duration {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .current_dir(root)
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .env_remove("PYTHONPYCACHEPREFIX")
        .stdout(Stdio::null());
    if let Some(p) = prefix {
        cmd.env("PYTHONPYCACHEPREFIX", p);
    }
    let t = Instant::now();
    let status = cmd.status().expect("python runs");
    let d = t.elapsed();
    assert!(status.success(), "{argv:?} failed");
    d
}

fn median(mut v: Vec<Duration>) -> Stat {
    v.sort();
    Stat {
        median: v[v.len() / 2],
        min: v[0],
        max: v[v.len() - 1],
    }
}

/// One run of `attempts` failing attempts (each edits a different module); returns each
/// attempt's verification time as the run recorded it.
fn run_python_attempts(
    root: &Path,
    replay: &Path,
    edited: &[String],
    sandbox: bool,
) -> Vec<Duration> {
    let max = edited.len().to_string();
    let replay_s = replay.to_string_lossy().into_owned();
    let mut args = vec![
        "run",
        "--json",
        "--id",
        "bench-py",
        "--title",
        "bench",
        "--intent",
        "bench",
        "--accept",
        "false",
        "--max-attempts",
        &max,
        "--force",
        "--replay",
        &replay_s,
    ];
    for path in edited {
        args.extend(["--allow", path.as_str()]);
    }
    if sandbox {
        args.push("--sandbox");
    }
    let out = Command::new(BIN)
        .current_dir(root)
        .args(&args)
        .env("NO_COLOR", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .stdin(Stdio::null())
        .output()
        .expect("git-factory runs");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json summary");
    for a in summary["attempts"].as_array().expect("attempts") {
        let stage = &a["failure_brief"]["stage"];
        assert_eq!(stage, "acceptance_failed", "verification must pass: {a}");
    }
    summary["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| {
            let secs: f64 = a["verify"]
                .as_array()
                .expect("verify")
                .iter()
                .map(|c| c["duration_seconds"].as_f64().unwrap_or(0.0))
                .sum();
            Duration::from_secs_f64(secs)
        })
        .collect()
}

/// The checks' own time inside runs (as the runs record it) against the same check run
/// directly in the same checkout by a warm shell (bytecode beside the sources, as a user has
/// it), sampled in turns so both see the same load. Attempt 1 of the first run starts from an
/// empty cache; every later attempt should be as warm as the shell.
fn bench_pycache(work: &Path, runs: usize) {
    let modules = 1200;
    let root = work.join("repo-py");
    let paths = generate_python(&root, modules);
    git(
        &root,
        &["config", "factory.verify", "python3 -m compileall -q ."],
    );
    git(
        &root,
        &["config", "--add", "factory.verify", "python3 import_all.py"],
    );
    let attempts = 4;
    let replay = work.join("replay-py");
    std::fs::create_dir_all(&replay).expect("mkdir");
    let edited: Vec<String> = (1..=attempts)
        .map(|k| paths[k * 7 % paths.len()].clone())
        .collect();
    for (k, path) in edited.iter().enumerate() {
        // A valid edit (the checks must pass verification to be measured whole).
        let text = std::fs::read_to_string(root.join(path)).expect("read");
        let first = text.lines().next().expect("a line");
        let edited = first.replace(".\"\"\"", ", edited.\"\"\"");
        let patch = format!(
            "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{first}\n+{edited}\n"
        );
        std::fs::write(replay.join(format!("{}.diff", k + 1)), patch).expect("write");
    }
    let checks: [&[&str]; 2] = [
        &["python3", "-m", "compileall", "-q", "."],
        &["python3", "import_all.py"],
    ];
    let check = |prefix: Option<&Path>| -> Duration {
        checks
            .iter()
            .map(|argv| python_time(&root, argv, prefix))
            .sum()
    };
    check(None);
    // What each attempt paid before the cache was kept: a fresh, empty PYTHONPYCACHEPREFIX.
    let fresh = median(
        (0..runs)
            .map(|i| check(Some(&work.join(format!("fresh-prefix-{i}")))))
            .collect(),
    );
    let size = modules.to_string();
    let sandboxes: &[bool] = if Command::new("bwrap").arg("--version").output().is_ok() {
        &[false, true]
    } else {
        println!("(bwrap is not installed: --sandbox not measured)");
        &[false]
    };
    for &sandbox in sandboxes {
        let tag = if sandbox { ", sandbox" } else { "" };
        let _ = std::fs::remove_dir_all(root.join(".git/factory/pycache"));
        let mut shell = Vec::new();
        let mut cold = Vec::new();
        let mut warm = Vec::new();
        for run in 0..runs.max(2) {
            shell.push(check(None));
            let times = run_python_attempts(&root, &replay, &edited, sandbox);
            shell.push(check(None));
            let skip = if run == 0 { 1 } else { 0 };
            cold.extend(times.iter().take(skip));
            warm.extend(times.into_iter().skip(skip));
        }
        let shell = median(shell);
        let warm = median(warm);
        let ratio = |s: &Stat| Some(s.median.as_secs_f64() / shell.median.as_secs_f64());
        row(&format!("checks, warm shell{tag}"), &size, &shell, None);
        row("  fresh prefix (before)", &size, &fresh, ratio(&fresh));
        let cold = median(cold);
        row(
            &format!("  run: attempt 1, cold{tag}"),
            &size,
            &cold,
            ratio(&cold),
        );
        row(
            &format!("  run: later attempts{tag}"),
            &size,
            &warm,
            ratio(&warm),
        );
        println!(
            "{:<34} {size:>8} {:>10} {:>18} {:.2}× by min",
            format!("  saved per attempt{tag}"),
            ms(fresh.median.saturating_sub(warm.median)),
            "",
            warm.min.as_secs_f64() / shell.min.as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// One damaged-diff case: the file as it is, the diff, and what the file must become
/// (`None` for a trap that must be refused).
struct Case {
    kind: &'static str,
    file: String,
    diff: String,
    expected: Option<String>,
}

fn source_files() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map(|d| d.flatten().collect())
            .unwrap_or_default();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut paths = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut paths,
    );
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        &mut paths,
    );
    paths
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter(|t| t.lines().count() > 40)
        .collect()
}

/// Which lines of a file one hunk covers, and the line it changes.
#[derive(Clone, Copy)]
struct Window {
    start: usize,
    end: usize,
    idx: usize,
}

/// How a hunk body is damaged.
#[derive(Clone, Copy, Default)]
struct Damage {
    bare_blanks: bool,
    drop_blank: bool,
}

fn hunk_text(lines: &[String], w: Window, new: &str, header: &str, damage: Damage) -> String {
    let (start, end, idx) = (w.start, w.end, w.idx);
    let mut out = format!("{header}\n");
    let mut dropped = false;
    for (i, l) in lines.iter().enumerate().take(end).skip(start) {
        if i == idx {
            out.push_str(&format!("-{l}\n+{new}\n"));
        } else if l.is_empty() && damage.drop_blank && !dropped && i > start {
            dropped = true;
        } else if l.is_empty() && damage.bare_blanks {
            out.push('\n');
        } else {
            out.push_str(&format!(" {l}\n"));
        }
    }
    out
}

fn with_change(lines: &[String], idx: usize, new: &str) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        out.push_str(if i == idx { new } else { l });
        out.push('\n');
    }
    out
}

fn corpus(per_kind: usize) -> Vec<Case> {
    let files = source_files();
    let mut rng = Rng(0xC0FF_EE00_D1FF_0001);
    let mut cases = Vec::new();
    let kinds = [
        "wrong line numbers",
        "wrong counts",
        "placeholder @@ header",
        "lost trailing whitespace",
        "tabs turned to spaces",
        "missing blank context line",
        "no diff --git line",
        "no a/ b/ prefixes",
        "blank context without space",
        "trap: context twice, wrong numbers",
        "trap: context absent",
    ];
    for kind in kinds {
        let mut made = 0;
        while made < per_kind {
            let text = &files[(rng.next() as usize) % files.len()];
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            let idx = 3 + (rng.next() as usize) % (lines.len() - 7);
            if lines[idx].trim().is_empty() {
                continue;
            }
            let (start, end) = (idx - 3, idx + 4);
            let window_has_blank = lines[start + 1..end]
                .iter()
                .enumerate()
                .any(|(k, l)| l.is_empty() && start + 1 + k != idx);
            if (kind == "missing blank context line" || kind == "blank context without space")
                && !window_has_blank
            {
                continue;
            }
            // Only windows whose old side occurs once: otherwise no applier could be right.
            let window: Vec<&String> = lines[start..end].iter().collect();
            let occurrences = (0..=lines.len() - window.len())
                .filter(|&s| lines[s..s + window.len()].iter().eq(window.iter().copied()))
                .count();
            if occurrences != 1 {
                continue;
            }
            let new = format!("{} // changed", lines[idx]);
            let n = end - start;
            let exact = format!("@@ -{},{n} +{},{n} @@", start + 1, start + 1);
            let git_hdr = "diff --git a/f.rs b/f.rs\n--- a/f.rs\n+++ b/f.rs\n";
            let plain = "--- a/f.rs\n+++ b/f.rs\n";
            let w = Window { start, end, idx };
            let same = Damage::default();
            let git_diff = |header: &str, damage: Damage| {
                format!("{git_hdr}{}", hunk_text(&lines, w, &new, header, damage))
            };
            let numbers = |old: usize, old_n: usize, new_n: usize| {
                format!("@@ -{},{old_n} +{},{new_n} @@", old, old)
            };
            let (file, diff, expected) = match kind {
                "wrong line numbers" => (
                    text.clone(),
                    git_diff(&numbers(start + 12, n, n), same),
                    Some(with_change(&lines, idx, &new)),
                ),
                "wrong counts" => {
                    let h = format!("@@ -{},{} +{},{} @@", start + 1, n - 2, start + 1, n + 3);
                    (
                        text.clone(),
                        git_diff(&h, same),
                        Some(with_change(&lines, idx, &new)),
                    )
                }
                "placeholder @@ header" => (
                    text.clone(),
                    git_diff("@@ ... @@", same),
                    Some(with_change(&lines, idx, &new)),
                ),
                "lost trailing whitespace" => {
                    let diff = git_diff(&exact, same);
                    for l in lines.iter_mut().take(end).skip(start) {
                        if !l.is_empty() {
                            l.push_str("  ");
                        }
                    }
                    (
                        lines.join("\n") + "\n",
                        diff,
                        Some(with_change(&lines, idx, &new)),
                    )
                }
                "tabs turned to spaces" => {
                    if !lines[start..end].iter().any(|l| l.starts_with("    ")) {
                        continue;
                    }
                    let diff = git_diff(&exact, same);
                    for l in lines.iter_mut() {
                        let indent = l.len() - l.trim_start_matches(' ').len();
                        *l = format!("{}{}", "\t".repeat(indent / 4), &l[indent - indent % 4..]);
                    }
                    (
                        lines.join("\n") + "\n",
                        diff,
                        Some(with_change(&lines, idx, &new)),
                    )
                }
                "missing blank context line" => (
                    text.clone(),
                    git_diff(
                        &numbers(start + 1, n - 1, n - 1),
                        Damage {
                            drop_blank: true,
                            ..same
                        },
                    ),
                    Some(with_change(&lines, idx, &new)),
                ),
                "no diff --git line" => (
                    text.clone(),
                    format!("{plain}{}", hunk_text(&lines, w, &new, &exact, same)),
                    Some(with_change(&lines, idx, &new)),
                ),
                "no a/ b/ prefixes" => (
                    text.clone(),
                    format!(
                        "--- f.rs\n+++ f.rs\n{}",
                        hunk_text(&lines, w, &new, &exact, same)
                    ),
                    Some(with_change(&lines, idx, &new)),
                ),
                "blank context without space" => (
                    text.clone(),
                    git_diff(
                        &exact,
                        Damage {
                            bare_blanks: true,
                            ..same
                        },
                    ),
                    Some(with_change(&lines, idx, &new)),
                ),
                "trap: context twice, wrong numbers" => {
                    let mut file = text.clone();
                    file.push('\n');
                    for l in &lines[start..end] {
                        file.push_str(l);
                        file.push('\n');
                    }
                    (file, git_diff(&numbers(start + 6, n, n), same), None)
                }
                _ => {
                    let mut altered = lines.clone();
                    for l in altered.iter_mut().take(end).skip(start) {
                        l.push_str(" zzz_absent");
                    }
                    let changed = format!("{} // changed", altered[idx]);
                    (
                        text.clone(),
                        format!(
                            "{git_hdr}{}",
                            hunk_text(&altered, w, &changed, &exact, same)
                        ),
                        None,
                    )
                }
            };
            cases.push(Case {
                kind,
                file,
                diff,
                expected,
            });
            made += 1;
        }
    }
    cases
}

#[derive(Default, Clone, Copy)]
struct Tally {
    right: usize,
    wrong: usize,
    refused: usize,
}

/// Runs one applier on one case in `dir` and sorts the result.
fn judge(dir: &Path, case: &Case, argv: &[&str]) -> (bool, bool) {
    let path = dir.join("f.rs");
    std::fs::write(&path, &case.file).expect("write");
    std::fs::write(dir.join("patch.diff"), &case.diff).expect("write");
    let status = Command::new(argv[0])
        .current_dir(dir)
        .args(&argv[1..])
        .arg("patch.diff")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("runs");
    let now = std::fs::read_to_string(&path).unwrap_or_default();
    let changed = now != case.file;
    let applied = status.success() && changed;
    let right = match &case.expected {
        Some(want) => applied && &now == want,
        None => !changed,
    };
    (applied, right)
}

fn bench_apply(work: &Path) {
    let cases = corpus(30);
    let dir = work.join("apply");
    std::fs::create_dir_all(&dir).expect("mkdir");
    git(&dir, &["init", "-q"]);
    let tools: [(&str, Vec<&str>); 3] = [
        ("git factory patch", vec![BIN, "patch"]),
        ("git apply", vec!["git", "apply"]),
        ("git apply --recount", vec!["git", "apply", "--recount"]),
    ];
    let mut kinds: Vec<&str> = Vec::new();
    for c in &cases {
        if !kinds.contains(&c.kind) {
            kinds.push(c.kind);
        }
    }
    println!(
        "\napply corpus: {} damaged diffs from this project's own sources",
        cases.len()
    );
    println!(
        "{:<36} {:>22} {:>22} {:>22}",
        "damage kind (cases)", tools[0].0, tools[1].0, tools[2].0
    );
    let mut totals = [(Tally::default(), Tally::default()); 3];
    for kind in &kinds {
        let of_kind: Vec<&Case> = cases.iter().filter(|c| c.kind == *kind).collect();
        let mut cells = Vec::new();
        for (t, (_, argv)) in tools.iter().enumerate() {
            let mut tally = Tally::default();
            for case in &of_kind {
                let (applied, right) = judge(&dir, case, argv);
                if t == 0 && !right && std::env::var_os("BENCH_SHOW_MISSES").is_some() {
                    println!("--- miss ({}):\n{}", case.kind, case.diff);
                }
                match (case.expected.is_some(), applied, right) {
                    (_, _, true) if case.expected.is_some() => tally.right += 1,
                    (true, _, false) => tally.wrong += usize::from(applied),
                    (false, true, _) => tally.wrong += 1,
                    _ => {}
                }
                if !applied {
                    tally.refused += 1;
                }
            }
            let (rec, traps) = &mut totals[t];
            if of_kind[0].expected.is_some() {
                rec.right += tally.right;
                rec.wrong += tally.wrong;
                rec.refused += tally.refused;
            } else {
                traps.wrong += tally.wrong;
                traps.refused += tally.refused;
            }
            cells.push(if of_kind[0].expected.is_some() {
                format!("{} ok, {} wrong", tally.right, tally.wrong)
            } else {
                format!("{} refused, {} wrong", tally.refused, tally.wrong)
            });
        }
        println!(
            "{:<36} {:>22} {:>22} {:>22}",
            format!("{kind} ({})", of_kind.len()),
            cells[0],
            cells[1],
            cells[2]
        );
    }
    let recoverable = cases.iter().filter(|c| c.expected.is_some()).count();
    let cells: Vec<String> = totals
        .iter()
        .map(|(rec, traps)| {
            format!(
                "{:.1}% ok, {} wrong",
                100.0 * rec.right as f64 / recoverable as f64,
                rec.wrong + traps.wrong
            )
        })
        .collect();
    println!(
        "{:<36} {:>22} {:>22} {:>22}",
        format!("all recoverable ({recoverable})"),
        cells[0],
        cells[1],
        cells[2]
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let sizes: Vec<usize> = opt("--sizes")
        .unwrap_or_else(|| "1000,10000,100000".to_string())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let runs: usize = opt("--runs")
        .and_then(|r| r.parse().ok())
        .unwrap_or(5)
        .max(1);
    let only =
        opt("--only").unwrap_or_else(|| "apply,attempt,log,startup,worktree,pycache".to_string());
    let work = tempfile::tempdir().expect("tempdir");
    println!(
        "{:<34} {:>8} {:>10} {:>18} ratio to git",
        "measure (median of runs)", "files", "median ms", "min–max ms"
    );
    if only.contains("apply") {
        bench_apply(work.path());
    }
    if only.contains("startup") {
        bench_startup(work.path(), runs);
    }
    if only.contains("log") {
        bench_log(work.path(), runs);
    }
    if only.contains("attempt") {
        for size in &sizes {
            bench_attempts(work.path(), *size, runs);
        }
    }
    if only.contains("worktree") {
        bench_worktree(work.path(), runs);
    }
    if only.contains("pycache") {
        bench_pycache(work.path(), runs);
    }
    let _: PathBuf = work.path().to_path_buf();
}
