//! What model-written checks and model-driven agents leave behind (SPEC §7, §7.1, §3.7): the
//! user's ignored files, the history, the verification cache and the kept bytecode cache must
//! come out of a run as they went in, whatever a command did. Real git, real processes, real
//! python3 where Python is involved; each outcome is what the user sees — verdict, stage,
//! exit code, files byte for byte, refs, side effects.

use crate::common::*;
use serde_json::Value;

const APP: [&str; 3] = ["one", "two", "three"];

fn good() -> String {
    proposal(
        &diff_replace("app.txt", &APP, "two", "TWO"),
        "uppercase two",
    )
}

/// A repo ignoring `*.key`, `.env` and `build/`, whose global verification is `true`.
fn keyed() -> TestRepo {
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        (".gitignore", ".env\nbuild/\n*.key\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    r
}

/// One attempt of the good change with `check` as its acceptance command; the summary.
fn run_check(r: &TestRepo, check: &str, flags: &[&str]) -> (std::process::Output, Value) {
    let wo = r.work_order(basic_order(&[check]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let mut all = vec!["--json", "--max-attempts", "1"];
    all.extend_from_slice(flags);
    let out = r.run_replay(&wo, &replay, &all);
    let summary = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
    (out, summary)
}

fn side_effects(s: &Value) -> Vec<String> {
    s["side_effects"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A check that deletes an ignored key and makes a new file: the kernel gives the new file
/// the key's freed inode number, and a restore that took "same inode, old name gone" for a
/// rename wrote the new file's bytes back as the key.
fn deleted_key_is_not_replaced(flags: &[&str]) {
    let r = keyed();
    for i in 0..4 {
        r.write(&format!("secret{i}.key"), &format!("SECRET-{i}\n"));
    }
    let check = "sh -c 'rm secret0.key && printf attacker > planted.txt && grep -qx TWO app.txt'";
    let (out, s) = run_check(&r, check, flags);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "PASS");
    assert_eq!(r.read("secret0.key"), None, "a deleted key stays deleted");
    for i in 1..4 {
        assert_eq!(
            r.read(&format!("secret{i}.key")),
            Some(format!("SECRET-{i}\n"))
        );
    }
    assert_eq!(r.read("planted.txt"), None);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    let effects = side_effects(&s);
    assert!(
        effects.iter().any(|e| e.starts_with("secret0.key")),
        "the deleted key is named: {effects:?}"
    );
    assert!(effects.iter().any(|e| e == "planted.txt"), "{effects:?}");
}

#[test]
fn a_deleted_ignored_file_is_never_given_another_files_bytes() {
    deleted_key_is_not_replaced(&[]);
}

/// Under `--sandbox` a pre-existing ignored file is read-only (SPEC §7.1): the check cannot
/// delete the key at all, fails, and leaves the key and nothing else behind.
#[test]
fn a_deleted_ignored_file_is_never_given_another_files_bytes_in_the_sandbox() {
    if !bwrap_or_skip() {
        return;
    }
    let r = keyed();
    for i in 0..4 {
        r.write(&format!("secret{i}.key"), &format!("SECRET-{i}\n"));
    }
    let check = "sh -c 'rm secret0.key && printf attacker > planted.txt && grep -qx TWO app.txt'";
    let (out, s) = run_check(&r, check, &["--sandbox"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "FAIL");
    for i in 0..4 {
        assert_eq!(
            r.read(&format!("secret{i}.key")),
            Some(format!("SECRET-{i}\n"))
        );
    }
    assert_eq!(r.read("planted.txt"), None);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
}

#[test]
fn an_ignored_file_a_check_renames_is_moved_back() {
    let r = keyed();
    r.write("secret0.key", "SECRET\n");
    let check = "sh -c 'mv secret0.key moved.txt && grep -qx TWO app.txt'";
    let (out, s) = run_check(&r, check, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(r.read("secret0.key").as_deref(), Some("SECRET\n"));
    assert_eq!(r.read("moved.txt"), None);
    assert_eq!(s["verdict"], "PASS");
}

/// The sealing key of the verification cache exists before the first check of a repo's
/// first run: no command can find it missing and wait for another process to make it.
#[test]
fn the_sealing_key_exists_before_the_first_check() {
    let r = keyed();
    r.git(&[
        "config",
        "factory.verify",
        "sh -c 'test -s \"$(git rev-parse --git-common-dir)/factory/verify-key\"'",
    ]);
    let (out, s) = run_check(&r, "grep -qx TWO app.txt", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "PASS");
}

/// A sandboxed check that waits for the key to appear (made by another git-factory process
/// while it runs) never gets to read it.
#[test]
fn a_sandboxed_check_cannot_wait_for_the_sealing_key_to_appear() {
    if !bwrap_or_skip() {
        return;
    }
    let r = keyed();
    let key = r.root.join(".git/factory/verify-key");
    // Reads the key once it has bytes; fails if it ever could.
    r.git(&[
        "config",
        "factory.verify",
        "sh -c 'touch waiting.txt; i=0; while [ $i -lt 40 ]; do \
         if [ -s .git/factory/verify-key ] && [ $(cat .git/factory/verify-key | wc -c) -ge 32 ]; then exit 1; fi; \
         sleep 0.05; i=$((i+1)); done'",
    ]);
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let replay = r.replay("rp", &[("1.json", good())]);
    let child = r.spawn_replay(
        &wo,
        &replay,
        &["--json", "--sandbox", "--max-attempts", "1"],
    );
    wait_for(&r.root.join("waiting.txt"));
    if !key.exists() {
        // Another git-factory process making the key now, as one making its first seal would.
        std::fs::create_dir_all(key.parent().expect("parent")).expect("mkdir");
        std::fs::write(&key, [7u8; 32]).expect("key");
    }
    let out = child.wait_with_output().expect("ends");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(s["verdict"], "PASS");
    assert_eq!(r.read("waiting.txt"), None);
}

/// What a check plants for the user's next `python3` (a native module, a `.pth`) and a new
/// ignored build folder.
const PLANT: &str = "sh -c 'printf evil > json.cpython-311-x86_64-linux-gnu.so && printf evil > x.pth && mkdir -p build && printf o > build/out.o && grep -qx TWO app.txt'";

#[test]
fn new_files_a_sandboxed_check_made_are_removed_ignored_ones_too() {
    if !bwrap_or_skip() {
        return;
    }
    let r = keyed();
    r.write(".gitignore", ".env\nbuild/\n*.key\n*.so\n*.pth\n");
    r.git(&["commit", "-qam", "ignore more"]);
    r.write(".env", "USER=me\n");
    let before = r.snapshot();
    let (out, s) = run_check(&r, PLANT, &["--sandbox"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "PASS");
    for gone in [
        "json.cpython-311-x86_64-linux-gnu.so",
        "x.pth",
        "build/out.o",
    ] {
        assert_eq!(r.read(gone), None, "{gone} is removed");
    }
    assert!(!r.root.join("build").exists());
    let effects = side_effects(&s);
    for named in ["json.cpython-311-x86_64-linux-gnu.so", "x.pth", "build"] {
        assert!(
            effects.iter().any(|e| e.trim_end_matches('/') == named),
            "{named} is listed: {effects:?}"
        );
    }
    assert_eq!(r.read(".env").as_deref(), Some("USER=me\n"));
    // Only the change is left: baseline + change.
    let mut after = r.snapshot();
    after.files.remove("app.txt");
    let mut was = before;
    was.files.remove("app.txt");
    assert_eq!(after.files, was.files);
}

#[test]
fn new_ignored_files_an_unsandboxed_check_made_stay() {
    let r = keyed();
    r.write(".gitignore", ".env\nbuild/\n*.key\n*.so\n*.pth\n");
    r.git(&["commit", "-qam", "ignore more"]);
    let (out, s) = run_check(&r, PLANT, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "PASS");
    assert_eq!(r.read("build/out.o").as_deref(), Some("o"));
    assert_eq!(r.read("x.pth").as_deref(), Some("evil"));
}
/// `git factory run --agent-edits 'sh SCRIPT'` (unsandboxed unless `extra` says), the agent
/// told where the user's tree is.
fn agent_run(r: &TestRepo, script: &str, extra: &[&str]) -> (std::process::Output, Value) {
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .env("USER_ROOT", &r.root)
        .args(["run", "--json", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--agent-edits")
        .arg(format!(
            "sh -c {}",
            shlex::try_quote(script).expect("quotable")
        ))
        .args(extra)
        .output()
        .expect("runs");
    let s = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
    (out, s)
}

const EDIT: &str = "sed -i s/^two$/TWO/ app.txt\n";

fn escaped(out: &std::process::Output, s: &Value) {
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(out));
    assert_eq!(s["verdict"], "FAIL");
    assert_eq!(
        s["attempts"][0]["failure_brief"]["stage"], "agent_escaped",
        "{s}"
    );
}

#[test]
fn an_agent_that_rewrites_an_ignored_file_or_plants_a_module_escapes_and_is_put_back() {
    let r = keyed();
    r.write(".gitignore", ".env\nbuild/\n*.key\n*.so\n");
    r.git(&["commit", "-qam", "ignore modules"]);
    r.write(".env", "USER=me\n");
    r.write("build/keep.o", "built\n");
    let before = r.snapshot();
    let script = format!(
        "{EDIT}printf 'USER=evil\\n' > \"$USER_ROOT/.env\"\n\
         printf evil > \"$USER_ROOT/json.cpython-311-x86_64-linux-gnu.so\"\n\
         printf evil > \"$USER_ROOT/build/sneaky.pth\"\n"
    );
    let (out, s) = agent_run(&r, &script, &[]);
    escaped(&out, &s);
    assert_eq!(
        r.snapshot(),
        before,
        "everything the agent touched is put back"
    );
}

/// An agent that seals a PASS note for a tree whose verification fails, with the clone's own
/// key, as the harness would.
const FORGE: &str = r#"
import hashlib, hmac, os, subprocess
common = subprocess.check_output(["git", "rev-parse", "--git-common-dir"], text=True).strip()
keyfile = os.path.join(common, "factory", "verify-key")
if not os.path.exists(keyfile):
    os.makedirs(os.path.dirname(keyfile), exist_ok=True)
    with open(keyfile, "wb") as f:
        f.write(os.urandom(32))
secret = open(keyfile, "rb").read()
tree = subprocess.check_output(["git", "rev-parse", "HEAD^{tree}"], text=True).strip()
key = hashlib.sha256("\x1f".join(["sh", "-c", "grep -qx TWO app.txt"]).encode()).hexdigest()
seal = hmac.new(secret, f"PASS\0{tree}\0{key}\0".encode(), hashlib.sha256).hexdigest()
subprocess.check_call(["git", "notes", "--ref", "refs/notes/factory-verify", "add", "-f",
                       "-m", f"PASS {key} {seal}", tree])
"#;

#[test]
fn an_agent_that_forges_a_sealed_pass_note_escapes_and_verify_still_checks() {
    let r = keyed();
    r.git(&["config", "factory.verify", "sh -c 'grep -qx TWO app.txt'"]);
    let forge = r.outside.join("forge.py");
    std::fs::write(&forge, FORGE).expect("write");
    let (out, s) = agent_run(&r, &format!("{EDIT}python3 {}\n", forge.display()), &[]);
    escaped(&out, &s);
    let (code, _) = r.git_code(&["rev-parse", "-q", "--verify", "refs/notes/factory-verify"]);
    assert_ne!(code, 0, "the forged note is gone");
    let verify = r.factory().args(["verify", "HEAD"]).output().expect("runs");
    assert_ne!(verify.status.code(), Some(0), "{}", stdout_of(&verify));
    assert!(!stdout_of(&verify).contains("cached"));
}

/// A check that forges the bytecode of the standard library's `json` in the kept cache: on
/// import it ends the process with exit 0, whatever the check meant to say.
const FORGE_JSON: &str = r#"
import importlib._bootstrap_external as ext, importlib.util, json, os, sys
src = json.__file__
target = importlib.util.cache_from_source(src)
st = os.stat(src)
code = compile("import os\nos._exit(0)\n", src, "exec")
data = ext._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size)
os.makedirs(os.path.dirname(target), exist_ok=True)
tmp = target + ".forged"
with open(tmp, "wb") as f:
    f.write(data)
os.replace(tmp, target)
print("forged", target)
"#;

#[test]
fn forged_standard_library_bytecode_never_reaches_a_later_check() {
    let r = keyed();
    let forge = r.outside.join("forge_json.py");
    std::fs::write(&forge, FORGE_JSON).expect("write");
    let check = format!("python3 {}", forge.display());
    let (out, s) = run_check(&r, &check, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "PASS");
    r.git(&["commit", "-qam", "TWO"]);
    // A tree whose verification fails: it imports json, then exits 1.
    r.git(&[
        "config",
        "factory.verify",
        "python3 -c 'import json, sys; sys.exit(1)'",
    ]);
    let verify = r
        .factory()
        .args(["verify", "--no-cache", "HEAD"])
        .output()
        .expect("runs");
    assert_ne!(
        verify.status.code(),
        Some(0),
        "verify ran the forged json: {}",
        stdout_of(&verify)
    );
    if bwrap_or_skip() {
        let wo = r.work_order(basic_order(&["true"]));
        let back = diff_replace("app.txt", &["one", "TWO", "three"], "TWO", "two");
        let replay = r.replay("rp2", &[("1.json", proposal(&back, "lower"))]);
        let out = r.run_replay(
            &wo,
            &replay,
            &["--json", "--sandbox", "--max-attempts", "1"],
        );
        let s: Value = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        assert_eq!(s["verdict"], "FAIL");
    }
}

/// A check that rewrites in place the kept bytecode of the standard library's `json` (the
/// entry the harness compiled; same file, same name, header kept): writing into an existing
/// file moves neither its folder's change time nor its name, only its own change time.
const FORGE_JSON_IN_PLACE: &str = r#"
import importlib._bootstrap_external as ext, importlib.util, json, os, sys
src = json.__file__
target = importlib.util.cache_from_source(src)
if not os.path.isfile(target):
    print("no kept entry to rewrite", target)
    sys.exit(3)
st = os.stat(src)
code = compile("import os\nos._exit(0)\n", src, "exec")
data = ext._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size)
with open(target, "r+b") as f:
    f.write(data)
    f.truncate()
print("rewrote in place", target)
"#;

#[test]
fn standard_library_bytecode_rewritten_in_place_never_reaches_a_later_check() {
    let r = keyed();
    // The kept cache holds json's entry, compiled again by the harness after a check wrote it
    // (explicitly: the environment may say not to write bytecode).
    let compile_json = "python3 -c 'import json, py_compile; py_compile.compile(json.__file__)'";
    r.git(&["config", "factory.verify", compile_json]);
    let warm = r
        .factory()
        .args(["verify", "--no-cache", "HEAD"])
        .output()
        .expect("runs");
    assert_eq!(warm.status.code(), Some(0), "{}", stderr_of(&warm));
    r.git(&["config", "factory.verify", "true"]);
    let forge = r.outside.join("forge_json_in_place.py");
    std::fs::write(&forge, FORGE_JSON_IN_PLACE).expect("write");
    let check = format!("python3 {}", forge.display());
    let (out, s) = run_check(&r, &check, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "PASS");
    r.git(&["commit", "-qam", "TWO"]);
    // A tree whose verification fails: it imports json, then exits 1.
    let failing = "python3 -c 'import json, sys; sys.exit(1)'";
    r.git(&["config", "factory.verify", failing]);
    let verify = r
        .factory()
        .args(["verify", "--no-cache", "HEAD"])
        .output()
        .expect("runs");
    assert_eq!(
        verify.status.code(),
        Some(1),
        "verify ran the forged json: {}{}",
        stdout_of(&verify),
        stderr_of(&verify)
    );
    // A later run's unsandboxed check fails as it should too.
    r.git(&["config", "factory.verify", "true"]);
    let wo = r.work_order(basic_order(&[failing]));
    let back = diff_replace("app.txt", &["one", "TWO", "three"], "TWO", "two");
    let replay = r.replay("rp2", &[("1.json", proposal(&back, "lower"))]);
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    let s: Value = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "FAIL");
}

/// An agent that deletes every loose object of the repo, then makes its change and commits
/// it (its commit must still make the proposal).
const DESTROY: &str = "rm -rf \"$(git rev-parse --git-common-dir)\"/objects/?? ; \
     sed -i s/^two$/TWO/ app.txt && git add app.txt && \
     git -c user.name=a -c user.email=a@b.invalid commit -qm agent\n";

fn history_intact(r: &TestRepo, head: &str) {
    assert_eq!(r.git(&["rev-parse", "HEAD"]).trim(), head);
    let (code, _) = r.git_code(&["fsck", "--no-dangling", "--connectivity-only"]);
    assert_eq!(code, 0, "every object the history needs is there");
    assert_eq!(r.git(&["show", "HEAD:app.txt"]), "one\ntwo\nthree\n");
}

#[test]
fn a_sandboxed_agent_commits_into_its_own_objects_and_cannot_destroy_the_history() {
    if !bwrap_or_skip() {
        return;
    }
    let r = keyed();
    let head = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    let (out, s) = agent_run(&r, DESTROY, &["--sandbox"]);
    history_intact(&r, &head);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "PASS");
    assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
}
#[test]
fn an_unsandboxed_agent_that_deletes_objects_escapes_and_the_history_is_put_back() {
    let r = keyed();
    // Loose objects only (no pack), as in a young repo.
    let head = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    let (out, s) = agent_run(&r, DESTROY, &[]);
    history_intact(&r, &head);
    escaped(&out, &s);
    assert_eq!(r.read("app.txt").as_deref(), Some("one\ntwo\nthree\n"));
}

/// An agent runs code as a check does: bytecode it planted in the kept cache for a module of
/// the tree (stamped with the real source's size and time, so Python would load it) is gone
/// before any later check runs, so a later honest failing check still fails.
#[test]
fn bytecode_an_agent_plants_in_the_kept_cache_never_reaches_a_later_check() {
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        ("pkg/__init__.py", ""),
        ("pkg/mod.py", "def f():\n    return 1\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    let agent = r.outside.join("agent.py");
    std::fs::write(
        &agent,
        format!(
            "import os, sys, importlib._bootstrap_external as be\n\
             sys.stdin.read()\n\
             src = os.path.abspath('pkg/mod.py'); st = os.stat(src)\n\
             code = compile('def f():\\n    return 2\\n', src, 'exec')\n\
             tgt = os.path.abspath('.git/factory/pycache') + os.path.dirname(src) + '/mod.' + sys.implementation.cache_tag + '.pyc'\n\
             os.makedirs(os.path.dirname(tgt), exist_ok=True)\n\
             open(tgt, 'wb').write(be._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size))\n\
             print(open({:?}).read())\n",
            r.outside.join("answer.json").display().to_string()
        ),
    )
    .expect("write");
    std::fs::write(r.outside.join("answer.json"), good()).expect("write");
    let first = r.work_order(basic_order(&[
        "python3 -c 'import pkg.mod'",
        "grep -qx TWO app.txt",
    ]));
    let out = r
        .factory()
        .args(["run", "--json", "--max-attempts", "1", "-w"])
        .arg(&first)
        .arg("--agent-command")
        .arg(format!("python3 {}", agent.display()))
        .output()
        .expect("runs");
    assert!(out.status.code().is_some(), "{}", stderr_of(&out));
    r.git(&["checkout", "-q", "--", "."]);
    let mut later =
        basic_order(&["python3 -c 'import pkg.mod, sys; sys.exit(0 if pkg.mod.f() == 2 else 1)'"]);
    later["id"] = "wo-later".into();
    let later = r.work_order(later);
    let replay = r.replay("rp", &[("1.json", good())]);
    for flags in [&["--no-sandbox"][..], &["--sandbox"][..]] {
        let mut all = vec!["--json", "--max-attempts", "1", "--force"];
        all.extend(flags);
        let out = r.run_replay(&later, &replay, &all);
        let s: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(s["verdict"], "FAIL", "{flags:?}: {}", stderr_of(&out));
        r.git(&["checkout", "-q", "--", "."]);
    }
}

/// An agent that forges a sealed record under the run id a later run of another work order
/// will have: `refs/factory/<B>` and its seal `.git/factory/made/<B>`, with the clone's own
/// key, as the harness would.
const FORGE_RECORD: &str = r#"
import hashlib, hmac, os, subprocess, sys
run_id = sys.argv[1]
common = subprocess.check_output(["git", "rev-parse", "--git-common-dir"], text=True).strip()
factory = os.path.join(os.path.abspath(common), "factory")
secret = open(os.path.join(factory, "verify-key"), "rb").read()
record = subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
seal = hmac.new(secret, f"RECORD\0{record}\0{run_id}\0".encode(), hashlib.sha256).hexdigest()
os.makedirs(os.path.join(factory, "made"), exist_ok=True)
with open(os.path.join(factory, "made", run_id), "w") as f:
    f.write(f"{record} {seal}\n")
subprocess.check_call(["git", "update-ref", f"refs/factory/{run_id}", record])
"#;

#[test]
fn an_agent_that_forges_a_sealed_record_for_a_later_run_escapes_and_both_are_put_back() {
    for provider in ["--agent-edits", "--agent-command"] {
        let r = keyed();
        // The later run: its id learnt from a first run of it, whose record then goes.
        let mut later = basic_order(&["false"]);
        later["id"] = "wo-later".into();
        let later = r.work_order(later);
        let replay = r.replay("rp-later", &[("1.json", good())]);
        let out = r.run_replay(&later, &replay, &["--json", "--max-attempts", "1"]);
        let s: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let id = s["run_id"].as_str().expect("id").to_string();
        r.git(&["update-ref", "-d", &format!("refs/factory/{id}")]);
        std::fs::remove_file(r.root.join(".git/factory/made").join(&id)).expect("seal");

        let forge = r.outside.join("forge_record.py");
        std::fs::write(&forge, FORGE_RECORD).expect("write");
        std::fs::write(r.outside.join("answer.json"), good()).expect("write");
        let script = format!(
            "python3 {} {id} >&2\n{}",
            forge.display(),
            if provider == "--agent-edits" {
                EDIT.to_string()
            } else {
                format!(
                    "cat >/dev/null; cat {}\n",
                    r.outside.join("answer.json").display()
                )
            }
        );
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        let out = r
            .factory()
            .args(["run", "--json", "--max-attempts", "1", "-w"])
            .arg(&wo)
            .arg(provider)
            .arg(format!(
                "sh -c {}",
                shlex::try_quote(&script).expect("quotable")
            ))
            .output()
            .expect("runs");
        let s: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        escaped(&out, &s);
        let brief = s["attempts"][0]["failure_brief"].to_string();
        assert!(
            brief.contains(&format!("refs/factory/{id}")),
            "{provider}: {brief}"
        );
        let (code, _) = r.git_code(&["rev-parse", "-q", "--verify", &format!("refs/factory/{id}")]);
        assert_ne!(code, 0, "{provider}: the forged record is gone");
        assert!(
            !r.root.join(".git/factory/made").join(&id).exists(),
            "{provider}: the forged seal is gone"
        );
        // The later run runs its checks: nothing is served, nothing committed.
        let head = r.git(&["rev-parse", "HEAD"]);
        let out = r.run_replay(
            &later,
            &replay,
            &["--json", "--max-attempts", "1", "--commit"],
        );
        let s: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{provider}: {}",
            stderr_of(&out)
        );
        assert_eq!(s["verdict"], "FAIL", "{provider}");
        assert_eq!(
            r.git(&["rev-parse", "HEAD"]),
            head,
            "{provider}: nothing committed"
        );
    }
}

/// Under `--sandbox` the sealing key is hidden from the agent: it cannot forge the seal, and
/// nothing of its attempt reaches the records.
#[test]
fn a_sandboxed_agent_cannot_read_the_key_to_forge_a_record() {
    if !bwrap_or_skip() {
        return;
    }
    let r = keyed();
    let forge = r.outside.join("forge_record.py");
    std::fs::write(&forge, FORGE_RECORD).expect("write");
    let witness = r.outside.join("forged");
    let script = format!(
        "python3 {} 0123456789ab && touch {}\n{EDIT}",
        forge.display(),
        witness.display()
    );
    let (out, s) = agent_run(&r, &script, &["--sandbox"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(s["verdict"], "PASS");
    assert!(!witness.exists(), "the forger got through");
    let (code, _) = r.git_code(&["rev-parse", "-q", "--verify", "refs/factory/0123456789ab"]);
    assert_ne!(code, 0);
    assert!(!r.root.join(".git/factory/made/0123456789ab").exists());
}
