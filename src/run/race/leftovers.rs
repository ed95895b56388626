//! What a killed race leaves (SPEC §5.1, §7): its candidates' commands, worktrees and
//! scratch files, found by the run's own names and removed by `recover`.

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
        } else if name.starts_with(&format!("saved-{run_id}.")) {
            // A candidate's saved state (`saved-<run>.<index>`): its worktree goes below.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    // The private folder of its per-test reports.
    let reports = crate::roles::po::report::run_folder_prefix(&factory_dir, run_id);
    let shared = crate::roles::po::report::shared_tmp();
    for entry in std::fs::read_dir(&shared).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&reports) {
            let _ = std::fs::remove_dir_all(entry.path());
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
