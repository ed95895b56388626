//! Python's bytecode cache (SPEC §3.7): one folder per repo, warm between attempts and runs,
//! never stale (Python trusts an entry by the source's size and mtime second), never poisoned
//! by a sandboxed check. Real python3, real runs.

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A fixed mtime every check gives the file it imports: the worst case Python's check cannot
/// tell apart (same size, same second), made certain instead of likely.
const SAME_SECOND: &str = "1700000000";

fn python_repo(files: &[(&str, &str)]) -> TestRepo {
    let r = TestRepo::with_files(files);
    r.git(&["config", "factory.verify", "true"]);
    r
}

fn order(allowed: &[&str], accept: &[&str]) -> Value {
    json!({
        "id": "wo-py", "title": "python", "intent": "i",
        "allowed_files": allowed,
        "acceptance_commands": accept,
    })
}

/// A whole-file replacement of a one-line module, as a diff.
fn set_line(path: &str, old: &str, new: &str) -> String {
    proposal(&diff_replace(path, &[old], old, new), "edit")
}

/// `git factory run` with Python allowed to write bytecode (the test machine may forbid it).
fn run(r: &TestRepo, wo: &Path, replay: &Path, flags: &[&str]) -> std::process::Output {
    r.factory()
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .arg("run")
        .args(flags)
        .arg("-w")
        .arg(wo)
        .arg("--replay")
        .arg(replay)
        .output()
        .expect("git factory runs")
}

fn summary(out: &std::process::Output) -> Value {
    serde_json::from_str(&stdout_of(out))
        .unwrap_or_else(|_| panic!("a JSON summary\n{}\n{}", stdout_of(out), stderr_of(out)))
}

/// Every file in the repo's bytecode cache, as paths relative to it.
fn cache_files(r: &TestRepo) -> Vec<PathBuf> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, base, out);
            } else {
                out.push(p.strip_prefix(base).expect("inside").to_path_buf());
            }
        }
    }
    let base = r.root.join(".git/factory/pycache");
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out.sort();
    out
}

fn entries_of(r: &TestRepo, stem: &str) -> Vec<PathBuf> {
    let root = r.root.canonicalize().expect("real path");
    let prefix = format!("{stem}.");
    cache_files(r)
        .into_iter()
        .filter(|p| {
            p.parent() == root.strip_prefix("/").ok()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix))
        })
        .collect()
}

/// `compileall` (without -q) names each file it had to compile.
fn compiled(cmd: &Value) -> Vec<String> {
    cmd["stdout_trunc"]
        .as_str()
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.strip_prefix("Compiling '"))
        .map(|l| l.trim_end_matches("'...").to_string())
        .collect()
}

/// A run of two attempts that each set `line.0`'s line `line.1`: attempt 1 to `edits[0]`,
/// attempt 2 to `edits[1]`. Returns the JSON summary and the exit code.
fn two_attempts(
    r: &TestRepo,
    allowed: &[&str],
    checks: &[&str],
    line: (&str, &str),
    edits: [&str; 2],
    flags: &[&str],
) -> (Value, Option<i32>) {
    let (path, old) = line;
    let wo = r.work_order(order(allowed, checks));
    let replay = r.replay(
        "rp",
        &[
            ("1.json", set_line(path, old, edits[0])),
            ("2.json", set_line(path, old, edits[1])),
        ],
    );
    let mut all = vec!["--json", "--max-attempts", "2"];
    all.extend(flags);
    let out = run(r, &wo, &replay, &all);
    (summary(&out), out.status.code())
}

/// [`two_attempts`] where attempt 1's check must fail and attempt 2's pass, by seeing its own
/// version.
fn attempt_2_runs_its_own(
    r: &TestRepo,
    allowed: &[&str],
    checks: &[&str],
    path: &str,
    old: &str,
    edits: [&str; 2],
) {
    let (s, code) = two_attempts(r, allowed, checks, (path, old), edits, &[]);
    assert_eq!(
        s["attempts"][0]["failure_brief"]["stage"], "acceptance_failed",
        "attempt 1's check fails on its own version: {s}"
    );
    assert_eq!(s["verdict"], "PASS", "attempt 2 runs its own version: {s}");
    assert_eq!(code, Some(0));
}

/// A run of one attempt setting `line` to `edit`, killed (-9) during its acceptance command,
/// after verification ran.
#[cfg(feature = "test-hooks")]
fn killed_mid_acceptance(r: &TestRepo, accept: &str, line: (&str, &str), edit: &str) {
    let (path, old) = line;
    let wo = r.work_order(order(&[path], &[accept]));
    let replay = r.replay(
        &format!("rp-killed-{}", edit.len()),
        &[("1.json", set_line(path, old, edit))],
    );
    let out = r
        .factory()
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .env("GIT_FACTORY_TEST_CRASH_AT", "during_acceptance")
        .args(["run", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{}", stderr_of(&out));
}

#[test]
fn a_same_size_edit_in_the_same_second_is_never_run_stale() {
    let r = python_repo(&[("m.py", "X = 1\n")]);
    let check = format!(
        "sh -c 'touch -d @{SAME_SECOND} m.py && python3 -c \"import m; assert m.X == 2, m.X\"'"
    );
    attempt_2_runs_its_own(
        &r,
        &["m.py"],
        &[&check],
        "m.py",
        "X = 1",
        ["X = 3", "X = 2"],
    );
    assert!(
        entries_of(&r, "m").is_empty(),
        "the change's entries are forgotten when the attempt ends"
    );
}

#[test]
fn a_file_a_check_changed_is_forgotten_when_rollback_puts_it_back() {
    let r = python_repo(&[("m.py", "Y = 1\n"), ("u.py", "X = 1\n")]);
    // Attempt 1's check rewrites u.py (same size) and imports it; attempt 2's does not.
    let check = format!(
        "sh -c 'if grep -q \"Y = 3\" m.py; then printf \"X = 9\\n\" > u.py; fi; touch -d @{SAME_SECOND} u.py; python3 -c \"import u; assert u.X == 1, u.X\"'"
    );
    let wo = r.work_order(order(&["m.py"], &[&check]));
    let replay = r.replay(
        "rp",
        &[
            ("1.json", set_line("m.py", "Y = 1", "Y = 3")),
            ("2.json", set_line("m.py", "Y = 1", "Y = 2")),
        ],
    );
    let out = run(&r, &wo, &replay, &["--json", "--max-attempts", "2"]);
    let s = summary(&out);
    let first = s["attempts"][0]["acceptance"][0]["stderr_trunc"]
        .as_str()
        .unwrap_or("");
    assert!(first.contains("AssertionError: 9"), "{first}");
    assert_eq!(s["verdict"], "PASS", "u.py put back must run as X = 1: {s}");
    assert_eq!(r.read("u.py").as_deref(), Some("X = 1\n"));
}

#[test]
fn a_file_the_baseline_check_changed_is_forgotten_when_it_is_put_back() {
    let r = python_repo(&[("m.py", "Y = 1\n"), ("u.py", "X = 1\n")]);
    // On the baseline (its first run) the regression check rewrites u.py (same size, same
    // second) and imports it; the baseline check's restore puts u.py back. After the change
    // the same check must import the real u.py, not the baseline check's bytecode.
    let first = r.outside.join("first");
    let check = format!(
        "sh -c 'if [ ! -e {first} ]; then : > {first}; printf \"X = 9\\n\" > u.py; touch -d @{SAME_SECOND} u.py; python3 -c \"import u\"; else touch -d @{SAME_SECOND} u.py; python3 -c \"import u; assert u.X == 1, u.X\"; fi'",
        first = first.display()
    );
    let wo = r.work_order(json!({
        "id": "wo-py", "title": "python", "intent": "i",
        "allowed_files": ["m.py"],
        "acceptance_commands": [],
        // (The module is named by its code point: a contract naming m.py would protect it.)
        "fail_to_pass": ["python3 -c \"assert __import__(chr(109)).Y == 2\""],
        "pass_to_pass": [check],
    }));
    let replay = r.replay("rp", &[("1.json", set_line("m.py", "Y = 1", "Y = 2"))]);
    let out = run(&r, &wo, &replay, &["--json", "--max-attempts", "1"]);
    let s = summary(&out);
    assert!(
        first.exists(),
        "the baseline check ran the regression check"
    );
    assert_eq!(s["verdict"], "PASS", "u.py put back must run as X = 1: {s}");
}

#[test]
fn a_second_run_on_the_same_baseline_compiles_only_the_change() {
    let mut files: Vec<(String, String)> = (0..5)
        .map(|i| (format!("lib/mod{i}.py"), format!("V = {i}\n")))
        .collect();
    files.push(("m.py".into(), "X = 1\n".into()));
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let r = TestRepo::with_files(&files);
    r.git(&["config", "factory.verify", "python3 -m compileall ."]);
    let replay = r.replay(
        "rp",
        &[
            ("1.json", set_line("m.py", "X = 1", "X = 2")),
            ("2.json", set_line("m.py", "X = 1", "X = 3")),
        ],
    );
    // Run 1 fails (the tree is the baseline again), so run 2 starts from the same baseline.
    let wo1 = r.work_order(order(&["m.py"], &["false"]));
    let s1 = summary(&run(&r, &wo1, &replay, &["--json", "--max-attempts", "2"]));
    assert_eq!(
        compiled(&s1["attempts"][0]["verify"][0]),
        vec!["./m.py"],
        "the harness filled the cache from the baseline before attempt 1"
    );
    assert_eq!(
        compiled(&s1["attempts"][1]["verify"][0]),
        vec!["./m.py"],
        "attempt 2 compiles only its change"
    );

    let wo2 = r.work_order(order(&["m.py"], &["true"]));
    let out = run(&r, &wo2, &replay, &["--json"]);
    let s2 = summary(&out);
    assert_eq!(s2["verdict"], "PASS", "{}", stderr_of(&out));
    assert_eq!(
        compiled(&s2["attempts"][0]["verify"][0]),
        vec!["./m.py"],
        "run 2 finds the baseline warm"
    );
    // The cache is under the common git dir, never in the tree.
    r.git(&["checkout", "--", "m.py"]);
    assert_eq!(r.git(&["status", "--porcelain", "--ignored"]), "");
}

#[test]
fn a_sandboxed_check_cannot_plant_bytecode_for_a_later_attempt() {
    if !bwrap_or_skip() {
        return;
    }
    // The check (model-written code, as far as the harness knows) forges u.py's bytecode with
    // u.py's own size and mtime, in place and by rename, in its cache folder and in the
    // repo's; attempt 2 must still run the real u.py.
    let check = r#"import importlib.util, marshal, os, struct, sys
import m
src = os.path.abspath("u.py")
if m.Y == 3:
    st = os.stat(src)
    code = compile("X = 7\n", src, "exec")
    data = importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF) + marshal.dumps(code)
    ours = importlib.util.cache_from_source(src)
    shared = os.path.join(os.path.abspath(".git/factory/pycache"), os.path.dirname(ours)[len(sys.pycache_prefix) + 1:], os.path.basename(ours))
    for target in (ours, shared):
        for how in ("in place", "by rename"):
            try:
                if how == "in place":
                    with open(target, "wb") as f:
                        f.write(data)
                else:
                    with open(target + ".new", "wb") as f:
                        f.write(data)
                    os.replace(target + ".new", target)
                print("forged", how, target)
            except OSError as e:
                print("blocked", how, target, e)
    import u
    print("this attempt sees X =", u.X)
    sys.exit(1)
import u
assert u.X == 1, u.X
"#;
    let r = python_repo(&[
        ("m.py", "Y = 1\n"),
        ("u.py", "X = 1\n"),
        ("check.py", check),
    ]);
    let (s, _) = two_attempts(
        &r,
        &["m.py"],
        &["python3 check.py"],
        ("m.py", "Y = 1"),
        ["Y = 3", "Y = 2"],
        &["--sandbox"],
    );
    let told = s["attempts"][0]["acceptance"][0]["stdout_trunc"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(told.contains("blocked in place"), "{told}");
    assert!(
        told.contains("this attempt sees X = 7"),
        "the forgery works within its own attempt, so the test can fail: {told}"
    );
    assert_eq!(s["verdict"], "PASS", "attempt 2 runs the real u.py: {s}");
    // The harness filled the cache from the baseline (u.py's entry is there, compiled by it).
    assert_eq!(entries_of(&r, "u").len(), 1, "{:?}", cache_files(&r));
    assert!(entries_of(&r, "m").is_empty());
}

#[test]
fn sandboxed_checks_run_warm_from_the_baselines_prefill() {
    if !bwrap_or_skip() {
        return;
    }
    let r = TestRepo::with_files(&[
        ("a.py", "A = 1\n"),
        ("pkg/__init__.py", ""),
        ("pkg/b.py", "B = 1\n"),
        ("m.py", "X = 1\n"),
    ]);
    r.git(&["config", "factory.verify", "python3 -m compileall ."]);
    let wo = r.work_order(order(&["m.py"], &["python3 -c 'import m, a, pkg.b'"]));
    let replay = r.replay("rp", &[("1.json", set_line("m.py", "X = 1", "X = 2"))]);
    let out = run(&r, &wo, &replay, &["--json", "--sandbox"]);
    let s = summary(&out);
    assert_eq!(s["verdict"], "PASS", "{}", stderr_of(&out));
    assert_eq!(compiled(&s["attempts"][0]["verify"][0]), vec!["./m.py"]);
    // What the sandboxed check compiled went to its own view, gone with the attempt.
    let views: Vec<_> = std::fs::read_dir(r.root.join(".git/factory/tmp"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(views.is_empty(), "{views:?}");
}

/// Imports `m` in `dir` through the repo's cache, as a check would: its `X`.
fn imported_x(r: &TestRepo, dir: &Path) -> String {
    let out = std::process::Command::new("python3")
        .current_dir(dir)
        .env("PYTHONPYCACHEPREFIX", r.root.join(".git/factory/pycache"))
        .args(["-c", "import m; print(m.X)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn worktree_runs_leave_no_stale_entries_of_their_pooled_worktree() {
    let r = python_repo(&[("m.py", "X = 1\n")]);
    r.git(&["config", "factory.verify", "python3 -m compileall -q ."]);
    let wo = r.work_order(order(
        &["m.py"],
        &["python3 -c 'import m; assert m.X == 2'"],
    ));
    let replay = r.replay("rp", &[("1.json", set_line("m.py", "X = 1", "X = 2"))]);
    let out = run(&r, &wo, &replay, &["--json", "--worktree"]);
    assert_eq!(summary(&out)["verdict"], "PASS", "{}", stderr_of(&out));
    // The pooled worktree stays, and so may its entries (its path is stable), but only
    // ever of what its files now hold: the baseline's, whatever the run wrote there.
    let worktrees = r.root.join(".git/factory/worktrees");
    let pooled: Vec<PathBuf> = std::fs::read_dir(&worktrees)
        .expect("pool")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(pooled.len(), 1, "{pooled:?}");
    assert_eq!(imported_x(&r, &pooled[0]), "1");
}

#[cfg(feature = "test-hooks")]
#[test]
fn recover_after_a_kill_mid_check_leaves_no_entry_of_the_edit() {
    let r = python_repo(&[("m.py", "X = 1\n")]);
    r.git(&["config", "factory.verify", "python3 -m compileall -q ."]);
    killed_mid_acceptance(&r, "sh -c 'sleep 1'", ("m.py", "X = 1"), "X = 2");
    assert_eq!(
        entries_of(&r, "m").len(),
        1,
        "verification compiled the edit before the kill"
    );
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert!(entries_of(&r, "m").is_empty(), "{:?}", cache_files(&r));
    assert_eq!(r.read("m.py").as_deref(), Some("X = 1\n"));
}

#[test]
fn sandboxed_checks_warm_the_interpreters_modules_from_their_real_sources() {
    if !bwrap_or_skip() {
        return;
    }
    // colorsys is not imported by compileall (the prefill): attempt 1 compiles it into its
    // view, then forges it; the harness compiles the real colorsys.py into the cache, so
    // attempt 2 (and later runs) find it warm and genuine.
    let check = r#"import importlib.util, marshal, os, struct, sys
import m
import colorsys
src = colorsys.__file__
if m.Y == 3:
    st = os.stat(src)
    code = compile("X = 7\n", src, "exec")
    data = importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF) + marshal.dumps(code)
    target = importlib.util.cache_from_source(src)
    with open(target + ".new", "wb") as f:
        f.write(data)
    os.replace(target + ".new", target)
    sys.exit(1)
assert hasattr(colorsys, "rgb_to_hsv"), "forged colorsys"
entry = os.path.realpath(importlib.util.cache_from_source(src))
print("from the cache:", os.path.isfile(entry) and entry.startswith(os.path.realpath(".git/factory/pycache")))
"#;
    let r = python_repo(&[("m.py", "Y = 1\n"), ("check.py", check)]);
    let (s, _) = two_attempts(
        &r,
        &["m.py"],
        &["python3 check.py"],
        ("m.py", "Y = 1"),
        ["Y = 3", "Y = 2"],
        &["--sandbox"],
    );
    assert_eq!(
        s["verdict"], "PASS",
        "attempt 2 imports the real colorsys: {s}"
    );
    let told = s["attempts"][1]["acceptance"][0]["stdout_trunc"]
        .as_str()
        .unwrap_or("");
    assert!(told.contains("from the cache: True"), "{told}");
    let learnt = cache_files(&r)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("colorsys."))
        })
        .count();
    assert_eq!(learnt, 1, "{:?}", cache_files(&r));
}

#[test]
fn verify_shares_the_cache_and_drops_its_worktrees_entries() {
    let r = python_repo(&[("m.py", "X = 1\n")]);
    r.git(&[
        "config",
        "factory.verify",
        "python3 -c 'import m, colorsys'",
    ]);
    let out = r
        .factory()
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .arg("verify")
        .output()
        .expect("verify runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let files = cache_files(&r);
    assert!(
        files.iter().any(|p| p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("colorsys."))),
        "the interpreter's modules stay warm for the next check: {files:?}"
    );
    let worktrees = r.root.join(".git/factory/worktrees");
    assert!(
        !files
            .iter()
            .any(|p| Path::new("/").join(p).starts_with(&worktrees)),
        "{files:?}"
    );
}

#[test]
fn sandboxed_compileall_can_write_what_a_rollback_made_it_forget() {
    if !bwrap_or_skip() {
        return;
    }
    // Attempt 1's file is put back by the rollback and its entry forgotten; attempt 2 changes
    // another folder, and its compileall must still be able to compile attempt 1's file.
    let r = TestRepo::with_files(&[("one/a.py", "A = 1\n"), ("two/b.py", "B = 1\n")]);
    r.git(&["config", "factory.verify", "python3 -m compileall -q ."]);
    let wo = r.work_order(order(
        &["one/a.py", "two/b.py"],
        &["python3 -c 'import two.b; assert two.b.B == 2'"],
    ));
    let replay = r.replay(
        "rp",
        &[
            ("1.json", set_line("one/a.py", "A = 1", "A = 2")),
            ("2.json", set_line("two/b.py", "B = 1", "B = 2")),
        ],
    );
    let out = run(
        &r,
        &wo,
        &replay,
        &["--json", "--sandbox", "--max-attempts", "2"],
    );
    let s = summary(&out);
    assert_eq!(s["verdict"], "PASS", "{s}");
}

#[test]
fn a_source_imported_through_a_symlinked_folder_is_never_run_stale() {
    let r = python_repo(&[("src/m.py", "X = 1\n")]);
    std::os::unix::fs::symlink("src", r.root.join("lib")).expect("link");
    r.git(&["add", "lib"]);
    r.git(&["commit", "-q", "-m", "lib is src"]);
    let check = format!(
        "sh -c 'touch -d @{SAME_SECOND} src/m.py && python3 -c \"import sys; sys.path.insert(0, \\\"lib\\\"); import m; assert m.X == 2, m.X\"'"
    );
    attempt_2_runs_its_own(
        &r,
        &["src/m.py"],
        &[&check],
        "src/m.py",
        "X = 1",
        ["X = 3", "X = 2"],
    );
}

#[test]
fn sandboxed_compileall_compiles_files_the_checks_themselves_create() {
    if !bwrap_or_skip() {
        return;
    }
    // A check that generates modules (beside untouched ones, in a new folder, at the top) and
    // then compiles the tree: every new file's bytecode must be writable in the attempt's view,
    // and none of it may reach the shared cache.
    let r = TestRepo::with_files(&[
        ("m.py", "X = 1\n"),
        ("pkg/__init__.py", ""),
        ("pkg/old.py", "O = 1\n"),
        ("deep/er/old.py", "D = 1\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    let generate = "python3 -c 'import os; os.makedirs(\"gen/sub\"); [open(p, \"w\").write(\"G = 1\\n\") for p in (\"pkg/made.py\", \"deep/er/made.py\", \"gen/sub/made.py\", \"top_made.py\")]'";
    let wo = r.work_order(order(
        &["m.py"],
        &[
            generate,
            "python3 -m compileall -q .",
            "python3 -c 'import pkg.made, gen.sub.made, top_made'",
        ],
    ));
    let replay = r.replay("rp", &[("1.json", set_line("m.py", "X = 1", "X = 2"))]);
    let out = run(&r, &wo, &replay, &["--json", "--sandbox"]);
    let s = summary(&out);
    assert_eq!(s["verdict"], "PASS", "{s}");
    let made: Vec<_> = cache_files(&r)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("made"))
        .collect();
    assert!(made.is_empty(), "{made:?}");
    assert!(!r.root.join("gen").exists() && !r.root.join("pkg/made.py").exists());
}

#[test]
fn sandboxed_compileall_recompiles_a_module_the_check_edited() {
    if !bwrap_or_skip() {
        return;
    }
    // The shared cache holds pkg/a.py's entry (the prefill compiled it); a check that edits
    // pkg/a.py, as a formatter or code generator does, then compiles the tree must be able
    // to replace that entry in its view, and the shared one must stay the baseline's.
    let r = TestRepo::with_files(&[("m.py", "X = 1\n"), ("pkg/a.py", "A = 1\n")]);
    r.git(&["config", "factory.verify", "true"]);
    let wo = r.work_order(order(
        &["m.py"],
        &[
            "python3 -c 'open(\"pkg/a.py\", \"a\").write(\"B = 22\\n\")'",
            "python3 -m compileall -q .",
            "python3 -c 'import pkg.a; assert pkg.a.B == 22'",
        ],
    ));
    let replay = r.replay("rp", &[("1.json", set_line("m.py", "X = 1", "X = 2"))]);
    let out = run(&r, &wo, &replay, &["--json", "--sandbox"]);
    let s = summary(&out);
    assert_eq!(s["verdict"], "PASS", "{s}");
    assert_eq!(
        r.read("pkg/a.py").as_deref(),
        Some("A = 1\n"),
        "the check's edit is put back"
    );
    let root = r.root.canonicalize().expect("real path");
    let shared = r
        .root
        .join(".git/factory/pycache")
        .join(root.strip_prefix("/").expect("absolute"))
        .join("pkg");
    // The put-back edit's entry was forgotten; whatever is left is the baseline's.
    for entry in std::fs::read_dir(&shared).into_iter().flatten().flatten() {
        let names = std::process::Command::new("python3")
            .args(["-c", "import marshal, sys; print(marshal.loads(open(sys.argv[1], 'rb').read()[16:]).co_names)"])
            .arg(entry.path())
            .output()
            .expect("python3 runs");
        assert_eq!(stdout_of(&names).trim(), "('A',)", "{:?}", entry.path());
    }
}

#[test]
fn a_module_a_check_generates_is_never_run_stale_in_a_later_attempt() {
    // gen.py is git-ignored, so no restore touches it: the check writes it afresh each
    // attempt (same size, same second) and attempt 2 must import its own version.
    let check = format!(
        "import os, m\nopen('gen.py', 'w').write('V = %d\\n' % m.Y)\nos.utime('gen.py', ({SAME_SECOND}, {SAME_SECOND}))\nimport gen\nassert gen.V == m.Y == 2, (gen.V, m.Y)\n"
    );
    let r = python_repo(&[
        ("m.py", "Y = 1\n"),
        ("check.py", &check),
        (".gitignore", "gen.py\n"),
    ]);
    attempt_2_runs_its_own(
        &r,
        &["m.py"],
        &["python3 check.py"],
        "m.py",
        "Y = 1",
        ["Y = 3", "Y = 2"],
    );
}

#[test]
fn a_module_imported_through_a_file_symlink_is_never_run_stale() {
    let r = python_repo(&[("real/m.py", "X = 1\n")]);
    std::fs::create_dir_all(r.root.join("lnk")).expect("mkdir");
    std::os::unix::fs::symlink("../real/m.py", r.root.join("lnk/m.py")).expect("link");
    r.git(&["add", "lnk"]);
    r.git(&["commit", "-q", "-m", "lnk/m.py is real/m.py"]);
    let check = format!(
        "sh -c 'touch -d @{SAME_SECOND} real/m.py && python3 -c \"import sys; sys.path.insert(0, \\\"lnk\\\"); import m; assert m.X == 2, m.X\"'"
    );
    attempt_2_runs_its_own(
        &r,
        &["real/m.py"],
        &[&check],
        "real/m.py",
        "X = 1",
        ["X = 3", "X = 2"],
    );
}

#[test]
fn a_file_with_a_name_that_is_not_utf8_is_never_run_stale() {
    use std::os::unix::ffi::OsStrExt;
    // The check edits caf\xe9.py (same size, same second) and loads it; the rollback puts the
    // file back, and attempt 2 must load the file as it is, not attempt 1's edit.
    let check = format!(
        r#"import importlib.util, os, sys, m
name = os.fsdecode(b"caf\xe9.py")
if m.Z == 3:
    open(name, "w").write("Y = 2\n")
os.utime(name, ({SAME_SECOND}, {SAME_SECOND}))
spec = importlib.util.spec_from_file_location("cafe", name)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
assert m.Z == 2 and mod.Y == 1, (m.Z, mod.Y)
"#
    );
    let r = python_repo(&[("m.py", "Z = 1\n"), ("check.py", &check)]);
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.py");
    std::fs::write(r.root.join(odd), "Y = 1\n").expect("write");
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "an odd name"]);
    attempt_2_runs_its_own(
        &r,
        &["m.py"],
        &["python3 check.py"],
        "m.py",
        "Z = 1",
        ["Z = 3", "Z = 2"],
    );
}

#[test]
fn the_fill_compiles_the_baselines_files_only() {
    if !bwrap_or_skip() {
        return;
    }
    let r = TestRepo::with_files(&[("m.py", "X = 1\n"), ("keep.py", "K = 1\n")]);
    r.git(&["config", "factory.verify", "true"]);
    std::fs::write(r.root.join(".git/hooks/helper.py"), "H = 1\n").expect("write");
    std::fs::write(r.root.join("untracked_but_ignored.py"), "U = 1\n").expect("write");
    std::fs::write(
        r.root.join(".git/info/exclude"),
        "untracked_but_ignored.py\nrp/\n",
    )
    .expect("write");
    // Checks that run Python (a repo whose checks never do is never filled).
    let wo = r.work_order(order(&["m.py"], &["python3 -c pass"]));
    for (x, flags) in [("2", &["--json", "--sandbox"][..]), ("3", &["--json"][..])] {
        let replay = r.replay(
            &format!("rp/{x}"),
            &[("1.json", set_line("m.py", "X = 1", &format!("X = {x}")))],
        );
        let out = run(&r, &wo, &replay, flags);
        assert_eq!(summary(&out)["verdict"], "PASS", "{}", stderr_of(&out));
        r.git(&["checkout", "--", "m.py"]);
        let files = cache_files(&r);
        let stray: Vec<_> = files
            .iter()
            .filter(|p| {
                let p = p.to_string_lossy();
                p.contains("/.git/") || p.contains("untracked_but_ignored")
            })
            .collect();
        assert!(stray.is_empty(), "{stray:?}");
        assert_eq!(entries_of(&r, "keep").len(), 1, "{flags:?}: {files:?}");
        let _ = std::fs::remove_dir_all(r.root.join(".git/factory/pycache"));
    }
}

/// A check that forges bytecode where the user's own Python looks (no prefix there): in place
/// over the user's entry for u.py (its folder's time does not move), a new one for pkg/v.py in
/// a folder of its own, and a module with no source at all (`shadow.pyc`).
const FORGE_BESIDE_SOURCES: &str = r#"import importlib.util, marshal, os, struct, sys
sys.pycache_prefix = None
def forge(src, text, target=None):
    st = os.stat(src) if os.path.exists(src) else None
    mtime, size = (int(st.st_mtime), st.st_size) if st else (0, 0)
    data = importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, mtime & 0xFFFFFFFF, size & 0xFFFFFFFF) + marshal.dumps(compile(text, src, "exec"))
    target = target or importlib.util.cache_from_source(src)
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    mode = "r+b" if os.path.exists(target) else "wb"
    with open(target, mode) as f:
        f.truncate(0)
        f.write(data)
forge("u.py", "X = 'forged'\n")
forge("pkg/v.py", "V = 'forged'\n")
forge("shadow.py", "S = 'forged'\n", "shadow.pyc")
"#;

/// The repo [`FORGE_BESIDE_SOURCES`] attacks, its .gitignore keeping all it writes (as most
/// Python projects' does), with the user's own bytecode of u.py and w.py beside them.
fn repo_with_users_bytecode(check: &str) -> TestRepo {
    let r = python_repo(&[
        (".gitignore", "__pycache__/\n*.py[cod]\n"),
        ("u.py", "X = 'real'\n"),
        ("w.py", "W = 'real'\n"),
        ("pkg/__init__.py", ""),
        ("pkg/v.py", "V = 'real'\n"),
        ("m.py", "Y = 1\n"),
        ("check.py", check),
    ]);
    users_python(&r, "import u, w");
    r
}

/// The user's own entry in the root's `__pycache__` for the module `stem`.
fn users_entry(r: &TestRepo, stem: &str) -> PathBuf {
    std::fs::read_dir(r.root.join("__pycache__"))
        .expect("the user's __pycache__")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{stem}.")))
        })
        .expect("an entry")
}

/// What the forgery must not leave: u.py runs as written, no new bytecode, w.py's untouched.
fn assert_no_forgery_left(r: &TestRepo, users_w: &[u8], what: &str) {
    assert!(!r.root.join("shadow.pyc").exists(), "{what}");
    assert!(!r.root.join("pkg/__pycache__").exists(), "{what}");
    assert_eq!(
        std::fs::read(users_entry(r, "w")).expect("kept"),
        users_w,
        "{what}"
    );
    assert_eq!(r.git(&["status", "--porcelain"]), "", "{what}");
    assert_eq!(
        users_python(r, "import u, pkg.v\nprint(u.X, pkg.v.V)").trim(),
        "real real",
        "{what}"
    );
    let _ = std::fs::remove_dir_all(r.root.join("pkg/__pycache__"));
}

/// Python as the user runs it in their own shell: no cache prefix, bytecode beside the sources.
fn users_python(r: &TestRepo, code: &str) -> String {
    let out = std::process::Command::new("python3")
        .current_dir(&r.root)
        .env_remove("PYTHONPYCACHEPREFIX")
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .args(["-c", code])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", stderr_of(&out));
    stdout_of(&out)
}

#[test]
fn checks_leave_no_bytecode_in_the_tree_for_the_users_own_python() {
    let r = repo_with_users_bytecode(&format!("{FORGE_BESIDE_SOURCES}sys.exit(1)\n"));
    let users_w = std::fs::read(users_entry(&r, "w")).expect("read");
    let modes: &[&[&str]] = if bwrap_or_skip() {
        &[&[], &["--sandbox"]]
    } else {
        &[&[]]
    };
    for flags in modes {
        let wo = r.work_order(order(&["m.py"], &["python3 check.py"]));
        let replay = r.replay("rp", &[("1.json", set_line("m.py", "Y = 1", "Y = 2"))]);
        let mut all = vec!["--json", "--force"];
        all.extend(flags.iter());
        let out = run(&r, &wo, &replay, &all);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {}", stderr_of(&out));
        // Sandboxed, the user's ignored __pycache__ is read-only (SPEC §7.1): nothing is
        // written there to remove.
        assert!(
            !flags.is_empty()
                || stderr_of(&out)
                    .contains("removed the Python bytecode a command wrote beside the sources"),
            "{}",
            stderr_of(&out)
        );
        assert_no_forgery_left(&r, &users_w, &format!("{flags:?}"));
    }
}

#[cfg(feature = "test-hooks")]
#[test]
fn recover_after_a_kill_removes_the_bytecode_the_checks_wrote_in_the_tree() {
    let r = repo_with_users_bytecode(FORGE_BESIDE_SOURCES);
    let users_w = std::fs::read(users_entry(&r, "w")).expect("read");
    r.git(&["config", "factory.verify", "python3 check.py"]);
    killed_mid_acceptance(&r, "true", ("m.py", "Y = 1"), "Y = 2");
    assert!(
        r.root.join("shadow.pyc").exists(),
        "the check ran before the kill"
    );
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_no_forgery_left(&r, &users_w, "recover");
}

#[test]
fn a_repo_at_a_very_long_path_compiles_as_in_the_users_shell() {
    // The cache mirrors the tree's absolute path inside the repo's own .git: at a path of
    // about 2,000 characters that passes PATH_MAX where the shell's own bytecode does not.
    let r = python_repo(&[("m.py", "X = 1\n")]);
    let mut deep = r.outside.clone();
    for i in 0..10 {
        deep.push(format!("{i}{}", "d".repeat(199)));
    }
    std::fs::create_dir_all(&deep).expect("mkdir");
    let clone = std::process::Command::new("git")
        .args(["clone", "-q"])
        .arg(&r.root)
        .arg(deep.join("repo"))
        .output()
        .expect("git clone");
    assert!(clone.status.success(), "{}", stderr_of(&clone));
    let deep = deep.join("repo");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(&deep)
            .args(args)
            .output()
            .expect("git");
        assert!(out.status.success(), "{}", stderr_of(&out));
    };
    git(&["config", "factory.verify", "python3 -m compileall -q ."]);
    git(&["config", "user.name", "t"]);
    git(&["config", "user.email", "t@example.com"]);
    let shell = std::process::Command::new("python3")
        .current_dir(&deep)
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .args(["-m", "compileall", "-q", "."])
        .output()
        .expect("python3");
    assert!(
        shell.status.success(),
        "the shell passes: {}",
        stderr_of(&shell)
    );
    let _ = std::fs::remove_dir_all(deep.join("__pycache__"));
    let wo = r.work_order(order(
        &["m.py"],
        &["python3 -c 'import m; assert m.X == 2'"],
    ));
    let replay = r.replay("rp", &[("1.json", set_line("m.py", "X = 1", "X = 2"))]);
    let out = r
        .factory()
        .current_dir(&deep)
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .args(["run", "--json", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    assert_eq!(summary(&out)["verdict"], "PASS", "{}", stderr_of(&out));
}

#[cfg(feature = "test-hooks")]
/// The views of the repo's cache on /dev/shm that process `pid` owns.
fn views_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("git-factory-pycache-") && n.contains(&format!("-{pid}-")))
        .collect()
}

#[cfg(feature = "test-hooks")]
#[test]
fn recover_leaves_the_cache_view_of_a_run_still_going_alone() {
    if !bwrap_or_skip() || !Path::new("/dev/shm").is_dir() {
        return;
    }
    let r = python_repo(&[("m.py", "X = 1\n")]);
    // B, a sandboxed --worktree run, checks until it is told to go on (through its own tree:
    // its /tmp is private), then writes its view.
    let check = "sh -c 'touch started; while ! test -e go-on; do sleep 0.05; done; touch \"$PYTHONPYCACHEPREFIX/probe\"'";
    let wo_b = r.work_order(order(&["m.py"], &[check]));
    let replay_b = r.replay("rb", &[("1.json", set_line("m.py", "X = 1", "X = 3"))]);
    let b = r
        .spawn(&["run", "--json", "--worktree", "--sandbox", "-w"])
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .arg(&wo_b)
        .arg("--replay")
        .arg(&replay_b)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    let worktrees = r.root.join(".git/factory/worktrees");
    let mut tree_b = None;
    for _ in 0..400 {
        tree_b = std::fs::read_dir(&worktrees)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("started").exists());
        if tree_b.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let Some(tree_b) = tree_b else {
        let mut b = b;
        let _ = b.kill();
        let out = b.wait_with_output().expect("ends");
        panic!("B's check never started: {}", stderr_of(&out));
    };
    assert_eq!(views_of(b.id()).len(), 1, "B's view is on /dev/shm");
    // A, in the user's tree, is killed mid-check and recovered while B is still checking.
    killed_mid_acceptance(&r, "true", ("m.py", "X = 1"), "X = 2");
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    assert_eq!(views_of(b.id()).len(), 1, "B's view is still there");
    std::fs::write(tree_b.join("go-on"), "").expect("write");
    let out = b.wait_with_output().expect("ends");
    assert_eq!(summary(&out)["verdict"], "PASS", "{}", stderr_of(&out));
}

/// A `python3` first on PATH that notes each harness compile (`compileall` given its files
/// on standard input) in `log`, then runs the real interpreter.
fn logging_python(r: &TestRepo, log: &Path) -> std::ffi::OsString {
    let real = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
    let bin = r.outside.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let script = bin.join("python3");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \"$*\" in *compileall*-i*) echo fill >> {} ;; esac\nexec {real} \"$@\"\n",
            log.display()
        ),
    )
    .expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut path = bin.into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

/// A passing run that changes app.txt, its checks `accept`, with `path` as PATH.
fn passing_run(r: &TestRepo, accept: &str, path: &std::ffi::OsStr) {
    let wo = r.work_order(order(&["app.txt"], &[accept]));
    let replay = r.replay("rp-app", &[("1.json", set_line("app.txt", "a", "b"))]);
    let out = r
        .factory()
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .env("PATH", path)
        .args(["run", "--json", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    assert_eq!(summary(&out)["verdict"], "PASS", "{}", stderr_of(&out));
    r.git(&["checkout", "--", "app.txt"]);
}

/// The source size a bytecode entry was compiled from (its header's bytes 12..16).
fn compiled_size(r: &TestRepo, entry: &Path) -> u32 {
    let bytes = std::fs::read(r.root.join(".git/factory/pycache").join(entry)).expect("pyc");
    u32::from_le_bytes(bytes[12..16].try_into().expect("header"))
}

#[test]
fn the_fill_compiles_only_what_changed_and_starts_no_interpreter_when_nothing_did() {
    let r = python_repo(&[
        ("app.txt", "a\n"),
        ("m.py", "X = 1\n"),
        ("n.py", "Y = 1\n"),
        ("d.py", "Z = 1\n"),
    ]);
    let log = r.outside.join("fills");
    let path = logging_python(&r, &log);
    let accept = "python3 -c 'import m, n'";
    passing_run(&r, accept, &path);
    assert_eq!(lines_in(&log), 1, "the first run fills");
    let (m, n, d) = (
        entries_of(&r, "m"),
        entries_of(&r, "n"),
        entries_of(&r, "d"),
    );
    assert!(
        !m.is_empty() && !n.is_empty() && !d.is_empty(),
        "{m:?} {n:?} {d:?}"
    );
    let n_meta = |r: &TestRepo| {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(r.root.join(".git/factory/pycache").join(&n[0])).expect("n");
        (meta.ino(), meta.mtime(), meta.mtime_nsec())
    };
    let n_before = n_meta(&r);
    // Nothing changed: no interpreter starts for the fill.
    passing_run(&r, accept, &path);
    assert_eq!(lines_in(&log), 1, "nothing differs, nothing compiled");
    // m changes (another size), d goes: m is compiled again, n is not touched, d leaves nothing.
    r.write("m.py", "X = 22\n");
    std::fs::remove_file(r.root.join("d.py")).expect("rm");
    r.git(&["commit", "-qam", "m changed, d deleted"]);
    passing_run(&r, accept, &path);
    assert_eq!(lines_in(&log), 2, "the changed module is compiled");
    let m_now = entries_of(&r, "m");
    assert!(!m_now.is_empty(), "m is warm again");
    for entry in &m_now {
        assert_eq!(compiled_size(&r, entry), 7, "{entry:?} is of the new m.py");
    }
    assert_eq!(n_meta(&r), n_before, "n was not compiled again");
    assert!(entries_of(&r, "d").is_empty(), "{:?}", entries_of(&r, "d"));
}

#[test]
fn a_repo_whose_checks_never_run_python_never_pays_for_the_cache() {
    let r = python_repo(&[("app.txt", "a\n"), ("m.py", "X = 1\n")]);
    let log = r.outside.join("fills");
    let path = logging_python(&r, &log);
    passing_run(&r, "true", &path);
    passing_run(&r, "true", &path);
    assert_eq!(lines_in(&log), 0, "no fill");
    assert!(entries_of(&r, "m").is_empty());
}
