//! `git factory prune [--older-than D] [--keep N] [--dry-run]`: remove old run records and
//! their note lines (SPEC §4.1); objects are left to `git gc`.

use crate::config::{Config, PRUNE_OLDER_THAN};
use crate::error::{Error, Exit, Result};
use crate::git;
use crate::store::prune::{self, Policy};
use crate::ui::Ui;
use clap::Args;

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Remove runs that started longer ago than AGE: a number and s, m, h, d or w (90d), or
    /// never [default: git config factory.pruneOlderThan, else never]
    #[arg(long, value_name = "AGE")]
    pub older_than: Option<String>,
    /// Keep the newest N runs of each work order, whatever their age
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep: usize,
    /// List what would be removed; remove nothing
    #[arg(long)]
    pub dry_run: bool,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

/// `--older-than`, else `factory.pruneOlderThan`, else never.
fn age(args: &PruneArgs, cfg: &Config) -> Result<Option<std::time::Duration>> {
    let (text, source) = match &args.older_than {
        Some(t) => (t.clone(), "--older-than".to_string()),
        None => match cfg.string(PRUNE_OLDER_THAN) {
            Some(t) => (t, format!("git config {PRUNE_OLDER_THAN}")),
            None => return Ok(None),
        },
    };
    prune::parse_age(&text).ok_or_else(|| {
        Error::new(format!("{source} has an invalid age {text:?}"))
            .hint("give a number and a unit: 90d, 12h, 2w, 30m, 45s (or never)")
    })
}

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        + std::time::Duration::from_secs(crate::env::test_clock_ahead().unwrap_or(0));
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

pub fn cmd_prune(ui: &Ui, args: PruneArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let policy = Policy {
        older_than: age(&args, &Config::of(&repo))?,
        keep: args.keep,
    };
    let Some(_) = policy.older_than else {
        ui.info("nothing to prune: runs never age out here");
        ui.info(format!(
            "hint: give an age (git factory prune --older-than 90d) or set one (git config {PRUNE_OLDER_THAN} 90d)"
        ));
        return Ok(Exit::Success);
    };
    let now = now_ms();
    let mut pruned = prune::select(&repo, policy, now)?;
    if !args.dry_run {
        prune::remove(
            &repo,
            &mut pruned,
            policy,
            crate::roles::po::pycache::PyCache::forget_worktree,
        )?;
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let runs = crate::ui::for_terminal(
        &pruned
            .runs
            .iter()
            .map(|(r, _)| r.clone())
            .collect::<Vec<_>>(),
        &[],
    )
    .ok_or_else(|| Error::new("the pruned runs' records cannot be shown"))?;
    for run in &runs {
        let days = (now - run.order_key()).max(0) / 86_400_000;
        ui.out(format!(
            "{verb} {} {} {} (started {days} day{} ago)\n",
            run.run_id,
            run.verdict,
            run.work_order_id,
            if days == 1 { "" } else { "s" }
        ));
    }
    for path in &pruned.worktrees {
        ui.out(format!("{verb} idle worktree {}\n", path.display()));
    }
    let n = pruned.runs.len();
    let idle = pruned.worktrees.len();
    ui.info(if n == 0 && idle == 0 {
        format!("nothing to prune: {} runs kept", pruned.kept)
    } else if n == 0 {
        format!(
            "{verb} {idle} idle pooled worktree{}; {} runs kept",
            if idle == 1 { "" } else { "s" },
            pruned.kept
        )
    } else {
        format!(
            "{verb} {n} run{} and {} note line{}; {} run{} kept{}",
            if n == 1 { "" } else { "s" },
            pruned.note_lines,
            if pruned.note_lines == 1 { "" } else { "s" },
            pruned.kept,
            if pruned.kept == 1 { "" } else { "s" },
            if args.dry_run {
                ""
            } else {
                " (their objects stay until git gc)"
            }
        )
    });
    Ok(Exit::Success)
}
