//! Fleets (SPEC §5.2): the example GitHub Actions workflow passes the real `actionlint` and
//! `zizmor` (and a planted bad one fails them), and shallow clones running its steps at once,
//! each running work orders and pushing to one bare remote, all land every run and note line.

use crate::common::*;
use crate::shallow::{commit_orders, example, git_ok, orders_script, shallow_clone, two_to_upper};
use std::collections::BTreeSet;
use std::path::Path;

/// Whether `tool` is on PATH; off CI a test that needs it is skipped (`.ci/run` installs it).
pub(crate) fn tool_or_skip(tool: &str) -> bool {
    let found = std::process::Command::new(tool)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{tool} is missing on CI (.ci/run installs it)"
    );
    eprintln!("{tool} is not installed; skipping (.ci/run installs it under target/ci-tools)");
    false
}

/// `tool ARGS… FILE` → (exit code, stdout and stderr).
pub(crate) fn check(tool: &str, args: &[&str], file: &Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(tool)
        .args(args)
        .arg(file)
        .env("NO_COLOR", "1")
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("runs");
    (
        out.status.code(),
        format!("{}{}", stdout_of(&out), stderr_of(&out)),
    )
}

/// The shipped workflow with `from` replaced by `to` (which must be there), written to `dir`.
fn planted(dir: &Path, name: &str, from: &str, to: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(example("factory.yml")).expect("workflow");
    assert!(
        text.contains(from),
        "factory.yml has no {from:?} to plant into"
    );
    let path = dir.join(name);
    std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
    path
}

const CHECKOUT: &str = "actions/checkout@de0fac2e4500dabe0009e67214ff5f5447ce83dd # v6.0.2";
const RUN_LINE: &str = "run: bash .github/workflows/factory-orders.sh shard \"$SHARD\" \"$SHARDS\"";

#[test]
fn actionlint_passes_the_example_workflow_and_fails_a_broken_one() {
    if !tool_or_skip("actionlint") {
        return;
    }
    let (code, said) = check("actionlint", &[], &example("factory.yml"));
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(said, "");

    // It is rhysd's checker: it reads expressions, job graphs and sections.
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, from, to, finding) in [
        (
            "needs.yml",
            "needs: plan",
            "needs: planner",
            "job \"run\" needs job \"planner\" which does not exist in this workflow",
        ),
        (
            "context.yml",
            "${{ steps.split.outputs.shards }}",
            "${{ steps.splat.outputs.shards }}",
            "property \"splat\" is not defined",
        ),
        (
            "runs-on.yml",
            "    runs-on: ubuntu-latest\n    timeout-minutes: 60",
            "    timeout-minutes: 60",
            "\"runs-on\" section is missing in job \"run\"",
        ),
    ] {
        let bad = planted(dir.path(), name, from, to);
        let (code, said) = check("actionlint", &[], &bad);
        assert_eq!(code, Some(1), "{name}: {said}");
        assert!(said.contains(finding), "{name}: {said}");
    }
}

#[test]
fn zizmor_passes_the_example_workflow_and_fails_insecure_ones() {
    if !tool_or_skip("zizmor") {
        return;
    }
    let (code, said) = check("zizmor", &["--offline"], &example("factory.yml"));
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("No findings to report"), "{said}");

    let dir = tempfile::tempdir().expect("tempdir");
    for (name, from, to, audit) in [
        // Untrusted text in a run: line.
        (
            "injection.yml",
            RUN_LINE,
            "run: echo \"${{ github.event.head_commit.message }}\" && bash .github/workflows/factory-orders.sh shard \"$SHARD\" \"$SHARDS\"",
            "template-injection",
        ),
        // An action by a tag anyone with the repo's keys can move.
        ("unpinned.yml", CHECKOUT, "actions/checkout@v6", "unpinned-uses"),
        // The checkout's token left in .git/config.
        (
            "credentials.yml",
            "        with:\n          persist-credentials: false\n      - name: install",
            "      - name: install",
            "artipacked",
        ),
        // Secrets for code from forks.
        (
            "target.yml",
            "on:\n  workflow_dispatch:",
            "on:\n  pull_request_target:\n  workflow_dispatch:",
            "dangerous-triggers",
        ),
    ] {
        let bad = planted(dir.path(), name, from, to);
        let (code, said) = check("zizmor", &["--offline"], &bad);
        assert_ne!(code, Some(0), "{name}: {said}");
        assert!(said.contains(audit), "{name}: {said}");
    }
}

/// Every run ref and every line of the notes on `rev` in the bare remote.
fn remote_state(r: &TestRepo, bare: &Path, rev: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let runs = git_ok(
        r,
        bare,
        &[
            "for-each-ref",
            "--format=%(refname:lstrip=2)",
            "refs/factory/",
        ],
    )
    .lines()
    .map(str::to_string)
    .collect();
    let lines = git_ok(r, bare, &["notes", "--ref=factory", "show", rev])
        .lines()
        .map(str::to_string)
        .collect();
    (runs, lines)
}

/// A fleet on one machine: each round commits `JOBS` new work orders, makes `JOBS` fresh
/// depth-1 clones (one per job of the matrix), and starts the workflow's shard step in all of
/// them at once — each runs its order and pushes to the one bare remote while the others do.
/// Every run ref and every note line of every round arrives; no process is left.
#[test]
fn shallow_clones_running_and_pushing_at_once_land_every_run_and_note_line() {
    const JOBS: usize = 6;
    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    let replay = two_to_upper(&r);
    let replay = replay.to_str().expect("utf8");
    let mut runs = BTreeSet::new();
    for round in 0..3 {
        let names: Vec<String> = (0..JOBS).map(|j| format!("r{round}j{j}")).collect();
        let orders: Vec<(&str, &str)> = names
            .iter()
            .enumerate()
            .map(|(j, n)| {
                (
                    n.as_str(),
                    if j % 3 == 2 {
                        "false"
                    } else {
                        "grep -qx TWO app.txt"
                    },
                )
            })
            .collect();
        commit_orders(&r, &orders);
        let baseline = r.git(&["rev-parse", "HEAD"]).trim().to_string();
        let jobs: Vec<_> = (0..JOBS)
            .map(|j| shallow_clone(&r, &bare, &format!("round{round}-job{j}")))
            .collect();
        let pattern = format!("orders/r{round}j*.json");
        let start = std::time::Instant::now();
        let children: Vec<_> = jobs
            .iter()
            .enumerate()
            .map(|(j, dir)| {
                orders_script(
                    &r,
                    dir,
                    &[
                        "shard",
                        &j.to_string(),
                        &JOBS.to_string(),
                        "--max-attempts",
                        "1",
                        "--replay",
                        replay,
                    ],
                    &[("FACTORY_ORDERS", pattern.as_str())],
                )
                .spawn()
                .expect("bash")
            })
            .collect();
        let mut lines = BTreeSet::new();
        for (j, child) in children.into_iter().enumerate() {
            let out = child.wait_with_output().expect("wait");
            let err = stderr_of(&out);
            let want = if j % 3 == 2 { 1 } else { 0 };
            assert_eq!(
                out.status.code(),
                Some(want),
                "round {round}, job {j}: {err}"
            );
            assert!(
                err.ends_with("pushed 1 run and the merged notes (origin)\n"),
                "round {round}, job {j}: {err}"
            );
            let verdict = if want == 0 { "PASS" } else { "FAIL" };
            let line = err
                .lines()
                .find(|l| l.starts_with(&format!("{verdict} ")))
                .unwrap_or_else(|| panic!("round {round}, job {j}: no verdict line: {err}"));
            let id = line.split_whitespace().nth(1).expect("run id").to_string();
            lines.insert(format!("factory {id} {verdict} wo-{} attempts=1", names[j]));
            runs.insert(id);
        }
        eprintln!(
            "round {round}: {JOBS} shallow clones ran and pushed at once, all landed in {:.2} s",
            start.elapsed().as_secs_f64()
        );
        let (remote_runs, remote_lines) = remote_state(&r, &bare, &baseline);
        assert_eq!(remote_runs, runs, "round {round}: every run ref arrived");
        assert_eq!(
            remote_lines, lines,
            "round {round}: every note line arrived"
        );
    }
    assert_eq!(processes_in(r.tmp.path(), true), Vec::<String>::new());
}
