//! Confinement (SPEC §7.1) tried as an attacker would, part A: what a confined command can
//! reach besides files — the scratch worktree's admin folder, other processes, unix sockets —
//! and what the sandbox itself leaves or says. Each case runs under bubblewrap, under Landlock,
//! and under `auto` with a bubblewrap first on `PATH` that fails as Ubuntu 24.04's does.

use crate::common::*;
use crate::sandbox::{broken_bwrap, ways, with_path_first, Way};
use assert_cmd::Command;
use serde_json::Value;

/// `git factory` confined the given way (`GIT_CONFIG_PARAMETERS` names the backend).
fn factory_in(r: &TestRepo, way: Way) -> Command {
    let mut cmd = r.factory();
    let backend = match way {
        Way::Bwrap => "bwrap",
        Way::Landlock => "landlock",
        Way::AutoBrokenBwrap => {
            cmd.env("PATH", with_path_first(&broken_bwrap(r)));
            "auto"
        }
    };
    cmd.env(
        "GIT_CONFIG_PARAMETERS",
        format!("'factory.sandboxBackend'='{backend}'"),
    );
    cmd
}

/// `git factory run --sandbox --agent-edits 'sh -c SCRIPT'`, confined the given way.
fn agent_run(r: &TestRepo, way: Way, script: &str) -> (std::process::Output, Value) {
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = factory_in(r, way)
        .args(["run", "--sandbox", "--json", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--agent-edits")
        .arg(format!(
            "sh -c {}",
            shlex::try_quote(script).expect("quotable")
        ))
        .output()
        .expect("runs");
    let s = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
    (out, s)
}

/// The files of every linked worktree's admin folder that name where its git looks.
fn admin_files(r: &TestRepo) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(r.root.join(".git/worktrees")) else {
        return out;
    };
    for d in dirs.flatten() {
        for f in ["commondir", "gitdir", "HEAD", "config.worktree"] {
            if let Ok(bytes) = std::fs::read(d.path().join(f)) {
                out.push((format!("{}/{f}", d.file_name().to_string_lossy()), bytes));
            }
        }
    }
    out
}

/// An agent that tries to re-point its scratch worktree — the admin folder's files under the
/// common `.git`, found through the tree's `.git` file, and that file itself — then makes its
/// change and commits it (its commit must still work).
const REPOINT: &str = "admin=$(sed -n 's/^gitdir: //p' \"$(git rev-parse --show-toplevel)/.git\"); \
     for f in commondir gitdir HEAD config.worktree; do printf evil > \"$admin/$f\" 2>/dev/null; done; \
     printf 'gitdir: /nowhere\\n' > \"$(git rev-parse --show-toplevel)/.git\" 2>/dev/null; \
     sed -i s/^two$/TWO/ app.txt && git add app.txt && \
     git -c user.name=a -c user.email=a@b.invalid commit -qm agent\n";

#[test]
fn a_sandboxed_agent_commits_but_cannot_repoint_its_worktrees_admin_folder() {
    for way in ways() {
        let r = TestRepo::simple();
        let (out, s) = agent_run(&r, way, REPOINT);
        assert_eq!(
            s["verdict"],
            "PASS",
            "{way:?}: {}\n{}",
            stderr_of(&out),
            stdout_of(&out)
        );
        assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
        let files = admin_files(&r);
        assert!(!files.is_empty(), "{way:?}: the pool keeps its worktree");
        for (name, bytes) in files {
            assert!(
                !bytes.windows(4).any(|w| w == b"evil"),
                "{way:?}: {name} was rewritten"
            );
        }
        let (code, _) = r.git_code(&["worktree", "list"]);
        assert_eq!(code, 0);
    }
}
