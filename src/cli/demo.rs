//! `git factory demo [DIR]`: a self-contained tour. Makes a small repo with a failing check and
//! runs a work order with a built-in scripted proposer: attempt 1 fails acceptance and is
//! rolled back, attempt 2 passes. Needs nothing but git and this binary.

use crate::error::{Error, Exit, Result};
use crate::roles::se::provider::ProviderSpec;
use crate::run::{self, RunOptions, RunReport};
use crate::ui::Ui;
use crate::workorder::LoadedWorkOrder;
use clap::Args;
use git2::{Repository, Signature, Time};
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to create the demo repo (must not exist or be empty; default: a new temporary folder)
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

const GREETING: &str = "Hello, wrld!\n";

fn proposal(to: &str, summary: &str) -> String {
    let diff = format!(
        "diff --git a/greeting.txt b/greeting.txt\n--- a/greeting.txt\n+++ b/greeting.txt\n@@ -1 +1 @@\n-Hello, wrld!\n+{to}\n"
    );
    json!({"unified_diff": diff, "summary": summary}).to_string()
}

fn make_repo(dir: &Path) -> Result<()> {
    let repo = Repository::init(dir)?;
    std::fs::write(dir.join("greeting.txt"), GREETING)?;
    std::fs::write(
        dir.join("README.md"),
        "# factory demo\n\nA tiny repo whose greeting has a typo. Its check: `git grep` for the right text.\n",
    )?;
    let mut cfg = repo.config()?;
    cfg.set_str("user.name", "git-factory demo")?;
    cfg.set_str("user.email", "demo@git-factory.invalid")?;
    // Global verification for this repo: no whitespace errors in the change.
    cfg.set_str("factory.verify", "git diff --check")?;
    let mut index = repo.index()?;
    index.add_path(Path::new("greeting.txt"))?;
    index.add_path(Path::new("README.md"))?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    // A fixed author and date: the demo's baseline, and so its run id, is the same everywhere.
    let sig = Signature::new(
        "git-factory demo",
        "demo@git-factory.invalid",
        &Time::new(1_700_000_000, 0),
    )?;
    repo.commit(
        Some("HEAD"),
        &sig,
        &sig,
        "demo: a greeting with a typo\n",
        &tree,
        &[],
    )?;
    Ok(())
}

pub fn cmd_demo(ui: &Ui, args: DemoArgs) -> Result<Exit> {
    // Without a folder the demo repo lives in a temporary folder removed at the end (also
    // when the demo fails): nothing is left behind.
    let (dir, scratch) = demo_dir(args.dir.clone())?;
    make_repo(&dir)?;
    ui.info(format!("demo repo: {}", dir.display()));
    let summary = match run::run(demo_options(&dir)?, ui)? {
        RunReport::Finished { summary, .. } | RunReport::Cached { summary } => summary,
        RunReport::DryRun { .. } => return Ok(Exit::Success),
    };
    super::run::report(ui, &summary);
    super::run::final_line(ui, &summary, None);
    tour(ui, &dir, &summary.run_id)?;
    match scratch {
        Some(tmp) => {
            drop(tmp);
            ui.info(
                "\nthe demo repo was temporary and is removed; to keep one and explore it: git factory demo ./factory-demo",
            );
        }
        None => ui.info(format!(
            "\nexplore it: cd {} && git factory show {} --patch",
            dir.display(),
            summary.run_id
        )),
    }
    Ok(run::exit_for(summary.verdict))
}

/// The folder for the demo repo: `wanted`, which must be new or empty, else a temporary
/// folder (returned too, so that dropping it removes the folder).
fn demo_dir(wanted: Option<PathBuf>) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    match wanted {
        Some(d) => {
            if d.exists()
                && std::fs::read_dir(&d)
                    .map(|mut r| r.next().is_some())
                    .unwrap_or(true)
            {
                return Err(
                    Error::new(format!("{} already exists and is not empty", d.display()))
                        .hint("give a new folder: git factory demo ./factory-demo"),
                );
            }
            std::fs::create_dir_all(&d)?;
            Ok((d, None))
        }
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("git-factory-demo-")
                .tempdir()?;
            Ok((tmp.path().to_path_buf(), Some(tmp)))
        }
    }
}

/// The demo's run: its work order, and a scripted proposer whose first proposal fails
/// acceptance and whose second passes.
fn demo_options(dir: &Path) -> Result<RunOptions> {
    let order = LoadedWorkOrder::from_value(
        json!({
            "id": "demo-typo",
            "title": "Fix the typo in greeting.txt",
            "intent": "greeting.txt should say exactly 'Hello, world!'.",
            "allowed_files": ["greeting.txt"],
            "context_files": ["greeting.txt"],
            "acceptance_commands": ["git grep --quiet --extended-regexp '^Hello, world!$' -- greeting.txt"],
        }),
        "demo",
    )?;
    Ok(RunOptions {
        model: Default::default(),
        repo_dir: Some(dir.to_path_buf()),
        work_order: order,
        out: None,
        provider: ProviderSpec::Scripted {
            name: "demo".into(),
            proposals: vec![
                proposal("Hello, World!", "fix the typo"),
                proposal("Hello, world!", "fix the typo, keeping the lowercase w"),
            ],
        },
        temperature: 0.0,
        max_attempts: 2,
        timeout_seconds: 60,
        agent_timeout_seconds: 60,
        strict_apply: false,
        force: false,
        dry_run: false,
        sandbox: false,
        worktree: false,
        pinned_baseline: None,
        commit: false,
        branch: None,
        baseline_check: false,
        candidates: 1,
        jobs: None,
        more_models: Vec::new(),
        max_tokens: None,
        max_cost: None,
        attest: Some(false),
    })
}

/// `log` and `show` of the demo run, printed inline: no pager in the middle of the tour.
fn tour(ui: &Ui, dir: &Path, run_id: &str) -> Result<()> {
    let mut ui = ui.clone();
    ui.no_pager = true;
    let ui = &ui;
    ui.info("\n$ git factory log");
    super::log::cmd_log(
        ui,
        super::log::LogArgs {
            max_count: None,
            verdict: None,
            oneline: false,
            cost: false,
            json: false,
            repo: Some(dir.to_path_buf()),
        },
    )?;
    ui.info(format!("\n$ git factory show {run_id}"));
    super::show::cmd_show(
        ui,
        super::show::ShowArgs {
            run: Some(run_id.to_string()),
            patch: false,
            attempt: None,
            log: None,
            tests: false,
            json: false,
            html: false,
            output: None,
            repo: Some(dir.to_path_buf()),
        },
    )?;
    Ok(())
}
