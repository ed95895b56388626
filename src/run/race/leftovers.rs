//! What a killed race leaves (SPEC §5.1, §7): its candidates' commands, worktrees and
//! scratch files, found by the run's own names and removed by `recover`.

use std::path::Path;

/// After a run was killed (`recover`): stops its candidates' commands and removes their
/// worktrees (with git's records of them) and scratch files. Names are the run's own, so
/// nothing of another run is touched.
pub fn remove_leftovers(repo: &git2::Repository, run_id: &str) {
    let factory_dir = crate::git::factory_dir(repo);
    let ours = |name: &str, prefix: &str| name.starts_with(&format!("{prefix}{run_id}-"));
    for entry in std::fs::read_dir(&factory_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("command.{run_id}.")) && name.ends_with(".pgid") {
            crate::roles::po::exec::stop_noted_group(&entry.path());
        } else if name.starts_with(&format!("index.{run_id}.")) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    for entry in std::fs::read_dir(factory_dir.join("worktrees"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if ours(&name, "cand-") || ours(&name, "agent-") {
            let _ = crate::git::worktree::remove_path(
                repo,
                &entry.path(),
                crate::roles::po::pycache::PyCache::forget_worktree,
            );
        }
    }
}

/// A `--worktree` race takes no lock and writes no journal: this file names the process
/// that runs it, so `recover` can tell a killed race's worktrees from a live one's.
pub(crate) fn owner_file(factory_dir: &Path, run_id: &str) -> std::path::PathBuf {
    factory_dir.join(format!("race.{run_id}.pid"))
}

/// After `--worktree` races were killed: removes the worktrees of every race whose process is
/// gone (a live race is left alone). Returns the run ids cleaned.
pub fn remove_orphaned_races(repo: &git2::Repository) -> Vec<String> {
    let factory_dir = crate::git::factory_dir(repo);
    let mut cleaned = Vec::new();
    for entry in std::fs::read_dir(&factory_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(run_id) = name
            .strip_prefix("race.")
            .and_then(|n| n.strip_suffix(".pid"))
        else {
            continue;
        };
        let alive = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
            .is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok());
        if alive {
            continue;
        }
        remove_leftovers(repo, run_id);
        let own = factory_dir.join("worktrees").join(format!("run-{run_id}"));
        if own.exists() {
            let _ = crate::git::worktree::remove_path(
                repo,
                &own,
                crate::roles::po::pycache::PyCache::forget_worktree,
            );
        }
        let _ = std::fs::remove_file(factory_dir.join(format!("index.{run_id}")));
        let _ = std::fs::remove_dir_all(factory_dir.join("runs").join(run_id));
        let _ = std::fs::remove_file(entry.path());
        cleaned.push(run_id.to_string());
    }
    cleaned.sort();
    cleaned
}
