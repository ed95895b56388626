//! Pooled worktrees (SPEC §5): kept under `.git/factory/worktrees/`, locked against git's own
//! prune, held by one process at a time, brought to each run's baseline exactly, given back
//! clean, and never trusted after a holder was killed. Real git, the real binary.

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn order(id: &str, accept: &[&str]) -> Value {
    json!({
        "id": id, "title": "pool", "intent": "i",
        "allowed_files": ["app.txt"],
        "acceptance_commands": accept,
    })
}

fn good() -> String {
    proposal(
        &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
        "s",
    )
}

/// A `--worktree` run of a fresh order whose acceptance is `accept`; its JSON summary.
fn worktree_run(r: &TestRepo, id: &str, accept: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let wo = r.work_order(order(id, &[accept]));
    let replay = r.replay(&format!("rp-{id}"), &[("1.json", good())]);
    let mut flags = vec!["--json", "--worktree"];
    flags.extend(extra);
    let out = r.run_replay(&wo, &replay, &flags);
    let s = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
    assert!(s != Value::Null, "{}", stderr_of(&out));
    (out.status.code(), s)
}

/// A `--json --worktree` run of a fresh order whose acceptance is `accept`, started in the
/// background with its output piped.
fn spawn_worktree_run(r: &TestRepo, id: &str, accept: &str) -> std::process::Child {
    let wo = r.work_order(order(id, &[accept]));
    let replay = r.replay(&format!("rp-{id}"), &[("1.json", good())]);
    r.spawn_replay(&wo, &replay, &["--json", "--worktree"])
}

/// The pooled worktrees git knows of: (path, lock reason) from `git worktree list --porcelain`.
fn pooled(r: &TestRepo) -> Vec<(String, String)> {
    let list = r.git(&["worktree", "list", "--porcelain"]);
    list.split("\n\n")
        .filter_map(|block| {
            let path = block.lines().find_map(|l| l.strip_prefix("worktree "))?;
            path.contains(".git/factory/worktrees/").then(|| {
                let reason = block
                    .lines()
                    .find_map(|l| l.strip_prefix("locked"))
                    .unwrap_or("<not locked>")
                    .trim()
                    .to_string();
                (path.to_string(), reason)
            })
        })
        .collect()
}

/// Every idle pooled worktree is locked with our reason, detached and `git status` clean.
fn assert_idle_and_clean(r: &TestRepo) {
    for (path, reason) in pooled(r) {
        assert!(reason.contains("git-factory"), "{path}: {reason}");
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(&path)
            .args(["status", "--porcelain", "--untracked-files=all"])
            .output()
            .expect("git");
        assert!(status.stdout.is_empty(), "{path}: {:?}", status);
        let head = std::process::Command::new("git")
            .arg("-C")
            .arg(&path)
            .args(["symbolic-ref", "-q", "HEAD"])
            .output()
            .expect("git");
        assert!(!head.status.success(), "{path} is detached");
    }
}

#[test]
fn git_worktree_prune_and_list_leave_pooled_worktrees_alone_and_they_are_reused() {
    let r = TestRepo::simple();
    let where_file = r.outside.join("where");
    let accept = format!(
        "sh -c 'pwd >> {} && grep -qx TWO app.txt'",
        where_file.display()
    );
    let (code, s) = worktree_run(&r, "wo-a", &accept, &[]);
    assert_eq!(code, Some(0), "{s}");
    let kept = pooled(&r);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_idle_and_clean(&r);
    // git's own prune (also with an expiry of now) keeps it: it is locked.
    r.git(&["worktree", "prune", "--expire", "now"]);
    assert_eq!(pooled(&r), kept);
    // The next run takes the same worktree (no new checkout) and it is still right.
    let (code, s) = worktree_run(&r, "wo-b", &accept, &[]);
    assert_eq!(code, Some(0), "{s}");
    let wheres = std::fs::read_to_string(&where_file).expect("where");
    let wheres: Vec<&str> = wheres.lines().collect();
    assert_eq!(wheres.len(), 2);
    assert_eq!(wheres[0], wheres[1], "the same pooled worktree");
    assert_eq!(pooled(&r), kept);
    assert_idle_and_clean(&r);
    // The user's own tree and HEAD are untouched by all this.
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
}

/// The tree id a check computes of its worktree (every file but `.git`, ignored ones too
/// aside from git's rules): `git add -A` into a scratch index, then `git write-tree`.
fn tree_probe(out: &Path) -> String {
    format!(
        "sh -c 'GIT_INDEX_FILE=$(mktemp) && rm -f \"$GIT_INDEX_FILE\" && export GIT_INDEX_FILE && git add -A && git write-tree >> {} && rm -f \"$GIT_INDEX_FILE\"'",
        out.display()
    )
}

#[cfg(unix)]
fn symlink(target: &str, link: &Path) {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).expect("symlink");
}

#[test]
fn a_pooled_worktree_moved_several_commits_equals_a_fresh_checkout_byte_for_byte() {
    let r = TestRepo::with_files(&[
        ("keep.txt", "same\n"),
        ("change.txt", "old\n"),
        ("gone.txt", "to be deleted\n"),
        ("dir/inner.txt", "inner\n"),
        ("tool.sh", "#!/bin/sh\necho hi\n"),
        ("was_file", "a file that becomes a folder\n"),
    ]);
    symlink("keep.txt", &r.root.join("link"));
    r.git(&["add", "-A"]);
    r.git(&["commit", "-q", "-m", "links"]);
    let probe = r.outside.join("trees");
    r.git(&["config", "factory.verify", &tree_probe(&probe)]);
    let verify = |commit: &str| {
        let out = r
            .factory()
            .args(["verify", "--no-cache", commit])
            .output()
            .expect("verify");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    };
    let first = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    verify(&first);
    let before = pooled(&r);
    assert_eq!(before.len(), 1);
    // Several commits away: content, mode, symlink target, deletion, addition, file→folder.
    r.write("change.txt", "new, longer content\n");
    r.git(&["commit", "-qam", "c1"]);
    std::fs::remove_file(r.root.join("gone.txt")).expect("rm");
    r.git(&["update-index", "--chmod=+x", "keep.txt"]);
    r.git(&["commit", "-qam", "c2"]);
    symlink("dir/inner.txt", &r.root.join("link"));
    std::fs::remove_file(r.root.join("was_file")).expect("rm");
    r.write("was_file/now_inside.txt", "inside\n");
    r.write("added/deep/new.txt", "added\n");
    r.git(&["update-index", "--chmod=-x", "tool.sh"]);
    r.git(&["add", "-A"]);
    r.git(&["commit", "-qm", "c3"]);
    let last = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    verify(&last);
    assert_eq!(pooled(&r), before, "the same pooled worktree was used");
    let trees = std::fs::read_to_string(&probe).expect("probe");
    let trees: Vec<&str> = trees.lines().collect();
    let expect_first = r.git(&["rev-parse", &format!("{first}^{{tree}}")]);
    let expect_last = r.git(&["rev-parse", &format!("{last}^{{tree}}")]);
    assert_eq!(trees, [expect_first.trim(), expect_last.trim()]);
    // And back again, to the first commit.
    verify(&first);
    let trees = std::fs::read_to_string(&probe).expect("probe");
    assert_eq!(trees.lines().last(), Some(expect_first.trim()));
    assert_idle_and_clean(&r);
}

#[test]
fn a_holder_killed_mid_run_leaves_a_worktree_the_next_run_does_not_trust() {
    let r = TestRepo::simple();
    let started = r.outside.join("started");
    let go = r.outside.join("go");
    // The killed run's check leaves an untracked file and an edit in its worktree.
    let accept = format!(
        "sh -c 'echo junk > junk.txt; echo edited >> other.txt; touch {}; while ! test -e {}; do sleep 0.05; done'",
        started.display(),
        go.display()
    );
    let mut child = spawn_worktree_run(&r, "wo-killed", &accept);
    wait_for(&started);
    child.kill().expect("kill -9");
    let _ = child.wait();
    std::fs::write(&go, "").expect("go");
    let left = pooled(&r);
    assert_eq!(left.len(), 1, "{left:?}");
    // The next run is pointed to recover first (SPEC §7), which gives the worktree up.
    let wo = r.work_order(order("wo-next", &["true"]));
    let replay = r.replay("rp-refused", &[("1.json", good())]);
    let refused = r.run_replay(&wo, &replay, &["--worktree"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    assert!(stderr_of(&refused).contains("git factory recover"));
    let rec = r.factory().arg("recover").output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    // The next run gets a worktree without the killed run's leftovers.
    let check = "sh -c 'test ! -e junk.txt && test \"$(cat other.txt)\" = \"keep me\" && grep -qx TWO app.txt'";
    let (code, s) = worktree_run(&r, "wo-next", check, &[]);
    assert_eq!(code, Some(0), "{s}");
    assert_idle_and_clean(&r);
}

#[test]
fn two_processes_never_hold_one_pooled_worktree() {
    let r = TestRepo::simple();
    let go = r.outside.join("go");
    let spawn = |id: &str| {
        let seen = r.outside.join(format!("seen-{id}"));
        let accept = format!(
            "sh -c 'pwd > {}; while ! test -e {}; do sleep 0.05; done'",
            seen.display(),
            go.display()
        );
        (spawn_worktree_run(&r, id, &accept), seen)
    };
    // A pool with one idle worktree first, so both runs want it.
    let (code, s) = worktree_run(&r, "wo-warm", "true", &[]);
    assert_eq!(code, Some(0), "{s}");
    let (a, seen_a) = spawn("wo-a");
    let (b, seen_b) = spawn("wo-b");
    wait_for(&seen_a);
    wait_for(&seen_b);
    let where_a = std::fs::read_to_string(&seen_a).expect("a");
    let where_b = std::fs::read_to_string(&seen_b).expect("b");
    std::fs::write(&go, "").expect("go");
    for child in [a, b] {
        let out = child.wait_with_output().expect("ends");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    }
    assert_ne!(where_a, where_b, "each run holds its own worktree");
    assert!(pooled(&r).len() >= 2);
    assert_idle_and_clean(&r);
}

#[test]
fn candidates_never_see_each_others_files_in_their_pooled_worktrees() {
    let r = TestRepo::simple();
    let seen = r.outside.join("seen");
    // Each check counts the markers it finds (others' would show), then leaves its own.
    let accept = format!(
        "sh -c 'ls marker-* 2>/dev/null | wc -l >> {}; mktemp marker-XXXXXX >/dev/null; grep -qx TWO app.txt'",
        seen.display()
    );
    for round in ["r1", "r2"] {
        let (code, s) = worktree_run(
            &r,
            &format!("wo-{round}"),
            &accept,
            &["--candidates", "3", "--jobs", "3"],
        );
        assert_eq!(code, Some(0), "{s}");
    }
    let counts = std::fs::read_to_string(&seen).expect("seen");
    let counts: Vec<&str> = counts.lines().map(str::trim).collect();
    assert!(counts.len() >= 6, "every candidate checked: {counts:?}");
    assert!(counts.iter().all(|c| *c == "0"), "{counts:?}");
    let kept: Vec<PathBuf> = pooled(&r).into_iter().map(|(p, _)| p.into()).collect();
    assert!(!kept.is_empty() && kept.len() <= 3, "{kept:?}");
    assert_idle_and_clean(&r);
}

#[test]
fn the_pool_keeps_at_most_pool_size_idle_worktrees() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.poolSize", "1"]);
    let (code, s) = worktree_run(&r, "wo-1", "true", &["--candidates", "3", "--jobs", "3"]);
    assert_eq!(code, Some(0), "{s}");
    assert_eq!(pooled(&r).len(), 1, "{:?}", pooled(&r));
    assert_idle_and_clean(&r);
}

#[test]
fn ignored_build_outputs_stay_warm_but_a_changed_git_file_means_a_new_worktree() {
    let r = TestRepo::simple();
    let accept = "sh -c 'mkdir -p build && echo warm > build/out && grep -qx TWO app.txt'";
    let (code, s) = worktree_run(&r, "wo-1", accept, &[]);
    assert_eq!(code, Some(0), "{s}");
    let kept = pooled(&r);
    assert_eq!(kept.len(), 1);
    let tree = PathBuf::from(&kept[0].0);
    // An unsandboxed check's ignored output stays for the next run (SPEC §5).
    assert!(tree.join("build/out").is_file());
    let probe = "sh -c 'test -e build/out && grep -qx TWO app.txt'";
    let (code, s) = worktree_run(&r, "wo-2", probe, &[]);
    assert_eq!(code, Some(0), "reused as it was: {s}");
    // Its .git file changed while idle: it cannot be proven to be ours, so it is replaced.
    let dotgit = tree.join(".git");
    let mut bytes = std::fs::read(&dotgit).expect(".git");
    bytes.extend_from_slice(b"\n");
    std::fs::write(&dotgit, bytes).expect("write");
    let gone = "sh -c 'test ! -e build/out && grep -qx TWO app.txt'";
    let (code, s) = worktree_run(&r, "wo-3", gone, &[]);
    assert_eq!(code, Some(0), "a new worktree: {s}");
    assert_idle_and_clean(&r);
}

/// A script that, run inside a pooled worktree, points the worktree's admin file `commondir`
/// at a fake common dir whose config would run code: `core.fsmonitor` and `core.hooksPath`
/// (hooks git runs on ref updates, index writes, checkouts and commits) all append to
/// `pwned`. Whatever git reads that fake config afterwards runs it.
fn hijacking_script(r: &TestRepo) -> (PathBuf, PathBuf) {
    let pwned = r.outside.join("pwned");
    let fake = r.outside.join("fake-common");
    let script = r.outside.join("hijack.sh");
    let hooks = [
        "reference-transaction",
        "post-index-change",
        "post-checkout",
        "pre-commit",
        "commit-msg",
        "post-commit",
    ];
    std::fs::write(
        &script,
        format!(
            r#"set -e
unset GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
admin=$(cd "$(git rev-parse --git-dir)" && pwd -P)
common=$(cd "$(git rev-parse --git-common-dir)" && pwd -P)
fake='{fake}'
rm -rf "$fake"
git init -q --bare "$fake"
echo "$common/objects" > "$fake/objects/info/alternates"
mkdir -p "$fake/payload-hooks"
for h in {hooks}; do
  printf '#!/bin/sh\necho %s >> "%s"\n' "$h" '{pwned}' > "$fake/payload-hooks/$h"
  chmod +x "$fake/payload-hooks/$h"
done
git --git-dir="$fake" config core.hooksPath "$fake/payload-hooks"
git --git-dir="$fake" config core.fsmonitor "echo fsmonitor >> '{pwned}'; false"
printf '%s\n' "$fake" > "$admin/commondir"
echo "$admin" >> '{pwned}.done'
"#,
            fake = fake.display(),
            pwned = pwned.display(),
            hooks = hooks.join(" "),
        ),
    )
    .expect("write");
    (script, pwned)
}

/// Nothing of the fake config ran, and no pooled worktree is left pointing at it.
fn assert_not_pwned(r: &TestRepo, pwned: &Path) {
    let done = std::fs::read_to_string(pwned.with_extension("done")).unwrap_or_default();
    assert!(!done.is_empty(), "the hijacking script ran to its end");
    let ran = std::fs::read_to_string(pwned).unwrap_or_default();
    assert!(
        ran.is_empty(),
        "the harness's git ran hostile config: {ran}"
    );
    for (path, _) in pooled(r) {
        let admin = std::process::Command::new("git")
            .arg("-C")
            .arg(&path)
            .args(["rev-parse", "--git-dir"])
            .output()
            .expect("git");
        let admin = PathBuf::from(String::from_utf8_lossy(&admin.stdout).trim());
        let admin = if admin.is_absolute() {
            admin
        } else {
            PathBuf::from(&path).join(admin)
        };
        let common = std::fs::read_to_string(admin.join("commondir")).unwrap_or_default();
        assert!(
            !common.contains("fake-common"),
            "{path} still points at the fake: {common}"
        );
    }
}

#[test]
fn a_check_that_hijacks_its_worktrees_commondir_gets_no_code_run_by_the_harness() {
    let r = TestRepo::simple();
    let (script, pwned) = hijacking_script(&r);
    let accept = format!("sh -c 'sh {} && grep -qx TWO app.txt'", script.display());
    let (code, s) = worktree_run(&r, "wo-hijack", &accept, &[]);
    assert_not_pwned(&r, &pwned);
    // The run itself may pass or refuse to commit, but never through the fake repo.
    assert!(matches!(code, Some(0) | Some(1) | Some(2)), "{s}");
    // The next run gets a worktree that is the pool's own again.
    let (code, s) = worktree_run(&r, "wo-after", "grep -qx TWO app.txt", &[]);
    assert_eq!(code, Some(0), "{s}");
    assert_not_pwned(&r, &pwned);
    assert_idle_and_clean(&r);
}

#[test]
fn an_unsandboxed_agent_that_hijacks_its_scratch_commondir_gets_no_code_run_by_the_harness() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.verify", "true"]);
    let (script, pwned) = hijacking_script(&r);
    let agent = r.outside.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "sh {} && sed 's/^two$/TWO/' app.txt > app.new && mv app.new app.txt\n",
            script.display()
        ),
    )
    .expect("write");
    let wo = r.work_order(order("wo-agent-hijack", &["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .args(["run", "--json", "-w"])
        .arg(&wo)
        .arg("--agent-edits")
        .arg(format!("sh {}", agent.display()))
        .output()
        .expect("runs");
    assert_not_pwned(&r, &pwned);
    assert!(out.status.code().is_some(), "{}", stderr_of(&out));
    let (code, s) = worktree_run(&r, "wo-after-agent", "grep -qx TWO app.txt", &[]);
    assert_eq!(code, Some(0), "{s}");
    assert_not_pwned(&r, &pwned);
    assert_idle_and_clean(&r);
}

#[test]
fn prune_removes_idle_pooled_worktrees_but_never_one_a_run_holds() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.poolSize", "4"]);
    // Idle worktrees: a race of two leaves those of its candidates and its own.
    let (code, s) = worktree_run(&r, "wo-warm", "true", &["--candidates", "2", "--jobs", "2"]);
    assert_eq!(code, Some(0), "{s}");
    let idle = pooled(&r).len();
    assert!(idle >= 2, "{:?}", pooled(&r));
    let prune = |args: &[&str]| {
        let out = r.factory().arg("prune").args(args).output().expect("prune");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        stdout_of(&out)
    };
    // Younger than the age: they stay.
    assert!(!prune(&["--older-than", "1h"]).contains("idle worktree"));
    assert_eq!(pooled(&r).len(), idle);
    // A run holds one of them while prune runs.
    let started = r.outside.join("started");
    let go = r.outside.join("go");
    let accept = format!(
        "sh -c 'pwd > {}; while ! test -e {}; do sleep 0.05; done; grep -qx TWO app.txt'",
        started.display(),
        go.display()
    );
    let child = spawn_worktree_run(&r, "wo-held", &accept);
    wait_for(&started);
    let held = std::fs::read_to_string(&started).expect("pwd");
    let held = PathBuf::from(held.trim());
    // --dry-run lists the idle one only and removes nothing.
    let listed = prune(&["--older-than", "0s", "--dry-run"]);
    let others = idle - 1;
    assert_eq!(
        listed.matches("would remove idle worktree").count(),
        others,
        "{listed}"
    );
    assert!(!listed.contains(&held.display().to_string()), "{listed}");
    assert_eq!(pooled(&r).len(), idle);
    let removed = prune(&["--older-than", "0s"]);
    assert_eq!(
        removed.matches("removed idle worktree").count(),
        others,
        "{removed}"
    );
    let left = pooled(&r);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        held.join("app.txt").is_file(),
        "the held worktree is untouched"
    );
    std::fs::write(&go, "").expect("go");
    let out = child.wait_with_output().expect("ends");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_idle_and_clean(&r);
    // Given back, it is idle and goes too.
    let removed = prune(&["--older-than", "0s"]);
    assert_eq!(
        removed.matches("removed idle worktree").count(),
        1,
        "{removed}"
    );
    assert!(pooled(&r).is_empty(), "{:?}", pooled(&r));
    assert!(!held.exists());
}

#[test]
fn a_worktree_race_needs_one_worktree_per_candidate_and_checks_each_change_once() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.poolSize", "4"]);
    let checked = r.outside.join("checked");
    let accept = format!(
        "sh -c 'pwd >> {} && grep -qx TWO app.txt'",
        checked.display()
    );
    let (code, s) = worktree_run(
        &r,
        "wo-race",
        &accept,
        &["--candidates", "2", "--jobs", "2"],
    );
    assert_eq!(code, Some(0), "{s}");
    // Each candidate checked its change once, each in its own worktree; the winner was
    // committed without running the checks a third time.
    let wheres = std::fs::read_to_string(&checked).expect("checked");
    let wheres: Vec<&str> = wheres.lines().collect();
    assert_eq!(wheres.len(), 2, "{wheres:?}");
    assert_ne!(wheres[0], wheres[1]);
    // Two worktrees were enough: the run's own one served a candidate.
    assert_eq!(pooled(&r).len(), 2, "{:?}", pooled(&r));
    let id = s["run_id"].as_str().expect("run id");
    assert_eq!(
        r.git(&["show", &format!("refs/heads/factory/run-{id}:app.txt")]),
        "one\nTWO\nthree\n"
    );
    // The run's attempt records the winner's checks, with their logs where they are.
    let last = s["attempts"]
        .as_array()
        .and_then(|a| a.last())
        .expect("an attempt");
    let acceptance = &last["acceptance"][0];
    assert_eq!(acceptance["exit_code"], 0, "{last}");
    let log = acceptance["stdout_path"].as_str().expect("a log path");
    assert!(log.starts_with("candidate_"), "{log}");
    assert_idle_and_clean(&r);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
}

#[test]
fn a_check_that_stages_deletes_adds_and_chmods_leaves_the_next_run_a_clean_baseline() {
    let r = TestRepo::simple();
    let messy = "sh -c 'git rm -q other.txt && echo new > new.txt && git add new.txt && chmod +x app.txt && echo x >> app.txt && grep -q TWO app.txt'";
    let (code, s) = worktree_run(&r, "wo-messy", messy, &[]);
    assert_eq!(code, Some(0), "{s}");
    assert_idle_and_clean(&r);
    let probe = "sh -c 'test \"$(cat other.txt)\" = \"keep me\" && test ! -e new.txt && test ! -x app.txt && test -z \"$(git status --porcelain --untracked-files=all -- other.txt new.txt)\" && grep -qx TWO app.txt'";
    let (code, s) = worktree_run(&r, "wo-after-messy", probe, &[]);
    assert_eq!(code, Some(0), "{s}");
    assert_idle_and_clean(&r);
}

/// A check that leaves a git lock in its worktree's admin folder (`index.lock`, as a git
/// killed mid-write does) does not poison the pool: that worktree is replaced, and the next
/// runs deliver as ever.
#[test]
fn a_stale_index_lock_left_by_a_check_means_a_new_worktree_not_a_poisoned_one() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.poolSize", "1"]);
    let (code, s) = worktree_run(
        &r,
        "locker",
        "sh -c 'touch \"$(git rev-parse --git-dir)/index.lock\"; exit 1'",
        &["--max-attempts", "1"],
    );
    assert_eq!(code, Some(1), "{s}");
    for round in 0..2 {
        let (code, s) = worktree_run(&r, &format!("after-{round}"), "grep -qx TWO app.txt", &[]);
        assert_eq!(code, Some(0), "round {round}: {s}");
        assert_eq!(s["verdict"], "PASS", "round {round}: {s}");
        assert!(s["result_commit"].as_str().is_some(), "round {round}: {s}");
    }
    assert_idle_and_clean(&r);
    let locks: Vec<_> = std::fs::read_dir(r.root.join(".git/worktrees"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|d| d.path().join("index.lock").exists())
        .map(|d| d.path())
        .collect();
    assert!(locks.is_empty(), "{locks:?}");
}

/// A check that configures its own worktree's git (`git config --worktree`) leaves git files
/// the pool cannot vouch for: the delivery is refused naming that cause, never "not a git
/// repository", and the next run gets a fresh worktree and delivers.
#[test]
fn a_check_that_configures_its_worktree_is_named_and_the_next_run_delivers() {
    let r = TestRepo::simple();
    let (code, s) = worktree_run(
        &r,
        "configurer",
        "sh -c 'git config extensions.worktreeConfig true && git config --worktree core.abbrev 12; grep -qx TWO app.txt'",
        &["--max-attempts", "1"],
    );
    assert_eq!(code, Some(2), "{s}");
    let error = s["error"].as_str().unwrap_or_default();
    assert!(error.contains("own git files"), "{s}");
    assert!(!error.contains("not a git repository"), "{s}");
    r.git(&["config", "--unset", "extensions.worktreeConfig"]);
    let (code, s) = worktree_run(&r, "after", "grep -qx TWO app.txt", &[]);
    assert_eq!(code, Some(0), "{s}");
    assert!(s["result_commit"].as_str().is_some(), "{s}");
}

/// A check that starts a bisect in its worktree (git's state files in the admin folder)
/// leaves no operation in progress to the next holder: that worktree is replaced.
#[test]
fn a_bisect_a_check_started_is_not_handed_to_the_next_run() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.poolSize", "1"]);
    let (code, s) = worktree_run(
        &r,
        "bisector",
        "sh -c 'git bisect start >/dev/null 2>&1; exit 1'",
        &["--max-attempts", "1"],
    );
    assert_eq!(code, Some(1), "{s}");
    let (code, s) = worktree_run(
        &r,
        "after",
        "sh -c 'test ! -e \"$(git rev-parse --git-dir)/BISECT_START\" && grep -qx TWO app.txt'",
        &[],
    );
    assert_eq!(code, Some(0), "{s}");
    assert_idle_and_clean(&r);
}

/// A `factory.poolSize` that is not a number is refused up front, naming the key, with
/// nothing written — once for a whole batch, not once per order.
#[test]
fn a_bad_pool_size_is_refused_up_front_naming_the_key() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.poolSize", "lots"]);
    let before = r.snapshot();
    let a = r.work_order(order("a", &["grep -qx TWO app.txt"]));
    let b = r.work_order(order("b", &["grep -qx TWO app.txt"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let out = r
        .factory()
        .args(["run", "--worktree", "-w"])
        .arg(&a)
        .arg(&b)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("factory.poolSize"), "{stderr}");
    assert!(stderr.contains("the batch was refused"), "{stderr}");
    assert_eq!(stderr.matches("invalid value").count(), 1, "{stderr}");
    assert!(r.run_ids().is_empty(), "{:?}", r.run_ids());
    assert_eq!(r.snapshot(), before);
}

/// A race takes its candidates' worktrees beside the run's own, before the baseline check:
/// when that check refuses the run, the worktrees taken ahead are given back idle and clean
/// (none is left held, none half made), and the user's tree is untouched.
#[test]
fn worktrees_taken_ahead_for_a_refused_race_are_given_back_clean() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.poolSize", "4"]);
    // A contract whose pass_to_pass command fails at the baseline: the baseline check
    // refuses the run after the worktrees were taken.
    let mut refused = order("wo-refused-race", &["true"]);
    refused["pass_to_pass"] = json!(["false"]);
    let wo = r.work_order(refused);
    let replay = r.replay("rp-refused", &[("1.json", good())]);
    let out = r.run_replay(&wo, &replay, &["--candidates", "3", "--jobs", "3"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("the baseline is broken"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(pooled(&r).len(), 3, "{:?} {}", pooled(&r), stderr_of(&out));
    assert_idle_and_clean(&r);
    let idle = std::fs::read_dir(r.root.join(".git/factory/pool"))
        .expect("pool folder")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".idle"))
        .count();
    assert_eq!(idle, 3, "every worktree taken ahead is idle again");
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
    assert!(r.git(&["status", "--porcelain"]).is_empty());
}

/// A repo whose `app.txt` checks out through a smudge filter that notes it started and then
/// takes `seconds`: taking a new pooled worktree pauses in its checkout.
fn slow_checkout(r: &TestRepo, seconds: u32) -> PathBuf {
    let marker = r.outside.join("smudging");
    r.write(".gitattributes", "app.txt filter=slow\n");
    r.git(&["add", ".gitattributes"]);
    r.git(&["commit", "-q", "-m", "slow checkout"]);
    r.git(&[
        "config",
        "filter.slow.smudge",
        &format!("sh -c 'touch {}; sleep {seconds}; cat'", marker.display()),
    ]);
    r.git(&["config", "filter.slow.clean", "cat"]);
    marker
}

fn interrupted_while_taking(flags: &[&str]) {
    let r = TestRepo::simple();
    let marker = slow_checkout(&r, 2);
    let before = r.snapshot();
    let wo = r.work_order(order("pool-sigint", &["true"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut cmd = r.spawn(&["run"]);
    cmd.args(flags)
        .arg("-w")
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // Its own process group, as a shell gives a foreground job: Ctrl-C reaches all of it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().expect("starts");
    wait_for(&marker);
    let group = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process_group(group, rustix::process::Signal::INT).expect("signal");
    let out = child.wait_with_output().expect("ends");
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(130), "{flags:?}: {stderr}");
    assert!(!stderr.contains("error:"), "{flags:?}: {stderr}");
    for id in r.run_ids() {
        let s: Value =
            serde_json::from_str(&r.git(&["show", &format!("refs/factory/{id}:run_summary.json")]))
                .expect("json");
        assert_eq!(s["verdict"], "INTERRUPTED", "{flags:?}: {s:#}");
    }
    assert_eq!(r.snapshot(), before, "{flags:?}");
    assert_idle_and_clean(&r);
    assert!(r.journals().is_empty());
    // Nothing points to recover: the next run goes.
    let next = r.run_replay(&wo, &replay, &["--worktree", "--force"]);
    assert_eq!(
        next.status.code(),
        Some(0),
        "{flags:?}: {}",
        stderr_of(&next)
    );
    assert_idle_and_clean(&r);
}

#[test]
fn ctrl_c_while_a_worktree_run_takes_its_worktree_ends_interrupted() {
    interrupted_while_taking(&["--worktree"]);
}

#[test]
fn ctrl_c_while_a_race_takes_its_worktrees_ends_interrupted() {
    interrupted_while_taking(&["--worktree", "--candidates", "2"]);
}
