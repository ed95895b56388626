//! Runs, `push` and `fetch` in shallow clones (`git clone --depth 1`, as CI checks out), and
//! the example workflow's own run-and-push steps (examples/github-actions/factory-orders.sh)
//! executed in them.

use crate::common::*;
use std::path::{Path, PathBuf};

const APP: [&str; 3] = ["one", "two", "three"];

pub(crate) fn git_ok(r: &TestRepo, dir: &Path, args: &[&str]) -> String {
    let out = in_dir(r, dir, "git", args);
    assert!(out.status.success(), "git {args:?}: {}", stderr_of(&out));
    stdout_of(&out)
}

/// `git clone --depth 1 file://BARE NAME` in the temp dir, set up to run work orders.
pub(crate) fn shallow_clone(r: &TestRepo, bare: &Path, name: &str) -> PathBuf {
    let dir = r.tmp.path().join(name);
    let url = format!("file://{}", bare.display());
    let out = in_dir(
        r,
        r.tmp.path(),
        "git",
        &[
            "clone",
            "-q",
            "--depth",
            "1",
            &url,
            dir.to_str().expect("utf8"),
        ],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(
        git_ok(r, &dir, &["rev-parse", "--is-shallow-repository"]).trim(),
        "true"
    );
    git_ok(r, &dir, &["config", "factory.verify", "true"]);
    dir
}

/// A commit on `main` in the TestRepo, pushed to origin: history a depth-1 clone lacks.
fn advance_main(r: &TestRepo, file: &str) {
    r.write(file, &format!("{file}\n"));
    r.git(&["add", file]);
    r.git(&["commit", "-q", "-m", file]);
    r.git(&["push", "-q", "origin", "main"]);
}

/// A passing in-situ run (two → TWO, accepted by grep) of `wo-<name>` in `dir`; the change is
/// taken back out of the tree after. Returns the run id.
fn a_passing_run_in(r: &TestRepo, dir: &Path, name: &str) -> String {
    let id = a_replayed_run_in(r, dir, name, "grep -qx TWO app.txt", &[], 0);
    git_ok(r, dir, &["checkout", "--", "."]);
    id
}

fn factory_ok(r: &TestRepo, dir: &Path, args: &[&str]) -> std::process::Output {
    let out = in_dir(r, dir, "factory", args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "git factory {args:?}: {}",
        stderr_of(&out)
    );
    out
}

#[test]
fn runs_push_and_fetch_work_in_depth_1_clones() {
    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    advance_main(&r, "second.txt");
    let first = shallow_clone(&r, &bare, "first");
    let pass = a_passing_run_in(&r, &first, "pass");
    let fail = a_failing_run_in(&r, &first, "fail");
    let out = factory_ok(&r, &first, &["push"]);
    assert_eq!(
        stderr_of(&out),
        "pushed 2 runs and the merged notes (origin)\n"
    );

    // Main moves on; a later depth-1 clone does not hold the commit the runs started from.
    advance_main(&r, "third.txt");
    let second = shallow_clone(&r, &bare, "second");
    let baseline = git_ok(&r, &first, &["rev-parse", "HEAD"]);
    let present = in_dir(
        &r,
        &second,
        "git",
        &["cat-file", "-e", &format!("{}^{{commit}}", baseline.trim())],
    );
    assert!(
        !present.status.success(),
        "the runs' baseline is not in the new clone"
    );
    let out = factory_ok(&r, &second, &["fetch"]);
    assert_eq!(
        stderr_of(&out),
        "fetched 2 runs and the merged notes (origin)\n"
    );
    let log = stdout_of(&factory_ok(&r, &second, &["log", "--no-pager"]));
    assert!(log.contains(&pass) && log.contains(&fail), "{log}");
    assert!(
        log.contains("PASS") && log.contains("FAIL"),
        "both verdicts listed: {log}"
    );
    let show = stdout_of(&factory_ok(
        &r,
        &second,
        &["show", "--no-pager", &pass, "--patch"],
    ));
    assert!(show.contains("+TWO") && show.contains("-two"), "{show}");
    let show = stdout_of(&factory_ok(&r, &second, &["show", "--no-pager", &fail]));
    assert!(show.contains("wo-fail"), "{show}");
    let notes = git_ok(
        &r,
        &second,
        &["notes", "--ref=factory", "show", baseline.trim()],
    );
    assert!(
        notes.contains(&format!("factory {pass} PASS wo-pass attempts=1"))
            && notes.contains(&format!("factory {fail} FAIL wo-fail attempts=1")),
        "{notes}"
    );

    // The new clone's own run lands beside them, and the first clone takes it in.
    let third = a_failing_run_in(&r, &second, "later");
    let out = factory_ok(&r, &second, &["push"]);
    assert_eq!(
        stderr_of(&out),
        "pushed 1 run and the merged notes (origin)\n"
    );
    let out = factory_ok(&r, &first, &["fetch"]);
    assert_eq!(
        stderr_of(&out),
        "fetched 1 run and the merged notes (origin)\n"
    );
    let log = stdout_of(&factory_ok(&r, &first, &["log", "--no-pager"]));
    assert!(log.contains(&third), "{log}");
    for dir in [&first, &second] {
        assert_eq!(
            git_ok(&r, dir, &["rev-parse", "--is-shallow-repository"]).trim(),
            "true",
            "still shallow: no history was pulled in to share records"
        );
        assert_eq!(git_ok(&r, dir, &["status", "--porcelain"]), "");
    }
}

#[test]
fn a_push_to_a_remote_without_the_history_below_the_cut_is_refused_naming_the_fix() {
    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    advance_main(&r, "second.txt");
    let clone = shallow_clone(&r, &bare, "clone");
    let id = a_failing_run_in(&r, &clone, "cut");
    // A second, empty remote for the records only: it has none of the code's history.
    let records = r.tmp.path().join("records.git");
    git_ok(
        &r,
        r.tmp.path(),
        &["init", "-q", "--bare", records.to_str().expect("utf8")],
    );
    let url = records.to_str().expect("utf8");
    let out = in_dir(&r, &clone, "factory", &["push", url]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.starts_with(&format!(
            "error: push to {url}: refs/factory/{id} refused: this clone is shallow and {url} does not have the history the runs start from\n"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "not sent: refs/factory/{id} [remote rejected] (shallow update not allowed)"
        )),
        "{err}"
    );
    assert!(err.contains("git fetch --unshallow"), "{err}");
    assert!(err.contains("receive.shallowUpdate true"), "{err}");
    assert!(!err.contains("nothing was changed"), "{err}");

    // A remote that takes shallow pushes holds the record with its history cut.
    git_ok(&r, &records, &["config", "receive.shallowUpdate", "true"]);
    let out = factory_ok(&r, &clone, &["push", url]);
    assert_eq!(stderr_of(&out), format!("pushed 1 run ({url})\n"));

    // A remote that takes shallow pushes from the start gets the record and the notes in one
    // push (git's receive-pack leaves the notes unreported in the round that brings the cut
    // history; they land in the next).
    let fresh = r.tmp.path().join("fresh.git");
    git_ok(
        &r,
        r.tmp.path(),
        &["init", "-q", "--bare", fresh.to_str().expect("utf8")],
    );
    git_ok(&r, &fresh, &["config", "receive.shallowUpdate", "true"]);
    let fresh_url = fresh.to_str().expect("utf8");
    let out = factory_ok(&r, &clone, &["push", fresh_url]);
    assert_eq!(
        stderr_of(&out),
        format!("pushed 1 run and the merged notes ({fresh_url})\n")
    );
    let notes = git_ok(&r, &fresh, &["notes", "--ref=factory", "list"]);
    assert_eq!(notes.lines().count(), 1, "{notes}");

    // Another shallow clone, made after main moved on, so it lacks the commit the run started
    // from, takes it in (git adds the remote's cut to its own) ...
    advance_main(&r, "third.txt");
    let other = shallow_clone(&r, &bare, "other");
    let baseline = git_ok(&r, &clone, &["rev-parse", "HEAD"]);
    let shallow_before = std::fs::read_to_string(other.join(".git/shallow")).expect("shallow");
    assert!(!shallow_before.contains(baseline.trim()));
    let out = factory_ok(&r, &other, &["fetch", url]);
    assert_eq!(
        stderr_of(&out),
        format!("fetched 1 run and the merged notes ({url})\n")
    );
    let show = stdout_of(&factory_ok(&r, &other, &["show", "--no-pager", &id]));
    assert!(show.contains("wo-cut"), "{show}");
    let log = stdout_of(&factory_ok(&r, &other, &["log", "--no-pager"]));
    assert!(log.contains(&id), "{log}");
    let shallow_after = std::fs::read_to_string(other.join(".git/shallow")).expect("shallow");
    assert!(
        shallow_after.contains(baseline.trim()),
        "the run's baseline is a cut point here too: {shallow_after}"
    );

    // ... and a full clone that lacks that history is not made shallow: the run is named,
    // not dropped in silence.
    let full = r.tmp.path().join("unrelated");
    git_ok(
        &r,
        r.tmp.path(),
        &["init", "-q", "-b", "main", full.to_str().expect("utf8")],
    );
    git_ok(
        &r,
        &full,
        &["commit", "-q", "--allow-empty", "-m", "unrelated"],
    );
    let out = factory_ok(&r, &full, &["fetch", url]);
    assert!(
        stderr_of(&out).contains(&format!(
            "warning: skipped {url}'s run {id}: its history is cut off there (a shallow remote) and this clone is not shallow"
        )),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(
        git_ok(&r, &full, &["rev-parse", "--is-shallow-repository"]).trim(),
        "false"
    );
    assert_eq!(
        git_ok(
            &r,
            &full,
            &["for-each-ref", "--format=%(refname)", "refs/factory/"]
        ),
        ""
    );
}

/// The example workflow, as a team copies it.
pub(crate) fn example(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/github-actions")
        .join(file)
}

/// `bash factory-orders.sh ARGS` in `dir`, with the binary on PATH as `git factory` finds it.
pub(crate) fn orders_script(
    r: &TestRepo,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::process::Command {
    let bin = assert_cmd::cargo::cargo_bin("git-factory");
    let path = format!(
        "{}:{}",
        bin.parent().expect("dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", &r.home)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("NO_COLOR", "1")
        .env("PATH", path)
        .env_remove("OPENAI_API_KEY")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("FACTORY_ORDERS")
        .env_remove("FACTORY_JOBS")
        .envs(env.iter().copied())
        .arg(example("factory-orders.sh"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Work orders `orders/<name>.json` committed on main and pushed: each turns two into TWO and
/// accepts it with `check` (so `grep -qx TWO app.txt` passes and `false` fails).
pub(crate) fn commit_orders(r: &TestRepo, orders: &[(&str, &str)]) {
    for (name, check) in orders {
        let mut order = basic_order(&[check]);
        order["id"] = format!("wo-{}", name.replace(' ', "-")).into();
        r.write(
            &format!("orders/{name}.json"),
            &serde_json::to_string_pretty(&order).expect("json"),
        );
    }
    r.git(&["add", "orders"]);
    r.git(&["commit", "-q", "-m", "orders"]);
    r.git(&["push", "-q", "origin", "main"]);
}

/// The replay folder every order of the example runs with: attempt 1 turns two into TWO.
pub(crate) fn two_to_upper(r: &TestRepo) -> PathBuf {
    r.replay(
        "rp-orders",
        &[(
            "1.json",
            proposal(&diff_replace("app.txt", &APP, "two", "TWO"), "upper"),
        )],
    )
}

#[test]
fn the_example_workflows_steps_run_and_push_from_shallow_clones() {
    // The workflow's run: lines call the script this test runs, with the same arguments.
    let workflow = std::fs::read_to_string(example("factory.yml")).expect("workflow");
    for line in [
        "run: bash .github/workflows/factory-orders.sh plan >> \"$GITHUB_OUTPUT\"",
        "run: bash .github/workflows/factory-orders.sh shard \"$SHARD\" \"$SHARDS\" --llm-model \"$FACTORY_MODEL\"",
        "shard: ${{ fromJSON(needs.plan.outputs.shards) }}",
        "SHARDS: ${{ strategy.job-total }}",
    ] {
        assert!(workflow.contains(line), "factory.yml lost: {line}");
    }

    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    let pass = "grep -qx TWO app.txt";
    commit_orders(
        &r,
        &[("a", pass), ("b", pass), ("c", "false"), ("d name", pass)],
    );
    let replay = two_to_upper(&r);
    let replay = replay.to_str().expect("utf8");

    let plan = shallow_clone(&r, &bare, "plan");
    for (jobs, want) in [("8", "shards=[0,1,2,3]\n"), ("2", "shards=[0,1]\n")] {
        let out = orders_script(&r, &plan, &["plan"], &[("FACTORY_JOBS", jobs)])
            .output()
            .expect("bash");
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        assert_eq!(stdout_of(&out), want);
    }
    let out = orders_script(&r, &plan, &["plan"], &[("FACTORY_ORDERS", "none/*.json")])
        .output()
        .expect("bash");
    assert_eq!(stdout_of(&out), "shards=[]\n");

    // Two jobs of the matrix: shard 0 takes a and c (c fails), shard 1 takes b and "d name".
    let mut codes = Vec::new();
    for shard in ["0", "1"] {
        let job = shallow_clone(&r, &bare, &format!("job{shard}"));
        let out = orders_script(
            &r,
            &job,
            &[
                "shard",
                shard,
                "2",
                "--max-attempts",
                "1",
                "--replay",
                replay,
            ],
            &[],
        )
        .output()
        .expect("bash");
        let err = stderr_of(&out);
        codes.push(out.status.code());
        assert!(
            err.ends_with("and the merged notes (origin)\n"),
            "shard {shard} pushed its records: {err}"
        );
        assert_eq!(
            git_ok(&r, &job, &["status", "--porcelain"]),
            "",
            "shard {shard}: runs in worktrees leave the checkout as it was"
        );
    }
    assert_eq!(codes, vec![Some(1), Some(0)], "a FAIL fails its job only");

    // Every record met in origin: four runs, four note lines on the commit they ran on.
    let refs = git_ok(
        &r,
        &bare,
        &["for-each-ref", "--format=%(refname)", "refs/factory/"],
    );
    assert_eq!(refs.lines().count(), 4, "{refs}");
    let notes = git_ok(&r, &bare, &["notes", "--ref=factory", "show", "main"]);
    for (id, verdict) in [
        ("wo-a", "PASS"),
        ("wo-b", "PASS"),
        ("wo-c", "FAIL"),
        ("wo-d-name", "PASS"),
    ] {
        assert!(
            notes
                .lines()
                .any(|l| l.contains(&format!(" {verdict} {id} attempts=1"))),
            "{id}: {notes}"
        );
    }
    assert_eq!(notes.lines().count(), 4, "{notes}");

    // Wrong use is refused by the script itself.
    for args in [&["shard", "2", "2"][..], &["shard", "x", "2"], &["nope"]] {
        let out = orders_script(&r, &plan, args, &[]).output().expect("bash");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
