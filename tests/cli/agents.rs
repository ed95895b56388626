//! `--agent-edits`: coding agents that edit files in a scratch worktree.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;

/// A repo with an executable-to-be script, and an agent script doing `action`. Before the
/// action, the agent records the user's tree, index and HEAD, so the test can check they
/// were untouched while it ran.
struct Agent {
    r: TestRepo,
    script: std::path::PathBuf,
    probe: std::path::PathBuf,
}

fn agent(action: &str) -> Agent {
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        ("other.txt", "keep me\n"),
        ("run.sh", "echo hi\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    let probe = r.outside.join("probe");
    let script = r.outside.join("agent.sh");
    // The probe copies the user's files as the agent sees them, for the test to compare.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nmkdir -p {probe}/$FACTORY_ATTEMPT\nfor f in app.txt other.txt run.sh .git/index .git/HEAD; do cp \"$USER_ROOT/$f\" {probe}/$FACTORY_ATTEMPT/ 2>/dev/null; done\nls -a \"$USER_ROOT\" > {probe}/$FACTORY_ATTEMPT/ls\npwd > {probe}/$FACTORY_ATTEMPT/pwd\n{action}\n",
            probe = probe.display()
        ),
    )
    .expect("write");
    Agent { r, script, probe }
}

impl Agent {
    fn run(&self, allowed: &[&str], accept: &str, extra: &[&str]) -> (std::process::Output, Value) {
        let wo = self.r.work_order(json!({
            "id": "agent", "title": "agent edits", "intent": "edit", "allowed_files": allowed,
            "acceptance_commands": [accept],
        }));
        let out = self
            .r
            .factory()
            .env("USER_ROOT", &self.r.root)
            .env("OPENAI_API_KEY", "agent-keeps-its-key")
            .args(["run", "--json", "-w"])
            .arg(&wo)
            .arg("--agent-edits")
            .arg(format!(
                "sh {} {{prompt_file}} attempt-{{attempt}}",
                self.script.display()
            ))
            .args(extra)
            .output()
            .expect("runs");
        // What the agent saw of the user's tree equals what was there before the run.
        for attempt in std::fs::read_dir(&self.probe)
            .map(|d| d.flatten().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            let seen = attempt.path();
            let pwd = std::fs::read_to_string(seen.join("pwd")).unwrap_or_default();
            assert!(
                pwd.contains(".git/factory/worktrees/pool-"),
                "the agent ran in a pooled scratch worktree: {pwd}"
            );
        }
        // No scratch worktree is left but idle pooled ones.
        only_idle_pooled_worktrees(&self.r);
        let summary = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
        (out, summary)
    }

    /// Files the agent copied from the user's tree during attempt N, as bytes.
    fn seen(&self, attempt: u32, file: &str) -> Vec<u8> {
        std::fs::read(self.probe.join(attempt.to_string()).join(file)).unwrap_or_default()
    }
}

fn untouched_during(a: &Agent, attempt: u32, index_before: &[u8], head_before: &[u8]) {
    assert_eq!(a.seen(attempt, "app.txt"), b"one\ntwo\nthree\n");
    assert_eq!(a.seen(attempt, "other.txt"), b"keep me\n");
    assert_eq!(a.seen(attempt, "index"), index_before);
    assert_eq!(a.seen(attempt, "HEAD"), head_before);
}

fn before(a: &Agent) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(a.r.root.join(".git/index")).expect("index"),
        std::fs::read(a.r.root.join(".git/HEAD")).expect("HEAD"),
    )
}

#[test]
fn an_agent_that_edits_an_allowed_file_passes() {
    let a = agent("sed -i 's/^two$/TWO/' app.txt\ntest -n \"$FACTORY_PROMPT_FILE\" && grep -q 'Work order agent' \"$1\" && test \"$2\" = attempt-1 && test \"$FACTORY_ALLOWED_FILES\" = app.txt && test -n \"$FACTORY_RUN_ID\" && test \"$OPENAI_API_KEY\" = agent-keeps-its-key");
    let (idx, head) = before(&a);
    let (out, s) = a.run(&["app.txt"], "grep -qx TWO app.txt", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    untouched_during(&a, 1, &idx, &head);
    assert_eq!(a.r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    let id = s["run_id"].as_str().expect("id");
    let stored = a.r.git(&[
        "show",
        &format!("refs/factory/{id}:attempt_1/proposed_patch.diff"),
    ]);
    assert!(stored.contains("-two\n+TWO\n"), "{stored}");
    assert!(s["config"]["model"]
        .as_str()
        .unwrap_or("")
        .starts_with("agent-edits:sh "));
}

#[test]
fn new_files_deletions_and_modes_are_part_of_the_proposal() {
    let a = agent("echo new > new.txt\nrm other.txt\nchmod +x run.sh");
    let (out, _) = a.run(
        &["new.txt", "other.txt", "run.sh"],
        "sh -c 'test -x run.sh && test -f new.txt && test ! -e other.txt'",
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(a.r.read("new.txt").as_deref(), Some("new\n"));
    assert!(a.r.read("other.txt").is_none());
    use std::os::unix::fs::PermissionsExt;
    assert!(
        std::fs::metadata(a.r.root.join("run.sh"))
            .expect("meta")
            .permissions()
            .mode()
            & 0o111
            != 0
    );
}

#[test]
fn what_the_agent_commits_is_its_proposal() {
    let a = agent("sed -i 's/^two$/TWO/' app.txt\ngit -c user.name=a -c user.email=a@a.invalid commit -qam 'agent commit'");
    let head_before = a.r.git(&["rev-parse", "HEAD"]);
    let (out, _) = a.run(&["app.txt"], "grep -qx TWO app.txt", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(a.r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    assert_eq!(
        a.r.git(&["rev-parse", "HEAD"]),
        head_before,
        "the agent's commit does not reach the user's branch"
    );
}

#[test]
fn an_edit_outside_the_allowed_files_is_refused_then_corrected() {
    let a = agent("if [ \"$FACTORY_ATTEMPT\" = 1 ]; then echo sneaky >> other.txt; fi\nsed -i 's/^two$/TWO/' app.txt");
    let (idx, head) = before(&a);
    let (out, s) = a.run(&["app.txt"], "grep -qx TWO app.txt", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let brief = &s["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "patch_scope_violation");
    assert!(brief["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .contains("other.txt"));
    untouched_during(&a, 1, &idx, &head);
    untouched_during(&a, 2, &idx, &head);
    assert_eq!(a.r.read("other.txt").as_deref(), Some("keep me\n"));
}

#[test]
fn an_agent_that_fails_is_llm_call_failed_with_its_stderr() {
    let a = agent("echo 'agent crashed: no credits' >&2\nexit 4");
    let (out, s) = a.run(&["app.txt"], "true", &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let brief = &s["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "llm_call_failed");
    assert!(brief["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .contains("agent crashed: no credits"));
}

#[test]
fn a_hanging_agent_is_killed_with_its_children() {
    let a = agent("sleep 67 &\nsleep 68");
    let start = std::time::Instant::now();
    let (out, s) = a.run(
        &["app.txt"],
        "true",
        &["--max-attempts", "1", "--agent-timeout", "1"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
    assert!(s["attempts"][0]["failure_brief"]["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .contains("timed out"));
    for marker in ["sleep 67", "sleep 68"] {
        assert!(
            processes_with(marker).is_empty(),
            "left behind: {:?}",
            processes_with(marker)
        );
    }
}

#[test]
fn an_agent_that_changes_nothing_proposes_no_change() {
    let a = agent("true");
    let (out, s) = a.run(&["app.txt"], "grep -qx two app.txt", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["attempts"][0]["summary"], "the agent changed nothing");
}

#[test]
fn replaying_an_agent_edits_run_needs_no_agent() {
    let a = agent("sed -i 's/^two$/TWO/' app.txt");
    let (out, s) = a.run(&["app.txt"], "grep -qx TWO app.txt", &[]);
    assert_eq!(out.status.code(), Some(0));
    let id = s["run_id"].as_str().expect("id").to_string();
    a.r.git(&["checkout", "--", "app.txt"]);
    std::fs::remove_file(&a.script).expect("the agent is gone");
    let wo = a.r.work_order(json!({
        "id": "agent", "title": "agent edits", "intent": "edit", "allowed_files": ["app.txt"],
        "acceptance_commands": ["grep -qx TWO app.txt"],
    }));
    let out =
        a.r.factory()
            .args(["run", "-w"])
            .arg(&wo)
            .args(["--replay", &id])
            .output()
            .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(a.r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
}

/// `touched_files` of a refused attempt, from the summary and from `apply_result.json`.
fn refused_touched(r: &TestRepo, s: &Value) -> (Vec<String>, Vec<String>) {
    let attempt = &s["attempts"][0];
    assert_eq!(attempt["failure_brief"]["stage"], "patch_scope_violation");
    let listed = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let id = s["run_id"].as_str().expect("id");
    let stored = r.git(&[
        "show",
        &format!("refs/factory/{id}:attempt_1/apply_result.json"),
    ]);
    let stored: Value = serde_json::from_str(&stored).expect("json");
    (
        listed(&attempt["touched_files"]),
        listed(&stored["touched_files"]),
    )
}

#[test]
fn a_refused_agent_proposal_records_every_path_it_touched() {
    let a = agent("printf '.aider*\\n' > .gitignore\necho hello > hello.txt");
    let before = a.r.snapshot();
    let (out, s) = a.run(&["hello.txt"], "true", &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (summary, stored) = refused_touched(&a.r, &s);
    assert_eq!(summary, [".gitignore", "hello.txt"]);
    assert_eq!(stored, summary);
    assert_eq!(a.r.snapshot(), before);
}

#[test]
fn a_refused_replayed_diff_records_every_path_it_touched() {
    let r = TestRepo::simple();
    let diff = format!(
        "{}diff --git a/notes.md b/notes.md\nnew file mode 100644\n--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1 @@\n+notes\n",
        diff_replace("app.txt", &["one", "two", "three"], "two", "TWO")
    );
    let replay = r.replay("rp", &[("1.diff", diff)]);
    let wo = r.work_order(basic_order(&["true"]));
    let before = r.snapshot();
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("summary");
    let (summary, stored) = refused_touched(&r, &s);
    assert_eq!(summary, ["app.txt", "notes.md"]);
    assert_eq!(stored, summary);
    assert_eq!(r.snapshot(), before);
}

/// What aider does in a repo that does not ignore its files yet: asks git whether `.aider` is
/// ignored and, if not, appends `.aider*` to `.gitignore`; keeps its chat history, input
/// history and tags cache beside the code; edits the file; with auto-commits, commits it.
const AIDER_LIKE: &str = "git check-ignore -q .aider || printf '.aider*\\n' >> .gitignore
printf '# aider chat started\\n%s\\n' \"$(head -c 200 \"$FACTORY_PROMPT_FILE\")\" > .aider.chat.history.md
echo '+fix it' > .aider.input.history
mkdir -p .aider.tags.cache.v4 && printf 'SQLite format 3\\000\\001' > .aider.tags.cache.v4/cache.db
sed -i 's/^two$/TWO/' app.txt";

#[test]
fn aider_finds_its_files_ignored_and_they_stay_out_of_the_proposal() {
    let a = agent(AIDER_LIKE);
    let before = a.r.snapshot();
    let exclude = std::fs::read(a.r.root.join(".git/info/exclude")).unwrap_or_default();
    let (out, s) = a.run(
        &["app.txt"],
        "grep -qx TWO app.txt",
        &["--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["attempts"][0]["touched_files"], json!(["app.txt"]));
    let mut expected = before;
    expected.files.insert(
        "app.txt".into(),
        (expected.files["app.txt"].0, b"one\nTWO\nthree\n".to_vec()),
    );
    let after = a.r.snapshot();
    assert_eq!(
        after.files, expected.files,
        "only the fix reached the user's tree"
    );
    assert!(a.r.read(".gitignore").is_none());
    assert_eq!(
        std::fs::read(a.r.root.join(".git/info/exclude")).unwrap_or_default(),
        exclude
    );
    let id = s["run_id"].as_str().expect("id");
    let stored = a.r.git(&[
        "show",
        &format!("refs/factory/{id}:attempt_1/proposed_patch.diff"),
    ]);
    assert!(
        !stored.contains(".aider") && !stored.contains(".gitignore"),
        "{stored}"
    );
}

#[test]
fn an_auto_committing_aider_keeps_the_users_own_ignores_and_branch() {
    // The user ignores build output in a global excludes file: the agent's git still does.
    let a = agent(&format!(
        "{AIDER_LIKE}\nmkdir -p build && echo obj > build/out.o\ngit add -A && git -c user.name=aider -c user.email=a@a.invalid commit -qm 'feat: TWO'\ngit status --porcelain --ignored > \"$FACTORY_PROMPT_FILE.status\" 2>&1; test -z \"$(git status --porcelain)\""
    ));
    std::fs::create_dir_all(a.r.home.join(".config/git")).expect("mkdir");
    std::fs::write(a.r.home.join(".config/git/ignore"), "build/\n").expect("write");
    let head = a.r.git(&["rev-parse", "HEAD"]);
    let (out, s) = a.run(
        &["app.txt"],
        "grep -qx TWO app.txt",
        &["--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["attempts"][0]["touched_files"], json!(["app.txt"]));
    assert_eq!(a.r.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(a.r.git(&["status", "--porcelain"]), " M app.txt\n");
    assert!(a.r.read("build/out.o").is_none());
}

#[test]
fn agent_ignore_globs_come_from_git_config() {
    // A repo that tracks .claude/settings.json: edits to it are the agent's proposal like any
    // other file's; its new files under a configured glob are not.
    let a = agent("mkdir -p .state && echo x > .state/log\necho '{\"a\":1}' > .claude/settings.json\necho notes > .aider.notes");
    a.r.write(".claude/settings.json", "{}\n");
    a.r.git(&["add", "-A"]);
    a.r.git(&["commit", "-qm", "claude settings"]);
    a.r.git(&["config", "--add", "factory.agentIgnore", ".state/"]);
    let (out, s) = a.run(&[".claude/settings.json"], "true", &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    // .aider* is no longer ignored once the list is configured: the defaults are replaced.
    assert_eq!(
        s["attempts"][0]["touched_files"],
        json!([".aider.notes", ".claude/settings.json"])
    );
}

fn have_bwrap() -> bool {
    let ok = std::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok();
    if !ok {
        // CI installs bubblewrap (.ci/run), so there the sandbox is always tested for real.
        assert!(std::env::var_os("CI").is_none(), "bwrap is missing on CI");
        eprintln!("bwrap is not installed; skipping (.ci/run installs it)");
    }
    ok
}

/// A folder outside /tmp (which the sandbox replaces by a private one), so that a write the
/// sandbox refuses fails as it would in a user's home.
fn home_outside_tmp(name: &str) -> tempfile::TempDir {
    // The sandbox gives agents a private /tmp: a home under it (a checkout that lives in /tmp)
    // would be written there and vanish, not be refused. /var/tmp is not replaced.
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if target.starts_with("/tmp") {
        std::path::Path::new("/var/tmp")
    } else {
        target
    };
    std::fs::create_dir_all(base).expect("mkdir");
    tempfile::Builder::new()
        .prefix(name)
        .tempdir_in(base)
        .expect("tempdir")
}

/// `git factory run --sandbox --agent-edits 'sh -c SCRIPT'` on a fresh simple repo.
fn sandboxed(
    r: &TestRepo,
    home: &Path,
    script: &str,
    extra: &[&str],
) -> (std::process::Output, Value) {
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let argv = format!("sh -c {}", shlex::try_quote(script).expect("quotable"));
    let out = r
        .factory()
        .env("HOME", home)
        .env("USER_ROOT", &r.root)
        .args(["run", "--json", "--sandbox", "-w"])
        .arg(&wo)
        .arg("--agent-edits")
        .arg(argv)
        .args(extra)
        .output()
        .expect("runs");
    let summary = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
    (out, summary)
}

/// What Codex CLI does first: it refuses to start unless its state folder is writable.
const CODEX_LIKE_START: &str =
    "mkdir -p \"$HOME/.codexlike/sessions\" && echo started > \"$HOME/.codexlike/sessions/1\" || { echo 'cannot write CODEX_HOME' >&2; exit 3; }";

#[test]
fn a_sandboxed_agent_needs_its_state_folder_named_writable() {
    if !have_bwrap() {
        return;
    }
    let r = TestRepo::simple();
    let home = home_outside_tmp("home");
    let script = format!("{CODEX_LIKE_START}\nsed -i 's/^two$/TWO/' app.txt");
    let before = r.snapshot();
    let (out, s) = sandboxed(&r, home.path(), &script, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let brief = &s["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "llm_call_failed");
    assert!(brief["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .contains("cannot write CODEX_HOME"));
    assert!(!home.path().join(".codexlike").exists());
    assert_eq!(r.snapshot(), before);

    r.git(&["config", "--add", "factory.agentWritable", "~/.codexlike"]);
    let (out, _) = sandboxed(
        &r,
        home.path(),
        &script,
        &["--max-attempts", "1", "--force"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(home.path().join(".codexlike/sessions/1"))
            .ok()
            .as_deref(),
        Some("started\n")
    );
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
}

#[test]
fn a_sandboxed_agent_writes_only_its_worktree_and_commits_there() {
    if !have_bwrap() {
        return;
    }
    let r = TestRepo::simple();
    let home = home_outside_tmp("home");
    let outside = home_outside_tmp("outside");
    let log = home.path().join(".agent/log");
    // Every write outside the scratch worktree is tried and must fail; the agent notes what
    // happened in its (writable) state folder, then fixes the file and commits as aider does.
    let script = format!(
        "mkdir -p \"$HOME/.agent\"; log=\"$HOME/.agent/log\"
try() {{ if sh -c \"$1\" 2>/dev/null; then echo \"wrote: $1\" >> \"$log\"; else echo \"refused: $1\" >> \"$log\"; fi; }}
try 'echo x >> \"$USER_ROOT/other.txt\"'
try 'echo x > \"$USER_ROOT/new.txt\"'
try 'echo \"[core]\" >> \"$USER_ROOT/.git/config\"'
try 'echo evil > \"$USER_ROOT/.git/hooks/pre-commit\"'
try 'echo 0000000000000000000000000000000000000000 > \"$USER_ROOT/.git/refs/heads/evil\"'
try 'echo x > {outside}/escaped'
try 'echo x > \"$HOME/escaped\"'
ls -A /tmp >> \"$log\"
echo \"pwd: $(pwd)\" >> \"$log\"
sed -i 's/^two$/TWO/' app.txt
git -c user.name=a -c user.email=a@a.invalid commit -qam 'fix: TWO' && echo committed >> \"$log\"",
        outside = outside.path().display()
    );
    r.git(&["config", "--add", "factory.agentWritable", "~/.agent"]);
    let before = r.snapshot();
    let config = std::fs::read(r.root.join(".git/config")).expect("config");
    let (out, s) = sandboxed(&r, home.path(), &script, &["--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let log = std::fs::read_to_string(&log).expect("the agent's log");
    assert!(!log.contains("wrote:"), "{log}");
    assert_eq!(log.matches("refused:").count(), 7, "{log}");
    assert!(log.ends_with("committed\n"), "{log}");
    // It works in its worktree shown outside any `.git` folder (some agents refuse to edit
    // there); /tmp is private: it holds only that and the way to the test's own repo.
    assert!(log.contains("pwd: /tmp/git-factory/repo\n"), "{log}");
    assert!(
        log.lines()
            .filter(|l| !l.starts_with("refused: ") && !l.starts_with("pwd: ") && *l != "committed")
            .all(|l| l.starts_with(".tmp") || l == "git-factory"),
        "{log}"
    );
    assert_eq!(s["attempts"][0]["touched_files"], json!(["app.txt"]));
    let mut expected = before;
    expected.files.insert(
        "app.txt".into(),
        (expected.files["app.txt"].0, b"one\nTWO\nthree\n".to_vec()),
    );
    assert_eq!(r.snapshot(), expected);
    assert_eq!(
        std::fs::read(r.root.join(".git/config")).expect("config"),
        config
    );
    assert!(!r.root.join(".git/hooks/pre-commit").exists());
    assert!(std::fs::read_dir(outside.path())
        .expect("dir")
        .next()
        .is_none());
    assert!(!home.path().join("escaped").exists());
}

#[test]
fn a_relative_agent_writable_folder_is_refused_before_any_attempt() {
    if !have_bwrap() {
        return;
    }
    let r = TestRepo::simple();
    r.git(&["config", "--add", "factory.agentWritable", "state"]);
    let before = r.snapshot();
    let (out, _) = sandboxed(&r, &r.home, "true", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("error: git config factory.agentWritable \"state\": not an absolute folder"),
        "{err}"
    );
    assert!(
        err.contains("hint: name an absolute folder or one under ~/"),
        "{err}"
    );
    assert!(r.run_ids().is_empty(), "a refusal is not recorded");
    assert_eq!(r.snapshot(), before);
}

/// What an agent that escapes its worktree does on attempt 1 (attempt 2 behaves): it edits
/// the user's `.git/config`, plants a hook, makes a branch and moves `main`, writes and
/// stages in the user's tree.
const ESCAPES_ON_ATTEMPT_1: &str = "if [ \"$FACTORY_ATTEMPT\" = 1 ]; then
  git -C \"$USER_ROOT\" config core.fsmonitor 'touch pwned'
  printf '#!/bin/sh\\ntouch pwned\\n' > \"$USER_ROOT/.git/hooks/pre-commit\"; chmod +x \"$USER_ROOT/.git/hooks/pre-commit\"
  git -C \"$USER_ROOT\" branch evil
  echo escaped >> \"$USER_ROOT/other.txt\"
  echo planted > \"$USER_ROOT/planted.txt\"; git -C \"$USER_ROOT\" add planted.txt
  git -C \"$USER_ROOT\" -c user.name=a -c user.email=a@a.invalid commit -qm planted
fi
sed -i 's/^two$/TWO/' app.txt";

/// The user's `.git/config` and hooks folder, byte for byte.
fn git_files(r: &TestRepo) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let mut hooks: Vec<(String, Vec<u8>)> = std::fs::read_dir(r.root.join(".git/hooks"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    hooks.sort();
    (
        std::fs::read(r.root.join(".git/config")).expect("config"),
        hooks,
    )
}

#[test]
fn an_agent_that_escapes_its_worktree_is_put_back_and_its_attempt_fails() {
    let a = agent(ESCAPES_ON_ATTEMPT_1);
    let before = a.r.snapshot();
    let git_before = git_files(&a.r);
    let (out, s) = a.run(
        &["app.txt"],
        "grep -qx TWO app.txt",
        &["--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "FAIL");
    let brief = &s["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "agent_escaped");
    let text = brief["primary_error_excerpt"].as_str().unwrap_or("");
    for named in [
        "other.txt",
        "planted.txt",
        "refs/heads/main",
        "refs/heads/evil",
        ".git/index",
        ".git/config",
        "pre-commit",
    ] {
        assert!(text.contains(named), "{named} is named: {text}");
    }
    assert_eq!(s["attempts"][0]["apply_ok"], false);
    assert_eq!(s["ended_stage"], "agent_escaped");
    assert_eq!(a.r.snapshot(), before);
    assert_eq!(git_files(&a.r), git_before);
    assert!(!a.r.root.join("pwned").exists());
    let shown = a.r.factory().args(["show"]).output().expect("show");
    assert_eq!(shown.status.code(), Some(0));
    assert!(
        stdout_of(&shown).contains("agent_escaped"),
        "{}",
        stdout_of(&shown)
    );
}

#[test]
fn after_an_escape_the_next_attempt_is_told_what_it_changed_and_can_pass() {
    let a = agent(ESCAPES_ON_ATTEMPT_1);
    let before = a.r.snapshot();
    let git_before = git_files(&a.r);
    let (out, s) = a.run(&["app.txt"], "grep -qx TWO app.txt", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["attempts"][0]["failure_brief"]["stage"], "agent_escaped");
    let id = s["run_id"].as_str().expect("id");
    let prompt =
        a.r.git(&["show", &format!("refs/factory/{id}:attempt_2/prompt.txt")]);
    assert!(prompt.contains("agent_escaped"), "{prompt}");
    assert!(prompt.contains("outside your own worktree"), "{prompt}");
    let mut expected = before;
    expected.files.insert(
        "app.txt".into(),
        (expected.files["app.txt"].0, b"one\nTWO\nthree\n".to_vec()),
    );
    assert_eq!(a.r.snapshot(), expected);
    assert_eq!(git_files(&a.r), git_before);
}

#[test]
fn in_a_worktree_run_shared_refs_an_agent_made_are_named_not_removed() {
    // A --worktree run shares refs with the user's ongoing work: what changed there is
    // reported (the attempt fails), never undone behind the user's back.
    let a = agent("git -C \"$USER_ROOT\" branch agent-branch\nsed -i 's/^two$/TWO/' app.txt");
    let (out, s) = a.run(
        &["app.txt"],
        "grep -qx TWO app.txt",
        &["--worktree", "--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let brief = &s["attempts"][0]["failure_brief"];
    assert_eq!(brief["stage"], "agent_escaped");
    assert!(brief["primary_error_excerpt"]
        .as_str()
        .unwrap_or("")
        .contains(
            "left as found (shared with the user's own work): refs/heads/agent-branch (added)"
        ));
    assert_eq!(a.r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
}

#[test]
fn a_sandboxed_agent_in_a_worktree_run_sees_its_worktree_named_after_the_repo() {
    if !have_bwrap() {
        return;
    }
    let r = TestRepo::simple();
    let home = home_outside_tmp("home");
    let before = r.snapshot();
    let script = "test \"$(pwd)\" = /tmp/git-factory/repo || { pwd >&2; exit 7; }\nsed -i 's/^two$/TWO/' app.txt\ngit -c user.name=a -c user.email=a@a.invalid commit -qam fix";
    let (out, s) = sandboxed(
        &r,
        home.path(),
        script,
        &["--worktree", "--max-attempts", "1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = s["run_id"].as_str().expect("id");
    assert_eq!(
        r.git(&["show", &format!("heads/factory/run-{id}:app.txt")]),
        "one\nTWO\nthree\n"
    );
    let after = r.snapshot();
    assert_eq!(
        (after.head, after.index, after.files),
        (before.head, before.index, before.files),
        "a --worktree run leaves the user's tree alone"
    );
}

/// Each way an agent leaves its work — written only, staged, committed, committed then
/// amended, on a branch of its own, beside a stash of something else: the proposal is exactly
/// its scratch worktree's difference from the baseline (an edit and a new file), applied and
/// verified; no ref of its own is left in the repo, the repo's objects are whole, and the pool
/// keeps only clean worktrees (checked by `Agent::run`).
#[test]
fn every_way_an_agent_leaves_its_work_is_its_proposal() {
    const COMMIT: &str = "git -c user.name=a -c user.email=a@a.invalid commit -q";
    const CHANGE: &str = "sed -i 's/^two$/TWO/' app.txt\necho new > new.txt";
    let ways = [
        ("written only", String::new()),
        ("staged", "git add -A".to_string()),
        ("committed", format!("git add -A && {COMMIT} -m agent")),
        (
            "amended",
            format!(
                "git add app.txt && {COMMIT} -m first && git add -A && {COMMIT} --amend -m agent"
            ),
        ),
        (
            "own branch",
            format!("git checkout -q -b mine && git add -A && {COMMIT} -m agent"),
        ),
        (
            "stash",
            "echo junk > junk.txt && git stash -q -u && git add -A".to_string(),
        ),
    ];
    for (way, after) in ways {
        // The stash holds a file the agent set aside; its change is made after it.
        let action = if way == "stash" {
            format!("{after}\n{CHANGE}\ngit add -A")
        } else {
            format!("{CHANGE}\n{after}")
        };
        let a = agent(&action);
        let refs_before = a.r.git(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads",
            "refs/tags",
            "refs/stash",
        ]);
        let (out, s) = a.run(
            &["app.txt", "new.txt"],
            "sh -c 'grep -qx TWO app.txt && grep -qx new new.txt'",
            &["--max-attempts", "1"],
        );
        assert_eq!(out.status.code(), Some(0), "{way}: {}", stderr_of(&out));
        assert_eq!(s["verdict"], "PASS", "{way}: {s}");
        let id = s["run_id"].as_str().expect("id");
        let stored = a.r.git(&[
            "show",
            &format!("refs/factory/{id}:attempt_1/proposed_patch.diff"),
        ]);
        let mut files: Vec<&str> = stored
            .lines()
            .filter_map(|l| l.strip_prefix("+++ b/"))
            .collect();
        files.sort();
        assert_eq!(files, ["app.txt", "new.txt"], "{way}: {stored}");
        assert!(!stored.contains("junk"), "{way}: {stored}");
        assert_eq!(
            a.r.read("app.txt").as_deref(),
            Some("one\nTWO\nthree\n"),
            "{way}"
        );
        assert_eq!(a.r.read("new.txt").as_deref(), Some("new\n"), "{way}");
        assert!(a.r.read("junk.txt").is_none(), "{way}");
        assert_eq!(
            a.r.git(&[
                "for-each-ref",
                "--format=%(refname)",
                "refs/heads",
                "refs/tags",
                "refs/stash"
            ]),
            refs_before,
            "{way}: no ref of the agent's is left"
        );
        let (code, _) =
            a.r.git_code(&["fsck", "--no-dangling", "--connectivity-only"]);
        assert_eq!(code, 0, "{way}: every object a ref names is there");
        if have_bwrap() {
            sandboxed_way(way, &action);
        }
    }
}

/// The same way under `--sandbox`: the agent's git works in a repository of its own (its
/// branches, stash and objects), so each way works there too and leaves the repo as it was
/// but for the change.
fn sandboxed_way(way: &str, action: &str) {
    let r = TestRepo::with_files(&[("app.txt", "one\ntwo\nthree\n"), ("other.txt", "keep\n")]);
    r.git(&["config", "factory.verify", "true"]);
    let home = home_outside_tmp("home");
    let refs = || r.git(&["for-each-ref", "--format=%(refname) %(objectname)"]);
    let before = refs();
    let mut order = basic_order(&["sh -c 'grep -qx TWO app.txt && grep -qx new new.txt'"]);
    order["allowed_files"] = json!(["app.txt", "new.txt"]);
    let wo = r.work_order(order);
    let out = r
        .factory()
        .env("HOME", home.path())
        .args(["run", "--json", "--sandbox", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--agent-edits")
        .arg(format!(
            "sh -c {}",
            shlex::try_quote(action).expect("quotable")
        ))
        .output()
        .expect("runs");
    let s: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "sandboxed {way}: {}",
        stderr_of(&out)
    );
    assert_eq!(s["verdict"], "PASS", "sandboxed {way}");
    assert_eq!(
        r.read("new.txt").as_deref(),
        Some("new\n"),
        "sandboxed {way}"
    );
    let after: String = refs()
        .lines()
        .filter(|l| !l.starts_with("refs/factory/") && !l.starts_with("refs/notes/factory"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        after, before,
        "sandboxed {way}: no ref of the agent's reaches the repo"
    );
    only_idle_pooled_worktrees(&r);
}
