//! `show --html` and `report` (SPEC §8): a run as one page, checked in a real headless
//! browser — it loads nothing, logs nothing, is not blank, and renders hostile record text as
//! text.

use crate::common::browser::{self, Loaded};
use crate::common::*;
use serde_json::Value;

const APP: [&str; 3] = ["one", "two", "three"];

fn good() -> String {
    diff_replace("app.txt", &APP, "two", "TWO")
}

fn bad() -> String {
    diff_replace("app.txt", &APP, "two", "zwei")
}

/// A race of three replayed candidates where only the second passes, at its second attempt.
fn race(r: &TestRepo) -> String {
    let dir = r.outside.join("replays");
    for (i, diffs) in [
        (1, vec![bad(), bad()]),
        (2, vec![bad(), good()]),
        (3, vec![bad()]),
    ] {
        let sub = dir.join(i.to_string());
        std::fs::create_dir_all(&sub).expect("mkdir");
        for (n, d) in diffs.iter().enumerate() {
            std::fs::write(sub.join(format!("{}.json", n + 1)), proposal(d, "try")).expect("w");
        }
    }
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = r
        .factory()
        .args(["run", "--json", "--candidates", "3", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&dir)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    s["run_id"].as_str().expect("id").to_string()
}

/// `git factory ARGS` run from a folder outside the repo (`--repo` names it), so pages land
/// there; its stdout.
fn factory_outside(r: &TestRepo, args: &[&str]) -> (i32, String, String) {
    let out = r
        .factory()
        .current_dir(&r.outside)
        .args(args)
        .arg("--repo")
        .arg(&r.root)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        stdout_of(&out),
        stderr_of(&out),
    )
}

fn assert_clean_load(loaded: &Loaded) {
    assert!(loaded.console.is_empty(), "console: {:?}", loaded.console);
    assert!(
        loaded.requests.is_empty(),
        "requests: {:?}",
        loaded.requests
    );
    assert!(
        loaded.ink > 0.02,
        "the page looks blank ({:.4})",
        loaded.ink
    );
}

#[test]
fn a_race_is_one_page_that_loads_nothing_and_shows_every_candidate() {
    let r = TestRepo::simple();
    let id = race(&r);
    let (code, out, err) = factory_outside(&r, &["show", &id, "--html"]);
    assert_eq!(code, 0, "{err}");
    let name = format!("factory-{id}.html");
    assert_eq!(out.trim(), name, "the path is printed");
    let page = r.outside.join(&name);
    let html = std::fs::read_to_string(&page).expect("page written");
    assert!(!html.contains("<script"), "the page has no script");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "links nothing"
    );
    let Some(loaded) = browser::load(&page) else {
        return;
    };
    assert_clean_load(&loaded);
    let dom = &loaded.dom;
    for c in 1..=3 {
        assert!(
            dom.contains(&format!("Candidate {c}")),
            "candidate {c} shown"
        );
    }
    assert!(dom.contains("winner"), "the winner is marked");
    assert!(
        dom.contains("<span class=\"add\">+TWO\n</span>"),
        "the passing diff's added line is coloured"
    );
    assert!(dom.contains("acceptance_failed"), "failed attempts say how");
    assert!(dom.contains("grep -qx TWO app.txt"), "each check is listed");
}

#[test]
fn hostile_record_text_renders_as_text() {
    let r = TestRepo::simple();
    let mut order = basic_order(&[
        "sh -c 'printf \"<script>console.log(2)</script>\\033]0;pwned\\007<img src=x onerror=console.log(3)>\"; exit 1'",
    ]);
    order["title"] = "<script>console.log(1)</script> title".into();
    let wo = r.work_order(order);
    let diff = diff_replace("app.txt", &APP, "two", "<img src=x onerror=console.log(4)>");
    let replay = r.replay(
        "hostile",
        &[(
            "1.json",
            proposal(
                &diff,
                "\u{1b}[2J<iframe src=\"https://example.com\"></iframe>",
            ),
        )],
    );
    let out = r.run_replay(&wo, &replay, &["--json", "--max-attempts", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let id = s["run_id"].as_str().expect("id");
    let (code, _, err) = factory_outside(&r, &["show", id, "--html", "-o", "hostile.html"]);
    assert_eq!(code, 0, "{err}");
    let page = r.outside.join("hostile.html");
    let html = std::fs::read_to_string(&page).expect("written");
    assert!(
        !html.contains('\u{1b}'),
        "no terminal escape reaches the page"
    );
    assert!(html.contains("\\e]0;pwned"), "escapes are shown as text");
    let Some(loaded) = browser::load(&page) else {
        return;
    };
    assert_clean_load(&loaded);
    for element in ["<script", "<img", "<iframe"] {
        assert!(!loaded.dom.contains(element), "{element} became an element");
    }
    assert!(loaded
        .dom
        .contains("&lt;script&gt;console.log(1)&lt;/script&gt; title"));
    assert!(loaded
        .dom
        .contains("&lt;img src=x onerror=console.log(4)&gt;"));
    assert!(loaded
        .dom
        .contains("&lt;iframe src=\"https://example.com\"&gt;"));
}

/// The browser check itself can fail: a page that runs a script and loads an image is seen
/// doing both.
#[test]
fn the_browser_check_sees_a_script_and_a_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><p>x</p><img src=\"http://example.invalid/x.png\">\
         <script>console.error('boom')</script></body></html>",
    )
    .expect("write");
    let Some(loaded) = browser::load(&page) else {
        return;
    };
    assert!(
        loaded.console.iter().any(|l| l.contains("boom")),
        "{:?}",
        loaded.console
    );
    assert!(
        loaded
            .requests
            .iter()
            .any(|l| l.contains("example.invalid")),
        "{:?}",
        loaded.requests
    );
}

#[test]
fn report_lists_runs_as_a_table_and_as_one_page() {
    let r = TestRepo::simple();
    let passed = a_replayed_run_in(&r, &r.root, "first", "grep -qx TWO app.txt", &[], 0);
    r.git(&["checkout", "--", "app.txt"]);
    let failed = a_failing_run_in(&r, &r.root, "second");
    let (code, table, err) = factory_outside(&r, &["report"]);
    assert_eq!(code, 0, "{err}");
    for (id, wo, verdict) in [
        (&passed, "wo-first", "PASS"),
        (&failed, "wo-second", "FAIL"),
    ] {
        let row = table
            .lines()
            .find(|l| l.contains(id.as_str()))
            .unwrap_or_else(|| panic!("{id} listed in\n{table}"));
        assert!(row.contains(wo) && row.contains(verdict), "{row}");
    }
    assert!(table.contains("2 run(s), 1 passed"), "{table}");
    let (code, out, err) = factory_outside(&r, &["report", "--html"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "factory-report.html");
    let page = r.outside.join("factory-report.html");
    let Some(loaded) = browser::load(&page) else {
        return;
    };
    assert_clean_load(&loaded);
    for id in [&passed, &failed] {
        assert!(
            loaded.dom.contains(&format!("href=\"#run-{id}\"")),
            "row links {id}"
        );
        assert!(
            loaded.dom.contains(&format!("id=\"run-{id}\"")),
            "{id}'s section"
        );
    }
}

#[test]
fn report_since_takes_dates_as_git_log_does() {
    let r = TestRepo::simple();
    let id = a_failing_run_in(&r, &r.root, "only");
    let (code, table, err) = factory_outside(&r, &["report", "--since", "1.hour.ago"]);
    assert_eq!(code, 0, "{err}");
    assert!(table.contains(&id), "{table}");
    let (code, _, err) = factory_outside(&r, &["report", "--since", "2099-06-01"]);
    assert_eq!(code, 2, "nothing that recent");
    assert!(err.contains("error: no runs to report"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    let (code, _, err) = factory_outside(&r, &["report", &id, "--since", "1.day.ago"]);
    assert_eq!(code, 2, "runs and --since do not combine: {err}");
}

#[test]
fn show_html_refuses_a_folder_as_its_file() {
    let r = TestRepo::simple();
    let id = a_failing_run_in(&r, &r.root, "f");
    let (code, _, err) = factory_outside(&r, &["show", &id, "--html", "-o", "."]);
    assert_eq!(code, 2);
    assert!(
        err.contains("is a folder") && err.contains("hint:"),
        "{err}"
    );
}

/// A fix of the red test that breaks another one, judged per test by real pytest: the page
/// lists the broken test first with its status before and after and the assertion that failed.
#[test]
fn the_per_test_table_shows_what_broke_with_its_assertion() {
    let calc = "def absolute(x):\n    return x\n";
    let tests = "from calc import absolute\n\n\ndef test_negative():\n    assert absolute(-3) == 3\n\n\ndef test_zero():\n    assert absolute(0) == 0\n";
    let r = TestRepo::with_files(&[("calc.py", calc), ("tests/test_calc.py", tests)]);
    r.git(&["config", "factory.verify", "true"]);
    let broken = "def absolute(x):\n    return -x if x < 0 else x + 1\n";
    let diff = format!(
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def absolute(x):\n-    return x\n+{}\n",
        broken.lines().nth(1).unwrap_or_default()
    );
    let answer = r.outside.join("answer.json");
    std::fs::write(&answer, proposal(&diff, "fix negatives")).expect("write");
    let wo = r.work_order(serde_json::json!({
        "id": "abs", "title": "absolute", "intent": "absolute(-3) is 3",
        "allowed_files": ["calc.py"],
        "fail_to_pass": ["python -m pytest -q tests/test_calc.py"],
        "acceptance_commands": [],
    }));
    let out = r
        .factory()
        .args(["run", "--json", "--max-attempts", "1", "--agent-command"])
        .arg(format!("cat {}", answer.display()))
        .arg("-w")
        .arg(&wo)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let s: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    let id = s["run_id"].as_str().expect("id");
    let (code, _, err) = factory_outside(&r, &["show", id, "--html", "-o", "tests.html"]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(r.outside.join("tests.html")).expect("page");
    let row = html
        .split("<tr>")
        .find(|row| row.contains("tests/test_calc.py::test_zero"))
        .unwrap_or_else(|| panic!("test_zero listed:\n{html}"));
    assert!(row.contains("<td>passed</td>"), "passed before: {row}");
    assert!(row.contains(">failed"), "failed after: {row}");
    assert!(row.contains("assert 1 == 0"), "its assertion: {row}");
    let first = html.find("test_zero").expect("zero");
    let green = html
        .find("tests/test_calc.py::test_negative")
        .expect("negative");
    assert!(first < green, "what broke comes first");
    let Some(loaded) = browser::load(&r.outside.join("tests.html")) else {
        return;
    };
    assert_clean_load(&loaded);
}
